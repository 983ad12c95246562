//! Point-coefficient steps on the GPU: the dense step as one cuBLAS GEMM
//! (any order, FMA, no TF32), the rest as kernels from `kernels/point.cu`.
//! Every rounding is paid in the row's constant (see `Backend::point_dense`).

use crate::device::driver_err;
use crate::{CudaBackend, GpuBuf, GpuScalar, grid_for, kconv, kgeom, kpool, per_row};
use cudarc::cublas::{CudaBlas, GemmConfig, sys as blas_sys};
use cudarc::driver::{CudaSlice, PushKernelArg};
use polycert_deeppoly::{BResult, BackendError, ConvParams, FloatModel, Geom, PoolParams, ReluParams, Shape};
use polycert_interval::fp;

/// A point expression matrix on the GPU, row-major.
pub struct GpuPMat<T> {
    pub rows: usize,
    pub cols: usize,
    pub a: CudaSlice<T>,
}

/// Per-row constants on the GPU (f64 lower bounds).
pub struct GpuCst {
    pub len: usize,
    pub data: CudaSlice<f64>,
}

/// Values per conv GEMM block (bounds the `rows·positions × C_in·kh·kw` scratch).
const CONV_BLOCK_VALUES: usize = 1 << 25;

/// The float model of a GEMM in `T` (round-to-nearest, FMA allowed). Its
/// underflow term assumes gradual underflow; where the float32 GEMM was seen
/// to flush subnormals ([`gemm_keeps_subnormals`]) each product and sum errs
/// by up to `2^-126` instead, paid as `η = 2^-125` (`(m+2)·η ≥ 2m·2^-126`).
fn gemm_model<T: GpuScalar>() -> FloatModel {
    let flushes = T::SUFFIX == "f32" && GEMM_F32_SUBNORMALS.get() != Some(&true);
    let eta = if flushes { 2.0 * f32::MIN_POSITIVE as f64 } else { T::MIN_SUBNORMAL.to_f64_exact() };
    FloatModel { unit_roundoff: T::UNIT_ROUNDOFF, min_subnormal: eta }
}

/// Whether the float32 GEMM keeps subnormals, once probed.
static GEMM_F32_SUBNORMALS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Whether cuBLAS's float32 GEMM, in the mode the analysis uses, keeps
/// subnormal inputs, products and sums: `[2^-70, 2^-130, 1]·[2^-70, 1,
/// 2^-140]ᵀ` must give exactly `2^-130 + 2^-139`.
pub(crate) fn gemm_keeps_subnormals(blas: &CudaBlas, b: &CudaBackend) -> BResult<bool> {
    let p = |e: i32| 2f32.powi(e);
    let (a, w) = ([p(-70), p(-130), 1.0], [p(-70), 1.0, p(-140)]);
    let (a, w) = (b.htod(&a)?, b.htod(&w)?);
    let mut g = b.htod(&[0f32])?;
    gemm_rm(blas, &a, 1, 3, &w, 1, &mut g)?;
    let got = b.dtoh(&g, 1)?[0];
    Ok(got == p(-130) + p(-139))
}

/// A cuBLAS handle on the backend's stream, in pedantic math mode: the
/// prescribed precision in every phase (no TF32, no emulation).
pub(crate) fn new_blas(b: &CudaBackend) -> BResult<CudaBlas> {
    if !unsafe { blas_sys::is_culib_present() } {
        return Err(BackendError::Unavailable("cuBLAS (libcublas) not found: point arithmetic needs it".into()));
    }
    let blas = CudaBlas::new(b.dev.stream.clone()).map_err(|e| BackendError::Failure(format!("cuBLAS: {e:?}")))?;
    let st = unsafe { blas_sys::cublasSetMathMode(*blas.handle(), blas_sys::cublasMath_t::CUBLAS_PEDANTIC_MATH) };
    if st != blas_sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        return Err(BackendError::Failure(format!("cuBLAS math mode: {st:?}")));
    }
    if GEMM_F32_SUBNORMALS.get().is_none() {
        let _ = GEMM_F32_SUBNORMALS.set(gemm_keeps_subnormals(&blas, b)?);
    }
    Ok(blas)
}

/// `G = A·W` for row-major `A` (`rows × k`), `W` (`k × n`): in cuBLAS's
/// column-major view, `Gᵀ = Wᵀ·Aᵀ`.
pub(crate) fn gemm_rm<T: GpuScalar>(
    blas: &CudaBlas,
    a: &CudaSlice<T>,
    rows: usize,
    k: usize,
    w: &CudaSlice<T>,
    n: usize,
    g: &mut CudaSlice<T>,
) -> BResult<()> {
    if rows == 0 || n == 0 || k == 0 {
        return Ok(());
    }
    let too_big = |v: usize| i32::try_from(v).is_err();
    if too_big(rows) || too_big(n) || too_big(k) {
        return Err(BackendError::Failure(format!("GEMM {rows}x{k}x{n} exceeds cuBLAS's 32-bit sizes")));
    }
    let op = blas_sys::cublasOperation_t::CUBLAS_OP_N;
    let cfg = GemmConfig {
        transa: op,
        transb: op,
        m: n as i32,
        n: rows as i32,
        k: k as i32,
        alpha: T::one(),
        lda: n as i32,
        ldb: k as i32,
        beta: T::zero(),
        ldc: n as i32,
    };
    unsafe { T::gemm(blas, cfg, w, a, g) }.map_err(|e| BackendError::Failure(format!("cuBLAS GEMM: {e:?}")))
}

impl CudaBackend {
    pub(crate) fn c_from_host(&self, v: &[f64]) -> BResult<GpuCst> {
        Ok(GpuCst { len: v.len(), data: self.htod(v)? })
    }

    pub(crate) fn c_to_host(&self, c: &GpuCst) -> BResult<Vec<f64>> {
        self.dtoh(&c.data, c.len)
    }

    pub(crate) fn c_add(&self, acc: &mut GpuCst, inc: &GpuCst) -> BResult<()> {
        if acc.len != inc.len {
            return Err(BackendError::Failure(format!("cst_add: {} constants into {}", inc.len, acc.len)));
        }
        if acc.len == 0 {
            return Ok(());
        }
        let n = acc.len as i32;
        let mut l = self.dev.stream.launch_builder(self.dev.plain("cst_add_rd"));
        l.arg(&mut acc.data).arg(&inc.data).arg(&n);
        unsafe { l.launch(grid_for(acc.len)) }.map_err(|e| driver_err("cst_add_rd", e))?;
        Ok(())
    }

    pub(crate) fn c_dup(&self, c: &GpuCst) -> BResult<GpuCst> {
        let data = self.dev.stream.clone_dtod(&c.data).map_err(|e| driver_err("copy", e))?;
        Ok(GpuCst { len: c.len, data })
    }

    pub(crate) fn c_compact(&self, c: &GpuCst, keep: &[u32]) -> BResult<GpuCst> {
        Ok(GpuCst { len: keep.len(), data: self.compact_rows::<f64>(&c.data, c.len, 1, keep)? })
    }

    fn cst(&self, data: CudaSlice<f64>, len: usize) -> GpuCst {
        GpuCst { len, data }
    }

    pub(crate) fn p_zeros<T: GpuScalar>(&self, rows: usize, cols: usize) -> BResult<GpuPMat<T>> {
        Ok(GpuPMat { rows, cols, a: self.alloc(rows * cols)? })
    }

    pub(crate) fn p_unit<T: GpuScalar>(&self, rows: usize, cols: usize, col: &[u32], val: &[T]) -> BResult<GpuPMat<T>> {
        polycert_deeppoly::check_unit_rows(rows, cols, col, val)?;
        let out = self.p_zeros::<T>(rows, cols)?;
        if rows > 0 {
            let (dc, dv, n, c) = (self.htod(col)?, self.htod(val)?, rows as i32, cols as u64);
            let f = self.dev.func("point_unit", T::SUFFIX);
            let mut l = self.dev.stream.launch_builder(f);
            l.arg(&out.a).arg(&c).arg(&dc).arg(&dv).arg(&n);
            unsafe { l.launch(grid_for(rows)) }.map_err(|e| driver_err("point_unit", e))?;
        }
        Ok(out)
    }

    /// A matrix the next kernel writes in full.
    fn p_written<T: GpuScalar>(&self, rows: usize, cols: usize) -> BResult<GpuPMat<T>> {
        Ok(GpuPMat { rows, cols, a: self.alloc_written(rows * cols)? })
    }

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
            return self.c_from_host(&[]);
        }
        let model = gemm_model::<T>();
        let gamma = model.gamma(m);
        let eta_m = fp::mul_up((m + 2) as f64, model.min_subnormal);
        let eta_r1: Vec<f64> = r1.iter().map(|&r| fp::mul_up(eta_m, r)).collect();
        let n = g.shape.numel();
        let pr = self.props("point_affine_const", g, &[b.0.len, b.1.len, wr.len, r1.len() * n])?;
        let eta = self.htod(&eta_r1)?;
        let cst = self.alloc_written::<f64>(a.rows)?;
        let (off, kg) = (self.offsets(g)?, kgeom(g.shape, g.win));
        let f = self.dev.func("point_affine_const", T::SUFFIX);
        let mut l = self.dev.stream.launch_builder(f);
        l.arg(&a.a).arg(&kg).arg(&*off).arg(&*pr).arg(&b.0.data).arg(&b.1.data).arg(&wr.data).arg(&gamma).arg(&eta);
        l.arg(&cst);
        unsafe { l.launch(per_row(a.rows)) }.map_err(|e| driver_err("point_affine_const", e))?;
        Ok(self.cst(cst, a.rows))
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn p_dense<T: GpuScalar>(
        &self,
        a: &GpuPMat<T>,
        g: &Geom,
        w: &GpuBuf<T>,
        n_in: usize,
        b: (&GpuBuf<T>, &GpuBuf<T>),
        wr: &GpuBuf<T>,
        r1: &[f64],
    ) -> BResult<(GpuPMat<T>, GpuCst)> {
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
            self.p_zeros::<T>(a.rows, n_in)?
        };
        let blas = self.blas()?;
        gemm_rm(blas, &a.a, a.rows, n_out, &w.data, n_in, &mut out.a)?;
        let cst = self.affine_const(a, &g.full_over(Shape::flat(n_out)), b, wr, n_out, r1)?;
        Ok((out, cst))
    }

    /// The point conv step: the rows through the conv, then the constants.
    pub(crate) fn p_conv<T: GpuScalar>(
        &self,
        a: &GpuPMat<T>,
        g: &Geom,
        p: &ConvParams<'_, Self, T>,
        out: &Geom,
        wr: &GpuBuf<T>,
        r1: &[f64],
    ) -> BResult<(GpuPMat<T>, GpuCst)> {
        let c = p.conv;
        let res = self.conv_rows(&a.a, a.rows, g, c, &p.weight.data, out)?;
        let m = g.shape.c * c.kernel.0.div_ceil(c.stride.0) * c.kernel.1.div_ceil(c.stride.1);
        let cst = self.affine_const(a, g, (p.bias_lo, p.bias_hi), wr, m, r1)?;
        Ok((res, cst))
    }

    /// `rows` rows over the conv output (`g`) through the conv, to its
    /// input (`out`), as GEMMs: per block of rows, the window is transposed
    /// to `(row, y, x) × C_out`, multiplied by the weights `C_out ×
    /// (C_in·kh·kw)` in cuBLAS, and the taps reaching each input
    /// coefficient are summed (at most `m` products per coefficient in all).
    pub(crate) fn conv_rows<T: GpuScalar>(
        &self,
        a: &CudaSlice<T>,
        rows: usize,
        g: &Geom,
        c: &polycert_deeppoly::Conv2d,
        weight: &CudaSlice<T>,
        out: &Geom,
    ) -> BResult<GpuPMat<T>> {
        let res = self.p_written::<T>(rows, out.cols())?;
        let (pos, c_out, taps) = (g.win.0 * g.win.1, g.shape.c, out.shape.c * c.kernel.0 * c.kernel.1);
        if rows > 0 && out.cols() > 0 {
            let (offi, offo) = (self.offsets(g)?, self.offsets(out)?);
            let (gi, go, kc) = (kgeom(g.shape, g.win), kgeom(out.shape, out.win), kconv(c));
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
                let mut t = self.alloc::<T>(nr * pos * taps)?;
                gemm_rm(blas, &ahat, nr * pos, c_out, weight, taps, &mut t)?;
                let f = self.dev.func("point_conv_col2im", T::SUFFIX);
                let mut l = self.dev.stream.launch_builder(f);
                l.arg(&t).arg(&gi).arg(&*offi).arg(&kc).arg(&go).arg(&*offo).arg(&res.a).arg(&r0i).arg(&nri);
                unsafe { l.launch(grid_for(nr * out.cols())) }.map_err(|e| driver_err("point_conv_col2im", e))?;
            }
        }
        Ok(res)
    }

    /// ReLU (`relu` 1: `p = (lam_lo, lam_up)`, `c.0 = mu_up`; 2: σ, `c.1 = mu_lo`) or
    /// diagonal step (`relu` 0).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn p_diag<T: GpuScalar>(
        &self,
        a: &GpuPMat<T>,
        g: &Geom,
        p: (&GpuBuf<T>, &GpuBuf<T>),
        c: (&GpuBuf<T>, &GpuBuf<T>),
        r: &GpuBuf<T>,
        relu: i32,
    ) -> BResult<(GpuPMat<T>, GpuCst)> {
        if a.rows == 0 {
            return Ok((self.p_zeros::<T>(0, a.cols)?, self.c_from_host(&[])?));
        }
        let pr = self.props("point_diag", g, &[p.0.len, p.1.len, c.0.len, c.1.len, r.len])?;
        let out = self.p_written::<T>(a.rows, a.cols)?;
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
        Ok((out, self.cst(cst, a.rows)))
    }

    pub(crate) fn p_relu<T: GpuScalar>(
        &self,
        a: &GpuPMat<T>,
        g: &Geom,
        p: &ReluParams<'_, Self, T>,
        r: &GpuBuf<T>,
    ) -> BResult<(GpuPMat<T>, GpuCst)> {
        match p.mu_lo {
            None => self.p_diag(a, g, (p.lam_lo, p.lam_up), (p.mu_up, p.mu_up), r, 1),
            Some(mu_lo) => self.p_diag(a, g, (p.lam_lo, p.lam_up), (p.mu_up, mu_lo), r, 2),
        }
    }

    /// Per row `−Σ err` over `cols` entries, the sum rounded up.
    fn row_sum_neg(&self, err: &CudaSlice<f64>, rows: usize, cols: usize) -> BResult<GpuCst> {
        let out = self.alloc_written::<f64>(rows)?;
        let c = cols as u64;
        let mut l = self.dev.stream.launch_builder(self.dev.plain("point_row_sum_neg"));
        l.arg(err).arg(&c).arg(&out);
        unsafe { l.launch(per_row(rows)) }.map_err(|e| driver_err("point_row_sum_neg", e))?;
        Ok(self.cst(out, rows))
    }

    pub(crate) fn p_maxpool<T: GpuScalar>(
        &self,
        a: &GpuPMat<T>,
        g: &Geom,
        p: &PoolParams<'_, Self, T>,
        out: &Geom,
        r: &GpuBuf<T>,
    ) -> BResult<(GpuPMat<T>, GpuCst)> {
        let cols_o = out.cols();
        if a.rows == 0 || cols_o == 0 {
            return Ok((self.p_zeros::<T>(a.rows, cols_o)?, self.c_from_host(&vec![0.0; a.rows])?));
        }
        let pr = self.props("point_maxpool", g, &[p.sel_lo.len, p.sel_up.len, p.up.len])?;
        out.check_tables("point_maxpool", &[r.len]).map_err(BackendError::Failure)?;
        let res = self.p_written::<T>(a.rows, cols_o)?;
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
        Ok((res, self.cst(cst, a.rows)))
    }

    pub(crate) fn p_concretize<T: GpuScalar>(
        &self,
        a: &GpuPMat<T>,
        g: &Geom,
        lo: &GpuBuf<T>,
        hi: &GpuBuf<T>,
    ) -> BResult<GpuCst> {
        if a.rows == 0 {
            return self.c_from_host(&[]);
        }
        let pr = self.props("point_concretize", g, &[lo.len, hi.len])?;
        let out = self.alloc_written::<f64>(a.rows)?;
        let (off, kg) = (self.offsets(g)?, kgeom(g.shape, g.win));
        let f = self.dev.func("point_concretize", T::SUFFIX);
        let mut l = self.dev.stream.launch_builder(f);
        l.arg(&a.a).arg(&kg).arg(&*off).arg(&*pr).arg(&lo.data).arg(&hi.data).arg(&out);
        unsafe { l.launch(per_row(a.rows)) }.map_err(|e| driver_err("point_concretize", e))?;
        Ok(self.cst(out, a.rows))
    }

    pub(crate) fn p_compact<T: GpuScalar>(&self, a: &GpuPMat<T>, keep: &[u32]) -> BResult<GpuPMat<T>> {
        Ok(GpuPMat { rows: keep.len(), cols: a.cols, a: self.compact_rows(&a.a, a.rows, a.cols, keep)? })
    }

    /// The listed rows of a `rows × cols` row-major matrix.
    fn compact_rows<T: GpuScalar>(
        &self,
        a: &CudaSlice<T>,
        rows: usize,
        cols: usize,
        keep: &[u32],
    ) -> BResult<CudaSlice<T>> {
        let out = self.alloc_written::<T>(keep.len() * cols)?;
        let n = keep.len() * cols;
        if n > 0 {
            if let Some(&bad) = keep.iter().find(|&&k| k as usize >= rows) {
                return Err(BackendError::Failure(format!("compaction: row {bad} of {rows}")));
            }
            let k = self.htod(keep)?;
            let (nk, c) = (keep.len() as i32, cols as u64);
            let f = self.dev.func("point_compact", T::SUFFIX);
            let mut l = self.dev.stream.launch_builder(f);
            l.arg(a).arg(&k).arg(&nk).arg(&c).arg(&out);
            unsafe { l.launch(grid_for(n)) }.map_err(|e| driver_err("point_compact", e))?;
        }
        Ok(out)
    }

    pub(crate) fn p_add_into<T: GpuScalar>(
        &self,
        dst: &mut GpuPMat<T>,
        dg: &Geom,
        src: &GpuPMat<T>,
        sg: &Geom,
        r: &GpuBuf<T>,
    ) -> BResult<GpuCst> {
        if src.rows != dst.rows {
            return Err(BackendError::Failure(format!("point_add_into: {} rows into {}", src.rows, dst.rows)));
        }
        let n = src.rows * src.cols;
        if n == 0 {
            return self.c_from_host(&vec![0.0; src.rows]);
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

    pub(crate) fn p_slice_cols<T: GpuScalar>(&self, a: &GpuPMat<T>, start: usize, len: usize) -> BResult<GpuPMat<T>> {
        if start + len > a.cols {
            return Err(BackendError::Failure(format!("point_slice_cols: {start}+{len} of {} columns", a.cols)));
        }
        let out = self.p_written::<T>(a.rows, len)?;
        let n = a.rows * len;
        if n > 0 {
            let (rows, cols, st, ln) = (a.rows as i32, a.cols as u64, start as u64, len as u64);
            let f = self.dev.func("point_slice_cols", T::SUFFIX);
            let mut l = self.dev.stream.launch_builder(f);
            l.arg(&a.a).arg(&rows).arg(&cols).arg(&st).arg(&ln).arg(&out.a);
            unsafe { l.launch(grid_for(n)) }.map_err(|e| driver_err("point_slice_cols", e))?;
        }
        Ok(out)
    }
}
