//! Pieces of the exact and float32 test evaluators of `network_enclosure`:
//! the terms of affine nodes, pooling windows, and steps in rationals.

use polycert_deeppoly::{Cmp, Elementwise, Network, Op, Piece};
use rug::Rational;

/// One neuron's terms `(weight, input index)` and its bias.
pub type Neuron = (Vec<(f64, usize)>, f64);

/// The terms of every neuron of an affine node.
pub fn taps(net: &Network, id: usize) -> Option<Vec<Neuron>> {
    let node = net.node(id);
    let si = net.node(*node.inputs.first()?).shape;
    match &node.op {
        Op::Dense { weight, bias, out } => {
            let n = si.numel();
            Some((0..*out).map(|i| ((0..n).map(|j| (weight[i * n + j], j)).collect(), bias[i])).collect())
        }
        Op::Conv2d(c) => {
            let so = node.shape;
            Some(
                (0..so.numel())
                    .map(|o| {
                        let (co, oy, ox) = (o / (so.h * so.w), (o / so.w) % so.h, o % so.w);
                        (c.taps(si, co, oy, ox).map(|(w, i)| (c.weight[w], i)).collect(), c.bias[co])
                    })
                    .collect(),
            )
        }
        _ => None,
    }
}

/// Input indices of each output of a pooling node.
pub fn windows(net: &Network, id: usize) -> Vec<Vec<usize>> {
    let node = net.node(id);
    let si = net.node(node.inputs[0]).shape;
    let so = node.shape;
    let p = match &node.op {
        Op::MaxPool2d(p) | Op::AvgPool2d(p) => p,
        _ => unreachable!(),
    };
    (0..so.numel()).map(|o| p.window(si, o / (so.h * so.w), (o / so.w) % so.h, o % so.w).collect()).collect()
}

/// An exact step of an exact value.
pub fn step_exact(v: &Rational, f: Elementwise) -> Rational {
    let r = |v: f64| Rational::from_f64(v).expect("finite");
    match f {
        Elementwise::Select { cmp, at, then, other } => {
            let at = r(at);
            let holds = match cmp {
                Cmp::Gt => *v > at,
                Cmp::Ge => *v >= at,
                Cmp::Lt => *v < at,
                Cmp::Le => *v <= at,
                Cmp::Eq => *v == at,
                Cmp::Ne => *v != at,
            };
            match if holds { then } else { other } {
                Piece::Value => v.clone(),
                Piece::Const(c) => r(c),
            }
        }
        Elementwise::Trunc { bits } => {
            let top = Rational::from(rug::Integer::from(1) << (bits - 1));
            if *v < -top.clone() || *v >= top { -top } else { v.clone().trunc() }
        }
        Elementwise::Square => v.clone() * v,
        Elementwise::Power(_) => unreachable!("powers are not exact: networks with them are skipped"),
    }
}
