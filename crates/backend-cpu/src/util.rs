//! Small shared pieces: matrices, window iteration, outward products.

use polycert_deeppoly::Geom;
use polycert_interval::{Fp, fp};

/// Whether a loop is worth the pool, and `map_range`: loops of little work run on the calling thread
/// (deeppoly's `par.rs`: one threshold for the engine and this backend).
pub use polycert_deeppoly::base::par::{map_range, worth};

/// `f` over `(index, row)` of a row-major plane of `cols` columns, in
/// parallel only when its `work` is [`worth`] it.
pub fn map_rows<T: Send, R: Send>(
    a: &mut [T],
    (cols, work): (usize, usize),
    f: impl Fn((usize, &mut [T])) -> R + Sync + Send,
) -> Vec<R> {
    use rayon::prelude::*;
    let c = cols.max(1);
    if worth(work) {
        a.par_chunks_mut(c).enumerate().map(f).collect()
    } else {
        a.chunks_mut(c).enumerate().map(f).collect()
    }
}

/// [`map_rows`] over two planes of the same shape at once.
pub fn map_rows2<T: Send, R: Send>(
    (lo, hi): (&mut [T], &mut [T]),
    (cols, work): (usize, usize),
    f: impl Fn((usize, (&mut [T], &mut [T]))) -> R + Sync + Send,
) -> Vec<R> {
    use rayon::prelude::*;
    let c = cols.max(1);
    if worth(work) {
        lo.par_chunks_mut(c).zip(hi.par_chunks_mut(c)).enumerate().map(f).collect()
    } else {
        lo.chunks_mut(c).zip(hi.chunks_mut(c)).enumerate().map(f).collect()
    }
}

/// The `gemm` crate's threads for a product of `work` multiply-adds.
pub fn gemm_threads(work: usize) -> gemm::Parallelism {
    if worth(work) { gemm::Parallelism::Rayon(0) } else { gemm::Parallelism::None }
}

/// An interval matrix in two planes, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuMat<T> {
    pub rows: usize,
    pub cols: usize,
    pub lo: Vec<T>,
    pub hi: Vec<T>,
}

impl<T: Fp> CpuMat<T> {
    pub fn zeros(rows: usize, cols: usize) -> Self {
        Self { rows, cols, lo: vec![T::zero(); rows * cols], hi: vec![T::zero(); rows * cols] }
    }
}

/// A point-coefficient matrix, one plane, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuPMat<T> {
    pub rows: usize,
    pub cols: usize,
    pub a: Vec<T>,
}

/// Valid window range `[w0, w1)` along one axis for a row at `off` over a
/// node of extent `size`.
#[inline]
pub fn valid(off: i32, win: usize, size: usize) -> (usize, usize) {
    let w0 = (-off).max(0) as usize;
    let w1 = (size as i64 - off as i64).clamp(0, win as i64) as usize;
    (w0.min(w1), w1)
}

/// Column of node neuron `t` (a selected MaxPool input, stored as a float)
/// in row `r`'s window of `g`; the neuron must lie inside the window.
pub fn column_of<T: Fp>(g: &Geom, r: usize, t: T) -> usize {
    let t = t.to_f64_exact() as usize;
    let (s, (qy, qx), (wh, ww)) = (g.shape, g.offsets[r], g.win);
    let (c, hw) = (t / (s.h * s.w), t % (s.h * s.w));
    let (ty, tx) = ((hw / s.w) as i32 - qy, (hw % s.w) as i32 - qx);
    debug_assert!(ty >= 0 && tx >= 0 && (ty as usize) < wh && (tx as usize) < ww);
    (c * wh + ty as usize) * ww + tx as usize
}

/// Calls `f(col, idx)` for every in-range position of row `r`, where `idx`
/// indexes per-(property, neuron) tables: the row's batch slot base plus
/// the neuron.
#[inline]
pub fn for_each_in_window(g: &Geom, r: usize, mut f: impl FnMut(usize, usize)) {
    for (col, idx, len) in runs(g, r) {
        (0..len).for_each(|k| f(col + k, idx + k));
    }
}

/// The runs `(col, idx, len)` of row `r`'s in-range positions that are
/// consecutive both in the row and in the tables (see
/// [`for_each_in_window`]): one for a full row, one per window line
/// otherwise.
#[inline(always)]
pub fn runs(g: &Geom, r: usize) -> Runs {
    let s = g.shape;
    let (wh, ww) = g.win;
    let (oy, ox) = g.offsets[r];
    let base = g.table_base(r) as isize;
    if (oy, ox) == (0, 0) && (wh, ww) == (s.h, s.w) {
        // A full row: columns are neurons.
        let len = s.c * wh * ww;
        return Runs { c: 0, y: 0, y0: 0, ends: (1, 1), col: (0, 0, 0), idx: (base, 0, 0), len };
    }
    let (y0, y1) = valid(oy, wh, s.h);
    let (x0, x1) = valid(ox, ww, s.w);
    let channels = if x0 < x1 { s.c } else { 0 };
    // Window position (c, y, x0) is neuron (c, oy + y, ox + x0).
    let idx0 = base + oy as isize * s.w as isize + ox as isize + x0 as isize;
    let (col, idx) = ((x0, wh * ww, ww), (idx0, s.h * s.w, s.w));
    Runs { c: 0, y: y0, y0, ends: (channels, y1), col, idx, len: x1 - x0 }
}

/// See [`runs`]: window lines `y0 ≤ y < ends.1` of channels `c < ends.0`,
/// each run at `col.0 + c·col.1 + y·col.2` in the row and at `idx.0 +
/// c·idx.1 + y·idx.2` in the tables.
pub struct Runs {
    c: usize,
    y: usize,
    y0: usize,
    ends: (usize, usize),
    col: (usize, usize, usize),
    idx: (isize, usize, usize),
    len: usize,
}

impl Iterator for Runs {
    type Item = (usize, usize, usize);

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let (c, y) = (self.c, self.y);
        if c >= self.ends.0 || y >= self.ends.1 {
            return None;
        }
        let col = self.col.0 + c * self.col.1 + y * self.col.2;
        let idx = (self.idx.0 + (c * self.idx.1 + y * self.idx.2) as isize) as usize;
        (self.c, self.y) = if y + 1 < self.ends.1 { (c, y + 1) } else { (c + 1, self.y0) };
        Some((col, idx, self.len))
    }
}

/// Outward product `a·b` as `(down, up)`.
#[inline(always)]
pub fn mul_outward<T: Fp>(a: T, b: T) -> (T, T) {
    if std::mem::size_of::<T>() == 4 {
        let p = a.to_f64_exact() * b.to_f64_exact(); // exact
        (fp::from_f64_down(p), fp::from_f64_up(p))
    } else {
        (fp::mul_down(a, b), fp::mul_up(a, b))
    }
}

/// Lower end and magnitude of `[al, ah]·[bl, bh]` in f64 (round-to-nearest;
/// the caller widens the sum).
#[inline(always)]
pub fn min_product(al: f64, ah: f64, bl: f64, bh: f64) -> (f64, f64) {
    if al == 0.0 && ah == 0.0 {
        return (0.0, 0.0);
    }
    let p = (al * bl).min(al * bh).min(ah * bl).min(ah * bh);
    let mag = al.abs().max(ah.abs()) * bl.abs().max(bh.abs());
    (p, mag)
}

/// The widening for sums of at most `n` terms: `n` rounded up to a power of
/// two (the bound grows with `n`), computed once per power.
#[inline]
pub fn widening(n: usize) -> polycert_interval::Widening {
    use polycert_interval::Widening;
    static TABLE: std::sync::OnceLock<Vec<Widening>> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| (0..48).map(|k| Widening::for_terms(1usize << k)).collect());
    t.get(n.next_power_of_two().trailing_zeros() as usize).copied().unwrap_or_else(|| Widening::for_terms(n))
}

/// Sound lower bound of an accumulated sum of `n` terms.
#[inline]
pub fn lower_of(n: usize, sum: f64, mag: f64) -> f64 {
    widening(n).apply(sum, sum, mag).0
}

/// Sound upper bound of an accumulated sum of `n` non-negative terms.
#[inline]
pub fn upper_of(n: usize, sum: f64) -> f64 {
    widening(n).apply(sum, sum, sum).1
}

/// Keeps the listed rows of a `cols`-wide plane.
pub fn compact_plane<T: Copy>(a: &[T], cols: usize, keep: &[u32]) -> Vec<T> {
    let mut out = Vec::with_capacity(keep.len() * cols);
    for &r in keep {
        out.extend_from_slice(&a[r as usize * cols..(r as usize + 1) * cols]);
    }
    out
}

/// Columns `[start, start+len)` of every row of a `cols`-wide plane.
pub fn slice_plane<T: Copy>(a: &[T], rows: usize, cols: usize, start: usize, len: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(rows * len);
    for r in 0..rows {
        out.extend_from_slice(&a[r * cols + start..r * cols + start + len]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use polycert_deeppoly::base::par::SERIAL_WORK;

    /// The pool decides only where the rows run: below and above
    /// `SERIAL_WORK` the same rows come back in the same order.
    #[test]
    fn serial_and_parallel_rows_agree() {
        let f = |(r, row): (usize, &mut [f64])| {
            row.iter_mut().enumerate().for_each(|(j, v)| *v = (r * 31 + j) as f64 * 0.5);
            row.iter().sum::<f64>() + r as f64
        };
        let (mut a, mut b) = (vec![0.0; 4000], vec![0.0; 4000]);
        let sa = map_rows(&mut a, (40, 0), f);
        let sb = map_rows(&mut b, (40, SERIAL_WORK), f);
        assert_eq!((sa.len(), &a), (100, &b));
        assert_eq!(sa, sb);
        let g = |(r, (lo, hi)): (usize, (&mut [f64], &mut [f64]))| {
            lo.iter_mut().zip(hi.iter_mut()).for_each(|(l, h)| (*l, *h) = (-(r as f64), r as f64));
            r
        };
        let (mut l1, mut h1, mut l2, mut h2) = (vec![0.0; 90], vec![0.0; 90], vec![0.0; 90], vec![0.0; 90]);
        assert_eq!(map_rows2((&mut l1, &mut h1), (9, 1), g), map_rows2((&mut l2, &mut h2), (9, usize::MAX), g));
        assert_eq!((l1, h1), (l2, h2));
        let r = map_range(1000, 0, |i| i * i);
        assert_eq!(r, map_range(1000, usize::MAX, |i| i * i));
        assert_eq!(r[999], 998_001);
        assert!(matches!(gemm_threads(SERIAL_WORK - 1), gemm::Parallelism::None));
        assert!(matches!(gemm_threads(SERIAL_WORK), gemm::Parallelism::Rayon(0)));
    }
}
