//! [`AffineOps`]: backsubstitution through affine layers.

use super::{BResult, ConvParams, Magnitudes, MatrixOps, MemoryOps};
use crate::base::geom::Geom;
use polycert_interval::Fp;

/// The linear algebra of backsubstitution: expression rows through dense,
/// conv and diagonal affine layers (GEMMs, windowed convs) and residual
/// merges, in both arithmetics. Sound as the module docs say: interval
/// steps round every product and sum outward; point steps fold their
/// rounding error into the returned constant increments (lower bounds).
pub trait AffineOps<T: Fp>: MemoryOps<T> + MatrixOps<T> {
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

    /// The diagonal affine step through `y = x·[m_lo, m_hi] + [c_lo, c_hi]`
    /// (per neuron), same geometry.
    fn diag_backsub(
        &self,
        a: &Self::Mat,
        geom: &Geom,
        m: (&Self::Buf, &Self::Buf),
        c: (&Self::Buf, &Self::Buf),
    ) -> BResult<(Self::Mat, Vec<f64>)>;

    /// Adds `src` (over `src_geom`) into `dst` (over `dst_geom`, same node,
    /// windows containing the sources'): the residual merge, and the
    /// window-to-dense switch when `dst` starts as zeros.
    fn add_into(&self, dst: &mut Self::Mat, dst_geom: &Geom, src: &Self::Mat, src_geom: &Geom) -> BResult<()>;

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

    /// `dst += src` (as [`AffineOps::add_into`]); returns per row `−Σ|e_j|·r_j`,
    /// the rounding `e` of the sums paid with `r ≥ |x|` over the node.
    fn point_add_into(
        &self,
        dst: &mut Self::PMat,
        dst_geom: &Geom,
        src: &Self::PMat,
        src_geom: &Geom,
        r: &Self::Buf,
    ) -> BResult<Self::Cst>;
}
