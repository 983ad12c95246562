//! Import failures: malformed files, bad weights and unsupported ops give
//! errors that name the file and node, and mutated models never panic.

mod common;

use common::*;
use polycert_deeppoly::base::eval::eval;
use polycert_onnx::onnx_pb::{TensorProto, tensor_proto::DataType};
use polycert_onnx::{ImportError, import_model, load_onnx};

#[test]
fn malformed_files_give_clear_errors() {
    let good = model(&[1, 2], vec![node("Relu", "r", &["x"], &["y"], vec![])], vec![], 13);
    let bytes = encode(&good);
    let e = import_model(&bytes[..bytes.len() - 3], "trunc.onnx").unwrap_err();
    assert!(matches!(e, ImportError::Decode { .. }), "{e}");
    assert!(e.to_string().starts_with("trunc.onnx: "), "{e}");
    let e = import_model(b"\x0a\xff\xff\xff\xff\x0fgarbage", "junk.onnx").unwrap_err();
    assert!(e.to_string().contains("junk.onnx"), "{e}");
    let e = import_model(b"", "empty.onnx").unwrap_err();
    assert!(e.to_string().contains("empty.onnx") && e.to_string().contains("opset"), "{e}");
    let e = load_onnx("/nonexistent/model.onnx").unwrap_err();
    assert!(matches!(e, ImportError::Io { .. }) && e.to_string().contains("/nonexistent/model.onnx"));
    for opset in [6, 22] {
        let e = import_err(&model(&[1, 2], vec![node("Relu", "r", &["x"], &["y"], vec![])], vec![], opset));
        assert!(e.to_string().contains(&format!("opset {opset}")), "{e}");
    }
}

#[test]
fn bad_weights_and_unsupported_ops_name_the_node() {
    let gemm = |w: polycert_onnx::onnx_pb::TensorProto| {
        model(&[1, 2], vec![node("Gemm", "fc7", &["x", "W"], &["y"], vec![attr_i("transB", 1)])], vec![w], 13)
    };
    let e = import_err(&gemm(floats("W", &[1, 2], &[1.0, f32::NAN])));
    let msg = e.to_string();
    assert!(msg.contains("bad.onnx") && msg.contains("'fc7'") && msg.contains("Gemm") && msg.contains("NaN"), "{msg}");
    let e = import_err(&gemm(floats("W", &[1, 3], &[1.0, 2.0, 3.0])));
    assert!(e.to_string().contains("'fc7'") && e.to_string().contains("[1, 3]"), "{e}");
    let mut ext = floats("W", &[1, 2], &[]);
    ext.external_data
        .push(polycert_onnx::onnx_pb::StringStringEntryProto { key: "location".into(), value: "w.bin".into() });
    ext.data_location = 1;
    assert!(import_err(&gemm(ext)).to_string().contains("external data"));
    let mut short = raw_floats("W", &[1, 2], &[1.0, 2.0]);
    short.raw_data.pop();
    assert!(import_err(&gemm(short)).to_string().contains("raw_data has 7 bytes, shape [1, 2] of FLOAT needs 2x4"));

    let e = import_err(&model(&[1, 2], vec![node("Erf", "act", &["x"], &["y"], vec![])], vec![], 13));
    assert!(matches!(e, ImportError::Unsupported { .. }));
    let msg = e.to_string();
    assert!(msg.contains("bad.onnx") && msg.contains("'act'") && msg.contains("Erf"), "{msg}");
    let e = import_err(&model(&[1, 2], vec![node("Gelu", "", &["x"], &["y"], vec![])], vec![], 13));
    assert!(e.to_string().contains("Gelu") && e.to_string().contains("#0"), "{e}");

    let conv = |attrs, c_in: usize| {
        let w = floats("W", &[2, c_in as i64, 1, 1], &vec![1.0; 2 * c_in]);
        model(&[1, 2, 4, 4], vec![node("Conv", "cv", &["x", "W"], &["y"], attrs)], vec![w], 13)
    };
    assert!(import_err(&conv(vec![attr_i("group", 2)], 1)).to_string().contains("group 2"));
    let e = import_err(&conv(vec![attr_ints("dilations", &[0, 2])], 2));
    assert!(e.to_string().contains("dilations [0, 2] are not 2 positive values"), "{e}");
    let same = vec![attr_ints("dilations", &[2, 2]), attr_s("auto_pad", "SAME_UPPER")];
    assert!(import_err(&conv(same, 2)).to_string().contains("onnxruntime does not run it either"));
    // Weights for 1 input channel on a 2-channel input.
    assert!(import_err(&conv(vec![], 1)).to_string().contains("input channels"));
    assert!(import_model(&encode(&conv(vec![attr_ints("strides", &[2, 2])], 2)), "ok.onnx").is_ok());

    let mul = model(
        &[1, 2, 2, 2],
        vec![node("Mul", "scale", &["x", "k"], &["y"], vec![])],
        vec![floats("k", &[2, 2], &[1.0, 2.0, 3.0, 4.0])],
        13,
    );
    // A constant that varies within a channel: per element (on a flat view).
    let m = import(&mul);
    let x: Vec<f64> = (1..=8).map(f64::from).collect();
    let want: Vec<f64> = x.iter().enumerate().map(|(i, v)| v * [1.0, 2.0, 3.0, 4.0][i % 4]).collect();
    assert_eq!(eval::<f64>(&m.network, &x), want);
    let sub = model(
        &[1, 2],
        vec![node("Relu", "r", &["x"], &["r"], vec![]), node("Sub", "d", &["x", "r"], &["y"], vec![])],
        vec![],
        13,
    );
    let m = import(&sub);
    assert_eq!(kinds(&m), ["Input", "Relu", "ChannelAffine", "Add"]);
    assert_eq!(eval::<f64>(&m.network, &[-1.5, 2.0]), vec![-1.5, 0.0]);
    let div0 = model(&[1, 2], vec![node("Div", "d", &["x", "z"], &["y"], vec![])], vec![floats("z", &[], &[0.0])], 13);
    assert!(import_err(&div0).to_string().contains("division by zero"));

    let mut two_inputs = model(&[1, 2], vec![node("Add", "a", &["x", "x2"], &["y"], vec![])], vec![], 13);
    two_inputs.graph.as_mut().unwrap().input.push(value_info("x2", &[1, 2]));
    assert!(import_err(&two_inputs).to_string().contains("exactly one graph input"));
    let missing = model(&[1, 2], vec![node("Relu", "r", &["nope"], &["y"], vec![])], vec![], 13);
    assert!(import_err(&missing).to_string().contains("'nope'"));
    let constant_out =
        model(&[1, 2], vec![node("Relu", "r", &["c"], &["y"], vec![])], vec![floats("c", &[2], &[1.0, 2.0])], 13);
    // A constant output is a dense layer of zero weights with the constant
    // as its bias; one that float32 cannot hold is refused.
    let m = import(&constant_out);
    assert_eq!(eval::<f32>(&m.network, &[-1.5, 2.0]), vec![1.0, 2.0]);
    let tenth = TensorProto { data_type: DataType::Double as i32, double_data: vec![0.1], ..floats("c", &[1], &[]) };
    let double_out = model(&[1, 2], vec![node("Relu", "r", &["c"], &["y"], vec![])], vec![tenth], 13);
    assert!(import_err(&double_out).to_string().contains("constant with 0.1, which is not a float32"));
}

#[test]
fn mutated_models_never_panic() {
    let nodes = vec![
        node(
            "Conv",
            "c",
            &["x", "W", "B"],
            &["c"],
            vec![attr_ints("pads", &[1, 1, 1, 1]), attr_ints("strides", &[2, 2])],
        ),
        node("Relu", "r", &["c"], &["r"], vec![]),
        node("Shape", "s", &["r"], &["s"], vec![]),
        node("Slice", "sl", &["s", "st", "en"], &["s0"], vec![]),
        node("Concat", "cat", &["s0", "m1"], &["shp"], vec![attr_i("axis", 0)]),
        node("Reshape", "f", &["r", "shp"], &["f"], vec![]),
        node("MatMul", "mm", &["f", "M"], &["t"], vec![]),
        node("Add", "a", &["t", "Bm"], &["y"], vec![]),
    ];
    let inits = vec![
        raw_floats("W", &[2, 1, 3, 3], &values(18, 1)),
        floats("B", &[2], &[0.5, -0.5]),
        int64s("st", &[0], true),
        int64s("en", &[1], false),
        int64s("m1", &[-1], true),
        floats("M", &[8, 3], &values(24, 2)),
        floats("Bm", &[3], &[1.0, 2.0, 3.0]),
    ];
    let bytes = encode(&model(&[1, 1, 4, 4], nodes, inits, 13));
    let m = import_model(&bytes, "fuzz.onnx").unwrap();
    assert_eq!(kinds(&m), ["Input", "Conv2d", "Relu", "Reshape", "Dense"]);
    let mut s = 0x9e3779b97f4a7c15u64;
    let mut rnd = |n: usize| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % n as u64) as usize
    };
    for round in 0..3000 {
        let mut b = bytes.clone();
        match round % 3 {
            0 => {
                let i = rnd(b.len());
                b[i] ^= 1 << rnd(8);
            }
            1 => {
                let i = rnd(b.len());
                b[i] = rnd(256) as u8;
                let j = rnd(b.len());
                b[j] = rnd(256) as u8;
            }
            _ => b.truncate(rnd(b.len())),
        }
        // Any outcome but a panic is fine; errors must name the file.
        if let Err(e) = import_model(&b, "fuzz.onnx") {
            assert!(e.to_string().starts_with("fuzz.onnx"), "{e}");
        }
    }
}

#[test]
fn shape_arithmetic_on_network_values_is_refused_by_name() {
    let one = |n: polycert_onnx::onnx_pb::NodeProto, inits| model(&[1, 2], vec![n], inits, 13);
    let refused = |m: &polycert_onnx::onnx_pb::ModelProto, words: &[&str]| {
        let e = import_err(m);
        assert!(matches!(e, ImportError::Unsupported { .. }), "{e}");
        let msg = e.to_string();
        assert!(words.iter().all(|w| msg.contains(w)) && !msg.contains('\n'), "{msg}");
    };
    // An Expand repeats network values (a copy layer), up to its size limit.
    let expand = |to: &[i64]| one(node("Expand", "ex", &["x", "s"], &["y"], vec![]), vec![int64s("s", to, false)]);
    assert_eq!(eval::<f64>(&import(&expand(&[3, 2])).network, &[3.0, -4.0]), [3.0, -4.0, 3.0, -4.0, 3.0, -4.0]);
    assert_eq!(eval::<f64>(&import(&expand(&[1, 2])).network, &[3.0, -4.0]), [3.0, -4.0]);
    refused(&expand(&[1 << 40, 2]), &["'ex'", "Expand", "too large for a dense layer"]);
    let c = floats("c", &[1, 2], &[1.0, 2.0]);
    refused(&one(node("Where", "sel", &["x", "c", "c"], &["y"], vec![]), vec![c.clone()]), &["'sel'", "Where"]);
    refused(&one(node("Greater", "cmp", &["x", "c"], &["y"], vec![]), vec![c]), &["'cmp'", "Greater", "differs"]);
    // Steps against one constant are exact elementwise nodes.
    let half = floats("h", &[], &[0.5]);
    let gt = import(&one(node("Greater", "cmp", &["x", "h"], &["y"], vec![]), vec![half.clone()]));
    assert_eq!(eval::<f32>(&gt.network, &[0.5, 0.75]), [0.0, 1.0]);
    // Integer values may be cast, compared or given +0; arithmetic wraps, so it is refused.
    let to_int = |n: polycert_onnx::onnx_pb::NodeProto, inits| {
        let cast = node("Cast", "ci", &["x"], &["i"], vec![attr_i("to", 7)]);
        model(&[1, 2], vec![cast, n], inits, 13)
    };
    let zero = int64s("z", &[0], false);
    let plus0 = import(&to_int(node("Add", "a", &["i", "z"], &["y"], vec![]), vec![zero.clone()]));
    assert_eq!(eval::<f32>(&plus0.network, &[2.7, -2.7]), [2.0, -2.0]);
    refused(&to_int(node("Mul", "m", &["i", "z"], &["y"], vec![]), vec![zero]), &["'m'", "Mul", "integer", "wraps"]);
    // Too few inputs: an error naming the op, not a panic.
    let short =
        one(node("Range", "rg", &["a", "b"], &["y"], vec![]), vec![int64s("a", &[0], false), int64s("b", &[4], false)]);
    let msg = import_err(&short).to_string();
    assert!(msg.contains("'rg'") && msg.contains("Range needs 3 inputs"), "{msg}");
    // A folded constant past the size limit is refused, not allocated.
    let huge =
        one(node("ConstantOfShape", "big", &["s"], &["y"], vec![]), vec![int64s("s", &[1 << 20, 1 << 20], false)]);
    let msg = import_err(&huge).to_string();
    assert!(msg.contains("'big'") && msg.contains("ConstantOfShape") && msg.contains("elements"), "{msg}");
}

/// `OPERATORS` (what `polycert supports --onnx-operators` lists) is what
/// the importer lowers: a listed op is never refused as an unknown
/// operator, and an op it does not list is.
#[test]
fn the_operator_list_is_what_the_importer_reads() {
    for &op in polycert_onnx::OPERATORS {
        let m = model(&[1, 2], vec![node(op, "n", &["x"], &["y"], vec![])], vec![], 13);
        if let Err(e) = polycert_onnx::import_model(&encode(&m), "op.onnx") {
            assert!(!e.to_string().contains("polycert supports"), "{op}: {e}");
        }
    }
    let m = model(&[1, 2], vec![node("Erf", "n", &["x"], &["y"], vec![])], vec![], 13);
    assert!(import_err(&m).to_string().contains("polycert supports"));
}

/// Mul of two network values imports (x·x as one elementwise square); Pow
/// of two network values is refused by name.
#[test]
fn products_of_network_values_import_and_pow_of_two_is_refused() {
    let two = model(&[1, 2], vec![node("Mul", "sq", &["x", "x"], &["y"], vec![])], vec![], 13);
    assert_eq!(eval::<f64>(&import(&two).network, &[1.5, -3.0]), vec![2.25, 9.0]);
    let pow = model(&[1, 2], vec![node("Pow", "p", &["x", "x"], &["y"], vec![])], vec![], 13);
    assert!(matches!(import_err(&pow), ImportError::Unsupported { .. }));
}

/// Review findings on the powers (2026-11-29): a Pow whose base is an
/// integer constant takes the base's integer type and is refused; a
/// dilated MaxPool window larger than its input is an error, not a panic;
/// per-element exponents apply each exponent to its own elements only (a
/// square of a negative value next to a square root of a positive one).
#[test]
fn pow_bases_dilated_windows_and_per_element_exponents() {
    let int_base =
        model(&[1, 2], vec![node("Pow", "p", &["b", "x"], &["y"], vec![])], vec![int64s("b", &[2], false)], 13);
    let e = import_err(&int_base).to_string();
    assert!(e.contains("integer or float16 base"), "{e}");
    let wide = model(
        &[1, 1, 2, 2],
        vec![node(
            "MaxPool",
            "mp",
            &["x"],
            &["y"],
            vec![attr_ints("kernel_shape", &[2, 2]), attr_ints("dilations", &[2, 2]), attr_ints("strides", &[2, 2])],
        )],
        vec![],
        13,
    );
    let e = import_err(&wide).to_string();
    assert!(e.contains("dilated window (3, 3) is larger than the padded input (2, 2)"), "{e}");
    let mixed = model(
        &[1, 2],
        vec![node("Pow", "p", &["x", "e"], &["y"], vec![])],
        vec![floats("e", &[1, 2], &[2.0, 0.5])],
        13,
    );
    let m = import(&mixed);
    assert_eq!(eval::<f64>(&m.network, &[-3.0, 4.0]), vec![9.0, 2.0]);
    let be = polycert_backend_cpu::CpuBackend::default();
    let an = polycert_deeppoly::Analyzer::<_, f64>::new(&m.network, &be, Default::default()).unwrap();
    // (The copy layers' modelled rounding widens [0.5, 1] a little: a range
    // that starts at 0 would reach below it, where √ is undefined.)
    let input = polycert_deeppoly::InputBox::new(vec![-1.0, 0.5], vec![1.0, 1.0]).unwrap();
    let b = an.node_bounds(&input, polycert_deeppoly::base::budget::Budget::UNLIMITED).unwrap();
    let out = &b[m.network.output()];
    assert!(out.lo[0] <= 0.0 && out.hi[0] >= 1.0 && out.hi[1] >= 1.0, "{out:?}");
}
