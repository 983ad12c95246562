//! The boundary's wrong answers of issue 42, rebuilt as ONNX and VNNLIB
//! files and run through the binary on the CPU in both precisions and both
//! arithmetics: none may give a false `verified` or a false `falsified`.
//! (onnxruntime's outputs quoted here are from the issue; the boundary hunt,
//! `scripts/boundary_hunt`, checks such cases against onnxruntime itself.)

#[path = "../../onnx-import/tests/common/mod.rs"]
mod common;

mod util;

use common::{attr_f, encode, floats, model, node};
use util::{polycert, tmp};

const CONFIGS: [(&str, &str); 4] = [("f64", "point"), ("f32", "point"), ("f64", "interval"), ("f32", "interval")];

fn decls(n_in: usize, n_out: usize) -> String {
    let x = (0..n_in).map(|i| format!("(declare-const X_{i} Real)\n"));
    x.chain((0..n_out).map(|j| format!("(declare-const Y_{j} Real)\n"))).collect()
}

/// The verdict of `polycert verify` on every configuration.
fn verdicts(name: &str, onnx: &[u8], vnnlib: &str) -> Vec<String> {
    let (m, p) = (tmp(&format!("{name}.onnx")), tmp(&format!("{name}.vnnlib")));
    std::fs::write(&m, onnx).unwrap();
    std::fs::write(&p, vnnlib).unwrap();
    CONFIGS
        .iter()
        .map(|(precision, arith)| {
            let args = ["verify", "--model", m.to_str().unwrap(), "--vnnlib", p.to_str().unwrap()];
            let rest = ["--backend", "cpu", "--precision", precision, "--arith", arith, "--timeout", "5", "--json"];
            let o = polycert(&[&args[..], &rest[..]].concat());
            let out = String::from_utf8_lossy(&o.stdout);
            // Exit 0: all verified; 1: something not verified.
            assert!(matches!(o.status.code(), Some(0 | 1)), "{name}: {}", String::from_utf8_lossy(&o.stderr));
            let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
            format!("{precision}/{arith}: {}", v["result"].as_str().unwrap())
        })
        .collect()
}

fn assert_none(name: &str, got: &[String], wrong: &str) {
    assert!(got.iter().all(|v| !v.ends_with(wrong)), "{name}: {got:?}");
}

/// `y = BatchNormalization(x)` over one channel.
fn batch_norm(scale: f32, b: f32, mean: f32, var: f32, eps: f32) -> Vec<u8> {
    let p = |n: &str, v: f32| floats(n, &[1], &[v]);
    let nodes =
        vec![node("BatchNormalization", "bn", &["x", "s", "b", "m", "v"], &["y"], vec![attr_f("epsilon", eps)])];
    encode(&model(&[1, 1], nodes, vec![p("s", scale), p("b", b), p("m", mean), p("v", var)], 13))
}

fn point_box(x: &str) -> String {
    format!("(assert (>= X_0 {x}))\n(assert (<= X_0 {x}))\n")
}

/// Statistics that cancel: onnxruntime gives 0.0 at x = 0 (exact value
/// −3.35e-8), so `Y_0 ≥ 0` is reached and must not be verified.
#[test]
fn batch_norm_with_cancelling_statistics_is_not_verified() {
    let onnx = batch_norm(0.330_437_06, 11.895_008, 34.558_42, 0.921_618_16, 1e-5);
    let v = format!("{}{}(assert (>= Y_0 0.0))\n", decls(1, 1), point_box("0"));
    assert_none("bn", &verdicts("bn", &onnx, &v), "verified");
}

/// scale = mean = 1 + 2^-23, B = 1 + 2^-22, var 1, eps 0: the exact output
/// at 0 is −2^-46 but onnxruntime gives 0.0, so `Y_0 ≤ −2^-47` has no
/// float32 counterexample at 0 (nor may it be verified: the exact network
/// reaches it).
#[test]
fn batch_norm_counterexample_must_hold_in_float32() {
    let (s, b) = (1.0f32 + f32::EPSILON, 1.0f32 + 2.0 * f32::EPSILON);
    let onnx = batch_norm(s, b, s, 1.0, 0.0);
    let v = format!("{}{}(assert (<= Y_0 -7.105427357601001858711242675781e-15))\n", decls(1, 1), point_box("0"));
    let got = verdicts("bn_exact", &onnx, &v);
    assert_none("bn_exact", &got, "falsified");
    assert_none("bn_exact", &got, "verified");
}

/// `y = x·Mul(A, B)`: onnxruntime computes `fl32(x·fl32(A·B))`, exactly
/// 2.125834941864013671875 at X_0 = fl32(1.0215634), so `Y_0 ≥` that is
/// reached (the exact `x·A·B` is 2.12583470…, below it).
#[test]
fn folded_constants_round_as_the_runtime_does() {
    let nodes = vec![node("Mul", "ab", &["a", "b"], &["c"], vec![]), node("Mul", "xc", &["x", "c"], &["y"], vec![])];
    let inits = vec![floats("a", &[1], &[1.416_616_3]), floats("b", &[1], &[1.468_966_6])];
    let onnx = encode(&model(&[1, 1], nodes, inits, 13));
    let v =
        format!("{}{}(assert (>= Y_0 2.125834941864013671875))\n", decls(1, 1), point_box("1.02156341075897216796875"));
    assert_none("fold", &verdicts("fold", &onnx, &v), "verified");
}

/// `0.3·Y_0 − 0.1·Y_0 − 0.2·Y_0 ≥ 0` is `0 ≥ 0` over the reals: every
/// input reaches it.
#[test]
fn vnnlib_coefficients_are_exact() {
    let nodes = vec![node("Relu", "r", &["x"], &["y"], vec![])];
    let onnx = encode(&model(&[1, 1], nodes, vec![], 13));
    let v = format!(
        "{}(assert (>= X_0 0))\n(assert (<= X_0 1))\n(assert (>= (+ (* 0.3 Y_0) (* -0.1 Y_0) (* -0.2 Y_0)) 0.0))\n",
        decls(1, 1)
    );
    let got = verdicts("coef", &onnx, &v);
    assert!(got.iter().all(|v| v.ends_with("falsified")), "{got:?}");
}

/// `X_0 ≤ 1.000000119209289550781249`: the float32 1 + 2^-23 lies just
/// outside, and the only float32 input inside, 1, gives 1 < 1.0000001. So
/// `Y_0 ≥ 1.0000001` through the identity has no float32 counterexample
/// (nor may it be verified: the real input 1.0000001 reaches it).
#[test]
fn counterexamples_lie_in_the_stated_box() {
    let nodes = vec![node("Relu", "r", &["x"], &["y"], vec![])];
    let onnx = encode(&model(&[1, 1], nodes, vec![], 13));
    let v = format!(
        "{}(assert (>= X_0 1.0))\n(assert (<= X_0 1.000000119209289550781249))\n(assert (>= Y_0 1.0000001))\n",
        decls(1, 1)
    );
    let got = verdicts("box", &onnx, &v);
    assert_none("box", &got, "falsified");
    assert_none("box", &got, "verified");
}
