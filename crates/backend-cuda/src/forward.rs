//! The forward interval pass of affine layers: per (slot, neuron) the
//! output interval and the constant interval (bias ± the float inference's
//! rounding bound), by kernels from `kernels/deeppoly.cu`.

use crate::device::driver_err;
use crate::{CudaBackend, GpuBuf, GpuScalar, batched, cached, check_batch, grid_for, kconv, kgeom};
use cudarc::driver::{CudaSlice, PushKernelArg};
use polycert_deeppoly::{AffineForward, BResult, Conv2d, FloatModel, Shape};
use polycert_interval::fp;

impl CudaBackend {
    pub(crate) fn i_forward_dense<T: GpuScalar>(
        &self,
        w: &GpuBuf<T>,
        bias: &GpuBuf<T>,
        n_in: usize,
        x: (&GpuBuf<T>, &GpuBuf<T>),
        batch: usize,
        model: FloatModel,
    ) -> BResult<AffineForward<GpuBuf<T>>> {
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

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn i_forward_conv<T: GpuScalar>(
        &self,
        conv: &Conv2d,
        w: &GpuBuf<T>,
        bias: &GpuBuf<T>,
        input: Shape,
        x: (&GpuBuf<T>, &GpuBuf<T>),
        batch: usize,
        model: FloatModel,
    ) -> BResult<AffineForward<GpuBuf<T>>> {
        check_batch("forward_conv", x, input.numel(), batch)?;
        let (kh, kw) = conv.kernel;
        let ho = (input.h + conv.pad.0 + conv.pad.2 - kh) / conv.stride.0 + 1;
        let wo = (input.w + conv.pad.1 + conv.pad.3 - kw) / conv.stride.1 + 1;
        let n = conv.c_out * ho * wo;
        let max_terms = input.c * kh * kw + 2;
        // Cached by content: a recorded attack step may run this, and a
        // recording cannot upload.
        let gammas: Vec<u64> = (0..=max_terms).map(|k| model.gamma(k).to_bits()).collect();
        let gam = cached(&self.gamma_cache, &gammas, |v| {
            self.htod(&v.iter().map(|&b| f64::from_bits(b)).collect::<Vec<_>>())
        })?;
        let outs: Vec<CudaSlice<T>> = (0..4).map(|_| self.alloc_written::<T>(batch * n)).collect::<BResult<_>>()?;
        let (gi, kc) = (kgeom(input, (input.h, input.w)), kconv(conv));
        let (co, hoi, woi, eta) = (conv.c_out as i32, ho as i32, wo as i32, model.min_subnormal);
        let f = self.dev.func("forward_conv", T::SUFFIX);
        let mut b = self.dev.stream.launch_builder(f);
        b.arg(&w.data).arg(&bias.data).arg(&gi).arg(&kc).arg(&co).arg(&hoi).arg(&woi).arg(&x.0.data).arg(&x.1.data);
        let thresh = model.overflow_threshold();
        b.arg(&*gam).arg(&eta).arg(&thresh).arg(&outs[0]).arg(&outs[1]).arg(&outs[2]).arg(&outs[3]);
        if n > 0 && batch > 0 {
            unsafe { b.launch(batched(grid_for(n), batch)) }.map_err(|e| driver_err("forward_conv", e))?;
        }
        let mut it = outs.into_iter().map(|data| GpuBuf { data, len: batch * n });
        let mut next = || it.next().expect("four outputs");
        Ok(AffineForward { lo: next(), hi: next(), bias_lo: next(), bias_hi: next() })
    }
}
