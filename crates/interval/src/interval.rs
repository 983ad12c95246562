//! `Interval<T>`: a nonempty closed set of reals `[lo, hi]`, never NaN.

use crate::fp::{self, Fp};
use std::ops::{Add, Mul, Neg, Sub};

/// Why a value cannot be an interval.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum IntervalError {
    #[error("interval bound is NaN")]
    NaN,
    #[error("interval bounds out of order: lo {lo} > hi {hi}")]
    Inverted { lo: f64, hi: f64 },
    #[error("interval [{lo}, {hi}] contains no real number")]
    NoReal { lo: f64, hi: f64 },
    #[error("division by a scalar that is not finite and positive: {0}")]
    BadDivisor(f64),
}

/// A closed interval of reals. Invariants: `lo <= hi`, no NaN, `lo < +inf`,
/// `hi > -inf`. Every operation returns an enclosure of the exact real
/// result, rounded outward.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Interval<T> {
    lo: T,
    hi: T,
}

impl<T: Fp> Interval<T> {
    /// Checked constructor.
    pub fn new(lo: T, hi: T) -> Result<Self, IntervalError> {
        if lo.is_nan() || hi.is_nan() {
            return Err(IntervalError::NaN);
        }
        let (l, h) = (lo.to_f64_exact(), hi.to_f64_exact());
        if lo > hi {
            return Err(IntervalError::Inverted { lo: l, hi: h });
        }
        if lo == T::infinity() || hi == T::neg_infinity() {
            return Err(IntervalError::NoReal { lo: l, hi: h });
        }
        Ok(Self { lo, hi })
    }

    /// The degenerate interval `[x, x]`.
    pub fn point(x: T) -> Result<Self, IntervalError> {
        Self::new(x, x)
    }

    /// Unchecked constructor for hot loops whose inputs already satisfy the
    /// invariants (checked in debug builds).
    #[inline(always)]
    pub fn new_unchecked(lo: T, hi: T) -> Self {
        debug_assert!(Self::new(lo, hi).is_ok(), "bad interval [{lo}, {hi}]");
        Self { lo, hi }
    }

    /// The whole real line.
    pub fn entire() -> Self {
        Self { lo: T::neg_infinity(), hi: T::infinity() }
    }

    pub fn zero() -> Self {
        Self { lo: T::zero(), hi: T::zero() }
    }

    #[inline(always)]
    pub fn lo(self) -> T {
        self.lo
    }

    #[inline(always)]
    pub fn hi(self) -> T {
        self.hi
    }

    /// Interval times interval (also available as `*`).
    #[allow(clippy::should_implement_trait)]
    pub fn mul(self, o: Self) -> Self {
        let (a, b, c, d) = (self.lo, self.hi, o.lo, o.hi);
        let lo = fp::mul_down(a, c).min(fp::mul_down(a, d)).min(fp::mul_down(b, c)).min(fp::mul_down(b, d));
        let hi = fp::mul_up(a, c).max(fp::mul_up(a, d)).max(fp::mul_up(b, c)).max(fp::mul_up(b, d));
        Self { lo, hi }
    }

    /// Interval times a finite scalar.
    #[inline]
    pub fn mul_scalar(self, s: T) -> Self {
        if s >= T::zero() {
            Self { lo: fp::mul_down(self.lo, s), hi: fp::mul_up(self.hi, s) }
        } else {
            Self { lo: fp::mul_down(self.hi, s), hi: fp::mul_up(self.lo, s) }
        }
    }

    /// `self * m + a`.
    pub fn mul_add(self, m: Self, a: Self) -> Self {
        self.mul(m) + a
    }

    /// `self * s + a` for a scalar `s`.
    pub fn mul_scalar_add(self, s: T, a: Self) -> Self {
        self.mul_scalar(s) + a
    }

    /// Division by a finite positive scalar.
    pub fn div_pos(self, s: T) -> Result<Self, IntervalError> {
        if !(s > T::zero() && s.is_finite()) {
            return Err(IntervalError::BadDivisor(s.to_f64_exact()));
        }
        Ok(Self { lo: fp::div_down(self.lo, s), hi: fp::div_up(self.hi, s) })
    }

    /// Pointwise minimum `{min(x, y)}`.
    pub fn min(self, o: Self) -> Self {
        Self { lo: self.lo.min(o.lo), hi: self.hi.min(o.hi) }
    }

    /// Pointwise maximum `{max(x, y)}`.
    pub fn max(self, o: Self) -> Self {
        Self { lo: self.lo.max(o.lo), hi: self.hi.max(o.hi) }
    }

    /// Smallest interval containing both.
    pub fn hull(self, o: Self) -> Self {
        Self { lo: self.lo.min(o.lo), hi: self.hi.max(o.hi) }
    }

    /// Intersection, `None` when disjoint.
    pub fn intersection(self, o: Self) -> Option<Self> {
        let (lo, hi) = (self.lo.max(o.lo), self.hi.min(o.hi));
        (lo <= hi).then_some(Self { lo, hi })
    }

    pub fn contains(self, x: T) -> bool {
        self.lo <= x && x <= self.hi
    }

    pub fn contains_interval(self, o: Self) -> bool {
        self.lo <= o.lo && o.hi <= self.hi
    }

    /// Upper bound on `hi - lo`.
    pub fn width(self) -> T {
        fp::sub_up(self.hi, self.lo)
    }

    /// A finite point inside the interval, near its centre.
    pub fn midpoint(self) -> T {
        let (lo, hi) = (self.lo, self.hi);
        match (lo.is_finite(), hi.is_finite()) {
            (false, false) => T::zero(),
            (false, true) => hi.min(T::zero()),
            (true, false) => lo.max(T::zero()),
            (true, true) => {
                let two = T::one() + T::one();
                let m = lo / two + hi / two; // no overflow
                m.max(lo).min(hi)
            }
        }
    }

    /// Upper bound `r` such that `[m - r, m + r]` contains the interval, with
    /// `m = self.midpoint()`.
    pub fn radius(self) -> T {
        let m = self.midpoint();
        fp::sub_up(self.hi, m).max(fp::sub_up(m, self.lo))
    }

    /// Largest magnitude `max(|lo|, |hi|)`.
    #[inline(always)]
    pub fn mag(self) -> T {
        self.lo.abs().max(self.hi.abs())
    }

    /// The real ReLU image `[max(lo,0), max(hi,0)]`.
    pub fn relu(self) -> Self {
        Self { lo: self.lo.max(T::zero()), hi: self.hi.max(T::zero()) }
    }
}

impl Interval<f64> {
    /// Outward conversion to f32.
    pub fn to_f32_outward(self) -> Interval<f32> {
        Interval { lo: fp::from_f64_down(self.lo), hi: fp::from_f64_up(self.hi) }
    }
}

impl Interval<f32> {
    /// Exact conversion to f64.
    pub fn to_f64(self) -> Interval<f64> {
        Interval { lo: self.lo as f64, hi: self.hi as f64 }
    }
}

impl<T: Fp> Add for Interval<T> {
    type Output = Self;
    #[inline]
    fn add(self, o: Self) -> Self {
        Self { lo: fp::add_down(self.lo, o.lo), hi: fp::add_up(self.hi, o.hi) }
    }
}

impl<T: Fp> Sub for Interval<T> {
    type Output = Self;
    #[inline]
    fn sub(self, o: Self) -> Self {
        Self { lo: fp::sub_down(self.lo, o.hi), hi: fp::sub_up(self.hi, o.lo) }
    }
}

impl<T: Fp> Mul for Interval<T> {
    type Output = Self;
    #[inline]
    fn mul(self, o: Self) -> Self {
        Interval::mul(self, o)
    }
}

impl<T: Fp> Neg for Interval<T> {
    type Output = Self;
    #[inline]
    fn neg(self) -> Self {
        Self { lo: -self.hi, hi: -self.lo }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(lo: f64, hi: f64) -> Interval<f64> {
        Interval::new(lo, hi).unwrap()
    }

    #[test]
    fn constructor_rejects_nan_inverted_and_empty() {
        assert_eq!(Interval::new(f32::NAN, 1.0), Err(IntervalError::NaN));
        assert!(matches!(Interval::new(2.0f32, 1.0), Err(IntervalError::Inverted { .. })));
        assert!(Interval::new(f64::INFINITY, f64::INFINITY).is_err());
        assert!(Interval::new(f64::NEG_INFINITY, f64::INFINITY).is_ok());
    }

    #[test]
    fn arithmetic_hand_values() {
        let a = iv(-1.0, 2.0);
        let b = iv(3.0, 4.0);
        assert_eq!(a + b, iv(2.0, 6.0));
        assert_eq!(a - b, iv(-5.0, -1.0));
        assert_eq!(a.mul(b), iv(-4.0, 8.0));
        assert_eq!(a.mul_scalar(-2.0), iv(-4.0, 2.0));
        assert_eq!(-a, iv(-2.0, 1.0));
        assert_eq!(b.div_pos(2.0).unwrap(), iv(1.5, 2.0));
        assert!(a.div_pos(0.0).is_err());
        assert_eq!(a.mul_add(b, iv(1.0, 1.0)), iv(-3.0, 9.0));
        assert_eq!(a.hull(b), iv(-1.0, 4.0));
        assert_eq!(a.intersection(b), None);
        assert_eq!(a.intersection(iv(1.0, 5.0)), Some(iv(1.0, 2.0)));
        assert_eq!(a.min(b), a);
        assert_eq!(a.max(iv(0.0, 1.0)), iv(0.0, 2.0));
        assert_eq!(a.width(), 3.0);
        assert_eq!(a.midpoint(), 0.5);
        assert_eq!(a.radius(), 1.5);
        assert_eq!(a.relu(), iv(0.0, 2.0));
    }

    #[test]
    fn inexact_results_are_widened() {
        let t = iv(0.1, 0.1) + iv(0.2, 0.2);
        assert!(t.lo() < t.hi());
        let th = iv(1.0, 1.0).div_pos(3.0).unwrap();
        assert_eq!(th.lo().next_up(), th.hi());
    }

    #[test]
    fn infinities() {
        let e = Interval::<f32>::entire();
        assert_eq!(e.mul(Interval::zero()), Interval::zero());
        let a = Interval::new(1.0f32, f32::INFINITY).unwrap();
        assert_eq!(a.mul_scalar(-1.0).lo(), f32::NEG_INFINITY);
        assert_eq!((a + a).hi(), f32::INFINITY);
        assert!(a.midpoint().is_finite() && a.contains(a.midpoint()));
        assert!(e.midpoint() == 0.0 && e.radius() == f32::INFINITY);
    }

    #[test]
    fn f64_to_f32_is_outward() {
        let i = iv(0.1, 0.3).to_f32_outward();
        assert!((i.lo() as f64) <= 0.1 && (i.hi() as f64) >= 0.3);
    }
}
