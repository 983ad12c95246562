//! ConvTranspose (group 1, dilation 1) as a Dense layer with the transposed
//! convolution's exact weights: small decoders and upsampling heads only
//! (the dense matrix is limited to [`MAX_WEIGHTS`] entries).

use super::MAX_WEIGHTS;
use crate::graph::{Importer, Node, OpResult, Pending, Value, unsupported};

pub(super) fn conv_transpose(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let (xn, wn) = (node.required(0)?, node.required(1)?);
    if imp.is_const(xn) || !imp.is_const(wn) {
        return unsupported("ConvTranspose needs X computed from the network input and constant weights W");
    }
    let x = imp.dynamic(xn)?;
    let &[1, c, h, w] = &x.dims[..] else {
        return unsupported(format!("input dims {:?}; only [1,C,H,W] is supported", x.dims));
    };
    check_attributes(node)?;
    let wt = imp.weight(wn)?;
    let &[wc, m, kh, kw] = &wt.dims[..] else {
        return Err(format!("weights have dims {:?}, expected [C, M, kH, kW]", wt.dims).into());
    };
    if wc != c {
        return Err(format!("weights have {wc} input channels, the input has {c}").into());
    }
    let g = Geometry::of(node, (c, h, w), (m, kh, kw))?;
    let (n_in, n_out) = (c * h * w, m * g.ho * g.wo);
    if n_in.saturating_mul(n_out) > MAX_WEIGHTS {
        return unsupported(format!(
            "a transposed convolution from {c}x{h}x{w} to {m}x{}x{} is too large for a dense layer \
             ({MAX_WEIGHTS} weights at most)",
            g.ho, g.wo
        ));
    }
    let weight = g.dense_weights(&wt.data);
    let bias = bias(imp, node, m, n_out, g.ho * g.wo)?;
    Ok(Pending::value(node, x.id, weight, bias, vec![1, m, g.ho, g.wo]))
}

/// Refuses the attributes this lowering does not cover (groups, dilations,
/// `output_shape`, SAME auto-padding).
fn check_attributes(node: &Node) -> OpResult<()> {
    if node.int("group", 1)? != 1 {
        return unsupported("group other than 1");
    }
    if node.sizes("dilations")?.is_some_and(|d| d.iter().any(|&v| v != 1)) {
        return unsupported("dilations other than 1");
    }
    if node.attr("output_shape").is_some() {
        return unsupported("the output_shape attribute (give pads instead)");
    }
    match node.string("auto_pad")?.as_deref() {
        None | Some("" | "NOTSET" | "VALID") => Ok(()),
        Some(a) => unsupported(format!("auto_pad {a}")),
    }
}

/// A transposed convolution's shapes: input `c×h×w`, kernel `m×kh×kw`,
/// strides, the top/left pads cropped, and the output `m×ho×wo`.
struct Geometry {
    c: usize,
    h: usize,
    w: usize,
    m: usize,
    kh: usize,
    kw: usize,
    sy: usize,
    sx: usize,
    pt: usize,
    pl: usize,
    ho: usize,
    wo: usize,
}

impl Geometry {
    /// Reads strides, pads and output_padding; the output is
    /// `s·(in − 1) + output_padding + k` less the pads.
    fn of(node: &Node, (c, h, w): (usize, usize, usize), (m, kh, kw): (usize, usize, usize)) -> OpResult<Self> {
        let (sy, sx) = match node.sizes("strides")?.as_deref() {
            None => (1, 1),
            Some(&[a, b]) if a > 0 && b > 0 => (a, b),
            Some(s) => return Err(format!("strides {s:?} are not two positive values").into()),
        };
        let (pt, pl, pb, pr) = match node.sizes("pads")?.as_deref() {
            None => (0, 0, 0, 0),
            Some(&[t, l, b, r]) => (t, l, b, r),
            Some(p) => return Err(format!("pads {p:?} are not four values").into()),
        };
        let (oph, opw) = match node.sizes("output_padding")?.as_deref() {
            None => (0, 0),
            Some(&[a, b]) => (a, b),
            Some(p) => return Err(format!("output_padding {p:?} is not two values").into()),
        };
        let full_h = sy * (h - 1) + oph + kh;
        let full_w = sx * (w - 1) + opw + kw;
        if pt + pb >= full_h || pl + pr >= full_w {
            return Err(format!("pads {:?} leave no output", (pt, pl, pb, pr)).into());
        }
        let (ho, wo) = (full_h - pt - pb, full_w - pl - pr);
        Ok(Self { c, h, w, m, kh, kw, sy, sx, pt, pl, ho, wo })
    }

    /// The dense `n_out × n_in` matrix: input pixel `(iy, ix)` adds its
    /// kernel, scaled, at output `(iy·sy + ky − pt, ix·sx + kx − pl)`.
    fn dense_weights(&self, kernel: &[f64]) -> Vec<f64> {
        let Self { c, h, w, m, kh, kw, sy, sx, pt, pl, ho, wo } = *self;
        let (n_in, n_out) = (c * h * w, m * ho * wo);
        let mut weight = vec![0.0; n_out * n_in];
        for ci in 0..c {
            for iy in 0..h {
                for ix in 0..w {
                    let i = (ci * h + iy) * w + ix;
                    for co in 0..m {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let (oy, ox) =
                                    ((iy * sy + ky) as isize - pt as isize, (ix * sx + kx) as isize - pl as isize);
                                if oy < 0 || ox < 0 || oy as usize >= ho || ox as usize >= wo {
                                    continue;
                                }
                                let o = (co * ho + oy as usize) * wo + ox as usize;
                                weight[o * n_in + i] += kernel[((ci * m + co) * kh + ky) * kw + kx];
                            }
                        }
                    }
                }
            }
        }
        weight
    }
}

/// The per-channel bias `B` (`m` values) spread over the `n_out` outputs,
/// `plane` per channel; zero when absent.
fn bias(imp: &Importer, node: &Node, m: usize, n_out: usize, plane: usize) -> OpResult<Vec<f64>> {
    match node.input(2) {
        None => Ok(vec![0.0; n_out]),
        Some(b) if imp.is_const(b) => {
            let bt = imp.weight(b)?;
            if bt.data.len() != m {
                return Err(format!("bias has {} values, expected {m}", bt.data.len()).into());
            }
            Ok((0..n_out).map(|o| bt.data[o / plane]).collect())
        }
        Some(_) => unsupported("the bias must be a constant"),
    }
}
