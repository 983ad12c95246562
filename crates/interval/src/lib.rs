//! Sound interval arithmetic for f32 and f64.
//!
//! Every operation returns an enclosure of the exact real result. Directed
//! rounding is obtained without touching the FPU rounding mode: results are
//! computed in round-to-nearest and pushed outward with `next_up`/`next_down`
//! or decided exactly by error-free transformations (TwoSum, FMA TwoProd).
//! Long sums use an a-priori error bound instead (see [`dot`]), which also
//! gives [`fp_dot_enclosure`]: the set of values a float network can compute
//! for a neuron in any summation order.

pub mod dot;
pub mod fp;
pub mod interval;
pub mod kernels;

pub use dot::{DotAcc, ErrorBound, FloatModel, Widening, dot, dot_scalar, fp_dot_enclosure};
pub use fp::Fp;
pub use interval::{Interval, IntervalError};
