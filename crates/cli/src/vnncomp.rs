//! `polycert vnncomp`: runs a VNN-COMP instances file and appends one
//! `onnx,vnnlib,result,seconds` row per instance, flushed at once.

use crate::engine::{self, Job};
use crate::{AnalysisArgs, InputError, model};
use anyhow::{Context, Result, bail};
use clap::Args;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct VnncompArgs {
    /// instances.csv: `onnx,vnnlib,timeout` per line, paths relative to its folder.
    #[arg(long)]
    instances: PathBuf,
    /// Results CSV to append to.
    #[arg(long)]
    results: PathBuf,
    /// Skip the instances already in the results file.
    #[arg(long)]
    resume: bool,
    #[command(flatten)]
    analysis: AnalysisArgs,
}

/// VNN-COMP's word for a polycert result.
pub fn vnn_result(result: &str) -> &'static str {
    match result {
        "verified" => "unsat",
        "falsified" => "sat",
        "timeout" => "timeout",
        "error" => "error",
        _ => "unknown",
    }
}

struct Instance {
    onnx: String,
    vnnlib: String,
    timeout: f64,
}

fn read_instances(path: &Path) -> Result<Vec<Instance>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let mut out = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != 3 {
            bail!(InputError(format!("{}:{}: expected onnx,vnnlib,timeout", path.display(), ln + 1)));
        }
        let timeout =
            f[2].parse().map_err(|_| InputError(format!("{}:{}: bad timeout '{}'", path.display(), ln + 1, f[2])))?;
        out.push(Instance { onnx: f[0].into(), vnnlib: f[1].into(), timeout });
    }
    Ok(out)
}

/// Writes a counterexample in VNN-COMP's format.
pub fn write_cex(path: &Path, x: &[f32], y: &[f32]) -> Result<()> {
    let mut s = String::from("sat\n(");
    for (i, v) in x.iter().enumerate() {
        s.push_str(&format!("(X_{i} {v:e})\n"));
    }
    for (j, v) in y.iter().enumerate() {
        s.push_str(&format!("(Y_{j} {v:e})\n"));
    }
    s.push_str(")\n");
    std::fs::write(path, s).with_context(|| format!("{}: cannot write", path.display()))
}

pub fn run(a: VnncompArgs) -> Result<bool> {
    let backend = engine::open_backend(a.analysis.backend, a.analysis.budget())?;
    let instances = read_instances(&a.instances)?;
    let base = a.instances.parent().unwrap_or(Path::new(".")).to_path_buf();
    let mut done = HashSet::new();
    if a.resume && a.results.exists() {
        let text =
            std::fs::read_to_string(&a.results).with_context(|| format!("{}: cannot read", a.results.display()))?;
        for line in text.lines() {
            let f: Vec<&str> = line.split(',').collect();
            if f.len() >= 4 {
                done.insert((f[0].to_string(), f[1].to_string()));
            }
        }
    }
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .truncate(false)
        .open(&a.results)
        .with_context(|| format!("{}: cannot open", a.results.display()))?;
    if !a.resume {
        out.set_len(0)?;
    }
    let cex_dir = PathBuf::from(format!("{}.cex", a.results.display()));
    let mut models: HashMap<String, std::result::Result<model::Imported, String>> = HashMap::new();
    let (mut all_unsat, mut first_error) = (true, None);
    for inst in &instances {
        if done.contains(&(inst.onnx.clone(), inst.vnnlib.clone())) {
            continue;
        }
        let net = models
            .entry(inst.onnx.clone())
            .or_insert_with(|| model::load(&base.join(&inst.onnx)).map_err(|e| format!("{e:#}")));
        let rec = match net {
            Err(e) => crate::report::Record::error(&inst.onnx, &inst.vnnlib, e.clone()),
            Ok(imported) => {
                let net = &imported.network;
                match model::load_vnnlib(imported, &base.join(&inst.vnnlib)) {
                    Err(e) => crate::report::Record::error(&inst.onnx, &inst.vnnlib, format!("{e:#}")),
                    Ok(property) => {
                        let jobs = [Job { name: inst.vnnlib.clone(), property }];
                        let opts = a.analysis.options(Some(inst.timeout));
                        let mut rec = None;
                        engine::run_jobs(&backend, net, &inst.onnx, &jobs, &opts, a.analysis.precision, &mut |r| {
                            rec = Some(r);
                            Ok(())
                        })?;
                        let rec = rec.expect("one job, one record");
                        if let Some(x) = &rec.counterexample {
                            std::fs::create_dir_all(&cex_dir)?;
                            let y = polycert_deeppoly::eval::eval::<f32>(net, x);
                            let stem = Path::new(&inst.vnnlib)
                                .file_name()
                                .map(|s| s.to_string_lossy().to_string())
                                .unwrap_or_default();
                            write_cex(&cex_dir.join(format!("{stem}.counterexample")), &imported.from_ir_input(x), &y)?;
                        }
                        rec
                    }
                }
            }
        };
        let r = vnn_result(&rec.result);
        writeln!(out, "{},{},{},{:.6}", inst.onnx, inst.vnnlib, r, rec.seconds)?;
        out.flush()?;
        eprintln!(
            "{} {} -> {r} ({:.3}s){}",
            inst.onnx,
            inst.vnnlib,
            rec.seconds,
            rec.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default()
        );
        all_unsat &= r == "unsat";
        if first_error.is_none() {
            first_error = rec.error;
        }
    }
    if let Some(e) = first_error {
        bail!(InputError(format!("some instances failed; first error: {e}")));
    }
    Ok(all_unsat)
}
