//! Self-contained ONNX import tests: models are built here with prost, then
//! imported and run with polycert's own inference (failures: `import_errors.rs`).

mod common;

use common::*;
use polycert_deeppoly::base::eval::eval;
use polycert_deeppoly::{Op, Shape};
use polycert_onnx::{ImportError, load_onnx};

fn f64s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

fn close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "value {i}: {x} vs {y}\n{a:?}\n{b:?}");
    }
}

/// Naive `y = W x + b` with `W` row-major `[out][in]`.
fn dense(w: &[f64], b: &[f64], x: &[f64]) -> Vec<f64> {
    b.iter()
        .enumerate()
        .map(|(i, &bi)| bi + x.iter().enumerate().map(|(j, &xj)| w[i * x.len() + j] * xj).sum::<f64>())
        .collect()
}

#[test]
fn gemm_mlp_with_alpha_beta_and_transposes() {
    let (w1, b1) = (values(12, 1), values(3, 2));
    let (w2, c2) = (values(6, 3), values(2, 4)); // w2 is [K=3, N=2] (transB = 0)
    let nodes = vec![
        node("Flatten", "flat", &["x"], &["f"], vec![attr_i("axis", 1)]),
        node("Gemm", "fc1", &["f", "W1", "B1"], &["h"], vec![attr_i("transB", 1)]),
        node("Relu", "relu1", &["h"], &["r"], vec![]),
        node("Gemm", "fc2", &["r", "W2", "C2"], &["y"], vec![attr_f("alpha", 2.0), attr_f("beta", 0.5)]),
    ];
    let inits = vec![
        raw_floats("W1", &[3, 4], &w1),
        floats("B1", &[3], &b1),
        floats("W2", &[3, 2], &w2),
        floats("C2", &[1, 2], &c2),
    ];
    let m = import(&model(&[1, 4], nodes, inits, 13));
    // alpha and beta are applied after the sum, as the runtime does (and
    // pays for): a Dense layer, then a per-output affine with two roundings.
    assert_eq!(kinds(&m), ["Input", "Dense", "Relu", "Dense", "ChannelAffine"]);
    assert!(matches!(m.network.node(4).op, Op::ChannelAffine { float_ops: 2, .. }));
    assert_eq!(m.network.node(1).name, "fc1");
    assert_eq!(m.network.input_shape(), Shape::flat(4));
    assert_eq!((m.n_inputs(), m.n_outputs()), (4, 2));
    let x = f64s(&values(4, 9));
    let h: Vec<f64> = dense(&f64s(&w1), &f64s(&b1), &x).into_iter().map(|v| v.max(0.0)).collect();
    let w2t: Vec<f64> =
        (0..2).flat_map(|n| (0..3).map(move |k| (k, n))).map(|(k, n)| 2.0 * w2[k * 2 + n] as f64).collect();
    let want = dense(&w2t, &c2.iter().map(|&c| 0.5 * c as f64).collect::<Vec<_>>(), &h);
    close(&eval::<f64>(&m.network, &x), &want, 1e-12);
}

#[test]
fn matmul_then_add_becomes_one_dense_layer() {
    let (w, b) = (values(6, 5), values(2, 6));
    let nodes =
        vec![node("MatMul", "mm", &["x", "W"], &["t"], vec![]), node("Add", "bias", &["t", "B"], &["y"], vec![])];
    let m = import(&model(&[1, 3], nodes, vec![floats("W", &[3, 2], &w), floats("B", &[2], &b)], 11));
    assert_eq!(kinds(&m), ["Input", "Dense"]);
    let Op::Dense { bias, out, .. } = &m.network.node(1).op else { panic!() };
    assert_eq!((*out, bias.clone()), (2, f64s(&b)));
    let x = f64s(&values(3, 7));
    let wt: Vec<f64> = (0..2).flat_map(|n| (0..3).map(move |k| (k, n))).map(|(k, n)| w[k * 2 + n] as f64).collect();
    close(&eval::<f64>(&m.network, &x), &dense(&wt, &f64s(&b), &x), 1e-12);

    // A MatMul whose result is also used elsewhere keeps a separate bias layer.
    let nodes = vec![
        node("MatMul", "mm", &["x", "W"], &["t"], vec![]),
        node("Add", "bias", &["t", "B"], &["u"], vec![]),
        node("Add", "res", &["t", "u"], &["y"], vec![]),
    ];
    let m = import(&model(&[1, 3], nodes, vec![floats("W", &[3, 2], &w), floats("B", &[2], &b)], 11));
    assert_eq!(kinds(&m), ["Input", "Dense", "ChannelAffine", "Add"]);
}

/// Naive ONNX Conv on `[C,H,W]` with weights `[M][C][k][k]`.
fn conv(
    x: &[f64],
    (c, h, w): (usize, usize, usize),
    wt: &[f64],
    b: &[f64],
    k: usize,
    s: usize,
    p: usize,
) -> (Vec<f64>, (usize, usize, usize)) {
    let m = b.len();
    let (oh, ow) = ((h + 2 * p - k) / s + 1, (w + 2 * p - k) / s + 1);
    let mut y = vec![0.0; m * oh * ow];
    for o in 0..m {
        for i in 0..oh {
            for j in 0..ow {
                let mut acc = b[o];
                for ci in 0..c {
                    for ky in 0..k {
                        for kx in 0..k {
                            let (yy, xx) = ((i * s + ky) as isize - p as isize, (j * s + kx) as isize - p as isize);
                            if yy >= 0 && xx >= 0 && (yy as usize) < h && (xx as usize) < w {
                                acc +=
                                    wt[((o * c + ci) * k + ky) * k + kx] * x[(ci * h + yy as usize) * w + xx as usize];
                            }
                        }
                    }
                }
                y[(o * oh + i) * ow + j] = acc;
            }
        }
    }
    (y, (m, oh, ow))
}

#[test]
fn conv_batchnorm_pool_residual_network() {
    let (w1, b1) = (values(3 * 2 * 9, 11), values(3, 12));
    let (gamma, beta, mean) = (values(3, 13), values(3, 14), values(3, 15));
    let var: Vec<f32> = values(3, 16).iter().map(|v| v.abs() + 0.5).collect();
    let (w2, b2) = (values(9, 17), values(3, 18));
    let (wf, bf) = (values(6, 19), values(2, 20));
    let nodes = vec![
        node(
            "Conv",
            "conv1",
            &["x", "W1", "B1"],
            &["c1"],
            vec![attr_ints("pads", &[1, 1, 1, 1]), attr_ints("kernel_shape", &[3, 3])],
        ),
        node("BatchNormalization", "bn", &["c1", "g", "be", "mu", "var"], &["n1"], vec![attr_f("epsilon", 1e-3)]),
        node("Relu", "relu", &["n1"], &["r1"], vec![]),
        node(
            "MaxPool",
            "pool",
            &["r1"],
            &["p"],
            vec![attr_ints("kernel_shape", &[2, 2]), attr_ints("strides", &[2, 2])],
        ),
        node("Conv", "conv2", &["p", "W2", "B2"], &["q"], vec![attr_s("auto_pad", "SAME_UPPER")]),
        node("Add", "res", &["p", "q"], &["s"], vec![]),
        node("GlobalAveragePool", "gap", &["s"], &["g1"], vec![]),
        node("Flatten", "flat", &["g1"], &["f"], vec![]),
        node("Gemm", "fc", &["f", "Wf", "Bf"], &["y"], vec![attr_i("transB", 1)]),
        node("Sigmoid", "dead", &["f"], &["unused"], vec![]), // not on the output's path
    ];
    let inits = vec![
        floats("W1", &[3, 2, 3, 3], &w1),
        floats("B1", &[3], &b1),
        floats("g", &[3], &gamma),
        floats("be", &[3], &beta),
        floats("mu", &[3], &mean),
        floats("var", &[3], &var),
        floats("W2", &[3, 3, 1, 1], &w2),
        floats("B2", &[3], &b2),
        floats("Wf", &[2, 3], &wf),
        floats("Bf", &[2], &bf),
    ];
    let m = import(&model(&[1, 2, 6, 6], nodes, inits, 9));
    assert_eq!(
        kinds(&m),
        ["Input", "Conv2d", "ChannelAffine", "Relu", "MaxPool2d", "Conv2d", "Add", "AvgPool2d", "Dense"]
    );
    assert_eq!(m.network.input_shape(), Shape::new(2, 6, 6));
    let Op::ChannelAffine { mul, add, float_ops } = &m.network.node(2).op else { panic!() };
    assert!(*float_ops >= 4);

    let x = f64s(&values(72, 21));
    let (c1, s1) = conv(&x, (2, 6, 6), &f64s(&w1), &f64s(&b1), 3, 1, 1);
    let mut r1 = c1.clone();
    for ch in 0..3 {
        let sc = gamma[ch] as f64 / (var[ch] as f64 + 1e-3f32 as f64).sqrt();
        assert!(mul[ch].contains(sc) && mul[ch].width() < 1e-14, "{:?} vs {sc}", mul[ch]);
        let sh = beta[ch] as f64 - mean[ch] as f64 * sc;
        assert!((add[ch].midpoint() - sh).abs() < 1e-14);
        for v in &mut r1[ch * 36..(ch + 1) * 36] {
            *v = (*v * sc + sh).max(0.0);
        }
    }
    assert_eq!(s1, (3, 6, 6));
    let p: Vec<f64> = (0..3)
        .flat_map(|c| (0..3).flat_map(move |i| (0..3).map(move |j| (c, i, j))))
        .map(|(c, i, j)| {
            let at = |y: usize, x: usize| r1[(c * 6 + 2 * i + y) * 6 + 2 * j + x];
            at(0, 0).max(at(0, 1)).max(at(1, 0)).max(at(1, 1))
        })
        .collect();
    let (q, _) = conv(&p, (3, 3, 3), &f64s(&w2), &f64s(&b2), 1, 1, 0);
    let gap: Vec<f64> = (0..3).map(|c| (0..9).map(|k| p[c * 9 + k] + q[c * 9 + k]).sum::<f64>() / 9.0).collect();
    close(&eval::<f64>(&m.network, &x), &dense(&f64s(&wf), &f64s(&bf), &gap), 1e-9);
}

#[test]
fn constant_arithmetic_is_enclosed_exactly_or_outward() {
    let nodes = vec![
        node("Sub", "sub", &["x", "m"], &["a"], vec![]),
        node("Div", "div", &["a", "s"], &["b"], vec![]),
        node("Mul", "mul", &["b", "k"], &["c"], vec![]),
        node("Add", "add", &["c", "k"], &["d"], vec![]),
        node("Sub", "rsub", &["m", "d"], &["y"], vec![]),
    ];
    let inits = vec![
        floats("m", &[3, 1, 1], &[0.1, 0.2, 0.3]),
        floats("s", &[1, 3, 1, 1], &[3.0, 0.7, 2.0]),
        floats("k", &[], &[1.5]),
    ];
    let m = import(&model(&[1, 3, 2, 2], nodes, inits, 13));
    assert_eq!(
        kinds(&m),
        ["Input", "ChannelAffine", "ChannelAffine", "ChannelAffine", "ChannelAffine", "ChannelAffine"]
    );
    let aff = |i: usize| match &m.network.node(i).op {
        Op::ChannelAffine { mul, add, float_ops } => (mul.clone(), add.clone(), *float_ops),
        _ => panic!(),
    };
    let (mul, add, ops) = aff(1);
    assert_eq!(ops, 1);
    assert!(mul.iter().all(|i| i.lo() == 1.0 && i.hi() == 1.0));
    assert_eq!(add[0].lo(), -(0.1f32 as f64));
    assert_eq!(add[0].hi(), -(0.1f32 as f64));
    let (mul, _, _) = aff(2);
    // 1/3 is not an f64: the two neighbours, one of them the nearest.
    assert!(mul[0].lo().next_up() == mul[0].hi() && (mul[0].lo() == 1.0 / 3.0 || mul[0].hi() == 1.0 / 3.0));
    assert!(mul[0].lo().mul_add(3.0, -1.0) < 0.0 && mul[0].hi().mul_add(3.0, -1.0) > 0.0);
    assert_eq!((mul[2].lo(), mul[2].hi()), (0.5, 0.5));
    let (mul, add, _) = aff(5);
    assert_eq!((mul[1].lo(), add[1].lo()), (-1.0, 0.2f32 as f64));
    let x: Vec<f64> = f64s(&values(12, 3));
    let want: Vec<f64> = x
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let (mc, sc) = ([0.1f32, 0.2, 0.3][i / 4] as f64, [3.0f32, 0.7, 2.0][i / 4] as f64);
            mc - ((v - mc) / sc * 1.5 + 1.5)
        })
        .collect();
    close(&eval::<f64>(&m.network, &x), &want, 1e-12);
}

#[test]
fn shape_chains_fold_into_a_constant_reshape() {
    // Shape -> Gather(0) -> Unsqueeze -> Concat([-1]) -> Reshape, as PyTorch
    // exports `x.view(x.size(0), -1)`; opset 11 (axes attribute) and 13
    // (axes input).
    for opset in [11, 13] {
        let unsq = if opset < 13 {
            node("Unsqueeze", "unsq", &["n"], &["n1"], vec![attr_ints("axes", &[0])])
        } else {
            node("Unsqueeze", "unsq", &["n", "ax"], &["n1"], vec![])
        };
        let nodes = vec![
            node("Shape", "shape", &["x"], &["s"], vec![]),
            node("Constant", "zero", &[], &["z"], vec![attr_t("value", int64s("", &[0], true))]),
            node("Gather", "gather", &["s", "z0"], &["n"], vec![attr_i("axis", 0)]),
            unsq,
            node("Concat", "cat", &["n1", "minus1"], &["shp"], vec![attr_i("axis", 0)]),
            node("Reshape", "reshape", &["x", "shp"], &["f"], vec![]),
            node("MatMul", "fc", &["f", "W"], &["y"], vec![]),
        ];
        let mut z0 = int64s("z0", &[0], false);
        z0.dims.clear(); // a scalar index
        let inits =
            vec![z0, int64s("minus1", &[-1], true), int64s("ax", &[0], false), floats("W", &[16, 3], &values(48, 1))];
        let m = import(&model(&[1, 1, 4, 4], nodes, inits, opset));
        assert_eq!(kinds(&m), ["Input", "Reshape", "Dense"], "opset {opset}");
        assert_eq!(m.network.node(1).shape, Shape::flat(16));
        assert_eq!(m.output_dims, vec![1, 3]);
    }
}

#[test]
fn nhwc_input_transpose_becomes_an_input_permutation() {
    let w = values(2 * 12, 4);
    let nodes = vec![
        node("Transpose", "to_nchw", &["x"], &["t"], vec![attr_ints("perm", &[0, 3, 1, 2])]),
        node("Flatten", "flat", &["t"], &["f"], vec![]),
        node("Gemm", "fc", &["f", "W"], &["y"], vec![attr_i("transB", 1)]),
    ];
    let m = import(&model(&[-1, 2, 3, 2], nodes, vec![floats("W", &[2, 12], &w)], 13));
    assert_eq!(m.network.input_shape(), Shape::new(2, 2, 3));
    let perm = m.input_permutation.clone().expect("permutation");
    assert_eq!(&perm[..4], &[0, 2, 4, 6]);
    let x_nhwc = f64s(&values(12, 8));
    let x_nchw: Vec<f64> = (0..2)
        .flat_map(|c| (0..2).flat_map(move |h| (0..3).map(move |w| (c, h, w))))
        .map(|(c, h, w)| x_nhwc[(h * 3 + w) * 2 + c])
        .collect();
    let want = dense(&f64s(&w), &[0.0, 0.0], &x_nchw);
    close(&eval::<f64>(&m.network, &m.to_ir_input(&x_nhwc)), &want, 1e-12);

    // A transpose that only moves unit axes keeps the data: a reshape.
    let nodes = vec![
        node("Transpose", "t", &["x"], &["t"], vec![attr_ints("perm", &[0, 2, 1])]),
        node("Relu", "r", &["t"], &["y"], vec![]),
    ];
    let m = import(&model(&[1, 6, 1], nodes, vec![], 9));
    assert_eq!(m.input_permutation, None);
    assert_eq!(m.output_dims, vec![1, 1, 6]);
    // One that moves data is an index map: here, at the output, an exact 0/1 layer.
    let nodes = vec![
        node("Transpose", "swap", &["x"], &["t"], vec![attr_ints("perm", &[0, 2, 1])]),
        node("Relu", "r", &["t"], &["y"], vec![]),
    ];
    let m = import(&model(&[1, 2, 3], nodes, vec![], 9));
    assert_eq!(m.output_dims, vec![1, 3, 2]);
    let x = [1.0, -2.0, 3.0, 4.0, 5.0, -6.0];
    assert_eq!(eval::<f64>(&m.network, &x), [1.0, 4.0, 0.0, 5.0, 3.0, 0.0]);
    // Too large for a layer of its own and no consumer to absorb it: refused, naming the value.
    let nodes = vec![
        node("Transpose", "swap", &["x"], &["t"], vec![attr_ints("perm", &[0, 2, 1])]),
        node("Relu", "r", &["t"], &["y"], vec![]),
    ];
    let e = import_err(&model(&[1, 64, 65], nodes, vec![], 9));
    let msg = e.to_string();
    assert!(msg.contains("bad.onnx") && msg.contains("'y'") && msg.contains("4160"), "{msg}");
}

#[test]
fn weight_encodings_agree() {
    let w = [0.5f32, -1.25, 2.0, 0.375, -0.0625, 3.0];
    let f16: Vec<i32> = [0x3800, 0xbd00, 0x4000, 0x3600, 0xac00, 0x4200].to_vec();
    let mut half = floats("W", &[2, 3], &[]);
    half.data_type = polycert_onnx::onnx_pb::tensor_proto::DataType::Float16 as i32;
    half.int32_data = f16;
    let dw: Vec<f64> = w.iter().map(|&v| v as f64).collect();
    let encodings = [
        floats("W", &[2, 3], &w),
        raw_floats("W", &[2, 3], &w),
        doubles("W", &[2, 3], &dw, false),
        doubles("W", &[2, 3], &dw, true),
        half,
    ];
    for t in encodings {
        let nodes = vec![node("Gemm", "fc", &["x", "W"], &["y"], vec![attr_i("transB", 1)])];
        let m = import(&model(&[1, 3], nodes, vec![t], 9));
        let Op::Dense { weight, .. } = &m.network.node(1).op else { panic!() };
        assert_eq!(weight, &dw);
    }
}

#[test]
fn concat_and_average_pool() {
    let nodes = vec![
        node("Conv", "a", &["x", "Wa"], &["ca"], vec![]),
        node("Conv", "b", &["x", "Wb"], &["cb"], vec![]),
        node("Concat", "cat", &["ca", "cb"], &["c"], vec![attr_i("axis", 1)]),
        node(
            "AveragePool",
            "avg",
            &["c"],
            &["y"],
            vec![attr_ints("kernel_shape", &[2, 2]), attr_ints("strides", &[2, 2])],
        ),
    ];
    let inits = vec![floats("Wa", &[1, 1, 1, 1], &[2.0]), floats("Wb", &[2, 1, 1, 1], &[1.0, -1.0])];
    let m = import(&model(&[1, 1, 4, 4], nodes, inits, 13));
    assert_eq!(kinds(&m), ["Input", "Conv2d", "Conv2d", "Concat", "AvgPool2d"]);
    assert_eq!(m.network.output_shape(), Shape::new(3, 2, 2));
    let x: Vec<f64> = (0..16).map(f64::from).collect();
    let y = eval::<f64>(&m.network, &x);
    assert_eq!(&y[..4], &[5.0, 9.0, 21.0, 25.0]);
    assert_eq!(&y[8..], &[-2.5, -4.5, -10.5, -12.5]);
}

/// Zero `Pad` (opset 11+ input form and opset 10 attribute form) then an
/// average pool: the padded positions are zeros, the rest the input.
#[test]
fn zero_pad_then_average_pool() {
    let x: Vec<f64> = (0..2 * 2 * 3).map(|v| f64::from(v) - 5.0).collect();
    let padded = |c: usize, y: usize, xx: usize| -> f64 {
        // pads: 1 row on top, 0 left, 0 bottom, 2 columns right: 3 x 5 per channel.
        if y == 0 || xx >= 3 { 0.0 } else { x[(c * 2 + y - 1) * 3 + xx] }
    };
    let pool = |attrs| node("AveragePool", "avg", &["p"], &["y"], attrs);
    let k = || vec![attr_ints("kernel_shape", &[1, 1])];
    for opset in [13, 10] {
        let (pad, inits) = if opset >= 11 {
            (node("Pad", "pad", &["x", "pads"], &["p"], vec![]), vec![int64s("pads", &[0, 0, 1, 0, 0, 0, 0, 2], false)])
        } else {
            (node("Pad", "pad", &["x"], &["p"], vec![attr_ints("pads", &[0, 0, 1, 0, 0, 0, 0, 2])]), vec![])
        };
        let m = import(&model(&[1, 2, 2, 3], vec![pad, pool(k())], inits, opset));
        assert_eq!(kinds(&m), ["Input", "Conv2d", "AvgPool2d"], "opset {opset}");
        assert_eq!(m.network.output_shape(), Shape::new(2, 3, 5));
        let y = eval::<f64>(&m.network, &x);
        for c in 0..2 {
            for yy in 0..3 {
                for xx in 0..5 {
                    assert_eq!(y[(c * 3 + yy) * 5 + xx], padded(c, yy, xx), "opset {opset} at {c},{yy},{xx}");
                }
            }
        }
    }
    // All-zero pads are an identity; other modes, values and axes are refused by name.
    let same = node("Pad", "pad", &["x", "pads"], &["y"], vec![]);
    let m = import(&model(&[1, 2, 2, 3], vec![same], vec![int64s("pads", &[0; 8], false)], 13));
    assert!(!kinds(&m).contains(&"Conv2d"), "{:?}", kinds(&m));
    let refl = node("Pad", "refl", &["x", "pads"], &["y"], vec![attr_s("mode", "reflect")]);
    let e = import_err(&model(&[1, 2, 2, 3], vec![refl], vec![int64s("pads", &[0, 0, 1, 1, 0, 0, 1, 1], false)], 13));
    assert!(e.to_string().contains("refl") && e.to_string().contains("reflect"), "{e}");
    let chan = node("Pad", "chan", &["x", "pads"], &["y"], vec![]);
    let e = import_err(&model(&[1, 2, 2, 3], vec![chan], vec![int64s("pads", &[0, 1, 0, 0, 0, 0, 0, 0], false)], 13));
    assert!(e.to_string().contains("chan") && e.to_string().contains("channel"), "{e}");
    let val = node("Pad", "val", &["x", "pads", "v"], &["y"], vec![]);
    let inits = vec![int64s("pads", &[0, 0, 1, 0, 0, 0, 0, 0], false), floats("v", &[], &[1.5])];
    let e = import_err(&model(&[1, 2, 2, 3], vec![val], inits, 13));
    assert!(e.to_string().contains("val") && e.to_string().contains("1.5"), "{e}");
}

#[test]
fn load_from_disk() {
    let m = model(&[1, 1, 28, 28], vec![node("Flatten", "f", &["x"], &["y"], vec![])], vec![], 13);
    let path = std::env::temp_dir().join(format!("polycert-onnx-test-{}.onnx", std::process::id()));
    std::fs::write(&path, encode(&m)).unwrap();
    let imp = load_onnx(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert_eq!(imp.network.input_shape(), Shape::new(1, 28, 28));
    assert_eq!(imp.network.output_shape(), Shape::flat(784));
    assert_eq!(kinds(&imp), ["Input", "Reshape"]);

    // Gzip-compressed (VNN-COMP's .onnx.gz), and a truncated one.
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&encode(&m)).unwrap();
    let bytes = gz.finish().unwrap();
    let path = std::env::temp_dir().join(format!("polycert-onnx-test-{}.onnx.gz", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let imp = load_onnx(&path).unwrap();
    assert_eq!(kinds(&imp), ["Input", "Reshape"]);
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let e = load_onnx(&path).unwrap_err();
    std::fs::remove_file(&path).ok();
    assert!(matches!(e, ImportError::Io { .. }) && e.to_string().contains(".onnx.gz"), "{e}");
}

#[test]
fn final_softmax_is_dropped_and_others_lowered() {
    let w = values(3 * 4, 5);
    let nodes = vec![
        node("Gemm", "fc", &["x", "W"], &["l"], vec![attr_i("transB", 1)]),
        node("Softmax", "sm", &["l"], &["y"], vec![]),
    ];
    let m = import(&model(&[1, 4], nodes, vec![floats("W", &[3, 4], &w)], 13));
    assert!(m.network.softmax_output());
    assert_eq!(kinds(&m), ["Input", "Dense"]);
    // Not last: lowered (differences, e^x, sum, reciprocal, band), then the Relu.
    let nodes = vec![node("Softmax", "sm", &["x"], &["s"], vec![]), node("Relu", "r", &["s"], &["y"], vec![])];
    let m = import(&model(&[1, 4], nodes, vec![], 13));
    assert!(!m.network.softmax_output());
    assert_eq!(kinds(&m), ["Input", "Dense", "Elementwise", "Dense", "Elementwise", "ChannelAffine", "Relu"]);
    // Last but over one axis of several: lowered, not dropped.
    let nodes = vec![node("Softmax", "sm", &["x"], &["y"], vec![attr_i("axis", 2)])];
    let m = import(&model(&[1, 2, 3], nodes, vec![], 13));
    assert!(!m.network.softmax_output() && kinds(&m).contains(&"ChannelAffine"));
    // A group of one element: refused, naming the node.
    let nodes =
        vec![node("Softmax", "sm", &["x"], &["s"], vec![attr_i("axis", 1)]), node("Relu", "r", &["s"], &["y"], vec![])];
    let msg = import_err(&model(&[1, 1, 3], nodes, vec![], 13)).to_string();
    assert!(msg.contains("'sm'") && msg.contains("over 1 elements"), "{msg}");
}
