//! Gemm, MatMul and Conv: the layers with weight matrices.

use crate::graph::{Dyn, Importer, Node, OpError, OpResult, Pending, Value, unsupported};
use crate::tensor::Tensor;
use polycert_deeppoly::{Conv2d, Op};
use polycert_interval::{FloatModel, Interval, fp};

/// `W[out][in]` from a `[K, N]` matrix (MatMul, Gemm without transB).
fn transposed(b: &Tensor, k: usize, n: usize) -> Vec<f64> {
    let mut w = vec![0.0; k * n];
    for (kk, row) in b.data.chunks_exact(n).enumerate() {
        for (nn, &v) in row.iter().enumerate() {
            w[nn * k + kk] = v;
        }
    }
    w
}

/// `W[out][in]` over the IR node of `x`: a pending index map of `x` moves
/// the columns (exact; columns no element maps to stay zero).
fn absorb(imp: &Importer, x: &Dyn, weight: Vec<f64>, out: usize) -> Vec<f64> {
    let Some(index) = &x.index else { return weight };
    let (k, cols) = (index.len(), imp.net.node(x.id).shape.numel());
    let mut w = vec![0.0; out * cols];
    for (row, dst) in weight.chunks_exact(k).zip(w.chunks_exact_mut(cols)) {
        for (&v, &j) in row.iter().zip(index.iter()) {
            dst[j] = v;
        }
    }
    w
}

/// `Y = alpha·A'·B' + beta·C` with A the network value (one row) and B, C
/// constants: a Dense layer, left pending so that a following Add of a
/// constant can still become its bias.
pub(super) fn gemm(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let (a, b) = (node.required(0)?, node.required(1)?);
    let alpha = node.float("alpha", 1.0)? as f64;
    let beta = node.float("beta", 1.0)? as f64;
    let (ta, tb) = (node.int("transA", 0)? != 0, node.int("transB", 0)? != 0);
    if imp.is_const(a) || !imp.is_const(b) {
        return unsupported("Gemm needs A computed from the network input and B a constant weight matrix");
    }
    let x = imp.dynamic_reordered(a)?;
    let k = match (&x.dims[..], ta) {
        (&[1, k], false) | (&[k, 1], true) => k,
        (d, _) => {
            return unsupported(format!(
                "input A has dims {d:?} (transA={}); only a single row is supported",
                ta as u8
            ));
        }
    };
    let bt = imp.weight(b)?;
    let n = match (&bt.dims[..], tb) {
        (&[bk, n], false) if bk == k => n,
        (&[n, bk], true) if bk == k => n,
        (d, _) => {
            return Err(format!("B has dims {d:?} (transB={}), which does not match A's {k} columns", tb as u8).into());
        }
    };
    if n == 0 || k == 0 {
        return Err(format!("empty weight matrix {:?}", bt.dims).into());
    }
    let weight = absorb(imp, &x, if tb { bt.data } else { transposed(&bt, k, n) }, n);
    let bias = match node.input(2) {
        None => vec![0.0; n],
        Some(c) => {
            if !imp.is_const(c) {
                return unsupported("input C must be a constant");
            }
            imp.weight(c)?.broadcast_to(&[1, n]).map_err(|e| format!("C: {e}"))?
        }
    };
    if alpha == 1.0 && (beta == 1.0 || beta == 0.0) {
        let bias = if beta == 0.0 { vec![0.0; n] } else { bias };
        return Ok(Pending::value(node, x.id, weight, bias, vec![1, n]));
    }
    scaled_gemm(imp, node, x.id, weight, (alpha, beta, bias))
}

/// `fl(alpha·S) + fl(beta·C)` after the sum `S`, as a runtime computes it:
/// the Dense layer's sum, then a per-output affine `alpha·s + beta·c` that
/// pays two roundings, `beta·c` enclosed with its own float32 rounding.
fn scaled_gemm(
    imp: &mut Importer,
    node: &Node,
    x: polycert_deeppoly::NodeId,
    weight: Vec<f64>,
    (alpha, beta, c): (f64, f64, Vec<f64>),
) -> OpResult<Value> {
    let n = c.len();
    let sum = imp.push(node, ".sum", Op::Dense { weight, bias: vec![0.0; n], out: n }, &[x])?;
    let iv = |lo: f64, hi: f64| Interval::new(lo, hi).map_err(|e| OpError::Msg(format!("alpha/beta: {e}")));
    let one_rounding = FloatModel::F32.error_bound(1);
    let beta = iv(beta, beta)?;
    let mut add = Vec::with_capacity(n);
    for &v in &c {
        let bc = beta.mul_scalar(v);
        let e = one_rounding.of(bc.mag());
        add.push(iv(fp::sub_down(bc.lo(), e), fp::add_up(bc.hi(), e))?);
    }
    let op = Op::ChannelAffine { mul: vec![iv(alpha, alpha)?; n], add, float_ops: 2 };
    let id = imp.push(node, "", op, &[sum])?;
    Ok(Value::Dyn(Dyn::new(id, vec![1, n])))
}

/// `Y = A·B` with A the network value (a single row, leading dims 1) and B a
/// constant `[K, N]` matrix.
pub(super) fn matmul(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let (a, b) = (node.required(0)?, node.required(1)?);
    match (imp.is_const(a), imp.is_const(b)) {
        (true, false) => return matmul_left(imp, node, a, b),
        (false, true) => {}
        _ => {
            return unsupported(
                "MatMul needs one constant operand (the weights) and one computed from the network input",
            );
        }
    }
    let x = imp.dynamic_reordered(a)?;
    let bt = imp.weight(b)?;
    let (k, n) = match &bt.dims[..] {
        [lead @ .., k, n] if lead.iter().all(|&d| d == 1) => (*k, *n),
        d => return unsupported(format!("B has dims {d:?}; only a 2-D weight matrix is supported")),
    };
    if n == 0 || k == 0 {
        return Err(format!("empty weight matrix {:?}", bt.dims).into());
    }
    let Some((&last, lead)) = x.dims.split_last() else {
        return Err("A is a scalar".into());
    };
    if last != k || lead.iter().any(|&d| d != 1) {
        return unsupported(format!("A has dims {:?}; only a single row of {k} values is supported", x.dims));
    }
    let mut dims = lead.to_vec();
    dims.push(n);
    if bt.dims.len() > dims.len() {
        dims = [vec![1; bt.dims.len() - dims.len()], dims].concat();
    }
    let weight = absorb(imp, &x, transposed(&bt, k, n), n);
    Ok(Pending::value(node, x.id, weight, vec![0.0; n], dims))
}

/// `Y = W·x` with W a constant `[N, K]` matrix and x the network value, a
/// column `[K]` or `[K, 1]` (the layout of nn4sys and the VNN-COMP test nets).
fn matmul_left(imp: &mut Importer, node: &Node, a: &str, b: &str) -> OpResult<Value> {
    let wt = imp.weight(a)?;
    let x = imp.dynamic_reordered(b)?;
    let &[n, k] = &wt.dims[..] else {
        return unsupported(format!("constant A has dims {:?}; only a 2-D weight matrix is supported", wt.dims));
    };
    let dims = match x.dims[..] {
        [kk] if kk == k => vec![n],
        [kk, 1] if kk == k => vec![n, 1],
        _ => {
            return unsupported(format!(
                "B has dims {:?}; with a constant A of dims [{n}, {k}] only a column [{k}] or [{k}, 1] is supported",
                x.dims
            ));
        }
    };
    if n == 0 || k == 0 {
        return Err(format!("empty weight matrix {:?}", wt.dims).into());
    }
    let weight = absorb(imp, &x, wt.data, n);
    Ok(Pending::value(node, x.id, weight, vec![0.0; n], dims))
}

/// Strides `(y, x)` and pads `(top, left, bottom, right)`.
pub(super) type Window = ((usize, usize), (usize, usize, usize, usize));

/// The window of a 2-D window op, from `strides`, `pads`, `auto_pad`;
/// dilations must be 1.
pub(super) fn window(node: &Node, kernel: (usize, usize), input: (usize, usize)) -> OpResult<Window> {
    if let Some(d) = node.sizes("dilations")?
        && d.iter().any(|&x| x != 1)
    {
        return unsupported(format!("dilations {d:?} (only 1 is supported)"));
    }
    let stride = match node.sizes("strides")?.as_deref() {
        None => (1, 1),
        Some(&[a, b]) if a > 0 && b > 0 => (a, b),
        Some(s) => return Err(format!("strides {s:?} are not two positive values").into()),
    };
    let auto = node.string("auto_pad")?.unwrap_or_default();
    let pads = match auto.as_str() {
        "" | "NOTSET" => match node.sizes("pads")?.as_deref() {
            None => (0, 0, 0, 0),
            Some(&[t, l, b, r]) => (t, l, b, r),
            Some(p) => return Err(format!("pads {p:?} are not four values").into()),
        },
        "VALID" => (0, 0, 0, 0),
        "SAME_UPPER" | "SAME_LOWER" => {
            let same = |size: usize, k: usize, s: usize| {
                let out = size.div_ceil(s);
                let total = ((out.saturating_sub(1)) * s + k).saturating_sub(size);
                if auto == "SAME_UPPER" { (total / 2, total - total / 2) } else { (total - total / 2, total / 2) }
            };
            let (t, b) = same(input.0, kernel.0, stride.0);
            let (l, r) = same(input.1, kernel.1, stride.1);
            (t, l, b, r)
        }
        other => return Err(format!("auto_pad '{other}' is not valid").into()),
    };
    Ok((stride, pads))
}

/// 2-D convolution with group 1 and dilation 1.
pub(super) fn conv(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let (xn, wn) = (node.required(0)?, node.required(1)?);
    if imp.is_const(xn) || !imp.is_const(wn) {
        return unsupported("Conv needs X computed from the network input and constant weights W");
    }
    let x = imp.dynamic(xn)?;
    let &[1, c, h, w] = &x.dims[..] else {
        return unsupported(format!(
            "input dims {:?}; only 2-D convolutions on a batch of one [1,C,H,W] are supported",
            x.dims
        ));
    };
    let group = node.int("group", 1)?;
    if group != 1 {
        return unsupported(format!("group {group} (only group 1 is supported)"));
    }
    let wt = imp.weight(wn)?;
    let &[m, wc, kh, kw] = &wt.dims[..] else {
        return Err(format!("weights have dims {:?}, expected [M, C, kH, kW]", wt.dims).into());
    };
    if wc != c {
        return Err(format!("weights have {wc} input channels, the input has {c}").into());
    }
    if let Some(k) = node.sizes("kernel_shape")?
        && k != [kh, kw]
    {
        return Err(format!("kernel_shape {k:?} does not match the weights' {kh}x{kw}").into());
    }
    let (stride, pad) = window(node, (kh, kw), (h, w))?;
    let bias = match node.input(2) {
        None => vec![0.0; m],
        Some(b) if imp.is_const(b) => {
            let bt = imp.weight(b)?;
            if bt.data.len() != m {
                return Err(format!("bias has {} values, expected {m}", bt.data.len()).into());
            }
            bt.data
        }
        Some(_) => return unsupported("the bias must be a constant"),
    };
    let op = Op::Conv2d(Conv2d { weight: wt.data, bias, c_out: m, kernel: (kh, kw), stride, pad });
    let id = imp.push(node, "", op, &[x.id])?;
    let s = imp.net.node(id).shape;
    Ok(Value::Dyn(crate::graph::Dyn::new(id, vec![1, s.c, s.h, s.w])))
}
