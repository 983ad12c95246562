//! Batched point inference and gradients for the attack: cuBLAS GEMMs
//! with the points as rows, and the elementwise kernels of
//! `kernels/infer.cu`. No step synchronises.

use crate::device::driver_err;
use crate::point_ops::gemm_rm;
use crate::{CudaBackend, GpuBuf, GpuScalar, grid_for};
use cudarc::cublas::{GemmConfig, sys as blas_sys};
use cudarc::driver::{CudaGraph, CudaSlice, PushKernelArg};
use polycert_deeppoly::{BResult, BackendError, Conv2d, Geom, Pointwise, Shape, base::infer::conv_out_shape};

fn failure(msg: String) -> BackendError {
    BackendError::Failure(msg)
}

impl CudaBackend {
    fn buf<T>(&self, data: CudaSlice<T>, len: usize) -> GpuBuf<T> {
        GpuBuf { data, len }
    }

    /// `Y = X·Wᵀ + b`: `Y` filled with the bias, then one GEMM with β = 1
    /// (in cuBLAS's column-major view, `Yᵀ = W·Xᵀ` with `W` transposed).
    pub(crate) fn i_dense<T: GpuScalar>(
        &self,
        w: &GpuBuf<T>,
        b: &GpuBuf<T>,
        n_in: usize,
        x: &GpuBuf<T>,
        batch: usize,
    ) -> BResult<GpuBuf<T>> {
        let n_out = b.len;
        if w.len != n_out * n_in || x.len != batch * n_in {
            return Err(failure(format!("infer_dense: {} weights, {} inputs for batch {batch}", w.len, x.len)));
        }
        let total = batch * n_out;
        let mut y = self.alloc_written::<T>(total)?;
        if total == 0 {
            return Ok(self.buf(y, 0));
        }
        let (n, t) = (n_out as u64, total as u64);
        let mut l = self.dev.stream.launch_builder(self.dev.func("infer_bias", T::SUFFIX));
        l.arg(&mut y).arg(&b.data).arg(&n).arg(&t);
        unsafe { l.launch(grid_for(total)) }.map_err(|e| driver_err("infer_bias", e))?;
        if n_in > 0 {
            let big = |v: usize| i32::try_from(v).is_err();
            if big(batch) || big(n_in) || big(n_out) {
                return Err(failure(format!("GEMM {batch}x{n_in}x{n_out} exceeds cuBLAS's 32-bit sizes")));
            }
            let cfg = GemmConfig {
                transa: blas_sys::cublasOperation_t::CUBLAS_OP_T,
                transb: blas_sys::cublasOperation_t::CUBLAS_OP_N,
                m: n_out as i32,
                n: batch as i32,
                k: n_in as i32,
                alpha: T::one(),
                lda: n_in as i32,
                ldb: n_in as i32,
                beta: T::one(),
                ldc: n_out as i32,
            };
            unsafe { T::gemm(self.blas()?, cfg, &w.data, &x.data, &mut y) }
                .map_err(|e| failure(format!("cuBLAS GEMM: {e:?}")))?;
        }
        Ok(self.buf(y, total))
    }

    /// `G·W` per point.
    pub(crate) fn i_grad_dense<T: GpuScalar>(
        &self,
        g: &GpuBuf<T>,
        w: &GpuBuf<T>,
        n_in: usize,
        batch: usize,
    ) -> BResult<GpuBuf<T>> {
        let n_out = polycert_deeppoly::base::infer::grad_dense_outputs(g.len, w.len, n_in, batch)?;
        let mut out = self.alloc::<T>(batch * n_in)?;
        gemm_rm(self.blas()?, &g.data, batch, n_out, &w.data, n_in, &mut out)?;
        Ok(self.buf(out, batch * n_in))
    }

    /// The transposed conv per point: the conv backsubstitution's GEMMs
    /// with one full-window row per point.
    pub(crate) fn i_grad_conv<T: GpuScalar>(
        &self,
        c: &Conv2d,
        w: &GpuBuf<T>,
        input: Shape,
        g: &GpuBuf<T>,
        batch: usize,
    ) -> BResult<GpuBuf<T>> {
        let so = conv_out_shape(c, input);
        if g.len != batch * so.numel() || w.len != c.weight.len() {
            return Err(failure(format!("grad_conv: {} gradients for batch {batch} of {}", g.len, so.numel())));
        }
        let m = self.conv_rows(&g.data, batch, &Geom::full(so, batch), c, &w.data, &Geom::full(input, batch))?;
        Ok(self.buf(m.a, batch * input.numel()))
    }

    /// One elementwise kernel `pw_<name>` over the op's operands (a device
    /// copy for `Copy`).
    pub(crate) fn i_pointwise<T: GpuScalar>(&self, op: Pointwise<'_, GpuBuf<T>>) -> BResult<GpuBuf<T>> {
        let total = pointwise_len(&op)?;
        if let Pointwise::Copy(x) = op {
            let data = self.dev.stream.clone_dtod(&x.data).map_err(|e| driver_err("copy", e))?;
            return Ok(self.buf(data, total));
        }
        let y = self.alloc_written::<T>(total)?;
        if total == 0 {
            return Ok(self.buf(y, 0));
        }
        let t = total as u64;
        let name = format!("pw_{}", op.name());
        let mut l = self.dev.stream.launch_builder(self.dev.func(&name, T::SUFFIX));
        let n;
        match op {
            Pointwise::Relu(x) | Pointwise::Sigmoid(x) => l.arg(&x.data),
            Pointwise::ReluGrad { g, x } => l.arg(&g.data).arg(&x.data),
            Pointwise::SigmoidGrad { g, y } => l.arg(&g.data).arg(&y.data),
            Pointwise::Add(a, b) => l.arg(&a.data).arg(&b.data),
            Pointwise::Scale { x, m, c } => {
                n = m.len as u64;
                l.arg(&x.data).arg(&m.data).arg(&c.data).arg(&n)
            }
            Pointwise::SignStep { x, g, lo, hi, alpha } => {
                l.arg(&x.data).arg(&g.data).arg(&lo.data).arg(&hi.data).arg(&alpha.data)
            }
            Pointwise::RelaxBack { g, up, lo } => l.arg(&g.data).arg(&up.data).arg(&lo.data),
            Pointwise::RelaxLine { x, g, up, icpt, lo } => {
                l.arg(&x.data).arg(&g.data).arg(&up.data).arg(&icpt.data).arg(&lo.data)
            }
            Pointwise::Select { a, pos, neg } => l.arg(&a.data).arg(&pos.data).arg(&neg.data),
            Pointwise::SlopeGrad { g, x, free } => l.arg(&g.data).arg(&x.data).arg(&free.data),
            Pointwise::Copy(_) => unreachable!("copied above"),
        };
        l.arg(&y).arg(&t);
        unsafe { l.launch(grid_for(total)) }.map_err(|e| driver_err(&name, e))?;
        Ok(self.buf(y, total))
    }

    pub(crate) fn i_copy_range<T: GpuScalar>(
        &self,
        dst: &mut GpuBuf<T>,
        dst_at: usize,
        src: &GpuBuf<T>,
        src_at: usize,
        len: usize,
    ) -> BResult<()> {
        if dst_at + len > dst.len || src_at + len > src.len {
            return Err(failure(format!("copy_range: {len} values out of range")));
        }
        if len == 0 {
            return Ok(());
        }
        let from = src.data.slice(src_at..src_at + len);
        let mut to = dst.data.slice_mut(dst_at..dst_at + len);
        self.dev.stream.memcpy_dtod(&from, &mut to).map_err(|e| driver_err("copy", e))
    }

    /// The largest index of `idx`, checked against a buffer of `len` values.
    fn check_indices(what: &str, idx: &[u32], len: usize) -> BResult<()> {
        match idx.iter().copied().max() {
            Some(i) if i as usize >= len => Err(polycert_deeppoly::out_of_range(what, i, len)),
            _ => Ok(()),
        }
    }

    /// Every part's indices up in one transfer, one gather kernel per part
    /// into one buffer, and that buffer down in one transfer.
    pub(crate) fn i_gather_many<T: GpuScalar>(&self, parts: &[(&GpuBuf<T>, &[u32])]) -> BResult<Vec<Vec<T>>> {
        for (x, idx) in parts {
            Self::check_indices("gather", idx, x.len)?;
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

    pub(crate) fn i_repeat_rows<T: GpuScalar>(&self, x: &GpuBuf<T>, n: usize, rows: &[u32]) -> BResult<GpuBuf<T>> {
        polycert_deeppoly::check_repeat_rows(x.len, n, rows)?;
        let total = rows.len() * n;
        if total == 0 {
            return Ok(self.buf(self.alloc::<T>(0)?, 0));
        }
        let d_rows = self.htod(rows)?;
        let (y, n64, t64) = (self.alloc_written::<T>(total)?, n as u64, total as u64);
        let mut l = self.dev.stream.launch_builder(self.dev.func("repeat_rows", T::SUFFIX));
        l.arg(&x.data).arg(&d_rows).arg(&y).arg(&n64).arg(&t64);
        unsafe { l.launch(grid_for(total)) }.map_err(|e| driver_err("repeat_rows", e))?;
        Ok(self.buf(y, total))
    }

    /// Every part's indices and values up in one transfer each, then per
    /// part a copy of its base and one scatter kernel.
    pub(crate) fn i_scatter_many<T: GpuScalar>(&self, parts: &[(&GpuBuf<T>, &[u32], &[T])]) -> BResult<Vec<GpuBuf<T>>> {
        for (base, idx, vals) in parts {
            if idx.len() != vals.len() {
                return Err(failure(format!("scatter: {} indices for {} values", idx.len(), vals.len())));
            }
            Self::check_indices("scatter", idx, base.len)?;
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
            out.push(self.buf(y, base.len));
        }
        Ok(out)
    }

    /// Records the calls of `f` on this backend's stream as a CUDA graph.
    /// Not with cudarc's cross-stream events (a capture cannot hold them);
    /// a call that cannot be recorded (a sync, a host transfer) ends the
    /// capture and gives `None`, as does a stream that cannot be captured.
    /// Also `None` while workers share the context (`Device::shares_context`).
    pub(crate) fn i_capture(&self, f: &mut dyn FnMut() -> BResult<()>) -> BResult<Option<CudaGraph>> {
        if self.dev.ctx.is_event_tracking() || self.dev.shares_context() {
            return Ok(None);
        }
        let mode = cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        if self.dev.stream.begin_capture(mode).is_err() {
            let _ = self.dev.ctx.check_err();
            return Ok(None);
        }
        let recorded = f();
        let graph = self.dev.stream.end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0));
        match (recorded, graph) {
            (Ok(()), Ok(g)) => Ok(g),
            _ => {
                // Clear what the failed capture left (errors of frees).
                let _ = self.dev.ctx.check_err();
                Ok(None)
            }
        }
    }

    pub(crate) fn i_replay(&self, g: &CudaGraph) -> BResult<()> {
        g.launch().map_err(|e| driver_err("graph launch", e))
    }
}

/// The output length of a pointwise op, checking that its operands agree
/// (the same length, or whole tables for `Scale`).
fn pointwise_len<T: GpuScalar>(op: &Pointwise<'_, GpuBuf<T>>) -> BResult<usize> {
    let same = |a: &GpuBuf<T>, b: &GpuBuf<T>| {
        if a.len == b.len { Ok(a.len) } else { Err(failure(format!("{}: {} and {} values", op.name(), a.len, b.len))) }
    };
    Ok(match *op {
        Pointwise::Relu(x) | Pointwise::Sigmoid(x) | Pointwise::Copy(x) => x.len,
        Pointwise::ReluGrad { g, x } => same(g, x)?,
        Pointwise::SigmoidGrad { g, y } => same(g, y)?,
        Pointwise::Add(a, b) => same(a, b)?,
        Pointwise::Scale { x, m, c } => {
            same(m, c)?;
            if m.len == 0 || !x.len.is_multiple_of(m.len) {
                return Err(failure(format!("scale: {} values with tables of {}", x.len, m.len)));
            }
            x.len
        }
        Pointwise::SignStep { x, g, lo, hi, alpha } => {
            if alpha.len == 0 {
                return Err(failure("sign_step: no step size".into()));
            }
            same(x, g)?;
            same(x, lo)?;
            same(x, hi)?
        }
        Pointwise::RelaxBack { g, up, lo } => {
            same(g, up)?;
            same(g, lo)?
        }
        Pointwise::RelaxLine { x, g, up, icpt, lo } => {
            same(x, g)?;
            same(x, up)?;
            same(x, icpt)?;
            same(x, lo)?
        }
        Pointwise::Select { a, pos, neg } => {
            same(a, pos)?;
            same(a, neg)?
        }
        Pointwise::SlopeGrad { g, x, free } => {
            same(g, x)?;
            same(g, free)?
        }
    })
}
