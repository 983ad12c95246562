//! Loading models and properties through polycert-onnx, and the embedded default.

use crate::InputError;
use crate::images::{self, Image, Layout};
use anyhow::Result;
use polycert_deeppoly::Property;
use std::path::Path;

const DIGITS_MODEL: &[u8] = include_bytes!("../assets/digits_mlp.onnx");
const DIGITS_TEST: &str = include_str!("../assets/digits_test.csv");

pub use polycert_onnx::Imported;

pub fn load(path: &Path) -> Result<Imported> {
    Ok(polycert_onnx::load_onnx(path).map_err(|e| InputError(e.to_string()))?)
}

/// Reads a VNNLIB property, in the IR's input order (NHWC models permute).
pub fn load_vnnlib(model: &Imported, path: &Path) -> Result<Property> {
    let p =
        polycert_onnx::load_vnnlib(path, model.n_inputs(), model.n_outputs()).map_err(|e| InputError(e.to_string()))?;
    Ok(model.property_to_ir(&p))
}

/// The embedded digits MLP (see `models/train_digits.py`).
pub fn embedded() -> Result<Imported> {
    Ok(polycert_onnx::import_model(DIGITS_MODEL, "embedded:digits_mlp.onnx").map_err(|e| InputError(e.to_string()))?)
}

/// The 300 held-out digits the embedded model was not trained on.
pub fn embedded_images() -> Result<Vec<Image>> {
    images::parse_csv(DIGITS_TEST, "embedded:digits_test.csv", 1, Layout::Chw)
}
