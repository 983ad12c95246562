//! Exact arithmetic: extended reals over `rug::Rational`, exact conversions
//! and exact directed rounding of rationals into `f32`/`f64`.

use super::SplitMix;
use polycert_interval::{Fp, Interval};
use rug::Rational;
use std::cmp::Ordering;

/// An extended real: `-inf`, a rational, or `+inf`. The derived order is the
/// order of the extended real line (variants are declared in that order).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ext {
    NegInf,
    Fin(Rational),
    PosInf,
}

/// The exact value of a finite float.
pub fn rat<T: Fp>(x: T) -> Rational {
    Rational::from_f64(x.to_f64_exact()).unwrap_or_else(|| panic!("rat: not finite: {x}"))
}

impl Ext {
    pub fn zero() -> Ext {
        Ext::Fin(Rational::new())
    }

    /// The exact value of a float (`±inf` map to the infinities; NaN panics).
    pub fn of<T: Fp>(x: T) -> Ext {
        let f = x.to_f64_exact();
        if f.is_nan() {
            panic!("Ext::of(NaN)");
        } else if f == f64::INFINITY {
            Ext::PosInf
        } else if f == f64::NEG_INFINITY {
            Ext::NegInf
        } else {
            Ext::Fin(Rational::from_f64(f).unwrap())
        }
    }

    pub fn is_finite(&self) -> bool {
        matches!(self, Ext::Fin(_))
    }

    pub fn fin(&self) -> Option<&Rational> {
        match self {
            Ext::Fin(q) => Some(q),
            _ => None,
        }
    }

    pub fn signum(&self) -> Ordering {
        match self {
            Ext::NegInf => Ordering::Less,
            Ext::PosInf => Ordering::Greater,
            Ext::Fin(q) => q.cmp0(),
        }
    }

    pub fn is_zero(&self) -> bool {
        self.signum() == Ordering::Equal
    }

    pub fn neg(&self) -> Ext {
        match self {
            Ext::NegInf => Ext::PosInf,
            Ext::PosInf => Ext::NegInf,
            Ext::Fin(q) => Ext::Fin(Rational::from(-q)),
        }
    }

    /// `self + o`; `None` for the undefined `inf + -inf`.
    pub fn add(&self, o: &Ext) -> Option<Ext> {
        match (self, o) {
            (Ext::Fin(a), Ext::Fin(b)) => Some(Ext::Fin(Rational::from(a + b))),
            (Ext::PosInf, Ext::NegInf) | (Ext::NegInf, Ext::PosInf) => None,
            (Ext::PosInf, _) | (_, Ext::PosInf) => Some(Ext::PosInf),
            _ => Some(Ext::NegInf),
        }
    }

    pub fn sub(&self, o: &Ext) -> Option<Ext> {
        self.add(&o.neg())
    }

    /// `self * o` with the interval convention `0 * inf = 0`.
    pub fn mul(&self, o: &Ext) -> Ext {
        if self.is_zero() || o.is_zero() {
            return Ext::zero();
        }
        match (self, o) {
            (Ext::Fin(a), Ext::Fin(b)) => Ext::Fin(Rational::from(a * b)),
            _ => {
                if self.signum() == o.signum() {
                    Ext::PosInf
                } else {
                    Ext::NegInf
                }
            }
        }
    }

    /// `self / d` for a nonzero rational `d`.
    pub fn div(&self, d: &Rational) -> Ext {
        assert!(d.cmp0() != Ordering::Equal);
        match self {
            Ext::Fin(a) => Ext::Fin(Rational::from(a / d)),
            inf => {
                if d.cmp0() == Ordering::Less {
                    inf.neg()
                } else {
                    inf.clone()
                }
            }
        }
    }

    /// Sum of a sequence; `None` if it mixes `+inf` and `-inf`.
    pub fn sum<'a>(it: impl IntoIterator<Item = &'a Ext>) -> Option<Ext> {
        let mut acc = Rational::new();
        let (mut pos, mut neg) = (false, false);
        for e in it {
            match e {
                Ext::Fin(q) => acc += q,
                Ext::PosInf => pos = true,
                Ext::NegInf => neg = true,
            }
        }
        match (pos, neg) {
            (true, true) => None,
            (true, false) => Some(Ext::PosInf),
            (false, true) => Some(Ext::NegInf),
            (false, false) => Some(Ext::Fin(acc)),
        }
    }
}

/// Largest `T` that is `<= q` (IEEE round toward -inf, so `-inf` below
/// `-MAX`), including subnormals.
pub fn rd_rat<T: Fp>(q: &Rational) -> T {
    let f = q.to_f64(); // truncated: within one f64 ulp of q
    let f = if f.is_finite() {
        f
    } else if f > 0.0 {
        f64::MAX
    } else {
        -f64::MAX
    };
    let mut c = T::from_f64_nearest(f);
    if c.is_infinite() {
        c = if c > T::zero() { T::max_value() } else { -T::max_value() };
    }
    while rat(c) > *q {
        c = c.next_down_();
        if c.is_infinite() {
            return c;
        }
    }
    loop {
        let n = c.next_up_();
        if n.is_infinite() || rat(n) > *q {
            return c;
        }
        c = n;
    }
}

/// Smallest `T` that is `>= q`.
pub fn ru_rat<T: Fp>(q: &Rational) -> T {
    -rd_rat::<T>(&Rational::from(-q))
}

pub fn rd<T: Fp>(q: &Ext) -> T {
    match q {
        Ext::NegInf => T::neg_infinity(),
        Ext::PosInf => T::infinity(),
        Ext::Fin(r) => rd_rat(r),
    }
}

pub fn ru<T: Fp>(q: &Ext) -> T {
    match q {
        Ext::NegInf => T::neg_infinity(),
        Ext::PosInf => T::infinity(),
        Ext::Fin(r) => ru_rat(r),
    }
}

/// `T` nearest to `q` (ties: either neighbour), clamped to the finite range.
pub fn near_rat<T: Fp>(q: &Rational) -> T {
    let d: T = rd_rat(q);
    let u: T = ru_rat(q);
    let pick = if !d.is_finite() {
        u
    } else if !u.is_finite() {
        d
    } else {
        let (dd, du) = (q - rat(d), rat(u) - q);
        if dd <= du { d } else { u }
    };
    if pick.is_finite() {
        pick
    } else if pick > T::zero() {
        T::max_value()
    } else {
        -T::max_value()
    }
}

/// Exact endpoints of a float interval.
pub fn ext_bounds<T: Fp>(lo: T, hi: T) -> (Ext, Ext) {
    (Ext::of(lo), Ext::of(hi))
}

/// Is the extended real `p` inside the float interval `[lo, hi]`?
pub fn inside(bounds: &(Ext, Ext), p: &Ext) -> bool {
    bounds.0 <= *p && *p <= bounds.1
}

/// A random rational in `[0, 1]` with a random (mostly non-dyadic)
/// denominator, so that exact results are usually not representable.
pub fn unit_rational(rng: &mut SplitMix) -> Rational {
    let d = 1 + rng.below(1 << 24);
    let k = rng.below(d + 1);
    Rational::from((k, d))
}

/// `2^e` as a rational.
pub fn pow2_rat(e: i32) -> Rational {
    let one = Rational::from(1);
    if e >= 0 { one << e as u32 } else { one >> (-e) as u32 }
}

/// Sample points of an interval as extended reals: both endpoints (an
/// infinite endpoint is the point at infinity), a huge finite stand-in for
/// every infinite endpoint, and `interior` random rational points.
pub fn points<T: Fp>(iv: Interval<T>, rng: &mut SplitMix, interior: usize) -> Vec<Ext> {
    let (lo, hi) = ext_bounds(iv.lo(), iv.hi());
    let mut v = vec![lo.clone(), hi.clone()];
    let far = |rng: &mut SplitMix| -> Rational {
        // 2^j·(1 + t), j up to 2200: far outside the range of f64.
        let j = rng.range_i32(0, 2200);
        pow2_rat(j) * (Rational::from(1) + unit_rational(rng))
    };
    for _ in 0..(interior + 1) {
        let p = match (&lo, &hi) {
            (Ext::Fin(a), Ext::Fin(b)) => {
                let t = unit_rational(rng);
                a + Rational::from(b - a) * t
            }
            (Ext::NegInf, Ext::Fin(b)) => b - far(rng),
            (Ext::Fin(a), Ext::PosInf) => a + far(rng),
            _ => {
                let x = far(rng) >> 1100u32;
                if rng.coin() { x } else { -x }
            }
        };
        v.push(Ext::Fin(p));
    }
    // The first extra point is only needed as an infinite stand-in.
    if lo.is_finite() && hi.is_finite() {
        v.swap_remove(2);
    }
    v
}

/// A float inside `iv` (for evaluating float programs at points of an
/// interval): an endpoint or a rounded rational interior point.
pub fn float_point<T: Fp>(iv: Interval<T>, rng: &mut SplitMix) -> T {
    let (lo, hi) = (iv.lo(), iv.hi());
    let c = rng.below(5);
    if c == 0 && lo.is_finite() {
        return lo;
    }
    if c == 1 && hi.is_finite() {
        return hi;
    }
    let ps = points(iv, rng, 1);
    let p = ps.last().unwrap().fin().unwrap().clone();
    let x: T = near_rat(&p);
    // Clamp into the interval (rounding may step just outside).
    let x = if x < lo {
        lo
    } else if x > hi {
        hi
    } else {
        x
    };
    if x.is_finite() {
        x
    } else if x > T::zero() {
        T::max_value()
    } else {
        -T::max_value()
    }
}

/// `x = m · 2^e` exactly, for a finite `x` (via its exact f64 value).
pub fn decompose<T: Fp>(x: T) -> (i64, i32) {
    let b = x.to_f64_exact().to_bits();
    let (ef, mant) = (((b >> 52) & 0x7ff) as i32, (b & ((1u64 << 52) - 1)) as i64);
    assert!(ef != 0x7ff, "decompose: not finite");
    let (m, e) = if ef == 0 { (mant, -1074) } else { (mant | (1i64 << 52), ef - 1075) };
    (if b >> 63 == 1 { -m } else { m }, e)
}

/// Fractional bits of the dyadic accumulator: products of two f64 reach
/// `2^-2148`, and convex weights add [`WEIGHT_BITS`] more.
const ACC_SHIFT: i32 = 2148 + WEIGHT_BITS as i32;

/// Convex-combination weights are `k / 2^WEIGHT_BITS`.
pub const WEIGHT_BITS: u32 = 24;

/// Exact sum of products of floats (and of `±inf` terms), kept as one big
/// integer scaled by `2^-ACC_SHIFT`: exact like `Rational` but without gcd
/// normalisation, so long dot products stay cheap to check.
#[derive(Debug, Clone, Default)]
pub struct ExactSum {
    acc: rug::Integer,
    tmp: rug::Integer,
    pos_inf: bool,
    neg_inf: bool,
}

impl ExactSum {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `a · b · k / 2^WEIGHT_BITS` for finite floats `a`, `b`.
    pub fn add_prod_weighted<T: Fp>(&mut self, a: T, b: T, k: u64) {
        if k == 0 || a == T::zero() || b == T::zero() {
            return;
        }
        let ((ma, ea), (mb, eb)) = (decompose(a), decompose(b));
        self.tmp.assign(ma as i128 * mb as i128);
        self.tmp *= k;
        self.tmp <<= (ea + eb + ACC_SHIFT - WEIGHT_BITS as i32) as u32;
        self.acc += &self.tmp;
    }

    /// Adds `a · b` with the interval convention `0 · inf = 0`.
    pub fn add_prod<T: Fp>(&mut self, a: T, b: T) {
        if a == T::zero() || b == T::zero() {
            return;
        }
        if a.is_infinite() || b.is_infinite() {
            if (a > T::zero()) == (b > T::zero()) {
                self.pos_inf = true;
            } else {
                self.neg_inf = true;
            }
            return;
        }
        self.add_prod_weighted(a, b, 1u64 << WEIGHT_BITS);
    }

    /// Adds a float (possibly infinite).
    pub fn add<T: Fp>(&mut self, a: T) {
        self.add_prod(a, T::one());
    }

    /// The exact sum; `None` if it mixes `+inf` and `-inf`.
    pub fn value(&self) -> Option<Ext> {
        match (self.pos_inf, self.neg_inf) {
            (true, true) => None,
            (true, false) => Some(Ext::PosInf),
            (false, true) => Some(Ext::NegInf),
            _ => Some(Ext::Fin(Rational::from(&self.acc) >> ACC_SHIFT as u32)),
        }
    }
}

use rug::Assign;
