//! Conv backsubstitution over dependence-set windows (the paper's GBC,
//! Algorithm 1), and the forward interval pass of a conv layer.

use crate::util::{CpuMat, lower_of, min_product, valid};
use polycert_deeppoly::{AffineForward, Conv2d, Geom, Shape};
use polycert_interval::{DotAcc, FloatModel, Fp, Interval, Widening, fp};
use rayon::prelude::*;

/// Range of window positions `w` in `[w0, w1)` whose input coordinate
/// `(off + w)·s + k − pad` lies in `[0, size)`.
#[inline]
fn tap_range(off: i32, w0: usize, w1: usize, s: usize, k: usize, pad: usize, size: usize) -> (usize, usize) {
    let (s, k, pad, size, off) = (s as i64, k as i64, pad as i64, size as i64, off as i64);
    // (off + w)·s ≥ pad − k  and  (off + w)·s ≤ size − 1 + pad − k
    let lo = (pad - k + s - 1).div_euclid(s) - off;
    let hi = (size - 1 + pad - k).div_euclid(s) - off + 1;
    let a = lo.max(w0 as i64);
    let b = hi.min(w1 as i64);
    if a >= b { (0, 0) } else { (a as usize, b as usize) }
}

/// From `a` over the conv output (`g`) to the conv input (`out`).
pub fn conv_backsub<T: Fp>(
    a: &CpuMat<T>,
    g: &Geom,
    conv: &Conv2d,
    w: &[T],
    b_lo: &[T],
    b_hi: &[T],
    out: &Geom,
) -> (CpuMat<T>, Vec<f64>) {
    let step = ConvBack { g, out, conv, w, b_lo, b_hi };
    let (kh, kw) = conv.kernel;
    let (sh, sw) = conv.stride;
    let cols_in = a.cols;
    let cols_out = out.cols();
    let widen = Widening::for_terms(g.shape.c * kh.div_ceil(sh) * kw.div_ceil(sw));
    let mut res = CpuMat::zeros(a.rows, cols_out);
    let cst: Vec<f64> = res
        .lo
        .par_chunks_mut(cols_out.max(1))
        .zip(res.hi.par_chunks_mut(cols_out.max(1)))
        .enumerate()
        .map(|(r, (olo, ohi))| {
            let (alo, ahi) = (&a.lo[r * cols_in..(r + 1) * cols_in], &a.hi[r * cols_in..(r + 1) * cols_in]);
            step.row(r, alo, ahi, widen, olo, ohi)
        })
        .collect();
    (res, cst)
}

/// One conv backsubstitution: the conv, its weights, the constant interval
/// of each output neuron (bias ± rounding), and the rows' windows over the
/// conv output (`g`) and input (`out`).
struct ConvBack<'a, T> {
    g: &'a Geom,
    out: &'a Geom,
    conv: &'a Conv2d,
    w: &'a [T],
    b_lo: &'a [T],
    b_hi: &'a [T],
}

/// One row's coefficients over its window of the conv output, the window's
/// corner `(oy, ox)`, and the window positions `ys × xs` inside the node.
struct RowWindow<'a, T> {
    lo: &'a [T],
    hi: &'a [T],
    oy: i32,
    ox: i32,
    ys: (usize, usize),
    xs: (usize, usize),
}

/// A row's interval sums over the input window: lower and upper ends and
/// the magnitudes the widening scales.
struct Sums<'a> {
    lo: &'a mut [f64],
    hi: &'a mut [f64],
    mag: &'a mut [f64],
}

/// A row's constant term, Σ coefficient × constant interval, as its sum of
/// smallest products, their magnitude and their count (for [`lower_of`]).
#[derive(Default)]
struct ConstSum {
    sum: f64,
    mag: f64,
    n: usize,
}

impl<T: Fp> ConvBack<'_, T> {
    /// Row `r` (coefficients `alo`, `ahi`) over the conv input into `olo`,
    /// `ohi`, widened; returns its constant's lower bound.
    fn row(&self, r: usize, alo: &[T], ahi: &[T], widen: Widening, olo: &mut [T], ohi: &mut [T]) -> f64 {
        let so = self.g.shape;
        let (wh, ww) = self.g.win;
        let cols_out = self.out.cols();
        let (oy, ox) = self.g.offsets[r];
        let row = RowWindow { lo: alo, hi: ahi, oy, ox, ys: valid(oy, wh, so.h), xs: valid(ox, ww, so.w) };
        let mut acc = vec![0.0f64; 3 * cols_out];
        let (s_lo, rest) = acc.split_at_mut(cols_out);
        let (s_hi, s_mag) = rest.split_at_mut(cols_out);
        let mut sums = Sums { lo: s_lo, hi: s_hi, mag: s_mag };
        let mut cst = ConstSum::default();
        for co in 0..so.c {
            if self.add_constant(&row, co, &mut cst) {
                self.scatter_channel(&row, self.out.offsets[r], co, &mut sums);
            }
        }
        for j in 0..cols_out {
            let (l, h) = widen.apply(sums.lo[j], sums.hi[j], sums.mag[j]);
            olo[j] = fp::from_f64_down(l);
            ohi[j] = fp::from_f64_up(h);
        }
        lower_of(cst.n, cst.sum, cst.mag)
    }

    /// Adds channel `co`'s coefficients times their neurons' constant
    /// intervals to `cst`; false when the channel's coefficients are all zero.
    #[inline]
    fn add_constant(&self, row: &RowWindow<T>, co: usize, cst: &mut ConstSum) -> bool {
        let so = self.g.shape;
        let (wh, ww) = self.g.win;
        let plane = co * wh * ww;
        let mut any = false;
        for wy in row.ys.0..row.ys.1 {
            for wx in row.xs.0..row.xs.1 {
                let i = plane + wy * ww + wx;
                // The constant interval is per output neuron (bias ± rounding).
                let nrn = (co * so.h + (row.oy + wy as i32) as usize) * so.w + (row.ox + wx as i32) as usize;
                let (bl, bh) = (self.b_lo[nrn].to_f64_exact(), self.b_hi[nrn].to_f64_exact());
                let (l, h) = (row.lo[i].to_f64_exact(), row.hi[i].to_f64_exact());
                if l != 0.0 || h != 0.0 {
                    any = true;
                    let (p, m) = min_product(l, h, bl, bh);
                    cst.sum += p;
                    cst.mag += m;
                    cst.n += 1;
                }
            }
        }
        any
    }

    /// Scatters channel `co`'s coefficients through the kernel onto the
    /// input window whose corner is `(qy, qx)` (the transposed conv).
    #[inline]
    fn scatter_channel(&self, row: &RowWindow<T>, (qy, qx): (i32, i32), co: usize, sums: &mut Sums) {
        let si = self.out.shape;
        let (kh, kw) = self.conv.kernel;
        let (sh, sw) = self.conv.stride;
        let (pt, pl) = (self.conv.pad.0, self.conv.pad.1);
        let ww = self.g.win.1;
        let (oh, ow) = self.out.win;
        let plane = co * self.g.win.0 * ww;
        let (oy, ox) = (row.oy, row.ox);
        for ky in 0..kh {
            let (ty0, ty1) = tap_range(oy, row.ys.0, row.ys.1, sh, ky, pt, si.h);
            for kx in 0..kw {
                let (tx0, tx1) = tap_range(ox, row.xs.0, row.xs.1, sw, kx, pl, si.w);
                if ty0 >= ty1 || tx0 >= tx1 {
                    continue;
                }
                for ci in 0..si.c {
                    let wt = self.w[((co * si.c + ci) * kh + ky) * kw + kx].to_f64_exact();
                    if wt == 0.0 {
                        continue;
                    }
                    let wa = wt.abs();
                    for wy in ty0..ty1 {
                        let iy = (oy + wy as i32) as i64 * sh as i64 + ky as i64 - pt as i64;
                        let ty = (iy - qy as i64) as usize;
                        debug_assert!(ty < oh);
                        let src = plane + wy * ww;
                        let dst = (ci * oh + ty) * ow;
                        let ix0 = (ox + tx0 as i32) as i64 * sw as i64 + kx as i64 - pl as i64;
                        let mut t = (ix0 - qx as i64) as usize;
                        for wx in tx0..tx1 {
                            let (l, h) = (row.lo[src + wx].to_f64_exact(), row.hi[src + wx].to_f64_exact());
                            let (p1, p2) = (l * wt, h * wt);
                            let (mn, mx) = if p1 < p2 { (p1, p2) } else { (p2, p1) };
                            sums.lo[dst + t] += mn;
                            sums.hi[dst + t] += mx;
                            sums.mag[dst + t] += l.abs().max(h.abs()) * wa;
                            t += sw;
                        }
                    }
                }
            }
        }
    }
}

/// Forward interval pass of a conv layer, with the inference's rounding.
pub fn forward_conv<T: Fp>(
    conv: &Conv2d,
    w: &[T],
    b: &[T],
    si: Shape,
    xlo: &[T],
    xhi: &[T],
    model: FloatModel,
) -> AffineForward<Vec<T>> {
    let (kh, kw) = conv.kernel;
    let (sh, sw) = conv.stride;
    let (pt, pl) = (conv.pad.0, conv.pad.1);
    let ho = (si.h + conv.pad.0 + conv.pad.2 - kh) / sh + 1;
    let wo = (si.w + conv.pad.1 + conv.pad.3 - kw) / sw + 1;
    let n = conv.c_out * ho * wo;
    let rows: Vec<[T; 4]> = (0..n)
        .into_par_iter()
        .map(|o| {
            let co = o / (ho * wo);
            let (oy, ox) = ((o / wo) % ho, o % wo);
            let mut acc = DotAcc::default();
            for ci in 0..si.c {
                for ky in 0..kh {
                    let iy = (oy * sh + ky) as i64 - pt as i64;
                    if iy < 0 || iy >= si.h as i64 {
                        continue;
                    }
                    for kx in 0..kw {
                        let ix = (ox * sw + kx) as i64 - pl as i64;
                        if ix < 0 || ix >= si.w as i64 {
                            continue;
                        }
                        let j = (ci * si.h + iy as usize) * si.w + ix as usize;
                        acc.push(Interval::new_unchecked(xlo[j], xhi[j]), w[((co * si.c + ci) * kh + ky) * kw + kx]);
                    }
                }
            }
            crate::forward::finish_affine(acc, b[co], model)
        })
        .collect();
    crate::forward::split(rows)
}
