//! The import driver: picks the graph's input and output, keeps the nodes
//! the output depends on, and walks them in order, keeping for every ONNX
//! value either a folded constant or the IR node that computes it.

use crate::onnx_pb::{
    AttributeProto, NodeProto, TensorProto, ValueInfoProto, attribute_proto::AttributeType,
    tensor_shape_proto::dimension, type_proto,
};
use crate::tensor::{Tensor, decode, numel};

use polycert_deeppoly::{IrError, Network, NodeId, Op, Shape};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A 0/1 dense layer over node `from` whose row `r` copies its element
/// `src[r]`: exact in float inference (one product by 1, the rest by 0) in
/// any order. The caller bounds its weights.
pub(crate) fn push_selection(
    net: &mut Network,
    name: impl Into<String>,
    from: NodeId,
    src: &[usize],
) -> Result<NodeId, IrError> {
    let k = net.node(from).shape.numel();
    let mut weight = vec![0.0; src.len() * k];
    src.iter().enumerate().for_each(|(r, &i)| weight[r * k + i] = 1.0);
    net.push(name, Op::Dense { weight, bias: vec![0.0; src.len()], out: src.len() }, &[from])
}

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

/// Most weights (`n_out × n_in`) of a reordering or selection lowered as
/// its own 0/1 Dense layer when no consumer can absorb it.
const MAX_REORDER: usize = crate::ops::MAX_WEIGHTS;

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
pub(crate) const MAX_INPUT: usize = 1 << 31;

/// State of one import.
pub(crate) struct Importer<'a> {
    pub net: Network,
    pub(crate) inits: HashMap<&'a str, &'a TensorProto>,
    pub(crate) values: HashMap<String, Value>,
    pub(crate) uses: HashMap<&'a str, usize>,
    /// The graph input, when its only consumer transposes it NHWC → NCHW.
    pub nhwc_input: Option<&'a str>,
    /// The graph output's name.
    pub output: &'a str,
    /// Lower a final Softmax instead of dropping it (properties that bound
    /// its outputs need its values).
    pub keep_softmax: bool,
    /// The opset (some ops' defaults depend on it).
    pub opset: i64,
    /// Values of the network that hold integers (after a Cast to one).
    pub(crate) ints: HashSet<String>,
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
    pub(crate) fn reorder(&mut self, name: &str, d: Dyn) -> OpResult<Dyn> {
        let Some(index) = d.index else { return Ok(d) };
        let (n, k) = (index.len(), self.net.node(d.id).shape.numel());
        if n.saturating_mul(k) > MAX_REORDER {
            return unsupported(format!(
                "'{name}' reorders or selects {n} of {k} values (Transpose, Slice, Gather, Split) and its consumer \
                 cannot absorb that (MatMul, Gemm, Relu, reshapes and Transpose can); a separate index layer is \
                 limited to {MAX_REORDER} weights (selected × source values)"
            ));
        }
        let mut id = push_selection(&mut self.net, format!("{name}.index"), d.id, &index)?;
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
pub(crate) fn declared_dims(v: &ValueInfoProto) -> Result<Vec<usize>, String> {
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

pub(crate) fn message(e: OpError) -> String {
    match e {
        OpError::Ir(e) => e.to_string(),
        OpError::Msg(m) | OpError::Unsupported(m) => m,
    }
}
