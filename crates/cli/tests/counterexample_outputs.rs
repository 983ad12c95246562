//! A counterexample file states the model's outputs as a runtime computes
//! them. After a dropped final Softmax the analysis works on the logits,
//! but VNN-COMP's checker compares the stated `Y_j` with onnxruntime's
//! (within 1e-3): they must be the Softmax's outputs, not the logits.

#[path = "../../onnx-import/tests/common/mod.rs"]
mod common;
mod util;

use common::{attr_i, encode, model, node, raw_floats};
use util::{polycert, tmp, vnncomp_cpu};

/// `y = Softmax(W·x + b)` over three outputs.
const W: [f32; 6] = [1.0, 2.0, -1.0, 0.5, 0.25, -0.75];
const B: [f32; 3] = [0.125, 0.0, -0.25];

/// The `(name value)` pairs of a counterexample file.
fn values(text: &str, prefix: &str) -> Vec<f64> {
    text.lines()
        .filter_map(|l| l.trim_start_matches('(').strip_prefix(prefix))
        .map(|l| l.trim_end_matches(')').split_whitespace().nth(1).unwrap().parse().unwrap())
        .collect()
}

#[test]
fn a_dropped_softmax_is_applied_to_the_stated_outputs() {
    let dir = tmp("cex-softmax");
    std::fs::create_dir_all(&dir).unwrap();
    let m = model(
        &[1, 2],
        vec![
            node("Gemm", "fc", &["x", "W", "B"], &["h"], vec![attr_i("transB", 1)]),
            node("Softmax", "sm", &["h"], &["y"], vec![]),
        ],
        vec![raw_floats("W", &[3, 2], &W), raw_floats("B", &[3], &B)],
        13,
    );
    std::fs::write(dir.join("smx.onnx"), encode(&m)).unwrap();
    let decls = "(declare-const X_0 Real)(declare-const X_1 Real)(declare-const Y_0 Real)(declare-const Y_1 Real)(declare-const Y_2 Real)\n";
    let boxed = "(assert (<= X_0 1))(assert (>= X_0 -1))(assert (<= X_1 1))(assert (>= X_1 -1))\n";
    std::fs::write(dir.join("p.vnnlib"), format!("{decls}{boxed}(assert (>= Y_1 Y_0))\n")).unwrap();
    std::fs::write(dir.join("instances.csv"), "smx.onnx,p.vnnlib,10\n").unwrap();
    let res = dir.join("r.csv");
    let inst = dir.join("instances.csv");
    let o = vnncomp_cpu(&inst, &res, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let cex = std::fs::read_to_string(dir.join("r.csv.cex/smx.onnx__p.vnnlib.counterexample")).unwrap();
    assert!(cex.starts_with("sat\n"), "{cex}");
    let (x, y) = (values(&cex, "X_"), values(&cex, "Y_"));
    assert_eq!((x.len(), y.len()), (2, 3), "{cex}");
    // The Softmax of the logits at the stated point, in f64.
    let logits: Vec<f64> = (0..3).map(|i| W[2 * i] as f64 * x[0] + W[2 * i + 1] as f64 * x[1] + B[i] as f64).collect();
    let m = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let s: f64 = logits.iter().map(|v| (v - m).exp()).sum();
    for (j, (got, l)) in y.iter().zip(&logits).enumerate() {
        let want = (l - m).exp() / s;
        assert!((got - want).abs() <= 1e-6, "Y_{j}: stated {got}, the Softmax gives {want} (logit {l})");
    }
    assert!(y[1] >= y[0], "the stated outputs meet the property: {y:?}");
    // The same through verify's --result-file.
    let rf = dir.join("result.txt");
    let (model_path, prop) = (dir.join("smx.onnx"), dir.join("p.vnnlib"));
    let args = ["verify", model_path.to_str().unwrap(), prop.to_str().unwrap(), "--backend", "cpu", "--result-file"];
    let o = polycert(&[&args[..], &[rf.to_str().unwrap()]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let y2 = values(&std::fs::read_to_string(&rf).unwrap(), "Y_");
    assert!((y2.iter().sum::<f64>() - 1.0).abs() <= 1e-6, "Softmax outputs sum to one: {y2:?}");
}
