//! AveragePool, MaxPool, GlobalAveragePool, GlobalMaxPool.
//!
//! A dilated MaxPool gathers each window's taps into a block of its own
//! (an exact 0/1 dense layer; a tap in the padding repeats one inside the
//! window, which leaves the max unchanged), then pools the blocks.

use super::linear::{dilated_window, window};
use crate::graph::{Dyn, Importer, Node, OpResult, Value, push_selection, unsupported};
use polycert_deeppoly::{Op, Pool, Shape};

/// The `[1, C, H, W]` network input of a pooling node.
fn input(imp: &mut Importer, node: &Node) -> OpResult<(Dyn, usize, usize)> {
    let xn = node.required(0)?;
    if imp.is_const(xn) {
        return unsupported("pooling of a constant");
    }
    let x = imp.dynamic(xn)?;
    match x.dims[..] {
        [1, _, h, w] => Ok((x, h, w)),
        _ => unsupported(format!("input dims {:?}; only 2-D pooling of [1,C,H,W] is supported", x.dims)),
    }
}

fn push(imp: &mut Importer, node: &Node, op: Op, x: &Dyn) -> OpResult<Value> {
    let id = imp.push(node, "", op, &[x.id])?;
    let s = imp.net.node(id).shape;
    Ok(Value::Dyn(Dyn::new(id, vec![1, s.c, s.h, s.w])))
}

pub(super) fn pool(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let (x, h, w) = input(imp, node)?;
    let kernel = match node.sizes("kernel_shape")?.as_deref() {
        Some(&[kh, kw]) if kh > 0 && kw > 0 => (kh, kw),
        Some(k) => return unsupported(format!("kernel_shape {k:?} (only 2-D windows are supported)")),
        None => return Err("missing attribute 'kernel_shape'".into()),
    };
    if node.op() == "MaxPool" && node.sizes("dilations")?.is_some_and(|d| d.iter().any(|&v| v != 1)) {
        return dilated_max(imp, node, &x, kernel, (h, w));
    }
    let (stride, mut pad) = window(node, kernel, (h, w))?;
    if node.int("ceil_mode", 0)? != 0 {
        let extra =
            (ceil_extra(h, (pad.0, pad.2), kernel.0, stride.0), ceil_extra(w, (pad.1, pad.3), kernel.1, stride.1));
        if extra != (0, 0) {
            if node.op() != "MaxPool" {
                return unsupported("AveragePool with ceil_mode=1 and windows that do not tile the input");
            }
            // A max ignores padding: the last, partial windows are windows
            // over more end padding.
            (pad.2, pad.3) = (pad.2 + extra.0, pad.3 + extra.1);
        }
    }
    let p = Pool { kernel, stride, pad };
    if node.op() == "MaxPool" {
        push(imp, node, Op::MaxPool2d(p), &x)
    } else {
        if pad != (0, 0, 0, 0) {
            return unsupported(format!(
                "AveragePool with padding {pad:?} (only unpadded average pooling is supported)"
            ));
        }
        push(imp, node, Op::AvgPool2d(p), &x)
    }
}

/// The end padding that `ceil_mode` adds along one axis of `size` (pads
/// `p`, kernel `k`, stride `s`): the output has `ceil((size + p − k)/s) + 1`
/// windows, less a last one that would start in the end padding (as
/// onnxruntime and PyTorch count them).
fn ceil_extra(size: usize, (p0, p1): (usize, usize), k: usize, s: usize) -> usize {
    let span = size + p0 + p1;
    if span < k {
        return 0;
    }
    let mut out = (span - k).div_ceil(s) + 1;
    if (out - 1) * s >= size + p0 {
        out -= 1;
    }
    ((out - 1) * s + k).saturating_sub(span)
}

/// MaxPool with dilations: each output's taps copied into a `kh×kw` block,
/// then a max over each block.
fn dilated_max(imp: &mut Importer, node: &Node, x: &Dyn, k: (usize, usize), (h, w): (usize, usize)) -> OpResult<Value> {
    let (((sy, sx), (pt, pl, pb, pr)), (dy, dx)) = dilated_window(node, k, (h, w))?;
    if node.int("ceil_mode", 0)? != 0 {
        return unsupported("MaxPool with dilations and ceil_mode=1");
    }
    let c = imp.net.node(x.id).shape.c;
    let ext = ((k.0 - 1) * dy + 1, (k.1 - 1) * dx + 1);
    if h + pt + pb < ext.0 || w + pl + pr < ext.1 {
        return Err(format!(
            "the dilated window {ext:?} is larger than the padded input {:?}",
            (h + pt + pb, w + pl + pr)
        )
        .into());
    }
    let (oh, ow) = ((h + pt + pb - ext.0) / sy + 1, (w + pl + pr - ext.1) / sx + 1);
    let (n_in, n_out) = (c * h * w, c * oh * k.0 * ow * k.1);
    if n_in.saturating_mul(n_out) > super::MAX_WEIGHTS {
        return unsupported(format!("MaxPool with dilations over {n_in} values is too large for its gather layer"));
    }
    let mut src = vec![0; n_out];
    for ci in 0..c {
        for (oy, ox) in (0..oh).flat_map(|oy| (0..ow).map(move |ox| (oy, ox))) {
            let taps: Vec<Option<usize>> = (0..k.0 * k.1)
                .map(|t| {
                    let (iy, ix) = (
                        (oy * sy + (t / k.1) * dy) as isize - pt as isize,
                        (ox * sx + (t % k.1) * dx) as isize - pl as isize,
                    );
                    ((0..h as isize).contains(&iy) && (0..w as isize).contains(&ix))
                        .then(|| (iy as usize) * w + ix as usize)
                })
                .collect();
            let Some(&inside) = taps.iter().flatten().next() else {
                return unsupported("MaxPool with dilations and a window wholly in the padding");
            };
            for (t, tap) in taps.iter().enumerate() {
                let row = (ci * oh * k.0 + oy * k.0 + t / k.1) * ow * k.1 + ox * k.1 + t % k.1;
                src[row] = ci * h * w + tap.unwrap_or(inside);
            }
        }
    }
    let gathered = push_selection(&mut imp.net, format!("{}.taps", node.name), x.id, &src)?;
    let blocks = imp.net.reshape(format!("{}.blocks", node.name), gathered, Shape::new(c, oh * k.0, ow * k.1))?;
    let p = Pool { kernel: k, stride: k, pad: (0, 0, 0, 0) };
    let id = imp.push(node, "", Op::MaxPool2d(p), &[blocks])?;
    Ok(Value::Dyn(Dyn::new(id, vec![1, c, oh, ow])))
}

/// Pooling over the whole spatial extent.
pub(super) fn global_pool(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let (x, h, w) = input(imp, node)?;
    let p = Pool { kernel: (h, w), stride: (1, 1), pad: (0, 0, 0, 0) };
    let op = if node.op() == "GlobalMaxPool" { Op::MaxPool2d(p) } else { Op::AvgPool2d(p) };
    push(imp, node, op, &x)
}
