//! The float types an analysis can run in, and directed rounding built from
//! round-to-nearest plus error-free transformations.
//!
//! Nothing here changes the FPU rounding mode: every function assumes the
//! default round-to-nearest-even and derives the directed result from the
//! exact error of the rounded operation (TwoSum, FMA-based TwoProd) or, where
//! that error may not be representable (near underflow), by stepping one ulp
//! outward unconditionally.

use num_traits::Float;
use std::fmt::{Debug, Display};

/// A binary IEEE float usable as an interval endpoint (f32 or f64).
pub trait Fp: Float + Debug + Display + Default + Send + Sync + 'static + std::iter::Sum {
    /// Unit roundoff u = 2^-p of round-to-nearest.
    const UNIT_ROUNDOFF: f64;
    /// Smallest positive subnormal.
    const MIN_SUBNORMAL: Self;
    /// Below this magnitude, a rounding error may itself be inexact: step
    /// outward unconditionally instead of trusting the error-free transform.
    const EFT_SAFE_MIN: Self;
    /// Name for messages ("f32"/"f64").
    const NAME: &'static str;

    fn next_up_(self) -> Self;
    fn next_down_(self) -> Self;
    /// Exact conversion to f64 (both types embed exactly into f64).
    fn to_f64_exact(self) -> f64;
    /// Conversion from f64 rounded to nearest.
    fn from_f64_nearest(x: f64) -> Self;
    /// Fused multiply-add `self * a + b` with one rounding.
    fn fma_(self, a: Self, b: Self) -> Self;
}

impl Fp for f32 {
    const UNIT_ROUNDOFF: f64 = 5.960464477539063e-8; // 2^-24
    const MIN_SUBNORMAL: f32 = f32::from_bits(1);
    const EFT_SAFE_MIN: f32 = 1.0e-29; // > 2^-126 * 2^24 * 4
    const NAME: &'static str = "f32";
    #[inline(always)]
    fn next_up_(self) -> Self {
        self.next_up()
    }
    #[inline(always)]
    fn next_down_(self) -> Self {
        self.next_down()
    }
    #[inline(always)]
    fn to_f64_exact(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn from_f64_nearest(x: f64) -> Self {
        x as f32
    }
    #[inline(always)]
    fn fma_(self, a: Self, b: Self) -> Self {
        self.mul_add(a, b)
    }
}

impl Fp for f64 {
    const UNIT_ROUNDOFF: f64 = 1.1102230246251565e-16; // 2^-53
    const MIN_SUBNORMAL: f64 = f64::from_bits(1);
    const EFT_SAFE_MIN: f64 = 1.0e-290; // > 2^-1022 * 2^53 * 4
    const NAME: &'static str = "f64";
    #[inline(always)]
    fn next_up_(self) -> Self {
        self.next_up()
    }
    #[inline(always)]
    fn next_down_(self) -> Self {
        self.next_down()
    }
    #[inline(always)]
    fn to_f64_exact(self) -> f64 {
        self
    }
    #[inline(always)]
    fn from_f64_nearest(x: f64) -> Self {
        x
    }
    #[inline(always)]
    fn fma_(self, a: Self, b: Self) -> Self {
        self.mul_add(a, b)
    }
}

/// Error of `s = fl(a + b)` (finite `s`), exactly, by Fast2Sum on the
/// operands ordered by magnitude.
///
/// Plain TwoSum is not used: its intermediate `s - a` can overflow even
/// though `s` is finite (e.g. f32 `a = -1.5·ulp(MAX)`, `b = MAX`: `s` ties
/// to `MAX - ulp`, then `s - a = MAX + ulp/2` ties to `inf`), making the
/// error NaN and the directed result wrong. Fast2Sum's `s - x` with
/// `|x| >= |y|` is exact, hence never overflows when `s` is finite.
#[inline(always)]
fn two_sum_err<T: Fp>(a: T, b: T, s: T) -> T {
    let (x, y) = if a.abs() >= b.abs() { (a, b) } else { (b, a) };
    y - (s - x)
}

/// `a + b` rounded toward -inf. Inputs must not be NaN nor `inf + -inf`.
#[inline]
pub fn add_down<T: Fp>(a: T, b: T) -> T {
    let s = a + b;
    if s.is_finite() {
        if two_sum_err(a, b, s) < T::zero() { s.next_down_() } else { s }
    } else if s == T::infinity() && a.is_finite() && b.is_finite() {
        T::max_value() // overflow: the exact sum is finite
    } else {
        s
    }
}

/// `a + b` rounded toward +inf.
#[inline]
pub fn add_up<T: Fp>(a: T, b: T) -> T {
    -add_down(-a, -b)
}

/// `a - b` rounded toward -inf.
#[inline]
pub fn sub_down<T: Fp>(a: T, b: T) -> T {
    add_down(a, -b)
}

/// `a - b` rounded toward +inf.
#[inline]
pub fn sub_up<T: Fp>(a: T, b: T) -> T {
    add_up(a, -b)
}

/// `a * b` rounded toward -inf, with the interval convention `0 * inf = 0`.
#[inline]
pub fn mul_down<T: Fp>(a: T, b: T) -> T {
    if a == T::zero() || b == T::zero() {
        return T::zero();
    }
    let p = a * b;
    if !p.is_finite() {
        // Overflow of finite operands: the exact product is finite.
        return if p > T::zero() && a.is_finite() && b.is_finite() { T::max_value() } else { p };
    }
    if p.abs() < T::EFT_SAFE_MIN {
        // The error may be inexact here: step outward, keeping the known sign.
        let positive = (a > T::zero()) == (b > T::zero());
        return if positive { p.next_down_().max(T::zero()) } else { p.next_down_() };
    }
    if a.fma_(b, -p) < T::zero() { p.next_down_() } else { p }
}

/// `a * b` rounded toward +inf.
#[inline]
pub fn mul_up<T: Fp>(a: T, b: T) -> T {
    -mul_down(-a, b)
}

/// `a / b` rounded toward -inf, for `b` finite and nonzero.
#[inline]
pub fn div_down<T: Fp>(a: T, b: T) -> T {
    let q = a / b;
    if !q.is_finite() {
        return if q > T::zero() && a.is_finite() { T::max_value() } else { q };
    }
    if q == T::zero() && a == T::zero() {
        return q;
    }
    if q.abs() < T::EFT_SAFE_MIN || a.abs() < T::EFT_SAFE_MIN {
        let positive = (a > T::zero()) == (b > T::zero());
        return if positive { q.next_down_().max(T::zero()) } else { q.next_down_() };
    }
    // r = a - q*b exactly; the exact quotient is below q when r/b < 0.
    let r = (-q).fma_(b, a);
    let below = if b > T::zero() { r < T::zero() } else { r > T::zero() };
    if below { q.next_down_() } else { q }
}

/// `a / b` rounded toward +inf, for `b` finite and nonzero.
#[inline]
pub fn div_up<T: Fp>(a: T, b: T) -> T {
    -div_down(-a, b)
}

/// Round an f64 toward -inf into `T`.
#[inline]
pub fn from_f64_down<T: Fp>(x: f64) -> T {
    let y = T::from_f64_nearest(x);
    if y.to_f64_exact() > x { y.next_down_() } else { y }
}

/// Round an f64 toward +inf into `T`.
#[inline]
pub fn from_f64_up<T: Fp>(x: f64) -> T {
    let y = T::from_f64_nearest(x);
    if y.to_f64_exact() < x { y.next_up_() } else { y }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_directed_brackets_inexact_sum() {
        let (a, b) = (1.0f32, 1e-8f32);
        assert_eq!(add_down(a, b), 1.0);
        assert_eq!(add_up(a, b), 1.0f32.next_up());
        assert_eq!(add_up(1.0f32, 1.0), 2.0);
        assert_eq!(add_down(1.0f32, 1.0), 2.0);
    }

    #[test]
    fn add_near_overflow_tie_is_directed() {
        // TwoSum's `s - a` overflowed here (found by polycert-soundness).
        let u = f32::MAX - f32::MAX.next_down(); // ulp(MAX) = 2^104
        let a = -1.5 * u;
        assert_eq!(add_down(a, f32::MAX), f32::MAX.next_down().next_down());
        assert_eq!(add_up(a, f32::MAX), f32::MAX.next_down());
        assert_eq!(add_up(-f32::MAX, -a), -f32::MAX.next_down().next_down());
    }

    #[test]
    fn add_overflow_stays_finite_on_the_inner_side() {
        assert_eq!(add_down(f32::MAX, f32::MAX), f32::MAX);
        assert_eq!(add_up(f32::MAX, f32::MAX), f32::INFINITY);
        assert_eq!(add_up(-f32::MAX, -f32::MAX), -f32::MAX);
    }

    #[test]
    fn mul_directed_and_zero_times_inf() {
        let third = 1.0f64 / 3.0;
        assert!(mul_down(third, 3.0) < 1.0 || mul_down(third, 3.0) == 1.0);
        assert!(mul_up(third, 3.0) >= 1.0);
        assert_eq!(mul_down(0.0f32, f32::INFINITY), 0.0);
        assert_eq!(mul_up(2.0f32, 3.0), 6.0);
        // Underflow to zero rounds outward to the smallest subnormal.
        assert_eq!(mul_up(1e-30f32, 1e-30), f32::MIN_SUBNORMAL);
        assert_eq!(mul_down(1e-30f32, 1e-30), 0.0);
        assert_eq!(mul_down(-1e-30f32, 1e-30), -f32::MIN_SUBNORMAL);
    }

    #[test]
    fn div_directed() {
        assert_eq!(div_down(1.0f32, 3.0).next_up(), div_up(1.0f32, 3.0));
        assert_eq!(div_down(6.0f32, 3.0), 2.0);
        assert_eq!(div_up(6.0f32, 3.0), 2.0);
        assert_eq!(div_up(-1.0f64, 3.0), -1.0 / 3.0);
    }

    #[test]
    fn f64_to_f32_outward() {
        let x = 0.1f64;
        let (d, u): (f32, f32) = (from_f64_down(x), from_f64_up(x));
        assert!((d as f64) < x && (u as f64) > x && d.next_up() == u);
        assert_eq!(from_f64_up::<f32>(1e300), f32::INFINITY);
        assert_eq!(from_f64_down::<f32>(1e300), f32::MAX);
    }
}
