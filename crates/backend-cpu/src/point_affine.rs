//! Point-coefficient affine steps: the dense step as one plain GEMM (the
//! `gemm` crate: blocked, SIMD, FMA, any summation order) and the windowed
//! conv step, each with its rounding error paid in the row's constant.

use crate::util::{CpuPMat, lower_of, runs, upper_of, valid};
use polycert_deeppoly::{Conv2d, Geom, Shape};
use polycert_interval::{FloatModel, Fp, fp};
use rayon::prelude::*;

/// The float model of a GEMM in `T` (round-to-nearest, FMA allowed).
pub fn gemm_model<T: Fp>() -> FloatModel {
    FloatModel { unit_roundoff: T::UNIT_ROUNDOFF, min_subnormal: T::MIN_SUBNORMAL.to_f64_exact() }
}

/// Per row: `min(a·b) − γ_m·|a|·wr − (m+2)·η·r1`, rounded down, over the
/// row's in-range window of `g` (a non-finite result becomes −∞); `r1` is
/// per batch slot.
pub fn affine_constants<T: Fp>(a: &CpuPMat<T>, g: &Geom, b: (&[T], &[T]), wr: &[T], m: usize, r1: &[f64]) -> Vec<f64> {
    let model = gemm_model::<T>();
    let gamma = model.gamma(m);
    let eta_m = fp::mul_up((m + 2) as f64, model.min_subnormal);
    let cols = a.cols;
    crate::util::map_range(a.rows, a.rows * cols, |r| {
        let (s, mg, e, n) = constant_terms(&a.a[r * cols..(r + 1) * cols], (g, r), b, wr);
        let eta = fp::mul_up(eta_m, r1[g.props[r] as usize]);
        let err = fp::add_up(fp::mul_up(gamma, upper_of(n, e)), eta);
        let c = fp::sub_down(lower_of(n, s, mg), err);
        if c.is_nan() { f64::NEG_INFINITY } else { c }
    })
}

crate::lanes::twin! {
    /// One row's sums of [`affine_constants`] and their count.
    fn constant_terms<T: Fp>(row: &[T], gr: (&Geom, usize), b: (&[T], &[T]), wr: &[T]) -> (f64, f64, f64, usize) {
        let mut acc = crate::lanes::Lanes::new();
        let mut n = 0;
        for (c, i, len) in runs(gr.0, gr.1) {
            let t = i..i + len;
            acc.affine_terms(&row[c..c + len], (&b.0[t.clone()], &b.1[t.clone()]), &wr[t]);
            n += len;
        }
        let (s, mg, e) = acc.total();
        (s, mg, e, n)
    }
}

/// `G = fl(A·W)` by a plain GEMM, `A` is `rows × n_out`, `W` row-major
/// `n_out × n_in`.
pub fn gemm<T: Fp>(a: &[T], rows: usize, n_out: usize, w: &[T], n_in: usize) -> Vec<T> {
    let mut out = vec![T::zero(); rows * n_in];
    if rows == 0 || n_in == 0 || n_out == 0 {
        return out;
    }
    assert_eq!((a.len(), w.len()), (rows * n_out, n_out * n_in), "gemm: shapes");
    // SAFETY: the three buffers hold rows×n_out, n_out×n_in and rows×n_in
    // values in row-major order, as the strides below describe.
    unsafe {
        gemm::gemm(
            rows,
            n_in,
            n_out,
            out.as_mut_ptr(),
            1,
            n_in as isize,
            false,
            a.as_ptr(),
            1,
            n_out as isize,
            w.as_ptr(),
            1,
            n_in as isize,
            T::zero(),
            T::one(),
            false,
            false,
            false,
            crate::util::gemm_threads(rows * n_out * n_in),
        );
    }
    out
}

/// The point dense step.
pub fn point_dense<T: Fp>(
    a: &CpuPMat<T>,
    ga: &Geom,
    w: &[T],
    n_in: usize,
    b: (&[T], &[T]),
    wr: &[T],
    r1: &[f64],
) -> (CpuPMat<T>, Vec<f64>) {
    let n_out = a.cols;
    let g = gemm(&a.a, a.rows, n_out, w, n_in);
    let cst = affine_constants(a, &ga.full_over(Shape::flat(n_out)), b, wr, n_out, r1);
    (CpuPMat { rows: a.rows, cols: n_in, a: g }, cst)
}

/// Rows per conv GEMM block (bounds the `rows·wh·ww × C_in·kh·kw` scratch).
const CONV_BLOCK_VALUES: usize = 1 << 22;

/// The point conv step over dependence-set windows: from `a` over the conv
/// output (`g`) to the conv input (`out`). One GEMM per block of rows,
/// `(rows·wh·ww × C_out)·(C_out × C_in·kh·kw)`, then a col2im scatter: every
/// input coefficient is a sum of at most `m` products in some order.
#[allow(clippy::too_many_arguments)]
pub fn point_conv<T: Fp>(
    a: &CpuPMat<T>,
    g: &Geom,
    conv: &Conv2d,
    w: &[T],
    b: (&[T], &[T]),
    out: &Geom,
    wr: &[T],
    r1: &[f64],
) -> (CpuPMat<T>, Vec<f64>) {
    let (so, si) = (g.shape, out.shape);
    let (kh, kw) = conv.kernel;
    let (wh, ww) = g.win;
    let (cols_in, cols_out) = (a.cols, out.cols());
    let (pos, taps) = (wh * ww, si.c * kh * kw);
    let mut res = vec![T::zero(); a.rows * cols_out];
    let block = (CONV_BLOCK_VALUES / (pos * taps.max(so.c)).max(1)).clamp(1, a.rows.max(1));
    for r0 in (0..a.rows).step_by(block) {
        let nr = block.min(a.rows - r0);
        // Â[(r, y, x), co] = a[r][co][y][x]
        let mut ahat = vec![T::zero(); nr * pos * so.c];
        ahat.par_chunks_mut(pos * so.c).enumerate().for_each(|(r, blk)| {
            let row = &a.a[(r0 + r) * cols_in..(r0 + r + 1) * cols_in];
            for co in 0..so.c {
                for p in 0..pos {
                    blk[p * so.c + co] = row[co * pos + p];
                }
            }
        });
        let t = gemm(&ahat, nr * pos, so.c, w, taps);
        res[r0 * cols_out..(r0 + nr) * cols_out].par_chunks_mut(cols_out.max(1)).enumerate().for_each(|(r, o)| {
            col2im(&t[r * pos * taps..(r + 1) * pos * taps], g, r0 + r, conv, out, o);
        });
    }
    let m = so.c * kh.div_ceil(conv.stride.0) * kw.div_ceil(conv.stride.1);
    let cst = affine_constants(a, g, b, wr, m, r1);
    (CpuPMat { rows: a.rows, cols: cols_out, a: res }, cst)
}

/// Adds `t[(y, x), (ci, ky, kx)]` of row `r` into its input coefficients.
fn col2im<T: Fp>(t: &[T], g: &Geom, r: usize, conv: &Conv2d, out: &Geom, o: &mut [T]) {
    let (so, si) = (g.shape, out.shape);
    let (kh, kw) = conv.kernel;
    let (sh, sw) = conv.stride;
    let (pt, pl) = (conv.pad.0, conv.pad.1);
    let ((wh, ww), (oh, ow)) = (g.win, out.win);
    let ((oy, ox), (qy, qx)) = (g.offsets[r], out.offsets[r]);
    let (y0, y1) = valid(oy, wh, so.h);
    let (x0, x1) = valid(ox, ww, so.w);
    let taps = si.c * kh * kw;
    for y in y0..y1 {
        for x in x0..x1 {
            let tr = &t[(y * ww + x) * taps..(y * ww + x + 1) * taps];
            for ky in 0..kh {
                let iy = (oy + y as i32) as i64 * sh as i64 + ky as i64 - pt as i64;
                if iy < 0 || iy >= si.h as i64 {
                    continue;
                }
                let ty = (iy - qy as i64) as usize;
                for kx in 0..kw {
                    let ix = (ox + x as i32) as i64 * sw as i64 + kx as i64 - pl as i64;
                    if ix < 0 || ix >= si.w as i64 {
                        continue;
                    }
                    let tx = (ix - qx as i64) as usize;
                    for ci in 0..si.c {
                        let v = tr[(ci * kh + ky) * kw + kx];
                        let d = (ci * oh + ty) * ow + tx;
                        o[d] = o[d] + v;
                    }
                }
            }
        }
    }
}
