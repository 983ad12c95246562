//! Concrete inference of the IR (float32 or f64, left-to-right sums), for
//! falsification and tests.

use crate::ir::{Network, Op, Shape};
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

/// Runs the network on `x` in precision `F`, returning every node's values.
pub fn eval_all<F: EvalFloat>(net: &Network, x: &[F]) -> Vec<Vec<F>> {
    let mut vals: Vec<Vec<F>> = Vec::with_capacity(net.nodes().len());
    for node in net.nodes() {
        let inp = |k: usize| &vals[node.inputs[k]];
        let v = match &node.op {
            Op::Input => x.to_vec(),
            Op::Dense { weight, bias, out } => {
                let xi = inp(0);
                let n = xi.len();
                (0..*out)
                    .map(|i| {
                        let mut s = F::zero();
                        for j in 0..n {
                            s = s + F::of(weight[i * n + j]) * xi[j];
                        }
                        s + F::of(bias[i])
                    })
                    .collect()
            }
            Op::Conv2d(c) => {
                let (si, so) = (net.node(node.inputs[0]).shape, node.shape);
                let x = inp(0);
                (0..so.numel())
                    .map(|o| {
                        let (co, oy, ox) = (o / (so.h * so.w), (o / so.w) % so.h, o % so.w);
                        let s = c.taps(si, co, oy, ox).fold(F::zero(), |s, (w, i)| s + F::of(c.weight[w]) * x[i]);
                        s + F::of(c.bias[co])
                    })
                    .collect()
            }
            Op::Relu => inp(0).iter().map(|&v| v.max(F::zero())).collect(),
            Op::Add => inp(0).iter().zip(inp(1)).map(|(&a, &b)| a + b).collect(),
            Op::Concat => node.inputs.iter().flat_map(|&i| vals[i].iter().copied()).collect(),
            Op::Reshape => inp(0).clone(),
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
        };
        vals.push(v);
    }
    vals
}

/// Output of the network on `x`.
pub fn eval<F: EvalFloat>(net: &Network, x: &[F]) -> Vec<F> {
    eval_all(net, x).pop().unwrap_or_default()
}

fn pool<F: EvalFloat>(x: &[F], si: Shape, so: Shape, p: &crate::ir::Pool, max: bool) -> Vec<F> {
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
