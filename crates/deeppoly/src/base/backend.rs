//! The `Backend` trait: the heavy operations of the analysis. Backends own
//! the storage of expression matrices and layer parameters; the analysis
//! keeps geometry, constants and control flow on the host.
//!
//! Conventions shared by every backend:
//! - An expression matrix (`Mat`) holds `rows × geom.cols()` interval
//!   coefficients as two planes (lower, upper), row-major, each row laid out
//!   as `[c][wy][wx]` over its window (see [`Geom`]).
//! - Every row is a lower bound: `target ≥ Σ a_j·x_j + cst` for some `a_j`
//!   in the coefficient intervals. Operations that move constants return the
//!   per-row increment as a sound lower bound in f64.
//! - Every result is rounded outward.
//!
//! Two arithmetics share these conventions ([`Arith`]):
//! - *interval* (GPUPoly): `Mat` holds interval coefficients and every
//!   product and sum rounds outward, in custom kernels;
//! - *point* (the design notes' "sound backsubstitution on plain GEMMs"):
//!   `PMat` holds one plane of point coefficients, each step is a plain
//!   GEMM or convolution in round-to-nearest, in any order and with FMA,
//!   and its a-priori error, paid with bounds `r ≥ |x|` of the values the
//!   row is over, is subtracted from the row's constant. The `point_*`
//!   methods return per-row constant increments with those error terms
//!   already folded in, as sound lower bounds. Coefficients that are zero
//!   contribute nothing (also when `r` is infinite); a non-finite
//!   increment means the row proves nothing.
//!
//! Batches (point arithmetic): a row is a (property, neuron) pair. The
//! rows of many properties share one matrix and one GEMM; per-neuron
//! tables (bounds, relaxations, bias intervals, `r`, `|W|·r`) then hold
//! `batch × neurons` values, property-major, and row `r` reads the slot
//! `geom.props[r]` (see [`Geom::table_base`]). Weights are shared. The
//! interval arithmetic runs one property at a time (slot 0).

use crate::base::geom::Geom;
pub use crate::base::infer::Pointwise;
use crate::base::ir::{Conv2d, Shape};
use polycert_interval::{FloatModel, Fp};

/// Errors a backend can raise (no GPU, out of memory, ...).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BackendError {
    #[error("backend unavailable: {0}")]
    Unavailable(String),
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    #[error("backend failure: {0}")]
    Failure(String),
}

pub type BResult<T> = Result<T, BackendError>;

/// A conv layer's parameters uploaded to the backend.
pub struct ConvParams<'a, B: ?Sized + Backend<T>, T: Fp> {
    pub conv: &'a Conv2d,
    pub weight: &'a B::Buf,
    /// Bias interval (bias ± the inference rounding bound), per output neuron.
    pub bias_lo: &'a B::Buf,
    pub bias_hi: &'a B::Buf,
}

/// ReLU relaxation per neuron: `y ≥ lam_lo·x`, `y ≤ lam_up·x + mu_up`.
pub struct ReluParams<'a, B: ?Sized + Backend<T>, T: Fp> {
    pub lam_lo: &'a B::Buf,
    pub lam_up: &'a B::Buf,
    pub mu_up: &'a B::Buf,
    /// The lower line's intercept, `y ≥ lam_lo·x + mu_lo` (σ); `None` for ReLU's 0.
    /// The output is `≥ 0` either way (interval coefficients collapse to their lower end).
    pub mu_lo: Option<&'a B::Buf>,
}

/// MaxPool relaxation per output neuron `y = max(x_i)` over its window:
/// `y ≥ x_{sel_lo}` always; `y ≤ x_{sel_up}` when one input dominates
/// (`sel_up ≥ 0`), else `y ≤ up`. `y ≥ lo` bounds the collapse of interval
/// coefficients. Selected inputs are stored as neuron indices in `T`.
pub struct PoolParams<'a, B: ?Sized + Backend<T>, T: Fp> {
    pub pool: &'a crate::base::ir::Pool,
    pub sel_lo: &'a B::Buf,
    pub sel_up: &'a B::Buf,
    pub lo: &'a B::Buf,
    pub up: &'a B::Buf,
}

/// Which arithmetic backsubstitution runs in (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum Arith {
    /// Interval coefficients, outward rounding in every product (GPUPoly).
    Interval,
    /// Point coefficients on plain GEMMs, rounding folded into the constant.
    #[default]
    Point,
}

/// What a point affine step pays its rounding error with: `wr ≥ |W|·r` per
/// output neuron of the layer and `r1 ≥ ‖r‖₁`, for `r ≥ |x|` over the
/// layer's input `x`; one table slot (and one `r1`) per batch slot.
pub struct Magnitudes<'a, Buf> {
    pub wr: &'a Buf,
    pub r1: &'a [f64],
}

/// Result of a forward interval step through an affine layer.
pub struct AffineForward<Buf> {
    /// Bounds of every value the inference can compute.
    pub lo: Buf,
    pub hi: Buf,
    /// `bias ∓ e`, with `e` the inference rounding bound per neuron: the
    /// constant interval of the layer's polyhedral constraint.
    pub bias_lo: Buf,
    pub bias_hi: Buf,
}

/// Checks unit rows (`val[r]` at column `col[r]`) against a `rows × cols` matrix.
pub fn check_unit_rows<T>(rows: usize, cols: usize, col: &[u32], val: &[T]) -> BResult<()> {
    if col.len() != rows || val.len() != rows || col.iter().any(|&c| c as usize >= cols) {
        return Err(BackendError::Failure(format!("pmat_unit: bad columns for a {rows}x{cols} matrix")));
    }
    Ok(())
}

/// Unit rows as a dense row-major host matrix.
pub fn unit_rows<T: Fp>(rows: usize, cols: usize, col: &[u32], val: &[T]) -> BResult<Vec<T>> {
    check_unit_rows(rows, cols, col, val)?;
    let mut a = vec![T::zero(); rows * cols];
    for (r, (&c, &v)) in col.iter().zip(val).enumerate() {
        a[r * cols + c as usize] = v;
    }
    Ok(a)
}

/// The heavy operations of DeepPoly, for analysis precision `T`.
pub trait Backend<T: Fp>: Send + Sync {
    /// A vector of `T` on the backend.
    type Buf: Send + Sync;
    /// An interval expression matrix on the backend.
    type Mat: Send + Sync;

    fn name(&self) -> String;

    /// Bytes the analysis may use for expression matrices at once.
    fn memory_budget(&self) -> usize;

    /// Properties worth batching together on this backend (an upper bound
    /// on the default batch; the memory budget may lower it).
    fn batch_hint(&self) -> usize {
        crate::base::analyzer::DEFAULT_BATCH
    }

    /// Neurons (summed over a property's nodes) that one batch works on
    /// best, where this allows more properties per batch on small networks
    /// than [`Self::batch_hint`] (up to [`crate::base::analyzer::SMALL_NET_BATCH`]).
    fn batch_neurons(&self) -> Option<usize> {
        None
    }

    /// Whether the α/β search evaluates its relaxed bounds on this backend,
    /// every open row of a batch in the same GEMMs (`relaxed.rs`), rather
    /// than row by row on the host.
    fn offload_relaxed(&self) -> bool {
        true
    }

    /// Search workers a branch and bound runs by default (`workers.rs`):
    /// more than one where a round's host work leaves the backend idle.
    fn search_workers(&self) -> usize {
        1
    }

    /// Another handle on this backend for a search worker thread (on a GPU
    /// its own stream and caches, so that one worker's host work overlaps
    /// another's kernels); `None` where it has none.
    fn fork(&self) -> BResult<Option<Self>>
    where
        Self: Sized,
    {
        Ok(None)
    }

    fn upload(&self, data: &[T]) -> BResult<Self::Buf>;
    fn download(&self, buf: &Self::Buf) -> BResult<Vec<T>>;

    /// Builds a matrix from host planes (`rows × cols`, row-major).
    fn mat_from_host(&self, rows: usize, cols: usize, lo: &[T], hi: &[T]) -> BResult<Self::Mat>;
    /// Returns the lower and upper planes.
    fn mat_to_host(&self, m: &Self::Mat) -> BResult<(Vec<T>, Vec<T>)>;
    fn mat_rows(&self, m: &Self::Mat) -> usize;

    /// Dense backsubstitution `A·W` through `y = W·x + [b_lo, b_hi]`, with
    /// `W` row-major `[out][n_in]`. Returns the matrix over `x` (full
    /// window) and the constant increments `min(A·b)`.
    fn dense_backsub(
        &self,
        a: &Self::Mat,
        w: &Self::Buf,
        n_in: usize,
        b_lo: &Self::Buf,
        b_hi: &Self::Buf,
    ) -> BResult<(Self::Mat, Vec<f64>)>;

    /// Conv backsubstitution over dependence-set windows (the paper's GBC):
    /// from `a` over the conv output (`geom`) to the conv input (`out`).
    fn conv_backsub(
        &self,
        a: &Self::Mat,
        geom: &Geom,
        p: &ConvParams<'_, Self, T>,
        out: &Geom,
    ) -> BResult<(Self::Mat, Vec<f64>)>;

    /// The diagonal ReLU step: from `a` over `y = relu(x)` to `x`, same
    /// geometry. Coefficient intervals collapse to their lower end (`y ≥ 0`).
    fn relu_backsub(&self, a: &Self::Mat, geom: &Geom, p: &ReluParams<'_, Self, T>) -> BResult<(Self::Mat, Vec<f64>)>;

    /// The MaxPool step: from `a` over the pool output (`geom`) to its input
    /// (`out`). Coefficients collapse to their lower end, corrected by
    /// `min(0, (a_hi − a_lo)·lo)`, then follow the selected input or the
    /// constant upper bound.
    fn maxpool_backsub(
        &self,
        a: &Self::Mat,
        geom: &Geom,
        p: &PoolParams<'_, Self, T>,
        out: &Geom,
    ) -> BResult<(Self::Mat, Vec<f64>)>;

    /// The diagonal affine step through `y = x·[m_lo, m_hi] + [c_lo, c_hi]`
    /// (per neuron), same geometry.
    fn diag_backsub(
        &self,
        a: &Self::Mat,
        geom: &Geom,
        m: (&Self::Buf, &Self::Buf),
        c: (&Self::Buf, &Self::Buf),
    ) -> BResult<(Self::Mat, Vec<f64>)>;

    /// Lower bound of `Σ a_j·x_j` per row for `x ∈ [lo, hi]` (concretization).
    fn concretize(&self, a: &Self::Mat, geom: &Geom, lo: &Self::Buf, hi: &Self::Buf) -> BResult<Vec<f64>>;

    /// Keeps the listed rows, in order (row compaction).
    fn compact(&self, a: &Self::Mat, geom: &Geom, keep: &[u32]) -> BResult<Self::Mat>;

    /// Adds `src` (over `src_geom`) into `dst` (over `dst_geom`, same node,
    /// windows containing the sources'): the residual merge, and the
    /// window-to-dense switch when `dst` starts as zeros.
    fn add_into(&self, dst: &mut Self::Mat, dst_geom: &Geom, src: &Self::Mat, src_geom: &Geom) -> BResult<()>;

    /// A zero matrix.
    fn mat_zeros(&self, rows: usize, cols: usize) -> BResult<Self::Mat>;

    /// Columns `[start, start+len)` of every row (channel slices for Concat).
    fn slice_cols(&self, a: &Self::Mat, start: usize, len: usize) -> BResult<Self::Mat>;

    /// A point expression matrix (one plane, row-major, same layout).
    type PMat: Send + Sync;
    /// Per-row constants of point rows (f64 lower bounds), kept where the
    /// matrices are so that a step needs no transfer.
    type Cst: Send + Sync;

    fn cst_from_host(&self, v: &[f64]) -> BResult<Self::Cst>;
    fn cst_to_host(&self, c: &Self::Cst) -> BResult<Vec<f64>>;
    /// `acc += inc`, each sum rounded down.
    fn cst_add(&self, acc: &mut Self::Cst, inc: &Self::Cst) -> BResult<()>;
    fn cst_dup(&self, c: &Self::Cst) -> BResult<Self::Cst>;
    fn cst_compact(&self, c: &Self::Cst, keep: &[u32]) -> BResult<Self::Cst>;

    fn pmat_from_host(&self, rows: usize, cols: usize, a: &[T]) -> BResult<Self::PMat>;
    fn pmat_to_host(&self, m: &Self::PMat) -> BResult<Vec<T>>;
    fn pmat_zeros(&self, rows: usize, cols: usize) -> BResult<Self::PMat>;

    /// A point matrix with one coefficient per row, `val[r]` at column
    /// `col[r]`, zeros elsewhere (the rows that bound single neurons).
    fn pmat_unit(&self, rows: usize, cols: usize, col: &[u32], val: &[T]) -> BResult<Self::PMat> {
        self.pmat_from_host(rows, cols, &unit_rows(rows, cols, col, val)?)
    }

    /// Point dense step: `G = fl(A·W)` by a plain GEMM, and per row
    /// `min(A·b) − γ_m·|A|·wr − (m+2)·η·r1` rounded down, with `m = n_out`
    /// and `γ`, `η` of the GEMM's arithmetic. `g` is `a`'s (full) geometry
    /// over the layer output: it gives each row's batch slot.
    fn point_dense(
        &self,
        a: &Self::PMat,
        g: &Geom,
        w: &Self::Buf,
        n_in: usize,
        b: (&Self::Buf, &Self::Buf),
        mag: &Magnitudes<'_, Self::Buf>,
    ) -> BResult<(Self::PMat, Self::Cst)>;

    /// Point conv step over dependence-set windows (`m = C_out·⌈kh/s⌉·⌈kw/s⌉`).
    fn point_conv(
        &self,
        a: &Self::PMat,
        geom: &Geom,
        p: &ConvParams<'_, Self, T>,
        out: &Geom,
        mag: &Magnitudes<'_, Self::Buf>,
    ) -> BResult<(Self::PMat, Self::Cst)>;

    /// Point ReLU step: `g_j = fl(a_j·λ_j)` with `λ = lam_lo` where `a_j ≥ 0`
    /// and `lam_up` (plus `a_j·mu_up` in the constant) where `a_j < 0`; the
    /// constant pays `|a_j·λ_j − g_j|·r_j`, `r ≥ |x|` over the ReLU input.
    fn point_relu(
        &self,
        a: &Self::PMat,
        geom: &Geom,
        p: &ReluParams<'_, Self, T>,
        r: &Self::Buf,
    ) -> BResult<(Self::PMat, Self::Cst)>;

    /// Point diagonal step through `y = x·[m_lo, m_hi] + [c_lo, c_hi]`:
    /// `g_j = fl(a_j·m_lo_j)`, the constant pays `max_m |a_j·m − g_j|·r_j`.
    fn point_diag(
        &self,
        a: &Self::PMat,
        geom: &Geom,
        m: (&Self::Buf, &Self::Buf),
        c: (&Self::Buf, &Self::Buf),
        r: &Self::Buf,
    ) -> BResult<(Self::PMat, Self::Cst)>;

    /// Point MaxPool step: each coefficient moves to its selected input (or
    /// the constant `a_j·up_j`); sums of coefficients landing on one input
    /// pay their rounding with `r ≥ |x|` over the pool input.
    fn point_maxpool(
        &self,
        a: &Self::PMat,
        geom: &Geom,
        p: &PoolParams<'_, Self, T>,
        out: &Geom,
        r: &Self::Buf,
    ) -> BResult<(Self::PMat, Self::Cst)>;

    /// Lower bound of `Σ g_j·x_j` per row for `x ∈ [lo, hi]`.
    fn point_concretize(&self, a: &Self::PMat, geom: &Geom, lo: &Self::Buf, hi: &Self::Buf) -> BResult<Self::Cst>;

    fn point_compact(&self, a: &Self::PMat, geom: &Geom, keep: &[u32]) -> BResult<Self::PMat>;

    /// `dst += src` (as [`Backend::add_into`]); returns per row `−Σ|e_j|·r_j`,
    /// the rounding `e` of the sums paid with `r ≥ |x|` over the node.
    fn point_add_into(
        &self,
        dst: &mut Self::PMat,
        dst_geom: &Geom,
        src: &Self::PMat,
        src_geom: &Geom,
        r: &Self::Buf,
    ) -> BResult<Self::Cst>;

    fn point_slice_cols(&self, a: &Self::PMat, start: usize, len: usize) -> BResult<Self::PMat>;

    /// Forward interval evaluation of a dense layer, enclosing every value
    /// the `model`-precision inference computes, for `batch` stacked input
    /// boxes (`x` holds `batch × n_in` values, the results `batch × n_out`).
    fn forward_dense(
        &self,
        w: &Self::Buf,
        b: &Self::Buf,
        n_in: usize,
        x: (&Self::Buf, &Self::Buf),
        batch: usize,
        model: FloatModel,
    ) -> BResult<AffineForward<Self::Buf>>;

    /// Forward interval evaluation of a conv layer over input shape
    /// `input`, for `batch` stacked input boxes.
    #[allow(clippy::too_many_arguments)]
    fn forward_conv(
        &self,
        conv: &Conv2d,
        w: &Self::Buf,
        b: &Self::Buf,
        input: Shape,
        x: (&Self::Buf, &Self::Buf),
        batch: usize,
        model: FloatModel,
    ) -> BResult<AffineForward<Self::Buf>>;

    // Point inference for the attack's search (never for a verdict): plain
    // arithmetic in `T`, sums in any order, `batch` stacked points. The
    // defaults reuse the forward interval steps or run on the host.

    /// `y = W·x + b` per point (`x`: `batch × n_in`).
    fn infer_dense(
        &self,
        w: &Self::Buf,
        b: &Self::Buf,
        n_in: usize,
        x: &Self::Buf,
        batch: usize,
    ) -> BResult<Self::Buf> {
        Ok(self.forward_dense(w, b, n_in, (x, x), batch, FloatModel::EXACT)?.lo)
    }

    /// A conv layer per point, over input shape `input`.
    fn infer_conv(
        &self,
        conv: &Conv2d,
        w: &Self::Buf,
        b: &Self::Buf,
        input: Shape,
        x: &Self::Buf,
        batch: usize,
    ) -> BResult<Self::Buf> {
        Ok(self.forward_conv(conv, w, b, input, (x, x), batch, FloatModel::EXACT)?.lo)
    }

    /// `g·W` per point (`g`: `batch × n_out`): the gradient through a dense layer.
    fn grad_dense(&self, g: &Self::Buf, w: &Self::Buf, n_in: usize, batch: usize) -> BResult<Self::Buf> {
        self.upload(&crate::base::infer::host_grad_dense(&self.download(g)?, &self.download(w)?, n_in, batch)?)
    }

    /// The gradient through a conv layer (its transpose) per point.
    fn grad_conv(&self, conv: &Conv2d, w: &Self::Buf, input: Shape, g: &Self::Buf, batch: usize) -> BResult<Self::Buf> {
        let (g, w) = (self.download(g)?, self.download(w)?);
        self.upload(&crate::base::infer::host_grad_conv(conv, &w, input, &g, batch)?)
    }

    /// An elementwise operation (see [`Pointwise`]).
    fn pointwise(&self, op: Pointwise<'_, Self::Buf>) -> BResult<Self::Buf> {
        self.upload(&crate::base::infer::host_pointwise(&op, |b| self.download(b))?)
    }

    /// `x[idx[k]]` for every `k`: a sparse download.
    fn gather(&self, x: &Self::Buf, idx: &[u32]) -> BResult<Vec<T>> {
        let v = self.download(x)?;
        idx.iter().map(|&i| v.get(i as usize).copied().ok_or_else(|| out_of_range("gather", i, v.len()))).collect()
    }

    /// Several gathers (`parts[k] = (x, idx)`) in one transfer.
    fn gather_many(&self, parts: &[(&Self::Buf, &[u32])]) -> BResult<Vec<Vec<T>>> {
        parts.iter().map(|(x, idx)| self.gather(x, idx)).collect()
    }

    /// A copy of `base` with `vals[k]` at `idx[k]`: a sparse upload.
    fn scatter(&self, base: &Self::Buf, idx: &[u32], vals: &[T]) -> BResult<Self::Buf> {
        if idx.len() != vals.len() {
            return Err(BackendError::Failure(format!("scatter: {} indices for {} values", idx.len(), vals.len())));
        }
        let mut v = self.download(base)?;
        let n = v.len();
        for (&i, &x) in idx.iter().zip(vals) {
            *v.get_mut(i as usize).ok_or_else(|| out_of_range("scatter", i, n))? = x;
        }
        self.upload(&v)
    }

    /// `n` zeros.
    fn zeros(&self, n: usize) -> BResult<Self::Buf> {
        self.upload(&vec![T::zero(); n])
    }

    /// Row `rows[r]` of `x` (rows of `n` values) as row `r` of the result:
    /// a table kept per slot, repeated for each of the slot's output rows.
    fn repeat_rows(&self, x: &Self::Buf, n: usize, rows: &[u32]) -> BResult<Self::Buf> {
        let v = self.download(x)?;
        check_repeat_rows(v.len(), n, rows)?;
        self.upload(&rows.iter().flat_map(|&r| &v[r as usize * n..][..n]).copied().collect::<Vec<T>>())
    }

    /// Several scatters (`parts[k] = (base, idx, vals)`) in one transfer.
    fn scatter_many(&self, parts: &[(&Self::Buf, &[u32], &[T])]) -> BResult<Vec<Self::Buf>> {
        parts.iter().map(|(b, i, v)| self.scatter(b, i, v)).collect()
    }

    /// `dst[dst_at..][..len] = src[src_at..][..len]`. Backends that record
    /// graphs copy in place (the default replaces `dst`).
    fn copy_range(
        &self,
        dst: &mut Self::Buf,
        dst_at: usize,
        src: &Self::Buf,
        src_at: usize,
        len: usize,
    ) -> BResult<()> {
        let (mut d, s) = (self.download(dst)?, self.download(src)?);
        match (d.get_mut(dst_at..dst_at + len), s.get(src_at..src_at + len)) {
            (Some(d), Some(s)) => d.copy_from_slice(s),
            _ => return Err(BackendError::Failure(format!("copy_range: {len} values out of range"))),
        }
        *dst = self.upload(&d)?;
        Ok(())
    }

    /// A recorded sequence of backend calls (a CUDA graph).
    type Graph;

    /// Records the calls `f` makes, without running them, for
    /// [`Backend::replay`]; `None` where the backend records nothing (or
    /// could not record these calls). Every buffer the calls read or write
    /// must stay alive, in place, while the graph is replayed.
    fn capture(&self, f: &mut dyn FnMut() -> BResult<()>) -> BResult<Option<Self::Graph>> {
        let _ = f;
        Ok(None)
    }

    /// Runs a recorded graph once.
    fn replay(&self, graph: &Self::Graph) -> BResult<()> {
        let _ = graph;
        Err(BackendError::Failure("this backend records no graphs".into()))
    }
}

/// That every row `rows` names lies within a buffer of `len` values.
pub fn check_repeat_rows(len: usize, n: usize, rows: &[u32]) -> BResult<()> {
    match rows.iter().copied().max() {
        Some(r) if (r as usize + 1).saturating_mul(n) > len => {
            Err(BackendError::Failure(format!("repeat_rows: row {r} of {n} values out of a buffer of {len} values")))
        }
        _ => Ok(()),
    }
}

/// An index past a buffer's end, as gather and scatter report it.
pub fn out_of_range(what: &str, i: u32, len: usize) -> BackendError {
    BackendError::Failure(format!("{what}: index {i} out of a buffer of {len} values"))
}
