//! Steps of network values: comparisons with a constant (Equal, Greater,
//! Less, GreaterOrEqual, LessOrEqual), Where between the compared value and
//! a constant, Casts to bool or to a signed integer, and Sign. Each becomes
//! exact elementwise nodes ([`polycert_deeppoly::Elementwise`]).
//!
//! Integer values of the network may only be cast (back to float, or to
//! another type), compared, selected, reshaped or given +0: integer
//! arithmetic wraps around, which the analysis does not model.

use crate::graph::{Dyn, Importer, Node, OpResult, Value, unsupported};
use crate::tensor::{Tensor, broadcast_dims};
use polycert_deeppoly::{Cmp, Elementwise, Op, Piece};

/// The ops that may read an integer network value (see the module's note).
pub(super) const READ_INTEGERS: [&str; 13] = [
    "Cast",
    "Equal",
    "Greater",
    "Less",
    "GreaterOrEqual",
    "LessOrEqual",
    "Where",
    "Identity",
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Add",
];

/// The one value of a constant that is the same everywhere, as a float32.
fn scalar(t: &Tensor, what: &str) -> OpResult<f64> {
    let Some(&v) = t.data.first() else { return unsupported(format!("an empty {what}")) };
    if t.data.iter().any(|&x| x != v) {
        return unsupported(format!("a {what} that differs between elements (only one value is supported)"));
    }
    if v as f32 as f64 != v {
        return unsupported(format!("a {what} of {v}, which is not a float32"));
    }
    Ok(v)
}

fn push(imp: &mut Importer, node: &Node, f: Elementwise, x: &Dyn) -> OpResult<Value> {
    let id = imp.push(node, "", Op::Elementwise(f), &[x.id])?;
    imp.mark_integer(node, &f);
    Ok(Value::Dyn(Dyn::new(id, x.dims.clone())))
}

/// A comparison of a network value with a constant, as 1 or 0.
pub(super) fn compare(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let (a, b) = (node.required(0)?, node.required(1)?);
    let (xn, cn, swapped) = match (imp.is_const(a), imp.is_const(b)) {
        (false, true) => (a, b, false),
        (true, false) => (b, a, true),
        _ => return unsupported(format!("{} of two network values (only one against a constant)", node.op())),
    };
    let at = scalar(&imp.constant(cn)?, "threshold")?;
    let cmp = match (node.op(), swapped) {
        ("Equal", _) => Cmp::Eq,
        ("Greater", false) | ("Less", true) => Cmp::Gt,
        ("Less", false) | ("Greater", true) => Cmp::Lt,
        ("GreaterOrEqual", false) | ("LessOrEqual", true) => Cmp::Ge,
        ("LessOrEqual", false) | ("GreaterOrEqual", true) => Cmp::Le,
        (op, _) => return unsupported(format!("{op} of a network value")),
    };
    let x = imp.dynamic(xn)?;
    push(imp, node, Elementwise::Select { cmp, at, then: Piece::Const(1.0), other: Piece::Const(0.0) }, &x)
}

/// Where(cond, a, b) with `cond` a comparison of a value `x` with a
/// constant, and `a`, `b` each `x` itself or a constant.
pub(super) fn where_(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let [c, a, b] = [node.required(0)?, node.required(1)?, node.required(2)?];
    let cond = imp.dynamic(c)?;
    let Op::Elementwise(Elementwise::Select { cmp, at, then: Piece::Const(t), other: Piece::Const(o) }) =
        imp.net.node(cond.id).op
    else {
        return unsupported("Where with a condition that is not a comparison of a network value with a constant");
    };
    let x = imp.net.node(cond.id).inputs[0];
    let mut piece = |n: &str| -> OpResult<Piece> {
        if imp.is_const(n) {
            return Ok(Piece::Const(scalar(&imp.constant(n)?, "Where branch")?));
        }
        match imp.dynamic(n)? {
            d if d.id == x && d.dims == cond.dims => Ok(Piece::Value),
            _ => unsupported("Where between network values other than the compared one"),
        }
    };
    let (pa, pb) = (piece(a)?, piece(b)?);
    // The condition's 1 (true) selects `a`.
    let (then, other) = match (t != 0.0, o != 0.0) {
        (true, false) => (pa, pb),
        (false, true) => (pb, pa),
        _ => return Ok(Value::Dyn(imp.dynamic(if t != 0.0 { a } else { b })?)),
    };
    let xd = Dyn::new(x, cond.dims.clone());
    push(imp, node, Elementwise::Select { cmp, at, then, other }, &xd)
}

/// Cast of a network value: to float32 nothing, to bool `x ≠ 0`, to a
/// signed integer truncation.
pub(super) fn cast(imp: &mut Importer, node: &Node, xn: &str, to: i64) -> OpResult<Value> {
    let x = imp.dynamic_reordered(xn)?;
    let f = match to {
        1 => return Ok(Value::Dyn(x)),
        9 => Elementwise::Select { cmp: Cmp::Ne, at: 0.0, then: Piece::Const(1.0), other: Piece::Const(0.0) },
        6 => Elementwise::Trunc { bits: 32 },
        7 => Elementwise::Trunc { bits: 64 },
        _ => {
            return unsupported(format!(
                "Cast of a network value to data type {to} (float32, bool, int32 and int64 are supported)"
            ));
        }
    };
    let x = imp.dynamic(xn)?;
    push(imp, node, f, &x)
}

/// Add of an integer network value and a zero constant: the value itself.
pub(super) fn add_zero(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let refuse = || {
        unsupported(
            "Add to an integer network value (after a Cast to an integer type): it wraps around; only +0 is supported",
        )
    };
    let names = node.inputs();
    let [a, b] = names[..] else { return refuse() };
    let (xn, cn) = if imp.is_integer(a) { (a, b) } else { (b, a) };
    if !imp.is_const(cn) {
        return refuse();
    }
    let c = imp.constant(cn)?;
    let x = imp.dynamic(xn)?;
    if c.data.iter().any(|&v| v != 0.0) || broadcast_dims(&x.dims, &c.dims)? != x.dims {
        return refuse();
    }
    imp.mark_integer(node, &Elementwise::Trunc { bits: 64 });
    Ok(Value::Dyn(x))
}

/// Sign of a network value: `[x > 0] + (−[x < 0])`, two exact steps and
/// their sum (0 at ±0, as onnxruntime gives).
pub(super) fn sign(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    // Element-wise: a pending index map passes through.
    let x = imp.dynamic_reordered(node.required(0)?)?;
    let step =
        |cmp, v| Op::Elementwise(Elementwise::Select { cmp, at: 0.0, then: Piece::Const(v), other: Piece::Const(0.0) });
    let pos = imp.push(node, ".pos", step(Cmp::Gt, 1.0), &[x.id])?;
    let neg = imp.push(node, ".neg", step(Cmp::Lt, -1.0), &[x.id])?;
    let id = imp.push(node, "", Op::Add, &[pos, neg])?;
    Ok(Value::Dyn(Dyn { id, ..x }))
}
