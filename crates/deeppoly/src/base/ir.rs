//! The network IR: a DAG of layers with explicit channel-first shapes.
//!
//! Nodes are stored in topological order (a node's inputs have smaller ids),
//! so reverse id order is a valid backsubstitution order. Flatten and
//! Reshape are index maps: data is always kept flattened in C·H·W order.

use polycert_interval::Interval;

/// Index of a node in [`Network::nodes`].
pub type NodeId = usize;

/// A channel-first shape `(c, h, w)`. Flat vectors are `(n, 1, 1)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Shape {
    pub c: usize,
    pub h: usize,
    pub w: usize,
}

impl Shape {
    pub fn new(c: usize, h: usize, w: usize) -> Self {
        Self { c, h, w }
    }
    pub fn flat(n: usize) -> Self {
        Self { c: n, h: 1, w: 1 }
    }
    pub fn numel(&self) -> usize {
        self.c * self.h * self.w
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}x{}", self.c, self.h, self.w)
    }
}

/// 2-D convolution parameters (dilation 1, groups 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Conv2d {
    /// Weights `[c_out][c_in][kh][kw]`.
    pub weight: Vec<f64>,
    pub bias: Vec<f64>,
    pub c_out: usize,
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    /// Padding `(top, left, bottom, right)`.
    pub pad: (usize, usize, usize, usize),
}

impl Conv2d {
    /// The taps of output position `(co, oy, ox)` over an input of shape
    /// `si`: `(weight index, input neuron)` for each kernel position inside
    /// the input (padding contributes nothing).
    pub fn taps(&self, si: Shape, co: usize, oy: usize, ox: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let (kh, kw) = self.kernel;
        (0..si.c).flat_map(move |ci| {
            window_taps(si, (kh, kw), self.stride, (self.pad.0, self.pad.1), oy, ox)
                .map(move |(k, hw)| (((co * si.c + ci) * kh * kw) + k, ci * si.h * si.w + hw))
        })
    }
}

impl Pool {
    /// Input neurons of output position `(c, oy, ox)` that lie inside the input.
    pub fn window(&self, si: Shape, c: usize, oy: usize, ox: usize) -> impl Iterator<Item = usize> {
        window_taps(si, self.kernel, self.stride, (self.pad.0, self.pad.1), oy, ox)
            .map(move |(_, hw)| c * si.h * si.w + hw)
    }
}

/// `(ky·kw + kx, iy·w + ix)` for every in-range kernel position of output `(oy, ox)`.
fn window_taps(
    si: Shape,
    k: (usize, usize),
    s: (usize, usize),
    pad: (usize, usize),
    oy: usize,
    ox: usize,
) -> impl Iterator<Item = (usize, usize)> {
    (0..k.0).flat_map(move |ky| {
        (0..k.1).filter_map(move |kx| {
            let iy = (oy * s.0 + ky) as isize - pad.0 as isize;
            let ix = (ox * s.1 + kx) as isize - pad.1 as isize;
            (iy >= 0 && ix >= 0 && (iy as usize) < si.h && (ix as usize) < si.w)
                .then(|| (ky * k.1 + kx, iy as usize * si.w + ix as usize))
        })
    })
}

/// Pooling window parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pool {
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    pub pad: (usize, usize, usize, usize),
}

/// A layer.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Input,
    /// `y = W·x + b`, `W` row-major `[out][in]`.
    Dense {
        weight: Vec<f64>,
        bias: Vec<f64>,
        out: usize,
    },
    Conv2d(Conv2d),
    Relu,
    /// The logistic function `1/(1 + e^−x)` (Tanh is imported as
    /// `2·σ(2x) − 1`). Its float inference is taken to be within
    /// [`crate::base::scurve::SIGMOID_TOLERANCE`] of the exact value, in `[0, 1]`.
    Sigmoid,
    /// A step or selection computed exactly (comparisons, Where, Cast to
    /// integers): [`crate::base::elementwise`].
    Elementwise(crate::base::elementwise::Elementwise),
    /// Residual merge of two equally shaped inputs.
    Add,
    /// Concatenation over channels.
    Concat,
    MaxPool2d(Pool),
    /// Average pooling without padding (lowered to a conv by the analysis).
    AvgPool2d(Pool),
    /// Per-channel `y = x·mul + add`, with interval coefficients that
    /// enclose the exact ones; `float_ops` roundings happen in inference.
    /// BatchNorm and Normalize are built on this.
    ChannelAffine {
        mul: Vec<Interval<f64>>,
        add: Vec<Interval<f64>>,
        float_ops: u32,
    },
    /// Flatten or Reshape: the data is unchanged.
    Reshape,
}

impl Op {
    pub fn kind(&self) -> &'static str {
        match self {
            Op::Input => "Input",
            Op::Dense { .. } => "Dense",
            Op::Conv2d(_) => "Conv2d",
            Op::Relu => "Relu",
            Op::Sigmoid => "Sigmoid",
            Op::Elementwise(_) => "Elementwise",
            Op::Add => "Add",
            Op::Concat => "Concat",
            Op::MaxPool2d(_) => "MaxPool2d",
            Op::AvgPool2d(_) => "AvgPool2d",
            Op::ChannelAffine { .. } => "ChannelAffine",
            Op::Reshape => "Reshape",
        }
    }
}

/// A node of the DAG.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub name: String,
    pub op: Op,
    pub inputs: Vec<NodeId>,
    pub shape: Shape,
}

/// A shape or parameter error, naming the layer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("layer '{layer}' ({op}): {msg}")]
pub struct IrError {
    pub layer: String,
    pub op: &'static str,
    pub msg: String,
}

/// A validated network. The last node is the output.
#[derive(Debug, Clone, PartialEq)]
pub struct Network {
    nodes: Vec<Node>,
    /// The deployed model applies a Softmax to these outputs (dropped by the
    /// importer): properties may only compare outputs, with a float margin
    /// ([`crate::base::softmax`]).
    softmax_output: bool,
    /// Affine nodes the deployed model does not compute (parts of a lowering
    /// whose runtime error is bounded elsewhere, as a Softmax's band): no
    /// float rounding is modelled for them.
    exact: Vec<NodeId>,
}

impl Network {
    /// Starts a network with its input node.
    pub fn new(input: Shape) -> Self {
        Self {
            nodes: vec![Node { name: "input".into(), op: Op::Input, inputs: vec![], shape: input }],
            softmax_output: false,
            exact: Vec::new(),
        }
    }

    /// Marks the outputs as the logits of a deployed Softmax.
    pub fn set_softmax_output(&mut self, on: bool) {
        self.softmax_output = on;
    }
    pub fn softmax_output(&self) -> bool {
        self.softmax_output
    }

    /// Marks affine node `id` as computed only by the analysis (see `exact`).
    pub fn mark_exact(&mut self, id: NodeId) {
        self.exact.push(id);
    }
    pub fn is_exact(&self, id: NodeId) -> bool {
        self.exact.contains(&id)
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id]
    }
    pub fn input_shape(&self) -> Shape {
        self.nodes[0].shape
    }
    pub fn output(&self) -> NodeId {
        self.nodes.len() - 1
    }
    pub fn output_shape(&self) -> Shape {
        self.nodes[self.output()].shape
    }

    /// The network cut after node `last` (its output): the nodes before it
    /// keep their ids. No Softmax follows the cut.
    pub fn prefix(&self, last: NodeId) -> Network {
        let last = last.min(self.nodes.len() - 1);
        let exact = self.exact.iter().copied().filter(|&k| k <= last).collect();
        Network { nodes: self.nodes[..=last].to_vec(), softmax_output: false, exact }
    }

    /// Appends a layer after validating its inputs, parameters and shapes.
    pub fn push(&mut self, name: impl Into<String>, op: Op, inputs: &[NodeId]) -> Result<NodeId, IrError> {
        let name = name.into();
        let err = |msg: String| IrError { layer: name.clone(), op: op.kind(), msg };
        let n_in = match &op {
            Op::Input => return Err(err("only the first node may be an input".into())),
            Op::Add | Op::Concat => None,
            _ => Some(1),
        };
        if let Some(k) = n_in
            && inputs.len() != k
        {
            return Err(err(format!("expects {k} input, got {}", inputs.len())));
        }
        if matches!(op, Op::Add) && inputs.len() != 2 {
            return Err(err(format!("expects 2 inputs, got {}", inputs.len())));
        }
        if inputs.is_empty() {
            return Err(err("has no inputs".into()));
        }
        if let Some(&bad) = inputs.iter().find(|&&i| i >= self.nodes.len()) {
            return Err(err(format!("input {bad} does not exist yet")));
        }
        let ins: Vec<Shape> = inputs.iter().map(|&i| self.nodes[i].shape).collect();
        let shape = infer_shape(&op, &ins).map_err(err)?;
        check_finite(&op).map_err(err)?;
        self.nodes.push(Node { name, op, inputs: inputs.to_vec(), shape });
        Ok(self.nodes.len() - 1)
    }

    /// Appends a Reshape to `shape` (same element count).
    pub fn reshape(&mut self, name: impl Into<String>, input: NodeId, shape: Shape) -> Result<NodeId, IrError> {
        let name = name.into();
        let from = self.nodes[input].shape;
        if from.numel() != shape.numel() {
            return Err(IrError {
                layer: name,
                op: "Reshape",
                msg: format!("cannot reshape {from} ({} values) to {shape}", from.numel()),
            });
        }
        self.nodes.push(Node { name, op: Op::Reshape, inputs: vec![input], shape });
        Ok(self.nodes.len() - 1)
    }
}

/// Output spatial size of a window op along one axis.
pub fn window_out(size: usize, k: usize, s: usize, p0: usize, p1: usize) -> Result<usize, String> {
    if k == 0 || s == 0 {
        return Err("kernel and stride must be positive".into());
    }
    let padded = size + p0 + p1;
    if padded < k {
        return Err(format!("kernel {k} larger than padded input {padded}"));
    }
    Ok((padded - k) / s + 1)
}

fn infer_shape(op: &Op, ins: &[Shape]) -> Result<Shape, String> {
    let x = ins[0];
    match op {
        Op::Input => unreachable!(),
        Op::Dense { weight, bias, out } => {
            let n = x.numel();
            if weight.len() != out * n {
                return Err(format!("weight has {} values, expected {out}x{n}", weight.len()));
            }
            if bias.len() != *out {
                return Err(format!("bias has {} values, expected {out}", bias.len()));
            }
            Ok(Shape::flat(*out))
        }
        Op::Conv2d(c) => {
            let (kh, kw) = c.kernel;
            if c.weight.len() != c.c_out * x.c * kh * kw {
                return Err(format!(
                    "weight has {} values, expected {}x{}x{kh}x{kw} for input {x}",
                    c.weight.len(),
                    c.c_out,
                    x.c
                ));
            }
            if c.bias.len() != c.c_out {
                return Err(format!("bias has {} values, expected {}", c.bias.len(), c.c_out));
            }
            let h = window_out(x.h, kh, c.stride.0, c.pad.0, c.pad.2)?;
            let w = window_out(x.w, kw, c.stride.1, c.pad.1, c.pad.3)?;
            Ok(Shape::new(c.c_out, h, w))
        }
        Op::MaxPool2d(p) | Op::AvgPool2d(p) => {
            if matches!(op, Op::AvgPool2d(_)) && p.pad != (0, 0, 0, 0) {
                return Err("padded average pooling is not supported".into());
            }
            let h = window_out(x.h, p.kernel.0, p.stride.0, p.pad.0, p.pad.2)?;
            let w = window_out(x.w, p.kernel.1, p.stride.1, p.pad.1, p.pad.3)?;
            Ok(Shape::new(x.c, h, w))
        }
        Op::Relu | Op::Sigmoid | Op::Elementwise(_) | Op::Reshape => Ok(x),
        Op::ChannelAffine { mul, add, .. } => {
            if mul.len() != x.c || add.len() != x.c {
                return Err(format!("expects {} channels, got {} and {}", x.c, mul.len(), add.len()));
            }
            Ok(x)
        }
        Op::Add => {
            if ins[0].numel() != ins[1].numel() {
                return Err(format!("input shapes differ: {} and {}", ins[0], ins[1]));
            }
            Ok(x)
        }
        Op::Concat => {
            if let Some(s) = ins.iter().find(|s| (s.h, s.w) != (x.h, x.w)) {
                return Err(format!("spatial sizes differ: {x} and {s}"));
            }
            Ok(Shape::new(ins.iter().map(|s| s.c).sum(), x.h, x.w))
        }
    }
}

fn check_finite(op: &Op) -> Result<(), String> {
    let bad = |v: &[f64], what: &str| match v.iter().position(|x| !x.is_finite()) {
        Some(i) => Err(format!("{what}[{i}] is {} (weights must be finite)", v[i])),
        None => Ok(()),
    };
    match op {
        Op::Dense { weight, bias, .. } => bad(weight, "weight").and(bad(bias, "bias")),
        Op::Conv2d(c) => bad(&c.weight, "weight").and(bad(&c.bias, "bias")),
        Op::ChannelAffine { mul, add, .. } => {
            let all: Vec<f64> = mul.iter().chain(add).flat_map(|i| [i.lo(), i.hi()]).collect();
            bad(&all, "coefficient")
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_and_errors_name_the_layer() {
        let mut n = Network::new(Shape::new(1, 4, 4));
        let conv = Conv2d {
            weight: vec![0.0; 2 * 9],
            bias: vec![0.0; 2],
            c_out: 2,
            kernel: (3, 3),
            stride: (2, 2),
            pad: (1, 1, 1, 1),
        };
        let c = n.push("conv1", Op::Conv2d(conv), &[0]).unwrap();
        assert_eq!(n.node(c).shape, Shape::new(2, 2, 2));
        let f = n.reshape("flat", c, Shape::flat(8)).unwrap();
        let e = n.push("fc", Op::Dense { weight: vec![0.0; 7], bias: vec![0.0], out: 1 }, &[f]).unwrap_err();
        assert_eq!(e.layer, "fc");
        assert!(e.to_string().contains("expected 1x8"), "{e}");
        let e = n.push("fc", Op::Dense { weight: vec![f64::NAN; 8], bias: vec![0.0], out: 1 }, &[f]).unwrap_err();
        assert!(e.to_string().contains("NaN"), "{e}");
        assert!(n.push("add", Op::Add, &[c]).is_err());
    }
}
