//! Point-coefficient row operations: the ReLU, diagonal and MaxPool steps,
//! concretization and the residual merge. Each rounding of a coefficient
//! is bounded (`err ≥ |exact − stored|`) and paid as `err·r` in the constant.

use crate::lanes::{self, Lanes};
use crate::rowops::for_each_placed;
use crate::util::{CpuPMat, column_of, for_each_in_window, lower_of, min_product, mul_outward, runs, upper_of};
use polycert_deeppoly::Geom;
use polycert_interval::{Fp, fp};

/// `f` over `(index, row)` of `m` (on the pool when it is large enough).
fn map_rows<T: Fp, R: Send>(m: &mut CpuPMat<T>, f: impl Fn((usize, &mut [T])) -> R + Sync + Send) -> Vec<R> {
    let work = m.a.len();
    crate::util::map_rows(&mut m.a, (m.cols, work), f)
}

/// `g = fl(a·b)` and a bound on `|a·b − g|` for every `b ∈ [b_lo, b_hi]`.
#[inline]
fn product<T: Fp>(a: T, b_lo: T, b_hi: T) -> (T, f64) {
    let g = a * b_lo;
    if !g.is_finite() {
        return (g, f64::INFINITY);
    }
    if b_lo == b_hi {
        if b_lo == T::zero() || b_lo == T::one() {
            return (g, 0.0); // exact
        }
        // Round-to-nearest: |ab − g| ≤ u·|g| + η/2. In f64, 2u·|g| is an exact
        // power-of-two scaling (or underflows by at most η/2) and the sum
        // rounds to at least its larger term.
        let u2 = 2.0 * T::UNIT_ROUNDOFF;
        return (g, u2 * g.to_f64_exact().abs() + 4.0 * T::MIN_SUBNORMAL.to_f64_exact());
    }
    let gf = g.to_f64_exact();
    let (d1, u1) = mul_outward(a, b_lo);
    let (d2, u2) = mul_outward(a, b_hi);
    let err = [fp::sub_up(u1.to_f64_exact(), gf), fp::sub_up(gf, d1.to_f64_exact())]
        .into_iter()
        .chain([fp::sub_up(u2.to_f64_exact(), gf), fp::sub_up(gf, d2.to_f64_exact())])
        .fold(0.0, f64::max);
    (g, err)
}

/// `s = fl(a + b)` and `|a + b − s|` (TwoSum, exact; ∞ when `s` overflows).
#[inline(always)]
fn sum_err<T: Fp>(a: T, b: T) -> (T, f64) {
    let s = a + b;
    let bb = s - a;
    let e = (a - (s - bb)) + (b - bb);
    if s.is_finite() { (s, e.to_f64_exact().abs()) } else { (s, f64::INFINITY) }
}

/// Constant per row: `lower(Σ s) − upper(Σ err·r)`; NaN becomes −∞.
#[inline]
fn constant(n: usize, s: f64, mag: f64, ne: usize, e: f64) -> f64 {
    let c = fp::sub_down(lower_of(n, s, mag), upper_of(ne, e));
    if c.is_nan() { f64::NEG_INFINITY } else { c }
}

/// A diagonal step: `f(a_j, neuron)` gives the new coefficient, its rounding
/// bound and a constant term; the constant pays `Σ err_j·r_j`.
fn diag_rows<T: Fp>(
    a: &CpuPMat<T>,
    g: &Geom,
    r: &[T],
    f: impl Fn(T, usize) -> (T, f64, f64) + Sync,
) -> (CpuPMat<T>, Vec<f64>) {
    let mut out = CpuPMat { rows: a.rows, cols: a.cols, a: vec![T::zero(); a.rows * a.cols] };
    let cols = a.cols;
    let cst = map_rows(&mut out, |(row, o)| {
        let ar = &a.a[row * cols..(row + 1) * cols];
        let (mut s, mut m, mut n, mut e, mut ne) = (0.0, 0.0, 0usize, 0.0, 0usize);
        for_each_in_window(g, row, |j, i| {
            if ar[j] == T::zero() {
                return;
            }
            let (gj, err, p) = f(ar[j], i);
            o[j] = gj;
            if err > 0.0 {
                e += err * r[i].to_f64_exact();
                ne += 1;
            }
            if p != 0.0 {
                s += p;
                m += p.abs();
                n += 1;
            }
        });
        constant(n, s, m, ne, e)
    });
    (out, cst)
}

/// The point ReLU (or σ: `mu.1`, the lower line's intercept) step.
pub fn point_relu<T: Fp>(
    a: &CpuPMat<T>,
    g: &Geom,
    lam: (&[T], &[T]),
    mu: (&[T], Option<&[T]>),
    r: &[T],
) -> (CpuPMat<T>, Vec<f64>) {
    let zeros;
    let mu_lo = match mu.1 {
        Some(v) => v,
        None => {
            zeros = vec![T::zero(); mu.0.len()];
            &zeros
        }
    };
    let mut out = CpuPMat { rows: a.rows, cols: a.cols, a: vec![T::zero(); a.rows * a.cols] };
    let cols = a.cols;
    let cst =
        map_rows(&mut out, |(row, o)| relu_row(&a.a[row * cols..(row + 1) * cols], o, (g, row), lam, (mu.0, mu_lo), r));
    (out, cst)
}

lanes::twin! {
    /// One row of [`point_relu`]: every in-window column's term counted in
    /// the widening.
    fn relu_row<T: Fp>(ar: &[T], o: &mut [T], gr: (&Geom, usize), lam: (&[T], &[T]), mu: (&[T], &[T]), r: &[T]) -> f64 {
        let mut acc = Lanes::new();
        let mut n = 0;
        for (c, i, len) in runs(gr.0, gr.1) {
            let t = i..i + len;
            let tables = ((&lam.0[t.clone()], &lam.1[t.clone()]), (&mu.0[t.clone()], &mu.1[t.clone()]));
            acc.relu_terms(&ar[c..c + len], &mut o[c..c + len], tables.0, tables.1, &r[t]);
            n += len;
        }
        let (s, m, e) = acc.total();
        constant(n, s, m, n, e)
    }
}

/// The point diagonal step through `y = x·[m_lo, m_hi] + [c_lo, c_hi]`.
pub fn point_diag<T: Fp>(
    a: &CpuPMat<T>,
    g: &Geom,
    mm: (&[T], &[T]),
    c: (&[T], &[T]),
    r: &[T],
) -> (CpuPMat<T>, Vec<f64>) {
    diag_rows(a, g, r, |aj, i| {
        let (gj, err) = product(aj, mm.0[i], mm.1[i]);
        let af = aj.to_f64_exact();
        (gj, err, min_product(af, af, c.0[i].to_f64_exact(), c.1[i].to_f64_exact()).0)
    })
}

/// The point MaxPool step: from `a` over the pool output (`g`) to its
/// input (`out`).
pub fn point_maxpool<T: Fp>(
    a: &CpuPMat<T>,
    g: &Geom,
    sel: (&[T], &[T]),
    up: &[T],
    out: &Geom,
    r: &[T],
) -> (CpuPMat<T>, Vec<f64>) {
    let (cols, oc) = (a.cols, out.cols());
    let mut res = CpuPMat { rows: a.rows, cols: oc, a: vec![T::zero(); a.rows * oc] };
    let cst = map_rows(&mut res, |(row, o)| {
        let ar = &a.a[row * cols..(row + 1) * cols];
        let (mut s, mut m, mut n, mut e, mut ne) = (0.0, 0.0, 0usize, 0.0, 0usize);
        for_each_in_window(g, row, |j, i| {
            let aj = ar[j];
            if aj == T::zero() {
                return;
            }
            let target = if aj > T::zero() { sel.0[i] } else { sel.1[i] };
            if target < T::zero() {
                let p = aj.to_f64_exact() * up[i].to_f64_exact();
                s += p;
                m += p.abs();
                n += 1;
                return;
            }
            let k = column_of(out, row, target);
            let (sk, err) = sum_err(o[k], aj);
            o[k] = sk;
            if err != 0.0 {
                e += err * r[out.table_base(row) + target.to_f64_exact() as usize].to_f64_exact();
                ne += 1;
            }
        });
        constant(n, s, m, ne, e)
    });
    (res, cst)
}

/// `dst += src`; per row `−Σ|e_t|·r`, the rounding of the sums.
pub fn point_add_into<T: Fp>(dst: &mut CpuPMat<T>, dg: &Geom, src: &CpuPMat<T>, sg: &Geom, r: &[T]) -> Vec<f64> {
    let sc = src.cols;
    map_rows(dst, |(row, o)| {
        let sr = &src.a[row * sc..(row + 1) * sc];
        let (mut e, mut ne) = (0.0, 0usize);
        for_each_placed(dg, sg, row, |j, t, i| {
            if sr[j] == T::zero() {
                return;
            }
            let (st, err) = sum_err(o[t], sr[j]);
            o[t] = st;
            if err != 0.0 {
                e += err * r[i].to_f64_exact();
                ne += 1;
            }
        });
        constant(0, 0.0, 0.0, ne, e)
    })
}

/// Lower bound of `Σ g_j·x_j` per row over `x ∈ [lo, hi]`: one product per
/// coefficient, the end of `x` chosen by the sign of `g_j`.
pub fn point_concretize<T: Fp>(a: &CpuPMat<T>, g: &Geom, lo: &[T], hi: &[T]) -> Vec<f64> {
    let cols = a.cols;
    crate::util::map_range(a.rows, a.rows * cols, |r| concretize_row(&a.a[r * cols..(r + 1) * cols], (g, r), lo, hi))
}

lanes::twin! {
    /// One row of [`point_concretize`].
    fn concretize_row<T: Fp>(ar: &[T], gr: (&Geom, usize), lo: &[T], hi: &[T]) -> f64 {
        let mut acc = Lanes::new();
        let mut n = 0;
        for (c, i, len) in runs(gr.0, gr.1) {
            acc.min_terms(&ar[c..c + len], &lo[i..i + len], &hi[i..i + len]);
            n += len;
        }
        let (s, m, _) = acc.total();
        constant(n, s, m, 0, 0.0)
    }
}
