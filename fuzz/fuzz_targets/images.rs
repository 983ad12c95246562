//! The image readers on arbitrary bytes: ERAN CSV (both layouts, 1 to 3
//! channels) and IDX3 images with IDX1 labels; an error or images, never a
//! panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../crates/cli/src/images.rs"]
mod images;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    match mode % 3 {
        0 => {
            if let Ok(text) = std::str::from_utf8(rest) {
                let layout = if mode & 4 == 0 { images::Layout::Chw } else { images::Layout::Hwc };
                let _ = images::parse_csv(text, "fuzz.csv", 1 + (mode as usize / 8) % 3, layout);
            }
        }
        _ => {
            let cut = rest.len().min(16 + (mode as usize) * 4);
            let (img, lab) = rest.split_at(cut.min(rest.len()));
            let _ = images::parse_idx(img, lab, "fuzz-images", "fuzz-labels");
        }
    }
});
