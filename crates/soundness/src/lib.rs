//! Test-only crate: proptest suites that prove, with `rug` exact rationals,
//! that every interval operation and whole analyses enclose the exact
//! results. The tests live in `tests/`.
