//! Vectorizable slice kernels for the CPU backend's hot loops.
//!
//! They accumulate in planar (structure-of-arrays) f64 buffers in
//! round-to-nearest and are made sound by one [`Widening`] per output at the
//! end, so the inner loops hold only multiplies, adds and min/max.

use crate::dot::{DotAcc, Widening};
use crate::fp::{self, Fp};
use crate::interval::Interval;

/// `out[j] += a · w[j]` for an interval `a` and a scalar slice `w`, into the
/// planar accumulators `lo`, `hi` (sums of the lower and upper products) and
/// `mag` (sum of magnitudes, for the final widening).
#[inline]
pub fn axpy<T: Fp>(lo: &mut [f64], hi: &mut [f64], mag: &mut [f64], a: Interval<T>, w: &[T]) {
    let n = w.len();
    let (lo, hi, mag) = (&mut lo[..n], &mut hi[..n], &mut mag[..n]);
    let (al, ah, am) = (a.lo().to_f64_exact(), a.hi().to_f64_exact(), a.mag().to_f64_exact());
    if al == ah {
        for j in 0..n {
            let wj = w[j].to_f64_exact();
            let p = al * wj;
            lo[j] += p;
            hi[j] += p;
            mag[j] += am * wj.abs();
        }
        return;
    }
    for j in 0..n {
        let wj = w[j].to_f64_exact();
        let (p1, p2) = (al * wj, ah * wj);
        lo[j] += if p1 < p2 { p1 } else { p2 };
        hi[j] += if p1 < p2 { p2 } else { p1 };
        mag[j] += am * wj.abs();
    }
}

/// Planar `axpy`: `a` given as separate lower/upper values.
#[inline]
pub fn axpy_planes<T: Fp>(lo: &mut [f64], hi: &mut [f64], mag: &mut [f64], alo: T, ahi: T, w: &[T]) {
    axpy(lo, hi, mag, Interval::new_unchecked(alo, ahi), w)
}

/// Dot product of an interval vector in planes (`xlo`, `xhi`) with `w`.
/// The terms are summed in 8 lanes (the widening holds for any order), so
/// the loop vectorises (inlined, so a caller compiled for wider vectors
/// widens it too).
#[inline(always)]
pub fn dot_planes<T: Fp>(xlo: &[T], xhi: &[T], w: &[T]) -> DotAcc {
    const L: usize = 8;
    let n = w.len();
    let (xlo, xhi) = (&xlo[..n], &xhi[..n]);
    let (mut slo, mut shi, mut smag) = ([0.0f64; L], [0.0f64; L], [0.0f64; L]);
    let mut term = |l: usize, j: usize| {
        let wj = w[j].to_f64_exact();
        let (p1, p2) = (xlo[j].to_f64_exact() * wj, xhi[j].to_f64_exact() * wj);
        let (mn, mx) = if p1 < p2 { (p1, p2) } else { (p2, p1) };
        slo[l] += mn;
        shi[l] += mx;
        smag[l] += if mn.abs() < mx.abs() { mx.abs() } else { mn.abs() };
    };
    let full = n - n % L;
    for c in (0..full).step_by(L) {
        for l in 0..L {
            term(l, c + l);
        }
    }
    for j in full..n {
        term(j - full, j);
    }
    let sum = |v: [f64; L]| v.iter().sum::<f64>();
    DotAcc { lo: sum(slo), hi: sum(shi), mag: sum(smag), n }
}

/// `acc += xs · ws` for an interval slice in AoS form.
pub fn accumulate<T: Fp>(acc: &mut DotAcc, xs: &[Interval<T>], ws: &[T]) {
    assert_eq!(xs.len(), ws.len(), "accumulate: length mismatch");
    for (&x, &w) in xs.iter().zip(ws) {
        acc.push(x, w);
    }
}

/// Rounds planar accumulators of `n_terms`-term sums outward into `T`
/// planes `out_lo`/`out_hi`.
pub fn finish_planes<T: Fp>(n_terms: usize, lo: &[f64], hi: &[f64], mag: &[f64], out_lo: &mut [T], out_hi: &mut [T]) {
    let w = Widening::for_terms(n_terms);
    for j in 0..out_lo.len() {
        let (l, h) = w.apply(lo[j], hi[j], mag[j]);
        out_lo[j] = fp::from_f64_down(l);
        out_hi[j] = fp::from_f64_up(h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dot::dot;

    #[test]
    fn axpy_then_finish_matches_dot() {
        let xs: Vec<Interval<f32>> = (0..37)
            .map(|i| {
                let c = (i as f32 * 0.37).sin();
                Interval::new(c - 0.1, c + 0.05).unwrap()
            })
            .collect();
        let w: Vec<f32> = (0..37).map(|i| (i as f32 * 1.3).cos()).collect();
        let (mut lo, mut hi, mut mag) = (vec![0.0; 1], vec![0.0; 1], vec![0.0; 1]);
        for (x, &wi) in xs.iter().zip(&w) {
            axpy(&mut lo, &mut hi, &mut mag, *x, std::slice::from_ref(&wi));
        }
        let (mut ol, mut oh) = ([0.0f32], [0.0f32]);
        finish_planes(37, &lo, &hi, &mag, &mut ol, &mut oh);
        let d = dot(&xs, &w);
        assert_eq!((ol[0], oh[0]), (d.lo(), d.hi()));
        let (pl, ph): (Vec<f32>, Vec<f32>) = xs.iter().map(|x| (x.lo(), x.hi())).unzip();
        let acc = dot_planes(&pl, &ph, &w);
        assert_eq!(acc.finish::<f32>(), d);
    }
}
