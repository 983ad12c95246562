//! The MaxPool backsubstitution step.

use crate::util::{CpuMat, column_of, for_each_in_window};
use polycert_deeppoly::Geom;
use polycert_interval::{Fp, fp};
use rayon::prelude::*;

/// From `a` over the pool output (`g`) to its input (`out`). Sums of
/// coefficients landing on the same input and the constants round outward.
pub fn maxpool_backsub<T: Fp>(
    a: &CpuMat<T>,
    g: &Geom,
    sel: (&[T], &[T]),
    lo: &[T],
    up: &[T],
    out: &Geom,
) -> (CpuMat<T>, Vec<f64>) {
    let cols = a.cols;
    let oc = out.cols();
    let mut res = CpuMat::zeros(a.rows, oc);
    let cst = res
        .lo
        .par_chunks_mut(oc.max(1))
        .zip(res.hi.par_chunks_mut(oc.max(1)))
        .enumerate()
        .map(|(r, (olo, ohi))| {
            let (alo, ahi) = (&a.lo[r * cols..(r + 1) * cols], &a.hi[r * cols..(r + 1) * cols]);
            let mut s = 0.0f64;
            for_each_in_window(g, r, |j, i| {
                let (al, ah) = (alo[j].to_f64_exact(), ahi[j].to_f64_exact());
                if al == 0.0 && ah == 0.0 {
                    return;
                }
                // a·y ≥ a_lo·y + min(0, (a_hi − a_lo)·lo_y).
                s = fp::add_down(s, fp::mul_down(fp::sub_up(ah, al), lo[i].to_f64_exact()).min(0.0));
                let target = if al >= 0.0 { sel.0[i] } else { sel.1[i] };
                if target < T::zero() {
                    s = fp::add_down(s, fp::mul_down(al, up[i].to_f64_exact()));
                    return;
                }
                if al == 0.0 {
                    return;
                }
                let e = column_of(out, r, target);
                olo[e] = fp::add_down(olo[e], alo[j]);
                ohi[e] = fp::add_up(ohi[e], alo[j]);
            });
            s
        })
        .collect();
    (res, cst)
}
