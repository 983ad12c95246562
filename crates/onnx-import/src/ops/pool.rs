//! AveragePool, MaxPool, GlobalAveragePool, GlobalMaxPool.

use super::linear::window;
use crate::graph::{Dyn, Importer, Node, OpResult, Value, unsupported};
use polycert_deeppoly::{Op, Pool};

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

/// Pooling over the whole spatial extent.
pub(super) fn global_pool(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let (x, h, w) = input(imp, node)?;
    let p = Pool { kernel: (h, w), stride: (1, 1), pad: (0, 0, 0, 0) };
    let op = if node.op() == "GlobalMaxPool" { Op::MaxPool2d(p) } else { Op::AvgPool2d(p) };
    push(imp, node, op, &x)
}
