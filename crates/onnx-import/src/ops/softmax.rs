//! Softmax. As the last operation over all outputs it is dropped: the IR
//! network computes the logits and is marked (`Network::set_softmax_output`),
//! so that the analysis checks comparisons of outputs with a float margin
//! (`polycert_deeppoly::base::softmax`). Anywhere else (or when the importer
//! is asked to keep it) it is lowered, exact over the reals:
//! `y_i = 1/Σ_j exp(x_j − x_i)` as a dense layer of differences, an
//! exponential, a dense sum with bias 1, a reciprocal, and a band for the
//! runtime's roundings ([`SOFTMAX_TOLERANCE`]).

use crate::graph::{Dyn, Importer, Node, OpResult, Value, ir_shape, unsupported};
use crate::tensor::{norm_axis, numel};
use polycert_deeppoly::{Elementwise, Op, PowerFn};
use polycert_interval::Interval;

/// Relative band of a float32 runtime's Softmax around the exact one:
/// 2^-12. It computes `m = max x`, `t_j = fl(x_j − m)`, `e_j ≈ exp(t_j)`,
/// `S = fl(Σ e_j)` and `fl(e_i/S)` (or `e_i·fl(1/S)`), so
/// `y_i = s_i·(1 + δ)` with `|δ| ≤ u·(2R + n + 4) + 2ε` (`u = 2^-24`,
/// `R = max_j x_j − min_j x_j`, `ε ≤ 2^-20` the exponential's relative error,
/// the sum of `n` positive terms in any order). The lowered exponential stops
/// the analysis past float32 (`x_j − x_i > 88.8`), so `R < 89`; with
/// `n ≤ 2048` that is below 1.4·10^-4 < 2^-12. Values that underflow are
/// below 2^-125 and within the absolute floor `POWER_FLOOR` (2^-120).
pub const SOFTMAX_TOLERANCE: f64 = 1.0 / 4096.0;

/// Most elements one Softmax group may have (see [`SOFTMAX_TOLERANCE`]).
const MAX_GROUP: usize = 2048;

pub(super) fn softmax(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let xn = node.required(0)?;
    if imp.is_const(xn) {
        return unsupported("Softmax of a constant");
    }
    let x = imp.dynamic(xn)?;
    let rank = x.dims.len();
    let default = if imp.opset < 13 { 1 } else { -1 };
    let axis = norm_axis(node.int("axis", default)?, rank)?;
    // Groups: before opset 13 every row of the 2-D view `[..axis | axis..]`,
    // from 13 each line along `axis`.
    let (outer, n, inner) = if imp.opset < 13 {
        (numel(&x.dims[..axis]), numel(&x.dims[axis..]), 1)
    } else {
        (numel(&x.dims[..axis]), x.dims[axis], numel(&x.dims[axis + 1..]))
    };
    let last = node.proto.output.first().map(String::as_str) == Some(imp.output);
    if last && outer * inner == 1 && !imp.keep_softmax {
        imp.net.set_softmax_output(true);
        return Ok(Value::Dyn(x));
    }
    lowered(imp, node, x, (n, inner))
}

/// `y_e = 1/(1 + Σ_{j≠i} exp(x_j − x_i))` for the element `e` at place `i`
/// of its group, then the runtime's band.
fn lowered(imp: &mut Importer, node: &Node, x: Dyn, (n, inner): (usize, usize)) -> OpResult<Value> {
    if !(2..=MAX_GROUP).contains(&n) {
        return unsupported(format!("Softmax over {n} elements (2 to {MAX_GROUP} are supported)"));
    }
    let total = numel(&x.dims);
    let rows = total * (n - 1);
    if rows.saturating_mul(total) > super::MAX_WEIGHTS {
        return unsupported(format!(
            "Softmax over dims {:?}: its {rows} differences over {total} values exceed {} weights",
            x.dims,
            super::MAX_WEIGHTS
        ));
    }
    // Row (e, k): x_j − x_e for the k-th other element j of e's group.
    let mut diff = vec![0.0; rows * total];
    for e in 0..total {
        let (base, i) = (e - (e / inner) % n * inner, (e / inner) % n);
        for (k, j) in (0..n).filter(|&j| j != i).enumerate() {
            let row = &mut diff[(e * (n - 1) + k) * total..][..total];
            row[base + j * inner] = 1.0;
            row[e] = -1.0;
        }
    }
    // The runtime computes neither the differences nor their sums: the
    // band covers its roundings, so these layers are exact.
    let d = imp.push(node, ".diff", Op::Dense { weight: diff, bias: vec![0.0; rows], out: rows }, &[x.id])?;
    imp.net.mark_exact(d);
    let exp = Op::Elementwise(Elementwise::Power(PowerFn::Exponential(std::f64::consts::E)));
    let ex = imp.push(node, ".exp", exp, &[d])?;
    let mut sum = vec![0.0; total * rows];
    for e in 0..total {
        sum[e * rows + e * (n - 1)..][..n - 1].fill(1.0);
    }
    let s = imp.push(node, ".sum", Op::Dense { weight: sum, bias: vec![1.0; total], out: total }, &[ex])?;
    imp.net.mark_exact(s);
    let r = imp.push(node, ".recip", Op::Elementwise(Elementwise::Power(PowerFn::Power(-1.0))), &[s])?;
    let band = Interval::new(1.0 - SOFTMAX_TOLERANCE, 1.0 + SOFTMAX_TOLERANCE).map_err(|e| e.to_string())?;
    let floor = polycert_deeppoly::base::power::POWER_FLOOR;
    let floor = Interval::new(-floor, floor).map_err(|e| e.to_string())?;
    let c = imp.net.node(r).shape.c;
    let op = Op::ChannelAffine { mul: vec![band; c], add: vec![floor; c], float_ops: 0 };
    let mut id = imp.push(node, "", op, &[r])?;
    let want = ir_shape(&x.dims);
    if imp.net.node(id).shape != want {
        id = imp.net.reshape(format!("{}.reshape", node.name), id, want)?;
    }
    Ok(Value::Dyn(Dyn::new(id, x.dims)))
}
