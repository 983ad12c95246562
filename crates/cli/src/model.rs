//! Loading models and properties through polycert-onnx, and the embedded default.

use crate::InputError;
use crate::images::{self, Image, Layout};
use crate::say::errln;
use anyhow::Result;
use polycert_deeppoly::Property;
use std::path::Path;

const DIGITS_MODEL: &[u8] = include_bytes!("../assets/digits_mlp.onnx");
const DIGITS_TEST: &str = include_str!("../assets/digits_test.csv");

pub use polycert_onnx::Imported;

pub fn load(path: &Path) -> Result<Imported> {
    let _p = polycert_deeppoly::base::profile::span("cli.import");
    let m = polycert_onnx::load_onnx(path).map_err(|e| InputError(e.to_string()))?;
    if m.network.softmax_output() {
        errln!(
            "polycert: {}: the final Softmax is dropped; comparisons of outputs are checked on the logits, \
             with a float32 margin",
            m.file
        );
    }
    Ok(m)
}

/// The models of a VNN-LIB 2.0 query, composed as its layout says.
pub fn load_query(layout: &polycert_onnx::QueryLayout, models: &[std::path::PathBuf]) -> Result<Imported> {
    if layout.is_simple() {
        return load(&models[0]);
    }
    let _p = polycert_deeppoly::base::profile::span("cli.import");
    Ok(polycert_onnx::load_query(layout, models).map_err(|e| InputError(e.to_string()))?)
}

/// Reads a VNNLIB property, in the IR's input order (NHWC models permute).
/// After a dropped Softmax, only comparisons of outputs are accepted.
pub fn load_vnnlib(model: &Imported, path: &Path) -> Result<Property> {
    checked(model, read_vnnlib(model, path)?, path)
}

/// Parses a VNNLIB property for `model`, in the model's input order.
pub fn read_vnnlib(model: &Imported, path: &Path) -> Result<Property> {
    let _p = polycert_deeppoly::base::profile::span("cli.vnnlib");
    Ok(polycert_onnx::load_vnnlib(path, model.n_inputs(), model.n_outputs()).map_err(|e| InputError(e.to_string()))?)
}

/// After a dropped Softmax, the first half-space of `p` that is not a
/// comparison of two outputs.
fn non_comparison<'p>(model: &Imported, p: &'p Property) -> Option<&'p polycert_deeppoly::Halfspace> {
    if !model.network.softmax_output() {
        return None;
    }
    let mut halfspaces = p.subproblems.iter().flat_map(|sp| sp.unsafe_region.iter().flatten());
    halfspaces.find(|h| !polycert_deeppoly::base::softmax::is_comparison(h))
}

/// Whether `p` bounds a dropped final Softmax's outputs (it is not only
/// comparisons of two outputs): the model is then read again with the
/// Softmax kept ([`load_keeping_softmax`]).
pub fn bounds_softmax(model: &Imported, p: &Property) -> bool {
    non_comparison(model, p).is_some()
}

/// `p` (read by [`read_vnnlib`] from `path`) in the IR's input order, if
/// `model` can check it.
pub fn checked(model: &Imported, p: Property, path: &Path) -> Result<Property> {
    if let Some(h) = non_comparison(model, &p) {
        let terms: Vec<String> =
            h.c.iter().enumerate().filter(|(_, c)| **c != 0.0).map(|(j, c)| format!("{c}·Y_{j}")).collect();
        return Err(InputError(format!(
            "{}: the model ends in a Softmax, so only comparisons of two outputs can be checked; found {} <= {}",
            path.display(),
            terms.join(" + "),
            h.d
        ))
        .into());
    }
    Ok(model.property_to_ir(&p))
}

/// [`load`] with a final Softmax lowered (exact over the reals, within
/// 2^-12 of the runtime's) rather than dropped.
pub fn load_keeping_softmax(path: &Path) -> Result<Imported> {
    let _p = polycert_deeppoly::base::profile::span("cli.import");
    let m = polycert_onnx::load_onnx_keeping_softmax(path).map_err(|e| InputError(e.to_string()))?;
    errln!("polycert: {}: the property bounds the Softmax's outputs, so the Softmax is analysed, not dropped", m.file);
    Ok(m)
}

/// The model's float32 outputs at `x` (in the IR's input order), as a
/// runtime gives them: after a dropped final Softmax, the Softmax of the
/// logits (the maximum subtracted first), not the logits the IR computes.
/// A counterexample file states these (VNN-COMP checks them against
/// onnxruntime's).
pub fn outputs(model: &Imported, x: &[f32]) -> Vec<f32> {
    let y = polycert_deeppoly::base::eval::eval::<f32>(&model.network, x);
    if !model.network.softmax_output() {
        return y;
    }
    let m = y.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f32> = y.iter().map(|v| (v - m).exp()).collect();
    let s: f32 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}

/// The embedded digits MLP (see `models/train_digits.py`).
pub fn embedded() -> Result<Imported> {
    Ok(polycert_onnx::import_model(DIGITS_MODEL, "embedded:digits_mlp.onnx").map_err(|e| InputError(e.to_string()))?)
}

/// The 300 held-out digits the embedded model was not trained on.
pub fn embedded_images() -> Result<Vec<Image>> {
    images::parse_csv(DIGITS_TEST, "embedded:digits_test.csv", 1, Layout::Chw)
}
