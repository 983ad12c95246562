//! The import driver: picks the graph's input and output, keeps the nodes
//! the output depends on, and walks them in order, keeping for every ONNX
//! value either a folded constant or the IR node that computes it.

use crate::graph::{
    Dyn, Importer, MAX_INPUT, Node, OpError, OpResult, Value, declared_dims, ir_shape, message, unsupported,
};
use crate::onnx_pb::{GraphProto, ModelProto, NodeProto, TensorProto, ValueInfoProto};
use crate::tensor::numel;
use crate::{ImportError, Imported, OPSETS, ops};
use polycert_deeppoly::Network;
use std::collections::{HashMap, HashSet};

/// A decoded model's graph, with its initializers and opset.
pub(crate) struct Opened<'a> {
    pub graph: &'a GraphProto,
    inits: HashMap<&'a str, &'a TensorProto>,
    pub opset: i64,
}

/// Checks `model`'s opset and graph.
pub(crate) fn open<'a>(model: &'a ModelProto, file: &str) -> Result<Opened<'a>, ImportError> {
    let model_err = |msg: String| ImportError::Model { file: file.to_string(), msg };
    let opset = default_opset(model).map_err(model_err)?;
    let graph: &GraphProto = model.graph.as_ref().ok_or_else(|| model_err("the model has no graph".into()))?;
    let inits: HashMap<&str, &TensorProto> = graph.initializer.iter().map(|t| (t.name.as_str(), t)).collect();
    if let Some(s) = graph.sparse_initializer.first() {
        let name = s.values.as_ref().map_or("", |v| v.name.as_str());
        return Err(model_err(format!("sparse initializer '{name}' is not supported")));
    }
    Ok(Opened { graph, inits, opset })
}

impl<'a> Opened<'a> {
    /// The graph inputs that are not initializers.
    pub fn inputs(&self) -> Vec<&'a ValueInfoProto> {
        self.graph.input.iter().filter(|i| !self.inits.contains_key(i.name.as_str())).collect()
    }

    /// An importer into `net` for the `needed` nodes. A Softmax is dropped
    /// only where it computes `last`.
    fn importer(
        &self,
        net: Network,
        needed: &[bool],
        wanted: &[&'a str],
        nhwc_input: Option<&'a str>,
        last: &'a str,
    ) -> Importer<'a> {
        Importer {
            net,
            inits: self.inits.clone(),
            values: HashMap::new(),
            uses: use_counts(self.graph, needed, wanted),
            nhwc_input,
            output: last,
            keep_softmax: false,
            opset: self.opset,
            ints: HashSet::new(),
        }
    }

    /// Imports into `net` the nodes that the tensors `wanted` depend on,
    /// with graph inputs bound to the values `inputs`; the wanted tensors'
    /// values, in order (a constant becomes a layer of zero weights).
    pub fn run(
        &self,
        net: Network,
        file: &str,
        inputs: &[(&'a str, Dyn)],
        wanted: &[&'a str],
    ) -> Result<(Network, Vec<Dyn>), ImportError> {
        let needed = needed_nodes(self.graph, wanted);
        let mut imp = self.importer(net, &needed, wanted, None, "");
        for (name, d) in inputs {
            imp.values.insert(name.to_string(), Value::Dyn(d.clone()));
        }
        run_nodes(&mut imp, self.graph, &needed, file)?;
        let first = inputs.first().map_or("", |i| i.0);
        let mut outs = Vec::new();
        for &w in wanted {
            let d = if imp.is_const(w) {
                ops::constant_output(&mut imp, w, first)
            } else if !imp.values.contains_key(w) {
                Err(format!("'{w}' is not a tensor the model computes"))
            } else {
                imp.dynamic(w).map_err(|e| format!("'{w}': {}", message(e)))
            };
            outs.push(d.map_err(|msg| ImportError::Model { file: file.to_string(), msg })?);
        }
        Ok((imp.net, outs))
    }
}

pub(crate) fn import(model: &ModelProto, file: &str, keep_softmax: bool) -> Result<Imported, ImportError> {
    let model_err = |msg: String| ImportError::Model { file: file.to_string(), msg };
    let o = open(model, file)?;
    let (input, output, in_dims) = graph_io(&o).map_err(model_err)?;
    let out_name = output.name.as_str();
    let needed = needed_nodes(o.graph, &[out_name]);
    let layout = InputLayout::of(o.graph, &needed, input, &in_dims);
    let nhwc = layout.permutation.is_some().then_some(input.name.as_str());
    let mut imp = o.importer(Network::new(ir_shape(&layout.ir_dims)), &needed, &[out_name], nhwc, out_name);
    imp.keep_softmax = keep_softmax;
    imp.values.insert(input.name.clone(), Value::Dyn(Dyn::new(0, layout.ir_dims)));
    run_nodes(&mut imp, o.graph, &needed, file)?;
    let out = graph_output(&mut imp, out_name, &input.name).map_err(model_err)?;
    Ok(Imported {
        network: imp.net,
        file: file.to_string(),
        input_name: input.name.clone(),
        input_dims: in_dims,
        output_name: out_name.to_string(),
        output_dims: out.dims,
        opset: o.opset,
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
fn graph_io<'a>(o: &Opened<'a>) -> Result<(&'a ValueInfoProto, &'a ValueInfoProto, Vec<usize>), String> {
    let (graph, inputs) = (o.graph, o.inputs());
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

/// Which nodes the tensors `wanted` depend on.
fn needed_nodes(graph: &GraphProto, wanted: &[&str]) -> Vec<bool> {
    let producer: HashMap<&str, usize> =
        graph.node.iter().enumerate().flat_map(|(i, n)| n.output.iter().map(move |o| (o.as_str(), i))).collect();
    let mut needed = vec![false; graph.node.len()];
    let mut stack = wanted.to_vec();
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

/// How many times each value is read by the needed nodes (each wanted
/// tensor, as the graph output, counts once more: a layer another reads
/// is not fused into its reader).
fn use_counts<'a>(graph: &'a GraphProto, needed: &[bool], wanted: &[&'a str]) -> HashMap<&'a str, usize> {
    let mut uses: HashMap<&str, usize> = HashMap::new();
    for n in graph.node.iter().zip(needed).filter(|(_, k)| **k).map(|(n, _)| n) {
        for i in n.input.iter().filter(|s| !s.is_empty()) {
            *uses.entry(i.as_str()).or_default() += 1;
        }
    }
    for w in wanted {
        *uses.entry(w).or_default() += 1;
    }
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
