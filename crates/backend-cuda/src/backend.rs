//! The [`Backend`] trait on [`CudaBackend`]: each call opens a trace span
//! and runs its kernels (the `i_*` methods of the other modules).

use crate::*;

impl RuntimeOps for CudaBackend {
    type Graph = cudarc::driver::CudaGraph;

    fn name(&self) -> String {
        format!("cuda ({})", self.dev.name)
    }

    fn memory_budget(&self) -> usize {
        self.budget.unwrap_or_else(|| self.dev.free_memory() / 3)
    }

    /// Four: a ReLU search's rounds are host work for the most part (with 4
    /// workers the GPU was busy 28% of the time on an H100), so other
    /// workers' rounds run in one's gaps. On an H100 with 16 cores, 60 s of
    /// resnet_4b prop_8 proved 25,369 / 31,712 / 29,918 leaves with 4 / 8 /
    /// 12 workers, but with 8, 256x4 prop_7_0.03 timed out at 300 s after
    /// 790,568 leaves, where 4 (an older build) had proved it in 291 s with
    /// 541,683: the search's tree grew (one run each).
    fn search_workers(&self) -> usize {
        4
    }

    fn fork(&self) -> BResult<Option<Self>> {
        self.worker().map(Some)
    }

    fn capture(&self, f: &mut dyn FnMut() -> BResult<()>) -> BResult<Option<cudarc::driver::CudaGraph>> {
        let _span = self.trace.span("capture");
        self.i_capture(f)
    }

    fn replay(&self, g: &cudarc::driver::CudaGraph) -> BResult<()> {
        let _span = self.trace.span("replay");
        self.i_replay(g)
    }
}

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

    fn gather(&self, x: &GpuBuf<T>, idx: &[u32]) -> BResult<Vec<T>> {
        let _span = self.trace.span("gather");
        Ok(self.i_gather_many(&[(x, idx)])?.into_iter().next().unwrap_or_default())
    }

    fn gather_many(&self, parts: &[(&GpuBuf<T>, &[u32])]) -> BResult<Vec<Vec<T>>> {
        let _span = self.trace.span("gather");
        self.i_gather_many(parts)
    }

    fn scatter(&self, base: &GpuBuf<T>, idx: &[u32], vals: &[T]) -> BResult<GpuBuf<T>> {
        let _span = self.trace.span("scatter");
        self.i_scatter_many(&[(base, idx, vals)])?
            .pop()
            .ok_or_else(|| BackendError::Failure("scatter: no output".into()))
    }

    fn scatter_many(&self, parts: &[(&GpuBuf<T>, &[u32], &[T])]) -> BResult<Vec<GpuBuf<T>>> {
        let _span = self.trace.span("scatter");
        self.i_scatter_many(parts)
    }

    fn repeat_rows(&self, x: &GpuBuf<T>, n: usize, rows: &[u32]) -> BResult<GpuBuf<T>> {
        let _span = self.trace.span("repeat_rows");
        self.i_repeat_rows(x, n, rows)
    }

    fn copy_range(
        &self,
        dst: &mut GpuBuf<T>,
        dst_at: usize,
        src: &GpuBuf<T>,
        src_at: usize,
        len: usize,
    ) -> BResult<()> {
        self.i_copy_range(dst, dst_at, src, src_at, len)
    }
}

impl<T: GpuScalar> MatrixOps<T> for CudaBackend {
    type Mat = GpuMat<T>;

    type PMat = GpuPMat<T>;

    type Cst = GpuCst;

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
        self.i_zeros(rows, cols)
    }

    fn compact(&self, a: &GpuMat<T>, _g: &Geom, keep: &[u32]) -> BResult<GpuMat<T>> {
        let _span = self.trace.span("compact");
        self.i_compact(a, _g, keep)
    }

    fn slice_cols(&self, a: &GpuMat<T>, start: usize, len: usize) -> BResult<GpuMat<T>> {
        let _span = self.trace.span("slice_cols");
        self.i_slice_cols(a, start, len)
    }

    fn cst_from_host(&self, v: &[f64]) -> BResult<GpuCst> {
        self.c_from_host(v)
    }

    fn cst_to_host(&self, c: &GpuCst) -> BResult<Vec<f64>> {
        let _span = self.trace.span("cst_to_host");
        self.c_to_host(c)
    }

    fn cst_add(&self, acc: &mut GpuCst, inc: &GpuCst) -> BResult<()> {
        self.c_add(acc, inc)
    }

    fn cst_dup(&self, c: &GpuCst) -> BResult<GpuCst> {
        self.c_dup(c)
    }

    fn cst_compact(&self, c: &GpuCst, keep: &[u32]) -> BResult<GpuCst> {
        self.c_compact(c, keep)
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
        self.p_zeros(rows, cols)
    }

    fn pmat_unit(&self, rows: usize, cols: usize, col: &[u32], val: &[T]) -> BResult<GpuPMat<T>> {
        let _span = self.trace.span("pmat_unit");
        self.p_unit(rows, cols, col, val)
    }

    fn point_compact(&self, a: &GpuPMat<T>, _g: &Geom, keep: &[u32]) -> BResult<GpuPMat<T>> {
        let _span = self.trace.span("point_compact");
        self.p_compact(a, keep)
    }

    fn point_slice_cols(&self, a: &GpuPMat<T>, start: usize, len: usize) -> BResult<GpuPMat<T>> {
        let _span = self.trace.span("point_slice_cols");
        self.p_slice_cols(a, start, len)
    }
}

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
        self.i_dense_backsub(a, w, n_in, b_lo, b_hi)
    }

    fn conv_backsub(
        &self,
        a: &GpuMat<T>,
        g: &Geom,
        p: &ConvParams<'_, Self, T>,
        out: &Geom,
    ) -> BResult<(GpuMat<T>, Vec<f64>)> {
        let _span = self.trace.span("conv_backsub");
        self.i_conv_backsub(a, g, p, out)
    }

    fn diag_backsub(
        &self,
        a: &GpuMat<T>,
        g: &Geom,
        m: (&GpuBuf<T>, &GpuBuf<T>),
        c: (&GpuBuf<T>, &GpuBuf<T>),
    ) -> BResult<(GpuMat<T>, Vec<f64>)> {
        let _span = self.trace.span("diag_backsub");
        self.i_diag_backsub(a, g, m, c)
    }

    fn add_into(&self, dst: &mut GpuMat<T>, dg: &Geom, src: &GpuMat<T>, sg: &Geom) -> BResult<()> {
        let _span = self.trace.span("add_into");
        self.i_add_into(dst, dg, src, sg)
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
        self.p_dense(a, g, w, n_in, b, mag.wr, mag.r1)
    }

    fn point_conv(
        &self,
        a: &GpuPMat<T>,
        g: &Geom,
        p: &ConvParams<'_, Self, T>,
        out: &Geom,
        mag: &Magnitudes<'_, GpuBuf<T>>,
    ) -> BResult<(GpuPMat<T>, GpuCst)> {
        let _span = self.trace.span("point_conv");
        self.p_conv(a, g, p, out, mag.wr, mag.r1)
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
        self.p_diag(a, g, m, c, r, 0)
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
        self.p_add_into(dst, dg, src, sg, r)
    }
}

impl<T: GpuScalar> RelaxOps<T> for CudaBackend {
    fn relu_backsub(&self, a: &GpuMat<T>, g: &Geom, p: &ReluParams<'_, Self, T>) -> BResult<(GpuMat<T>, Vec<f64>)> {
        let _span = self.trace.span("relu_backsub");
        self.i_relu_backsub(a, g, p)
    }

    fn maxpool_backsub(
        &self,
        a: &GpuMat<T>,
        g: &Geom,
        p: &PoolParams<'_, Self, T>,
        out: &Geom,
    ) -> BResult<(GpuMat<T>, Vec<f64>)> {
        let _span = self.trace.span("maxpool_backsub");
        self.i_maxpool_backsub(a, g, p, out)
    }

    fn concretize(&self, a: &GpuMat<T>, g: &Geom, lo: &GpuBuf<T>, hi: &GpuBuf<T>) -> BResult<Vec<f64>> {
        let _span = self.trace.span("concretize");
        self.i_concretize(a, g, lo, hi)
    }

    fn point_relu(
        &self,
        a: &GpuPMat<T>,
        g: &Geom,
        p: &ReluParams<'_, Self, T>,
        r: &GpuBuf<T>,
    ) -> BResult<(GpuPMat<T>, GpuCst)> {
        let _span = self.trace.span("point_relu");
        self.p_relu(a, g, p, r)
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
        self.p_maxpool(a, g, p, out, r)
    }

    fn point_concretize(&self, a: &GpuPMat<T>, g: &Geom, lo: &GpuBuf<T>, hi: &GpuBuf<T>) -> BResult<GpuCst> {
        let _span = self.trace.span("point_concretize");
        self.p_concretize(a, g, lo, hi)
    }
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
        self.i_forward_dense(w, bias, n_in, x, batch, model)
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
        self.i_forward_conv(conv, w, bias, input, x, batch, model)
    }

    fn infer_dense(
        &self,
        w: &GpuBuf<T>,
        b: &GpuBuf<T>,
        n_in: usize,
        x: &GpuBuf<T>,
        batch: usize,
    ) -> BResult<GpuBuf<T>> {
        let _span = self.trace.span("infer_dense");
        self.i_dense(w, b, n_in, x, batch)
    }

    fn grad_dense(&self, g: &GpuBuf<T>, w: &GpuBuf<T>, n_in: usize, batch: usize) -> BResult<GpuBuf<T>> {
        let _span = self.trace.span("grad_dense");
        self.i_grad_dense(g, w, n_in, batch)
    }

    fn grad_conv(&self, c: &Conv2d, w: &GpuBuf<T>, input: Shape, g: &GpuBuf<T>, batch: usize) -> BResult<GpuBuf<T>> {
        let _span = self.trace.span("grad_conv");
        self.i_grad_conv(c, w, input, g, batch)
    }

    fn pointwise(&self, op: polycert_deeppoly::Pointwise<'_, GpuBuf<T>>) -> BResult<GpuBuf<T>> {
        let _span = self.trace.span("pointwise");
        self.i_pointwise(op)
    }
}
