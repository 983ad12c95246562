//! Every `Interval` operation, checked against exact rationals: the exact
//! result at sample points of the inputs (endpoints, random rational convex
//! combinations, points at infinity and huge finite stand-ins for them) must
//! lie in the output; where the exact hull is known in closed form the
//! output must also be tight (the correctly rounded hull, or one ulp more
//! for products).

use crate::common::*;
use polycert_interval::{Interval, IntervalError, fp};
use proptest::prelude::*;

fn lohi<T: TF>(i: Interval<T>) -> (T, T) {
    (i.lo(), i.hi())
}

/// Exact hull of `{x * y}` from the four corners (`0 * inf = 0`).
fn mul_hull<T: TF>(a: Interval<T>, b: Interval<T>) -> (Ext, Ext) {
    let (al, ah) = ext_bounds(a.lo(), a.hi());
    let (bl, bh) = ext_bounds(b.lo(), b.hi());
    let c = [al.mul(&bl), al.mul(&bh), ah.mul(&bl), ah.mul(&bh)];
    (c.iter().min().unwrap().clone(), c.iter().max().unwrap().clone())
}

fn divisor<T: TF>(s: T) -> T {
    let s = s.abs();
    if s == T::zero() { T::MIN_SUBNORMAL } else { s }
}

fn any_or_nan<T: TF>() -> BoxedStrategy<T> {
    prop_oneof![8 => float::<T>(true), 1 => Just(T::nan())].boxed()
}

macro_rules! interval_suite {
    ($m:ident, $t:ty) => {
        mod $m {
            use super::*;
            type T = $t;

            proptest! {
                #![proptest_config(config())]

                #[test]
                fn new_validates(a in any_or_nan::<T>(), b in any_or_nan::<T>()) {
                    let r = Interval::new(a, b);
                    if a.is_nan() || b.is_nan() {
                        prop_assert_eq!(r, Err(IntervalError::NaN));
                    } else if a <= b && a != T::INFINITY && b != T::NEG_INFINITY {
                        let i = r.unwrap();
                        prop_assert!(i.lo().to_bits() == a.to_bits() && i.hi().to_bits() == b.to_bits());
                        prop_assert!(i.contains(a) && i.contains(b));
                    } else {
                        prop_assert!(r.is_err());
                    }
                }

                #[test]
                fn add((a, b) in iv_pair::<T>(true), seed: u64) {
                    let r = a + b;
                    check_binary("add", a, b, lohi(r), |x, y| x.add(y), seed)?;
                    check_down("add lo", r.lo(), &Ext::of(a.lo()).add(&Ext::of(b.lo())).unwrap(), 0)?;
                    check_up("add hi", r.hi(), &Ext::of(a.hi()).add(&Ext::of(b.hi())).unwrap(), 0)?;
                }

                #[test]
                fn sub((a, b) in iv_pair::<T>(true), seed: u64) {
                    let r = a - b;
                    check_binary("sub", a, b, lohi(r), |x, y| x.sub(y), seed)?;
                    check_down("sub lo", r.lo(), &Ext::of(a.lo()).sub(&Ext::of(b.hi())).unwrap(), 0)?;
                    check_up("sub hi", r.hi(), &Ext::of(a.hi()).sub(&Ext::of(b.lo())).unwrap(), 0)?;
                }

                #[test]
                fn neg(a in interval::<T>(true), seed: u64) {
                    let r = -a;
                    check_unary("neg", a, lohi(r), |x| Some(x.neg()), seed)?;
                    prop_assert!(r.lo() == -a.hi() && r.hi() == -a.lo());
                }

                #[test]
                fn mul((a, b) in iv_pair::<T>(true), seed: u64) {
                    let r = a.mul(b);
                    check_binary("mul", a, b, lohi(r), |x, y| Some(x.mul(y)), seed)?;
                    let (lo, hi) = mul_hull(a, b);
                    check_down("mul lo", r.lo(), &lo, 1)?;
                    check_up("mul hi", r.hi(), &hi, 1)?;
                }

                #[test]
                fn mul_scalar(a in interval::<T>(true), s in float::<T>(false), seed: u64) {
                    let r = a.mul_scalar(s);
                    let se = Ext::of(s);
                    check_unary("mul_scalar", a, lohi(r), |x| Some(x.mul(&se)), seed)?;
                    let (lo, hi) = mul_hull(a, Interval::point(s).unwrap());
                    check_down("mul_scalar lo", r.lo(), &lo, 1)?;
                    check_up("mul_scalar hi", r.hi(), &hi, 1)?;
                }

                #[test]
                fn mul_add(a in interval::<T>(true), (b, c) in iv_pair::<T>(true), seed: u64) {
                    let r = a.mul_add(b, c);
                    check_ternary("mul_add", (a, b, c), lohi(r), |x, y, z| x.mul(y).add(z), seed)?;
                }

                #[test]
                fn mul_scalar_add((a, c) in iv_pair::<T>(true), s in float::<T>(false), seed: u64) {
                    let r = a.mul_scalar_add(s, c);
                    let se = Ext::of(s);
                    check_binary("mul_scalar_add", a, c, lohi(r), |x, z| x.mul(&se).add(z), seed)?;
                }

                #[test]
                fn div_pos(a in interval::<T>(true), s in float::<T>(false), seed: u64) {
                    let s = divisor(s);
                    let r = a.div_pos(s).unwrap();
                    let sq = rat(s);
                    check_unary("div_pos", a, lohi(r), |x| Some(x.div(&sq)), seed)?;
                    check_down("div_pos lo", r.lo(), &Ext::of(a.lo()).div(&sq), 1)?;
                    check_up("div_pos hi", r.hi(), &Ext::of(a.hi()).div(&sq), 1)?;
                }

                #[test]
                fn div_pos_rejects_bad_divisors(a in interval::<T>(true), s in any_or_nan::<T>()) {
                    let bad = !(s > 0.0 && s.is_finite());
                    prop_assert_eq!(a.div_pos(s).is_err(), bad);
                }

                #[test]
                fn min_max((a, b) in iv_pair::<T>(true), seed: u64) {
                    check_binary("min", a, b, lohi(a.min(b)), |x, y| Some(x.min(y).clone()), seed)?;
                    check_binary("max", a, b, lohi(a.max(b)), |x, y| Some(x.max(y).clone()), seed)?;
                }

                #[test]
                fn hull_and_intersection((a, b) in iv_pair::<T>(true), seed: u64) {
                    let h = a.hull(b);
                    check_unary("hull (first)", a, lohi(h), |x| Some(x.clone()), seed)?;
                    check_unary("hull (second)", b, lohi(h), |x| Some(x.clone()), seed)?;
                    prop_assert!(h.contains_interval(a) && h.contains_interval(b));
                    let (al, ah) = ext_bounds(a.lo(), a.hi());
                    let (bl, bh) = ext_bounds(b.lo(), b.hi());
                    prop_assert!(Ext::of(h.lo()) == al.clone().min(bl.clone()));
                    prop_assert!(Ext::of(h.hi()) == ah.clone().max(bh.clone()));
                    let (il, ih) = (al.max(bl), ah.min(bh));
                    match a.intersection(b) {
                        Some(i) => {
                            prop_assert!(il <= ih, "intersection of disjoint intervals");
                            prop_assert!(Ext::of(i.lo()) == il && Ext::of(i.hi()) == ih);
                            prop_assert!(a.contains_interval(i) && b.contains_interval(i));
                        }
                        None => prop_assert!(il > ih, "intersection missed a common point"),
                    }
                }

                #[test]
                fn contains(a in interval::<T>(true), x in float::<T>(true), b in interval::<T>(true)) {
                    let bounds = ext_bounds(a.lo(), a.hi());
                    prop_assert_eq!(a.contains(x), inside(&bounds, &Ext::of(x)));
                    prop_assert!(a.contains(a.lo()) && a.contains(a.hi()));
                    let want = inside(&bounds, &Ext::of(b.lo())) && inside(&bounds, &Ext::of(b.hi()));
                    prop_assert_eq!(a.contains_interval(b), want);
                }

                #[test]
                fn width_midpoint_radius(a in interval::<T>(true)) {
                    let (lo, hi) = ext_bounds(a.lo(), a.hi());
                    let exact_w = hi.sub(&lo).unwrap();
                    check_up("width", a.width(), &exact_w, 0)?;
                    let m = a.midpoint();
                    prop_assert!(m.is_finite() && a.contains(m), "midpoint {:?} of {:?}", m, a);
                    let r = a.radius();
                    prop_assert!(r >= 0.0);
                    let (me, re) = (Ext::of(m), Ext::of(r));
                    prop_assert!(me.sub(&re).unwrap() <= lo, "m - r above lo");
                    prop_assert!(me.add(&re).unwrap() >= hi, "m + r below hi");
                }

                #[test]
                fn mag_and_relu(a in interval::<T>(true), seed: u64) {
                    let (lo, hi) = ext_bounds(a.lo(), a.hi());
                    let mag = [lo.neg(), lo.clone(), hi.neg(), hi.clone()].into_iter().max().unwrap();
                    prop_assert!(Ext::of(a.mag()) == mag, "mag of {:?}", a);
                    let z = Ext::zero();
                    check_unary("relu", a, lohi(a.relu()), |x| Some(x.clone().max(z.clone())), seed)?;
                }
            }
        }
    };
}

interval_suite!(f32_interval, f32);
interval_suite!(f64_interval, f64);

proptest! {
    #![proptest_config(config())]

    #[test]
    fn to_f32_outward(a in interval::<f64>(true), seed: u64) {
        let r = a.to_f32_outward();
        check_unary("to_f32_outward", a, lohi(r), |x| Some(x.clone()), seed)?;
        check_down("to_f32_outward lo", r.lo(), &Ext::of(a.lo()), 0)?;
        check_up("to_f32_outward hi", r.hi(), &Ext::of(a.hi()), 0)?;
        prop_assert!(fp::from_f64_down::<f32>(a.lo()) == r.lo());
    }

    #[test]
    fn to_f64_is_exact(a in interval::<f32>(true)) {
        let r = a.to_f64();
        prop_assert!(Ext::of(r.lo()) == Ext::of(a.lo()) && Ext::of(r.hi()) == Ext::of(a.hi()));
    }
}
