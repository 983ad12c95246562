//! Strategies for floats and intervals that hit the hard cases of directed
//! rounding: subnormals, values next to overflow and to the normal/subnormal
//! boundary, values with few mantissa bits (so that sums and products hit
//! exact ties), catastrophic cancellation (`x` with `-x + tiny`), mixed
//! signs, zero-width intervals, `±0.0` and infinities.

use super::SplitMix;
use polycert_interval::{Fp, Interval};
use proptest::prelude::*;

/// Bit-level access to the float types under test.
pub trait TF: Fp {
    /// Stored mantissa bits (23 / 52).
    const MANT: u32;
    /// Exponent field width (8 / 11).
    const EXPW: u32;
    /// Exponent of the smallest subnormal (-149 / -1074).
    const EMIN_SUB: i32;
    /// Exponent of the largest binade (127 / 1023).
    const EMAX: i32;
    fn from_bits64(b: u64) -> Self;
    fn to_bits64(self) -> u64;
}

impl TF for f32 {
    const MANT: u32 = 23;
    const EXPW: u32 = 8;
    const EMIN_SUB: i32 = -149;
    const EMAX: i32 = 127;
    fn from_bits64(b: u64) -> Self {
        f32::from_bits(b as u32)
    }
    fn to_bits64(self) -> u64 {
        self.to_bits() as u64
    }
}

impl TF for f64 {
    const MANT: u32 = 52;
    const EXPW: u32 = 11;
    const EMIN_SUB: i32 = -1074;
    const EMAX: i32 = 1023;
    fn from_bits64(b: u64) -> Self {
        f64::from_bits(b)
    }
    fn to_bits64(self) -> u64 {
        self.to_bits()
    }
}

fn sign_bit<T: TF>() -> u64 {
    1u64 << (T::MANT + T::EXPW)
}

fn mant_mask<T: TF>() -> u64 {
    (1u64 << T::MANT) - 1
}

fn bias<T: TF>() -> i32 {
    (1 << (T::EXPW - 1)) - 1
}

/// Assemble a float from sign, biased exponent field and mantissa bits.
pub fn assemble<T: TF>(neg: bool, exp_field: u64, mant: u64) -> T {
    let s = if neg { sign_bit::<T>() } else { 0 };
    T::from_bits64(s | (exp_field << T::MANT) | (mant & mant_mask::<T>()))
}

/// `2^e` exactly, for `EMIN_SUB <= e <= EMAX`.
pub fn pow2<T: TF>(e: i32) -> T {
    assert!((T::EMIN_SUB..=T::EMAX).contains(&e));
    let min_normal_exp = 1 - bias::<T>();
    if e >= min_normal_exp {
        assemble(false, (e + bias::<T>()) as u64, 0)
    } else {
        assemble(false, 0, 1u64 << (e - T::EMIN_SUB))
    }
}

/// Step `k` ulps up (or down), stopping at the infinities.
pub fn step<T: TF>(x: T, k: u32, up: bool) -> T {
    let mut y = x;
    for _ in 0..k {
        if y.is_infinite() {
            break;
        }
        y = if up { y.next_up_() } else { y.next_down_() };
    }
    y
}

/// Half an ulp of `|x|` (exact unless the ulp is the smallest subnormal).
pub fn half_ulp<T: TF>(x: T) -> T {
    let a = x.abs();
    let ulp = if a == T::max_value() { a - a.next_down_() } else { a.next_up_() - a };
    ulp / (T::one() + T::one())
}

/// A uniformly random finite bit pattern (an all-ones exponent is folded
/// back into the finite range).
pub fn uniform_finite<T: TF>(bits: u64) -> T {
    let all = (1u64 << T::EXPW) - 1;
    let neg = bits >> 63 == 1;
    let e = (bits >> T::MANT) & all;
    let e = if e == all { bits % all } else { e };
    assemble(neg, e, bits)
}

/// Finite floats of every class; with `allow_inf`, also `±inf`.
pub fn float<T: TF>(allow_inf: bool) -> BoxedStrategy<T> {
    let emax = T::EMAX;
    let emin = T::EMIN_SUB;
    let finite = prop_oneof![
        // Uniform bit patterns over the whole finite range.
        4 => any::<u64>().prop_map(uniform_finite::<T>),
        // Subnormals (including the smallest ones).
        2 => (any::<bool>(), any::<u64>(), 0u32..4).prop_map(|(s, m, small)| {
            let m = if small == 0 { 1 + (m & 7) } else { m & mant_mask::<T>() };
            assemble::<T>(s, 0, m.max(1))
        }),
        // Near overflow.
        1 => (any::<bool>(), 0u32..8).prop_map(|(s, k)| {
            let x = step(T::max_value(), k, false);
            if s { -x } else { x }
        }),
        // Near the smallest normal, on both sides.
        1 => (any::<bool>(), 0u32..8, any::<bool>()).prop_map(|(s, k, up)| {
            let x = step(T::min_positive_value(), k, up);
            if s { -x } else { x }
        }),
        // Few mantissa bits anywhere in the range: sums and products tie.
        3 => (-64i32..=64, emin..=(emax - 6))
            .prop_map(|(i, e)| T::from_f64_nearest(i as f64) * pow2::<T>(e)),
        // Moderate magnitudes with full random mantissas.
        3 => (any::<bool>(), any::<u64>(), -30i32..=30)
            .prop_map(|(s, m, e)| assemble::<T>(s, (e + bias::<T>()) as u64, m)),
        // Powers of two over the whole range.
        1 => (any::<bool>(), emin..=emax).prop_map(|(s, e)| {
            let x = pow2::<T>(e);
            if s { -x } else { x }
        }),
        // Zeros and familiar values.
        1 => prop::sample::select(vec![0.0f64, -0.0, 1.0, -1.0, 0.5, -2.0, 3.0, 0.1, -0.1, 1.0 / 3.0])
            .prop_map(T::from_f64_nearest),
    ];
    if allow_inf {
        prop_oneof![
            20 => finite,
            1 => Just(T::infinity()),
            1 => Just(T::neg_infinity()),
        ]
        .boxed()
    } else {
        finite.boxed()
    }
}

/// Moderate "network-like" values: magnitudes in `2^-12 .. 2^12`, some with
/// few mantissa bits, some zero.
pub fn moderate<T: TF>() -> BoxedStrategy<T> {
    prop_oneof![
        6 => (any::<bool>(), any::<u64>(), -12i32..=12)
            .prop_map(|(s, m, e)| assemble::<T>(s, (e + bias::<T>()) as u64, m)),
        3 => (-64i32..=64, -16i32..=6).prop_map(|(i, e)| T::from_f64_nearest(i as f64) * pow2::<T>(e)),
        1 => prop::sample::select(vec![0.0f64, -0.0]).prop_map(T::from_f64_nearest),
    ]
    .boxed()
}

/// Pairs of floats that are independent or related so as to produce
/// cancellation, ties and huge magnitude ratios.
pub fn pair<T: TF>(allow_inf: bool) -> BoxedStrategy<(T, T)> {
    let f = || float::<T>(allow_inf);
    prop_oneof![
        4 => (f(), f()),
        1 => f().prop_map(|a| (a, -a)),
        // Catastrophic cancellation: a and -a + a few ulps.
        2 => (f(), 1u32..16, any::<bool>()).prop_map(|(a, k, up)| (a, step(-a, k, up))),
        1 => (f(), 0u32..16, any::<bool>()).prop_map(|(a, k, up)| (a, step(a, k, up))),
        // Exact ties: a ± odd multiples of half an ulp of a.
        2 => (f(), 0i32..4, any::<bool>()).prop_map(|(a, j, neg)| {
            if !a.is_finite() {
                return (a, a);
            }
            let h = half_ulp(a) * T::from_f64_nearest((2 * j + 1) as f64);
            (a, if neg { -h } else { h })
        }),
        // Huge magnitude ratios.
        1 => (f(), 1i32..200).prop_map(|(a, k)| {
            let k = k.min(T::EMAX);
            (a, a * pow2::<T>(-k))
        }),
    ]
    .prop_map(|(a, b)| if a.is_nan() || b.is_nan() { (a, a) } else { (a, b) })
    .boxed()
}

fn sorted<T: Fp>((a, b): (T, T)) -> (T, T) {
    if a > b { (b, a) } else { (a, b) }
}

/// A valid interval from two non-NaN values, sorted (and made valid when
/// both are the same infinity).
pub fn make_iv<T: Fp>(a: T, b: T) -> Interval<T> {
    let (lo, hi) = sorted((a, b));
    let lo = if lo == T::infinity() { T::max_value() } else { lo };
    let hi = if hi == T::neg_infinity() { -T::max_value() } else { hi };
    Interval::new(lo, hi).unwrap()
}

/// Intervals of every shape; with `allow_inf`, also half-lines and the
/// whole line.
pub fn interval<T: TF>(allow_inf: bool) -> BoxedStrategy<Interval<T>> {
    let f = || float::<T>(false);
    let finite = prop_oneof![
        4 => pair::<T>(false).prop_map(|(a, b)| make_iv(a, b)),
        2 => f().prop_map(|a| make_iv(a, a)),
        1 => prop::sample::select(vec![(0.0f64, 0.0f64), (-0.0, 0.0), (0.0, -0.0), (-0.0, -0.0)])
            .prop_map(|(a, b)| Interval::new(T::from_f64_nearest(a), T::from_f64_nearest(b)).unwrap()),
        1 => (f(), 1u32..8).prop_map(|(a, k)| make_iv(a, step(a, k, true))),
    ];
    if allow_inf {
        prop_oneof![
            12 => finite,
            1 => f().prop_map(|a| make_iv(T::neg_infinity(), a)),
            1 => f().prop_map(|a| make_iv(a, T::infinity())),
            1 => Just(Interval::<T>::entire()),
        ]
        .boxed()
    } else {
        finite.boxed()
    }
}

/// Moderate intervals (for dot products that should not overflow).
pub fn moderate_interval<T: TF>() -> BoxedStrategy<Interval<T>> {
    prop_oneof![
        4 => (moderate::<T>(), moderate::<T>()).prop_map(|(a, b)| make_iv(a, b)),
        2 => moderate::<T>().prop_map(|a| make_iv(a, a)),
        1 => (moderate::<T>(), 1u32..8).prop_map(|(a, k)| make_iv(a, step(a, k, true))),
    ]
    .boxed()
}

/// Shift both endpoints of an interval by `k` ulps up (keeping it valid).
pub fn shift_iv<T: TF>(a: Interval<T>, k: u32) -> Interval<T> {
    let lo = step(a.lo(), k, true);
    Interval::new(lo, step(a.hi(), k, true)).unwrap_or(a)
}

/// Pairs of intervals: independent, equal, negated, or nearly negated
/// (catastrophic cancellation in `a + b`).
pub fn iv_pair<T: TF>(allow_inf: bool) -> BoxedStrategy<(Interval<T>, Interval<T>)> {
    let iv = || interval::<T>(allow_inf);
    prop_oneof![
        5 => (iv(), iv()),
        1 => iv().prop_map(|a| (a, a)),
        1 => iv().prop_map(|a| (a, -a)),
        2 => (iv(), 1u32..8).prop_map(|(a, k)| (a, shift_iv(-a, k))),
    ]
    .boxed()
}

/// Vectors of length `0..=max_len`, skewed towards short ones (5/9 up to
/// 24, 3/9 up to 96, 1/9 up to `max_len`) so that 100k-case runs stay fast
/// while long accumulations are still exercised thousands of times.
///
/// Elements are drawn by `make` from one `u64` seed each: building a proptest
/// value tree per float would dominate the run time of long vectors, while
/// this keeps proptest's shrinking by element removal (and a shrunk seed is
/// still a valid element).
pub fn skewed_vec<E, F>(make: F, max_len: usize) -> BoxedStrategy<Vec<E>>
where
    E: std::fmt::Debug + 'static,
    F: Fn(&mut SplitMix) -> E + Clone + 'static,
{
    let (a, b) = (24.min(max_len), 96.min(max_len));
    let g = move |seeds: Vec<u64>| seeds.into_iter().map(|s| make(&mut SplitMix::new(s))).collect::<Vec<E>>();
    prop_oneof![
        5 => prop::collection::vec(any::<u64>(), 0..=a),
        3 => prop::collection::vec(any::<u64>(), a..=b),
        1 => prop::collection::vec(any::<u64>(), b..=max_len),
    ]
    .prop_map(g)
    .boxed()
}

/// Seeded counterpart of [`float`] (same classes, for vector elements).
pub fn gen_float<T: TF>(r: &mut SplitMix, allow_inf: bool) -> T {
    if allow_inf && r.below(21) == 0 {
        return if r.coin() { T::infinity() } else { T::neg_infinity() };
    }
    let (neg, bits) = (r.coin(), r.next_u64());
    let x: T = match r.below(18) {
        0..=3 => uniform_finite(bits),
        4 | 5 => assemble(neg, 0, if bits & 3 == 0 { 1 + (bits >> 2 & 7) } else { (bits >> 2).max(1) }),
        6 => step(T::max_value(), r.below(8) as u32, false),
        7 => step(T::min_positive_value(), r.below(8) as u32, r.coin()),
        8..=10 => {
            let i = r.range_i32(-64, 64);
            T::from_f64_nearest(i as f64) * pow2::<T>(r.range_i32(T::EMIN_SUB, T::EMAX - 6))
        }
        11..=13 => assemble(neg, (r.range_i32(-30, 30) + bias::<T>()) as u64, bits),
        14 => pow2::<T>(r.range_i32(T::EMIN_SUB, T::EMAX)),
        15 => T::zero(),
        _ => gen_moderate(r),
    };
    if neg { -x } else { x }
}

/// Seeded counterpart of [`moderate`].
pub fn gen_moderate<T: TF>(r: &mut SplitMix) -> T {
    match r.below(10) {
        0..=5 => assemble(r.coin(), (r.range_i32(-12, 12) + bias::<T>()) as u64, r.next_u64()),
        6..=8 => T::from_f64_nearest(r.range_i32(-64, 64) as f64) * pow2::<T>(r.range_i32(-16, 6)),
        _ => {
            if r.coin() {
                T::zero()
            } else {
                -T::zero()
            }
        }
    }
}

/// Seeded counterpart of [`interval`].
pub fn gen_interval<T: TF>(r: &mut SplitMix, allow_inf: bool) -> Interval<T> {
    if allow_inf {
        match r.below(15) {
            0 => return make_iv(T::neg_infinity(), gen_float(r, false)),
            1 => return make_iv(gen_float(r, false), T::infinity()),
            2 => return Interval::entire(),
            _ => {}
        }
    }
    let a: T = gen_float(r, false);
    match r.below(8) {
        0..=2 => make_iv(a, gen_float(r, false)),
        3 => make_iv(a, step(-a, r.below(16) as u32, r.coin())),
        4 | 5 => make_iv(a, a),
        6 => make_iv(a, step(a, 1 + r.below(7) as u32, true)),
        _ => make_iv(a, a + half_ulp(a)),
    }
}

/// Seeded counterpart of [`moderate_interval`].
pub fn gen_moderate_interval<T: TF>(r: &mut SplitMix) -> Interval<T> {
    let a: T = gen_moderate(r);
    match r.below(7) {
        0..=3 => make_iv(a, gen_moderate(r)),
        4 | 5 => make_iv(a, a),
        _ => make_iv(a, step(a, 1 + r.below(7) as u32, true)),
    }
}

/// Dot-product data `(x, w)` of length up to `max_len`: wild values, moderate
/// network-like values, or mirrored pairs of terms that cancel.
pub fn dot_data<T: TF>(max_len: usize, allow_inf: bool) -> BoxedStrategy<(Vec<Interval<T>>, Vec<T>)> {
    let wild = skewed_vec(move |r| (gen_interval::<T>(r, allow_inf), gen_float::<T>(r, false)), max_len);
    let tame = skewed_vec(|r| (gen_moderate_interval::<T>(r), gen_moderate::<T>(r)), max_len);
    let mirrored = mirrored_data::<T>(max_len);
    prop_oneof![2 => wild, 3 => tame, 2 => mirrored].prop_map(|v| v.into_iter().unzip()).boxed()
}

/// Only the moderate parts of [`dot_data`] (no overflow, finite bounds).
pub fn tame_dot_data<T: TF>(max_len: usize) -> BoxedStrategy<(Vec<Interval<T>>, Vec<T>)> {
    let tame = skewed_vec(|r| (gen_moderate_interval::<T>(r), gen_moderate::<T>(r)), max_len);
    prop_oneof![tame, mirrored_data::<T>(max_len)].prop_map(|v| v.into_iter().unzip()).boxed()
}

/// Pairs of terms `x·w` and `x'·(-w)` with `x'` a few ulps from `x`,
/// shuffled: massive cancellation.
fn mirrored_data<T: TF>(max_len: usize) -> BoxedStrategy<Vec<(Interval<T>, T)>> {
    (
        skewed_vec(|r| (gen_moderate_interval::<T>(r), gen_moderate::<T>(r), r.below(3) as u32), max_len / 2),
        any::<u64>(),
    )
        .prop_map(|(v, seed)| {
            let mut out = Vec::with_capacity(2 * v.len());
            for (x, w, k) in v {
                out.push((x, w));
                out.push((shift_iv(x, k), -w));
            }
            let mut rng = SplitMix::new(seed);
            rng.shuffle(&mut out);
            out
        })
        .boxed()
}
