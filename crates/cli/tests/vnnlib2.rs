//! The VNN-LIB 2.0 command line (`src/supports.rs`, `src/vnnlib2.rs`):
//! `polycert supports QUERY` and `polycert verify PROP --network NAME=MODEL`,
//! whose stdout starts with the verdict. The verdicts are checked against
//! the model's own outputs, computed here by `polycert verify` on the
//! VNNLIB 1.0 form of the same property.

mod util;

use util::{polycert, tmp};

const MODEL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../onnx-import/tests/fixtures/ops/leaky_relu.onnx");

fn stdout(args: &[&str]) -> (String, Option<i32>) {
    let o = polycert(args);
    (String::from_utf8_lossy(&o.stdout).into_owned(), o.status.code())
}

#[test]
fn supports_answers_one_item_per_line() {
    let (ops, code) = stdout(&["supports", "--onnx-operators"]);
    assert_eq!(code, Some(0));
    let ops: Vec<&str> = ops.lines().collect();
    assert!(
        ops.contains(&"Gemm") && ops.contains(&"ReduceSum") && ops.contains(&"ReduceMean") && !ops.contains(&"Erf"),
        "{ops:?}"
    );
    assert_eq!(stdout(&["supports", "--vnnlib-versions"]), ("1.0\n2.0\n".into(), Some(0)));
    assert_eq!(stdout(&["supports", "--onnx-opset-versions"]), ("7\n21\n".into(), Some(0)));
    assert_eq!(stdout(&["supports", "--multiple-network-theories"]), ("SNET\nMNET\nMENET\nMINET\n".into(), Some(0)));
    assert_eq!(stdout(&["supports", "--serialise-assignments"]), ("true\n".into(), Some(0)));
    assert_eq!(stdout(&["supports"]).1, Some(2));
}

/// A property on the fixture's outputs in both VNNLIB versions: `bound`
/// is the threshold on Y[0].
fn properties(bound: f64) -> (String, String) {
    let mut v1 = String::new();
    for i in 0..4 {
        v1 += &format!("(declare-const X_{i} Real)\n");
    }
    for j in 0..3 {
        v1 += &format!("(declare-const Y_{j} Real)\n");
    }
    let mut v2 = "(vnnlib-version <2.0>)\n(declare-network N (declare-input X real [1,4]) \
                  (declare-output Y float32 [1,3]))\n"
        .to_string();
    for i in 0..4 {
        v1 += &format!("(assert (>= X_{i} 0.1))\n(assert (<= X_{i} 0.2))\n");
        v2 += &format!("(assert (>= X[0,{i}] 0.1))\n(assert (<= X[0,{i}] 0.2))\n");
    }
    v1 += &format!("(assert (>= Y_0 {bound}))\n");
    v2 += &format!("(assert (>= Y[0,0] {bound}))\n");
    (v1, v2)
}

/// The 2.0 form answers sat, unsat or unknown first, as the 1.0 form's
/// verdict says, and names a wrong network.
#[test]
fn verify_with_network_answers_the_verdict_first() {
    let dir = tmp("vnnlib2");
    std::fs::create_dir_all(&dir).unwrap();
    let mut seen = Vec::new();
    for bound in [-100.0, 100.0, 0.0] {
        let (v1, v2) = properties(bound);
        let (p1, p2) = (dir.join("p1.vnnlib"), dir.join("p2.vnnlib"));
        std::fs::write(&p1, v1).unwrap();
        std::fs::write(&p2, v2).unwrap();
        let (rows, _) = stdout(&["verify", "--backend", "cpu", "--json", MODEL, p1.to_str().unwrap()]);
        let v: serde_json::Value = serde_json::from_str(rows.lines().next().unwrap()).unwrap();
        let network = format!("N={MODEL}");
        let (answer, code) =
            stdout(&["verify", "--backend", "cpu", p2.to_str().unwrap(), "--network", &network, "--timeout", "5.0"]);
        assert_eq!(code, Some(0));
        let first = answer.lines().next().unwrap();
        let want = match v["result"].as_str().unwrap() {
            "falsified" => "sat",
            "verified" => "unsat",
            _ => "unknown",
        };
        assert_eq!(first, want, "bound {bound}: {answer}");
        if first == "sat" {
            assert!(answer.contains("(X_0 ") && answer.contains("(Y_0 "), "{answer}");
        }
        seen.push(first.to_string());
        let o = polycert(&["verify", "--backend", "cpu", p2.to_str().unwrap(), "--network", &format!("M={MODEL}")]);
        assert_eq!(o.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&o.stderr).contains("declares network 'N', --network names 'M'"));
    }
    assert!(seen.contains(&"sat".to_string()) && seen.contains(&"unsat".to_string()), "{seen:?}");
}
