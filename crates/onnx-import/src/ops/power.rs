//! Powers, products and quotients of network values. Pow with a constant
//! exponent or base, Sqrt and Reciprocal become the IR's elementwise powers
//! (`polycert_deeppoly::PowerFn`, deployed within a tolerance). Mul and
//! Div of two network values are built from them:
//! `x·y = ((x + y)² − (x − y)²)/4` and `x/y = x·y⁻¹` (`c/y = c·y⁻¹`).
//!
//! The identities hold over the reals, and the sums and quarters are
//! exact layers over the reals (`float_ops: 0`). The runtime rounds the
//! product once, `fl(x·y) = x·y·(1 + δ)` with `|δ| ≤ 2⁻²⁴`, which is
//! `(1 + δ)·s₁/4 − (1 + δ)·s₂/4` for the squares `s₁`, `s₂`: inside both
//! squares' bands (2⁻²⁰ of their value), so the analysis covers it. A
//! quotient is the product of `x` with a value in `y⁻¹`'s band.

use crate::graph::{Dyn, Importer, Node, OpError, OpResult, Value, push_selection, unsupported};
use crate::tensor::{Kind, Tensor, broadcast_dims, numel};
use polycert_deeppoly::{Elementwise, Network, NodeId, Op, PowerFn, Shape};
use polycert_interval::Interval;

/// Most distinct exponents of one Pow (each becomes a layer).
const MAX_EXPONENTS: usize = 8;

fn point(v: f64) -> OpResult<Interval<f64>> {
    Interval::point(v).map_err(|e| OpError::Msg(e.to_string()))
}

/// `f` of the network value `x`, with `x`'s dims.
fn apply(imp: &mut Importer, node: &Node, suffix: &str, f: PowerFn, x: &Dyn) -> OpResult<Dyn> {
    let id = imp.push(node, suffix, Op::Elementwise(Elementwise::Power(f)), &[x.id])?;
    Ok(Dyn::new(id, x.dims.clone()))
}

/// One constant value of `t` (a scalar or all elements equal), if it has one.
fn single(t: &Tensor) -> Option<f64> {
    let &v = t.data.first()?;
    t.data.iter().all(|&x| x == v).then_some(v)
}

/// The network value `xn` viewed (repeated where needed) with `dims`.
fn operand(imp: &mut Importer, node: &Node, xn: &str, dims: &[usize]) -> OpResult<Dyn> {
    let x = imp.dynamic(xn)?;
    if numel(dims) != numel(&x.dims) {
        return super::broadcast::expanded(imp, node, xn, dims);
    }
    imp.view(node, &x, dims.to_vec())
}

/// ONNX Pow.
pub(super) fn pow(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let (a, b) = (node.required(0)?, node.required(1)?);
    match (imp.is_const(a), imp.is_const(b)) {
        (true, true) => {
            let (x, e) = (imp.constant(a)?, imp.constant(b)?);
            if !matches!(x.kind, Kind::Float | Kind::Float32) {
                return unsupported("Pow of integer or float16 constants");
            }
            let dims = broadcast_dims(&x.dims, &e.dims)?;
            let (xs, es) = (x.broadcast_to(&dims)?, e.broadcast_to(&dims)?);
            // Folded as the runtime computes it: x⁰ = 1, x¹ = x, x² = x·x
            // (one rounding); other powers are not correctly rounded.
            if let Some(q) = es.iter().find(|&&q| q != 0.0 && q != 1.0 && q != 2.0) {
                return unsupported(format!("Pow of constants with exponent {q} (folded only for 0, 1 and 2)"));
            }
            let f = |p: f64, q: f64| if q == 2.0 { p * p } else { p.powf(q) };
            let data = xs.iter().zip(&es).map(|(&p, &q)| x.kind.round(f(p, q))).collect();
            Ok(Value::Const(Tensor::new(dims, data, x.kind)?))
        }
        (false, true) => {
            let e = imp.weight(b)?;
            let dims = broadcast_dims(&imp.dynamic(a)?.dims, &e.dims)?;
            let x = operand(imp, node, a, &dims)?;
            match single(&e) {
                Some(v) => Ok(Value::Dyn(apply(imp, node, "", PowerFn::Power(v), &x)?)),
                None => per_element(imp, node, &x, &e.broadcast_to(&dims)?),
            }
        }
        (true, false) => {
            let base = imp.weight(a)?;
            // The result has the base's type: a float32 or float64 power only.
            if !matches!(base.kind, Kind::Float | Kind::Float32) {
                return unsupported("Pow with an integer or float16 base (the result takes the base's type)");
            }
            let Some(v) = single(&base).filter(|&v| v > 0.0) else {
                return unsupported("Pow with a base that is not one positive constant");
            };
            let dims = broadcast_dims(&base.dims, &imp.dynamic(b)?.dims)?;
            let x = operand(imp, node, b, &dims)?;
            Ok(Value::Dyn(apply(imp, node, "", PowerFn::Exponential(v), &x)?))
        }
        (false, false) => unsupported("Pow of two network values (only a constant exponent or base)"),
    }
}

/// `x^e[i]` per element: each distinct exponent's power of the elements
/// that take it (selected by a copy layer), concatenated, and a copy layer
/// back to the elements' order.
fn per_element(imp: &mut Importer, node: &Node, x: &Dyn, es: &[f64]) -> OpResult<Value> {
    let mut distinct: Vec<f64> = Vec::new();
    for &e in es {
        if !distinct.contains(&e) {
            distinct.push(e);
        }
    }
    let n = numel(&x.dims);
    if distinct.len() > MAX_EXPONENTS || n * n * 2 > super::MAX_WEIGHTS {
        return unsupported(format!("Pow with {} distinct exponents over {n} values", distinct.len()));
    }
    let flat = imp.net.reshape(format!("{}.flat", node.name), x.id, Shape::flat(n))?;
    let (mut parts, mut order) = (Vec::new(), Vec::new());
    for (k, &e) in distinct.iter().enumerate() {
        let idx: Vec<usize> = (0..n).filter(|&i| es[i] == e).collect();
        let sel = push_selection(&mut imp.net, format!("{}.take{k}", node.name), flat, &idx)?;
        let p = apply(imp, node, &format!(".pow{k}"), PowerFn::Power(e), &Dyn::new(sel, vec![idx.len()]))?;
        parts.push(p.id);
        order.extend(idx);
    }
    let all = if parts.len() > 1 { imp.push(node, ".parts", Op::Concat, &parts)? } else { parts[0] };
    // Output i is the part element that holds element i.
    let mut back = vec![0; n];
    order.iter().enumerate().for_each(|(pos, &i)| back[i] = pos);
    let id = push_selection(&mut imp.net, format!("{}.pick", node.name), all, &back)?;
    let id = imp.net.reshape(format!("{}.view", node.name), id, imp.net.node(x.id).shape)?;
    Ok(Value::Dyn(Dyn::new(id, x.dims.clone())))
}

/// Sqrt and Reciprocal.
pub(super) fn unary(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let xn = node.required(0)?;
    let e = if node.op() == "Sqrt" { 0.5 } else { -1.0 };
    if imp.is_const(xn) {
        let mut t = imp.constant(xn)?;
        let kind = t.kind;
        if !matches!(kind, Kind::Float | Kind::Float32) {
            return unsupported(format!("{} of integer or float16 constants", node.op()));
        }
        // Both correctly rounded in the runtime, and from f64 (no double
        // rounding error for √ and ÷ from 53 to 24 bits).
        let f = |v: f64| if e == 0.5 { v.sqrt() } else { 1.0 / v };
        t.data.iter_mut().for_each(|v| *v = kind.round(f(*v)));
        return Ok(Value::Const(t));
    }
    let x = imp.dynamic(xn)?;
    Ok(Value::Dyn(apply(imp, node, "", PowerFn::Power(e), &x)?))
}

/// Mul or Div of two network values `a`, `b`.
pub(super) fn of_values(imp: &mut Importer, node: &Node, a: &str, b: &str) -> OpResult<Value> {
    let dims = broadcast_dims(&imp.dynamic(a)?.dims, &imp.dynamic(b)?.dims)?;
    let x = operand(imp, node, a, &dims)?;
    if node.op() == "Mul" && a == b {
        return Ok(Value::Dyn(apply(imp, node, "", PowerFn::Power(2.0), &x)?));
    }
    let mut y = operand(imp, node, b, &dims)?;
    if node.op() == "Div" {
        y = apply(imp, node, ".recip", PowerFn::Power(-1.0), &y)?;
    }
    let square = Elementwise::Power(PowerFn::Power(2.0));
    let id = polarized(&mut imp.net, &node.name, (x.id, y.id), square)?;
    Ok(Value::Dyn(Dyn::new(id, x.dims)))
}

/// `a·b = ((a + b)² − (a − b)²)/4` for equally shaped nodes `a`, `b`, the
/// sums and quarters exact over the reals, the squares `square` (a deployed
/// power, or the property's exact `Elementwise::Square`); its last node is
/// `name`, the others `name.sum` and so on.
pub(crate) fn polarized(
    net: &mut Network,
    name: &str,
    (a, b): (NodeId, NodeId),
    square: Elementwise,
) -> OpResult<NodeId> {
    let c = net.node(b).shape.c;
    let affine = |m: f64| -> OpResult<Op> {
        Ok(Op::ChannelAffine { mul: vec![point(m)?; c], add: vec![point(0.0)?; c], float_ops: 0 })
    };
    let sum = net.push(format!("{name}.sum"), Op::Add, &[a, b])?;
    let neg = net.push(format!("{name}.neg"), affine(-1.0)?, &[b])?;
    let diff = net.push(format!("{name}.diff"), Op::Add, &[a, neg])?;
    let s1 = net.push(format!("{name}.sum2"), Op::Elementwise(square), &[sum])?;
    let s2 = net.push(format!("{name}.diff2"), Op::Elementwise(square), &[diff])?;
    let q1 = net.push(format!("{name}.q1"), affine(0.25)?, &[s1])?;
    let q2 = net.push(format!("{name}.q2"), affine(-0.25)?, &[s2])?;
    Ok(net.push(name, Op::Add, &[q1, q2])?)
}

/// `c / y` with one constant `c`: `c·y⁻¹`, the scaling with one rounding
/// (its absolute error covers the runtime's rounding of `c/y` among the
/// subnormals, which `y⁻¹`'s band, scaled by a tiny `c`, would not).
pub(super) fn constant_over(imp: &mut Importer, node: &Node, cn: &str, yn: &str) -> OpResult<Value> {
    let ct = imp.weight(cn)?;
    let Some(c) = single(&ct) else {
        return unsupported("division of a constant that varies between elements by a network value");
    };
    let dims = broadcast_dims(&ct.dims, &imp.dynamic(yn)?.dims)?;
    let y = operand(imp, node, yn, &dims)?;
    let r = apply(imp, node, ".recip", PowerFn::Power(-1.0), &y)?;
    let ch = imp.net.node(r.id).shape.c;
    let op = Op::ChannelAffine { mul: vec![point(c)?; ch], add: vec![point(0.0)?; ch], float_ops: 1 };
    Ok(Value::Dyn(Dyn::new(imp.push(node, "", op, &[r.id])?, r.dims)))
}
