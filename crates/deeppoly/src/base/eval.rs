//! Concrete inference of the IR (float32 or f64, left-to-right sums), for
//! falsification and tests.

use crate::base::ir::{Conv2d, Network, Op, Shape};
use num_traits::Float;

/// Scalar types the reference inference runs in.
pub trait EvalFloat: Float + Copy + std::iter::Sum {
    fn of(x: f64) -> Self;
}
impl EvalFloat for f32 {
    fn of(x: f64) -> Self {
        x as f32
    }
}
impl EvalFloat for f64 {
    fn of(x: f64) -> Self {
        x
    }
}

/// Neurons whose left-to-right sums run side by side.
const LANES: usize = 8;

/// A conv with each output's sum over its in-range taps in `Conv2d::taps`
/// order (input channel, then kernel row, then column), then the bias. The
/// taps are walked outermost, so each step adds one weight times a run of
/// inputs to a run of outputs: the same sums, side by side.
fn conv_in_order<F: EvalFloat>(c: &Conv2d, si: Shape, so: Shape, x: &[F]) -> Vec<F> {
    let (hw, sw) = (so.h * so.w, c.stride.1);
    let mut y = vec![F::zero(); so.numel()];
    conv_runs(c, si, so, |w, o, i, n| {
        let w = F::of(w);
        if sw == 1 {
            // Contiguous inputs: the same sums, vectorised across outputs.
            y[o..o + n].iter_mut().zip(&x[i..i + n]).for_each(|(out, &xv)| *out = *out + w * xv);
            return;
        }
        for (t, out) in y[o..o + n].iter_mut().enumerate() {
            *out = *out + w * x[i + t * sw];
        }
    });
    for (o, v) in y.iter_mut().enumerate() {
        *v = *v + F::of(c.bias[o / hw]);
    }
    y
}

/// Runs the network on `x` in precision `F`, returning every node's values.
pub fn eval_all<F: EvalFloat>(net: &Network, x: &[F]) -> Vec<Vec<F>> {
    let mut vals: Vec<Vec<F>> = Vec::with_capacity(net.nodes().len());
    for (id, node) in net.nodes().iter().enumerate() {
        let v = match node.op {
            Op::Input => x.to_vec(),
            _ => {
                let ins: Vec<&[F]> = node.inputs.iter().map(|&k| vals[k].as_slice()).collect();
                eval_node(net, id, &ins)
            }
        };
        vals.push(v);
    }
    vals
}

/// Calls `f(w, o, i, n)` for every run of a conv's taps along a row: output
/// neurons `o..o+n` take weight `w` times inputs `i, i+sw, …` (padding
/// skipped). Covers every (output, input, weight) triple once, zero weights
/// too, and reaches each output's taps in `Conv2d::taps` order.
pub(crate) fn conv_runs(c: &Conv2d, si: Shape, so: Shape, mut f: impl FnMut(f64, usize, usize, usize)) {
    let (kh, kw) = c.kernel;
    let (sh, sw) = c.stride;
    let (pt, pl) = (c.pad.0 as isize, c.pad.1 as isize);
    for co in 0..c.c_out {
        for ci in 0..si.c {
            for ky in 0..kh {
                for kx in 0..kw {
                    let w = c.weight[((co * si.c + ci) * kh + ky) * kw + kx];
                    // ox with 0 <= ox*sw + kx - pl < si.w
                    let off = kx as isize - pl;
                    let lo = if off >= 0 { 0 } else { ((-off) as usize).div_ceil(sw) };
                    let last = si.w as isize - 1 - off;
                    if last < 0 {
                        continue;
                    }
                    let hi = ((last as usize) / sw + 1).min(so.w);
                    if lo >= hi {
                        continue;
                    }
                    for oy in 0..so.h {
                        let iy = (oy * sh + ky) as isize - pt;
                        if iy < 0 || iy as usize >= si.h {
                            continue;
                        }
                        let o = (co * so.h + oy) * so.w + lo;
                        let i = (ci * si.h + iy as usize) * si.w + (lo as isize * sw as isize + off) as usize;
                        f(w, o, i, hi - lo);
                    }
                }
            }
        }
    }
}

/// The values of node `id` (not the input) given its inputs' values, with
/// left-to-right sums.
pub fn eval_node<F: EvalFloat>(net: &Network, id: usize, ins: &[&[F]]) -> Vec<F> {
    let node = net.node(id);
    let inp = |k: usize| ins[k];
    match &node.op {
        Op::Input => inp(0).to_vec(),
        Op::Dense { weight, bias, out } => {
            let xi = inp(0);
            let n = xi.len();
            let mut y = vec![F::zero(); *out];
            // LANES neurons at once, each summed left to right on its own:
            // the same value as one at a time, without one long dependency chain.
            for i0 in (0..*out).step_by(LANES) {
                let m = LANES.min(out - i0);
                // A short last block repeats its last row and drops the copies.
                let rows: [&[f64]; LANES] = std::array::from_fn(|k| {
                    let i = i0 + k.min(m - 1);
                    &weight[i * n..(i + 1) * n]
                });
                let mut s = [F::zero(); LANES];
                for (j, &xj) in xi.iter().enumerate() {
                    for k in 0..LANES {
                        s[k] = s[k] + F::of(rows[k][j]) * xj;
                    }
                }
                for k in 0..m {
                    y[i0 + k] = s[k] + F::of(bias[i0 + k]);
                }
            }
            y
        }
        Op::Conv2d(c) => conv_in_order(c, net.node(node.inputs[0]).shape, node.shape, inp(0)),
        Op::Relu => inp(0).iter().map(|&v| v.max(F::zero())).collect(),
        Op::Sigmoid => inp(0).iter().map(|&v| F::one() / (F::one() + (-v).exp())).collect(),
        // Exact: each output is its input or a constant of the format.
        Op::Elementwise(f) => inp(0).iter().map(|&v| F::of(f.eval(v.to_f64().unwrap_or(f64::NAN)))).collect(),
        Op::Add => inp(0).iter().zip(inp(1)).map(|(&a, &b)| a + b).collect(),
        Op::Concat => ins.iter().flat_map(|v| v.iter().copied()).collect(),
        Op::Reshape => inp(0).to_vec(),
        Op::ChannelAffine { mul, add, .. } => {
            let hw = node.shape.h * node.shape.w;
            inp(0)
                .iter()
                .enumerate()
                .map(|(i, &v)| v * F::of(mul[i / hw].midpoint()) + F::of(add[i / hw].midpoint()))
                .collect()
        }
        Op::MaxPool2d(p) | Op::AvgPool2d(p) => {
            let s_in = net.node(node.inputs[0]).shape;
            pool(inp(0), s_in, node.shape, p, matches!(node.op, Op::MaxPool2d(_)))
        }
    }
}

/// One value's backpropagated coefficient: an `f64`, or one per lane of
/// a block of objectives (`babsr.rs`), each lane taking the same
/// operations in the same order as an `f64` pass of its own.
pub(crate) trait Coef: Clone {
    fn is_zero(&self) -> bool;
    /// `self += g·w`.
    fn add_scaled(&mut self, g: &Self, w: f64);
}

impl Coef for f64 {
    fn is_zero(&self) -> bool {
        *self == 0.0
    }
    #[inline(always)]
    fn add_scaled(&mut self, g: &Self, w: f64) {
        *self += g * w;
    }
}

impl<const L: usize> Coef for [f64; L] {
    fn is_zero(&self) -> bool {
        self.iter().all(|&v| v == 0.0)
    }
    #[inline(always)]
    fn add_scaled(&mut self, g: &Self, w: f64) {
        for (x, &v) in self.iter_mut().zip(g) {
            *x += v * w;
        }
    }
}

/// Backpropagates per-node coefficients (`coef[k]`: one per value of node
/// `k`, set by the caller) from the output to the input. The affine layers
/// are exact (a ChannelAffine at its midpoint); `local(id, g, gx)` adds the
/// coefficients `g` of a ReLU, σ or pooling node `id` times its local slope
/// into its input's `gx`, and returns `false` to stop (then `false` is
/// returned and the coefficients below are incomplete). Every node keeps its
/// own coefficients.
pub(crate) fn backpropagate<E: Coef>(
    net: &Network,
    coef: &mut [Vec<E>],
    mut local: impl FnMut(usize, &[E], &mut [E]) -> bool,
) -> bool {
    for id in (1..=net.output()).rev() {
        let node = net.node(id);
        let g = std::mem::take(&mut coef[id]);
        let x0 = node.inputs[0];
        let go_on = match &node.op {
            Op::Dense { weight, .. } => {
                let n = coef[x0].len();
                for (i, gi) in g.iter().enumerate().filter(|(_, gi)| !gi.is_zero()) {
                    coef[x0].iter_mut().zip(&weight[i * n..(i + 1) * n]).for_each(|(a, &w)| a.add_scaled(gi, w));
                }
                true
            }
            Op::Conv2d(c) => {
                let (si, so, sw) = (net.node(x0).shape, node.shape, c.stride.1);
                let gx = &mut coef[x0];
                conv_runs(c, si, so, |w, o, i, n| {
                    if sw == 1 {
                        gx[i..i + n].iter_mut().zip(&g[o..o + n]).for_each(|(a, gt)| a.add_scaled(gt, w));
                        return;
                    }
                    for (t, gt) in g[o..o + n].iter().enumerate() {
                        gx[i + t * sw].add_scaled(gt, w);
                    }
                });
                true
            }
            Op::Add => {
                for &k in &node.inputs {
                    coef[k].iter_mut().zip(&g).for_each(|(a, v)| a.add_scaled(v, 1.0));
                }
                true
            }
            Op::Reshape => {
                coef[x0].iter_mut().zip(&g).for_each(|(a, v)| a.add_scaled(v, 1.0));
                true
            }
            Op::ChannelAffine { mul, .. } => {
                let hw = (node.shape.h * node.shape.w).max(1);
                coef[x0].iter_mut().zip(&g).enumerate().for_each(|(j, (a, v))| a.add_scaled(v, mul[j / hw].midpoint()));
                true
            }
            Op::Concat => {
                let mut off = 0;
                for &k in &node.inputs {
                    let n = coef[k].len();
                    coef[k].iter_mut().zip(&g[off..off + n]).for_each(|(a, v)| a.add_scaled(v, 1.0));
                    off += n;
                }
                true
            }
            Op::Input => true,
            Op::Relu | Op::Sigmoid | Op::Elementwise(_) | Op::MaxPool2d(_) | Op::AvgPool2d(_) => {
                local(id, &g, &mut coef[x0])
            }
        };
        coef[id] = g;
        if !go_on {
            return false;
        }
    }
    true
}

/// Output of the network on `x`.
pub fn eval<F: EvalFloat>(net: &Network, x: &[F]) -> Vec<F> {
    eval_all(net, x).pop().unwrap_or_default()
}

fn pool<F: EvalFloat>(x: &[F], si: Shape, so: Shape, p: &crate::base::ir::Pool, max: bool) -> Vec<F> {
    (0..so.numel())
        .map(|o| {
            let (c, oy, ox) = (o / (so.h * so.w), (o / so.w) % so.h, o % so.w);
            let vals: Vec<F> = p.window(si, c, oy, ox).map(|i| x[i]).collect();
            if max {
                vals.iter().copied().fold(F::neg_infinity(), F::max)
            } else {
                vals.iter().copied().sum::<F>() / F::of((p.kernel.0 * p.kernel.1) as f64)
            }
        })
        .collect()
}

/// Adds the input gradient of pooling into `gx`: each output's gradient
/// `g` goes to its window's first largest input (max pooling, at the input
/// values `x`), or in equal shares to the window (average pooling, which
/// divides by the kernel's size as [`eval_node`] does).
pub fn pool_grad(x: &[f64], g: &[f64], gx: &mut [f64], (si, so): (Shape, Shape), p: &crate::base::ir::Pool, max: bool) {
    let share = 1.0 / (p.kernel.0 * p.kernel.1) as f64;
    for (o, &go) in g.iter().enumerate().take(so.numel()).filter(|(_, go)| **go != 0.0) {
        let (c, oy, ox) = (o / (so.h * so.w), (o / so.w) % so.h, o % so.w);
        if max {
            let best = p.window(si, c, oy, ox).fold(None, |b: Option<usize>, i| match b {
                Some(j) if x[j] >= x[i] => Some(j),
                _ => Some(i),
            });
            if let Some(i) = best {
                gx[i] += go;
            }
        } else {
            p.window(si, c, oy, ox).for_each(|i| gx[i] += go * share);
        }
    }
}

/// Output of the network on `x` with every dense and conv sum (products and
/// the bias) added in a random order drawn from `rng`: one run of inference
/// whose summation order is not fixed, as on a GPU with atomics.
pub fn eval_shuffled<F: EvalFloat>(net: &Network, x: &[F], rng: &mut crate::base::rng::SplitMix) -> Vec<F> {
    eval_reordered(net, x, &mut |t: &mut [F]| {
        for k in (1..t.len()).rev() {
            t.swap(k, rng.below(k + 1));
        }
    })
}

/// Output of the network on `x`, every dense and conv sum's terms (products,
/// then the bias) put in order by `reorder` and added left to right. Other
/// nodes as [`eval_node`].
pub fn eval_reordered<F: EvalFloat>(net: &Network, x: &[F], reorder: &mut dyn FnMut(&mut [F])) -> Vec<F> {
    let mut vals: Vec<Vec<F>> = Vec::with_capacity(net.nodes().len());
    let mut sum = |terms: &mut Vec<F>| {
        reorder(terms);
        terms.iter().fold(F::zero(), |s, &t| s + t)
    };
    for (id, node) in net.nodes().iter().enumerate() {
        let v = match &node.op {
            Op::Input => x.to_vec(),
            Op::Dense { weight, bias, out } => {
                let xi = &vals[node.inputs[0]];
                let n = xi.len();
                (0..*out)
                    .map(|i| {
                        let mut t: Vec<F> = (0..n).map(|j| F::of(weight[i * n + j]) * xi[j]).collect();
                        t.push(F::of(bias[i]));
                        sum(&mut t)
                    })
                    .collect()
            }
            Op::Conv2d(c) => {
                let (si, so) = (net.node(node.inputs[0]).shape, node.shape);
                let xi = &vals[node.inputs[0]];
                (0..so.numel())
                    .map(|o| {
                        let (co, oy, ox) = (o / (so.h * so.w), (o / so.w) % so.h, o % so.w);
                        let mut t: Vec<F> = c.taps(si, co, oy, ox).map(|(w, i)| F::of(c.weight[w]) * xi[i]).collect();
                        t.push(F::of(c.bias[co]));
                        sum(&mut t)
                    })
                    .collect()
            }
            _ => {
                let ins: Vec<&[F]> = node.inputs.iter().map(|&k| vals[k].as_slice()).collect();
                eval_node(net, id, &ins)
            }
        };
        vals.push(v);
    }
    vals.pop().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `conv_runs` (the reference gradient's conv walk) covers every
    /// (output, input, weight) triple of the taps exactly once.
    #[test]
    fn conv_runs_equal_the_taps_on_integers() {
        for (k, s, p) in
            [((3, 3), (1, 1), (1, 1, 1, 1)), ((3, 2), (2, 2), (0, 1, 1, 0)), ((1, 1), (1, 1), (0, 0, 0, 0))]
        {
            let si = Shape::new(2, 5, 6);
            let c_out = 3;
            let weight: Vec<f64> = (0..c_out * si.c * k.0 * k.1).map(|i| ((i * 7) % 5) as f64 - 2.0).collect();
            let c = Conv2d { weight, bias: vec![1.0, -2.0, 0.5], c_out, kernel: k, stride: s, pad: p };
            let ho = (si.h + p.0 + p.2 - k.0) / s.0 + 1;
            let wo = (si.w + p.1 + p.3 - k.1) / s.1 + 1;
            let so = Shape::new(c_out, ho, wo);
            let x: Vec<f64> = (0..si.numel()).map(|i| ((i * 3) % 11) as f64 - 5.0).collect();
            let reference: Vec<f64> = (0..so.numel())
                .map(|o| {
                    let (co, oy, ox) = (o / (ho * wo), (o / wo) % ho, o % wo);
                    c.taps(si, co, oy, ox).map(|(w, i)| c.weight[w] * x[i]).sum::<f64>() + c.bias[co]
                })
                .collect();
            let mut runs: Vec<f64> = (0..so.numel()).map(|o| c.bias[o / (ho * wo)]).collect();
            conv_runs(&c, si, so, |w, o, i, n| {
                for (t, y) in runs[o..o + n].iter_mut().enumerate() {
                    *y += w * x[i + t * s.1];
                }
            });
            assert_eq!(runs, reference, "{k:?} {s:?} {p:?}");
        }
    }

    /// Summing several neurons side by side gives, bit for bit, the
    /// one-at-a-time left-to-right sums (the float32 reference's order).
    #[test]
    fn lanes_equal_sequential_sums() {
        let mut rng = crate::base::rng::SplitMix(7);
        let nets = [
            crate::testnets::random_mlp(&mut rng, &[13, 21, 9, 3]),
            crate::testnets::random_resnet(&mut rng, Shape::new(3, 7, 6), 11, 4),
        ];
        for net in &nets {
            let x: Vec<f32> = (0..net.input_shape().numel()).map(|_| rng.weight(1.0) as f32).collect();
            let vals = eval_all::<f32>(net, &x);
            for (id, node) in net.nodes().iter().enumerate() {
                let xi = &vals[node.inputs.first().copied().unwrap_or(0)];
                let want: Vec<f32> = match &node.op {
                    Op::Dense { weight, bias, out } => (0..*out)
                        .map(|i| {
                            let mut s = 0f32;
                            for (j, &v) in xi.iter().enumerate() {
                                s += weight[i * xi.len() + j] as f32 * v;
                            }
                            s + bias[i] as f32
                        })
                        .collect(),
                    Op::Conv2d(c) => {
                        let (si, so) = (net.node(node.inputs[0]).shape, node.shape);
                        (0..so.numel())
                            .map(|o| {
                                let (co, oy, ox) = (o / (so.h * so.w), (o / so.w) % so.h, o % so.w);
                                let s = c.taps(si, co, oy, ox).fold(0f32, |s, (w, i)| s + c.weight[w] as f32 * xi[i]);
                                s + c.bias[co] as f32
                            })
                            .collect()
                    }
                    _ => continue,
                };
                let got: Vec<u32> = vals[id].iter().map(|v| v.to_bits()).collect();
                assert_eq!(got, want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "node {id}");
            }
        }
    }
}
