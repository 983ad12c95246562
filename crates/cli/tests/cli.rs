//! End-to-end tests of the `polycert` binary: the embedded default, JSON
//! output, the VNN-COMP runner, and every kind of bad input (exit code 2,
//! one line naming the file, no panic, results kept).

#[path = "../../onnx-import/tests/common/mod.rs"]
mod common;

use common::{encode, model, node, raw_floats};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn polycert(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_polycert")).args(args).output().expect("runs")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("polycert-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

const DIGITS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/digits_mlp.onnx");

/// A VNNLIB robustness property for the 64-input digits model.
fn digits_vnnlib(path: &Path, n_in: usize, eps: f64) {
    let csv = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/digits_test.csv")).unwrap();
    let first: Vec<f64> = csv.lines().next().unwrap().split(',').map(|v| v.parse().unwrap()).collect();
    let label = first[0] as usize;
    let mut s = String::new();
    for i in 0..n_in {
        s += &format!("(declare-const X_{i} Real)\n");
    }
    for j in 0..10 {
        s += &format!("(declare-const Y_{j} Real)\n");
    }
    for i in 0..n_in {
        let x = first.get(1 + i).copied().unwrap_or(0.0) / 255.0;
        s += &format!("(assert (<= X_{i} {}))\n(assert (>= X_{i} {}))\n", (x + eps).min(1.0), (x - eps).max(0.0));
    }
    s += "(assert (or\n";
    for j in (0..10).filter(|&j| j != label) {
        s += &format!("  (and (>= Y_{j} Y_{label}))\n");
    }
    s += "))\n";
    std::fs::write(path, s).unwrap();
}

fn assert_input_error(o: &Output, file: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let line =
        err.lines().find(|l| l.starts_with("polycert: error:")).unwrap_or_else(|| panic!("no error line: {err}"));
    assert!(line.contains(file), "error does not name {file}: {line}");
}

#[test]
fn embedded_default_runs_and_reports() {
    let o = polycert(&["verify", "--count", "20", "--backend", "cpu"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("verified"), "{out}");
    assert!(out.contains("total              20"), "{out}");
    assert!(matches!(o.status.code(), Some(0 | 1)), "{:?}", o.status);
}

#[test]
fn json_lines_have_the_promised_fields() {
    let o = polycert(&["verify", "--count", "3", "--json", "--backend", "cpu"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).expect("json")).collect();
    assert_eq!(lines.len(), 3);
    for v in &lines {
        for k in ["model", "property", "seconds", "result", "label", "lower_bounds"] {
            assert!(v.get(k).is_some(), "missing {k} in {v}");
        }
        assert_eq!(v["lower_bounds"].as_array().unwrap().len(), 9);
        if v["result"] == "verified" {
            assert!(v["lower_bounds"].as_array().unwrap().iter().all(|b| b.as_f64().unwrap() > 0.0));
        }
    }
}

#[test]
fn parallel_jobs_give_the_same_records_in_order() {
    let run = |jobs: &str| {
        let o = polycert(&["verify", "--count", "40", "--json", "--backend", "cpu", "--jobs", jobs]);
        assert!(matches!(o.status.code(), Some(0 | 1)), "{:?}", o.status);
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        out.lines()
            .map(|l| {
                let mut v: serde_json::Value = serde_json::from_str(l).expect("json");
                v.as_object_mut().unwrap().remove("seconds");
                v
            })
            .collect::<Vec<_>>()
    };
    let (one, four) = (run("1"), run("4"));
    assert_eq!(one.len(), 40);
    assert_eq!(one, four);
}

#[test]
fn vnnlib_property_on_a_model_file() {
    let p = tmp("ok.vnnlib");
    digits_vnnlib(&p, 64, 0.001);
    let o = polycert(&["verify", "--model", DIGITS, "--vnnlib", p.to_str().unwrap(), "--backend", "cpu"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn missing_model_file() {
    assert_input_error(
        &polycert(&["verify", "--model", "/nonexistent/m.onnx", "--images", "x.csv"]),
        "/nonexistent/m.onnx",
    );
}

#[test]
fn truncated_and_garbage_models() {
    let bytes = std::fs::read(DIGITS).unwrap();
    let t = tmp("truncated.onnx");
    std::fs::write(&t, &bytes[..bytes.len() / 2]).unwrap();
    let v = tmp("p.vnnlib");
    digits_vnnlib(&v, 64, 0.01);
    assert_input_error(
        &polycert(&["verify", "--model", t.to_str().unwrap(), "--vnnlib", v.to_str().unwrap()]),
        "truncated.onnx",
    );
    let g = tmp("garbage.onnx");
    std::fs::write(&g, (0..5000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect::<Vec<_>>()).unwrap();
    assert_input_error(
        &polycert(&["verify", "--model", g.to_str().unwrap(), "--vnnlib", v.to_str().unwrap()]),
        "garbage.onnx",
    );
}

fn tiny_model(path: &Path, op: &str, w: &[f32]) {
    let m = model(
        &[1, 2],
        vec![
            node("Gemm", "fc", &["x", "W", "B"], &["h"], vec![common::attr_i("transB", 1)]),
            node(op, "act", &["h"], &["y"], vec![]),
        ],
        vec![raw_floats("W", &[2, 2], w), raw_floats("B", &[2], &[0.0, 0.0])],
        13,
    );
    std::fs::write(path, encode(&m)).unwrap();
}

#[test]
fn nan_weights_and_unsupported_ops() {
    let v = tmp("two.vnnlib");
    std::fs::write(&v, "(declare-const X_0 Real)(declare-const X_1 Real)(declare-const Y_0 Real)(declare-const Y_1 Real)\n(assert (<= X_0 1))(assert (>= X_0 0))(assert (<= X_1 1))(assert (>= X_1 0))\n(assert (>= Y_1 Y_0))\n").unwrap();
    let nan = tmp("nan.onnx");
    tiny_model(&nan, "Relu", &[1.0, f32::NAN, 0.0, 1.0]);
    let o = polycert(&["verify", "--model", nan.to_str().unwrap(), "--vnnlib", v.to_str().unwrap()]);
    assert_input_error(&o, "nan.onnx");
    assert!(String::from_utf8_lossy(&o.stderr).contains("NaN"));
    let sig = tmp("sigmoid.onnx");
    tiny_model(&sig, "Sigmoid", &[1.0, 0.0, 0.0, 1.0]);
    let o = polycert(&["verify", "--model", sig.to_str().unwrap(), "--vnnlib", v.to_str().unwrap()]);
    assert_input_error(&o, "sigmoid.onnx");
    assert!(String::from_utf8_lossy(&o.stderr).contains("Sigmoid"));
}

#[test]
fn vnnlib_dimension_mismatch_and_malformed() {
    let small = tmp("small.vnnlib");
    digits_vnnlib(&small, 3, 0.01);
    assert_input_error(&polycert(&["verify", "--model", DIGITS, "--vnnlib", small.to_str().unwrap()]), "small.vnnlib");
    let bad = tmp("bad.vnnlib");
    std::fs::write(&bad, "(declare-const X_0 Real)\n(assert (<= X_0 ").unwrap();
    assert_input_error(&polycert(&["verify", "--model", DIGITS, "--vnnlib", bad.to_str().unwrap()]), "bad.vnnlib");
}

#[test]
fn vnncomp_keeps_rows_on_error_and_resumes() {
    let dir = tmp("vnn");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(DIGITS, dir.join("digits.onnx")).unwrap();
    digits_vnnlib(&dir.join("good.vnnlib"), 64, 0.001);
    std::fs::write(dir.join("bad.vnnlib"), "(assert").unwrap();
    std::fs::write(dir.join("instances.csv"), "digits.onnx,good.vnnlib,60\ndigits.onnx,bad.vnnlib,60\n").unwrap();
    let res = dir.join("results.csv");
    let inst = dir.join("instances.csv");
    let args =
        ["vnncomp", "--instances", inst.to_str().unwrap(), "--results", res.to_str().unwrap(), "--backend", "cpu"];
    let o = polycert(&args);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = std::fs::read_to_string(&res).unwrap();
    assert!(rows.lines().next().unwrap().starts_with("digits.onnx,good.vnnlib,unsat,"), "{rows}");
    assert!(rows.lines().nth(1).unwrap().starts_with("digits.onnx,bad.vnnlib,error,"), "{rows}");
    // --resume skips both rows already written.
    let mut resumed = args.to_vec();
    resumed.push("--resume");
    let o = polycert(&resumed);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(&res).unwrap(), rows);
}

/// Issue 9's data-loss cases: a second run appends (the first run's rows
/// stay), `--overwrite` empties, a row cut off by a killed run is dropped
/// and redone on `--resume`, and two networks sharing a property file get
/// one counterexample file each.
#[test]
fn vnncomp_never_loses_rows_or_counterexamples() {
    let dir = tmp("vnn-append");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(DIGITS, dir.join("a.onnx")).unwrap();
    std::fs::copy(DIGITS, dir.join("b.onnx")).unwrap();
    digits_vnnlib(&dir.join("safe.vnnlib"), 64, 0.001);
    digits_vnnlib(&dir.join("wide.vnnlib"), 64, 0.5);
    std::fs::write(
        dir.join("instances.csv"),
        "a.onnx,safe.vnnlib,60
a.onnx,wide.vnnlib,60
b.onnx,wide.vnnlib,60
",
    )
    .unwrap();
    let (inst, res) = (dir.join("instances.csv"), dir.join("results.csv"));
    let args =
        ["vnncomp", "--instances", inst.to_str().unwrap(), "--results", res.to_str().unwrap(), "--backend", "cpu"];
    let run = |extra: &[&str]| {
        let mut v = args.to_vec();
        v.extend_from_slice(extra);
        let o = polycert(&v);
        assert!(matches!(o.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&o.stderr));
    };
    run(&[]);
    let first = std::fs::read_to_string(&res).unwrap();
    let rows: Vec<&str> = first.lines().collect();
    assert_eq!(rows.len(), 3, "{first}");
    assert!(rows[0].starts_with("a.onnx,safe.vnnlib,unsat,"), "{first}");
    assert!(
        rows[1].starts_with("a.onnx,wide.vnnlib,sat,") && rows[2].starts_with("b.onnx,wide.vnnlib,sat,"),
        "{first}"
    );
    let cex = dir.join("results.csv.cex");
    for net in ["a", "b"] {
        let f = cex.join(format!("{net}.onnx__wide.vnnlib.counterexample"));
        assert!(std::fs::read_to_string(&f).unwrap().starts_with("sat\n"), "{}", f.display());
    }
    run(&[]);
    let twice = std::fs::read_to_string(&res).unwrap();
    assert!(twice.starts_with(&first) && twice.lines().count() == 6, "a second run must append:\n{twice}");
    run(&["--overwrite"]);
    assert_eq!(std::fs::read_to_string(&res).unwrap().lines().count(), 3);
    // A killed run left half a row: --resume drops it and redoes that instance.
    std::fs::write(&res, format!("{}\n{}\nb.onnx,wide.vn", rows[0], rows[1])).unwrap();
    run(&["--resume"]);
    let resumed = std::fs::read_to_string(&res).unwrap();
    let got: Vec<&str> = resumed.lines().collect();
    assert_eq!(got.len(), 3, "{resumed}");
    assert_eq!(&got[..2], &rows[..2]);
    assert!(got[2].starts_with("b.onnx,wide.vnnlib,sat,"), "{resumed}");
}

#[test]
fn cuda_backend_without_gpu_is_a_clear_error() {
    let o = polycert(&["verify", "--count", "1", "--backend", "cuda"]);
    if o.status.code() == Some(2) {
        assert!(String::from_utf8_lossy(&o.stderr).contains("--backend cuda"));
    } else {
        assert!(matches!(o.status.code(), Some(0 | 1)), "a machine with a GPU verifies");
    }
}
