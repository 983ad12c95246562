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
    let (stride, pad) = window(node, kernel, (h, w))?;
    if node.int("ceil_mode", 0)? != 0 {
        // Same result as floor mode when the windows tile the padded input.
        let exact = |size: usize, p0: usize, p1: usize, k: usize, s: usize| {
            (size + p0 + p1).saturating_sub(k).is_multiple_of(s)
        };
        if !exact(h, pad.0, pad.2, kernel.0, stride.0) || !exact(w, pad.1, pad.3, kernel.1, stride.1) {
            return unsupported("ceil_mode=1 with windows that do not tile the input");
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

/// Pooling over the whole spatial extent.
pub(super) fn global_pool(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let (x, h, w) = input(imp, node)?;
    let p = Pool { kernel: (h, w), stride: (1, 1), pad: (0, 0, 0, 0) };
    let op = if node.op() == "GlobalMaxPool" { Op::MaxPool2d(p) } else { Op::AvgPool2d(p) };
    push(imp, node, op, &x)
}
