//! [`RelaxOps`] on the GPU: rows through the ReLU (σ) and MaxPool
//! relaxations, and concretization. Interval steps are GPUPoly's kernels
//! from `kernels/deeppoly.cu`, rounded outward there; point steps are
//! kernels from `kernels/point.cu` that pay their rounding in the constant.

use crate::device::driver_err;
use crate::{CudaBackend, GpuBuf, GpuCst, GpuMat, GpuPMat, GpuScalar, grid_for, kgeom, kpool, per_row};
use cudarc::driver::PushKernelArg;
use polycert_deeppoly::{BResult, BackendError, Geom, MatrixOps, PoolParams, RelaxOps, ReluParams};

impl<T: GpuScalar> RelaxOps<T> for CudaBackend {
    fn relu_backsub(&self, a: &GpuMat<T>, g: &Geom, p: &ReluParams<'_, Self, T>) -> BResult<(GpuMat<T>, Vec<f64>)> {
        let _span = self.trace.span("relu_backsub");
        let out: GpuMat<T> = self.zero_mat(a.rows, a.cols)?;
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

    fn maxpool_backsub(
        &self,
        a: &GpuMat<T>,
        g: &Geom,
        p: &PoolParams<'_, Self, T>,
        out: &Geom,
    ) -> BResult<(GpuMat<T>, Vec<f64>)> {
        let _span = self.trace.span("maxpool_backsub");
        let res: GpuMat<T> = self.zero_mat(a.rows, out.cols())?;
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

    fn concretize(&self, a: &GpuMat<T>, g: &Geom, lo: &GpuBuf<T>, hi: &GpuBuf<T>) -> BResult<Vec<f64>> {
        let _span = self.trace.span("concretize");
        if a.rows == 0 {
            return Ok(Vec::new());
        }
        self.row_lower(a, g, &lo.data, &hi.data)
    }

    /// The `point_diag` kernel in its ReLU (or σ) mode (`diag_step`).
    fn point_relu(
        &self,
        a: &GpuPMat<T>,
        g: &Geom,
        p: &ReluParams<'_, Self, T>,
        r: &GpuBuf<T>,
    ) -> BResult<(GpuPMat<T>, GpuCst)> {
        let _span = self.trace.span("point_relu");
        match p.mu_lo {
            None => self.diag_step(a, g, (p.lam_lo, p.lam_up), (p.mu_up, p.mu_up), r, 1),
            Some(mu_lo) => self.diag_step(a, g, (p.lam_lo, p.lam_up), (p.mu_up, mu_lo), r, 2),
        }
    }

    fn point_maxpool(
        &self,
        a: &GpuPMat<T>,
        g: &Geom,
        p: &PoolParams<'_, Self, T>,
        out: &Geom,
        r: &GpuBuf<T>,
    ) -> BResult<(GpuPMat<T>, GpuCst)> {
        let _span = self.trace.span("point_maxpool");
        let cols_o = out.cols();
        if a.rows == 0 || cols_o == 0 {
            return Ok((
                self.zero_pmat::<T>(a.rows, cols_o)?,
                MatrixOps::<T>::cst_from_host(self, &vec![0.0; a.rows])?,
            ));
        }
        let pr = self.props("point_maxpool", g, &[p.sel_lo.len, p.sel_up.len, p.up.len])?;
        out.check_tables("point_maxpool", &[r.len]).map_err(BackendError::Failure)?;
        let res = self.written_pmat::<T>(a.rows, cols_o)?;
        let n = a.rows * cols_o;
        let err = self.alloc_written::<f64>(n)?;
        let (offi, offo) = (self.offsets(g)?, self.offsets(out)?);
        let (gi, go, kp, rows) = (kgeom(g.shape, g.win), kgeom(out.shape, out.win), kpool(p.pool), a.rows as i32);
        let f = self.dev.func("point_maxpool", T::SUFFIX);
        let mut l = self.dev.stream.launch_builder(f);
        l.arg(&a.a)
            .arg(&gi)
            .arg(&*offi)
            .arg(&*pr)
            .arg(&p.sel_lo.data)
            .arg(&p.sel_up.data)
            .arg(&kp)
            .arg(&go)
            .arg(&*offo);
        l.arg(&r.data).arg(&res.a).arg(&err).arg(&rows);
        unsafe { l.launch(grid_for(n)) }.map_err(|e| driver_err("point_maxpool", e))?;
        let cst = self.alloc_written::<f64>(a.rows)?;
        let co = cols_o as u64;
        let f = self.dev.func("point_maxpool_const", T::SUFFIX);
        let mut l = self.dev.stream.launch_builder(f);
        l.arg(&a.a).arg(&gi).arg(&*offi).arg(&*pr).arg(&p.sel_lo.data).arg(&p.sel_up.data).arg(&p.up.data);
        l.arg(&err).arg(&co);
        l.arg(&cst);
        unsafe { l.launch(per_row(a.rows)) }.map_err(|e| driver_err("point_maxpool_const", e))?;
        Ok((res, GpuCst { len: a.rows, data: cst }))
    }

    fn point_concretize(&self, a: &GpuPMat<T>, g: &Geom, lo: &GpuBuf<T>, hi: &GpuBuf<T>) -> BResult<GpuCst> {
        self.concretize_rows(a, g, lo, hi, None)
    }

    /// One kernel: no copy of `base` and no separate sum.
    fn point_concretize_add(
        &self,
        a: &GpuPMat<T>,
        g: &Geom,
        lo: &GpuBuf<T>,
        hi: &GpuBuf<T>,
        base: &GpuCst,
    ) -> BResult<GpuCst> {
        if a.rows != base.len {
            return Err(BackendError::Failure(format!(
                "point_concretize_add: {} rows, {} constants",
                a.rows, base.len
            )));
        }
        self.concretize_rows(a, g, lo, hi, Some(base))
    }
}

impl CudaBackend {
    /// The point concretization kernel, its bounds added to `base` if given.
    fn concretize_rows<T: GpuScalar>(
        &self,
        a: &GpuPMat<T>,
        g: &Geom,
        lo: &GpuBuf<T>,
        hi: &GpuBuf<T>,
        base: Option<&GpuCst>,
    ) -> BResult<GpuCst> {
        let name = if base.is_some() { "point_concretize_add" } else { "point_concretize" };
        let _span = self.trace.span(name);
        if a.rows == 0 {
            return MatrixOps::<T>::cst_from_host(self, &[]);
        }
        let pr = self.props(name, g, &[lo.len, hi.len])?;
        let out = self.alloc_written::<f64>(a.rows)?;
        let (off, kg) = (self.offsets(g)?, kgeom(g.shape, g.win));
        let mut l = self.dev.stream.launch_builder(self.dev.func(name, T::SUFFIX));
        l.arg(&a.a).arg(&kg).arg(&*off).arg(&*pr).arg(&lo.data).arg(&hi.data);
        if let Some(b) = base {
            l.arg(&b.data);
        }
        l.arg(&out);
        unsafe { l.launch(per_row(a.rows)) }.map_err(|e| driver_err(name, e))?;
        Ok(GpuCst { len: a.rows, data: out })
    }
}
