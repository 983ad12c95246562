//! [`RelaxOps`]: backsubstitution through the relaxations, and concretization.

use super::{BResult, MatrixOps, MemoryOps, PoolParams, ReluParams};
use crate::base::geom::Geom;
use polycert_interval::Fp;

/// The pointwise steps: expression rows through the ReLU (and σ) and
/// MaxPool relaxations, and concretization of rows over input bounds, in
/// both arithmetics. Each choice of relaxation line must keep the row a
/// lower bound; interval steps round outward, point steps pay their
/// rounding in the returned constants (lower bounds).
pub trait RelaxOps<T: Fp>: MemoryOps<T> + MatrixOps<T> {
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

    /// Lower bound of `Σ a_j·x_j` per row for `x ∈ [lo, hi]` (concretization).
    fn concretize(&self, a: &Self::Mat, geom: &Geom, lo: &Self::Buf, hi: &Self::Buf) -> BResult<Vec<f64>>;

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

    /// `base +` [`RelaxOps::point_concretize`], the sum rounded down: the same
    /// values as a copy of `base`, the concretization and
    /// [`MatrixOps::cst_add`] (a backend may do it in one step).
    fn point_concretize_add(
        &self,
        a: &Self::PMat,
        geom: &Geom,
        lo: &Self::Buf,
        hi: &Self::Buf,
        base: &Self::Cst,
    ) -> BResult<Self::Cst> {
        let mut sum = self.cst_dup(base)?;
        let part = self.point_concretize(a, geom, lo, hi)?;
        self.cst_add(&mut sum, &part)?;
        Ok(sum)
    }
}
