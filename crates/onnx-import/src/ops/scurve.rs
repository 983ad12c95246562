//! S-shaped activations: Sigmoid as the IR's σ, Tanh as `2·σ(2x) − 1`
//! (an identity over the reals; the σ node's tolerance for float inference,
//! doubled, covers a float tanh).

use crate::graph::{Dyn, Importer, Node, OpError, OpResult, Value};
use polycert_deeppoly::Op;
use polycert_interval::Interval;

fn point(v: f64) -> OpResult<Interval<f64>> {
    Interval::point(v).map_err(|e| OpError::Msg(e.to_string()))
}

pub(super) fn sigmoid(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let xn = node.required(0)?;
    if imp.is_const(xn) {
        let mut t = imp.constant(xn)?;
        t.data.iter_mut().for_each(|v| *v = 1.0 / (1.0 + (-*v).exp()));
        return Ok(Value::Const(t));
    }
    let x = imp.dynamic(xn)?;
    let id = imp.push(node, "", Op::Sigmoid, &[x.id])?;
    Ok(Value::Dyn(Dyn::new(id, x.dims)))
}

pub(super) fn tanh(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let xn = node.required(0)?;
    if imp.is_const(xn) {
        let mut t = imp.constant(xn)?;
        t.data.iter_mut().for_each(|v| *v = v.tanh());
        return Ok(Value::Const(t));
    }
    let x = imp.dynamic(xn)?;
    let c = imp.net.node(x.id).shape.c;
    let (two, zero, minus_one) = (point(2.0)?, point(0.0)?, point(-1.0)?);
    let op = Op::ChannelAffine { mul: vec![two; c], add: vec![zero; c], float_ops: 0 };
    let doubled = imp.push(node, ".double", op, &[x.id])?;
    let s = imp.push(node, ".sigmoid", Op::Sigmoid, &[doubled])?;
    let op = Op::ChannelAffine { mul: vec![two; c], add: vec![minus_one; c], float_ops: 0 };
    let id = imp.push(node, "", op, &[s])?;
    Ok(Value::Dyn(Dyn::new(id, x.dims)))
}
