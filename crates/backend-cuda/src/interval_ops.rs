//! GPUPoly's interval-coefficient steps (`Arith::Interval`): the dense
//! step as a tiled interval GEMM, the conv, ReLU, pooling and diagonal
//! steps, concretization, compaction, residual merge and column slices, as
//! kernels from `kernels/deeppoly.cu`, each rounded outward there.

use crate::device::driver_err;
use crate::{CudaBackend, GpuBuf, GpuMat, GpuScalar, grid_for, kconv, kgeom, kpool, per_row};
use cudarc::driver::{LaunchConfig, PushKernelArg};
use polycert_deeppoly::{BResult, BackendError, ConvParams, Geom, PoolParams, ReluParams, Shape};

impl CudaBackend {
    pub(crate) fn i_zeros<T: GpuScalar>(&self, rows: usize, cols: usize) -> BResult<GpuMat<T>> {
        Ok(GpuMat { rows, cols, lo: self.alloc(rows * cols)?, hi: self.alloc(rows * cols)? })
    }

    pub(crate) fn i_dense_backsub<T: GpuScalar>(
        &self,
        a: &GpuMat<T>,
        w: &GpuBuf<T>,
        n_in: usize,
        b_lo: &GpuBuf<T>,
        b_hi: &GpuBuf<T>,
    ) -> BResult<(GpuMat<T>, Vec<f64>)> {
        let n_out = a.cols;
        if w.len != n_out * n_in {
            return Err(BackendError::Failure(format!("dense_backsub: {} weights for {n_out}x{n_in}", w.len)));
        }
        let out: GpuMat<T> = self.i_zeros(a.rows, n_in)?;
        if a.rows > 0 && n_in > 0 {
            let cfg = LaunchConfig {
                grid_dim: (n_in.div_ceil(64) as u32, a.rows.div_ceil(64) as u32, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            let (rows, no, ni) = (a.rows as i32, n_out as i32, n_in as i32);
            let f = self.dev.func("dense_backsub", T::SUFFIX);
            let mut b = self.dev.stream.launch_builder(f);
            b.arg(&a.lo).arg(&a.hi).arg(&w.data).arg(&out.lo).arg(&out.hi).arg(&rows).arg(&no).arg(&ni);
            unsafe { b.launch(cfg) }.map_err(|e| driver_err("dense_backsub", e))?;
        }
        let g = Geom::full(Shape::flat(n_out), a.rows);
        let cst = self.row_lower(a, &g, &b_lo.data, &b_hi.data)?;
        Ok((out, cst))
    }

    pub(crate) fn i_conv_backsub<T: GpuScalar>(
        &self,
        a: &GpuMat<T>,
        g: &Geom,
        p: &ConvParams<'_, CudaBackend, T>,
        out: &Geom,
    ) -> BResult<(GpuMat<T>, Vec<f64>)> {
        let res: GpuMat<T> = self.i_zeros(a.rows, out.cols())?;
        let n = a.rows * out.cols();
        if n > 0 {
            let (offi, offo) = (self.offsets(g)?, self.offsets(out)?);
            let (gi, go, kc, rows) = (kgeom(g.shape, g.win), kgeom(out.shape, out.win), kconv(p.conv), a.rows as i32);
            let f = self.dev.func("conv_backsub", T::SUFFIX);
            let mut b = self.dev.stream.launch_builder(f);
            b.arg(&a.lo).arg(&a.hi).arg(&gi).arg(&*offi).arg(&p.weight.data).arg(&kc).arg(&go).arg(&*offo);
            b.arg(&res.lo).arg(&res.hi).arg(&rows);
            unsafe { b.launch(grid_for(n)) }.map_err(|e| driver_err("conv_backsub", e))?;
        }
        let cst = self.row_lower(a, g, &p.bias_lo.data, &p.bias_hi.data)?;
        Ok((res, cst))
    }

    pub(crate) fn i_relu_backsub<T: GpuScalar>(
        &self,
        a: &GpuMat<T>,
        g: &Geom,
        p: &ReluParams<'_, CudaBackend, T>,
    ) -> BResult<(GpuMat<T>, Vec<f64>)> {
        let out: GpuMat<T> = self.i_zeros(a.rows, a.cols)?;
        let cst = self.alloc::<f64>(a.rows)?;
        let off = self.offsets(g)?;
        let kg = kgeom(g.shape, g.win);
        let f = self.dev.func("relu_backsub", T::SUFFIX);
        let mut b = self.dev.stream.launch_builder(f);
        let has_lo = p.mu_lo.is_some() as i32;
        let mu_lo = p.mu_lo.unwrap_or(p.mu_up);
        if mu_lo.len != p.mu_up.len {
            return Err(BackendError::Failure(format!(
                "relu_backsub: {} lower and {} upper intercepts",
                mu_lo.len, p.mu_up.len
            )));
        }
        b.arg(&a.lo).arg(&kg).arg(&*off).arg(&p.lam_lo.data).arg(&p.lam_up.data).arg(&p.mu_up.data);
        b.arg(&has_lo).arg(&mu_lo.data).arg(&out.lo).arg(&out.hi).arg(&cst);
        if a.rows > 0 {
            unsafe { b.launch(per_row(a.rows)) }.map_err(|e| driver_err("relu_backsub", e))?;
        }
        Ok((out, self.dtoh(&cst, a.rows)?))
    }

    pub(crate) fn i_maxpool_backsub<T: GpuScalar>(
        &self,
        a: &GpuMat<T>,
        g: &Geom,
        p: &PoolParams<'_, CudaBackend, T>,
        out: &Geom,
    ) -> BResult<(GpuMat<T>, Vec<f64>)> {
        let res: GpuMat<T> = self.i_zeros(a.rows, out.cols())?;
        let cst = self.alloc::<f64>(a.rows)?;
        if a.rows == 0 {
            return Ok((res, Vec::new()));
        }
        let (offi, offo) = (self.offsets(g)?, self.offsets(out)?);
        let (gi, go, kp, rows) = (kgeom(g.shape, g.win), kgeom(out.shape, out.win), kpool(p.pool), a.rows as i32);
        let n = a.rows * out.cols();
        if n > 0 {
            let f = self.dev.func("maxpool_backsub", T::SUFFIX);
            let mut b = self.dev.stream.launch_builder(f);
            b.arg(&a.lo).arg(&gi).arg(&*offi).arg(&p.sel_lo.data).arg(&p.sel_up.data).arg(&kp).arg(&go).arg(&*offo);
            b.arg(&res.lo).arg(&res.hi).arg(&rows);
            unsafe { b.launch(grid_for(n)) }.map_err(|e| driver_err("maxpool_backsub", e))?;
        }
        let f = self.dev.func("maxpool_const", T::SUFFIX);
        let mut b = self.dev.stream.launch_builder(f);
        b.arg(&a.lo)
            .arg(&a.hi)
            .arg(&gi)
            .arg(&*offi)
            .arg(&p.sel_lo.data)
            .arg(&p.sel_up.data)
            .arg(&p.lo.data)
            .arg(&p.up.data);
        b.arg(&cst);
        unsafe { b.launch(per_row(a.rows)) }.map_err(|e| driver_err("maxpool_const", e))?;
        Ok((res, self.dtoh(&cst, a.rows)?))
    }

    pub(crate) fn i_diag_backsub<T: GpuScalar>(
        &self,
        a: &GpuMat<T>,
        g: &Geom,
        m: (&GpuBuf<T>, &GpuBuf<T>),
        c: (&GpuBuf<T>, &GpuBuf<T>),
    ) -> BResult<(GpuMat<T>, Vec<f64>)> {
        let out: GpuMat<T> = self.i_zeros(a.rows, a.cols)?;
        let cst = self.alloc::<f64>(a.rows)?;
        let off = self.offsets(g)?;
        let kg = kgeom(g.shape, g.win);
        let f = self.dev.func("diag_backsub", T::SUFFIX);
        let mut b = self.dev.stream.launch_builder(f);
        b.arg(&a.lo).arg(&a.hi).arg(&kg).arg(&*off).arg(&m.0.data).arg(&m.1.data).arg(&c.0.data).arg(&c.1.data);
        b.arg(&out.lo).arg(&out.hi).arg(&cst);
        if a.rows > 0 {
            unsafe { b.launch(per_row(a.rows)) }.map_err(|e| driver_err("diag_backsub", e))?;
        }
        Ok((out, self.dtoh(&cst, a.rows)?))
    }

    pub(crate) fn i_concretize<T: GpuScalar>(
        &self,
        a: &GpuMat<T>,
        g: &Geom,
        lo: &GpuBuf<T>,
        hi: &GpuBuf<T>,
    ) -> BResult<Vec<f64>> {
        if a.rows == 0 {
            return Ok(Vec::new());
        }
        self.row_lower(a, g, &lo.data, &hi.data)
    }

    pub(crate) fn i_compact<T: GpuScalar>(&self, a: &GpuMat<T>, _g: &Geom, keep: &[u32]) -> BResult<GpuMat<T>> {
        let out: GpuMat<T> = self.i_zeros(keep.len(), a.cols)?;
        let n = keep.len() * a.cols;
        if n > 0 {
            let k = self.htod(keep)?;
            let (nk, cols) = (keep.len() as i32, a.cols as u64);
            let f = self.dev.func("compact", T::SUFFIX);
            let mut b = self.dev.stream.launch_builder(f);
            b.arg(&a.lo).arg(&a.hi).arg(&k).arg(&nk).arg(&cols).arg(&out.lo).arg(&out.hi);
            unsafe { b.launch(grid_for(n)) }.map_err(|e| driver_err("compact", e))?;
        }
        Ok(out)
    }

    pub(crate) fn i_add_into<T: GpuScalar>(
        &self,
        dst: &mut GpuMat<T>,
        dg: &Geom,
        src: &GpuMat<T>,
        sg: &Geom,
    ) -> BResult<()> {
        let n = src.rows * src.cols;
        if n == 0 {
            return Ok(());
        }
        let (od, os) = (self.offsets(dg)?, self.offsets(sg)?);
        let (kd, ks, rows) = (kgeom(dg.shape, dg.win), kgeom(sg.shape, sg.win), src.rows as i32);
        let f = self.dev.func("add_into", T::SUFFIX);
        let mut b = self.dev.stream.launch_builder(f);
        b.arg(&mut dst.lo).arg(&mut dst.hi).arg(&kd).arg(&*od).arg(&src.lo).arg(&src.hi).arg(&ks).arg(&*os).arg(&rows);
        unsafe { b.launch(grid_for(n)) }.map_err(|e| driver_err("add_into", e))?;
        Ok(())
    }

    pub(crate) fn i_slice_cols<T: GpuScalar>(&self, a: &GpuMat<T>, start: usize, len: usize) -> BResult<GpuMat<T>> {
        let out: GpuMat<T> = self.i_zeros(a.rows, len)?;
        let n = a.rows * len;
        if n > 0 {
            let (rows, cols, st, ln) = (a.rows as i32, a.cols as u64, start as u64, len as u64);
            let f = self.dev.func("slice_cols", T::SUFFIX);
            let mut b = self.dev.stream.launch_builder(f);
            b.arg(&a.lo).arg(&a.hi).arg(&rows).arg(&cols).arg(&st).arg(&ln).arg(&out.lo).arg(&out.hi);
            unsafe { b.launch(grid_for(n)) }.map_err(|e| driver_err("slice_cols", e))?;
        }
        Ok(out)
    }
}
