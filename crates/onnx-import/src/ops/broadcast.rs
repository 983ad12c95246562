//! Network values copied into a larger tensor: Expand (and the broadcast
//! of an elementwise op with a constant) repeats elements, Concat places
//! them beside constants. Each becomes a dense layer whose rows copy one
//! element (weight 1) or hold a constant (its bias): every weight and
//! constant is exact, so the dense step's rounding bound covers the copy.

use super::MAX_WEIGHTS;
use super::linear::absorb;
use crate::graph::{Dyn, Importer, Node, OpResult, Pending, Value, unsupported};
use crate::tensor::{Kind, Tensor, broadcast_dims, norm_axis, numel};
use polycert_deeppoly::Op;

/// The layer `y[o] = x[src[o]]` (or `bias[o]` where `src[o]` is `None`)
/// over `x`, with the ONNX dims of `y`.
fn copy_layer(
    imp: &Importer,
    node: &Node,
    x: &Dyn,
    src: &[Option<usize>],
    bias: Vec<f64>,
    dims: Vec<usize>,
) -> OpResult<Value> {
    let (n_in, n_out) = (numel(&x.dims), src.len());
    if n_in.saturating_mul(n_out) > MAX_WEIGHTS {
        return unsupported(format!("copying {n_in} values into {n_out} is too large for a dense layer"));
    }
    let mut weight = vec![0.0; n_out * n_in];
    for (o, s) in src.iter().enumerate() {
        if let Some(i) = s {
            weight[o * n_in + i] = 1.0;
        }
    }
    let weight = absorb(imp, x, weight, n_out);
    Ok(Pending::value(node, x.id, weight, bias, dims))
}

/// Each element's position in `dims` (as f64, exact below 2^53).
fn positions(dims: &[usize]) -> OpResult<Tensor> {
    Ok(Tensor::new(dims.to_vec(), (0..numel(dims)).map(|i| i as f64).collect(), Kind::Float)?)
}

/// `x` repeated to the broadcast of its dims and `to` (ONNX rules).
pub(super) fn expand(imp: &mut Importer, node: &Node, x: &Dyn, to: &[usize]) -> OpResult<Value> {
    let dims = broadcast_dims(&x.dims, to)?;
    if numel(&x.dims).saturating_mul(numel(&dims)) > MAX_WEIGHTS {
        return unsupported(format!("repeating {:?} to {dims:?} is too large for a dense layer", x.dims));
    }
    let src: Vec<Option<usize>> = positions(&x.dims)?.broadcast_to(&dims)?.iter().map(|&i| Some(i as usize)).collect();
    let n = src.len();
    copy_layer(imp, node, x, &src, vec![0.0; n], dims)
}

/// The same, as a value of the IR (for an elementwise op that follows).
pub(super) fn expanded(imp: &mut Importer, node: &Node, xn: &str, to: &[usize]) -> OpResult<Dyn> {
    let x = imp.dynamic_reordered(xn)?;
    let name = format!("{}.expand", node.name);
    let Value::Pending(p) = expand(imp, node, &x, to)? else { unreachable!("a copy layer is pending") };
    imp.restore_pending(&name, p);
    imp.dynamic(&name)
}

/// Concat of constants with one network value along `axis`.
pub(super) fn concat_with_constants(imp: &mut Importer, node: &Node, axis: i64) -> OpResult<Value> {
    let names = node.inputs();
    let live: Vec<&&str> = names.iter().filter(|n| !imp.is_const(n)).collect();
    let [xn] = live[..] else {
        return unsupported("Concat of constants with several values computed from the network input");
    };
    let x = imp.dynamic_reordered(xn)?;
    let (mut src, mut val) = (Vec::new(), Vec::new());
    for n in &names {
        if n == xn {
            src.push(positions(&x.dims)?);
            val.push(Tensor::new(x.dims.clone(), vec![0.0; numel(&x.dims)], Kind::Float)?);
        } else {
            let c = imp.constant(n)?;
            src.push(Tensor::new(c.dims.clone(), vec![-1.0; numel(&c.dims)], Kind::Float)?);
            val.push(c);
        }
    }
    let a = norm_axis(axis, x.dims.len())?;
    let (src, val) = (Tensor::concat(&src, a)?, Tensor::concat(&val, a)?);
    let index: Vec<Option<usize>> = src.data.iter().map(|&i| (i >= 0.0).then_some(i as usize)).collect();
    copy_layer(imp, node, &x, &index, val.data, src.dims)
}

/// A graph output that does not depend on the input (Shape of the input,
/// say): a dense layer with zero weights and the constant as its bias. Its
/// inference is exact where every element is a float32, as polycert's
/// float32 outputs are; other constants are refused.
pub(crate) fn constant_output(imp: &mut Importer, out_name: &str, input_name: &str) -> Result<Dyn, String> {
    let c = imp.constant(out_name).map_err(|e| format!("output '{out_name}': {}", crate::graph::message(e)))?;
    if let Some(v) = c.data.iter().find(|&&v| v as f32 as f64 != v) {
        return Err(format!("graph output '{out_name}' is a constant with {v}, which is not a float32"));
    }
    let x = imp.dynamic(input_name).map_err(|e| format!("input '{input_name}': {}", crate::graph::message(e)))?;
    let (n_in, n_out) = (imp.net.node(x.id).shape.numel(), c.data.len());
    if n_in.saturating_mul(n_out) > MAX_WEIGHTS {
        return Err(format!("graph output '{out_name}' is a constant of {n_out} values: too large beside the input"));
    }
    let op = Op::Dense { weight: vec![0.0; n_in * n_out], bias: c.data.clone(), out: n_out };
    let id = imp.net.push(format!("{out_name}.constant"), op, &[x.id]).map_err(|e| e.to_string())?;
    let want = crate::graph::ir_shape(&c.dims);
    let id = if imp.net.node(id).shape == want {
        id
    } else {
        imp.net.reshape("output", id, want).map_err(|e| e.to_string())?
    };
    Ok(Dyn::new(id, c.dims))
}
