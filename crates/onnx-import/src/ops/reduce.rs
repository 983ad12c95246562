//! ReduceSum and ReduceMean of a network value: a Dense layer of ones. Its
//! weights are exact and the runtime's sum, in whatever order it adds, is
//! within the dense step's rounding bound (any order of its products). The
//! mean then divides by the count: one rounded operation whose factor is
//! `1/n` rounded down and up, which holds both `s/n` and `s·fl(1/n)`.

use super::MAX_WEIGHTS;
use super::shape::ints_input_or_attr;
use crate::graph::{Dyn, Importer, Node, OpError, OpResult, Pending, Value, ir_shape, unsupported};
use polycert_deeppoly::{Op, Shape};
use polycert_interval::{Interval, fp};

/// The output dims of reducing `dims` over `reduced`, and each input
/// element's output index (row-major).
fn reduction(dims: &[usize], reduced: &[bool], keep: bool) -> (Vec<usize>, Vec<usize>) {
    let out_dims: Vec<usize> =
        dims.iter().zip(reduced).filter_map(|(&d, &r)| if r { keep.then_some(1) } else { Some(d) }).collect();
    let n: usize = dims.iter().product();
    let mut target = Vec::with_capacity(n);
    let mut idx = vec![0usize; dims.len()];
    for _ in 0..n {
        let o = idx.iter().zip(dims).zip(reduced).filter(|(_, r)| !**r).fold(0, |acc, ((&i, &d), _)| acc * d + i);
        target.push(o);
        for k in (0..dims.len()).rev() {
            idx[k] += 1;
            if idx[k] < dims[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    (out_dims, target)
}

/// `ReduceSum(X, axes)` or `ReduceMean(X, axes)` (axes from input 1 since
/// opset 13 for ReduceSum and 18 for ReduceMean, the attribute before),
/// with `keepdims` and `noop_with_empty_axes`.
pub(super) fn reduce(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let xn = node.required(0)?;
    let op = node.op();
    if imp.is_const(xn) {
        return unsupported(format!("{op} of a constant (fold it when exporting)"));
    }
    let axes_input = imp.opset >= if op == "ReduceSum" { 13 } else { 18 };
    let axes = if axes_input { ints_input_or_attr(imp, node, 1, "axes")? } else { node.ints("axes")? };
    let x = imp.dynamic_reordered(xn)?;
    let rank = x.dims.len() as i64;
    let axes = match axes.filter(|a| !a.is_empty()) {
        None if node.int("noop_with_empty_axes", 0)? != 0 => return Ok(Value::Dyn(x)),
        None => (0..rank).collect(),
        Some(a) => a,
    };
    let mut reduced = vec![false; x.dims.len()];
    for &a in &axes {
        let k = if a < 0 { a + rank } else { a };
        if !(0..rank).contains(&k) || reduced[k as usize] {
            return Err(format!("axes {axes:?} are out of range or repeated for rank {rank}").into());
        }
        reduced[k as usize] = true;
    }
    let (dims, target) = reduction(&x.dims, &reduced, node.int("keepdims", 1)? != 0);
    let (n_in, n_out) = (target.len(), dims.iter().product::<usize>());
    if n_in.saturating_mul(n_out) > MAX_WEIGHTS {
        return unsupported(format!("a reduction of {n_in} values to {n_out} is too large for a dense layer"));
    }
    let mut weight = vec![0.0; n_out * n_in];
    for (i, &o) in target.iter().enumerate() {
        weight[o * n_in + i] = 1.0;
    }
    let weight = super::linear::absorb(imp, &x, weight, n_out);
    let sum = Pending::value(node, x.id, weight, vec![0.0; n_out], dims.clone());
    if op == "ReduceSum" { Ok(sum) } else { mean(imp, node, sum, n_in / n_out.max(1), dims) }
}

/// The sum of `n` values divided by `n`, one rounding.
fn mean(imp: &mut Importer, node: &Node, sum: Value, n: usize, dims: Vec<usize>) -> OpResult<Value> {
    let Value::Pending(p) = sum else { unreachable!("a sum is a pending layer") };
    let name = format!("{}.sum", node.name);
    imp.restore_pending(&name, p);
    let s = imp.dynamic(&name)?;
    let iv = |lo, hi| Interval::new(lo, hi).map_err(|e| OpError::Msg(e.to_string()));
    let inv = iv(fp::div_down(1.0, n as f64), fp::div_up(1.0, n as f64))?;
    let k: usize = dims.iter().product();
    let flat = imp.net.reshape(format!("{}.flat", node.name), s.id, Shape::flat(k))?;
    let op = Op::ChannelAffine { mul: vec![inv; k], add: vec![iv(0.0, 0.0)?; k], float_ops: 1 };
    let id = imp.push(node, "", op, &[flat])?;
    let id = imp.net.reshape(format!("{}.unflat", node.name), id, ir_shape(&dims))?;
    Ok(Value::Dyn(Dyn::new(id, dims)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_element_goes_to_its_reduced_position() {
        // [2, 3] over axis 1, keeping it: two sums of three.
        assert_eq!(super::reduction(&[2, 3], &[false, true], true), (vec![2, 1], vec![0, 0, 0, 1, 1, 1]));
        // [2, 3] over axis 0, dropping it: three sums of two.
        assert_eq!(super::reduction(&[2, 3], &[true, false], false), (vec![3], vec![0, 1, 2, 0, 1, 2]));
    }
}
