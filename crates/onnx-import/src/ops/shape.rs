//! Data-movement and constant ops: Flatten, Reshape, Transpose, (Un)Squeeze,
//! Concat, Shape, Gather, Slice, Cast, Constant, Identity, Dropout.
//!
//! On constants these are folded (this is how `Shape → Gather → Concat →
//! Reshape` chains that compute a constant shape disappear). On network
//! values only those that keep the row-major data order are supported: they
//! become IR reshapes (or nothing, when the IR shape does not change).

use crate::graph::{Dyn, Importer, Node, OpResult, Value, ir_shape, unsupported};
use crate::tensor::{Kind, Tensor, check_perm, decode, norm_axis, numel};
use polycert_deeppoly::Op;

/// An input that is either folded or computed from the network input.
enum In {
    C(Tensor),
    D(Dyn),
}

impl In {
    fn dims(&self) -> &[usize] {
        match self {
            In::C(t) => &t.dims,
            In::D(d) => &d.dims,
        }
    }
}

fn get(imp: &mut Importer, name: &str) -> OpResult<In> {
    if imp.is_const(name) { Ok(In::C(imp.constant(name)?)) } else { Ok(In::D(imp.dynamic(name)?)) }
}

/// The same data under new dims.
fn view(imp: &mut Importer, node: &Node, x: In, dims: Vec<usize>) -> OpResult<Value> {
    match x {
        In::C(t) => Ok(Value::Const(t.reshaped(dims)?)),
        In::D(d) => Ok(Value::Dyn(imp.view(node, &d, dims)?)),
    }
}

/// An integer list from a constant input or, failing that, an attribute.
fn ints_input_or_attr(imp: &Importer, node: &Node, k: usize, attr: &str) -> OpResult<Option<Vec<i64>>> {
    match node.input(k) {
        Some(n) if imp.is_const(n) => Ok(Some(imp.constant(n)?.as_i64()?)),
        Some(n) => unsupported(format!("input '{n}' ({attr}) must be a constant")),
        None => node.ints(attr),
    }
}

pub(super) fn flatten(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let x = get(imp, node.required(0)?)?;
    let r = x.dims().len() as i64;
    let axis = node.int("axis", 1)?;
    let a = if axis < 0 { axis + r } else { axis };
    if !(0..=r).contains(&a) {
        return Err(format!("axis {axis} out of range for rank {r}").into());
    }
    let (lead, rest) = x.dims().split_at(a as usize);
    let dims = vec![numel(lead), numel(rest)];
    view(imp, node, x, dims)
}

pub(super) fn reshape(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let x = get(imp, node.required(0)?)?;
    let Some(shape) = ints_input_or_attr(imp, node, 1, "shape")? else {
        return Err("no target shape (input 1 or attribute 'shape')".into());
    };
    let allow_zero = node.int("allowzero", 0)? != 0;
    let from = x.dims().to_vec();
    let mut dims = Vec::with_capacity(shape.len());
    let mut infer = None;
    for (i, &s) in shape.iter().enumerate() {
        dims.push(match s {
            0 if !allow_zero => {
                *from.get(i).ok_or_else(|| format!("shape {shape:?}: no dimension {i} to copy in {from:?}"))?
            }
            -1 if infer.is_none() => {
                infer = Some(i);
                1
            }
            s if s >= 0 => s as usize,
            _ => return Err(format!("invalid target shape {shape:?}").into()),
        });
    }
    if let Some(i) = infer {
        let known = numel(&dims);
        if known == 0 || !numel(&from).is_multiple_of(known) {
            return Err(format!("cannot reshape {from:?} to {shape:?}").into());
        }
        dims[i] = numel(&from) / known;
    }
    if numel(&dims) != numel(&from) {
        return Err(format!("cannot reshape {from:?} ({} values) to {dims:?}", numel(&from)).into());
    }
    view(imp, node, x, dims)
}

pub(super) fn transpose(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let xn = node.required(0)?;
    let x = get(imp, xn)?;
    let rank = x.dims().len();
    let perm: Vec<usize> = match node.ints("perm")? {
        Some(p) => p.iter().map(|&a| norm_axis(a, rank)).collect::<Result<_, _>>()?,
        None => (0..rank).rev().collect(),
    };
    check_perm(&perm, rank)?;
    match x {
        In::C(t) => Ok(Value::Const(t.transpose(&perm)?)),
        // The graph input was declared NCHW to the IR already.
        In::D(d) if imp.nhwc_input == Some(xn) => Ok(Value::Dyn(d)),
        In::D(d) => {
            let moved: Vec<usize> = perm.iter().copied().filter(|&p| d.dims[p] != 1).collect();
            if moved.windows(2).any(|w| w[0] > w[1]) {
                return unsupported(format!(
                    "Transpose with perm {perm:?} of dims {:?} reorders the data; only transposes that keep the data order, \
                     or NHWC→NCHW applied directly to the graph input, are supported",
                    d.dims
                ));
            }
            let dims = perm.iter().map(|&p| d.dims[p]).collect();
            Ok(Value::Dyn(imp.view(node, &d, dims)?))
        }
    }
}

/// Unsqueeze and Squeeze (axes from the attribute or, from opset 13, input 1).
pub(super) fn squeeze(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let x = get(imp, node.required(0)?)?;
    let axes = ints_input_or_attr(imp, node, 1, "axes")?;
    let from = x.dims().to_vec();
    let dims = if node.op() == "Unsqueeze" {
        let axes = axes.ok_or("no axes")?;
        let rank = from.len() + axes.len();
        let mut pos: Vec<usize> = axes.iter().map(|&a| norm_axis(a, rank)).collect::<Result<_, _>>()?;
        pos.sort_unstable();
        if pos.windows(2).any(|w| w[0] == w[1]) {
            return Err(format!("repeated axes {axes:?}").into());
        }
        let mut rest = from.iter();
        (0..rank).map(|i| if pos.contains(&i) { 1 } else { rest.next().copied().unwrap_or(1) }).collect()
    } else {
        match axes {
            None => from.iter().copied().filter(|&d| d != 1).collect(),
            Some(axes) => {
                let pos: Vec<usize> = axes.iter().map(|&a| norm_axis(a, from.len())).collect::<Result<_, _>>()?;
                if let Some(&p) = pos.iter().find(|&&p| from[p] != 1) {
                    return Err(format!("cannot squeeze axis {p} of size {} in {from:?}", from[p]).into());
                }
                from.iter().enumerate().filter(|(i, _)| !pos.contains(i)).map(|(_, &d)| d).collect()
            }
        }
    };
    view(imp, node, x, dims)
}

pub(super) fn concat(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let names = node.inputs();
    let axis = node.int("axis", i64::MIN)?;
    if axis == i64::MIN {
        return Err("missing attribute 'axis'".into());
    }
    if names.iter().all(|n| imp.is_const(n)) {
        let parts = names.iter().map(|n| imp.constant(n)).collect::<OpResult<Vec<_>>>()?;
        let rank = parts.first().map_or(0, |p| p.dims.len());
        return Ok(Value::Const(Tensor::concat(&parts, norm_axis(axis, rank)?)?));
    }
    if names.iter().any(|n| imp.is_const(n)) {
        return unsupported("Concat of constants with values computed from the network input");
    }
    let parts = names.iter().map(|n| imp.dynamic(n)).collect::<OpResult<Vec<_>>>()?;
    let first = parts[0].dims.clone();
    let a = norm_axis(axis, first.len())?;
    for p in &parts {
        let same = p.dims.len() == first.len() && (0..first.len()).all(|k| k == a || p.dims[k] == first[k]);
        if !same {
            return Err(format!("cannot concatenate {first:?} with {:?} on axis {a}", p.dims).into());
        }
    }
    let mut dims = first.clone();
    dims[a] = parts.iter().map(|p| p.dims[a]).sum();
    if numel(&first[..a]) != 1 {
        return unsupported(format!(
            "Concat on axis {a} of {first:?} interleaves the inputs (only channel concatenation is supported)"
        ));
    }
    // Channel concatenation in the IR when the spatial sizes agree,
    // otherwise a concatenation of the flattened inputs.
    let channel = a == 1 && first.len() <= 4 && first[0] == 1;
    let mut ids = Vec::with_capacity(parts.len());
    for p in &parts {
        let v = if channel { p.clone() } else { imp.view(node, p, vec![numel(&p.dims)])? };
        ids.push(v.id);
    }
    let id = imp.push(node, "", Op::Concat, &ids)?;
    let out = Dyn { id, dims: if channel { dims.clone() } else { vec![numel(&dims)] } };
    if imp.net.node(id).shape == ir_shape(&out.dims) {
        Ok(Value::Dyn(imp.view(node, &out, dims)?))
    } else {
        Err(format!("internal: concatenated shape {} does not match {dims:?}", imp.net.node(id).shape).into())
    }
}

pub(super) fn shape(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let x = get(imp, node.required(0)?)?;
    let dims: Vec<i64> = x.dims().iter().map(|&d| d as i64).collect();
    let r = dims.len() as i64;
    let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let start = clamp(node.int("start", 0)?);
    let end = clamp(node.int("end", r)?);
    Ok(Value::Const(Tensor::ints(&dims[start..end.max(start)])))
}

pub(super) fn gather(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let (d, i) = (node.required(0)?, node.required(1)?);
    if !imp.is_const(d) || !imp.is_const(i) {
        return unsupported("Gather is only supported on constants (shape computations)");
    }
    let data = imp.constant(d)?;
    let axis = norm_axis(node.int("axis", 0)?, data.dims.len())?;
    Ok(Value::Const(data.gather(&imp.constant(i)?, axis)?))
}

pub(super) fn slice(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let xn = node.required(0)?;
    if !imp.is_const(xn) {
        return unsupported("Slice is only supported on constants (shape computations)");
    }
    let mut t = imp.constant(xn)?;
    let starts = ints_input_or_attr(imp, node, 1, "starts")?.ok_or("no starts")?;
    let ends = ints_input_or_attr(imp, node, 2, "ends")?.ok_or("no ends")?;
    let rank = t.dims.len();
    let axes = ints_input_or_attr(imp, node, 3, "axes")?.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = match node.input(4) {
        Some(n) => imp.constant(n)?.as_i64()?,
        None => vec![1; starts.len()],
    };
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err("starts, ends, axes and steps differ in length".into());
    }
    for k in 0..starts.len() {
        let axis = norm_axis(axes[k], rank)?;
        let (dim, step) = (t.dims[axis] as i64, steps[k]);
        if step == 0 {
            return Err("slice step 0".into());
        }
        let fix = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
        let (lo_s, hi_s, lo_e, hi_e) = if step > 0 { (0, dim, 0, dim) } else { (0, dim - 1, -1, dim - 1) };
        let (mut i, end) = (fix(starts[k]).clamp(lo_s, hi_s.max(lo_s)), fix(ends[k]).clamp(lo_e, hi_e.max(lo_e)));
        let mut idx = Vec::new();
        while (step > 0 && i < end) || (step < 0 && i > end) {
            idx.push(i);
            i += step;
        }
        t = t.gather(&Tensor::ints(&idx), axis)?;
    }
    Ok(Value::Const(t))
}

pub(super) fn cast(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let xn = node.required(0)?;
    let to = node.int("to", 0)?;
    let float = matches!(to, 1 | 10 | 11 | 16);
    if !imp.is_const(xn) {
        return if to == 1 {
            Ok(Value::Dyn(imp.dynamic(xn)?))
        } else {
            unsupported(format!("Cast of a network value to data type {to} (only float32 is supported)"))
        };
    }
    let mut t = imp.constant(xn)?;
    if !float {
        let bool_ = to == 9;
        t.data.iter_mut().for_each(|v| *v = if bool_ { (*v != 0.0) as u8 as f64 } else { v.trunc() });
    }
    t.kind = if float { Kind::Float } else { Kind::Int };
    Ok(Value::Const(t))
}

pub(super) fn constant(_imp: &mut Importer, node: &Node) -> OpResult<Value> {
    if let Some(t) = node.tensor("value")? {
        return Ok(Value::Const(decode(t)?));
    }
    if node.attr("value_float").is_some() {
        return Ok(Value::Const(Tensor::scalar(node.float("value_float", 0.0)? as f64, Kind::Float)));
    }
    if let Some(v) = node.floats("value_floats")? {
        return Ok(Value::Const(Tensor::new(vec![v.len()], v.iter().map(|&x| x as f64).collect(), Kind::Float)?));
    }
    if node.attr("value_int").is_some() {
        return Ok(Value::Const(Tensor::scalar(node.int("value_int", 0)? as f64, Kind::Int)));
    }
    if let Some(v) = node.ints("value_ints")? {
        return Ok(Value::Const(Tensor::ints(&v)));
    }
    let what = node.proto.attribute.first().map_or("no value", |a| a.name.as_str());
    unsupported(format!("Constant with {what} (only numeric dense tensors are supported)"))
}

/// Identity and inference-mode Dropout (its mask output is not produced).
pub(super) fn identity(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    if node.op() == "Dropout"
        && let Some(m) = node.input(2)
    {
        let training = imp.is_const(m) && imp.constant(m)?.data.iter().any(|&v| v != 0.0);
        if training || !imp.is_const(m) {
            return unsupported("Dropout in training mode");
        }
    }
    match get(imp, node.required(0)?)? {
        In::C(t) => Ok(Value::Const(t)),
        In::D(d) => Ok(Value::Dyn(d)),
    }
}
