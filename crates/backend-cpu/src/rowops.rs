//! Row-wise operations: the ReLU and diagonal steps, concretization,
//! compaction and the residual merge.

use crate::util::{CpuMat, compact_plane, for_each_in_window, lower_of, min_product, mul_outward, slice_plane, valid};
use polycert_deeppoly::Geom;
use polycert_interval::{Fp, Interval, fp};

/// `f` over `(index, (lo, hi))` of `m`'s rows (on the pool when it is
/// large enough).
fn map_rows<T: Fp, R: Send>(m: &mut CpuMat<T>, f: impl Fn((usize, (&mut [T], &mut [T]))) -> R + Sync + Send) -> Vec<R> {
    let work = m.lo.len();
    crate::util::map_rows2((&mut m.lo, &mut m.hi), (m.cols, work), f)
}

/// The ReLU step. Coefficients collapse to their lower end (`y ≥ 0`).
/// (`mu.1`: the lower line's intercept, σ; `None` for ReLU's 0.)
pub fn relu_backsub<T: Fp>(
    a: &CpuMat<T>,
    g: &Geom,
    lam_lo: &[T],
    lam_up: &[T],
    (mu_up, mu_lo): (&[T], Option<&[T]>),
) -> (CpuMat<T>, Vec<f64>) {
    let mut out = CpuMat::zeros(a.rows, a.cols);
    let cols = a.cols;
    let cst = map_rows(&mut out, |(r, (olo, ohi))| {
        let alo = &a.lo[r * cols..(r + 1) * cols];
        let (mut s, mut m, mut n) = (0.0, 0.0, 0usize);
        for_each_in_window(g, r, |j, i| {
            let al = alo[j];
            if al == T::zero() {
                return;
            }
            let lam = if al > T::zero() { lam_lo[i] } else { lam_up[i] };
            (olo[j], ohi[j]) = mul_outward(al, lam);
            let mu = if al < T::zero() { mu_up[i] } else { mu_lo.map_or(T::zero(), |v| v[i]) };
            if mu != T::zero() {
                s += al.to_f64_exact() * mu.to_f64_exact();
                m += (al.to_f64_exact() * mu.to_f64_exact()).abs();
                n += 1;
            }
        });
        lower_of(n, s, m)
    });
    (out, cst)
}

/// The diagonal step through `y = x·m + c`.
pub fn diag_backsub<T: Fp>(a: &CpuMat<T>, g: &Geom, m: (&[T], &[T]), c: (&[T], &[T])) -> (CpuMat<T>, Vec<f64>) {
    let mut out = CpuMat::zeros(a.rows, a.cols);
    let cols = a.cols;
    let cst = map_rows(&mut out, |(r, (olo, ohi))| {
        let (alo, ahi) = (&a.lo[r * cols..(r + 1) * cols], &a.hi[r * cols..(r + 1) * cols]);
        let (mut s, mut mg, mut n) = (0.0, 0.0, 0usize);
        for_each_in_window(g, r, |j, i| {
            if alo[j] == T::zero() && ahi[j] == T::zero() {
                return;
            }
            let ai = Interval::new_unchecked(alo[j], ahi[j]);
            let p = ai.mul(Interval::new_unchecked(m.0[i], m.1[i]));
            (olo[j], ohi[j]) = (p.lo(), p.hi());
            let (q, g2) =
                min_product(alo[j].to_f64_exact(), ahi[j].to_f64_exact(), c.0[i].to_f64_exact(), c.1[i].to_f64_exact());
            s += q;
            mg += g2;
            n += 1;
        });
        lower_of(n, s, mg)
    });
    (out, cst)
}

/// Lower bound of `Σ a_j·x_j` per row over `x ∈ [lo, hi]`.
pub fn concretize<T: Fp>(a: &CpuMat<T>, g: &Geom, lo: &[T], hi: &[T]) -> Vec<f64> {
    let cols = a.cols;
    crate::util::map_range(a.rows, a.rows * cols, |r| {
        let (alo, ahi) = (&a.lo[r * cols..(r + 1) * cols], &a.hi[r * cols..(r + 1) * cols]);
        let (mut s, mut m, mut n) = (0.0, 0.0, 0usize);
        let mut term = |j: usize, i: usize| {
            let (p, q) =
                min_product(alo[j].to_f64_exact(), ahi[j].to_f64_exact(), lo[i].to_f64_exact(), hi[i].to_f64_exact());
            s += p;
            m += q;
            n += 1;
        };
        if g.is_full() {
            let base = g.table_base(r);
            (0..cols).for_each(|j| term(j, base + j));
        } else {
            for_each_in_window(g, r, term);
        }
        lower_of(n, s, m)
    })
}

/// Keeps the listed rows.
pub fn compact<T: Fp>(a: &CpuMat<T>, keep: &[u32]) -> CpuMat<T> {
    let c = a.cols;
    CpuMat { rows: keep.len(), cols: c, lo: compact_plane(&a.lo, c, keep), hi: compact_plane(&a.hi, c, keep) }
}

/// `dst += src`, placing each source window inside the destination window.
pub fn add_into<T: Fp>(dst: &mut CpuMat<T>, dg: &Geom, src: &CpuMat<T>, sg: &Geom) {
    let sc = src.cols;
    map_rows(dst, |(r, (olo, ohi))| {
        let (slo, shi) = (&src.lo[r * sc..(r + 1) * sc], &src.hi[r * sc..(r + 1) * sc]);
        for_each_placed(dg, sg, r, |j, t, _| {
            if slo[j] == T::zero() && shi[j] == T::zero() {
                return;
            }
            olo[t] = fp::add_down(olo[t], slo[j]);
            ohi[t] = fp::add_up(ohi[t], shi[j]);
        });
    });
}

/// Calls `f(src_col, dst_col, idx)` for every in-range position of row
/// `r` of a source window `sg` placed in a destination window `dg`; `idx`
/// indexes per-(property, neuron) tables.
pub fn for_each_placed(dg: &Geom, sg: &Geom, r: usize, mut f: impl FnMut(usize, usize, usize)) {
    let s = sg.shape;
    let base = sg.table_base(r);
    let ((swh, sww), (dh, dw)) = (sg.win, dg.win);
    let ((oy, ox), (dy, dx)) = (sg.offsets[r], dg.offsets[r]);
    let (y0, y1) = valid(oy, swh, s.h);
    let (x0, x1) = valid(ox, sww, s.w);
    if y0 >= y1 || x0 >= x1 {
        return;
    }
    let inside = |o: i32, d: i32, a: usize, b: usize, n: usize| o + a as i32 - d >= 0 && o + b as i32 - d <= n as i32;
    assert!(inside(oy, dy, y0, y1, dh) && inside(ox, dx, x0, x1, dw), "add_into: source outside window");
    for c in 0..s.c {
        for wy in y0..y1 {
            let gy = (oy + wy as i32) as usize;
            let ty = (oy + wy as i32 - dy) as usize;
            let (src, dst, nrn) = ((c * swh + wy) * sww, (c * dh + ty) * dw, base + (c * s.h + gy) * s.w);
            for wx in x0..x1 {
                let gx = (ox + wx as i32) as usize;
                f(src + wx, dst + (ox + wx as i32 - dx) as usize, nrn + gx);
            }
        }
    }
}

/// Columns `[start, start+len)` of every row.
pub fn slice_cols<T: Fp>(a: &CpuMat<T>, start: usize, len: usize) -> CpuMat<T> {
    let (lo, hi) = (slice_plane(&a.lo, a.rows, a.cols, start, len), slice_plane(&a.hi, a.rows, a.cols, start, len));
    CpuMat { rows: a.rows, cols: len, lo, hi }
}
