//! ONNX and VNNLIB import: turns ONNX models into the polycert IR and
//! VNNLIB files into properties.
//!
//! * [`load_onnx`] / [`import_model`] decode a model with prost (the ONNX
//!   protobuf schema is vendored in `proto/onnx.proto` and compiled ahead of
//!   time into [`onnx_pb`] by `cargo xtask codegen`), fold the constant
//!   parts of the graph (shape arithmetic, Constant nodes) and lower the
//!   rest to [`polycert_deeppoly::Network`]. Weights are taken exactly;
//!   where a lowering needs arithmetic on them (Div, BatchNormalization) the
//!   result is an interval rounded outward.
//! * [`load_vnnlib`] / [`parse_vnnlib`] read the VNN-COMP subset of VNNLIB
//!   into a [`polycert_deeppoly::Property`].
//! * [`load_query`] composes the networks of a VNN-LIB 2.0 query (several
//!   networks, inputs, outputs, hidden tensors) into one, laid out as the
//!   query's variables ([`QueryLayout`]).
//!
//! The operators and their restrictions are listed in `docs/models.md`
//! (opsets 7–21, default domain); anything else is an
//! [`ImportError::Unsupported`] naming the node. Only the nodes the graph
//! outputs (and hidden tensors) depend on are imported.
//!
//! Nothing here panics on malformed input: every failure is an error that
//! names the file and, for model errors, the node and operator.

mod compose;
mod driver;
mod graph;
#[allow(clippy::all, missing_docs)]
#[rustfmt::skip]
pub mod onnx_pb;
mod ops;
mod tensor;
pub mod vnnlib;

use polycert_deeppoly::{InputBox, IrError, Network, Property, SubProblem};
use std::path::Path;
use std::sync::Arc;

pub use ops::OPERATORS;
pub use vnnlib::{
    NetworkDecl, QueryLayout, Role, TensorDecl, VnnlibError, load_vnnlib, network_names, parse_vnnlib, query_layout,
};

/// The ONNX opset versions (default domain) the importer accepts.
pub const OPSETS: std::ops::RangeInclusive<i64> = 7..=21;

/// Why a model could not be imported. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{file}: cannot read the file: {source}")]
    Io { file: String, source: std::io::Error },
    #[error("{file}: not a valid ONNX model (protobuf decoding failed: {source})")]
    Decode { file: String, source: prost::DecodeError },
    /// A problem with the model as a whole (graph, inputs, outputs, opset).
    #[error("{file}: {msg}")]
    Model { file: String, msg: String },
    /// An operator (or an attribute/input combination of one) that polycert
    /// cannot represent.
    #[error("{file}: node '{node}' ({op}): unsupported: {msg}")]
    Unsupported { file: String, node: String, op: String, msg: String },
    /// A malformed node: bad attributes, shapes, weights.
    #[error("{file}: node '{node}' ({op}): {msg}")]
    Node { file: String, node: String, op: String, msg: String },
    /// The IR rejected the lowered layer.
    #[error("{file}: node '{node}' ({op}): {source}")]
    Ir { file: String, node: String, op: String, source: Box<IrError> },
}

/// A model lowered to the IR, with what the caller needs to feed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub network: Network,
    /// The file name used in messages.
    pub file: String,
    /// Name and declared dims (batch included, symbolic dims as 1) of the
    /// graph input and output.
    pub input_name: String,
    pub input_dims: Vec<usize>,
    pub output_name: String,
    pub output_dims: Vec<usize>,
    /// The default-domain opset the model imports.
    pub opset: i64,
    /// `Some(p)` when the IR input is a permutation of the ONNX input (an
    /// NHWC input transposed to NCHW by the model's first node): IR input
    /// `i` is flattened ONNX input `p[i]`. Use [`Imported::to_ir_input`] or
    /// [`Imported::property_to_ir`] to map ONNX-space data.
    pub input_permutation: Option<Vec<usize>>,
}

impl Imported {
    /// Number of (flattened) inputs and outputs.
    pub fn n_inputs(&self) -> usize {
        self.network.input_shape().numel()
    }
    pub fn n_outputs(&self) -> usize {
        self.network.output_shape().numel()
    }

    /// Maps a flattened ONNX-order input to the IR's input order.
    pub fn to_ir_input<T: Copy>(&self, x: &[T]) -> Vec<T> {
        match &self.input_permutation {
            Some(p) => p.iter().filter_map(|&i| x.get(i).copied()).collect(),
            None => x.to_vec(),
        }
    }

    /// The inverse of [`Imported::to_ir_input`]: IR input order back to the
    /// ONNX model's (for reporting counterexamples).
    pub fn from_ir_input<T: Copy + Default>(&self, x: &[T]) -> Vec<T> {
        match &self.input_permutation {
            Some(p) => {
                let mut out = vec![T::default(); x.len()];
                for (k, &i) in p.iter().enumerate() {
                    if let (Some(o), Some(&v)) = (out.get_mut(i), x.get(k)) {
                        *o = v;
                    }
                }
                out
            }
            None => x.to_vec(),
        }
    }

    /// Maps a property over the ONNX input (as VNNLIB files state them) to
    /// the IR's input order. The identity unless `input_permutation` is set.
    pub fn property_to_ir(&self, prop: &Property) -> Property {
        let mut out = prop.clone();
        if self.input_permutation.is_some() {
            out.subproblems = prop
                .subproblems
                .iter()
                .map(|sp| {
                    let b = &sp.input;
                    let float32 =
                        b.float32.as_ref().map(|f| Arc::new((self.to_ir_input(&f.0), self.to_ir_input(&f.1))));
                    let input = InputBox { lo: self.to_ir_input(&b.lo), hi: self.to_ir_input(&b.hi), float32 };
                    SubProblem { input, unsafe_region: sp.unsafe_region.clone() }
                })
                .collect();
        }
        out
    }
}

/// Reads and imports an `.onnx` file, gzip-compressed or not (VNN-COMP
/// ships large models as `.onnx.gz`; the gzip magic decides, not the name).
pub fn load_onnx(path: impl AsRef<Path>) -> Result<Imported, ImportError> {
    let path = path.as_ref();
    import_model(&read_model(path)?, &path.display().to_string())
}

/// [`load_onnx`], with a final Softmax lowered rather than dropped: for
/// properties that bound its outputs (comparisons of outputs are checked
/// more tightly on the logits).
pub fn load_onnx_keeping_softmax(path: impl AsRef<Path>) -> Result<Imported, ImportError> {
    let path = path.as_ref();
    let file = path.display().to_string();
    driver::import(&decode(&read_model(path)?, &file)?, &file, true)
}

/// A model file's bytes, gunzipped where it is compressed.
fn read_model(path: &Path) -> Result<Vec<u8>, ImportError> {
    let file = path.display().to_string();
    let io = |source| ImportError::Io { file: file.clone(), source };
    let bytes = std::fs::read(path).map_err(io)?;
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return Ok(bytes);
    }
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&bytes[..]).read_to_end(&mut out).map_err(io)?;
    Ok(out)
}

/// A serialized `ModelProto`, decoded; `file_name` is used in messages.
fn decode(bytes: &[u8], file_name: &str) -> Result<onnx_pb::ModelProto, ImportError> {
    use prost::Message;
    onnx_pb::ModelProto::decode(bytes).map_err(|source| ImportError::Decode { file: file_name.to_string(), source })
}

/// Imports a serialized `ModelProto`; `file_name` is used in messages.
pub fn import_model(bytes: &[u8], file_name: &str) -> Result<Imported, ImportError> {
    import_proto(&decode(bytes, file_name)?, file_name)
}

/// Imports an already decoded model.
pub fn import_proto(model: &onnx_pb::ModelProto, file_name: &str) -> Result<Imported, ImportError> {
    driver::import(model, file_name, false)
}

/// Reads the models of a VNN-LIB 2.0 query, one per network `layout`
/// declares (in order), and imports them as one network laid out as the
/// query's variables are (`compose.rs`). A query of one network with one
/// input and one output imports its model as [`load_onnx`] does.
pub fn load_query(layout: &QueryLayout, models: &[impl AsRef<Path>]) -> Result<Imported, ImportError> {
    if layout.is_simple()
        && let [m] = models
    {
        return load_onnx(m);
    }
    let mut decoded = Vec::new();
    for m in models {
        let file = m.as_ref().display().to_string();
        decoded.push((decode(&read_model(m.as_ref())?, &file)?, file));
    }
    compose::compose(layout, &decoded)
}
