//! Batched point inference and gradients on a backend, for the attack's
//! search (never for a verdict): the elementwise operations a backend
//! offers for it, and host implementations that serve as the trait's
//! defaults (and as the reference in the conformance suite).

use crate::base::backend::{BResult, BackendError};
use crate::base::ir::{Conv2d, Shape};
use polycert_interval::Fp;

/// An elementwise operation over `batch` stacked points. Per-neuron tables
/// (`m`, `c`) hold one value per neuron of a point and repeat per point.
pub enum Pointwise<'b, Buf> {
    /// `max(x, 0)`.
    Relu(&'b Buf),
    /// `g` where `x > 0`, else 0: the gradient through a ReLU.
    ReluGrad { g: &'b Buf, x: &'b Buf },
    /// `1 / (1 + e^−x)`.
    Sigmoid(&'b Buf),
    /// `g·y·(1 − y)` with `y = σ(x)`: the gradient through a σ.
    SigmoidGrad { g: &'b Buf, y: &'b Buf },
    /// `a + b`.
    Add(&'b Buf, &'b Buf),
    /// A copy of `x`.
    Copy(&'b Buf),
    /// `x·m_j + c_j`.
    Scale { x: &'b Buf, m: &'b Buf, c: &'b Buf },
    /// A signed step `x − α·(hi − lo)·sign(g)`, clamped to `[lo, hi]`
    /// (`lo`, `hi` per point; `sign(0) = 1`, as `f64::signum` of +0; `α`
    /// is `alpha[0]`, on the backend so that a recorded step can vary it).
    SignStep { x: &'b Buf, g: &'b Buf, lo: &'b Buf, hi: &'b Buf, alpha: &'b Buf },
    /// `g·up` where `g < 0`, else `g·lo`: a bound's coefficients through a
    /// ReLU's relaxation lines (upper where the coefficient is negative).
    RelaxBack { g: &'b Buf, up: &'b Buf, lo: &'b Buf },
    /// `up·x + icpt` where `g < 0`, else `lo·x`: the relaxed network along
    /// the lines [`Pointwise::RelaxBack`] chose.
    RelaxLine { x: &'b Buf, g: &'b Buf, up: &'b Buf, icpt: &'b Buf, lo: &'b Buf },
    /// `pos` where `a ≥ 0`, else `neg`: a bound's minimising end per value.
    Select { a: &'b Buf, pos: &'b Buf, neg: &'b Buf },
    /// `g·x·free` where `g ≥ 0`, else 0: a bound's supergradient in the
    /// free lower slopes (`free` is 1 where the slope is free, else 0).
    SlopeGrad { g: &'b Buf, x: &'b Buf, free: &'b Buf },
}

impl<Buf> Pointwise<'_, Buf> {
    pub fn name(&self) -> &'static str {
        match self {
            Pointwise::Relu(_) => "relu",
            Pointwise::ReluGrad { .. } => "relu_grad",
            Pointwise::Sigmoid(_) => "sigmoid",
            Pointwise::SigmoidGrad { .. } => "sigmoid_grad",
            Pointwise::Add(..) => "add",
            Pointwise::Copy(_) => "copy",
            Pointwise::Scale { .. } => "scale",
            Pointwise::SignStep { .. } => "sign_step",
            Pointwise::RelaxBack { .. } => "relax_back",
            Pointwise::RelaxLine { .. } => "relax_line",
            Pointwise::Select { .. } => "select",
            Pointwise::SlopeGrad { .. } => "slope_grad",
        }
    }
}

fn mismatch(what: &str, a: usize, b: usize) -> BackendError {
    BackendError::Failure(format!("{what}: operands of {a} and {b} values"))
}

/// [`Pointwise`] on host vectors (`get` fetches a buffer's values).
pub fn host_pointwise<Buf, T: Fp>(op: &Pointwise<'_, Buf>, get: impl Fn(&Buf) -> BResult<Vec<T>>) -> BResult<Vec<T>> {
    let zip = |a: &Buf, b: &Buf, f: &dyn Fn(T, T) -> T| -> BResult<Vec<T>> {
        let (a, b) = (get(a)?, get(b)?);
        if a.len() != b.len() {
            return Err(mismatch(op.name(), a.len(), b.len()));
        }
        Ok(a.iter().zip(&b).map(|(&x, &y)| f(x, y)).collect())
    };
    match *op {
        Pointwise::Relu(x) => Ok(get(x)?.into_iter().map(|v| v.max(T::zero())).collect()),
        Pointwise::ReluGrad { g, x } => zip(g, x, &|g, x| if x > T::zero() { g } else { T::zero() }),
        Pointwise::Sigmoid(x) => Ok(get(x)?.into_iter().map(|v| T::one() / (T::one() + (-v).exp())).collect()),
        Pointwise::SigmoidGrad { g, y } => zip(g, y, &|g, y| g * y * (T::one() - y)),
        Pointwise::Add(a, b) => zip(a, b, &|a, b| a + b),
        Pointwise::Copy(x) => get(x),
        Pointwise::Scale { x, m, c } => {
            let (x, m, c) = (get(x)?, get(m)?, get(c)?);
            if m.len() != c.len() || m.is_empty() || !x.len().is_multiple_of(m.len()) {
                return Err(mismatch("scale", x.len(), m.len()));
            }
            Ok(x.iter().enumerate().map(|(i, &v)| v * m[i % m.len()] + c[i % m.len()]).collect())
        }
        Pointwise::SignStep { x, g, lo, hi, alpha } => {
            let (x, g, lo, hi) = (get(x)?, get(g)?, get(lo)?, get(hi)?);
            if x.len() != g.len() || x.len() != lo.len() || x.len() != hi.len() {
                return Err(mismatch("sign_step", x.len(), g.len()));
            }
            let a = *get(alpha)?.first().ok_or_else(|| mismatch("sign_step alpha", 0, 1))?;
            Ok((0..x.len())
                .map(|i| {
                    let s = if g[i] >= T::zero() { T::one() } else { -T::one() };
                    (x[i] - a * (hi[i] - lo[i]) * s).max(lo[i]).min(hi[i])
                })
                .collect())
        }
        Pointwise::RelaxBack { g, up, lo } => {
            let (g, up, lo) = (get(g)?, get(up)?, get(lo)?);
            same3(op, g.len(), up.len(), lo.len())?;
            Ok((0..g.len()).map(|i| if g[i] < T::zero() { g[i] * up[i] } else { g[i] * lo[i] }).collect())
        }
        Pointwise::RelaxLine { x, g, up, icpt, lo } => {
            let (x, g, up, icpt, lo) = (get(x)?, get(g)?, get(up)?, get(icpt)?, get(lo)?);
            same3(op, x.len(), g.len(), up.len())?;
            same3(op, x.len(), icpt.len(), lo.len())?;
            Ok((0..x.len()).map(|i| if g[i] < T::zero() { up[i] * x[i] + icpt[i] } else { lo[i] * x[i] }).collect())
        }
        Pointwise::Select { a, pos, neg } => {
            let (a, pos, neg) = (get(a)?, get(pos)?, get(neg)?);
            same3(op, a.len(), pos.len(), neg.len())?;
            Ok((0..a.len()).map(|i| if a[i] >= T::zero() { pos[i] } else { neg[i] }).collect())
        }
        Pointwise::SlopeGrad { g, x, free } => {
            let (g, x, free) = (get(g)?, get(x)?, get(free)?);
            same3(op, g.len(), x.len(), free.len())?;
            Ok((0..g.len()).map(|i| if g[i] >= T::zero() { g[i] * x[i] * free[i] } else { T::zero() }).collect())
        }
    }
}

fn same3<Buf>(op: &Pointwise<'_, Buf>, a: usize, b: usize, c: usize) -> BResult<()> {
    if a == b && a == c { Ok(()) } else { Err(mismatch(op.name(), a, if a == b { c } else { b })) }
}

/// The layer's output count for a `grad_dense` of `g_len` gradients and
/// `w_len` weights over `batch` points, or the error naming the mismatch.
pub fn grad_dense_outputs(g_len: usize, w_len: usize, n_in: usize, batch: usize) -> BResult<usize> {
    let n_out = g_len.checked_div(batch).unwrap_or(0);
    if g_len != batch * n_out || w_len != n_out * n_in {
        return Err(BackendError::Failure(format!("grad_dense: {w_len} weights, {g_len} gradients, batch {batch}")));
    }
    Ok(n_out)
}

/// `g·W` per point, `W` row-major `n_out × n_in`.
pub fn host_grad_dense<T: Fp>(g: &[T], w: &[T], n_in: usize, batch: usize) -> BResult<Vec<T>> {
    let n_out = grad_dense_outputs(g.len(), w.len(), n_in, batch)?;
    let mut out = vec![T::zero(); batch * n_in];
    for p in 0..batch {
        let o = &mut out[p * n_in..(p + 1) * n_in];
        for (k, &gk) in g[p * n_out..(p + 1) * n_out].iter().enumerate() {
            if gk != T::zero() {
                for (oj, &wj) in o.iter_mut().zip(&w[k * n_in..(k + 1) * n_in]) {
                    *oj = *oj + gk * wj;
                }
            }
        }
    }
    Ok(out)
}

/// A conv's output shape over `input`.
pub fn conv_out_shape(c: &Conv2d, input: Shape) -> Shape {
    let ho = (input.h + c.pad.0 + c.pad.2 - c.kernel.0) / c.stride.0 + 1;
    let wo = (input.w + c.pad.1 + c.pad.3 - c.kernel.1) / c.stride.1 + 1;
    Shape::new(c.c_out, ho, wo)
}

/// The gradient through a conv (its transpose) per point; `w` holds the
/// conv's weights in `T`.
pub fn host_grad_conv<T: Fp>(c: &Conv2d, w: &[T], input: Shape, g: &[T], batch: usize) -> BResult<Vec<T>> {
    let so = conv_out_shape(c, input);
    let (ni, no) = (input.numel(), so.numel());
    if g.len() != batch * no || w.len() != c.weight.len() {
        return Err(BackendError::Failure(format!("grad_conv: {} gradients for batch {batch} of {no}", g.len())));
    }
    let mut out = vec![T::zero(); batch * ni];
    for p in 0..batch {
        let (gp, op) = (&g[p * no..(p + 1) * no], &mut out[p * ni..(p + 1) * ni]);
        for (o, &go) in gp.iter().enumerate() {
            if go == T::zero() {
                continue;
            }
            let (co, oy, ox) = (o / (so.h * so.w), (o / so.w) % so.h, o % so.w);
            for (k, i) in c.taps(input, co, oy, ox) {
                op[i] = op[i] + go * w[k];
            }
        }
    }
    Ok(out)
}
