//! Element-wise arithmetic: Add/Sub/Mul/Div (with a constant, per channel
//! or per element, or the residual Add of two network values),
//! BatchNormalization, Relu, Neg.
//!
//! Affine maps with constants become `Op::ChannelAffine`, whose interval
//! coefficients enclose the exact real ones: `x − c` is `x·1 + (−c)` exactly,
//! `x / c` is `x·[1/c]` with `1/c` rounded outward.

use crate::graph::{Dyn, Importer, Node, OpError, OpResult, Value, ir_shape, unsupported};
use crate::tensor::{Kind, Tensor, broadcast_dims, numel};
use polycert_deeppoly::{Op, Shape};
use polycert_interval::{Interval, fp};

fn point(x: f64) -> OpResult<Interval<f64>> {
    Interval::point(x).map_err(|e| OpError::Msg(e.to_string()))
}

/// Element-wise binary op on two constants (numpy broadcasting), computed
/// in their element type as the runtime does: in f64 then rounded to
/// float32 for float32 constants (the correctly rounded float32 result:
/// f64 has more than twice float32's precision).
fn fold(op: &str, a: &Tensor, b: &Tensor) -> OpResult<Tensor> {
    let dims = broadcast_dims(&a.dims, &b.dims)?;
    let (x, y) = (a.broadcast_to(&dims)?, b.broadcast_to(&dims)?);
    let kind = Kind::of_pair(a.kind, b.kind);
    let int = kind == Kind::Int;
    if kind == Kind::Half {
        return unsupported(format!("{op} of float16 constants (folded arithmetic is float32 or float64 only)"));
    }
    let f = |p: f64, q: f64| match op {
        "Add" => p + q,
        "Sub" => p - q,
        "Mul" => p * q,
        _ if int => (p / q).trunc(),
        _ => p / q,
    };
    if int && op == "Div" && y.contains(&0.0) {
        return Err("integer division by zero".into());
    }
    let data = x.iter().zip(&y).map(|(&p, &q)| kind.round(f(p, q))).collect();
    Ok(Tensor::new(dims, data, kind)?)
}

/// The per-channel values of a constant broadcast over the channel-first
/// IR shape of `dims`; fails when the constant varies within a channel.
pub(super) fn per_channel(c: &Tensor, dims: &[usize]) -> OpResult<Vec<f64>> {
    let full = c.broadcast_to(dims)?;
    let s = ir_shape(dims);
    let hw = s.h * s.w;
    full.chunks_exact(hw.max(1))
        .map(|ch| {
            if ch.iter().all(|&v| v == ch[0]) {
                Ok(ch[0])
            } else {
                unsupported(format!(
                    "constant of dims {:?} varies within a channel of the {dims:?} tensor; only scalar and per-channel constants are supported",
                    c.dims
                ))
            }
        })
        .collect()
}

/// Add/Sub/Mul/Div.
pub(super) fn binary(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let (a, b) = (node.required(0)?, node.required(1)?);
    let op = node.op();
    match (imp.is_const(a), imp.is_const(b)) {
        (true, true) => Ok(Value::Const(fold(op, &imp.constant(a)?, &imp.constant(b)?)?)),
        (false, false) if op == "Add" || op == "Sub" => residual(imp, node, a, b),
        (false, false) if op == "Mul" || op == "Div" => super::power::of_values(imp, node, a, b),
        (false, false) => unsupported(format!("{op} of two values computed from the network input")),
        (true, false) if op == "Div" => super::power::constant_over(imp, node, a, b),
        (false, true) => with_const(imp, node, a, b, true),
        (true, false) => with_const(imp, node, b, a, false),
    }
}

/// `a + b` (or `a − b = a + (−1)·b`, the negation being exact) for two
/// network values of the same size.
fn residual(imp: &mut Importer, node: &Node, a: &str, b: &str) -> OpResult<Value> {
    let (x, mut y) = (imp.dynamic(a)?, imp.dynamic(b)?);
    if node.op() == "Sub" {
        let channels = imp.net.node(y.id).shape.c;
        let op =
            Op::ChannelAffine { mul: vec![point(-1.0)?; channels], add: vec![point(0.0)?; channels], float_ops: 0 };
        y = Dyn::new(imp.push(node, ".neg", op, &[y.id])?, y.dims);
    }
    let dims = broadcast_dims(&x.dims, &y.dims)?;
    if numel(&dims) != numel(&x.dims) || numel(&dims) != numel(&y.dims) {
        return unsupported(format!(
            "Add broadcasting {:?} and {:?} (only equal shapes are supported)",
            x.dims, y.dims
        ));
    }
    let x = imp.view(node, &x, dims.clone())?;
    let y = imp.view(node, &y, dims.clone())?;
    let id = imp.push(node, "", Op::Add, &[x.id, y.id])?;
    Ok(Value::Dyn(Dyn::new(id, dims)))
}

/// `x ∘ c` (or `c ∘ x` when `!const_right`) with a constant `c`.
fn with_const(imp: &mut Importer, node: &Node, xn: &str, cn: &str, const_right: bool) -> OpResult<Value> {
    let op = node.op();
    let c = imp.weight(cn)?;
    if op == "Div" && !const_right {
        return unsupported("division by a value computed from the network input is not linear");
    }
    // A bias right after MatMul/Gemm: fold it into the pending Dense layer.
    if (op == "Add" || (op == "Sub" && const_right))
        && let Some(mut p) = imp.take_fusable(xn)
    {
        let dims = broadcast_dims(&p.dims, &c.dims).ok().filter(|d| numel(d) == p.out);
        if let Some(dims) = dims {
            let bias = c.broadcast_to(&dims)?;
            p.bias = if op == "Add" { bias } else { bias.into_iter().map(|v| -v).collect() };
            p.zero_bias = false;
            p.dims = dims;
            p.name = format!("{}+{}", p.name, node.name);
            return Ok(Value::Pending(p));
        }
        imp.restore_pending(xn, p);
    }
    // A constant the same everywhere commutes with a pending reordering,
    // which passes through.
    let x = imp.dynamic_reordered(xn)?;
    if x.index.is_some()
        && let Some(&v) = c.data.first()
        && c.data.iter().all(|&u| u == v)
        && broadcast_dims(&x.dims, &c.dims)? == x.dims
    {
        let (m, a) = affine_of(op, const_right, v)?;
        let channels = imp.net.node(x.id).shape.c;
        let id = imp.push(
            node,
            "",
            Op::ChannelAffine { mul: vec![m; channels], add: vec![a; channels], float_ops: 1 },
            &[x.id],
        )?;
        return Ok(Value::Dyn(Dyn { id, ..x }));
    }
    let x = imp.dynamic(xn)?;
    let dims = broadcast_dims(&x.dims, &c.dims)?;
    // The network value repeated to the result's shape first.
    let x = if numel(&dims) != numel(&x.dims) { super::broadcast::expanded(imp, node, xn, &dims)? } else { x };
    // Per channel when the constant is; else per element, as channels of a flat view.
    let flat = per_channel(&c, &dims).is_err();
    let vals = if flat { c.broadcast_to(&dims)? } else { per_channel(&c, &dims)? };
    let mut mul = Vec::with_capacity(vals.len());
    let mut add = Vec::with_capacity(vals.len());
    for &v in &vals {
        let (m, a) = affine_of(op, const_right, v)?;
        mul.push(m);
        add.push(a);
    }
    let x = imp.view(node, &x, dims.clone())?;
    let shape = imp.net.node(x.id).shape;
    let input =
        if flat { imp.net.reshape(format!("{}.flat", node.name), x.id, Shape::flat(vals.len()))? } else { x.id };
    let mut id = imp.push(node, "", Op::ChannelAffine { mul, add, float_ops: 1 }, &[input])?;
    if flat {
        id = imp.net.reshape(format!("{}.unflat", node.name), id, shape)?;
    }
    Ok(Value::Dyn(Dyn::new(id, dims)))
}

/// `x ∘ v` as `m·x + a` (`v ∘ x` when `!const_right`).
fn affine_of(op: &str, const_right: bool, v: f64) -> OpResult<(Interval<f64>, Interval<f64>)> {
    let one = point(1.0)?;
    Ok(match (op, const_right) {
        ("Add", _) => (one, point(v)?),
        ("Sub", true) => (one, point(-v)?),
        ("Sub", false) => (point(-1.0)?, point(v)?),
        ("Mul", _) => (point(v)?, point(0.0)?),
        _ => {
            if v == 0.0 {
                return Err("division by zero".into());
            }
            let inv =
                Interval::new(fp::div_down(1.0, v), fp::div_up(1.0, v)).map_err(|e| OpError::Msg(e.to_string()))?;
            (inv, point(0.0)?)
        }
    })
}

/// Roundings that [`batch_norm`] pays for, in any evaluation order: the
/// spec's `(x − mean)/sqrt(var + eps)·scale + B` (six) or the folded
/// `x·m̂ + (B − mean·m̂)` with `m̂ = fl(scale·fl(1/fl(sqrt(fl(var + eps)))))`
/// that onnxruntime computes (seven on the constant, three on `x·m̂`).
const BN_ROUNDINGS: usize = 8;

/// Inference-mode batch normalisation:
/// `y = (x − mean)/sqrt(var + eps)·scale + B = x·m + (B − mean·m)`.
///
/// A runtime rounds intermediates far larger than `|B − mean·m|` when the
/// statistics cancel (`mean·m̂` and `B`, or `x − mean`), so the constant is
/// widened by `γ_8·(|B| + |mean·m|)` in float32 before the layer's own
/// `γ_8·(|x·m| + |c|)`: the exact and every float32 evaluation lie inside.
pub(super) fn batch_norm(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    if node.int("training_mode", 0)? != 0 {
        return unsupported("training_mode=1");
    }
    if node.int("spatial", 1)? != 1 {
        return unsupported("spatial=0");
    }
    let xn = node.required(0)?;
    if imp.is_const(xn) {
        return unsupported("batch normalisation of a constant");
    }
    let x = imp.dynamic(xn)?;
    let c = match x.dims[..] {
        [1, c] | [1, c, _] | [1, c, _, _] => c,
        _ => return unsupported(format!("input dims {:?} (expected [1,C], [1,C,L] or [1,C,H,W])", x.dims)),
    };
    let mut params = Vec::with_capacity(4);
    for (k, what) in [(1, "scale"), (2, "B"), (3, "mean"), (4, "var")] {
        let name = node.required(k)?;
        if !imp.is_const(name) {
            return unsupported(format!("{what} must be a constant"));
        }
        let t = imp.weight(name)?;
        if t.data.len() != c {
            return Err(format!("{what} '{name}' has {} values, the input has {c} channels", t.data.len()).into());
        }
        params.push(t.data);
    }
    let eps = node.float("epsilon", 1e-5)? as f64;
    let (mut mul, mut add) = (Vec::with_capacity(c), Vec::with_capacity(c));
    let [scales, betas, means, vars] = &params[..] else { return Err("missing parameters".into()) };
    let rounding = polycert_interval::FloatModel::F32.error_bound(BN_ROUNDINGS);
    for (ch, (((&scale, &beta), &mean), &var)) in scales.iter().zip(betas).zip(means).zip(vars).enumerate() {
        let m = bn_scale(scale, var, eps).map_err(|e| OpError::Msg(format!("channel {ch}: {e}")))?;
        let shift = m.mul_scalar(mean);
        let err = rounding.of(fp::add_up(beta.abs(), shift.mag()));
        let a = point(beta)? - shift + Interval::new(-err, err).map_err(|e| OpError::Msg(e.to_string()))?;
        mul.push(m);
        add.push(a);
    }
    let op = Op::ChannelAffine { mul, add, float_ops: BN_ROUNDINGS as u32 };
    let id = imp.push(node, "", op, &[x.id])?;
    Ok(Value::Dyn(Dyn::new(id, x.dims)))
}

/// `scale / sqrt(var + eps)`, enclosed outward.
fn bn_scale(scale: f64, var: f64, eps: f64) -> Result<Interval<f64>, String> {
    let (vlo, vhi) = (fp::add_down(var, eps), fp::add_up(var, eps));
    if vlo.is_nan() || vlo <= 0.0 {
        return Err(format!("var + epsilon = {var} + {eps} is not positive"));
    }
    // sqrt is correctly rounded: one step outward encloses the exact root.
    let (slo, shi) = (vlo.sqrt().next_down(), vhi.sqrt().next_up());
    if slo.is_nan() || slo <= 0.0 || !shi.is_finite() {
        return Err("sqrt(var + epsilon) out of range".into());
    }
    let (lo, hi) = if scale >= 0.0 {
        (fp::div_down(scale, shi), fp::div_up(scale, slo))
    } else {
        (fp::div_down(scale, slo), fp::div_up(scale, shi))
    };
    Interval::new(lo, hi).map_err(|e| e.to_string())
}

pub(super) fn relu(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let xn = node.required(0)?;
    if imp.is_const(xn) {
        let mut t = imp.constant(xn)?;
        t.data.iter_mut().for_each(|v| *v = v.max(0.0));
        return Ok(Value::Const(t));
    }
    // Element-wise: a pending index map passes through.
    let x = imp.dynamic_reordered(xn)?;
    let id = imp.push(node, "", Op::Relu, &[x.id])?;
    Ok(Value::Dyn(Dyn { id, ..x }))
}

pub(super) fn neg(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let xn = node.required(0)?;
    if imp.is_const(xn) {
        let mut t = imp.constant(xn)?;
        t.data.iter_mut().for_each(|v| *v = -*v);
        return Ok(Value::Const(t));
    }
    let x = imp.dynamic(xn)?;
    let channels = imp.net.node(x.id).shape.c;
    let op = Op::ChannelAffine { mul: vec![point(-1.0)?; channels], add: vec![point(0.0)?; channels], float_ops: 0 };
    let id = imp.push(node, "", op, &[x.id])?;
    Ok(Value::Dyn(Dyn::new(id, x.dims)))
}
