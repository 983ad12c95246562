//! Sound dot products (`dot`, `dot_scalar`, `DotAcc`, and the slice kernels
//! `axpy`/`finish_planes`, `dot_planes`, `accumulate`): the exact range of
//! `Σ x_i·w_i` over the box (sums of the exact corner products) and the
//! exact value at a random point must lie in the result.

use crate::common::*;
use polycert_interval::{DotAcc, Interval, dot, dot_scalar, kernels};
use proptest::prelude::*;

fn no_const() -> (Ext, Ext) {
    (Ext::zero(), Ext::zero())
}

fn lohi<T: TF>(i: Interval<T>) -> (T, T) {
    (i.lo(), i.hi())
}

/// Scalar pairs for `dot_scalar`.
fn scalar_data<T: TF>(max_len: usize) -> BoxedStrategy<(Vec<T>, Vec<T>)> {
    prop_oneof![
        skewed_vec(|r| (gen_float::<T>(r, false), gen_float::<T>(r, false)), max_len),
        skewed_vec(|r| (gen_moderate::<T>(r), gen_moderate::<T>(r)), max_len),
    ]
    .prop_map(|v| v.into_iter().unzip())
    .boxed()
}

/// Kernel elements: wild (1/3) or moderate (2/3).
fn kernel_row<T: TF>(r: &mut SplitMix, m: usize) -> (Interval<T>, Vec<T>) {
    if r.below(3) == 0 {
        (gen_interval(r, true), (0..m).map(|_| gen_float(r, false)).collect())
    } else {
        (gen_moderate_interval(r), (0..m).map(|_| gen_moderate(r)).collect())
    }
}

/// `(x, m, W)` with `x` of length `k <= 48` and `W` a `k × m` row-major matrix.
fn matvec_data<T: TF>() -> BoxedStrategy<(Vec<Interval<T>>, usize, Vec<T>)> {
    (1usize..=6)
        .prop_flat_map(|m| (Just(m), skewed_vec(move |r| kernel_row::<T>(r, m), 48)))
        .prop_map(|(m, rows)| {
            let (x, w): (Vec<Interval<T>>, Vec<Vec<T>>) = rows.into_iter().unzip();
            (x, m, w.concat())
        })
        .boxed()
}

macro_rules! dot_suite {
    ($m:ident, $t:ty) => {
        mod $m {
            use super::*;
            type T = $t;

            proptest! {
                #![proptest_config(config())]

                #[test]
                fn dot_encloses((x, w) in dot_data::<T>(300, true), seed: u64) {
                    check_dot("dot", &x, &w, &no_const(), lohi(dot(&x, &w)), seed)?;
                }

                #[test]
                fn dot_scalar_encloses((x, w) in scalar_data::<T>(300), seed: u64) {
                    let xi: Vec<Interval<T>> = x.iter().map(|&v| Interval::point(v).unwrap()).collect();
                    check_dot("dot_scalar", &xi, &w, &no_const(), lohi(dot_scalar(&x, &w)), seed)?;
                }

                #[test]
                fn dot_acc_push_merge_finish(
                    (x, w) in dot_data::<T>(200, true),
                    c in prop::option::of(interval::<T>(true)),
                    seed: u64,
                ) {
                    // Split-K: random chunks accumulated separately, then merged.
                    let mut rng = SplitMix::new(seed);
                    let mut accs = vec![DotAcc::default()];
                    for (&xi, &wi) in x.iter().zip(&w) {
                        if rng.below(8) == 0 {
                            accs.push(DotAcc::default());
                        }
                        accs.last_mut().unwrap().push(xi, wi);
                    }
                    let cr = match c {
                        Some(c) => {
                            let k = rng.below(accs.len() as u64) as usize;
                            accs[k].push_constant(c);
                            ext_bounds(c.lo(), c.hi())
                        }
                        None => no_const(),
                    };
                    let mut total = accs[0];
                    for a in &accs[1..] {
                        total.merge(a);
                    }
                    prop_assert_eq!(total.n, x.len() + c.is_some() as usize);
                    check_dot("DotAcc", &x, &w, &cr, lohi(total.finish::<T>()), seed)?;
                    // The f64 enclosure too (outward rounding into f64 only).
                    check_dot("DotAcc f64", &x, &w, &cr, { let f = total.finish::<f64>(); (f.lo(), f.hi()) }, seed)?;
                    // mag_upper bounds Σ|x_i|·|w_i| (+ |c|).
                    let mut mag = ExactSum::new();
                    for (xi, &wi) in x.iter().zip(&w) {
                        mag.add_prod(xi.mag(), wi.abs());
                    }
                    if let Some(c) = c {
                        mag.add(c.mag());
                    }
                    let mag = mag.value().unwrap();
                    let finite = mag.is_finite();
                    let mu = total.mag_upper();
                    if finite {
                        prop_assert!(mu.is_nan() || Ext::of(mu) >= mag, "mag_upper {} too small", mu);
                    }
                }

                #[test]
                fn axpy_finish_planes((x, m, w) in matvec_data::<T>(), seed: u64) {
                    let k = x.len();
                    let (mut lo, mut hi, mut mag) = (vec![0.0; m], vec![0.0; m], vec![0.0; m]);
                    for (i, xi) in x.iter().enumerate() {
                        let row = &w[i * m..(i + 1) * m];
                        if i % 2 == 0 {
                            kernels::axpy(&mut lo, &mut hi, &mut mag, *xi, row);
                        } else {
                            kernels::axpy_planes(&mut lo, &mut hi, &mut mag, xi.lo(), xi.hi(), row);
                        }
                    }
                    let (mut out_lo, mut out_hi) = (vec![0.0 as T; m], vec![0.0 as T; m]);
                    kernels::finish_planes(k, &lo, &hi, &mag, &mut out_lo, &mut out_hi);
                    for j in 0..m {
                        let col: Vec<T> = (0..k).map(|i| w[i * m + j]).collect();
                        check_dot("axpy+finish_planes", &x, &col, &no_const(), (out_lo[j], out_hi[j]), seed ^ j as u64)?;
                    }
                }

                #[test]
                fn dot_planes_and_accumulate((x, w) in dot_data::<T>(300, true), seed: u64) {
                    let (xl, xh): (Vec<T>, Vec<T>) = x.iter().map(|i| (i.lo(), i.hi())).unzip();
                    let acc = kernels::dot_planes(&xl, &xh, &w);
                    prop_assert_eq!(acc.n, x.len());
                    check_dot("dot_planes", &x, &w, &no_const(), lohi(acc.finish::<T>()), seed)?;
                    let mut acc2 = DotAcc::default();
                    let cut = (seed as usize) % (x.len() + 1);
                    kernels::accumulate(&mut acc2, &x[..cut], &w[..cut]);
                    kernels::accumulate(&mut acc2, &x[cut..], &w[cut..]);
                    check_dot("accumulate", &x, &w, &no_const(), lohi(acc2.finish::<T>()), seed)?;
                }
            }
        }
    };
}

dot_suite!(f32_dot, f32);
dot_suite!(f64_dot, f64);
