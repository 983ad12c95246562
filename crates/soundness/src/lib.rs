//! Test-only crate: proptest suites that prove, with `rug` exact rationals,
//! that every interval operation and whole analyses enclose the exact
//! results. The tests live in `tests/`.
//! `hunt`: the adversarial soundness hunt (`cargo xtask soundness-hunt`).

pub mod hunt;
