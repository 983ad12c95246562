//! ConvTranspose (group 1, dilation 1) as a Dense layer with the transposed
//! convolution's exact weights: small decoders and upsampling heads only
//! (the dense matrix is limited to [`MAX_WEIGHTS`] entries).

use crate::graph::{Importer, Node, OpResult, Pending, Value, unsupported};

/// Largest dense matrix a ConvTranspose becomes (`n_out × n_in`).
const MAX_WEIGHTS: usize = 1 << 22;

pub(super) fn conv_transpose(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let (xn, wn) = (node.required(0)?, node.required(1)?);
    if imp.is_const(xn) || !imp.is_const(wn) {
        return unsupported("ConvTranspose needs X computed from the network input and constant weights W");
    }
    let x = imp.dynamic(xn)?;
    let &[1, c, h, w] = &x.dims[..] else {
        return unsupported(format!("input dims {:?}; only [1,C,H,W] is supported", x.dims));
    };
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
        None | Some("" | "NOTSET" | "VALID") => {}
        Some(a) => return unsupported(format!("auto_pad {a}")),
    }
    let wt = imp.weight(wn)?;
    let &[wc, m, kh, kw] = &wt.dims[..] else {
        return Err(format!("weights have dims {:?}, expected [C, M, kH, kW]", wt.dims).into());
    };
    if wc != c {
        return Err(format!("weights have {wc} input channels, the input has {c}").into());
    }
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
    let (n_in, n_out) = (c * h * w, m * ho * wo);
    if n_in.saturating_mul(n_out) > MAX_WEIGHTS {
        return unsupported(format!(
            "a transposed convolution from {c}x{h}x{w} to {m}x{ho}x{wo} is too large for a dense layer \
             ({MAX_WEIGHTS} weights at most)"
        ));
    }
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
                            weight[o * n_in + i] += wt.data[((ci * m + co) * kh + ky) * kw + kx];
                        }
                    }
                }
            }
        }
    }
    let bias = match node.input(2) {
        None => vec![0.0; n_out],
        Some(b) if imp.is_const(b) => {
            let bt = imp.weight(b)?;
            if bt.data.len() != m {
                return Err(format!("bias has {} values, expected {m}", bt.data.len()).into());
            }
            (0..n_out).map(|o| bt.data[o / (ho * wo)]).collect()
        }
        Some(_) => return unsupported("the bias must be a constant"),
    };
    Ok(Pending::value(node, x.id, weight, bias, vec![1, m, ho, wo]))
}
