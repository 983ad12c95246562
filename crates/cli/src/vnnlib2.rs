//! The VNN-LIB 2.0 command line's `verify PROP --network NAME=MODEL
//! --timeout T`: the property's network bound to its model, and the verdict
//! (`sat`, `unsat` or `unknown`) as stdout's first line.

use crate::InputError;
use anyhow::{Result, bail};
use polycert_onnx::QueryLayout;
use std::path::{Path, PathBuf};

/// What a `--network` form resolves to.
pub struct Query {
    pub property: PathBuf,
    /// One model per network the property declares, in order (an
    /// `equal-to` network given none takes its twin's); one for VNNLIB 1.0.
    pub models: Vec<PathBuf>,
    /// The layout of a VNNLIB 2.0 query's variables.
    pub layout: Option<QueryLayout>,
    /// The analysis's time limit: `T` less a tenth (at most 1 s), so that the
    /// answer is out before a caller that stops the process at `T` does.
    pub timeout: Option<f64>,
}

/// Binds the `--network` entries to the networks `prop` declares.
pub fn bind(prop: Option<&Path>, networks: &[String], timeout: Option<f64>) -> Result<Query> {
    let Some(prop) = prop else {
        bail!(InputError("--network needs the property: polycert verify PROP --network NAME=MODEL".into()));
    };
    let mut given: Vec<(&str, PathBuf)> = Vec::new();
    for n in networks {
        let Some((name, path)) = n.split_once('=').filter(|(a, b)| !a.is_empty() && !b.is_empty()) else {
            bail!(InputError(format!("--network {n}: expected NAME=MODEL")));
        };
        if given.iter().any(|g| g.0 == name) {
            bail!(InputError(format!("--network {name} is given twice")));
        }
        given.push((name, PathBuf::from(path)));
    }
    let text = std::fs::read(prop).map_err(|e| InputError(format!("{}: cannot read the file: {e}", prop.display())))?;
    let file = prop.display().to_string();
    let layout =
        polycert_onnx::query_layout(&String::from_utf8_lossy(&text), &file).map_err(|e| InputError(e.to_string()))?;
    let timeout = timeout.map(|t| t - (0.1 * t).min(1.0));
    let Some(layout) = layout else {
        let [(_, model)] = &given[..] else {
            bail!(InputError(format!("{file}: a VNNLIB 1.0 property has one network: give one --network NAME=MODEL")));
        };
        return Ok(Query { property: prop.to_path_buf(), models: vec![model.clone()], layout: None, timeout });
    };
    let declared: Vec<&str> = layout.networks.iter().map(|n| n.name.as_str()).collect();
    if let Some((name, _)) = given.iter().find(|g| !declared.contains(&g.0)) {
        bail!(InputError(format!("{file}: declares network {}, --network names '{name}'", quoted(&declared))));
    }
    let mut models: Vec<PathBuf> = Vec::new();
    for n in &layout.networks {
        let twin = n.like.as_ref().filter(|l| l.0 == "equal-to").and_then(|l| declared.iter().position(|d| *d == l.1));
        match (given.iter().find(|g| g.0 == n.name), twin) {
            (Some(g), _) => models.push(g.1.clone()),
            (None, Some(k)) => models.push(models[k].clone()),
            (None, None) => {
                bail!(InputError(format!("{file}: network '{}' has no model: give --network {}=MODEL", n.name, n.name)))
            }
        }
    }
    Ok(Query { property: prop.to_path_buf(), models, layout: Some(layout), timeout })
}

fn quoted(names: &[&str]) -> String {
    names.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ")
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
        assert_eq!((q.models, q.timeout), (vec![PathBuf::from("m.onnx")], Some(4.5)));
        assert_eq!(bind(Some(&p), &["N=m.onnx".into()], Some(60.0)).unwrap().timeout, Some(59.0));
        let e = bind(Some(&p), &["M=m.onnx".into()], None).err().unwrap().to_string();
        assert!(e.ends_with("declares network 'N', --network names 'M'"), "{e}");
        assert!(bind(Some(&p), &["m.onnx".into()], None).err().unwrap().to_string().contains("NAME=MODEL"));
        // An equal-to network without a model takes its twin's; any other needs one.
        let two = format!(
            "{one}(declare-network N2 (equal-to N) (declare-input X2 float32 [1]) (declare-output Y2 float32 [1]))\n\
             (declare-network N3 (declare-input X3 float32 [1]) (declare-output Y3 float32 [1]))\n"
        );
        std::fs::write(&p, two).unwrap();
        let q = bind(Some(&p), &["N=m.onnx".into(), "N3=k.onnx".into()], None).unwrap();
        assert_eq!(q.models, ["m.onnx", "m.onnx", "k.onnx"].map(PathBuf::from));
        let e = bind(Some(&p), &["N=m.onnx".into()], None).err().unwrap().to_string();
        assert!(e.ends_with("network 'N3' has no model: give --network N3=MODEL"), "{e}");
        let e = bind(Some(&p), &["N=m.onnx".into(), "N=k.onnx".into()], None).err().unwrap().to_string();
        assert!(e.contains("given twice"), "{e}");
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
