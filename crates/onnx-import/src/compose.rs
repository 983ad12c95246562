//! A VNN-LIB 2.0 query's networks as one IR network, laid out as the
//! query's variables are ([`QueryLayout`]): its input is every declared
//! input, one after another; its output every declared output and hidden
//! tensor, in declaration order, then copies of the input elements that a
//! constraint compares with outputs.
//!
//! Each network's graph is imported once per declaration (an `equal-to`
//! network twice), its inputs read from its slice of the input. The
//! slices and copies are dense layers of 0/1 weights, and the output a
//! concatenation: all exact, so the analysis's rounding bounds cover them.
//! Products of two variables that the property's terms take come last,
//! each `((a + b)² − (a − b)²)/4` of copies of its factors, with exact
//! squares (`Elementwise::Square`): the property's arithmetic is real.

use crate::driver::{Opened, open};
use crate::graph::{Dyn, MAX_INPUT, declared_dims, ir_shape, message, push_selection};
use crate::onnx_pb::ModelProto;
use crate::ops::{MAX_WEIGHTS, polarized};
use crate::tensor::numel;
use crate::vnnlib::{QueryLayout, QueryVar, Role, TensorDecl};
use crate::{ImportError, Imported};
use polycert_deeppoly::{Elementwise, Network, NodeId, Op, Shape};

/// The networks of `layout`, one model per declared network (in order,
/// with its file name), composed into one.
pub(crate) fn compose(layout: &QueryLayout, models: &[(ModelProto, String)]) -> Result<Imported, ImportError> {
    let files: Vec<&str> = models.iter().map(|m| m.1.as_str()).collect();
    let all = files.join(", ");
    let n_in = layout.n_inputs;
    if n_in == 0 || n_in > MAX_INPUT || models.len() != layout.networks.len() {
        let msg =
            format!("cannot compose {} models into {} networks of {n_in} inputs", models.len(), layout.networks.len());
        return Err(ImportError::Model { file: all, msg });
    }
    let mut net = Network::new(Shape::flat(n_in));
    let mut parts: Vec<(usize, NodeId)> = Vec::new();
    let mut opset = 0;
    for (decl, (model, file)) in layout.networks.iter().zip(models) {
        let o = open(model, file)?;
        opset = opset.max(o.opset);
        let (n2, outs) = network(&o, net, file, &decl.tensors, n_in)?;
        net = n2;
        parts.extend(outs);
    }
    if !layout.mirrors.is_empty() {
        let src: Vec<usize> = layout.mirrors.clone();
        let id = copy(&mut net, &src, n_in, "inputs compared with outputs").map_err(|msg| model_err(&all, msg))?;
        parts.push((layout.n_outputs - layout.products.len() - src.len(), id));
    }
    let mut flat = Vec::new();
    for (k, &(offset, id)) in parts.iter().enumerate() {
        debug_assert_eq!(offset, flat.iter().map(|&f: &NodeId| net.node(f).shape.numel()).sum::<usize>());
        let n = net.node(id).shape.numel();
        flat.push(net.reshape(format!("output.{k}"), id, Shape::flat(n)).map_err(|e| model_err(&all, e.to_string()))?);
    }
    if flat.len() > 1 {
        net.push("output", Op::Concat, &flat).map_err(|e| model_err(&all, e.to_string()))?;
    }
    if !layout.products.is_empty() {
        products(&mut net, &layout.products).map_err(|e| model_err(&all, e))?;
    }
    let names = |role: fn(&Role) -> bool| {
        let t = layout.networks.iter().flat_map(|n| &n.tensors).filter(|t| role(&t.role));
        t.map(|t| t.name.as_str()).collect::<Vec<_>>().join(",")
    };
    Ok(Imported {
        network: net,
        file: all,
        input_name: names(|r| *r == Role::Input),
        input_dims: vec![n_in],
        output_name: names(|r| *r != Role::Input),
        output_dims: vec![layout.n_outputs],
        opset,
        input_permutation: None,
    })
}

fn model_err(file: &str, msg: String) -> ImportError {
    ImportError::Model { file: file.to_string(), msg }
}

/// One network: its graph inputs bound, in order, to its declared inputs'
/// slices of the query's input; the values of its declared outputs (the
/// graph outputs, in order) and hidden tensors, with their offsets.
fn network(
    o: &Opened<'_>,
    mut net: Network,
    file: &str,
    tensors: &[TensorDecl],
    n_in: usize,
) -> Result<(Network, Vec<(usize, NodeId)>), ImportError> {
    let err = |msg: String| model_err(file, msg);
    let (g_in, g_out) = (o.inputs(), &o.graph.output);
    let d_in: Vec<&TensorDecl> = tensors.iter().filter(|t| t.role == Role::Input).collect();
    let d_out = tensors.iter().filter(|t| t.role == Role::Output).count();
    if g_in.len() != d_in.len() || g_out.len() != d_out {
        return Err(err(format!(
            "the query declares {} input and {d_out} output tensors for this model; it has {} graph inputs and {} \
             graph outputs",
            d_in.len(),
            g_in.len(),
            g_out.len()
        )));
    }
    let mut inputs = Vec::new();
    for (g, t) in g_in.iter().zip(&d_in) {
        let dims = declared_dims(g).map_err(|e| err(format!("graph input {e}")))?;
        if numel(&dims) != t.numel() {
            return Err(err(format!(
                "input '{}' has shape {:?}, the model's '{}' dims {dims:?}",
                t.name, t.shape, g.name
            )));
        }
        let id = slice(&mut net, t.offset, &dims, n_in, &g.name).map_err(err)?;
        inputs.push((g.name.as_str(), Dyn::new(id, dims)));
    }
    let mut next_out = g_out.iter();
    let mut wanted = Vec::new();
    for t in tensors {
        match &t.role {
            Role::Input => {}
            Role::Output => wanted.push(next_out.next().map_or("", |v| v.name.as_str())),
            Role::Hidden(name) => wanted.push(name.as_str()),
        }
    }
    let (net, vals) = o.run(net, file, &inputs, &wanted)?;
    let mut out = Vec::new();
    for ((t, v), w) in tensors.iter().filter(|t| t.role != Role::Input).zip(vals).zip(&wanted) {
        if numel(&v.dims) != t.numel() {
            return Err(err(format!("'{}' has shape {:?}, the model's '{w}' dims {:?}", t.name, t.shape, v.dims)));
        }
        out.push((t.offset, v.id));
    }
    Ok((net, out))
}

/// The input elements `offset..` with ONNX dims `dims`: the input itself
/// where it is all of it, else a copy layer.
fn slice(net: &mut Network, offset: usize, dims: &[usize], n_in: usize, name: &str) -> Result<NodeId, String> {
    let n = numel(dims);
    let id = if offset == 0 && n == n_in {
        0
    } else {
        let src: Vec<usize> = (offset..offset + n).collect();
        copy(net, &src, n_in, name)?
    };
    let want = ir_shape(dims);
    if net.node(id).shape == want {
        return Ok(id);
    }
    net.reshape(format!("{name}.view"), id, want).map_err(|e| e.to_string())
}

/// Appends the products of pairs of variables (input `(0, i)` or output
/// `(1, j)` of the network so far) to its output.
fn products(net: &mut Network, pairs: &[(QueryVar, QueryVar)]) -> Result<NodeId, String> {
    let ir = |e: polycert_deeppoly::IrError| e.to_string();
    let pre = net.output();
    let (n_in, n_pre) = (net.node(0).shape.numel(), net.node(pre).shape.numel());
    // Every variable in one vector: the inputs, then the outputs so far.
    let vars = net.push("products.vars", Op::Concat, &[0, pre]).map_err(ir)?;
    let at = |(kind, i): (usize, usize)| if kind == 0 { i } else { n_in + i };
    let n = pairs.len();
    if n * (n_in + n_pre) > MAX_WEIGHTS {
        return Err(format!("{n} products of variables beside {} values are too many", n_in + n_pre));
    }
    let first: Vec<usize> = pairs.iter().map(|p| at(p.0)).collect();
    let second: Vec<usize> = pairs.iter().map(|p| at(p.1)).collect();
    let a = push_selection(net, "products.a", vars, &first).map_err(ir)?;
    let b = push_selection(net, "products.b", vars, &second).map_err(ir)?;
    let prod = polarized(net, "products", (a, b), Elementwise::Square).map_err(message)?;
    net.push("output.products", Op::Concat, &[pre, prod]).map_err(ir)
}

/// A dense layer over the input whose row `k` copies input `src[k]`.
fn copy(net: &mut Network, src: &[usize], n_in: usize, name: &str) -> Result<NodeId, String> {
    if src.len().saturating_mul(n_in) > MAX_WEIGHTS {
        return Err(format!("copying {} of {n_in} inputs for '{name}' is too large for a dense layer", src.len()));
    }
    push_selection(net, name, 0, src).map_err(|e| e.to_string())
}
