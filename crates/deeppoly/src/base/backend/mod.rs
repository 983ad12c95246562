//! The `Backend` trait: the heavy operations of the analysis. Backends own
//! the storage of expression matrices and layer parameters; the analysis
//! keeps geometry, constants and control flow on the host.
//!
//! `Backend<T>` is the sum of one trait per concern, one file each:
//! [`RuntimeOps`] (sizes, workers, graphs), [`MemoryOps`] (vectors and
//! transfers), [`MatrixOps`] (expression matrices and row constants),
//! [`AffineOps`] (backsubstitution through affine layers), [`RelaxOps`]
//! (through the relaxations, and concretization) and [`InferOps`] (forward
//! passes and the attack's point inference).
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

#[cfg(doc)]
use crate::base::geom::Geom;
pub use crate::base::infer::Pointwise;
use crate::base::ir::Conv2d;
use polycert_interval::Fp;

mod affine;
mod infer;
mod matrix;
mod memory;
mod relax;
mod runtime;

pub use affine::AffineOps;
pub use infer::InferOps;
pub use matrix::MatrixOps;
pub use memory::MemoryOps;
pub use relax::RelaxOps;
pub use runtime::RuntimeOps;

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
pub struct ConvParams<'a, B: ?Sized + MemoryOps<T>, T: Fp> {
    pub conv: &'a Conv2d,
    pub weight: &'a B::Buf,
    /// Bias interval (bias ± the inference rounding bound), per output neuron.
    pub bias_lo: &'a B::Buf,
    pub bias_hi: &'a B::Buf,
}

/// ReLU relaxation per neuron: `y ≥ lam_lo·x`, `y ≤ lam_up·x + mu_up`.
pub struct ReluParams<'a, B: ?Sized + MemoryOps<T>, T: Fp> {
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
pub struct PoolParams<'a, B: ?Sized + MemoryOps<T>, T: Fp> {
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

/// The heavy operations of DeepPoly, for analysis precision `T`: every
/// concern's operations together. Backends implement the parts
/// ([`RuntimeOps`], [`MemoryOps`], [`MatrixOps`], [`AffineOps`],
/// [`RelaxOps`], [`InferOps`]); this blanket impl makes them a `Backend`.
pub trait Backend<T: Fp>: RuntimeOps + MemoryOps<T> + MatrixOps<T> + AffineOps<T> + RelaxOps<T> + InferOps<T> {}

impl<T: Fp, B> Backend<T> for B where
    B: ?Sized + RuntimeOps + MemoryOps<T> + MatrixOps<T> + AffineOps<T> + RelaxOps<T> + InferOps<T>
{
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
