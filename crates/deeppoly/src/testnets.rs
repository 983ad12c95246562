//! Small deterministic networks for tests and benchmarks (shared by every
//! backend's conformance suite): compiled for this crate's tests and with
//! the `testnets` feature.

use crate::base::ir::{Conv2d, Network, NodeId, Op, Shape};
use crate::base::rng::SplitMix;

/// The 2-2-2-2 example of the DeepPoly and GPUPoly papers.
pub fn two_two() -> Network {
    let mut n = Network::new(Shape::flat(2));
    let w12 = vec![1.0, 1.0, 1.0, -1.0];
    let d1 = n.push("dense1", Op::Dense { weight: w12.clone(), bias: vec![0.0; 2], out: 2 }, &[0]).expect("valid");
    let r1 = n.push("relu1", Op::Relu, &[d1]).expect("valid");
    let d2 = n.push("dense2", Op::Dense { weight: w12, bias: vec![0.0; 2], out: 2 }, &[r1]).expect("valid");
    let r2 = n.push("relu2", Op::Relu, &[d2]).expect("valid");
    n.push("dense3", Op::Dense { weight: vec![1.0, 1.0, 0.0, 1.0], bias: vec![1.0, 0.0], out: 2 }, &[r2])
        .expect("valid");
    n
}

/// A random fully connected ReLU network.
/// Random lower slopes in `[0, 1)` for every ReLU neuron of `net` (indexed
/// as `lagrange`'s slopes: by node, empty but for ReLU nodes).
pub fn random_slopes(net: &Network, rng: &mut SplitMix) -> Vec<Vec<f64>> {
    net.nodes()
        .iter()
        .map(|n| if n.op == Op::Relu { (0..n.shape.numel()).map(|_| rng.unit()).collect() } else { Vec::new() })
        .collect()
}

pub fn random_mlp(rng: &mut SplitMix, widths: &[usize]) -> Network {
    let mut n = Network::new(Shape::flat(widths[0]));
    let mut x = 0;
    for (i, w) in widths.windows(2).enumerate() {
        let a = (2.0 / w[0] as f64).sqrt() * 1.5;
        let weight = (0..w[0] * w[1]).map(|_| rng.weight(a)).collect();
        let bias = (0..w[1]).map(|_| rng.weight(0.1)).collect();
        x = n.push(format!("dense{i}"), Op::Dense { weight, bias, out: w[1] }, &[x]).expect("valid");
        if i + 2 < widths.len() {
            x = n.push(format!("relu{i}"), Op::Relu, &[x]).expect("valid");
        }
    }
    n
}

/// A random fully connected network whose activations alternate σ and ReLU
/// (σ first).
pub fn random_sigmoid_mlp(rng: &mut SplitMix, widths: &[usize]) -> Network {
    let mut n = Network::new(Shape::flat(widths[0]));
    let mut x = 0;
    for (i, w) in widths.windows(2).enumerate() {
        let a = (2.0 / w[0] as f64).sqrt() * 3.0;
        let weight = (0..w[0] * w[1]).map(|_| rng.weight(a)).collect();
        let bias = (0..w[1]).map(|_| rng.weight(0.5)).collect();
        x = n.push(format!("dense{i}"), Op::Dense { weight, bias, out: w[1] }, &[x]).expect("valid");
        if i + 2 < widths.len() {
            let act = if i % 2 == 0 { Op::Sigmoid } else { Op::Relu };
            x = n.push(format!("act{i}"), act, &[x]).expect("valid");
        }
    }
    n
}

/// A random fully connected network whose activations are exact steps:
/// selections by a comparison with a constant and truncations.
pub fn random_step_mlp(rng: &mut SplitMix, widths: &[usize]) -> Network {
    use crate::base::elementwise::{Cmp, Elementwise, Piece};
    let mut n = Network::new(Shape::flat(widths[0]));
    let mut x = 0;
    for (i, w) in widths.windows(2).enumerate() {
        let a = (2.0 / w[0] as f64).sqrt() * 3.0;
        let weight = (0..w[0] * w[1]).map(|_| rng.weight(a)).collect();
        let bias = (0..w[1]).map(|_| rng.weight(0.5)).collect();
        x = n.push(format!("dense{i}"), Op::Dense { weight, bias, out: w[1] }, &[x]).expect("valid");
        if i + 2 < widths.len() {
            let cmps = [Cmp::Gt, Cmp::Ge, Cmp::Lt, Cmp::Le, Cmp::Eq, Cmp::Ne];
            let mut piece =
                || if rng.below(2) == 0 { Piece::Value } else { Piece::Const(rng.weight(1.0) as f32 as f64) };
            let (then, other) = (piece(), piece());
            let f = match rng.below(3) {
                0 => Elementwise::Trunc { bits: 32 },
                _ => Elementwise::Select { cmp: cmps[rng.below(6)], at: rng.weight(0.3) as f32 as f64, then, other },
            };
            x = n.push(format!("step{i}"), Op::Elementwise(f), &[x]).expect("valid");
        }
    }
    n
}

/// A small MLP whose hidden layers are powers defined everywhere (`x²`,
/// `x³`, `x⁴`, `2^x`, `0.5^x`), with small weights so values stay modest.
pub fn random_power_mlp(rng: &mut SplitMix, widths: &[usize]) -> Network {
    use crate::base::elementwise::{Elementwise, PowerFn};
    let mut n = Network::new(Shape::flat(widths[0]));
    let mut x = 0;
    for (i, w) in widths.windows(2).enumerate() {
        let a = (1.0 / w[0] as f64).sqrt();
        let weight = (0..w[0] * w[1]).map(|_| rng.weight(a)).collect();
        let bias = (0..w[1]).map(|_| rng.weight(0.3)).collect();
        x = n.push(format!("dense{i}"), Op::Dense { weight, bias, out: w[1] }, &[x]).expect("valid");
        if i + 2 < widths.len() {
            let f = [PowerFn::Power(2.0), PowerFn::Power(3.0), PowerFn::Power(4.0)]
                .into_iter()
                .chain([PowerFn::Exponential(2.0), PowerFn::Exponential(0.5)])
                .nth(rng.below(5))
                .expect("five");
            x = n.push(format!("power{i}"), Op::Elementwise(Elementwise::Power(f)), &[x]).expect("valid");
        }
    }
    n
}

fn rand_conv(rng: &mut SplitMix, c_in: usize, c_out: usize, k: usize, s: usize, p: usize) -> Conv2d {
    let a = (2.0 / (c_in * k * k) as f64).sqrt() * 1.5;
    Conv2d {
        weight: (0..c_out * c_in * k * k).map(|_| rng.weight(a)).collect(),
        bias: (0..c_out).map(|_| rng.weight(0.1)).collect(),
        c_out,
        kernel: (k, k),
        stride: (s, s),
        pad: (p, p, p, p),
    }
}

/// A small residual conv network: conv, relu, two branches (two convs /
/// one strided conv) merged by Add, relu, flatten, dense.
pub fn random_resnet(rng: &mut SplitMix, input: Shape, width: usize, n_out: usize) -> Network {
    let mut n = Network::new(input);
    let c1 = n.push("conv1", Op::Conv2d(rand_conv(rng, input.c, width, 3, 1, 1)), &[0]).expect("valid");
    let r1 = n.push("relu1", Op::Relu, &[c1]).expect("valid");
    let a1 = n.push("block_a1", Op::Conv2d(rand_conv(rng, width, width, 3, 2, 1)), &[r1]).expect("valid");
    let ar = n.push("block_relu", Op::Relu, &[a1]).expect("valid");
    let a2 = n.push("block_a2", Op::Conv2d(rand_conv(rng, width, width, 3, 1, 1)), &[ar]).expect("valid");
    let b1 = n.push("block_b", Op::Conv2d(rand_conv(rng, width, width, 1, 2, 0)), &[r1]).expect("valid");
    let add = n.push("add", Op::Add, &[a2, b1]).expect("valid");
    let r2 = n.push("relu2", Op::Relu, &[add]).expect("valid");
    let s = n.node(r2).shape;
    let f = n.reshape("flatten", r2, Shape::flat(s.numel())).expect("valid");
    let weight = (0..n_out * s.numel()).map(|_| rng.weight((2.0 / s.numel() as f64).sqrt())).collect();
    n.push("fc", Op::Dense { weight, bias: vec![0.0; n_out], out: n_out }, &[f]).expect("valid");
    n
}

/// The same network with every conv replaced by an equivalent dense layer
/// (between reshapes): the dense reference for the windowed path. Also
/// returns where each original node went.
pub fn densify(net: &Network) -> (Network, Vec<NodeId>) {
    let mut out = Network::new(net.input_shape());
    let mut map: Vec<NodeId> = vec![0];
    for node in &net.nodes()[1..] {
        let ins: Vec<NodeId> = node.inputs.iter().map(|&i| map[i]).collect();
        let id = match &node.op {
            Op::Conv2d(c) => {
                let si = net.node(node.inputs[0]).shape;
                let so = node.shape;
                let (n_in, n_o) = (si.numel(), so.numel());
                let mut weight = vec![0.0; n_in * n_o];
                let mut bias = vec![0.0; n_o];
                for co in 0..so.c {
                    for oy in 0..so.h {
                        for ox in 0..so.w {
                            let o = (co * so.h + oy) * so.w + ox;
                            bias[o] = c.bias[co];
                            for ci in 0..si.c {
                                for ky in 0..c.kernel.0 {
                                    for kx in 0..c.kernel.1 {
                                        let iy = (oy * c.stride.0 + ky) as isize - c.pad.0 as isize;
                                        let ix = (ox * c.stride.1 + kx) as isize - c.pad.1 as isize;
                                        if iy < 0 || ix < 0 || iy >= si.h as isize || ix >= si.w as isize {
                                            continue;
                                        }
                                        let i = (ci * si.h + iy as usize) * si.w + ix as usize;
                                        weight[o * n_in + i] =
                                            c.weight[((co * si.c + ci) * c.kernel.0 + ky) * c.kernel.1 + kx];
                                    }
                                }
                            }
                        }
                    }
                }
                let f = out.reshape(format!("{}_flat", node.name), ins[0], Shape::flat(n_in)).expect("valid");
                let d = out.push(&node.name, Op::Dense { weight, bias, out: n_o }, &[f]).expect("valid");
                out.reshape(format!("{}_unflat", node.name), d, so).expect("valid")
            }
            Op::Reshape => out.reshape(&node.name, ins[0], node.shape).expect("valid"),
            op => out.push(&node.name, op.clone(), &ins).expect("valid"),
        };
        map.push(id);
    }
    (out, map)
}

/// Conv, then two branches (3x3 average pooling / a strided 1x1 conv)
/// concatenated over channels, ReLU, flatten, dense.
pub fn random_pool_concat(rng: &mut SplitMix, input: Shape, width: usize, n_out: usize) -> Network {
    use crate::base::ir::Pool;
    let mut n = Network::new(input);
    let c1 = n.push("conv1", Op::Conv2d(rand_conv(rng, input.c, width, 3, 1, 1)), &[0]).expect("valid");
    let r1 = n.push("relu1", Op::Relu, &[c1]).expect("valid");
    let pool = Pool { kernel: (3, 3), stride: (2, 2), pad: (0, 0, 0, 0) };
    let p = n.push("avgpool", Op::AvgPool2d(pool), &[r1]).expect("valid");
    let b = n.push("branch", Op::Conv2d(rand_conv(rng, width, width, 3, 2, 0)), &[r1]).expect("valid");
    let cat = n.push("concat", Op::Concat, &[p, b]).expect("valid");
    let r2 = n.push("relu2", Op::Relu, &[cat]).expect("valid");
    let s = n.node(r2).shape;
    let f = n.reshape("flatten", r2, Shape::flat(s.numel())).expect("valid");
    let weight = (0..n_out * s.numel()).map(|_| rng.weight((2.0 / s.numel() as f64).sqrt())).collect();
    n.push("fc", Op::Dense { weight, bias: vec![0.0; n_out], out: n_out }, &[f]).expect("valid");
    n
}

/// Conv, ReLU, 2x2 max pooling, conv, ReLU, padded 3x3 max pooling (stride
/// 1, overlapping windows), flatten, dense.
pub fn random_maxpool(rng: &mut SplitMix, input: Shape, width: usize, n_out: usize) -> Network {
    use crate::base::ir::Pool;
    let mut n = Network::new(input);
    let c1 = n.push("conv1", Op::Conv2d(rand_conv(rng, input.c, width, 3, 1, 1)), &[0]).expect("valid");
    let r1 = n.push("relu1", Op::Relu, &[c1]).expect("valid");
    let p1 = Pool { kernel: (2, 2), stride: (2, 2), pad: (0, 0, 0, 0) };
    let m1 = n.push("maxpool1", Op::MaxPool2d(p1), &[r1]).expect("valid");
    let c2 = n.push("conv2", Op::Conv2d(rand_conv(rng, width, width, 3, 1, 1)), &[m1]).expect("valid");
    let r2 = n.push("relu2", Op::Relu, &[c2]).expect("valid");
    let p2 = Pool { kernel: (3, 3), stride: (1, 1), pad: (1, 1, 1, 1) };
    let m2 = n.push("maxpool2", Op::MaxPool2d(p2), &[r2]).expect("valid");
    let s = n.node(m2).shape;
    let f = n.reshape("flatten", m2, Shape::flat(s.numel())).expect("valid");
    let weight = (0..n_out * s.numel()).map(|_| rng.weight((2.0 / s.numel() as f64).sqrt())).collect();
    n.push("fc", Op::Dense { weight, bias: vec![0.0; n_out], out: n_out }, &[f]).expect("valid");
    n
}

/// The tiny convnet's layer kinds (`../shared/bench/tiny_cnn`): conv,
/// BatchNormalization (a per-channel affine), ReLU, 2x2 max pooling, conv,
/// ReLU, 2x2 average pooling, flatten, dense.
pub fn random_bn_pool(rng: &mut SplitMix, input: Shape, width: usize, n_out: usize) -> Network {
    use crate::base::ir::Pool;
    use polycert_interval::Interval;
    let mut n = Network::new(input);
    let c1 = n.push("conv1", Op::Conv2d(rand_conv(rng, input.c, width, 3, 1, 1)), &[0]).expect("valid");
    let mul = (0..width).map(|_| Interval::point(0.5 + rng.unit()).expect("finite")).collect();
    let add = (0..width).map(|_| Interval::point(rng.weight(0.2)).expect("finite")).collect();
    let bn = n.push("bn", Op::ChannelAffine { mul, add, float_ops: 0 }, &[c1]).expect("valid");
    let r1 = n.push("relu1", Op::Relu, &[bn]).expect("valid");
    let p2 = Pool { kernel: (2, 2), stride: (2, 2), pad: (0, 0, 0, 0) };
    let m1 = n.push("maxpool", Op::MaxPool2d(p2), &[r1]).expect("valid");
    let c2 = n.push("conv2", Op::Conv2d(rand_conv(rng, width, width, 3, 1, 1)), &[m1]).expect("valid");
    let r2 = n.push("relu2", Op::Relu, &[c2]).expect("valid");
    let a2 = n.push("avgpool", Op::AvgPool2d(p2), &[r2]).expect("valid");
    let s = n.node(a2).shape;
    let f = n.reshape("flatten", a2, Shape::flat(s.numel())).expect("valid");
    let weight = (0..n_out * s.numel()).map(|_| rng.weight((2.0 / s.numel() as f64).sqrt())).collect();
    n.push("fc", Op::Dense { weight, bias: vec![0.0; n_out], out: n_out }, &[f]).expect("valid");
    n
}
