//! Directed rounding in `polycert_interval::fp`, checked against exact
//! rationals: every `*_down` result is `<=` the exact value and every `*_up`
//! result `>=` it, and they are tight: the correctly rounded value for
//! add/sub/conversion (TwoSum is exact), at most one ulp beyond it for
//! mul/div (which step outward unconditionally near underflow).

use crate::common::*;
use polycert_interval::fp;
use proptest::prelude::*;

/// f64 values that are hard to round into f32: f32 values nudged by a few
/// f64 ulps, exact midpoints between neighbouring f32 values (ties), and
/// values beyond the f32 range.
fn f64_for_f32() -> BoxedStrategy<f64> {
    prop_oneof![
        3 => float::<f64>(true),
        2 => (float::<f32>(false), 0u32..4, any::<bool>())
            .prop_map(|(x, k, up)| step(x as f64, k, up)),
        2 => (float::<f32>(false), any::<bool>()).prop_map(|(x, up)| {
            let y = if up { x.next_up() } else { x.next_down() };
            if y.is_finite() { (x as f64 + y as f64) / 2.0 } else { x as f64 }
        }),
        1 => (float::<f64>(false), -160i32..=-140).prop_map(|(x, e)| x.abs().min(1.0) * 2f64.powi(e)),
        1 => prop::sample::select(vec![
            f32::MAX as f64 * (1.0 + f32::EPSILON as f64 / 2.0),
            f32::MAX as f64 * (1.0 + f32::EPSILON as f64 / 4.0),
            -(f32::MAX as f64) * (1.0 + f32::EPSILON as f64 / 2.0),
            1e300, -1e300, 1e-300, -1e-300,
            f32::from_bits(1) as f64 / 2.0, -(f32::from_bits(1) as f64) / 2.0,
        ]),
    ]
    .boxed()
}

/// `b`, or `a` itself where `a + b` would be `inf + -inf`.
fn fix_inf_pair<T: TF>(a: T, b: T) -> T {
    if a.is_infinite() && b == -a { a } else { b }
}

/// A finite nonzero divisor: zero becomes the smallest subnormal of the
/// same sign, an infinity the largest finite value.
fn fix_divisor<T: TF>(b: T) -> T {
    let m = if b == T::zero() {
        T::MIN_SUBNORMAL
    } else if b.is_infinite() {
        T::max_value()
    } else {
        return b;
    };
    if b.is_sign_negative() { -m } else { m }
}

macro_rules! rounding_suite {
    ($m:ident, $t:ty) => {
        mod $m {
            use super::*;
            type T = $t;

            proptest! {
                #![proptest_config(config())]

                #[test]
                fn add_directed((a, b) in pair::<T>(true)) {
                    let b = fix_inf_pair(a, b); // inf + -inf is excluded by the API
                    let q = Ext::of(a).add(&Ext::of(b)).unwrap();
                    check_down("add_down", fp::add_down(a, b), &q, 0)?;
                    check_up("add_up", fp::add_up(a, b), &q, 0)?;
                }

                #[test]
                fn sub_directed((a, b) in pair::<T>(true)) {
                    let b = fix_inf_pair(a, -b);
                    let b = -b;
                    let q = Ext::of(a).sub(&Ext::of(b)).unwrap();
                    check_down("sub_down", fp::sub_down(a, b), &q, 0)?;
                    check_up("sub_up", fp::sub_up(a, b), &q, 0)?;
                }

                #[test]
                fn mul_directed((a, b) in pair::<T>(true)) {
                    let q = Ext::of(a).mul(&Ext::of(b)); // 0 * inf = 0
                    check_down("mul_down", fp::mul_down(a, b), &q, 1)?;
                    check_up("mul_up", fp::mul_up(a, b), &q, 1)?;
                }

                #[test]
                fn div_directed((a, b) in pair::<T>(true)) {
                    let b = fix_divisor(b);
                    let q = Ext::of(a).div(&rat(b));
                    check_down("div_down", fp::div_down(a, b), &q, 1)?;
                    check_up("div_up", fp::div_up(a, b), &q, 1)?;
                }

                #[test]
                fn div_directed_related(a in float::<T>(true), b in float::<T>(false), k in 0u32..3) {
                    // Divisors that make the quotient exact or nearly so.
                    let b = fix_divisor(b);
                    let a = if a.is_finite() { step(a * b, k, true) } else { a };
                    let a = if a.is_nan() { T::INFINITY } else { a };
                    let q = Ext::of(a).div(&rat(b));
                    check_down("div_down", fp::div_down(a, b), &q, 1)?;
                    check_up("div_up", fp::div_up(a, b), &q, 1)?;
                }

                #[test]
                fn from_f64_directed(x in f64_for_f32()) {
                    let q = Ext::of(x);
                    check_down("from_f64_down", fp::from_f64_down::<T>(x), &q, 0)?;
                    check_up("from_f64_up", fp::from_f64_up::<T>(x), &q, 0)?;
                }
            }
        }
    };
}

rounding_suite!(f32_rounding, f32);
rounding_suite!(f64_rounding, f64);

#[test]
fn exact_helpers_round_correctly() {
    // The reference rounding itself, on hand values.
    use rug::Rational;
    let third = Rational::from((1, 3));
    assert_eq!(rd_rat::<f64>(&third), 1.0 / 3.0);
    assert_eq!(ru_rat::<f64>(&third), (1.0f64 / 3.0).next_up());
    assert_eq!(rd_rat::<f32>(&Rational::from(1)), 1.0);
    assert_eq!(ru_rat::<f32>(&(Rational::from(1) >> 200u32)), f32::from_bits(1));
    assert_eq!(rd_rat::<f32>(&(Rational::from(1) >> 200u32)), 0.0);
    assert_eq!(rd_rat::<f32>(&(Rational::from(1) << 200u32)), f32::MAX);
    assert_eq!(ru_rat::<f32>(&(Rational::from(1) << 200u32)), f32::INFINITY);
    assert_eq!(rd_rat::<f64>(&-(Rational::from(1) << 2000u32)), f64::NEG_INFINITY);
    assert!(Ext::NegInf < Ext::zero() && Ext::zero() < Ext::PosInf);
    assert_eq!(Ext::PosInf.mul(&Ext::zero()), Ext::zero());
    assert_eq!(Ext::PosInf.add(&Ext::NegInf), None);
}

#[test]
fn add_sweep_near_overflow_f32() {
    // TwoSum's intermediates near the overflow threshold: a in the top
    // binade, b over the top binades with random mantissas.
    let mut rng = SplitMix::new(7);
    for i in 0..256u32 {
        let a = step(f32::MAX, i, false);
        for _ in 0..64 {
            let e = 104 + rng.below(24); // top exponent fields
            let b: f32 = assemble(rng.coin(), e.min(254), rng.next_u64());
            // Odd multiples of half an ulp of MAX: exact ties next to overflow
            // (2Sum's `s - a` overflowed on these before the Fast2Sum fix).
            let t = half_ulp(f32::MAX) * (2 * rng.below(8) + 1) as f32;
            for (x, y) in [(a, b), (a, -b), (-a, b), (-a, -b), (b, a), (-b, a), (a, -t), (-t, a), (-a, t), (t, -a)] {
                let q = Ext::of(x).add(&Ext::of(y)).unwrap();
                check_down("add_down", fp::add_down(x, y), &q, 0).unwrap();
                check_up("add_up", fp::add_up(x, y), &q, 0).unwrap();
            }
        }
    }
}
