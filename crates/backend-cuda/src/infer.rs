//! [`InferOps`] on the GPU. The forward interval pass of affine layers:
//! per (slot, neuron) the output interval and the constant interval (bias ±
//! the float inference's rounding bound), by kernels from
//! `kernels/deeppoly.cu`. Batched point inference and gradients for the
//! attack: cuBLAS GEMMs with the points as rows, and the elementwise
//! kernels of `kernels/infer.cu`. No step synchronises.

use crate::blas::gemm_rm;
use crate::device::driver_err;
use crate::{CudaBackend, GpuBuf, GpuScalar, batched, cached, check_batch, grid_for, kconv, kgeom};
use cudarc::cublas::{GemmConfig, sys as blas_sys};
use cudarc::driver::{CudaSlice, PushKernelArg};
use polycert_deeppoly::base::infer::conv_out_shape;
use polycert_deeppoly::{AffineForward, BResult, BackendError, Conv2d, FloatModel, Geom, InferOps, Pointwise, Shape};
use polycert_interval::fp;

fn failure(msg: String) -> BackendError {
    BackendError::Failure(msg)
}

impl<T: GpuScalar> InferOps<T> for CudaBackend {
    fn forward_dense(
        &self,
        w: &GpuBuf<T>,
        bias: &GpuBuf<T>,
        n_in: usize,
        x: (&GpuBuf<T>, &GpuBuf<T>),
        batch: usize,
        model: FloatModel,
    ) -> BResult<AffineForward<GpuBuf<T>>> {
        let _span = self.trace.span("forward_dense");
        let n_out = bias.len;
        check_batch("forward_dense", x, n_in, batch)?;
        // The kernel writes all four outputs of every (slot, neuron); errors
        // surface at the next transfer (no sync here: `|W|·r` stays on the device).
        let outs: Vec<CudaSlice<T>> = (0..4).map(|_| self.alloc_written::<T>(batch * n_out)).collect::<BResult<_>>()?;
        let gamma = model.gamma(n_in + 1);
        let eta = fp::mul_up((n_in + 2) as f64, model.min_subnormal);
        let (ni, no) = (n_in as i32, n_out as i32);
        let f = self.dev.func("forward_dense", T::SUFFIX);
        let mut b = self.dev.stream.launch_builder(f);
        let thresh = model.overflow_threshold();
        b.arg(&w.data)
            .arg(&bias.data)
            .arg(&ni)
            .arg(&no)
            .arg(&x.0.data)
            .arg(&x.1.data)
            .arg(&gamma)
            .arg(&eta)
            .arg(&thresh);
        b.arg(&outs[0]).arg(&outs[1]).arg(&outs[2]).arg(&outs[3]);
        if n_out > 0 && batch > 0 {
            unsafe { b.launch(batched(grid_for(32 * n_out), batch)) }.map_err(|e| driver_err("forward_dense", e))?;
        }
        let mut it = outs.into_iter().map(|data| GpuBuf { data, len: batch * n_out });
        let mut next = || it.next().expect("four outputs");
        Ok(AffineForward { lo: next(), hi: next(), bias_lo: next(), bias_hi: next() })
    }

    fn forward_conv(
        &self,
        conv: &Conv2d,
        w: &GpuBuf<T>,
        bias: &GpuBuf<T>,
        input: Shape,
        x: (&GpuBuf<T>, &GpuBuf<T>),
        batch: usize,
        model: FloatModel,
    ) -> BResult<AffineForward<GpuBuf<T>>> {
        let _span = self.trace.span("forward_conv");
        check_batch("forward_conv", x, input.numel(), batch)?;
        let (kh, kw) = conv.kernel;
        let ho = (input.h + conv.pad.0 + conv.pad.2 - kh) / conv.stride.0 + 1;
        let wo = (input.w + conv.pad.1 + conv.pad.3 - kw) / conv.stride.1 + 1;
        let n = conv.c_out * ho * wo;
        let max_terms = input.c * kh * kw + 2;
        // Cached by content: a recorded attack step may run this, and a
        // recording cannot upload.
        let gammas: Vec<u64> = (0..=max_terms).map(|k| model.gamma(k).to_bits()).collect();
        let gam = cached(&self.table_cache, &gammas, |v| {
            self.htod(&v.iter().map(|&b| f64::from_bits(b)).collect::<Vec<_>>())
        })?;
        let outs: Vec<CudaSlice<T>> = (0..4).map(|_| self.alloc_written::<T>(batch * n)).collect::<BResult<_>>()?;
        let (gi, kc) = (kgeom(input, (input.h, input.w)), kconv(conv));
        let (co, hoi, woi, eta) = (conv.c_out as i32, ho as i32, wo as i32, model.min_subnormal);
        let f = self.dev.func("forward_conv", T::SUFFIX);
        let mut b = self.dev.stream.launch_builder(f);
        b.arg(&w.data).arg(&bias.data).arg(&gi).arg(&kc).arg(&co).arg(&hoi).arg(&woi).arg(&x.0.data).arg(&x.1.data);
        let thresh = model.overflow_threshold();
        let lg = crate::lanes_per_sum(n * batch, (input.c * kh * kw).div_ceil(4), 1 << 20);
        b.arg(&*gam).arg(&eta).arg(&thresh).arg(&lg).arg(&outs[0]).arg(&outs[1]).arg(&outs[2]).arg(&outs[3]);
        if n > 0 && batch > 0 {
            let grid = grid_for(n << lg);
            unsafe { b.launch(batched(grid, batch)) }.map_err(|e| driver_err("forward_conv", e))?;
        }
        let mut it = outs.into_iter().map(|data| GpuBuf { data, len: batch * n });
        let mut next = || it.next().expect("four outputs");
        Ok(AffineForward { lo: next(), hi: next(), bias_lo: next(), bias_hi: next() })
    }

    /// `Y = X·Wᵀ + b`: `Y` filled with the bias, then one GEMM with β = 1
    /// (in cuBLAS's column-major view, `Yᵀ = W·Xᵀ` with `W` transposed).
    fn infer_dense(
        &self,
        w: &GpuBuf<T>,
        b: &GpuBuf<T>,
        n_in: usize,
        x: &GpuBuf<T>,
        batch: usize,
    ) -> BResult<GpuBuf<T>> {
        let _span = self.trace.span("infer_dense");
        let n_out = b.len;
        if w.len != n_out * n_in || x.len != batch * n_in {
            return Err(failure(format!("infer_dense: {} weights, {} inputs for batch {batch}", w.len, x.len)));
        }
        let total = batch * n_out;
        let mut y = self.alloc_written::<T>(total)?;
        if total == 0 {
            return Ok(buf(y, 0));
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
        Ok(buf(y, total))
    }

    /// `G·W` per point.
    fn grad_dense(&self, g: &GpuBuf<T>, w: &GpuBuf<T>, n_in: usize, batch: usize) -> BResult<GpuBuf<T>> {
        let _span = self.trace.span("grad_dense");
        let n_out = polycert_deeppoly::base::infer::grad_dense_outputs(g.len, w.len, n_in, batch)?;
        let mut out = self.alloc::<T>(batch * n_in)?;
        gemm_rm(self.blas()?, &g.data, batch, n_out, &w.data, n_in, &mut out)?;
        Ok(buf(out, batch * n_in))
    }

    /// The transposed conv per point: the conv backsubstitution's GEMMs
    /// with one full-window row per point.
    fn grad_conv(&self, c: &Conv2d, w: &GpuBuf<T>, input: Shape, g: &GpuBuf<T>, batch: usize) -> BResult<GpuBuf<T>> {
        let _span = self.trace.span("grad_conv");
        let so = conv_out_shape(c, input);
        if g.len != batch * so.numel() || w.len != c.weight.len() {
            return Err(failure(format!("grad_conv: {} gradients for batch {batch} of {}", g.len, so.numel())));
        }
        let m = self.conv_rows(&g.data, batch, &Geom::full(so, batch), c, &w.data, &Geom::full(input, batch))?;
        Ok(buf(m.a, batch * input.numel()))
    }

    /// One elementwise kernel `pw_<name>` over the op's operands (a device
    /// copy for `Copy`).
    fn pointwise(&self, op: Pointwise<'_, GpuBuf<T>>) -> BResult<GpuBuf<T>> {
        let _span = self.trace.span("pointwise");
        let total = pointwise_len(&op)?;
        if let Pointwise::Copy(x) = op {
            let data = self.dev.stream.clone_dtod(&x.data).map_err(|e| driver_err("copy", e))?;
            return Ok(buf(data, total));
        }
        let y = self.alloc_written::<T>(total)?;
        if total == 0 {
            return Ok(buf(y, 0));
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
        Ok(buf(y, total))
    }
}

fn buf<T>(data: CudaSlice<T>, len: usize) -> GpuBuf<T> {
    GpuBuf { data, len }
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
