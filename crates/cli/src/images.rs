//! Image test sets: IDX (optionally gzipped) or ERAN-style CSV (label, then
//! pixels 0–255), scaled to [0, 1] and returned channel-first.

use anyhow::{Context, Result, bail};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Pixel order of a CSV file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Layout {
    /// Height, width, channel (ERAN's CIFAR files).
    Hwc,
    /// Channel, height, width.
    Chw,
}

/// One labelled image, pixels in [0, 1], channel-first.
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    pub label: usize,
    pub pixels: Vec<f64>,
}

fn read_maybe_gz(path: &Path) -> Result<Vec<u8>> {
    let raw = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .with_context(|| format!("{}: corrupt gzip data", path.display()))?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// Channels of a CSV image for a model input of shape `input`: one per
/// normalisation mean when given, else the input's channels (1 for flat inputs).
pub fn channels(input: polycert_deeppoly::Shape, mean: &[f64]) -> usize {
    if !mean.is_empty() {
        mean.len()
    } else if input.h > 1 {
        input.c
    } else {
        1
    }
}

/// Parses ERAN-style CSV text.
pub fn parse_csv(text: &str, name: &str, channels: usize, layout: Layout) -> Result<Vec<Image>> {
    let mut out = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let vals: Vec<&str> = line.split(',').collect();
        let label: usize =
            vals[0].trim().parse().with_context(|| format!("{name}:{}: bad label '{}'", ln + 1, vals[0]))?;
        let px: Vec<f64> = vals[1..]
            .iter()
            .map(|v| v.trim().parse::<f64>().map(|p| p / 255.0))
            .collect::<Result<_, _>>()
            .with_context(|| format!("{name}:{}: bad pixel value", ln + 1))?;
        if px.is_empty() || !px.len().is_multiple_of(channels) {
            bail!("{name}:{}: {} pixels do not split into {channels} channels", ln + 1, px.len());
        }
        if let Some(p) = px.iter().find(|p| !(0.0..=1.0).contains(*p)) {
            bail!("{name}:{}: pixel {} outside 0-255", ln + 1, p * 255.0);
        }
        let pixels = match layout {
            Layout::Chw => px,
            Layout::Hwc => {
                let hw = px.len() / channels;
                (0..px.len()).map(|i| px[(i % hw) * channels + i / hw]).collect()
            }
        };
        out.push(Image { label, pixels });
    }
    Ok(out)
}

fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Reads an IDX image file and its label file (given, or found by
/// replacing `images-idx3` with `labels-idx1` in the name).
pub fn load_idx(images: &Path, labels: Option<&Path>) -> Result<Vec<Image>> {
    let img = read_maybe_gz(images)?;
    idx3_dims(&img, &images.display().to_string())?;
    let lpath: PathBuf = match labels {
        Some(p) => p.to_path_buf(),
        None => {
            let s = images.to_string_lossy().replace("images-idx3", "labels-idx1");
            if s == images.to_string_lossy() {
                bail!("{}: give the label file with --labels", images.display());
            }
            PathBuf::from(s)
        }
    };
    let lab = read_maybe_gz(&lpath)?;
    parse_idx(&img, &lab, &images.display().to_string(), &lpath.display().to_string())
}

/// The image count and size of a complete IDX3 image file.
fn idx3_dims(img: &[u8], name: &str) -> Result<(usize, usize)> {
    if img.len() < 16 || be_u32(img, 0) != 0x0803 {
        bail!("{name}: not an IDX3 image file");
    }
    let (n, h, w) = (be_u32(img, 4) as usize, be_u32(img, 8) as usize, be_u32(img, 12) as usize);
    let size = h.checked_mul(w).filter(|&s| s > 0);
    let total = size.and_then(|s| s.checked_mul(n)).and_then(|t| t.checked_add(16));
    let (Some(size), Some(total)) = (size, total) else {
        bail!("{name}: {n} images of {h}x{w} is not a valid size");
    };
    if img.len() < total {
        bail!("{name}: truncated ({} bytes for {n} images of {h}x{w})", img.len());
    }
    Ok((n, size))
}

/// IDX3 images and IDX1 labels from memory (`name`, `lname` for messages).
pub fn parse_idx(img: &[u8], lab: &[u8], name: &str, lname: &str) -> Result<Vec<Image>> {
    let (n, size) = idx3_dims(img, name)?;
    if lab.len() < 8 || be_u32(lab, 0) != 0x0801 || lab.len() - 8 < n {
        bail!("{lname}: not an IDX1 label file with {n} labels");
    }
    Ok((0..n)
        .map(|i| Image {
            label: lab[8 + i] as usize,
            pixels: img[16 + i * size..16 + (i + 1) * size].iter().map(|&p| p as f64 / 255.0).collect(),
        })
        .collect())
}

/// Loads images by file type.
pub fn load(path: &Path, labels: Option<&Path>, channels: usize, layout: Layout) -> Result<Vec<Image>> {
    let s = path.to_string_lossy();
    if s.contains("idx") {
        load_idx(path, labels)
    } else {
        let bytes = read_maybe_gz(path)?;
        let text = String::from_utf8(bytes).with_context(|| format!("{s}: not UTF-8 text"))?;
        parse_csv(&text, &s, channels, layout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_hwc_to_chw() {
        let imgs = parse_csv("3,0,255,51,102\n", "t", 2, Layout::Hwc).unwrap();
        assert_eq!(imgs[0].label, 3);
        assert_eq!(imgs[0].pixels, vec![0.0, 0.2, 1.0, 0.4]);
        assert!(parse_csv("x,1\n", "t", 1, Layout::Chw).unwrap_err().to_string().contains("t:1"));
        assert!(parse_csv("1,300\n", "t", 1, Layout::Chw).is_err());
    }

    #[test]
    fn idx_round_trip() {
        let dir = std::env::temp_dir().join(format!("polycert-idx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut img = vec![0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2];
        img.extend([0u8, 255, 51, 0]);
        let lab = vec![0, 0, 8, 1, 0, 0, 0, 2, 7, 1];
        std::fs::write(dir.join("t-images-idx3-ubyte"), &img).unwrap();
        std::fs::write(dir.join("t-labels-idx1-ubyte"), &lab).unwrap();
        let v = load(&dir.join("t-images-idx3-ubyte"), None, 1, Layout::Chw).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].label, v[1].label), (7, 1));
        assert_eq!(v[1].pixels, vec![0.2, 0.0]);
        std::fs::write(dir.join("bad-images-idx3-ubyte"), &img[..18]).unwrap();
        assert!(
            load(&dir.join("bad-images-idx3-ubyte"), None, 1, Layout::Chw)
                .unwrap_err()
                .to_string()
                .contains("truncated")
        );
    }

    fn idx3(n: u32, h: u32, w: u32, pixels: &[u8]) -> Vec<u8> {
        [&0x0803u32.to_be_bytes()[..], &n.to_be_bytes(), &h.to_be_bytes(), &w.to_be_bytes(), pixels].concat()
    }

    #[test]
    fn idx_reads_and_rejects_bad_sizes_without_panicking() {
        let lab = [&0x0801u32.to_be_bytes()[..], &2u32.to_be_bytes(), &[3, 7]].concat();
        let imgs = parse_idx(&idx3(2, 1, 2, &[0, 255, 51, 102]), &lab, "i", "l").unwrap();
        assert_eq!(imgs[1], Image { label: 7, pixels: vec![0.2, 0.4] });
        // Sizes whose product overflows, zero-sized images, too few labels: errors.
        for (n, h, w) in [(u32::MAX, u32::MAX, u32::MAX), (1 << 31, 1 << 31, 4), (2, 0, 5)] {
            let e = parse_idx(&idx3(n, h, w, &[1, 2, 3]), &lab, "i", "l").unwrap_err();
            assert!(e.to_string().starts_with("i: "), "{e}");
        }
        assert!(parse_idx(&idx3(3, 1, 1, &[1, 2, 3]), &lab, "i", "l").unwrap_err().to_string().starts_with("l: "));
    }
}
