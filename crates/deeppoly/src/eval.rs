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
                let s_in = net.node(node.inputs[0]).shape;
                conv(inp(0), s_in, node.shape, c.kernel, c.stride, (c.pad.0, c.pad.1), |co, ci, ky, kx| {
                    F::of(c.weight[((co * s_in.c + ci) * c.kernel.0 + ky) * c.kernel.1 + kx])
                })
                .into_iter()
                .enumerate()
                .map(|(i, s)| s + F::of(c.bias[i / (node.shape.h * node.shape.w)]))
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

fn conv<F: EvalFloat>(
    x: &[F],
    si: Shape,
    so: Shape,
    k: (usize, usize),
    s: (usize, usize),
    p: (usize, usize),
    w: impl Fn(usize, usize, usize, usize) -> F,
) -> Vec<F> {
    let mut out = vec![F::zero(); so.numel()];
    for co in 0..so.c {
        for oy in 0..so.h {
            for ox in 0..so.w {
                let mut acc = F::zero();
                for ci in 0..si.c {
                    for ky in 0..k.0 {
                        let iy = (oy * s.0 + ky) as isize - p.0 as isize;
                        if iy < 0 || iy >= si.h as isize {
                            continue;
                        }
                        for kx in 0..k.1 {
                            let ix = (ox * s.1 + kx) as isize - p.1 as isize;
                            if ix < 0 || ix >= si.w as isize {
                                continue;
                            }
                            acc = acc + w(co, ci, ky, kx) * x[(ci * si.h + iy as usize) * si.w + ix as usize];
                        }
                    }
                }
                out[(co * so.h + oy) * so.w + ox] = acc;
            }
        }
    }
    out
}

fn pool<F: EvalFloat>(x: &[F], si: Shape, so: Shape, p: &crate::ir::Pool, max: bool) -> Vec<F> {
    let mut out = Vec::with_capacity(so.numel());
    for c in 0..so.c {
        for oy in 0..so.h {
            for ox in 0..so.w {
                let mut vals = Vec::new();
                for ky in 0..p.kernel.0 {
                    for kx in 0..p.kernel.1 {
                        let iy = (oy * p.stride.0 + ky) as isize - p.pad.0 as isize;
                        let ix = (ox * p.stride.1 + kx) as isize - p.pad.1 as isize;
                        if iy >= 0 && ix >= 0 && (iy as usize) < si.h && (ix as usize) < si.w {
                            vals.push(x[(c * si.h + iy as usize) * si.w + ix as usize]);
                        }
                    }
                }
                let v = if max {
                    vals.iter().copied().fold(F::neg_infinity(), F::max)
                } else {
                    vals.iter().copied().sum::<F>() / F::of((p.kernel.0 * p.kernel.1) as f64)
                };
                out.push(v);
            }
        }
    }
    out
}
