//! The exact-arithmetic soundness suite, one test binary (the modules share
//! `common` and the analysis' instantiations, which are compiled once).
//! Filter by module: `cargo test -p polycert-soundness -- network_enclosure::`.

mod common;

mod backend_kernels;
mod dot;
mod elementwise;
mod fp_dot;
mod hunt;
mod interval_ops;
mod negative_control;
mod network_enclosure;
mod network_eval;
mod point_kernels;
mod power;
mod rounding;
mod scurve;
