//! `Pad` (constant zero padding of the spatial axes) as an exact 1×1
//! identity convolution with that padding: its padded positions take the
//! zero bias, every other output is `1·x` plus zero terms, exactly.

use crate::graph::{Dyn, Importer, Node, OpResult, Value, unsupported};
use polycert_deeppoly::{Conv2d, Op};

pub(super) fn pad(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let xn = node.required(0)?;
    if imp.is_const(xn) {
        return unsupported("Pad of a constant");
    }
    let mode = node.string("mode")?.unwrap_or_else(|| "constant".into());
    if mode != "constant" {
        return unsupported(format!("Pad mode '{mode}' (only 'constant' is supported)"));
    }
    if node.input(3).is_some() {
        return unsupported("Pad with an 'axes' input");
    }
    let pads = match node.input(1) {
        Some(p) if imp.is_const(p) => imp.constant(p)?.as_i64()?,
        Some(p) => return unsupported(format!("input '{p}' (pads) must be a constant")),
        None => node.ints("pads")?.ok_or_else(|| "no pads (input 1 or attribute 'pads')".to_string())?,
    };
    let value = match node.input(2) {
        Some(v) if !v.is_empty() && imp.is_const(v) => imp.constant(v)?.data.first().copied().unwrap_or(0.0),
        Some(v) if !v.is_empty() => return unsupported(format!("input '{v}' (constant_value) must be a constant")),
        _ => node.float("value", 0.0)? as f64,
    };
    let x = imp.dynamic(xn)?;
    let rank = x.dims.len();
    if pads.len() != 2 * rank {
        return Err(format!("{} pads for an input of rank {rank} (dims {:?})", pads.len(), x.dims).into());
    }
    if pads.iter().all(|&p| p == 0) {
        return Ok(Value::Dyn(x));
    }
    if pads.iter().any(|&p| p < 0) {
        return unsupported(format!("negative pads {pads:?} (cropping)"));
    }
    if value != 0.0 {
        return unsupported(format!("Pad with constant value {value} (only 0 is supported)"));
    }
    let &[1, c, h, w] = &x.dims[..] else {
        return unsupported(format!("Pad of dims {:?}; only [1,C,H,W] inputs are supported", x.dims));
    };
    let (begin, end) = pads.split_at(4);
    if begin[..2] != [0, 0] || end[..2] != [0, 0] {
        return unsupported(format!("pads {pads:?} on the batch or channel axis (only H and W may be padded)"));
    }
    let p = |v: i64| v as usize;
    let pad = (p(begin[2]), p(begin[3]), p(end[2]), p(end[3]));
    let mut weight = vec![0.0; c * c];
    for ch in 0..c {
        weight[ch * c + ch] = 1.0;
    }
    let op = Op::Conv2d(Conv2d { weight, bias: vec![0.0; c], c_out: c, kernel: (1, 1), stride: (1, 1), pad });
    let id = imp.push(node, "", op, &[x.id])?;
    Ok(Value::Dyn(Dyn::new(id, vec![1, c, h + pad.0 + pad.2, w + pad.1 + pad.3])))
}
