//! [`MatrixOps`] on the GPU: expression matrices (interval [`GpuMat`],
//! point [`GpuPMat`]) and row constants ([`GpuCst`]): transfers, zeros,
//! unit rows, row compaction and column slices by kernels from
//! `kernels/deeppoly.cu` and `kernels/point.cu`; `cst_add` rounds down.

use crate::device::driver_err;
use crate::{CudaBackend, GpuMat, GpuScalar, grid_for};
use cudarc::driver::{CudaSlice, PushKernelArg};
use polycert_deeppoly::{BResult, BackendError, Geom, MatrixOps};

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

impl<T: GpuScalar> MatrixOps<T> for CudaBackend {
    type Mat = GpuMat<T>;
    type PMat = GpuPMat<T>;
    type Cst = GpuCst;
    type CstFetch = crate::fetch::CstFetch;

    fn mat_from_host(&self, rows: usize, cols: usize, lo: &[T], hi: &[T]) -> BResult<GpuMat<T>> {
        let _span = self.trace.span("mat_from_host");
        if lo.len() != rows * cols || hi.len() != lo.len() {
            return Err(BackendError::Failure(format!("matrix planes do not match {rows}x{cols}")));
        }
        Ok(GpuMat { rows, cols, lo: self.htod(lo)?, hi: self.htod(hi)? })
    }

    fn mat_to_host(&self, m: &GpuMat<T>) -> BResult<(Vec<T>, Vec<T>)> {
        let _span = self.trace.span("mat_to_host");
        Ok((self.dtoh(&m.lo, m.rows * m.cols)?, self.dtoh(&m.hi, m.rows * m.cols)?))
    }

    fn mat_rows(&self, m: &GpuMat<T>) -> usize {
        m.rows
    }

    fn mat_zeros(&self, rows: usize, cols: usize) -> BResult<GpuMat<T>> {
        let _span = self.trace.span("mat_zeros");
        self.zero_mat(rows, cols)
    }

    fn compact(&self, a: &GpuMat<T>, _g: &Geom, keep: &[u32]) -> BResult<GpuMat<T>> {
        let _span = self.trace.span("compact");
        let out: GpuMat<T> = self.zero_mat(keep.len(), a.cols)?;
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

    fn slice_cols(&self, a: &GpuMat<T>, start: usize, len: usize) -> BResult<GpuMat<T>> {
        let _span = self.trace.span("slice_cols");
        let out: GpuMat<T> = self.zero_mat(a.rows, len)?;
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

    fn cst_from_host(&self, v: &[f64]) -> BResult<GpuCst> {
        Ok(GpuCst { len: v.len(), data: self.htod(v)? })
    }

    fn cst_to_host(&self, c: &GpuCst) -> BResult<Vec<f64>> {
        let _span = self.trace.span("cst_to_host");
        self.dtoh(&c.data, c.len)
    }

    fn cst_fetch(&self, c: &GpuCst) -> BResult<crate::fetch::CstFetch> {
        self.fetch_start(c)
    }

    fn cst_fetched(&self, f: crate::fetch::CstFetch) -> BResult<Vec<f64>> {
        self.fetch_wait(f)
    }

    fn fetch_overlaps(&self) -> bool {
        true
    }

    fn cst_add(&self, acc: &mut GpuCst, inc: &GpuCst) -> BResult<()> {
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

    fn cst_dup(&self, c: &GpuCst) -> BResult<GpuCst> {
        let data = self.dev.stream.clone_dtod(&c.data).map_err(|e| driver_err("copy", e))?;
        Ok(GpuCst { len: c.len, data })
    }

    fn cst_compact(&self, c: &GpuCst, keep: &[u32]) -> BResult<GpuCst> {
        Ok(GpuCst { len: keep.len(), data: self.compact_rows::<f64>(&c.data, c.len, 1, keep)? })
    }

    fn pmat_from_host(&self, rows: usize, cols: usize, a: &[T]) -> BResult<GpuPMat<T>> {
        let _span = self.trace.span("pmat_from_host");
        if a.len() != rows * cols {
            return Err(BackendError::Failure(format!("{} values for a {rows}x{cols} matrix", a.len())));
        }
        Ok(GpuPMat { rows, cols, a: self.htod(a)? })
    }

    fn pmat_to_host(&self, m: &GpuPMat<T>) -> BResult<Vec<T>> {
        let _span = self.trace.span("pmat_to_host");
        self.dtoh(&m.a, m.rows * m.cols)
    }

    fn pmat_zeros(&self, rows: usize, cols: usize) -> BResult<GpuPMat<T>> {
        let _span = self.trace.span("pmat_zeros");
        self.zero_pmat(rows, cols)
    }

    fn pmat_unit(&self, rows: usize, cols: usize, col: &[u32], val: &[T]) -> BResult<GpuPMat<T>> {
        let _span = self.trace.span("pmat_unit");
        polycert_deeppoly::check_unit_rows(rows, cols, col, val)?;
        let out = self.zero_pmat::<T>(rows, cols)?;
        if rows > 0 {
            let (dc, dv, n, c) = (self.htod(col)?, self.htod(val)?, rows as i32, cols as u64);
            let f = self.dev.func("point_unit", T::SUFFIX);
            let mut l = self.dev.stream.launch_builder(f);
            l.arg(&out.a).arg(&c).arg(&dc).arg(&dv).arg(&n);
            unsafe { l.launch(grid_for(rows)) }.map_err(|e| driver_err("point_unit", e))?;
        }
        Ok(out)
    }

    fn point_compact(&self, a: &GpuPMat<T>, _g: &Geom, keep: &[u32]) -> BResult<GpuPMat<T>> {
        let _span = self.trace.span("point_compact");
        Ok(GpuPMat { rows: keep.len(), cols: a.cols, a: self.compact_rows(&a.a, a.rows, a.cols, keep)? })
    }

    fn point_slice_cols(&self, a: &GpuPMat<T>, start: usize, len: usize) -> BResult<GpuPMat<T>> {
        let _span = self.trace.span("point_slice_cols");
        if start + len > a.cols {
            return Err(BackendError::Failure(format!("point_slice_cols: {start}+{len} of {} columns", a.cols)));
        }
        let out = self.written_pmat::<T>(a.rows, len)?;
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

impl CudaBackend {
    /// A zero interval matrix (no span: the steps' own allocation).
    pub(crate) fn zero_mat<T: GpuScalar>(&self, rows: usize, cols: usize) -> BResult<GpuMat<T>> {
        Ok(GpuMat { rows, cols, lo: self.alloc(rows * cols)?, hi: self.alloc(rows * cols)? })
    }

    /// A zero point matrix (no span: the steps' own allocation).
    pub(crate) fn zero_pmat<T: GpuScalar>(&self, rows: usize, cols: usize) -> BResult<GpuPMat<T>> {
        Ok(GpuPMat { rows, cols, a: self.alloc(rows * cols)? })
    }

    /// A point matrix the next kernel writes in full.
    pub(crate) fn written_pmat<T: GpuScalar>(&self, rows: usize, cols: usize) -> BResult<GpuPMat<T>> {
        Ok(GpuPMat { rows, cols, a: self.alloc_written(rows * cols)? })
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
            // One compaction drops the same rows from every part and the
            // constants: the list is uploaded once (cached as batch slots are).
            let k = crate::cached(&self.props_cache, keep, |v| self.htod(v))?;
            let (nk, c) = (keep.len() as i32, cols as u64);
            let f = self.dev.func("point_compact", T::SUFFIX);
            let mut l = self.dev.stream.launch_builder(f);
            l.arg(a).arg(&*k).arg(&nk).arg(&c).arg(&out);
            unsafe { l.launch(grid_for(n)) }.map_err(|e| driver_err("point_compact", e))?;
        }
        Ok(out)
    }
}
