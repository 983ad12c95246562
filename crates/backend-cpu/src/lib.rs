//! The reference CPU backend of polycert: rayon over rows, blocked interval
//! GEMM, windowed conv backsubstitution. Every result is rounded outward.

mod conv;
mod forward;
mod gemm;
mod infer;
mod lanes;
mod point;
mod point_affine;
mod pool;
mod rowops;
mod util;

pub use point_affine::gemm_model;
pub use util::{CpuMat, CpuPMat};

use polycert_deeppoly::{
    AffineForward, AffineOps, BResult, BackendError, Conv2d, ConvParams, Geom, InferOps, Magnitudes, MatrixOps,
    MemoryOps, PoolParams, RelaxOps, ReluParams, RuntimeOps, Shape,
};
use polycert_interval::{FloatModel, Fp};

/// The CPU backend.
#[derive(Debug, Clone)]
pub struct CpuBackend {
    budget: usize,
}

impl Default for CpuBackend {
    fn default() -> Self {
        Self { budget: 1 << 30 }
    }
}

impl CpuBackend {
    /// A backend that keeps expression matrices within `bytes`.
    pub fn with_budget(bytes: usize) -> Self {
        Self { budget: bytes }
    }
}

fn check_mat<T>(m: &CpuMat<T>) -> BResult<()> {
    if m.lo.len() != m.rows * m.cols || m.hi.len() != m.lo.len() {
        return Err(BackendError::Failure(format!("matrix planes do not match {}x{}", m.rows, m.cols)));
    }
    Ok(())
}

fn check_len(what: &str, got: usize, want: usize) -> BResult<()> {
    if got != want {
        return Err(BackendError::Failure(format!("{what}: {got} values, expected {want}")));
    }
    Ok(())
}

/// Checks that per-neuron tables cover every batch slot `g`'s rows read.
fn check_slots(what: &str, g: &Geom, tables: &[usize]) -> BResult<()> {
    g.check_tables(what, tables).map_err(BackendError::Failure)
}

/// `batch` stacked results of `f` over consecutive input slots of `n_in`,
/// `work` multiply-adds each: the slots run in parallel when they are worth
/// it together ([`util::worth`]), `f` in parallel when one is.
fn forward_batched<T: Fp>(
    x: (&[T], &[T]),
    (n_in, work): (usize, usize),
    batch: usize,
    f: impl Fn(&[T], &[T]) -> AffineForward<Vec<T>> + Sync + Send,
) -> BResult<AffineForward<Vec<T>>> {
    check_len("forward input", x.0.len().min(x.1.len()), batch * n_in)?;
    let mut all = AffineForward { lo: Vec::new(), hi: Vec::new(), bias_lo: Vec::new(), bias_hi: Vec::new() };
    let slots = util::map_range(batch, batch * work, |s| {
        let slot = s * n_in..(s + 1) * n_in;
        f(&x.0[slot.clone()], &x.1[slot])
    });
    for f in slots {
        all.lo.extend(f.lo);
        all.hi.extend(f.hi);
        all.bias_lo.extend(f.bias_lo);
        all.bias_hi.extend(f.bias_hi);
    }
    Ok(all)
}

impl RuntimeOps for CpuBackend {
    type Graph = ();
    /// Batches of 8 beat one at a time; larger ones leave the caches and
    /// fault fresh pages (measured: bench/results/2026-11-27-architecture-measurements.md).
    fn batch_hint(&self) -> usize {
        8
    }
    /// 256x6's 8 slots' worth of neurons: smaller networks batch more
    /// (measured: bench/results/2026-11-27-architecture-measurements.md).
    fn batch_neurons(&self) -> Option<usize> {
        Some(32_768)
    }
    /// The host already is this backend's processor: batches of 8 rows gain
    /// nothing from shared GEMMs (measured: bench/results/2026-11-27-architecture-measurements.md).
    fn offload_relaxed(&self) -> bool {
        false
    }
    /// One search worker by default (rayon already fills the cores), but
    /// forks for `--search-workers`.
    fn fork(&self) -> BResult<Option<Self>> {
        Ok(Some(self.clone()))
    }
    fn name(&self) -> String {
        format!("cpu ({} threads)", rayon::current_num_threads())
    }
    fn memory_budget(&self) -> usize {
        self.budget
    }
}

impl<T: Fp> MemoryOps<T> for CpuBackend {
    type Buf = Vec<T>;
    fn upload(&self, data: &[T]) -> BResult<Vec<T>> {
        Ok(data.to_vec())
    }
    fn download(&self, buf: &Vec<T>) -> BResult<Vec<T>> {
        Ok(buf.clone())
    }
}

impl<T: Fp> MatrixOps<T> for CpuBackend {
    type Mat = CpuMat<T>;
    type PMat = CpuPMat<T>;
    type Cst = Vec<f64>;
    type CstFetch = Vec<f64>;
    fn mat_from_host(&self, rows: usize, cols: usize, lo: &[T], hi: &[T]) -> BResult<CpuMat<T>> {
        let m = CpuMat { rows, cols, lo: lo.to_vec(), hi: hi.to_vec() };
        check_mat(&m)?;
        Ok(m)
    }
    fn mat_to_host(&self, m: &CpuMat<T>) -> BResult<(Vec<T>, Vec<T>)> {
        Ok((m.lo.clone(), m.hi.clone()))
    }
    fn mat_rows(&self, m: &CpuMat<T>) -> usize {
        m.rows
    }
    fn mat_zeros(&self, rows: usize, cols: usize) -> BResult<CpuMat<T>> {
        Ok(CpuMat::zeros(rows, cols))
    }
    fn compact(&self, a: &CpuMat<T>, _g: &Geom, keep: &[u32]) -> BResult<CpuMat<T>> {
        Ok(rowops::compact(a, keep))
    }
    fn slice_cols(&self, a: &CpuMat<T>, start: usize, len: usize) -> BResult<CpuMat<T>> {
        Ok(rowops::slice_cols(a, start, len))
    }
    fn pmat_from_host(&self, rows: usize, cols: usize, a: &[T]) -> BResult<CpuPMat<T>> {
        check_len("point matrix", a.len(), rows * cols)?;
        Ok(CpuPMat { rows, cols, a: a.to_vec() })
    }
    fn pmat_to_host(&self, m: &CpuPMat<T>) -> BResult<Vec<T>> {
        Ok(m.a.clone())
    }
    fn cst_from_host(&self, v: &[f64]) -> BResult<Vec<f64>> {
        Ok(v.to_vec())
    }
    fn cst_to_host(&self, c: &Vec<f64>) -> BResult<Vec<f64>> {
        Ok(c.clone())
    }
    fn cst_fetch(&self, c: &Vec<f64>) -> BResult<Vec<f64>> {
        Ok(c.clone())
    }
    fn cst_fetched(&self, f: Vec<f64>) -> BResult<Vec<f64>> {
        Ok(f)
    }
    fn cst_add(&self, acc: &mut Vec<f64>, inc: &Vec<f64>) -> BResult<()> {
        if acc.len() != inc.len() {
            return Err(BackendError::Failure(format!("cst_add: {} constants into {}", inc.len(), acc.len())));
        }
        for (a, i) in acc.iter_mut().zip(inc) {
            *a = polycert_interval::fp::add_down(*a, *i);
        }
        Ok(())
    }
    fn cst_dup(&self, c: &Vec<f64>) -> BResult<Vec<f64>> {
        Ok(c.clone())
    }
    fn cst_compact(&self, c: &Vec<f64>, keep: &[u32]) -> BResult<Vec<f64>> {
        keep.iter()
            .map(|&r| c.get(r as usize).copied().ok_or_else(|| BackendError::Failure(format!("cst_compact: row {r}"))))
            .collect()
    }
    fn pmat_zeros(&self, rows: usize, cols: usize) -> BResult<CpuPMat<T>> {
        Ok(CpuPMat { rows, cols, a: vec![T::zero(); rows * cols] })
    }
    fn point_compact(&self, a: &CpuPMat<T>, _g: &Geom, keep: &[u32]) -> BResult<CpuPMat<T>> {
        Ok(CpuPMat { rows: keep.len(), cols: a.cols, a: util::compact_plane(&a.a, a.cols, keep) })
    }
    fn point_slice_cols(&self, a: &CpuPMat<T>, start: usize, len: usize) -> BResult<CpuPMat<T>> {
        Ok(CpuPMat { rows: a.rows, cols: len, a: util::slice_plane(&a.a, a.rows, a.cols, start, len) })
    }
}

impl<T: Fp> AffineOps<T> for CpuBackend {
    fn dense_backsub(
        &self,
        a: &CpuMat<T>,
        w: &Vec<T>,
        n_in: usize,
        b_lo: &Vec<T>,
        b_hi: &Vec<T>,
    ) -> BResult<(CpuMat<T>, Vec<f64>)> {
        if w.len() != a.cols * n_in {
            return Err(BackendError::Failure(format!("dense_backsub: {} weights for {}x{n_in}", w.len(), a.cols)));
        }
        Ok(gemm::dense_backsub(a, w, n_in, b_lo, b_hi))
    }
    fn conv_backsub(
        &self,
        a: &CpuMat<T>,
        g: &Geom,
        p: &ConvParams<'_, Self, T>,
        out: &Geom,
    ) -> BResult<(CpuMat<T>, Vec<f64>)> {
        Ok(conv::conv_backsub(a, g, p.conv, p.weight, p.bias_lo, p.bias_hi, out))
    }
    fn diag_backsub(
        &self,
        a: &CpuMat<T>,
        g: &Geom,
        m: (&Vec<T>, &Vec<T>),
        c: (&Vec<T>, &Vec<T>),
    ) -> BResult<(CpuMat<T>, Vec<f64>)> {
        Ok(rowops::diag_backsub(a, g, (m.0, m.1), (c.0, c.1)))
    }
    fn add_into(&self, dst: &mut CpuMat<T>, dg: &Geom, src: &CpuMat<T>, sg: &Geom) -> BResult<()> {
        rowops::add_into(dst, dg, src, sg);
        Ok(())
    }
    fn point_dense(
        &self,
        a: &CpuPMat<T>,
        g: &Geom,
        w: &Vec<T>,
        n_in: usize,
        b: (&Vec<T>, &Vec<T>),
        mag: &Magnitudes<'_, Vec<T>>,
    ) -> BResult<(CpuPMat<T>, Vec<f64>)> {
        check_len("point_dense weights", w.len(), a.cols * n_in)?;
        check_len("point_dense rows", g.rows(), a.rows)?;
        let g = g.full_over(Shape::flat(a.cols));
        check_slots("point_dense", &g, &[mag.wr.len(), b.0.len(), b.1.len(), mag.r1.len() * a.cols])?;
        Ok(point_affine::point_dense(a, &g, w, n_in, (b.0, b.1), mag.wr, mag.r1))
    }
    fn point_conv(
        &self,
        a: &CpuPMat<T>,
        g: &Geom,
        p: &ConvParams<'_, Self, T>,
        out: &Geom,
        mag: &Magnitudes<'_, Vec<T>>,
    ) -> BResult<(CpuPMat<T>, Vec<f64>)> {
        check_slots("point_conv", g, &[mag.wr.len(), p.bias_lo.len(), p.bias_hi.len()])?;
        check_slots("point_conv", g, &[mag.r1.len() * g.shape.numel()])?;
        Ok(point_affine::point_conv(a, g, p.conv, p.weight, (p.bias_lo, p.bias_hi), out, mag.wr, mag.r1))
    }
    fn point_diag(
        &self,
        a: &CpuPMat<T>,
        g: &Geom,
        m: (&Vec<T>, &Vec<T>),
        c: (&Vec<T>, &Vec<T>),
        r: &Vec<T>,
    ) -> BResult<(CpuPMat<T>, Vec<f64>)> {
        check_slots("point_diag", g, &[m.0.len(), m.1.len(), c.0.len(), c.1.len(), r.len()])?;
        Ok(point::point_diag(a, g, (m.0, m.1), (c.0, c.1), r))
    }
    fn point_add_into(
        &self,
        dst: &mut CpuPMat<T>,
        dg: &Geom,
        src: &CpuPMat<T>,
        sg: &Geom,
        r: &Vec<T>,
    ) -> BResult<Vec<f64>> {
        check_slots("point_add_into", sg, &[r.len()])?;
        Ok(point::point_add_into(dst, dg, src, sg, r))
    }
}

impl<T: Fp> RelaxOps<T> for CpuBackend {
    fn relu_backsub(&self, a: &CpuMat<T>, g: &Geom, p: &ReluParams<'_, Self, T>) -> BResult<(CpuMat<T>, Vec<f64>)> {
        if let Some(ml) = p.mu_lo {
            check_slots("relu_backsub", g, &[ml.len(), p.mu_up.len()])?;
        }
        Ok(rowops::relu_backsub(a, g, p.lam_lo, p.lam_up, (p.mu_up, p.mu_lo.map(|v| &v[..]))))
    }
    fn maxpool_backsub(
        &self,
        a: &CpuMat<T>,
        g: &Geom,
        p: &PoolParams<'_, Self, T>,
        out: &Geom,
    ) -> BResult<(CpuMat<T>, Vec<f64>)> {
        Ok(pool::maxpool_backsub(a, g, (p.sel_lo, p.sel_up), p.lo, p.up, out))
    }
    fn concretize(&self, a: &CpuMat<T>, g: &Geom, lo: &Vec<T>, hi: &Vec<T>) -> BResult<Vec<f64>> {
        Ok(rowops::concretize(a, g, lo, hi))
    }
    fn point_relu(
        &self,
        a: &CpuPMat<T>,
        g: &Geom,
        p: &ReluParams<'_, Self, T>,
        r: &Vec<T>,
    ) -> BResult<(CpuPMat<T>, Vec<f64>)> {
        check_slots("point_relu", g, &[p.lam_lo.len(), p.lam_up.len(), p.mu_up.len(), r.len()])?;
        if let Some(ml) = p.mu_lo {
            check_slots("point_relu", g, &[ml.len()])?;
        }
        Ok(point::point_relu(a, g, (p.lam_lo, p.lam_up), (p.mu_up, p.mu_lo.map(|v| &v[..])), r))
    }
    fn point_maxpool(
        &self,
        a: &CpuPMat<T>,
        g: &Geom,
        p: &PoolParams<'_, Self, T>,
        out: &Geom,
        r: &Vec<T>,
    ) -> BResult<(CpuPMat<T>, Vec<f64>)> {
        check_slots("point_maxpool", g, &[p.sel_lo.len(), p.sel_up.len(), p.up.len()])?;
        check_slots("point_maxpool", out, &[r.len()])?;
        Ok(point::point_maxpool(a, g, (p.sel_lo, p.sel_up), p.up, out, r))
    }
    fn point_concretize(&self, a: &CpuPMat<T>, g: &Geom, lo: &Vec<T>, hi: &Vec<T>) -> BResult<Vec<f64>> {
        check_slots("point_concretize", g, &[lo.len(), hi.len()])?;
        Ok(point::point_concretize(a, g, lo, hi))
    }
}

impl<T: Fp> InferOps<T> for CpuBackend {
    fn forward_dense(
        &self,
        w: &Vec<T>,
        b: &Vec<T>,
        n_in: usize,
        x: (&Vec<T>, &Vec<T>),
        batch: usize,
        model: FloatModel,
    ) -> BResult<AffineForward<Vec<T>>> {
        let work = b.len() * n_in;
        forward_batched((x.0, x.1), (n_in, work), batch, |xl, xh| forward::forward_dense(w, b, n_in, xl, xh, model))
    }
    fn forward_conv(
        &self,
        conv: &Conv2d,
        w: &Vec<T>,
        b: &Vec<T>,
        input: Shape,
        x: (&Vec<T>, &Vec<T>),
        batch: usize,
        model: FloatModel,
    ) -> BResult<AffineForward<Vec<T>>> {
        let n_in = input.numel();
        // At least a multiply-add per weight and input value.
        let work = w.len().max(n_in);
        forward_batched((x.0, x.1), (n_in, work), batch, |xl, xh| conv::forward_conv(conv, w, b, input, xl, xh, model))
    }
    fn infer_dense(&self, w: &Vec<T>, b: &Vec<T>, n_in: usize, x: &Vec<T>, batch: usize) -> BResult<Vec<T>> {
        infer::infer_dense(w, b, n_in, x, batch)
    }
    fn grad_dense(&self, g: &Vec<T>, w: &Vec<T>, n_in: usize, batch: usize) -> BResult<Vec<T>> {
        infer::grad_dense(g, w, n_in, batch)
    }
}
