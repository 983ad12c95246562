//! Every op family against onnxruntime (fixtures from `fixtures/ops/gen_ops.py`):
//! polycert's float32 inference of the imported IR reproduces onnxruntime's
//! outputs, and its certified bounds (both arithmetics) contain every output
//! onnxruntime computed inside the box.

use polycert_backend_cpu::CpuBackend;
use polycert_deeppoly::base::eval::eval;
use polycert_deeppoly::{Analyzer, Arith, InputBox, LoHi, Options};
use polycert_onnx::{Imported, load_onnx};
use serde_json::Value;
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ops")
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

fn cases() -> Vec<Value> {
    let text = std::fs::read_to_string(dir().join("reference.json")).unwrap();
    let json: Value = serde_json::from_str(&text).unwrap();
    json["cases"].as_array().unwrap().clone()
}

/// Certified output bounds over the box `[lo, hi]` (ONNX input order).
fn output_bounds(m: &Imported, lo: &[f64], hi: &[f64], arith: Arith) -> LoHi<f64> {
    let be = CpuBackend::default();
    let opts = Options::default().with(|o| o.passes.arith = arith);
    let an = Analyzer::<_, f64>::new(&m.network, &be, opts).unwrap();
    let input = InputBox::new(m.to_ir_input(lo), m.to_ir_input(hi)).unwrap();
    let mut b = an.node_bounds(&input, polycert_deeppoly::base::budget::Budget::UNLIMITED).unwrap();
    b.swap_remove(m.network.output())
}

fn assert_enclosed(name: &str, what: &str, LoHi { lo, hi }: &LoHi<f64>, y: &[f64]) {
    assert_eq!(lo.len(), y.len(), "{name}: output size");
    for (i, &v) in y.iter().enumerate() {
        assert!(
            lo[i] <= v && v <= hi[i],
            "{name} ({what}): onnxruntime's output {i} = {v} is outside [{}, {}]",
            lo[i],
            hi[i]
        );
    }
}

#[test]
fn inference_matches_onnxruntime() {
    let cases = cases();
    assert_eq!(cases.len(), 29);
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let m = load_onnx(dir().join(format!("{name}.onnx"))).unwrap_or_else(|e| panic!("{name}: {e}"));
        for p in case["points"].as_array().unwrap() {
            let x: Vec<f32> = m.to_ir_input(&floats(&p["x"])).iter().map(|&v| v as f32).collect();
            let want = floats(&p["y"]);
            let mut got = eval::<f32>(&m.network, &x);
            if m.network.softmax_output() {
                // The importer dropped the final Softmax: apply it here.
                let top = got.iter().copied().fold(f32::MIN, f32::max);
                let e: Vec<f32> = got.iter().map(|v| (v - top).exp()).collect();
                let s: f32 = e.iter().sum();
                got = e.iter().map(|v| v / s).collect();
            }
            let scale = want.iter().fold(1e-3f64, |a, v| a.max(v.abs()));
            assert_eq!(got.len(), want.len(), "{name}: output size");
            for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                assert!((g as f64 - w).abs() <= 1e-5 * scale, "{name}: output {i} is {g}, onnxruntime gives {w}");
            }
        }
    }
}

#[test]
fn bounds_contain_onnxruntime_outputs() {
    for case in &cases() {
        let name = case["name"].as_str().unwrap();
        let m = load_onnx(dir().join(format!("{name}.onnx"))).unwrap();
        if m.network.softmax_output() {
            // Bounds are on the logits: onnxruntime's largest output is the certified largest logit.
            for p in case["points"].as_array().unwrap() {
                let (x, y) = (floats(&p["x"]), floats(&p["y"]));
                let LoHi { lo, hi } = output_bounds(&m, &x, &x, Arith::Point);
                let top = (0..y.len()).max_by(|&a, &b| y[a].total_cmp(&y[b])).unwrap();
                assert!((0..y.len()).all(|j| j == top || lo[top] > hi[j]), "{name}: {lo:?} {hi:?} vs {y:?}");
            }
            continue;
        }
        for arith in [Arith::Point, Arith::Interval] {
            let what = format!("{arith:?}");
            let (lo, hi) = (floats(&case["box"]["lo"]), floats(&case["box"]["hi"]));
            let b = output_bounds(&m, &lo, &hi, arith);
            for y in case["box"]["outputs"].as_array().unwrap() {
                assert_enclosed(name, &what, &b, &floats(y));
            }
            // Zero-width boxes: the bounds are tight, and still contain onnxruntime's output.
            for p in case["points"].as_array().unwrap() {
                let (x, y) = (floats(&p["x"]), floats(&p["y"]));
                let b = output_bounds(&m, &x, &x, arith);
                assert_enclosed(name, &format!("{what}, point"), &b, &y);
                // Only float32 rounding terms remain (≈ 2^-24 per operation,
                // relative; a lowered Softmax's band is 2^-12 of its outputs).
                let scale = y.iter().fold(1.0f64, |a, v| a.max(v.abs()));
                let width = b.lo.iter().zip(&b.hi).fold(0.0f64, |a, (l, h)| a.max(h - l));
                let tight = if name.starts_with("softmax") { 1e-2 } else { 1e-4 };
                assert!(width < tight * scale, "{name} ({what}): a zero-width box gives bounds {width} wide");
            }
        }
    }
}

#[test]
fn reorderings_are_folded_not_materialized() {
    // The TensorFlow layout costs no extra layer: the transposes fold into
    // the input permutation and the MatMul's columns.
    let m = load_onnx(dir().join("tf_convnet.onnx")).unwrap();
    let kinds: Vec<&str> = m.network.nodes().iter().map(|n| n.op.kind()).collect();
    assert_eq!(kinds, ["Input", "Conv2d", "Relu", "Dense", "Relu", "Dense"]);
    // A Conv cannot absorb one: it gets an exact 0/1 layer of its own.
    let m = load_onnx(dir().join("transpose_into_conv.onnx")).unwrap();
    let kinds: Vec<&str> = m.network.nodes().iter().map(|n| n.op.kind()).collect();
    assert_eq!(kinds[..3], ["Input", "Dense", "Reshape"]);
    // Constants that vary within a channel: per element, on a flat view.
    let m = load_onnx(dir().join("per_pixel_constants.onnx")).unwrap();
    let kinds: Vec<&str> = m.network.nodes().iter().map(|n| n.op.kind()).collect();
    assert_eq!(kinds[..5], ["Input", "Reshape", "ChannelAffine", "Reshape", "Reshape"]);
    // A transposed convolution: one dense layer.
    let m = load_onnx(dir().join("conv_transpose.onnx")).unwrap();
    let kinds: Vec<&str> = m.network.nodes().iter().map(|n| n.op.kind()).collect();
    assert_eq!(kinds[..4], ["Input", "Dense", "Reshape", "Relu"]);
}
