//! The import driver: picks the graph's input and output, keeps the nodes
//! the output depends on, and walks them in order, keeping for every ONNX
//! value either a folded constant or the IR node that computes it.

use crate::onnx_pb::{
    AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto, ValueInfoProto, attribute_proto::AttributeType,
    tensor_shape_proto::dimension, type_proto,
};
use crate::tensor::{Tensor, decode, numel};
use crate::{ImportError, Imported, OPSETS, ops};
use polycert_deeppoly::{IrError, Network, NodeId, Op, Shape};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A failure inside one node, before the file and node names are added.
#[derive(Debug)]
pub(crate) enum OpError {
    Msg(String),
    Unsupported(String),
    Ir(IrError),
}

impl From<String> for OpError {
    fn from(s: String) -> Self {
        OpError::Msg(s)
    }
}
impl From<&str> for OpError {
    fn from(s: &str) -> Self {
        OpError::Msg(s.to_string())
    }
}
impl From<IrError> for OpError {
    fn from(e: IrError) -> Self {
        OpError::Ir(e)
    }
}

pub(crate) type OpResult<T> = Result<T, OpError>;

/// Shorthand for an "unsupported" failure.
pub(crate) fn unsupported<T>(msg: impl Into<String>) -> OpResult<T> {
    Err(OpError::Unsupported(msg.into()))
}

/// A value computed from the network input: its IR node and its ONNX dims
/// (batch included). Without `index`, the node's IR shape is `ir_shape(dims)`.
/// With `index` (a data-reordering Transpose, or a Slice/Gather/Split, not
/// lowered yet), element `i` of the ONNX value in row-major order is element
/// `index[i]` of the node, and no two elements share a node element; only
/// [`Importer::dynamic_reordered`] hands such values out.
#[derive(Debug, Clone)]
pub(crate) struct Dyn {
    pub id: NodeId,
    pub dims: Vec<usize>,
    pub index: Option<Arc<[usize]>>,
}

impl Dyn {
    pub fn new(id: NodeId, dims: Vec<usize>) -> Self {
        Self { id, dims, index: None }
    }
}

/// Largest reordering lowered as its own 0/1 Dense layer when no consumer
/// can absorb it (the layer has `n²` weights).
const MAX_REORDER: usize = 4096;

/// A MatMul/Gemm not pushed yet, so that a following Add of a constant can
/// become its bias.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub name: String,
    pub input: NodeId,
    pub weight: Vec<f64>,
    pub bias: Vec<f64>,
    pub out: usize,
    pub dims: Vec<usize>,
    /// Whether the bias is still all zero (only then can an Add be fused
    /// exactly).
    pub zero_bias: bool,
}

impl Pending {
    /// The pending layer `y = W·x + b` of `node` over IR node `input`
    /// (`weight` row-major `[b.len()][in]`), with the ONNX dims of `y`.
    pub fn value(node: &Node, input: NodeId, weight: Vec<f64>, bias: Vec<f64>, dims: Vec<usize>) -> Value {
        let zero_bias = bias.iter().all(|&v| v == 0.0);
        let out = bias.len();
        Value::Pending(Box::new(Pending { name: node.name.clone(), input, weight, bias, out, dims, zero_bias }))
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Value {
    Const(Tensor),
    Dyn(Dyn),
    Pending(Box<Pending>),
}

/// The IR shape of ONNX dims: `[1,C]` → `C`, `[1,C,L]` → `C×1×L`,
/// `[1,C,H,W]` → `C×H×W`, anything else flat. The data layout (row-major =
/// C·H·W order) is the same in all cases.
pub(crate) fn ir_shape(dims: &[usize]) -> Shape {
    match *dims {
        [1, c] => Shape::flat(c),
        [1, c, l] => Shape::new(c, 1, l),
        [1, c, h, w] => Shape::new(c, h, w),
        _ => Shape::flat(numel(dims)),
    }
}

/// An ONNX node with a printable name.
pub(crate) struct Node<'a> {
    pub proto: &'a NodeProto,
    pub name: String,
}

impl<'a> Node<'a> {
    pub fn op(&self) -> &'a str {
        &self.proto.op_type
    }

    /// Name of input `k`, `None` when absent or empty (optional input).
    pub fn input(&self, k: usize) -> Option<&'a str> {
        self.proto.input.get(k).map(String::as_str).filter(|s| !s.is_empty())
    }

    pub fn required(&self, k: usize) -> OpResult<&'a str> {
        self.input(k).ok_or_else(|| OpError::Msg(format!("missing input {k}")))
    }

    /// Names of the present inputs.
    pub fn inputs(&self) -> Vec<&'a str> {
        self.proto.input.iter().map(String::as_str).filter(|s| !s.is_empty()).collect()
    }

    pub fn attr(&self, name: &str) -> Option<&'a AttributeProto> {
        self.proto.attribute.iter().find(|a| a.name == name)
    }

    fn typed(&self, name: &str, want: AttributeType) -> OpResult<Option<&'a AttributeProto>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) if !a.ref_attr_name.is_empty() => {
                Err(format!("attribute '{name}' refers to a function attribute, which is not supported").into())
            }
            Some(a) if a.r#type == want as i32 || a.r#type == AttributeType::Undefined as i32 => Ok(Some(a)),
            Some(a) => {
                let got = AttributeType::try_from(a.r#type).map(|t| t.as_str_name()).unwrap_or("unknown");
                Err(format!("attribute '{name}' has type {got}, expected {}", want.as_str_name()).into())
            }
        }
    }

    pub fn int(&self, name: &str, default: i64) -> OpResult<i64> {
        Ok(self.typed(name, AttributeType::Int)?.map_or(default, |a| a.i))
    }

    pub fn float(&self, name: &str, default: f32) -> OpResult<f32> {
        Ok(self.typed(name, AttributeType::Float)?.map_or(default, |a| a.f))
    }

    pub fn ints(&self, name: &str) -> OpResult<Option<Vec<i64>>> {
        Ok(self.typed(name, AttributeType::Ints)?.map(|a| a.ints.clone()))
    }

    pub fn floats(&self, name: &str) -> OpResult<Option<Vec<f32>>> {
        Ok(self.typed(name, AttributeType::Floats)?.map(|a| a.floats.clone()))
    }

    pub fn string(&self, name: &str) -> OpResult<Option<String>> {
        Ok(self.typed(name, AttributeType::String)?.map(|a| String::from_utf8_lossy(&a.s).into_owned()))
    }

    pub fn tensor(&self, name: &str) -> OpResult<Option<&'a TensorProto>> {
        Ok(self.typed(name, AttributeType::Tensor)?.and_then(|a| a.t.as_ref()))
    }

    /// Non-negative ints attribute (kernel sizes, strides, pads).
    pub fn sizes(&self, name: &str) -> OpResult<Option<Vec<usize>>> {
        match self.ints(name)? {
            None => Ok(None),
            Some(v) => v
                .iter()
                .map(|&x| match usize::try_from(x) {
                    Ok(v) if v <= MAX_SIZE => Ok(v),
                    _ => Err(OpError::Msg(format!("attribute '{name}' has out-of-range value {x}"))),
                })
                .collect::<OpResult<Vec<_>>>()
                .map(Some),
        }
    }
}

/// Largest kernel size, stride or pad accepted (keeps shape arithmetic far
/// from overflow).
const MAX_SIZE: usize = 1 << 24;

/// Largest number of values of the network input.
const MAX_INPUT: usize = 1 << 31;

/// State of one import.
pub(crate) struct Importer<'a> {
    pub net: Network,
    inits: HashMap<&'a str, &'a TensorProto>,
    values: HashMap<String, Value>,
    uses: HashMap<&'a str, usize>,
    /// The graph input, when its only consumer transposes it NHWC → NCHW.
    pub nhwc_input: Option<&'a str>,
    /// The graph output's name.
    pub output: &'a str,
    /// The opset (some ops' defaults depend on it).
    pub opset: i64,
    /// Values of the network that hold integers (after a Cast to one).
    ints: HashSet<String>,
}

impl<'a> Importer<'a> {
    /// Whether `name` is a network value of an integer type.
    pub fn is_integer(&self, name: &str) -> bool {
        self.ints.contains(name)
    }

    /// Records `node`'s outputs as integers where `f` makes integers.
    pub fn mark_integer(&mut self, node: &Node, f: &polycert_deeppoly::Elementwise) {
        if matches!(f, polycert_deeppoly::Elementwise::Trunc { .. }) {
            self.mark_outputs_integer(node);
        }
    }

    /// Records every output of `node` as an integer value.
    pub fn mark_outputs_integer(&mut self, node: &Node) {
        self.ints.extend(node.proto.output.iter().filter(|o| !o.is_empty()).cloned());
    }

    pub fn is_const(&self, name: &str) -> bool {
        matches!(self.values.get(name), Some(Value::Const(_)))
            || (!self.values.contains_key(name) && self.inits.contains_key(name))
    }

    /// A constant input (initializer or folded value).
    pub fn constant(&self, name: &str) -> OpResult<Tensor> {
        match self.values.get(name) {
            Some(Value::Const(t)) => Ok(t.clone()),
            Some(_) => unsupported(format!(
                "input '{name}' is computed from the network input, but this operator needs it to be a constant"
            )),
            None => match self.inits.get(name) {
                Some(t) => Ok(decode(t)?),
                None => Err(unknown(name)),
            },
        }
    }

    /// A constant float weight, checked finite.
    pub fn weight(&self, name: &str) -> OpResult<Tensor> {
        let t = self.constant(name)?;
        t.check_finite(&format!("weight '{name}'"))?;
        Ok(t)
    }

    /// An input computed from the network input, in ONNX data order
    /// (pushing a pending layer, lowering a pending reordering).
    pub fn dynamic(&mut self, name: &str) -> OpResult<Dyn> {
        let d = self.dynamic_reordered(name)?;
        if d.index.is_none() {
            return Ok(d);
        }
        let d = self.reorder(name, d)?;
        self.values.insert(name.to_string(), Value::Dyn(d.clone()));
        Ok(d)
    }

    /// Lowers a pending index map as a Dense layer with one 1 per row: its
    /// inference is exact (one product by 1, the rest by 0) in any order.
    fn reorder(&mut self, name: &str, d: Dyn) -> OpResult<Dyn> {
        let Some(index) = d.index else { return Ok(d) };
        let (n, k) = (index.len(), self.net.node(d.id).shape.numel());
        if n.max(k) > MAX_REORDER {
            return unsupported(format!(
                "'{name}' reorders or selects {n} of {k} values (Transpose, Slice, Gather, Split) and its consumer \
                 cannot absorb that (MatMul, Gemm, Relu, reshapes and Transpose can); a separate index layer is \
                 limited to {MAX_REORDER} values"
            ));
        }
        let mut weight = vec![0.0; n * k];
        for (i, &j) in index.iter().enumerate() {
            weight[i * k + j] = 1.0;
        }
        let mut id =
            self.net.push(format!("{name}.index"), Op::Dense { weight, bias: vec![0.0; n], out: n }, &[d.id])?;
        let want = ir_shape(&d.dims);
        if self.net.node(id).shape != want {
            id = self.net.reshape(format!("{name}.index.reshape"), id, want)?;
        }
        Ok(Dyn::new(id, d.dims))
    }

    /// Like [`Importer::dynamic`], but a pending reordering stays pending
    /// (for the consumers that absorb it: see [`Dyn::index`]).
    pub fn dynamic_reordered(&mut self, name: &str) -> OpResult<Dyn> {
        match self.values.get(name) {
            Some(Value::Dyn(d)) => Ok(d.clone()),
            Some(Value::Pending(_)) => {
                let Some(Value::Pending(p)) = self.values.remove(name) else { unreachable!() };
                let mut id = self.net.push(
                    p.name.clone(),
                    Op::Dense { weight: p.weight, bias: p.bias, out: p.out },
                    &[p.input],
                )?;
                let want = ir_shape(&p.dims);
                if self.net.node(id).shape != want {
                    id = self.net.reshape(format!("{}.reshape", p.name), id, want)?;
                }
                let d = Dyn::new(id, p.dims);
                self.values.insert(name.to_string(), Value::Dyn(d.clone()));
                Ok(d)
            }
            Some(Value::Const(_)) => {
                unsupported(format!("input '{name}' is a constant where a network value is expected"))
            }
            None if self.inits.contains_key(name) => {
                unsupported(format!("input '{name}' is an initializer where a network value is expected"))
            }
            None => Err(unknown(name)),
        }
    }

    /// Takes a pending MatMul/Gemm whose only consumer is the caller and
    /// whose bias is still zero, so that the caller can set its bias.
    pub fn take_fusable(&mut self, name: &str) -> Option<Box<Pending>> {
        let ok = matches!(self.values.get(name), Some(Value::Pending(p)) if p.zero_bias)
            && self.uses.get(name).copied() == Some(1);
        match ok.then(|| self.values.remove(name)).flatten() {
            Some(Value::Pending(p)) => Some(p),
            _ => None,
        }
    }

    /// Puts back a value taken by [`Importer::take_fusable`].
    pub fn restore_pending(&mut self, name: &str, p: Box<Pending>) {
        self.values.insert(name.to_string(), Value::Pending(p));
    }

    /// Pushes a layer named after `node` (plus `suffix`).
    pub fn push(&mut self, node: &Node, suffix: &str, op: Op, inputs: &[NodeId]) -> OpResult<NodeId> {
        Ok(self.net.push(format!("{}{suffix}", node.name), op, inputs)?)
    }

    /// `d` viewed with ONNX dims `dims` (same element count), pushing an IR
    /// reshape only when the IR shape changes. A pending reordering stays
    /// pending: the row-major data order, which it refers to, is unchanged.
    pub fn view(&mut self, node: &Node, d: &Dyn, dims: Vec<usize>) -> OpResult<Dyn> {
        if numel(&dims) != numel(&d.dims) {
            return Err(format!("cannot view {:?} as {dims:?}", d.dims).into());
        }
        if d.index.is_some() {
            return Ok(Dyn { id: d.id, dims, index: d.index.clone() });
        }
        let want = ir_shape(&dims);
        if self.net.node(d.id).shape == want {
            return Ok(Dyn::new(d.id, dims));
        }
        let suffix = if self.net.nodes().iter().any(|n| n.name == node.name) { ".reshape" } else { "" };
        let id = self.net.reshape(format!("{}{suffix}", node.name), d.id, want)?;
        Ok(Dyn::new(id, dims))
    }
}

fn unknown(name: &str) -> OpError {
    OpError::Msg(format!("input '{name}' is not a graph input, an initializer, nor the output of an earlier node"))
}

/// Declared dims of a value; symbolic or unknown leading (batch) dims are 1.
fn declared_dims(v: &ValueInfoProto) -> Result<Vec<usize>, String> {
    let Some(type_proto::Value::TensorType(t)) = v.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return Err(format!("'{}' is not a tensor", v.name));
    };
    let Some(shape) = &t.shape else { return Err(format!("'{}' has no declared shape", v.name)) };
    shape
        .dim
        .iter()
        .enumerate()
        .map(|(i, d)| match d.value {
            Some(dimension::Value::DimValue(n)) if n > 0 => Ok(n as usize),
            _ if i == 0 => Ok(1),
            _ => Err(format!("'{}' has a symbolic or unknown dimension {i}", v.name)),
        })
        .collect()
}

pub(crate) fn import(model: &ModelProto, file: &str) -> Result<Imported, ImportError> {
    let model_err = |msg: String| ImportError::Model { file: file.to_string(), msg };
    let opset = default_opset(model).map_err(model_err)?;
    let graph: &GraphProto = model.graph.as_ref().ok_or_else(|| model_err("the model has no graph".into()))?;
    let inits: HashMap<&str, &TensorProto> = graph.initializer.iter().map(|t| (t.name.as_str(), t)).collect();
    if let Some(s) = graph.sparse_initializer.first() {
        let name = s.values.as_ref().map_or("", |v| v.name.as_str());
        return Err(model_err(format!("sparse initializer '{name}' is not supported")));
    }
    let (input, output, in_dims) = graph_io(graph, &inits).map_err(model_err)?;
    let out_name = output.name.as_str();
    let needed = needed_nodes(graph, out_name);
    let uses = use_counts(graph, &needed, out_name);
    let layout = InputLayout::of(graph, &needed, input, &in_dims);

    let mut imp = Importer {
        net: Network::new(ir_shape(&layout.ir_dims)),
        inits,
        values: HashMap::new(),
        uses,
        nhwc_input: layout.permutation.is_some().then_some(input.name.as_str()),
        output: out_name,
        opset,
        ints: HashSet::new(),
    };
    imp.values.insert(input.name.clone(), Value::Dyn(Dyn::new(0, layout.ir_dims)));
    run_nodes(&mut imp, graph, &needed, file)?;
    let out = graph_output(&mut imp, out_name, &input.name).map_err(model_err)?;
    Ok(Imported {
        network: imp.net,
        file: file.to_string(),
        input_name: input.name.clone(),
        input_dims: in_dims,
        output_name: out_name.to_string(),
        output_dims: out.dims,
        opset,
        input_permutation: layout.permutation,
    })
}

/// The highest default-domain (ai.onnx) opset the model imports, if supported.
fn default_opset(model: &ModelProto) -> Result<i64, String> {
    let opset = model
        .opset_import
        .iter()
        .filter(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map(|o| o.version)
        .max()
        .ok_or_else(|| "the model imports no default-domain (ai.onnx) opset".to_string())?;
    if !OPSETS.contains(&opset) {
        return Err(format!("opset {opset} is not supported (supported: {}–{})", OPSETS.start(), OPSETS.end()));
    }
    Ok(opset)
}

/// The graph's one non-initializer input, its one output, and the input's dims.
fn graph_io<'a>(
    graph: &'a GraphProto,
    inits: &HashMap<&str, &TensorProto>,
) -> Result<(&'a ValueInfoProto, &'a ValueInfoProto, Vec<usize>), String> {
    let inputs: Vec<&ValueInfoProto> = graph.input.iter().filter(|i| !inits.contains_key(i.name.as_str())).collect();
    let [input] = inputs[..] else {
        let names: Vec<&str> = inputs.iter().map(|i| i.name.as_str()).collect();
        return Err(format!("expected exactly one graph input that is not an initializer, found {names:?}"));
    };
    let [output] = &graph.output[..] else {
        return Err(format!("expected exactly one graph output, found {}", graph.output.len()));
    };
    let in_dims = declared_dims(input).map_err(|e| format!("graph input {e}"))?;
    if numel(&in_dims) > MAX_INPUT {
        return Err(format!("graph input dims {in_dims:?} are too large"));
    }
    Ok((input, output, in_dims))
}

/// Which nodes the output `out_name` depends on.
fn needed_nodes(graph: &GraphProto, out_name: &str) -> Vec<bool> {
    let producer: HashMap<&str, usize> =
        graph.node.iter().enumerate().flat_map(|(i, n)| n.output.iter().map(move |o| (o.as_str(), i))).collect();
    let mut needed = vec![false; graph.node.len()];
    let mut stack = vec![out_name];
    let mut seen = HashSet::new();
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        if let Some(&i) = producer.get(v)
            && !needed[i]
        {
            needed[i] = true;
            stack.extend(graph.node[i].input.iter().map(String::as_str).filter(|s| !s.is_empty()));
        }
    }
    needed
}

/// How many times each value is read by the needed nodes (the graph output counts once).
fn use_counts<'a>(graph: &'a GraphProto, needed: &[bool], out_name: &'a str) -> HashMap<&'a str, usize> {
    let mut uses: HashMap<&str, usize> = HashMap::new();
    for n in graph.node.iter().zip(needed).filter(|(_, k)| **k).map(|(n, _)| n) {
        for i in n.input.iter().filter(|s| !s.is_empty()) {
            *uses.entry(i.as_str()).or_default() += 1;
        }
    }
    *uses.entry(out_name).or_default() += 1;
    uses
}

/// The IR input's layout: an NHWC input whose only consumer is a Transpose
/// to NCHW becomes an NCHW IR input with an input permutation.
struct InputLayout {
    ir_dims: Vec<usize>,
    /// `Some` exactly for an NHWC input.
    permutation: Option<Vec<usize>>,
}

impl InputLayout {
    fn of(graph: &GraphProto, needed: &[bool], input: &ValueInfoProto, in_dims: &[usize]) -> Self {
        let consumers: Vec<&NodeProto> = graph
            .node
            .iter()
            .zip(needed)
            .filter(|(n, k)| **k && n.input.contains(&input.name))
            .map(|(n, _)| n)
            .collect();
        let nhwc = in_dims.len() == 4
            && matches!(consumers[..], [n] if n.op_type == "Transpose" && n.input.len() == 1
                && n.attribute.iter().any(|a| a.name == "perm" && a.ints == [0, 3, 1, 2]));
        if !nhwc {
            return Self { ir_dims: in_dims.to_vec(), permutation: None };
        }
        let (h, w, c) = (in_dims[1], in_dims[2], in_dims[3]);
        let perm = (0..c).flat_map(|ci| (0..h).flat_map(move |y| (0..w).map(move |x| (y * w + x) * c + ci))).collect();
        Self { ir_dims: vec![in_dims[0], c, h, w], permutation: Some(perm) }
    }
}

/// Imports the needed nodes in graph order, recording their outputs.
fn run_nodes(imp: &mut Importer, graph: &GraphProto, needed: &[bool], file: &str) -> Result<(), ImportError> {
    for (idx, np) in graph.node.iter().enumerate().filter(|(i, _)| needed[*i]) {
        let name = match (np.name.is_empty(), np.output.first()) {
            (false, _) => np.name.clone(),
            (true, Some(o)) => format!("#{idx} -> {o}"),
            (true, None) => format!("#{idx}"),
        };
        let node = Node { proto: np, name };
        let outs = run_node(imp, &node).map_err(|e| wrap(e, file, &node))?;
        for (name, v) in np.output.iter().zip(outs) {
            if !name.is_empty() {
                imp.values.insert(name.clone(), v);
            }
        }
    }
    Ok(())
}

/// The graph output as the network's last node (a final reshape pushed
/// when it is not, or when it is the input itself).
fn graph_output(imp: &mut Importer, out_name: &str, input_name: &str) -> Result<Dyn, String> {
    if imp.is_const(out_name) {
        return ops::constant_output(imp, out_name, input_name);
    }
    if !imp.values.contains_key(out_name) {
        return Err(format!("graph output '{out_name}' is not computed by any node"));
    }
    let out = imp.dynamic(out_name).map_err(|e| format!("output '{out_name}': {}", message(e)))?;
    if out.id != imp.net.output() || out.id == 0 {
        let shape = imp.net.node(out.id).shape;
        imp.net.reshape("output", out.id, shape).map_err(|e| e.to_string())?;
    }
    Ok(out)
}

pub(crate) fn message(e: OpError) -> String {
    match e {
        OpError::Ir(e) => e.to_string(),
        OpError::Msg(m) | OpError::Unsupported(m) => m,
    }
}

fn run_node(imp: &mut Importer, node: &Node) -> OpResult<Vec<Value>> {
    let domain = node.proto.domain.as_str();
    if !(domain.is_empty() || domain == "ai.onnx") {
        return unsupported(format!("operator domain '{domain}' (only the default ONNX domain is supported)"));
    }
    ops::run(imp, node)
}

fn wrap(e: OpError, file: &str, node: &Node) -> ImportError {
    let (file, node, op) = (file.to_string(), node.name.clone(), node.op().to_string());
    match e {
        OpError::Msg(msg) => ImportError::Node { file, node, op, msg },
        OpError::Unsupported(msg) => ImportError::Unsupported { file, node, op, msg },
        OpError::Ir(source) => ImportError::Ir { file, node, op, source: Box::new(source) },
    }
}
