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
pub(super) fn absorb(imp: &Importer, x: &Dyn, weight: Vec<f64>, out: usize) -> Vec<f64> {
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

/// `Y = A·B` with A the network value (rows of `K` values) and B a
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
    if last != k {
        return unsupported(format!("A has dims {:?}; its rows must have {k} values", x.dims));
    }
    // Several rows (a batch of vectors) share B: a block-diagonal layer.
    let rows: usize = lead.iter().product();
    if rows.saturating_mul(rows).saturating_mul(k * n) > super::MAX_WEIGHTS {
        return unsupported(format!(
            "A has dims {:?}: {rows} rows times a [{k}, {n}] matrix as one block-diagonal layer would exceed {} weights",
            x.dims,
            super::MAX_WEIGHTS
        ));
    }
    let mut dims = lead.to_vec();
    dims.push(n);
    if bt.dims.len() > dims.len() {
        dims = [vec![1; bt.dims.len() - dims.len()], dims].concat();
    }
    let weight = absorb(imp, &x, block_diagonal(&transposed(&bt, k, n), rows, k, n), rows * n);
    Ok(Pending::value(node, x.id, weight, vec![0.0; rows * n], dims))
}

/// `W[out][in]` (`n × k`) once per row of `rows`: out `(r, j)` reads in
/// `(r, i)` only.
fn block_diagonal(w: &[f64], rows: usize, k: usize, n: usize) -> Vec<f64> {
    if rows == 1 {
        return w.to_vec();
    }
    let cols = rows * k;
    let mut out = vec![0.0; rows * n * cols];
    for r in 0..rows {
        for (j, src) in w.chunks_exact(k).enumerate() {
            let at = (r * n + j) * cols + r * k;
            out[at..at + k].copy_from_slice(src);
        }
    }
    out
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
    if dilations(node, 2)? != (1, 1) {
        let d = node.sizes("dilations")?.unwrap_or_default();
        return unsupported(format!("dilations {d:?} (only 1 is supported)"));
    }
    window_of(node, kernel, input, 2)
}

/// The window of a 2-D window op with `dilations` `(y, x)` (`kernel` the
/// undilated one), and the dilations.
pub(super) fn dilated_window(
    node: &Node,
    kernel: (usize, usize),
    input: (usize, usize),
) -> OpResult<(Window, (usize, usize))> {
    let d = dilations(node, 2)?;
    let extent = ((kernel.0 - 1) * d.0 + 1, (kernel.1 - 1) * d.1 + 1);
    Ok((window_of(node, extent, input, 2)?, d))
}

/// `dilations` as `(y, x)`; a 1-D op's (`rank` 1) is `(1, d)`.
fn dilations(node: &Node, rank: usize) -> OpResult<(usize, usize)> {
    match (node.sizes("dilations")?.as_deref(), rank) {
        (None, _) => Ok((1, 1)),
        (Some(&[a, b]), 2) if a > 0 && b > 0 => Ok((a, b)),
        (Some(&[d]), 1) if d > 0 => Ok((1, d)),
        (Some(d), _) => Err(format!("dilations {d:?} are not {rank} positive values").into()),
    }
}

/// [`window`] for `rank` 1 or 2 spatial axes, with any dilation (`kernel`
/// is the dilated one). A 1-D op's window is a 2-D one of height 1.
fn window_of(node: &Node, kernel: (usize, usize), input: (usize, usize), rank: usize) -> OpResult<Window> {
    let stride = match (node.sizes("strides")?.as_deref(), rank) {
        (None, _) => (1, 1),
        (Some(&[a, b]), 2) if a > 0 && b > 0 => (a, b),
        (Some(&[a]), 1) if a > 0 => (1, a),
        (Some(s), _) => return Err(format!("strides {s:?} are not {rank} positive values").into()),
    };
    let auto = node.string("auto_pad")?.unwrap_or_default();
    let pads = match auto.as_str() {
        "" | "NOTSET" => match (node.sizes("pads")?.as_deref(), rank) {
            (None, _) => (0, 0, 0, 0),
            (Some(&[t, l, b, r]), 2) => (t, l, b, r),
            (Some(&[l, r]), 1) => (0, l, 0, r),
            (Some(p), _) => return Err(format!("pads {p:?} are not {} values", 2 * rank).into()),
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

/// The weights of a kernel `[m, c, kh, kw]` dilated by `(dy, dx)`: zeros
/// between the taps. A zero tap adds an exact 0 to the sum, so the
/// runtime's dilated sum is this kernel's sum in some order, which the
/// conv step's rounding bound (any order of its products) covers.
fn dilate(w: &[f64], (m, c, kh, kw): (usize, usize, usize, usize), (dy, dx): (usize, usize)) -> Vec<f64> {
    let (eh, ew) = ((kh - 1) * dy + 1, (kw - 1) * dx + 1);
    let mut out = vec![0.0; m * c * eh * ew];
    for mc in 0..m * c {
        for y in 0..kh {
            for x in 0..kw {
                out[(mc * eh + y * dy) * ew + x * dx] = w[(mc * kh + y) * kw + x];
            }
        }
    }
    out
}

/// 1-D and 2-D convolution with group 1 (a 1-D one as 2-D of height 1;
/// dilations as zeros between the taps: [`dilate`]).
pub(super) fn conv(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let (xn, wn) = (node.required(0)?, node.required(1)?);
    if imp.is_const(xn) || !imp.is_const(wn) {
        return unsupported("Conv needs X computed from the network input and constant weights W");
    }
    let x = imp.dynamic(xn)?;
    let (c, h, w, rank) = match x.dims[..] {
        [1, c, h, w] => (c, h, w, 2),
        [1, c, l] => (c, 1, l, 1),
        _ => {
            return unsupported(format!(
                "input dims {:?}; only 1-D and 2-D convolutions on a batch of one ([1,C,L] or [1,C,H,W]) are supported",
                x.dims
            ));
        }
    };
    let group = node.int("group", 1)?;
    if group != 1 {
        return unsupported(format!("group {group} (only group 1 is supported)"));
    }
    let wt = imp.weight(wn)?;
    let (m, wc, kh, kw) = match (&wt.dims[..], rank) {
        (&[m, wc, kh, kw], 2) => (m, wc, kh, kw),
        (&[m, wc, k], 1) => (m, wc, 1, k),
        (d, _) => return Err(format!("weights have dims {d:?}, expected [M, C, {}]", ["k", "kH, kW"][rank - 1]).into()),
    };
    if wc != c {
        return Err(format!("weights have {wc} input channels, the input has {c}").into());
    }
    if let Some(k) = node.sizes("kernel_shape")?
        && k != [kh, kw][2 - rank..]
    {
        return Err(format!("kernel_shape {k:?} does not match the weights' {:?}", &[kh, kw][2 - rank..]).into());
    }
    let (dy, dx) = dilations(node, rank)?;
    if (dy, dx) != (1, 1) && node.string("auto_pad")?.is_some_and(|a| a.starts_with("SAME")) {
        return unsupported("dilations with auto_pad SAME_UPPER or SAME_LOWER (onnxruntime does not run it either)");
    }
    let kernel = ((kh - 1) * dy + 1, (kw - 1) * dx + 1);
    let (stride, pad) = window_of(node, kernel, (h, w), rank)?;
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
    let weight = if (dy, dx) == (1, 1) { wt.data } else { dilate(&wt.data, (m, c, kh, kw), (dy, dx)) };
    let op = Op::Conv2d(Conv2d { weight, bias, c_out: m, kernel, stride, pad });
    let id = imp.push(node, "", op, &[x.id])?;
    let s = imp.net.node(id).shape;
    let dims = if rank == 1 { vec![1, s.c, s.w] } else { vec![1, s.c, s.h, s.w] };
    Ok(Value::Dyn(crate::graph::Dyn::new(id, dims)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_dilated_kernel_has_zeros_between_its_taps() {
        // One 2x2 kernel dilated by (2, 3): a 3x4 kernel.
        let w = super::dilate(&[1.0, 2.0, 3.0, 4.0], (1, 1, 2, 2), (2, 3));
        assert_eq!(w, [1.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 4.0]);
    }
}
