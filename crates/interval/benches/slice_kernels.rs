//! Criterion benchmarks of the slice kernels (placeholder replaced below).
fn main() {}
