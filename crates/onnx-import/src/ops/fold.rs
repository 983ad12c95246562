//! Shape arithmetic that exporters leave in graphs: ConstantOfShape,
//! Expand, Range, Where and the comparisons and logic ops (Equal, Greater,
//! Less, GreaterOrEqual, LessOrEqual, Not, And, Or, Xor). On constants they
//! are folded (booleans as the integers 0 and 1, as `Cast` to bool gives);
//! on network values they are refused by name, except an Expand that
//! repeats nothing.

use crate::graph::{Importer, Node, OpResult, Value, unsupported};
use crate::tensor::{Kind, Tensor, broadcast_dims, decode};

/// The most elements a folded constant may hold (a shape input that asks
/// for more is refused, not allocated).
const MAX_FOLDED: usize = 1 << 26;

fn sized(dims: &[usize], what: &str) -> OpResult<usize> {
    let n = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    match n {
        Some(n) if n <= MAX_FOLDED => Ok(n),
        _ => Err(format!("{what} would fold a constant of shape {dims:?}, over {MAX_FOLDED} elements").into()),
    }
}

/// Dims from a constant int64 shape input (no negative entries).
fn shape_input(imp: &Importer, node: &Node, k: usize) -> OpResult<Vec<usize>> {
    let name = node.required(k)?;
    if !imp.is_const(name) {
        return unsupported(format!("{} with a shape computed from the network input", node.op()));
    }
    let v = imp.constant(name)?.as_i64()?;
    v.iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| format!("{}: negative dimension {d} in the shape {v:?}", node.op()).into())
        })
        .collect()
}

/// Every input constant (at least `need` of them), or a one-line refusal
/// naming the op.
fn constants(imp: &Importer, node: &Node, need: usize, why: &str) -> OpResult<Vec<Tensor>> {
    let names: Vec<&str> = (0..node.proto.input.len()).filter_map(|k| node.input(k)).collect();
    if names.len() < need {
        return Err(format!("{} needs {need} inputs, has {}", node.op(), names.len()).into());
    }
    if let Some(n) = names.iter().find(|n| !imp.is_const(n)) {
        return unsupported(format!("{} of a network value ('{n}'): {why}", node.op()));
    }
    names.iter().map(|n| imp.constant(n)).collect()
}

pub(super) fn constant_of_shape(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let dims = shape_input(imp, node, 0)?;
    let n = sized(&dims, "ConstantOfShape")?;
    let (v, kind) = match node.tensor("value")? {
        Some(t) => {
            let t = decode(t)?;
            if t.data.len() != 1 {
                return Err(format!("ConstantOfShape: value has {} elements, not one", t.data.len()).into());
            }
            (t.data[0], t.kind)
        }
        None => (0.0, Kind::Float32),
    };
    Ok(Value::Const(Tensor::new(dims, vec![v; n], kind)?))
}

pub(super) fn expand(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let shape = shape_input(imp, node, 1)?;
    let x = node.required(0)?;
    if !imp.is_const(x) {
        let d = imp.dynamic_reordered(x)?;
        if broadcast_dims(&d.dims, &shape)? == d.dims {
            return Ok(Value::Dyn(d));
        }
        return super::broadcast::expand(imp, node, &d, &shape);
    }
    let t = imp.constant(x)?;
    let dims = broadcast_dims(&t.dims, &shape)?;
    sized(&dims, "Expand")?;
    Ok(Value::Const(Tensor::new(dims.clone(), t.broadcast_to(&dims)?, t.kind)?))
}

pub(super) fn range(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let c = constants(imp, node, 3, "only constant ranges are supported")?;
    let [start, limit, delta] = [&c[0], &c[1], &c[2]].map(|t| t.data.first().copied());
    let (Some(start), Some(limit), Some(delta)) = (start, limit, delta) else {
        return Err("Range: start, limit and delta must be scalars".into());
    };
    if delta == 0.0 || !(start.is_finite() && limit.is_finite() && delta.is_finite()) {
        return Err(format!("Range: start {start}, limit {limit}, delta {delta} give no finite range").into());
    }
    let kind = c[0].kind;
    // As onnxruntime computes it: the count from `(limit − start) / delta`
    // in double, each element the previous one plus delta, rounded in the type.
    let len = ((limit - start) / delta).ceil().max(0.0);
    if len > MAX_FOLDED as f64 {
        return Err(format!("Range: {len} elements, over {MAX_FOLDED}").into());
    }
    let len = len as usize;
    let mut v = start;
    let data = (0..len)
        .map(|_| {
            let e = v;
            v = kind.round(v + delta);
            e
        })
        .collect();
    Ok(Value::Const(Tensor::new(vec![len], data, kind)?))
}

pub(super) fn where_(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let c = constants(imp, node, 3, "a selection by condition is not supported on network values")?;
    let dims = broadcast_dims(&broadcast_dims(&c[0].dims, &c[1].dims)?, &c[2].dims)?;
    sized(&dims, "Where")?;
    let [cond, x, y] = [&c[0], &c[1], &c[2]].map(|t| t.broadcast_to(&dims));
    let data = cond?.iter().zip(x?).zip(y?).map(|((&b, x), y)| if b != 0.0 { x } else { y }).collect();
    Ok(Value::Const(Tensor::new(dims, data, Kind::of_pair(c[1].kind, c[2].kind))?))
}

/// Equal, Greater, Less, GreaterOrEqual, LessOrEqual, And, Or, Xor, Not.
pub(super) fn logic(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let need = if node.op() == "Not" { 1 } else { 2 };
    let c = constants(imp, node, need, "comparisons and logic are steps, not supported on network values")?;
    let f: fn(f64, f64) -> bool = match node.op() {
        "Equal" => |a, b| a == b,
        "Greater" => |a, b| a > b,
        "Less" => |a, b| a < b,
        "GreaterOrEqual" => |a, b| a >= b,
        "LessOrEqual" => |a, b| a <= b,
        "And" => |a, b| a != 0.0 && b != 0.0,
        "Or" => |a, b| a != 0.0 || b != 0.0,
        "Xor" => |a, b| (a != 0.0) != (b != 0.0),
        "Not" => |a, _| a == 0.0,
        op => return Err(format!("{op} is not a logic op").into()),
    };
    let (a, b) = (&c[0], c.get(1).unwrap_or(&c[0]));
    let dims = broadcast_dims(&a.dims, &b.dims)?;
    let n = sized(&dims, node.op())?;
    let (x, y) = (a.broadcast_to(&dims)?, b.broadcast_to(&dims)?);
    let data = (0..n).map(|k| f64::from(u8::from(f(x[k], y[k])))).collect();
    Ok(Value::Const(Tensor::new(dims, data, Kind::Int)?))
}
