//! Batched point inference and gradients for the attack: plain GEMMs (the
//! `gemm` crate, any order, FMA), points as rows.

use polycert_deeppoly::{BResult, BackendError};
use polycert_interval::Fp;

/// `Y = X·Wᵀ + b` for `batch` points (`X`: `batch × n_in`, `W` row-major
/// `n_out × n_in`).
pub fn infer_dense<T: Fp>(w: &[T], b: &[T], n_in: usize, x: &[T], batch: usize) -> BResult<Vec<T>> {
    let n_out = b.len();
    if w.len() != n_out * n_in || x.len() != batch * n_in {
        return Err(BackendError::Failure(format!(
            "infer_dense: {} weights, {} inputs for batch {batch} of {n_in} → {n_out}",
            w.len(),
            x.len()
        )));
    }
    let mut y: Vec<T> = (0..batch).flat_map(|_| b.iter().copied()).collect();
    if batch == 0 || n_out == 0 || n_in == 0 {
        return Ok(y);
    }
    // SAFETY: `y` is `batch × n_out`, `x` is `batch × n_in` (both row-major)
    // and `Wᵀ` is read from `W` with unit row stride and column stride n_in.
    unsafe {
        gemm::gemm(
            batch,
            n_out,
            n_in,
            y.as_mut_ptr(),
            1,
            n_out as isize,
            true,
            x.as_ptr(),
            1,
            n_in as isize,
            w.as_ptr(),
            n_in as isize,
            1,
            T::one(),
            T::one(),
            false,
            false,
            false,
            crate::util::gemm_threads(batch * n_out * n_in),
        );
    }
    Ok(y)
}

/// `G·W` per point (`G`: `batch × n_out`).
pub fn grad_dense<T: Fp>(g: &[T], w: &[T], n_in: usize, batch: usize) -> BResult<Vec<T>> {
    let n_out = polycert_deeppoly::base::infer::grad_dense_outputs(g.len(), w.len(), n_in, batch)?;
    Ok(crate::point_affine::gemm(g, batch, n_out, w, n_in))
}
