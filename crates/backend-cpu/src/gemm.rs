//! Dense backsubstitution: the interval × scalar GEMM `A·W`, blocked for
//! the cache, rows in parallel.

use crate::util::CpuMat;
use polycert_deeppoly::{Geom, Shape};
use polycert_interval::{Fp, Interval, kernels};

/// Rows per block (share each streamed row of `W`).
const ROW_BLOCK: usize = 8;
/// Output columns per tile (accumulators stay in L2).
const COL_TILE: usize = 512;

/// `A (rows × n_out) · W (n_out × n_in)`, plus `min(A·b)` per row.
pub fn dense_backsub<T: Fp>(a: &CpuMat<T>, w: &[T], n_in: usize, b_lo: &[T], b_hi: &[T]) -> (CpuMat<T>, Vec<f64>) {
    let n_out = a.cols;
    assert_eq!(w.len(), n_out * n_in, "dense_backsub: weight shape");
    let mut out = CpuMat::zeros(a.rows, n_in);
    let block_len = ROW_BLOCK * n_in.max(1);
    let work = a.rows * n_out * n_in;
    crate::util::map_rows2((&mut out.lo, &mut out.hi), (block_len, work), |(bi, (olo, ohi))| {
        let r0 = bi * ROW_BLOCK;
        let nr = olo.len() / n_in.max(1);
        let tile = COL_TILE.min(n_in.max(1));
        let mut acc = vec![0.0f64; 3 * nr * tile];
        for c0 in (0..n_in).step_by(tile) {
            let tw = tile.min(n_in - c0);
            acc.iter_mut().for_each(|v| *v = 0.0);
            for k in 0..n_out {
                let wk = &w[k * n_in + c0..k * n_in + c0 + tw];
                for r in 0..nr {
                    let i = (r0 + r) * n_out + k;
                    let (al, ah) = (a.lo[i], a.hi[i]);
                    if al == T::zero() && ah == T::zero() {
                        continue;
                    }
                    let base = 3 * r * tile;
                    let (lo, rest) = acc[base..base + 3 * tile].split_at_mut(tile);
                    let (hi, mag) = rest.split_at_mut(tile);
                    kernels::axpy(lo, hi, mag, Interval::new_unchecked(al, ah), wk);
                }
            }
            for r in 0..nr {
                let base = 3 * r * tile;
                let (lo, rest) = acc[base..base + 3 * tile].split_at(tile);
                let (hi, mag) = rest.split_at(tile);
                let o = r * n_in + c0;
                kernels::finish_planes(
                    n_out,
                    &lo[..tw],
                    &hi[..tw],
                    &mag[..tw],
                    &mut olo[o..o + tw],
                    &mut ohi[o..o + tw],
                );
            }
        }
    });
    // The constants `min(A·b)` are a concretization of A over the bias box.
    let cst = crate::rowops::concretize(a, &Geom::full(Shape::flat(n_out), a.rows), b_lo, b_hi);
    (out, cst)
}
