//! Forward interval pass of dense layers, enclosing the inference's rounding.

use polycert_deeppoly::AffineForward;
use polycert_interval::{DotAcc, FloatModel, Fp, Interval, fp, kernels};

/// `[lo, hi, bias_lo, bias_hi]` of one neuron from its accumulated dot
/// product (bias not yet added).
pub fn finish_affine<T: Fp>(mut acc: DotAcc, b: T, model: FloatModel) -> [T; 4] {
    let n = acc.n + 1;
    acc.push_constant(Interval::new_unchecked(b, b));
    let (lo, hi) = crate::util::widening(acc.n).apply(acc.lo, acc.hi, acc.mag);
    let mag = acc.mag_upper();
    let e = model.rounding_error_bound(n, mag);
    // Past the format's overflow threshold the inference may return ±inf or NaN.
    let reach = fp::add_up(mag, e);
    if reach.is_nan() || reach >= model.overflow_threshold() {
        return [T::neg_infinity(), T::infinity(), T::neg_infinity(), T::infinity()];
    }
    let b64 = b.to_f64_exact();
    [
        fp::from_f64_down(fp::sub_down(lo, e)),
        fp::from_f64_up(fp::add_up(hi, e)),
        fp::from_f64_down(fp::sub_down(b64, e)),
        fp::from_f64_up(fp::add_up(b64, e)),
    ]
}

pub fn split<T: Fp>(rows: Vec<[T; 4]>) -> AffineForward<Vec<T>> {
    let mut f = AffineForward { lo: Vec::new(), hi: Vec::new(), bias_lo: Vec::new(), bias_hi: Vec::new() };
    for [a, b, c, d] in rows {
        f.lo.push(a);
        f.hi.push(b);
        f.bias_lo.push(c);
        f.bias_hi.push(d);
    }
    f
}

pub fn forward_dense<T: Fp>(
    w: &[T],
    b: &[T],
    n_in: usize,
    xlo: &[T],
    xhi: &[T],
    model: FloatModel,
) -> AffineForward<Vec<T>> {
    let rows = crate::util::map_range(b.len(), b.len() * n_in, |i| {
        finish_affine(dot_row(xlo, xhi, &w[i * n_in..(i + 1) * n_in]), b[i], model)
    });
    split(rows)
}

crate::lanes::twin! {
    /// One neuron's interval dot product ([`kernels::dot_planes`]).
    fn dot_row<T: Fp>(xlo: &[T], xhi: &[T], w: &[T]) -> DotAcc {
        kernels::dot_planes(xlo, xhi, w)
    }
}
