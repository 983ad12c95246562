//! Downloads of row constants that overlap the work queued after them:
//! page-locked host buffers, kept for reuse, and an event that says when the
//! copy is done. The early-termination checks use them to queue the next
//! backsubstitution step before they wait (`gpupoly/backsub.rs`).

use crate::device::driver_err;
use crate::matrix::GpuCst;
use crate::{CudaBackend, trace};
use cudarc::driver::{CudaEvent, DevicePtr, PinnedHostSlice, result};
use polycert_deeppoly::BResult;

/// Buffers kept for reuse, at most.
const KEPT: usize = 8;
/// The smallest buffer made, in values.
const MIN_LEN: usize = 1024;

/// A download in flight.
pub struct CstFetch {
    copy: Option<(PinnedHostSlice<f64>, CudaEvent)>,
    len: usize,
}

impl Drop for CstFetch {
    /// A buffer is freed only after its copy has landed.
    fn drop(&mut self) {
        if let Some((_, done)) = &self.copy {
            let _ = done.synchronize();
        }
    }
}

impl CudaBackend {
    pub(crate) fn fetch_start(&self, c: &GpuCst) -> BResult<CstFetch> {
        if c.len == 0 {
            return Ok(CstFetch { copy: None, len: 0 });
        }
        let _span = self.trace.span("cst_fetch");
        let mut buf = self.pinned_take(c.len)?;
        let stream = &self.dev.stream;
        // The buffer's last copy was waited for: this does not block.
        let dst = &mut buf.as_mut_slice().map_err(|e| driver_err("download", e))?[..c.len];
        let (src, _sync) = c.data.device_ptr(stream);
        // Safety: `dst` holds `c.len` values, `src` at least as many, and
        // the buffer lives (`CstFetch`'s drop) until the copy is done.
        unsafe { result::memcpy_dtoh_async(dst, src, stream.cu_stream()) }.map_err(|e| driver_err("download", e))?;
        // A plain event: waiting on it spins, where the buffer's own event
        // would put the thread to sleep.
        let done = stream.record_event(None).map_err(|e| driver_err("event", e))?;
        Ok(CstFetch { copy: Some((buf, done)), len: c.len })
    }

    pub(crate) fn fetch_wait(&self, mut f: CstFetch) -> BResult<Vec<f64>> {
        let Some((buf, done)) = f.copy.take() else { return Ok(Vec::new()) };
        self.trace.time(trace::DOWNLOAD, || done.synchronize()).map_err(|e| driver_err("download", e))?;
        let v = buf.as_slice().map_err(|e| driver_err("download", e))?[..f.len].to_vec();
        self.pinned_give(buf);
        Ok(v)
    }

    /// A kept buffer of at least `n` values, or a new one.
    fn pinned_take(&self, n: usize) -> BResult<PinnedHostSlice<f64>> {
        let mut kept = self.pinned.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = kept.iter().position(|b| b.len() >= n) {
            return Ok(kept.swap_remove(i));
        }
        drop(kept);
        // Not write-combined: the host reads it.
        unsafe { self.dev.ctx.alloc_pinned_with_flags::<f64>(n.max(MIN_LEN), 0) }
            .map_err(|e| driver_err("page-locked allocation", e))
    }

    fn pinned_give(&self, buf: PinnedHostSlice<f64>) {
        let mut kept = self.pinned.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() < KEPT {
            kept.push(buf);
        }
    }
}
