//! The VNN-LIB 2.0 command line's `verify PROP --network NAME=MODEL
//! --timeout T`: the property's network bound to its model, and the verdict
//! (`sat`, `unsat` or `unknown`) as stdout's first line.

use crate::InputError;
use anyhow::{Result, bail};
use std::path::{Path, PathBuf};

/// What a `--network` form resolves to.
pub struct Query {
    pub property: PathBuf,
    pub model: PathBuf,
    /// The analysis's time limit: `T` less a tenth (at most 1 s), so that the
    /// answer is out before a caller that stops the process at `T` does.
    pub timeout: Option<f64>,
}

/// Binds the `--network` entries to the property `prop` declares.
pub fn bind(prop: Option<&Path>, networks: &[String], timeout: Option<f64>) -> Result<Query> {
    let Some(prop) = prop else {
        bail!(InputError("--network needs the property: polycert verify PROP --network NAME=MODEL".into()));
    };
    let mut given = Vec::new();
    for n in networks {
        let Some((name, path)) = n.split_once('=').filter(|(a, b)| !a.is_empty() && !b.is_empty()) else {
            bail!(InputError(format!("--network {n}: expected NAME=MODEL")));
        };
        given.push((name, PathBuf::from(path)));
    }
    let text = std::fs::read(prop).map_err(|e| InputError(format!("{}: cannot read the file: {e}", prop.display())))?;
    let declared = polycert_onnx::network_names(&String::from_utf8_lossy(&text));
    let names: Vec<&str> = declared.iter().map(|d| d.name.as_str()).collect();
    if declared.len() > 1 || given.len() > 1 {
        bail!(InputError(format!(
            "{}: declares {} network(s) ({}) and {} --network given: polycert verifies one network per query",
            prop.display(),
            declared.len(),
            names.join(", "),
            given.len()
        )));
    }
    let (name, model) = given.pop().expect("one --network");
    if let Some(d) = declared.first().filter(|d| d.name != name) {
        bail!(InputError(format!("{}: declares network '{}', --network names '{name}'", prop.display(), d.name)));
    }
    let timeout = timeout.map(|t| t - (0.1 * t).min(1.0));
    Ok(Query { property: prop.to_path_buf(), model, timeout })
}

/// The answer's text: the verdict, and for `sat` the counterexample.
pub fn answer(result: &str, cex: Option<String>) -> String {
    match (result, cex) {
        ("falsified", Some(c)) => c,
        ("falsified", None) => "sat\n".into(),
        ("verified", _) => "unsat\n".into(),
        _ => "unknown\n".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_network_must_be_the_one_declared() {
        let dir = std::env::temp_dir().join(format!("polycert-v2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("p.vnnlib");
        let one = "(vnnlib-version <2.0>)\n(declare-network N (declare-input X float32 [1]) (declare-output Y float32 [1]))\n";
        std::fs::write(&p, one).unwrap();
        let q = bind(Some(&p), &["N=m.onnx".into()], Some(5.0)).unwrap();
        assert_eq!((q.model, q.timeout), (PathBuf::from("m.onnx"), Some(4.5)));
        assert_eq!(bind(Some(&p), &["N=m.onnx".into()], Some(60.0)).unwrap().timeout, Some(59.0));
        let e = bind(Some(&p), &["M=m.onnx".into()], None).err().unwrap().to_string();
        assert!(e.ends_with("declares network 'N', --network names 'M'"), "{e}");
        assert!(bind(Some(&p), &["m.onnx".into()], None).err().unwrap().to_string().contains("NAME=MODEL"));
        let two = format!(
            "{one}(declare-network N2 (equal-to N) (declare-input X2 float32 [1]) (declare-output Y2 float32 [1]))\n"
        );
        std::fs::write(&p, two).unwrap();
        let e = bind(Some(&p), &["N=m.onnx".into()], None).err().unwrap().to_string();
        assert!(e.contains("declares 2 network(s) (N, N2)") && e.contains("one network per query"), "{e}");
        assert!(bind(None, &["N=m.onnx".into()], None).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn answers_name_the_verdict_first() {
        assert_eq!(answer("verified", None), "unsat\n");
        assert_eq!(answer("falsified", Some("sat\n((X_0 1e0)\n)\n".into())), "sat\n((X_0 1e0)\n)\n");
        assert_eq!(answer("timeout", None), "unknown\n");
        assert_eq!(answer("unknown", None), "unknown\n");
    }
}
