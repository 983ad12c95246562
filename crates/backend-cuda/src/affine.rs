//! [`AffineOps`] on the GPU: backsubstitution through affine layers. The
//! interval steps are GPUPoly's kernels from `kernels/deeppoly.cu` (a tiled
//! interval GEMM, windowed conv, diagonal step, residual merge), rounded
//! outward there; the point steps are cuBLAS GEMMs (any order, FMA, no
//! TF32) and kernels from `kernels/point.cu`, their rounding paid in the
//! row's constant (see `AffineOps::point_dense`).

use crate::blas::{gemm_model, gemm_rm};
use crate::device::driver_err;
use crate::{CudaBackend, GpuBuf, GpuCst, GpuMat, GpuPMat, GpuScalar, grid_for, kconv, kgeom, per_row};
use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};
use polycert_deeppoly::{AffineOps, BResult, BackendError, ConvParams, Geom, Magnitudes, MatrixOps, Shape};
use polycert_interval::fp;

/// Values per conv GEMM block (bounds the `rows·positions × C_in·kh·kw` scratch).
const CONV_BLOCK_VALUES: usize = 1 << 25;

impl<T: GpuScalar> AffineOps<T> for CudaBackend {
    fn dense_backsub(
        &self,
        a: &GpuMat<T>,
        w: &GpuBuf<T>,
        n_in: usize,
        b_lo: &GpuBuf<T>,
        b_hi: &GpuBuf<T>,
    ) -> BResult<(GpuMat<T>, Vec<f64>)> {
        let _span = self.trace.span("dense_backsub");
        let n_out = a.cols;
        if w.len != n_out * n_in {
            return Err(BackendError::Failure(format!("dense_backsub: {} weights for {n_out}x{n_in}", w.len)));
        }
        let out: GpuMat<T> = self.zero_mat(a.rows, n_in)?;
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

    fn conv_backsub(
        &self,
        a: &GpuMat<T>,
        g: &Geom,
        p: &ConvParams<'_, Self, T>,
        out: &Geom,
    ) -> BResult<(GpuMat<T>, Vec<f64>)> {
        let _span = self.trace.span("conv_backsub");
        let res: GpuMat<T> = self.zero_mat(a.rows, out.cols())?;
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

    fn diag_backsub(
        &self,
        a: &GpuMat<T>,
        g: &Geom,
        m: (&GpuBuf<T>, &GpuBuf<T>),
        c: (&GpuBuf<T>, &GpuBuf<T>),
    ) -> BResult<(GpuMat<T>, Vec<f64>)> {
        let _span = self.trace.span("diag_backsub");
        let out: GpuMat<T> = self.zero_mat(a.rows, a.cols)?;
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

    fn add_into(&self, dst: &mut GpuMat<T>, dg: &Geom, src: &GpuMat<T>, sg: &Geom) -> BResult<()> {
        let _span = self.trace.span("add_into");
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

    fn point_dense(
        &self,
        a: &GpuPMat<T>,
        g: &Geom,
        w: &GpuBuf<T>,
        n_in: usize,
        b: (&GpuBuf<T>, &GpuBuf<T>),
        mag: &Magnitudes<'_, GpuBuf<T>>,
    ) -> BResult<(GpuPMat<T>, GpuCst)> {
        let _span = self.trace.span("point_dense");
        let n_out = a.cols;
        if g.rows() != a.rows {
            return Err(BackendError::Failure(format!("point_dense: geometry of {} rows for {}", g.rows(), a.rows)));
        }
        if w.len != n_out * n_in {
            return Err(BackendError::Failure(format!("point_dense: {} weights for {n_out}x{n_in}", w.len)));
        }
        let mut out = if a.rows > 0 && n_out > 0 && n_in > 0 {
            GpuPMat { rows: a.rows, cols: n_in, a: self.alloc_written(a.rows * n_in)? }
        } else {
            self.zero_pmat::<T>(a.rows, n_in)?
        };
        let blas = self.blas()?;
        gemm_rm(blas, &a.a, a.rows, n_out, &w.data, n_in, &mut out.a)?;
        let cst = self.affine_const(a, &g.full_over(Shape::flat(n_out)), b, mag.wr, n_out, mag.r1)?;
        Ok((out, cst))
    }

    /// The rows through the conv (`conv_rows`), then the constants.
    fn point_conv(
        &self,
        a: &GpuPMat<T>,
        g: &Geom,
        p: &ConvParams<'_, Self, T>,
        out: &Geom,
        mag: &Magnitudes<'_, GpuBuf<T>>,
    ) -> BResult<(GpuPMat<T>, GpuCst)> {
        let _span = self.trace.span("point_conv");
        let c = p.conv;
        let res = self.conv_rows(&a.a, a.rows, g, c, &p.weight.data, out)?;
        let m = g.shape.c * c.kernel.0.div_ceil(c.stride.0) * c.kernel.1.div_ceil(c.stride.1);
        let cst = self.affine_const(a, g, (p.bias_lo, p.bias_hi), mag.wr, m, mag.r1)?;
        Ok((res, cst))
    }

    fn point_diag(
        &self,
        a: &GpuPMat<T>,
        g: &Geom,
        m: (&GpuBuf<T>, &GpuBuf<T>),
        c: (&GpuBuf<T>, &GpuBuf<T>),
        r: &GpuBuf<T>,
    ) -> BResult<(GpuPMat<T>, GpuCst)> {
        let _span = self.trace.span("point_diag");
        self.diag_step(a, g, m, c, r, 0)
    }

    fn point_add_into(
        &self,
        dst: &mut GpuPMat<T>,
        dg: &Geom,
        src: &GpuPMat<T>,
        sg: &Geom,
        r: &GpuBuf<T>,
    ) -> BResult<GpuCst> {
        let _span = self.trace.span("point_add_into");
        if src.rows != dst.rows {
            return Err(BackendError::Failure(format!("point_add_into: {} rows into {}", src.rows, dst.rows)));
        }
        let n = src.rows * src.cols;
        if n == 0 {
            return MatrixOps::<T>::cst_from_host(self, &vec![0.0; src.rows]);
        }
        let pr = self.props("point_add_into", sg, &[r.len])?;
        let err = self.alloc_written::<f64>(n)?;
        let (od, os) = (self.offsets(dg)?, self.offsets(sg)?);
        let (kd, ks, rows) = (kgeom(dg.shape, dg.win), kgeom(sg.shape, sg.win), src.rows as i32);
        let f = self.dev.func("point_add_into", T::SUFFIX);
        let mut l = self.dev.stream.launch_builder(f);
        l.arg(&mut dst.a).arg(&kd).arg(&*od).arg(&src.a).arg(&ks).arg(&*os).arg(&*pr).arg(&r.data).arg(&err).arg(&rows);
        unsafe { l.launch(grid_for(n)) }.map_err(|e| driver_err("point_add_into", e))?;
        self.row_sum_neg(&err, src.rows, src.cols)
    }
}

impl CudaBackend {
    /// Per row `min(a·b) − γ_m·|a|·wr − (m+2)·η·r1`, rounded down (`r1`
    /// per batch slot).
    #[allow(clippy::too_many_arguments)]
    fn affine_const<T: GpuScalar>(
        &self,
        a: &GpuPMat<T>,
        g: &Geom,
        b: (&GpuBuf<T>, &GpuBuf<T>),
        wr: &GpuBuf<T>,
        m: usize,
        r1: &[f64],
    ) -> BResult<GpuCst> {
        if a.rows == 0 {
            return MatrixOps::<T>::cst_from_host(self, &[]);
        }
        let model = gemm_model::<T>();
        let gamma = model.gamma(m);
        let eta_m = fp::mul_up((m + 2) as f64, model.min_subnormal);
        let eta_r1: Vec<f64> = r1.iter().map(|&r| fp::mul_up(eta_m, r)).collect();
        let n = g.shape.numel();
        let pr = self.props("point_affine_const", g, &[b.0.len, b.1.len, wr.len, r1.len() * n])?;
        // Most steps through a node see the same bounds: the upload is cached
        // by content.
        let bits: Vec<u64> = eta_r1.iter().map(|v| v.to_bits()).collect();
        let eta = crate::cached(&self.table_cache, &bits, |_| self.htod(&eta_r1))?;
        let cst = self.alloc_written::<f64>(a.rows)?;
        let (off, kg) = (self.offsets(g)?, kgeom(g.shape, g.win));
        let f = self.dev.func("point_affine_const", T::SUFFIX);
        let mut l = self.dev.stream.launch_builder(f);
        l.arg(&a.a).arg(&kg).arg(&*off).arg(&*pr).arg(&b.0.data).arg(&b.1.data).arg(&wr.data).arg(&gamma).arg(&*eta);
        l.arg(&cst);
        unsafe { l.launch(per_row(a.rows)) }.map_err(|e| driver_err("point_affine_const", e))?;
        Ok(GpuCst { len: a.rows, data: cst })
    }

    /// `rows` rows over the conv output (`g`) through the conv, to its
    /// input (`out`): in one kernel while the products number at most
    /// `conv_direct_max`, else as GEMMs: per block of rows, the window is transposed
    /// to `(row, y, x) × C_out`, multiplied by the weights `C_out ×
    /// (C_in·kh·kw)` in cuBLAS, and the taps reaching each input
    /// coefficient are summed (at most `m` products per coefficient in all).
    /// Also the attack's gradient through a conv (`InferOps::grad_conv`).
    pub(crate) fn conv_rows<T: GpuScalar>(
        &self,
        a: &CudaSlice<T>,
        rows: usize,
        g: &Geom,
        c: &polycert_deeppoly::Conv2d,
        weight: &CudaSlice<T>,
        out: &Geom,
    ) -> BResult<GpuPMat<T>> {
        let res = self.written_pmat::<T>(rows, out.cols())?;
        let (pos, c_out, taps) = (g.win.0 * g.win.1, g.shape.c, out.shape.c * c.kernel.0 * c.kernel.1);
        if rows > 0 && out.cols() > 0 {
            let (offi, offo) = (self.offsets(g)?, self.offsets(out)?);
            let (gi, go, kc) = (kgeom(g.shape, g.win), kgeom(out.shape, out.win), kconv(c));
            let reach = c_out * c.kernel.0.div_ceil(c.stride.0) * c.kernel.1.div_ceil(c.stride.1);
            if rows * out.cols() * reach <= self.conv_direct_max {
                let (rows_i, lg) = (rows as i32, crate::lanes_per_sum(rows * out.cols(), c_out, 1 << 16));
                let f = self.dev.func("point_conv_direct", T::SUFFIX);
                let mut l = self.dev.stream.launch_builder(f);
                l.arg(a).arg(&gi).arg(&*offi).arg(weight).arg(&kc).arg(&go).arg(&*offo).arg(&res.a).arg(&rows_i);
                l.arg(&lg);
                let grid = grid_for((rows * out.cols()) << lg);
                unsafe { l.launch(grid) }.map_err(|e| driver_err("point_conv_direct", e))?;
                return Ok(res);
            }
            let block = (CONV_BLOCK_VALUES / (pos * taps.max(c_out)).max(1)).clamp(1, rows);
            let blas = self.blas()?;
            for r0 in (0..rows).step_by(block) {
                let nr = block.min(rows - r0);
                let (r0i, nri) = (r0 as i32, nr as i32);
                let ahat = self.alloc_written::<T>(nr * pos * c_out)?;
                let f = self.dev.func("point_conv_im", T::SUFFIX);
                let mut l = self.dev.stream.launch_builder(f);
                l.arg(a).arg(&gi).arg(&r0i).arg(&nri).arg(&ahat);
                unsafe { l.launch(grid_for(nr * pos * c_out)) }.map_err(|e| driver_err("point_conv_im", e))?;
                // The GEMM writes every element (β = 0 reads none).
                let mut t = self.alloc_written::<T>(nr * pos * taps)?;
                let gemm = self.trace.span("conv_rows.gemm");
                gemm_rm(blas, &ahat, nr * pos, c_out, weight, taps, &mut t)?;
                drop(gemm);
                let f = self.dev.func("point_conv_col2im", T::SUFFIX);
                let mut l = self.dev.stream.launch_builder(f);
                l.arg(&t).arg(&gi).arg(&*offi).arg(&kc).arg(&go).arg(&*offo).arg(&res.a).arg(&r0i).arg(&nri);
                unsafe { l.launch(grid_for(nr * out.cols())) }.map_err(|e| driver_err("point_conv_col2im", e))?;
            }
        }
        Ok(res)
    }

    /// The `point_diag` kernel: the diagonal step (`relu` 0), or the ReLU
    /// step of `RelaxOps::point_relu` (`relu` 1: `p = (lam_lo, lam_up)`,
    /// `c.0 = mu_up`; 2: σ, `c.1 = mu_lo`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn diag_step<T: GpuScalar>(
        &self,
        a: &GpuPMat<T>,
        g: &Geom,
        p: (&GpuBuf<T>, &GpuBuf<T>),
        c: (&GpuBuf<T>, &GpuBuf<T>),
        r: &GpuBuf<T>,
        relu: i32,
    ) -> BResult<(GpuPMat<T>, GpuCst)> {
        if a.rows == 0 {
            return Ok((self.zero_pmat::<T>(0, a.cols)?, MatrixOps::<T>::cst_from_host(self, &[])?));
        }
        let pr = self.props("point_diag", g, &[p.0.len, p.1.len, c.0.len, c.1.len, r.len])?;
        let out = self.written_pmat::<T>(a.rows, a.cols)?;
        let cst = self.alloc_written::<f64>(a.rows)?;
        let (off, kg, flag) = (self.offsets(g)?, kgeom(g.shape, g.win), relu);
        let f = self.dev.func("point_diag", T::SUFFIX);
        let mut l = self.dev.stream.launch_builder(f);
        l.arg(&a.a)
            .arg(&kg)
            .arg(&*off)
            .arg(&*pr)
            .arg(&p.0.data)
            .arg(&p.1.data)
            .arg(&c.0.data)
            .arg(&c.1.data)
            .arg(&r.data);
        l.arg(&flag).arg(&out.a).arg(&cst);
        unsafe { l.launch(per_row(a.rows)) }.map_err(|e| driver_err("point_diag", e))?;
        Ok((out, GpuCst { len: a.rows, data: cst }))
    }

    /// Per row `−Σ err` over `cols` entries, the sum rounded up.
    fn row_sum_neg(&self, err: &CudaSlice<f64>, rows: usize, cols: usize) -> BResult<GpuCst> {
        let out = self.alloc_written::<f64>(rows)?;
        let c = cols as u64;
        let mut l = self.dev.stream.launch_builder(self.dev.plain("point_row_sum_neg"));
        l.arg(err).arg(&c).arg(&out);
        unsafe { l.launch(per_row(rows)) }.map_err(|e| driver_err("point_row_sum_neg", e))?;
        Ok(GpuCst { len: rows, data: out })
    }
}
