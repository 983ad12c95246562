//! A VNN-LIB 2.0 query's networks composed into one (`compose.rs`) against
//! onnxruntime (fixtures from `fixtures/query/gen_query.py`): two networks
//! (one model, the second declared `equal-to` the first) with two inputs and
//! two outputs each, a hidden tensor that the importer would otherwise fuse
//! away, and inputs compared with outputs. polycert's float32 inference of
//! the composed IR reproduces onnxruntime's values of the query's output
//! vector, and its certified bounds contain every value onnxruntime computed
//! inside the box.

use polycert_backend_cpu::CpuBackend;
use polycert_deeppoly::base::eval::eval;
use polycert_deeppoly::{Analyzer, Arith, InputBox, Options};
use polycert_onnx::{Imported, load_query, parse_vnnlib, query_layout};
use serde_json::Value;
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/query")
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

fn composed() -> (Imported, String, Value) {
    let text = std::fs::read_to_string(dir().join("query.vnnlib")).unwrap();
    let layout = query_layout(&text, "query.vnnlib").unwrap().unwrap();
    let model = dir().join("two_io.onnx");
    let m = load_query(&layout, &[&model, &model]).unwrap();
    let reference = std::fs::read_to_string(dir().join("reference.json")).unwrap();
    (m, text, serde_json::from_str(&reference).unwrap())
}

#[test]
fn composed_inference_matches_onnxruntime() {
    let (m, text, reference) = composed();
    assert_eq!((m.n_inputs(), m.n_outputs()), (10, 12));
    for p in reference["points"].as_array().unwrap() {
        let x: Vec<f32> = floats(&p["x"]).iter().map(|&v| v as f32).collect();
        let (got, want) = (eval::<f32>(&m.network, &x), floats(&p["y"]));
        assert_eq!(got.len(), want.len());
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!((g as f64 - w).abs() <= 1e-5 * w.abs().max(1e-3), "output {i} is {g}, onnxruntime gives {w}");
        }
    }
    // The property reads with the composed model's sizes: H[0,1] against
    // the copies of XB[0,1] and ZA[0,2] (outputs 10 and 11).
    let p = parse_vnnlib(&text, "query.vnnlib", 10, 12).unwrap();
    let h = &p.subproblems[0].unsafe_region[0][0];
    assert_eq!((h.c[3], h.c[10], h.c[11], h.d), (1.0, -1.0, -1.0, 0.0));
}

#[test]
fn composed_bounds_contain_onnxruntime_outputs() {
    let (m, _, reference) = composed();
    let b = &reference["box"];
    let input = InputBox::new(floats(&b["lo"]), floats(&b["hi"])).unwrap();
    for arith in [Arith::Point, Arith::Interval] {
        let be = CpuBackend::default();
        let opts = Options::default().with(|o| o.passes.arith = arith);
        let an = Analyzer::<_, f64>::new(&m.network, &be, opts).unwrap();
        let mut bounds = an.node_bounds(&input, polycert_deeppoly::base::budget::Budget::UNLIMITED).unwrap();
        let out = bounds.swap_remove(m.network.output());
        for y in b["outputs"].as_array().unwrap() {
            for (i, v) in floats(y).into_iter().enumerate() {
                assert!(
                    out.lo[i] <= v && v <= out.hi[i],
                    "{arith:?}: output {i} = {v} outside [{}, {}]",
                    out.lo[i],
                    out.hi[i]
                );
            }
        }
    }
}

/// The model must match the declarations, and each mismatch is named.
#[test]
fn composing_refuses_a_model_that_does_not_match() {
    let text = std::fs::read_to_string(dir().join("query.vnnlib")).unwrap();
    let model = dir().join("two_io.onnx");
    let one = text.replace("    (declare-input XB float32 [1,2])\n", "").replace("XB[0,1]", "XA[0,1]");
    let one: String = one.lines().filter(|l| !l.contains("XB[")).collect::<Vec<_>>().join("\n");
    let layout = query_layout(&one, "q.vnnlib").unwrap().unwrap();
    let e = load_query(&layout, &[&model, &model]).unwrap_err().to_string();
    assert!(e.contains("declares 1 input and 2 output tensors for this model; it has 2 graph inputs"), "{e}");
    let hidden = text.replace("\"h\"", "\"nowhere\"");
    let layout = query_layout(&hidden, "q.vnnlib").unwrap().unwrap();
    let e = load_query(&layout, &[&model, &model]).unwrap_err().to_string();
    assert!(e.contains("'nowhere' is not a tensor the model computes"), "{e}");
    let shape = text.replace("(declare-input ZB float32 [1,2])", "(declare-input ZB float32 [1,3])");
    let layout = query_layout(&shape, "q.vnnlib").unwrap().unwrap();
    let e = load_query(&layout, &[&model, &model]).unwrap_err().to_string();
    assert!(e.contains("input 'ZB' has shape [1, 3], the model's 'b' dims [1, 2]"), "{e}");
}

/// A property's product of two variables (an output and an input) is an
/// extra output, `((a + b)² − (a − b)²)/4` with exact squares: at each
/// reference point it is the product of onnxruntime's output and the input.
#[test]
fn products_of_variables_are_composed_outputs() {
    let (_, text, reference) = composed();
    let text = format!("{text}(assert (<= (* 2.0 Y1[0,0] XA[0,1]) 0.5))\n");
    let layout = query_layout(&text, "query.vnnlib").unwrap().unwrap();
    assert_eq!((layout.products.clone(), layout.n_outputs), (vec![((0, 1), (1, 0))], 13));
    let model = dir().join("two_io.onnx");
    let m = load_query(&layout, &[&model, &model]).unwrap();
    for p in reference["points"].as_array().unwrap() {
        let (x, y) = (floats(&p["x"]), floats(&p["y"]));
        let got = eval::<f64>(&m.network, &x);
        assert!((got[12] - y[0] * x[1]).abs() <= 1e-6, "{} vs {}", got[12], y[0] * x[1]);
    }
    let p = parse_vnnlib(&text, "query.vnnlib", 10, 13).unwrap();
    let h = p.subproblems[0].unsafe_region.iter().flatten().find(|h| h.c[12] != 0.0).unwrap();
    assert_eq!((h.c[12], h.d), (2.0, 0.5));
}
