//! `polycert vnncomp`: runs a VNN-COMP instances file and appends one row
//! per instance to a results file (`results.rs`), flushed at once.

use crate::engine::{self, Job};
use crate::records::Record;
use crate::results::{Format, Mode, ResultsFile, Row};
use crate::say::{err, errln};
use crate::{AnalysisArgs, InputError, model};
use anyhow::{Context, Result, bail};
use clap::Args;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Args)]
pub struct VnncompArgs {
    /// instances.csv: `onnx,vnnlib,timeout` per line, paths relative to its folder.
    #[arg(long)]
    instances: PathBuf,
    /// Results CSV, one row per instance as it finishes (a file that
    /// already holds results is refused, unless --resume or --overwrite).
    #[arg(long)]
    results: PathBuf,
    /// Keep the results file's rows and run only the instances it lacks.
    #[arg(long)]
    resume: bool,
    /// Empty the results file first.
    #[arg(long, conflicts_with = "resume")]
    overwrite: bool,
    /// Exit with 1 unless every instance is unsat (for scripts).
    #[arg(long)]
    exit_code: bool,
    /// Results file format.
    #[arg(long, value_enum, default_value = "polycert")]
    format: Format,
    /// Category column of `--format vnncomp` (default: the instances file's folder name).
    #[arg(long)]
    category: Option<String>,
    /// Run only the K-th of N slices of the instances (every N-th from the K-th), for a
    /// cluster; `polycert merge` joins the shards' results.
    #[arg(long, value_name = "K/N")]
    shard: Option<crate::shard::Shard>,
    #[command(flatten)]
    analysis: AnalysisArgs,
}

/// A results file's word as the `&'static str` of a tally (`unknown` for
/// any other).
pub fn vnn_result_word(word: &str) -> &'static str {
    ["unsat", "sat", "timeout", "error"].into_iter().find(|w| *w == word).unwrap_or("unknown")
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

/// The counterexample file of an instance: network and property, so that
/// networks sharing a property file do not overwrite each other's.
fn cex_file_name(inst: &Instance) -> String {
    let flat = |p: &str| p.replace(['/', '\\'], "_");
    format!("{}__{}.counterexample", flat(&inst.onnx), flat(&inst.vnnlib))
}

/// Writes a counterexample in VNN-COMP's format: `sat`, then one `(X_i v)`
/// / `(Y_j v)` pair per line inside one pair of parentheses. Each float32 is
/// printed as its exact double (shortest round-trip form), so parsing it as a
/// double and casting to float32, as VNN-COMP's checker does, gives it back
/// exactly.
pub fn write_cex(path: &Path, x: &[f32], y: &[f32]) -> Result<()> {
    std::fs::write(path, cex_text(x, y)).with_context(|| format!("{}: cannot write", path.display()))
}

/// `sat` and the counterexample's assignment, as VNN-COMP writes it.
pub fn cex_text(x: &[f32], y: &[f32]) -> String {
    let mut s = String::from("sat\n(");
    for (i, v) in x.iter().enumerate() {
        s.push_str(&format!("(X_{i} {:e})\n", *v as f64));
    }
    for (j, v) in y.iter().enumerate() {
        s.push_str(&format!("(Y_{j} {:e})\n", *v as f64));
    }
    s.push_str(")\n");
    s
}

/// The message of a row that branch and bound decided or left open.
fn search_message(s: &polycert_deeppoly::base::property::SearchStats) -> String {
    // Positive only once every leaf is proved: the proof's margin.
    let what = if s.best_bound > 0.0 { "margin" } else { "weakest bound" };
    let from_root = match s.leaves_from_root {
        0 => String::new(),
        n => format!(", {n} leaves with their root's bounds (search memory)"),
    };
    format!(
        "{} splitting: {} leaves proved, {} open, {what} {:e}{}{from_root}",
        s.branching,
        s.leaves_proved,
        s.leaves_open,
        s.best_bound,
        crate::records::rate(s)
    )
}

/// A record waiting for the rows before it, with its counterexample file.
type Ready = Option<(Record, Option<PathBuf>)>;

/// One `vnncomp` run: where rows go, and what it has tallied so far.
struct Runner<'a> {
    args: &'a VnncompArgs,
    base: PathBuf,
    cex_dir: PathBuf,
    out: ResultsFile,
    bar: indicatif::ProgressBar,
    progress: std::sync::Arc<polycert_deeppoly::base::progress::Progress>,
    models: HashMap<String, std::result::Result<model::Imported, String>>,
    /// Load time per network, charged to the first row that uses it.
    prepare: HashMap<String, f64>,
    tally: Vec<(&'static str, f64)>,
    first_error: Option<String>,
}

impl Runner<'_> {
    /// Writes one instance's row, and tallies it.
    fn emit(&mut self, inst: &Instance, rec: Record, cex: Option<PathBuf>) -> Result<()> {
        let r = vnn_result(&rec.result);
        self.out.write(&Row {
            onnx: &inst.onnx,
            vnnlib: &inst.vnnlib,
            result: r,
            seconds: rec.seconds,
            parse_seconds: rec.parse_seconds,
            prepare_seconds: self.prepare.get_mut(&inst.onnx).map(std::mem::take).unwrap_or(0.0),
            counterexample: cex,
            message: rec.error.clone().or_else(|| rec.search.as_ref().map(search_message)),
        })?;
        let err = rec.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default();
        self.bar.suspend(|| errln!("{} {} -> {r} ({:.3}s){err}", inst.onnx, inst.vnnlib, rec.seconds));
        self.bar.inc(1);
        self.tally.push((r, rec.seconds));
        if self.first_error.is_none() {
            self.first_error = rec.error;
        }
        Ok(())
    }

    /// Loads `onnx` once; its time goes to [`Runner::prepare`].
    fn load(&mut self, onnx: &str) {
        if !self.models.contains_key(onnx) {
            let t = Instant::now();
            let m = model::load(&self.base.join(onnx)).map_err(|e| format!("{e:#}"));
            self.prepare.insert(onnx.to_string(), t.elapsed().as_secs_f64());
            self.models.insert(onnx.to_string(), m);
        }
    }

    /// Writes the rows of `ready` from `next` on, as long as they are there.
    fn flush(&mut self, group: &[&Instance], ready: &mut [Ready], next: &mut usize) -> Result<()> {
        while let Some((rec, cex)) = ready.get_mut(*next).and_then(Option::take) {
            self.emit(group[*next], rec, cex)?;
            *next += 1;
        }
        Ok(())
    }

    /// Consecutive instances on one network with one timeout, analysed as
    /// batches (their rows share the GEMMs); rows go out in instance order.
    fn group(&mut self, backend: &engine::Engine, group: &[&Instance]) -> Result<()> {
        let first = group[0];
        self.load(&first.onnx);
        let imported = match self.models.remove(&first.onnx).expect("loaded") {
            Err(e) => {
                for inst in group {
                    self.emit(inst, Record::error(&inst.onnx, &inst.vnnlib, e.clone()), None)?;
                }
                self.models.insert(first.onnx.clone(), Err(e));
                return Ok(());
            }
            Ok(m) => m,
        };
        let r = self.analyse(backend, group, &imported);
        self.models.insert(first.onnx.clone(), Ok(imported));
        r
    }

    fn analyse(&mut self, backend: &engine::Engine, group: &[&Instance], imported: &model::Imported) -> Result<()> {
        let first = group[0];
        // A bad property file's error row waits for the results before it.
        let mut ready: Vec<Ready> = Vec::with_capacity(group.len());
        let (mut jobs, mut member, mut parse) = (Vec::new(), Vec::new(), Vec::new());
        for (k, inst) in group.iter().enumerate() {
            let t = Instant::now();
            match model::load_vnnlib(imported, &self.base.join(&inst.vnnlib)) {
                Err(e) => ready.push(Some((Record::error(&inst.onnx, &inst.vnnlib, format!("{e:#}")), None))),
                Ok(property) => {
                    ready.push(None);
                    jobs.push(Job { name: inst.vnnlib.clone(), property });
                    member.push(k);
                    parse.push(t.elapsed().as_secs_f64());
                }
            }
        }
        let a = self.args;
        // An instance's clock starts before its property is read: the
        // batch's analyses get the timeout less the slowest parse, and each
        // row's time includes its own parse.
        let slowest = parse.iter().copied().fold(0.0, f64::max);
        let mut plan = a.analysis.plan(backend, jobs.len(), Some((first.timeout - slowest).max(0.0)));
        plan.opts.progress = Some(self.progress.clone());
        let (mut next_job, mut next_row) = (0, 0);
        self.flush(group, &mut ready, &mut next_row)?;
        let net = &imported.network;
        let precision = a.analysis.precision.on(backend, &imported.network);
        let r = engine::run_jobs_parallel(backend, &plan, net, &first.onnx, &jobs, precision, &mut |mut rec| {
            let k = member[next_job];
            rec.seconds += parse[next_job];
            rec.parse_seconds = Some(parse[next_job]);
            next_job += 1;
            let cex = match &rec.counterexample {
                Some(x) => Some(self.write_cex(group[k], imported, x)?),
                None => None,
            };
            ready[k] = Some((rec, cex));
            self.flush(group, &mut ready, &mut next_row)
        });
        r?;
        self.flush(group, &mut ready, &mut next_row)
    }

    /// The counterexample file of `inst`, written.
    fn write_cex(&self, inst: &Instance, imported: &model::Imported, x: &[f32]) -> Result<PathBuf> {
        std::fs::create_dir_all(&self.cex_dir)?;
        let y = crate::model::outputs(imported, x);
        let path = self.cex_dir.join(cex_file_name(inst));
        write_cex(&path, &imported.from_ir_input(x), &y)?;
        Ok(path)
    }
}

pub fn run(a: VnncompArgs) -> Result<bool> {
    a.analysis.start_threads()?;
    let backend = engine::open_backend(a.analysis.backend, a.analysis.memory_budget(), &a.analysis.gpus)?;
    let mut instances = read_instances(&a.instances)?;
    if let Some(s) = a.shard {
        instances = instances.into_iter().enumerate().filter(|(i, _)| s.takes(*i)).map(|(_, x)| x).collect();
    }
    let base = a.instances.parent().unwrap_or(Path::new(".")).to_path_buf();
    let category = a.category.clone().unwrap_or_else(|| {
        let dir = std::path::absolute(&base).unwrap_or_else(|_| base.clone());
        dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    });
    let mode = match (a.resume, a.overwrite) {
        (true, _) => Mode::Resume,
        (_, true) => Mode::Overwrite,
        _ => Mode::New,
    };
    let (out, rows) = ResultsFile::open(&a.results, a.format, category, mode)?;
    if let Some(s) = a.shard {
        crate::shard::RunRecord::new("vnncomp", &a.instances, s, instances.len())?.keep(&a.results, a.resume)?;
    }
    let done: HashSet<(String, String)> = rows.into_iter().collect();
    let pending: Vec<&Instance> =
        instances.iter().filter(|i| !done.contains(&(i.onnx.clone(), i.vnnlib.clone()))).collect();
    if a.resume {
        let skipped = instances.len() - pending.len();
        errln!(
            "polycert: {}: {skipped} of {} instances already have results, skipped; {} to run",
            a.results.display(),
            instances.len(),
            pending.len()
        );
    }
    let mut r = Runner {
        args: &a,
        base,
        cex_dir: PathBuf::from(format!("{}.cex", a.results.display())),
        out,
        bar: crate::live::bar(pending.len()),
        progress: Default::default(),
        models: HashMap::new(),
        prepare: HashMap::new(),
        tally: Vec::with_capacity(pending.len()),
        first_error: None,
    };
    let (bar, progress) = (r.bar.clone(), r.progress.clone());
    crate::live::while_running(&bar, &progress, || -> Result<()> {
        for group in pending.chunk_by(|x, y| x.onnx == y.onnx && x.timeout == y.timeout) {
            r.group(&backend, group)?;
        }
        Ok(())
    })?;
    bar.finish_and_clear();
    if !r.tally.is_empty() {
        err!("{}", crate::records::vnn_summary(&r.tally));
    }
    if let Some(e) = r.first_error {
        bail!(InputError(format!("some instances failed; first error: {e}")));
    }
    Ok(!a.exit_code || r.tally.iter().all(|t| t.0 == "unsat"))
}
