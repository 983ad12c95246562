//! [`MemoryOps`] on the GPU: device vectors, transfers, and the sparse
//! transfers (gathers, scatters) and copies of `kernels/infer.cu`, each
//! batched into as few transfers as it can.

use crate::device::driver_err;
use crate::{CudaBackend, GpuBuf, GpuScalar, grid_for};
use cudarc::driver::PushKernelArg;
use polycert_deeppoly::{BResult, BackendError, MemoryOps};

impl<T: GpuScalar> MemoryOps<T> for CudaBackend {
    type Buf = GpuBuf<T>;

    fn upload(&self, data: &[T]) -> BResult<GpuBuf<T>> {
        let _span = self.trace.span("upload");
        Ok(GpuBuf { data: self.htod(data)?, len: data.len() })
    }

    fn download(&self, buf: &GpuBuf<T>) -> BResult<Vec<T>> {
        let _span = self.trace.span("download");
        self.dtoh(&buf.data, buf.len)
    }

    fn zeros(&self, n: usize) -> BResult<GpuBuf<T>> {
        Ok(GpuBuf { data: self.alloc(n)?, len: n })
    }

    /// One part of [`MemoryOps::gather_many`] (whose span it shares).
    fn gather(&self, x: &GpuBuf<T>, idx: &[u32]) -> BResult<Vec<T>> {
        Ok(self.gather_many(&[(x, idx)])?.into_iter().next().unwrap_or_default())
    }

    /// Every part's indices up in one transfer, one gather kernel per part
    /// into one buffer, and that buffer down in one transfer.
    fn gather_many(&self, parts: &[(&GpuBuf<T>, &[u32])]) -> BResult<Vec<Vec<T>>> {
        let _span = self.trace.span("gather");
        for (x, idx) in parts {
            check_indices("gather", idx, x.len)?;
        }
        let total: usize = parts.iter().map(|p| p.1.len()).sum();
        if total == 0 {
            return Ok(parts.iter().map(|_| Vec::new()).collect());
        }
        let all: Vec<u32> = parts.iter().flat_map(|p| p.1.iter().copied()).collect();
        let d_idx = self.htod(&all)?;
        let mut y = self.alloc_written::<T>(total)?;
        let mut at = 0;
        for (x, idx) in parts {
            let k = idx.len();
            if k > 0 {
                let (src, mut dst, k64) = (d_idx.slice(at..at + k), y.slice_mut(at..at + k), k as u64);
                let mut l = self.dev.stream.launch_builder(self.dev.func("gather", T::SUFFIX));
                l.arg(&x.data).arg(&src).arg(&mut dst).arg(&k64);
                unsafe { l.launch(grid_for(k)) }.map_err(|e| driver_err("gather", e))?;
            }
            at += k;
        }
        let mut flat = self.dtoh(&y, total)?.into_iter();
        Ok(parts.iter().map(|p| flat.by_ref().take(p.1.len()).collect()).collect())
    }

    /// One part of [`MemoryOps::scatter_many`] (whose span it shares).
    fn scatter(&self, base: &GpuBuf<T>, idx: &[u32], vals: &[T]) -> BResult<GpuBuf<T>> {
        self.scatter_many(&[(base, idx, vals)])?.pop().ok_or_else(|| BackendError::Failure("scatter: no output".into()))
    }

    /// Every part's indices and values up in one transfer each, then per
    /// part a copy of its base and one scatter kernel.
    fn scatter_many(&self, parts: &[(&GpuBuf<T>, &[u32], &[T])]) -> BResult<Vec<GpuBuf<T>>> {
        let _span = self.trace.span("scatter");
        for (base, idx, vals) in parts {
            if idx.len() != vals.len() {
                return Err(BackendError::Failure(format!("scatter: {} indices for {} values", idx.len(), vals.len())));
            }
            check_indices("scatter", idx, base.len)?;
        }
        let all_idx: Vec<u32> = parts.iter().flat_map(|p| p.1.iter().copied()).collect();
        let all_vals: Vec<T> = parts.iter().flat_map(|p| p.2.iter().copied()).collect();
        let dev = if all_idx.is_empty() { None } else { Some((self.htod(&all_idx)?, self.htod(&all_vals)?)) };
        let mut out = Vec::with_capacity(parts.len());
        let mut at = 0;
        for (base, idx, _) in parts {
            let mut y = self.dev.stream.clone_dtod(&base.data).map_err(|e| driver_err("scatter", e))?;
            let k = idx.len();
            if let (Some((d_idx, d_v)), true) = (&dev, k > 0) {
                let (i, v, k64) = (d_idx.slice(at..at + k), d_v.slice(at..at + k), k as u64);
                let mut l = self.dev.stream.launch_builder(self.dev.func("scatter", T::SUFFIX));
                l.arg(&mut y).arg(&i).arg(&v).arg(&k64);
                unsafe { l.launch(grid_for(k)) }.map_err(|e| driver_err("scatter", e))?;
            }
            at += k;
            out.push(GpuBuf { data: y, len: base.len });
        }
        Ok(out)
    }

    fn repeat_rows(&self, x: &GpuBuf<T>, n: usize, rows: &[u32]) -> BResult<GpuBuf<T>> {
        let _span = self.trace.span("repeat_rows");
        polycert_deeppoly::check_repeat_rows(x.len, n, rows)?;
        let total = rows.len() * n;
        if total == 0 {
            return Ok(GpuBuf { data: self.alloc::<T>(0)?, len: 0 });
        }
        let d_rows = self.htod(rows)?;
        let (y, n64, t64) = (self.alloc_written::<T>(total)?, n as u64, total as u64);
        let mut l = self.dev.stream.launch_builder(self.dev.func("repeat_rows", T::SUFFIX));
        l.arg(&x.data).arg(&d_rows).arg(&y).arg(&n64).arg(&t64);
        unsafe { l.launch(grid_for(total)) }.map_err(|e| driver_err("repeat_rows", e))?;
        Ok(GpuBuf { data: y, len: total })
    }

    /// In place, on the device (a recorded graph may hold it).
    fn copy_range(
        &self,
        dst: &mut GpuBuf<T>,
        dst_at: usize,
        src: &GpuBuf<T>,
        src_at: usize,
        len: usize,
    ) -> BResult<()> {
        if dst_at + len > dst.len || src_at + len > src.len {
            return Err(BackendError::Failure(format!("copy_range: {len} values out of range")));
        }
        if len == 0 {
            return Ok(());
        }
        let from = src.data.slice(src_at..src_at + len);
        let mut to = dst.data.slice_mut(dst_at..dst_at + len);
        self.dev.stream.memcpy_dtod(&from, &mut to).map_err(|e| driver_err("copy", e))
    }
}

/// The largest index of `idx`, checked against a buffer of `len` values.
fn check_indices(what: &str, idx: &[u32], len: usize) -> BResult<()> {
    match idx.iter().copied().max() {
        Some(i) if i as usize >= len => Err(polycert_deeppoly::out_of_range(what, i, len)),
        _ => Ok(()),
    }
}
