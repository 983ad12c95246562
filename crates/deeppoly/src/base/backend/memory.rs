//! [`MemoryOps`]: vectors on the backend and the transfers to and from them.

use super::{BResult, BackendError, check_repeat_rows, out_of_range};
use polycert_interval::Fp;

/// Vectors of `T` on the backend (weights, biases, bounds, relaxation
/// tables, points) and their transfers. Every operation moves or copies
/// values exactly: none rounds. The defaults go through the host.
pub trait MemoryOps<T: Fp>: Send + Sync {
    /// A vector of `T` on the backend.
    type Buf: Send + Sync;

    fn upload(&self, data: &[T]) -> BResult<Self::Buf>;
    fn download(&self, buf: &Self::Buf) -> BResult<Vec<T>>;

    /// `n` zeros.
    fn zeros(&self, n: usize) -> BResult<Self::Buf> {
        self.upload(&vec![T::zero(); n])
    }

    /// `x[idx[k]]` for every `k`: a sparse download.
    fn gather(&self, x: &Self::Buf, idx: &[u32]) -> BResult<Vec<T>> {
        let v = self.download(x)?;
        idx.iter().map(|&i| v.get(i as usize).copied().ok_or_else(|| out_of_range("gather", i, v.len()))).collect()
    }

    /// Several gathers (`parts[k] = (x, idx)`) in one transfer.
    fn gather_many(&self, parts: &[(&Self::Buf, &[u32])]) -> BResult<Vec<Vec<T>>> {
        parts.iter().map(|(x, idx)| self.gather(x, idx)).collect()
    }

    /// A copy of `base` with `vals[k]` at `idx[k]`: a sparse upload.
    fn scatter(&self, base: &Self::Buf, idx: &[u32], vals: &[T]) -> BResult<Self::Buf> {
        if idx.len() != vals.len() {
            return Err(BackendError::Failure(format!("scatter: {} indices for {} values", idx.len(), vals.len())));
        }
        let mut v = self.download(base)?;
        let n = v.len();
        for (&i, &x) in idx.iter().zip(vals) {
            *v.get_mut(i as usize).ok_or_else(|| out_of_range("scatter", i, n))? = x;
        }
        self.upload(&v)
    }

    /// Several scatters (`parts[k] = (base, idx, vals)`) in one transfer.
    fn scatter_many(&self, parts: &[(&Self::Buf, &[u32], &[T])]) -> BResult<Vec<Self::Buf>> {
        parts.iter().map(|(b, i, v)| self.scatter(b, i, v)).collect()
    }

    /// Row `rows[r]` of `x` (rows of `n` values) as row `r` of the result:
    /// a table kept per slot, repeated for each of the slot's output rows.
    fn repeat_rows(&self, x: &Self::Buf, n: usize, rows: &[u32]) -> BResult<Self::Buf> {
        let v = self.download(x)?;
        check_repeat_rows(v.len(), n, rows)?;
        self.upload(&rows.iter().flat_map(|&r| &v[r as usize * n..][..n]).copied().collect::<Vec<T>>())
    }

    /// `dst[dst_at..][..len] = src[src_at..][..len]`. Backends that record
    /// graphs copy in place (the default replaces `dst`).
    fn copy_range(
        &self,
        dst: &mut Self::Buf,
        dst_at: usize,
        src: &Self::Buf,
        src_at: usize,
        len: usize,
    ) -> BResult<()> {
        let (mut d, s) = (self.download(dst)?, self.download(src)?);
        match (d.get_mut(dst_at..dst_at + len), s.get(src_at..src_at + len)) {
            (Some(d), Some(s)) => d.copy_from_slice(s),
            _ => return Err(BackendError::Failure(format!("copy_range: {len} values out of range"))),
        }
        *dst = self.upload(&d)?;
        Ok(())
    }
}
