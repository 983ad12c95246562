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

use crate::geom::Geom;
use crate::ir::{Conv2d, Shape};
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
}

/// MaxPool relaxation per output neuron `y = max(x_i)` over its window:
/// `y ≥ x_{sel_lo}` always; `y ≤ x_{sel_up}` when one input dominates
/// (`sel_up ≥ 0`), else `y ≤ up`. `y ≥ lo` bounds the collapse of interval
/// coefficients. Selected inputs are stored as neuron indices in `T`.
pub struct PoolParams<'a, B: ?Sized + Backend<T>, T: Fp> {
    pub pool: &'a crate::ir::Pool,
    pub sel_lo: &'a B::Buf,
    pub sel_up: &'a B::Buf,
    pub lo: &'a B::Buf,
    pub up: &'a B::Buf,
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

/// The heavy operations of DeepPoly, for analysis precision `T`.
pub trait Backend<T: Fp>: Send + Sync {
    /// A vector of `T` on the backend.
    type Buf: Send + Sync;
    /// An interval expression matrix on the backend.
    type Mat: Send + Sync;

    fn name(&self) -> String;

    /// Bytes the analysis may use for expression matrices at once.
    fn memory_budget(&self) -> usize;

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

    /// Forward interval evaluation of a dense layer, enclosing every value
    /// the `model`-precision inference computes.
    fn forward_dense(
        &self,
        w: &Self::Buf,
        b: &Self::Buf,
        n_in: usize,
        x: (&Self::Buf, &Self::Buf),
        model: FloatModel,
    ) -> BResult<AffineForward<Self::Buf>>;

    /// Forward interval evaluation of a conv layer over input shape `input`.
    fn forward_conv(
        &self,
        conv: &Conv2d,
        w: &Self::Buf,
        b: &Self::Buf,
        input: Shape,
        x: (&Self::Buf, &Self::Buf),
        model: FloatModel,
    ) -> BResult<AffineForward<Self::Buf>>;
}
