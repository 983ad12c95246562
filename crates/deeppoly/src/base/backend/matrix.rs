//! [`MatrixOps`]: expression matrices and row constants on the backend.

use super::{BResult, unit_rows};
use crate::base::geom::Geom;
use polycert_interval::Fp;

/// Storage of the expression matrices (interval `Mat`, point `PMat`) and
/// of the point rows' constants (`Cst`): transfers, zeros, unit rows, row
/// compaction and column slices. These copy coefficients exactly; the one
/// sum, [`MatrixOps::cst_add`], rounds down (the constants are lower bounds).
pub trait MatrixOps<T: Fp>: Send + Sync {
    /// An interval expression matrix on the backend.
    type Mat: Send + Sync;
    /// A point expression matrix (one plane, row-major, same layout).
    type PMat: Send + Sync;
    /// Per-row constants of point rows (f64 lower bounds), kept where the
    /// matrices are so that a step needs no transfer.
    type Cst: Send + Sync;
    /// A download of constants started by [`MatrixOps::cst_fetch`].
    type CstFetch: Send;

    /// Builds a matrix from host planes (`rows × cols`, row-major).
    fn mat_from_host(&self, rows: usize, cols: usize, lo: &[T], hi: &[T]) -> BResult<Self::Mat>;
    /// Returns the lower and upper planes.
    fn mat_to_host(&self, m: &Self::Mat) -> BResult<(Vec<T>, Vec<T>)>;
    fn mat_rows(&self, m: &Self::Mat) -> usize;

    /// A zero matrix.
    fn mat_zeros(&self, rows: usize, cols: usize) -> BResult<Self::Mat>;

    /// Keeps the listed rows, in order (row compaction).
    fn compact(&self, a: &Self::Mat, geom: &Geom, keep: &[u32]) -> BResult<Self::Mat>;

    /// Columns `[start, start+len)` of every row (channel slices for Concat).
    fn slice_cols(&self, a: &Self::Mat, start: usize, len: usize) -> BResult<Self::Mat>;

    fn cst_from_host(&self, v: &[f64]) -> BResult<Self::Cst>;
    fn cst_to_host(&self, c: &Self::Cst) -> BResult<Vec<f64>>;
    /// Starts copying the constants to the host; waits for nothing.
    fn cst_fetch(&self, c: &Self::Cst) -> BResult<Self::CstFetch>;
    /// Waits for a started download; its values.
    fn cst_fetched(&self, f: Self::CstFetch) -> BResult<Vec<f64>>;
    /// Whether a started download runs behind the work queued after it (the
    /// GPU), so that a caller gains by reading it one step later; false where
    /// it is done at once (the CPU).
    fn fetch_overlaps(&self) -> bool {
        false
    }
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

    fn point_compact(&self, a: &Self::PMat, geom: &Geom, keep: &[u32]) -> BResult<Self::PMat>;

    fn point_slice_cols(&self, a: &Self::PMat, start: usize, len: usize) -> BResult<Self::PMat>;
}
