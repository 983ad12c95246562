//! Data-movement and constant ops: Flatten, Reshape, Transpose, (Un)Squeeze,
//! Concat, Shape, Gather, Slice, Split, Cast, Constant, Identity, Dropout.
//!
//! On constants these are folded (this is how `Shape → Gather → Concat →
//! Reshape` chains that compute a constant shape disappear). On network
//! values, reshapes become IR reshapes (or nothing, when the IR shape does
//! not change); Transpose, Slice, Gather and Split that move data become
//! pending index maps (`Dyn::index`), which MatMul/Gemm fold into their
//! weights and Relu and reshapes pass on; other consumers get them lowered
//! as an exact 0/1 Dense layer.

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
    if imp.is_const(name) { Ok(In::C(imp.constant(name)?)) } else { Ok(In::D(imp.dynamic_reordered(name)?)) }
}

/// The same data under new dims.
fn view(imp: &mut Importer, node: &Node, x: In, dims: Vec<usize>) -> OpResult<Value> {
    match x {
        In::C(t) => Ok(Value::Const(t.reshaped(dims)?)),
        In::D(d) => Ok(Value::Dyn(imp.view(node, &d, dims)?)),
    }
}

/// An integer list from a constant input or, failing that, an attribute.
pub(super) fn ints_input_or_attr(imp: &Importer, node: &Node, k: usize, attr: &str) -> OpResult<Option<Vec<i64>>> {
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
            if d.index.is_none() && moved.is_sorted() {
                let dims = perm.iter().map(|&p| d.dims[p]).collect();
                return Ok(Value::Dyn(imp.view(node, &d, dims)?));
            }
            index_map(imp, node, d, |t| t.transpose(&perm)).map(Value::Dyn)
        }
    }
}

/// Applies a data-movement op `f` (Transpose, Slice, Gather) to a network
/// value by applying it to the value's index map (indices are exact in f64):
/// the result stays a pending index map unless it is the identity.
fn index_map(
    imp: &mut Importer,
    node: &Node,
    d: Dyn,
    f: impl FnOnce(Tensor) -> Result<Tensor, String>,
) -> OpResult<Dyn> {
    let at: Vec<f64> = match &d.index {
        Some(p) => p.iter().map(|&i| i as f64).collect(),
        None => (0..numel(&d.dims)).map(|i| i as f64).collect(),
    };
    let moved = f(Tensor::new(d.dims.clone(), at, Kind::Int)?)?;
    let index: Vec<usize> = moved.data.iter().map(|&i| i as usize).collect();
    let n = imp.net.node(d.id).shape.numel();
    let mut seen = vec![false; n];
    if index.iter().any(|&i| std::mem::replace(&mut seen[i], true)) {
        // An element read twice: lowered at once as its 0/1 copy layer (the
        // consumers that absorb an index map read each element once).
        return imp.reorder(&node.name, Dyn { id: d.id, dims: moved.dims, index: Some(index.into()) });
    }
    if index.len() == n && index.iter().enumerate().all(|(i, &j)| i == j) {
        return imp.view(node, &Dyn::new(d.id, d.dims), moved.dims);
    }
    Ok(Dyn { id: d.id, dims: moved.dims, index: Some(index.into()) })
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
        return super::broadcast::concat_with_constants(imp, node, axis);
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
    let out = Dyn::new(id, if channel { dims.clone() } else { vec![numel(&dims)] });
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

/// Gather with constant indices: folded on constants, an index map on
/// network values (each element taken at most once).
pub(super) fn gather(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let (d, i) = (node.required(0)?, node.required(1)?);
    if !imp.is_const(i) {
        return unsupported("Gather with indices computed from the network input");
    }
    let indices = imp.constant(i)?;
    match get(imp, d)? {
        In::C(data) => {
            let axis = norm_axis(node.int("axis", 0)?, data.dims.len())?;
            Ok(Value::Const(data.gather(&indices, axis)?))
        }
        In::D(x) => {
            let axis = norm_axis(node.int("axis", 0)?, x.dims.len())?;
            index_map(imp, node, x, |t| t.gather(&indices, axis)).map(Value::Dyn)
        }
    }
}

/// `starts`, `ends`, `axes`, `steps` of a Slice (inputs from opset 10, attributes before).
struct SliceArgs {
    starts: Vec<i64>,
    ends: Vec<i64>,
    axes: Option<Vec<i64>>,
    steps: Vec<i64>,
}

fn slice_args(imp: &Importer, node: &Node) -> OpResult<SliceArgs> {
    let starts = ints_input_or_attr(imp, node, 1, "starts")?.ok_or("no starts")?;
    let ends = ints_input_or_attr(imp, node, 2, "ends")?.ok_or("no ends")?;
    let axes = ints_input_or_attr(imp, node, 3, "axes")?;
    let steps = match node.input(4) {
        Some(n) if imp.is_const(n) => imp.constant(n)?.as_i64()?,
        Some(n) => return unsupported(format!("input '{n}' (steps) must be a constant")),
        None => vec![1; starts.len()],
    };
    if ends.len() != starts.len()
        || axes.as_ref().is_some_and(|a| a.len() != starts.len())
        || steps.len() != starts.len()
    {
        return Err("starts, ends, axes and steps differ in length".into());
    }
    Ok(SliceArgs { starts, ends, axes, steps })
}

/// ONNX Slice semantics (negative and out-of-range bounds clamped).
fn slice_tensor(mut t: Tensor, a: &SliceArgs) -> Result<Tensor, String> {
    let rank = t.dims.len();
    for k in 0..a.starts.len() {
        let axis = norm_axis(a.axes.as_ref().map_or(k as i64, |x| x[k]), rank)?;
        let (dim, step) = (t.dims[axis] as i64, a.steps[k]);
        if step == 0 {
            return Err("slice step 0".into());
        }
        let fix = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
        let (lo_s, hi_s, lo_e, hi_e) = if step > 0 { (0, dim, 0, dim) } else { (0, dim - 1, -1, dim - 1) };
        let (mut i, end) = (fix(a.starts[k]).clamp(lo_s, hi_s.max(lo_s)), fix(a.ends[k]).clamp(lo_e, hi_e.max(lo_e)));
        let mut idx = Vec::new();
        while (step > 0 && i < end) || (step < 0 && i > end) {
            idx.push(i);
            i += step;
        }
        t = t.gather(&Tensor::ints(&idx), axis)?;
    }
    Ok(t)
}

pub(super) fn slice(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let args = slice_args(imp, node)?;
    match get(imp, node.required(0)?)? {
        In::C(t) => Ok(Value::Const(slice_tensor(t, &args)?)),
        In::D(x) => index_map(imp, node, x, |t| slice_tensor(t, &args)).map(Value::Dyn),
    }
}

/// Split into pieces along an axis (sizes from input 1, the `split`
/// attribute, or equal parts): one index map per output.
pub(super) fn split(imp: &mut Importer, node: &Node) -> OpResult<Vec<Value>> {
    let x = get(imp, node.required(0)?)?;
    let rank = x.dims().len();
    let axis = norm_axis(node.int("axis", 0)?, rank)?;
    let dim = x.dims()[axis];
    let outs = node.proto.output.len();
    let sizes: Vec<usize> = match ints_input_or_attr(imp, node, 1, "split")? {
        Some(s) => s
            .iter()
            .map(|&v| usize::try_from(v).map_err(|_| format!("negative split size {v}")))
            .collect::<Result<_, _>>()?,
        None => {
            let parts = match node.int("num_outputs", 0)? {
                0 => outs,
                n => n as usize,
            };
            if parts == 0 {
                return Err("Split has no outputs".into());
            }
            let size = dim.div_ceil(parts);
            (0..parts).map(|k| size.min(dim.saturating_sub(k * size))).collect()
        }
    };
    if sizes.iter().sum::<usize>() != dim || sizes.len() != outs {
        return Err(format!("split sizes {sizes:?} do not cover axis {axis} of size {dim} in {outs} outputs").into());
    }
    let mut start = 0;
    let mut values = Vec::with_capacity(outs);
    for &len in &sizes {
        let args = SliceArgs {
            starts: vec![start as i64],
            ends: vec![(start + len) as i64],
            axes: Some(vec![axis as i64]),
            steps: vec![1],
        };
        start += len;
        values.push(match &x {
            In::C(t) => Value::Const(slice_tensor(t.clone(), &args)?),
            In::D(d) => Value::Dyn(index_map(imp, node, d.clone(), |t| slice_tensor(t, &args))?),
        });
    }
    Ok(values)
}

pub(super) fn cast(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let xn = node.required(0)?;
    let to = node.int("to", 0)?;
    let float = matches!(to, 1 | 10 | 11 | 16);
    if !imp.is_const(xn) {
        return super::step::cast(imp, node, xn, to);
    }
    if matches!(to, 10 | 16) {
        return unsupported("Cast of a constant to float16 or bfloat16 (constants are folded in float32 or float64)");
    }
    let mut t = imp.constant(xn)?;
    if !float {
        let bool_ = to == 9;
        t.data.iter_mut().for_each(|v| *v = if bool_ { (*v != 0.0) as u8 as f64 } else { v.trunc() });
    }
    t.kind = match to {
        1 => Kind::Float32,
        11 => Kind::Float,
        _ => Kind::Int,
    };
    t.data.iter_mut().for_each(|v| *v = t.kind.round(*v));
    Ok(Value::Const(t))
}

pub(super) fn constant(_imp: &mut Importer, node: &Node) -> OpResult<Value> {
    if let Some(t) = node.tensor("value")? {
        return Ok(Value::Const(decode(t)?));
    }
    if node.attr("value_float").is_some() {
        return Ok(Value::Const(Tensor::scalar(node.float("value_float", 0.0)? as f64, Kind::Float32)));
    }
    if let Some(v) = node.floats("value_floats")? {
        return Ok(Value::Const(Tensor::new(vec![v.len()], v.iter().map(|&x| x as f64).collect(), Kind::Float32)?));
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
