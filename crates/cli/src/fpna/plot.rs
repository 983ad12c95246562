//! A PNG bar chart of a histogram (no text: the counts go to stdout or the
//! JSON beside it). Bars span `[-1, 1]` left to right; height is the count
//! relative to the largest bin.

use anyhow::{Context, Result};
use std::path::Path;

const W: usize = 640;
const H: usize = 400;
const MARGIN: usize = 30;

/// Writes `counts` as bars to `path`.
pub fn histogram_png(path: &Path, counts: &[usize]) -> Result<()> {
    let mut px = vec![255u8; W * H * 3];
    let mut put = |x: usize, y: usize, c: [u8; 3]| {
        if x < W && y < H {
            px[(y * W + x) * 3..(y * W + x) * 3 + 3].copy_from_slice(&c);
        }
    };
    let (x0, x1, y0, y1) = (MARGIN, W - MARGIN, H - MARGIN, MARGIN);
    let top = counts.iter().copied().max().unwrap_or(0).max(1);
    let n = counts.len().max(1);
    for (k, &c) in counts.iter().enumerate() {
        let (a, b) = (x0 + (x1 - x0) * k / n, x0 + (x1 - x0) * (k + 1) / n);
        let h = (y0 - y1) * c / top;
        for x in a + 1..b.max(a + 2) - 1 {
            for y in y0 - h..y0 {
                put(x, y, [70, 110, 170]);
            }
        }
    }
    // Axes, and ticks at τ = -1, -0.5, 0, 0.5, 1.
    for x in x0..=x1 {
        put(x, y0, [0, 0, 0]);
    }
    for y in y1..=y0 {
        put(x0, y, [0, 0, 0]);
    }
    for t in 0..=4 {
        let x = x0 + (x1 - x0) * t / 4;
        for y in y0..y0 + 6 {
            put(x, y, [0, 0, 0]);
        }
    }
    let file = std::fs::File::create(path).with_context(|| format!("{}: cannot create", path.display()))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), W as u32, H as u32);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header().with_context(|| format!("{}: cannot write", path.display()))?;
    w.write_image_data(&px).with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(())
}
