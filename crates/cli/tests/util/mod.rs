//! Helpers shared by the CLI test targets.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn polycert(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_polycert")).args(args).output().expect("runs")
}

/// `polycert vnncomp --instances INST --results RESULTS --backend cpu` and
/// `extra`.
pub fn vnncomp_cpu(inst: &Path, results: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["vnncomp", "--instances", inst.to_str().unwrap(), "--results", results.to_str().unwrap()];
    args.extend(["--backend", "cpu"]);
    args.extend_from_slice(extra);
    polycert(&args)
}

/// A path in this test process's own temporary folder.
pub fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("polycert-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// The rows of a results file in the polycert format (header checked, then skipped).
pub fn result_rows(path: &Path) -> Vec<Vec<String>> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(header, ["onnx", "vnnlib", "result", "seconds", "counterexample", "message", "parse_seconds"]);
    r.records().map(|rec| rec.unwrap().iter().map(String::from).collect()).collect()
}

pub fn output(cmd: &mut Command) -> Output {
    cmd.output().expect("runs")
}
