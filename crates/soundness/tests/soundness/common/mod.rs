//! Shared helpers for the exact-arithmetic soundness suites.
//!
//! * [`exact`]: extended reals over `rug::Rational` and exact directed
//!   rounding of a rational into `f32`/`f64`;
//! * [`strategies`]: float and interval strategies that mix uniform bit
//!   patterns with the special classes (subnormals, near-overflow values,
//!   values with few mantissa bits, ties, cancellation, ±0, ±inf);
//! * [`checks`]: the enclosure checks themselves, written against plain
//!   `(lo, hi)` results so that the negative control can feed them the output
//!   of a deliberately unsound implementation;
//! * [`kernels`]: data, geometries and the exact conv scatter for the backend
//!   kernel suites.
#![allow(dead_code, unused_imports)]

pub mod checks;
pub mod exact;
pub mod kernels;
pub mod strategies;

pub use checks::*;
pub use exact::*;
pub use strategies::*;

use proptest::test_runner::Config as ProptestConfig;

/// Default number of cases per property when `PROPTEST_CASES` is not set
/// (fast local runs; CI sets `PROPTEST_CASES=100000`).
pub const FAST_CASES: u32 = 2000;

/// Cases per property: `PROPTEST_CASES` if set, else [`FAST_CASES`].
pub fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(FAST_CASES)
}

/// The configuration every property of the suite runs with.
pub fn config() -> ProptestConfig {
    ProptestConfig { cases: cases(), ..ProptestConfig::default() }
}

/// A small deterministic generator (SplitMix64) for choices made inside a
/// property from a proptest-provided seed (sample points, permutations).
#[derive(Debug, Clone)]
pub struct SplitMix(polycert_deeppoly::base::rng::SplitMix);

impl SplitMix {
    pub fn new(seed: u64) -> Self {
        SplitMix(polycert_deeppoly::base::rng::SplitMix(seed ^ 0x9E37_79B9_7F4A_7C15))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (`n > 0`; the modulo bias is irrelevant here).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    pub fn range_i32(&mut self, lo: i32, hi: i32) -> i32 {
        lo + self.below((hi - lo + 1) as u64) as i32
    }

    pub fn coin(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }

    pub fn shuffle<X>(&mut self, v: &mut [X]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}
