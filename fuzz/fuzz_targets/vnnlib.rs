//! The VNNLIB parser (1.0 and 2.0) on arbitrary text, for a 4-input,
//! 3-output model: an error or a property, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = polycert_onnx::parse_vnnlib(text, "fuzz.vnnlib", 4, 3);
    }
});
