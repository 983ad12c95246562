//! [`InferOps`]: forward passes: interval bounds, and the attack's points.

use super::{AffineForward, BResult, MemoryOps, Pointwise};
use crate::base::ir::{Conv2d, Shape};
use polycert_interval::{FloatModel, Fp};

/// Forward evaluation of layers. `forward_*` enclose every value the
/// `model`-precision inference computes (rounded outward, with the
/// inference's own rounding bound): these feed verdicts. The rest is point
/// inference for the attack's search (never for a verdict): plain
/// arithmetic in `T`, sums in any order, `batch` stacked points; a
/// counterexample it finds is checked elsewhere. The defaults reuse the
/// forward interval steps or run on the host.
pub trait InferOps<T: Fp>: MemoryOps<T> {
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
}
