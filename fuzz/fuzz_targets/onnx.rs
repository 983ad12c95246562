//! The ONNX loader on arbitrary bytes: an error or a model, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = polycert_onnx::import_model(data, "fuzz.onnx");
});
