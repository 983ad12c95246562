//! `polycert verify`: robustness of images in an L∞ ball, or one VNNLIB
//! property, on one model.

use crate::args::{AnalysisArgs, seconds, unit};
use crate::engine::{self, Job};
use crate::records::{self, Record};
use crate::results::{Format, Mode, ResultsFile, Row};
use crate::say::{err, errln, out, outln};
use crate::testset::TestSet;
use crate::{InputError, images, live, model, vnncomp};
use anyhow::{Context, Result, bail};
use clap::Args;
use polycert_deeppoly::{InputBox, Network, Property};
use std::path::{Path, PathBuf};

#[derive(Args)]
#[command(after_help = EXAMPLES)]
pub struct VerifyArgs {
    /// ONNX model [default: the embedded digits MLP and its test images].
    #[arg(value_name = "MODEL")]
    model_file: Option<PathBuf>,
    /// VNNLIB property (.vnnlib or .vnnlib.gz) of MODEL.
    #[arg(value_name = "PROPERTY", conflicts_with_all = ["vnnlib", "images"])]
    property_file: Option<PathBuf>,
    /// ONNX model (the same as MODEL).
    #[arg(long, conflicts_with = "model_file")]
    model: Option<PathBuf>,
    /// VNNLIB property (the same as PROPERTY).
    #[arg(long, conflicts_with = "images")]
    vnnlib: Option<PathBuf>,
    /// The VNN-LIB 2.0 form `verify PROP --network NAME=MODEL`: MODEL is the
    /// network PROP declares as NAME (one network per query); stdout's first
    /// line is the verdict (sat, unsat or unknown), within 90% of --timeout.
    #[arg(long, value_name = "NAME=MODEL", conflicts_with_all = ["model", "vnnlib", "images", "property_file"])]
    network: Vec<String>,
    /// Set by `--network`: the verdict on stdout, the rows on stderr.
    #[arg(skip)]
    answer: bool,
    /// Set by `--network`: the query's layout and one model per network.
    #[arg(skip)]
    query: Option<(polycert_onnx::QueryLayout, Vec<PathBuf>)>,
    /// Images: IDX (gzipped or not) or ERAN-style CSV.
    #[arg(long)]
    images: Option<PathBuf>,
    /// L∞ radius around each image, in pixel scale [0, 1].
    #[arg(long, value_parser = unit, default_value_t = 0.03, conflicts_with_all = ["vnnlib", "property_file"])]
    eps: f64,
    /// Verify only the first N images [default: all].
    #[arg(long, value_parser = crate::args::positive::<usize>, conflicts_with_all = ["vnnlib", "property_file"])]
    count: Option<usize>,
    /// Time limit per property, in seconds [default: none: a search stops at its leaf limit].
    /// Images with --timeout and no --budget: each image gets the whole analysis, one by one.
    #[arg(long, value_parser = seconds)]
    timeout: Option<f64>,
    /// Images: seconds for the whole set. Every image gets DeepPoly and the
    /// attack; then the open ones, closest margin first, get optimised
    /// slopes (until a chunk gains nothing), then branch and bound, until the budget is spent
    /// [default: 10, or 1 per 1,000 images where that is more; none with --timeout].
    #[arg(long, value_parser = seconds, conflicts_with_all = ["vnnlib", "property_file"])]
    budget: Option<f64>,
    /// One JSON object per property on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Write the VNN-COMP result (unsat/sat/unknown/timeout, and a
    /// counterexample) of the first property to this file.
    #[arg(long)]
    result_file: Option<PathBuf>,
    /// Exit with 1 unless every property is verified (for scripts).
    #[arg(long)]
    exit_code: bool,
    /// Images: a results CSV (the format of `vnncomp --results`), one row per image in image
    /// order (a file that already holds results is refused).
    #[arg(long, requires = "images")]
    results: Option<PathBuf>,
    /// Images: run only the K-th of N slices (every N-th image from the K-th), for a cluster;
    /// `polycert merge` joins the shards' --results.
    #[arg(long, value_name = "K/N", requires_all = ["images", "results"])]
    shard: Option<crate::shard::Shard>,
    /// Label file for IDX images [default: derived from the image file name].
    #[arg(long, help_heading = "Images", requires = "images")]
    labels: Option<PathBuf>,
    /// Per-channel normalisation mean, comma separated.
    #[arg(long, help_heading = "Images", value_delimiter = ',', allow_negative_numbers = true)]
    mean: Vec<f64>,
    /// Per-channel normalisation standard deviation, comma separated.
    #[arg(long, help_heading = "Images", value_delimiter = ',')]
    std: Vec<f64>,
    /// Pixel order of the images.
    #[arg(long, help_heading = "Images", value_enum, default_value = "chw")]
    layout: images::Layout,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
}

const EXAMPLES: &str = "\
Examples:
  polycert verify                                   the embedded digits model, eps 0.03
  polycert verify net.onnx prop.vnnlib --timeout 60
  polycert verify net.onnx --images t10k-images-idx3-ubyte.gz --eps 0.02 --count 1000
  polycert verify net.onnx prop.vnnlib --set attack-restarts=10 --result-file out.txt

Exit status: 0 when the run completes (1 with --exit-code unless every
property is verified), 2 on bad input.";

/// What `verify` checks: the jobs, and for image jobs their centres.
struct Work {
    jobs: Vec<Job>,
    /// Per job: the image itself in the IR's input order (none for VNNLIB).
    centres: Vec<Option<Vec<f64>>>,
}

fn image_jobs(a: &VerifyArgs, imported: &model::Imported) -> Result<Work> {
    let net = &imported.network;
    let (n_in, n_out) = (net.input_shape().numel(), net.output_shape().numel());
    let (imgs, src) = match &a.images {
        Some(p) => {
            let channels = images::channels(net.input_shape(), &a.mean);
            (images::load(p, a.labels.as_deref(), channels, a.layout)?, p.display().to_string())
        }
        None if a.model_path().is_none() => (model::embedded_images()?, "embedded:digits_test".to_string()),
        None => bail!(InputError("give a PROPERTY (--vnnlib) or --images for the model".into())),
    };
    let mut work = Work { jobs: Vec::new(), centres: Vec::new() };
    let taken = imgs.iter().take(a.count.unwrap_or(usize::MAX)).enumerate();
    for (i, img) in taken.filter(|(i, _)| a.shard.is_none_or(|s| s.takes(*i))) {
        if img.pixels.len() != n_in {
            bail!(InputError(format!("{src}: image {i} has {} values, the model takes {n_in}", img.pixels.len())));
        }
        let pixels = imported.to_ir_input(&img.pixels);
        let input = InputBox::linf(&pixels, a.eps, (0.0, 1.0), &a.mean, &a.std)
            .map_err(|e| InputError(format!("{src}: {e}")))?;
        let name = format!("{src}#{i} eps={}", a.eps);
        let property = Property::robustness(name.clone(), input, img.label, n_out)
            .map_err(|e| InputError(format!("{src}: image {i}: {e}")))?;
        let centre = InputBox::linf(&pixels, 0.0, (0.0, 1.0), &a.mean, &a.std).map(|b| b.centre()).ok();
        work.centres.push(centre);
        work.jobs.push(Job { name, property });
    }
    if imgs.len() < a.count.unwrap_or(0) {
        bail!(InputError(format!(
            "{src}: --count {} asks for more than its {} images",
            a.count.unwrap_or(0),
            imgs.len()
        )));
    }
    Ok(work)
}

impl VerifyArgs {
    fn model_path(&self) -> Option<&Path> {
        self.model_file.as_deref().or(self.model.as_deref())
    }

    fn property_path(&self) -> Option<&Path> {
        self.property_file.as_deref().or(self.vnnlib.as_deref())
    }

    /// For images, whether they run as a test set, and its budget (none:
    /// no limit but the per-image timeout).
    fn test_set(&self, images: usize) -> Option<Option<f64>> {
        if self.property_path().is_some() {
            return None;
        }
        match (self.budget, self.timeout) {
            (Some(b), _) => Some(Some(b)),
            (None, Some(_)) => None,
            (None, None) => Some(Some(crate::testset::default_budget(images))),
        }
    }
}

/// Refuses, before any work, what would fail or be ignored later.
fn check(a: &VerifyArgs) -> Result<()> {
    if let Some(p) = a.property_path()
        && a.model_path().is_none()
    {
        bail!(InputError(format!("{}: a property needs its model: give MODEL (or --model) too", p.display())));
    }
    if let Some(rf) = &a.result_file {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(rf)
            .map_err(|e| InputError(format!("{}: cannot write: {e}", rf.display())))?;
    }
    Ok(())
}

/// The model, its name, and the properties to verify.
fn read_inputs(a: &VerifyArgs) -> Result<(model::Imported, String, Work)> {
    let (mut imported, model_name) = match (&a.query, a.model_path()) {
        (Some((layout, models)), _) => {
            let m = model::load_query(layout, models)?;
            let name = m.file.clone();
            (m, name)
        }
        (None, Some(p)) => (model::load(p)?, p.display().to_string()),
        (None, None) => (model::embedded()?, "embedded:digits_mlp".to_string()),
    };
    let work = match a.property_path() {
        Some(p) => {
            // One model whose final Softmax the property bounds: read it again, the Softmax kept.
            let single = match &a.query {
                Some((layout, models)) => models.first().filter(|_| layout.is_simple()).map(PathBuf::as_path),
                None => a.model_path(),
            };
            let raw = model::read_vnnlib(&imported, p)?;
            if let Some(path) = single
                && model::bounds_softmax(&imported, &raw)
            {
                imported = model::load_keeping_softmax(path)?;
            }
            let property = model::checked(&imported, raw, p)?;
            Work { jobs: vec![Job { name: p.display().to_string(), property }], centres: vec![None] }
        }
        None => image_jobs(a, &imported)?,
    };
    Ok((imported, model_name, work))
}

pub fn run(mut a: VerifyArgs) -> Result<bool> {
    let start = std::time::Instant::now();
    if !a.network.is_empty() {
        let q = crate::vnnlib2::bind(a.model_file.as_deref(), &a.network, a.timeout)?;
        (a.model_file, a.vnnlib, a.timeout, a.answer) = (q.models.first().cloned(), Some(q.property), q.timeout, true);
        a.query = q.layout.map(|l| (l, q.models));
    }
    check(&a)?;
    a.analysis.start_threads()?;
    // The backend starts (a GPU's context takes a third of a second or
    // more) while the model and its inputs are read.
    let (backend, budget, gpus) = (a.analysis.backend, a.analysis.memory_budget(), a.analysis.gpus.clone());
    let opening = std::thread::spawn(move || engine::open_backend(backend, budget, &gpus));
    let (imported, model_name, work) = read_inputs(&a)?;
    let engine = opening.join().map_err(|_| anyhow::anyhow!("the backend's start panicked"))??;
    let precision = a.analysis.precision.on(&engine, &imported.network);
    let net = &imported.network;
    let mut plan = a.analysis.plan(&engine, work.jobs.len(), a.timeout);
    // One property: its timeout counts from the start, import and parsing included.
    if let (Some(t), Some(_)) = (a.timeout, a.property_path()) {
        let end = start + std::time::Duration::from_secs_f64(t);
        plan.opts.deadline = Some(plan.opts.deadline.map_or(end, |d| d.min(end)));
    }
    let progress = std::sync::Arc::new(polycert_deeppoly::base::progress::Progress::default());
    plan.opts.progress = Some(progress.clone());
    let bar = live::bar(work.jobs.len());
    let mut records = Vec::new();
    let say = |line: &str| if a.answer { errln!("{line}") } else { outln!("{line}") };
    if !a.json {
        say(&records::header());
    }
    let test_set = a.test_set(work.jobs.len());
    let deadline = test_set.flatten().map(|b| start + std::time::Duration::from_secs_f64(b));
    let mut certified = 0;
    let mut rows = match &a.results {
        Some(p) => Some(InOrder::open(p, &a, &model_name, work.jobs.len())?),
        None => None,
    };
    let mut emit = |i: usize, mut r: Record| {
        certified += usize::from(r.result == "verified");
        bar.set_prefix(live::certified(certified, deadline));
        classes(&mut r, net, work.centres[i].as_deref());
        bar.suspend(|| if a.json { r.emit_json() } else { say(&r.line()) });
        if let Some(rows) = rows.as_mut() {
            rows.put(i, &r)?;
        }
        records.push(r);
        Ok(())
    };
    let spent = live::while_running(&bar, &progress, || match test_set {
        Some(budget) => {
            let (model_name, chunk) = (&model_name, crate::testset::CHUNK);
            let set = TestSet { engine: &engine, plan: &plan, net, model_name, precision, bar: &bar, chunk };
            set.run(&work.jobs, (start, budget), &mut emit).map(Some)
        }
        None => {
            let mut k = 0;
            engine::run_jobs_parallel(&engine, &plan, net, &model_name, &work.jobs, precision, &mut |r| {
                k += 1;
                bar.inc(1);
                emit(k - 1, r)
            })
            .map(|()| None)
        }
    })?;
    bar.finish_and_clear();
    let ok = {
        let _p = polycert_deeppoly::base::profile::span("cli.finish");
        finish(&a, &records, spent, &imported)
    };
    let _p = polycert_deeppoly::base::profile::span("cli.close_backend");
    drop(engine);
    ok
}

/// The result file, the summary, the VNN-LIB 2.0 answer and the exit status.
fn finish(
    a: &VerifyArgs,
    records: &[Record],
    spent: Option<crate::testset::Spent>,
    imported: &model::Imported,
) -> Result<bool> {
    if let Some(rf) = &a.result_file {
        write_result(rf, records.first(), imported)?;
    }
    let mut summary = records::summary(records);
    if let Some(spent) = spent {
        summary.push_str(&spent.lines());
        if std::env::var_os("POLYCERT_PROFILE").is_some_and(|v| v != "0") {
            err!("{}", spent.chunk_lines());
        }
    }
    if a.json || a.answer {
        err!("{summary}");
    } else {
        out!("{summary}");
    }
    if a.answer {
        let first = records.first();
        let cex = first.and_then(|r| r.counterexample.as_ref()).map(|x| {
            let y = crate::model::outputs(imported, x);
            vnncomp::cex_text(&imported.from_ir_input(x), &y)
        });
        out!("{}", crate::vnnlib2::answer(first.map_or("unknown", |r| r.result.as_str()), cex));
    }
    if let Some(e) = records.iter().find_map(|r| r.error.clone()) {
        bail!(InputError(e));
    }
    Ok(!a.exit_code || records.iter().all(|r| r.result == "verified"))
}

/// The `--results` rows of images, written in image order as soon as the
/// images before them have theirs.
struct InOrder {
    file: ResultsFile,
    model: String,
    next: usize,
    waiting: std::collections::BTreeMap<usize, Record>,
}

impl InOrder {
    fn open(path: &Path, a: &VerifyArgs, model: &str, n: usize) -> Result<Self> {
        let (file, _) = ResultsFile::open(path, Format::Polycert, String::new(), Mode::New)?;
        if let (Some(s), Some(images)) = (a.shard, &a.images) {
            crate::shard::RunRecord::new("verify", images, s, n)?.keep(path, false)?;
        }
        Ok(InOrder { file, model: model.to_string(), next: 0, waiting: Default::default() })
    }

    fn put(&mut self, i: usize, r: &Record) -> Result<()> {
        self.waiting.insert(i, r.clone());
        while let Some(r) = self.waiting.remove(&self.next) {
            self.file.write(&Row {
                onnx: &self.model,
                vnnlib: &r.property,
                result: vnncomp::vnn_result(&r.result),
                seconds: r.seconds,
                parse_seconds: None,
                prepare_seconds: 0.0,
                counterexample: None,
                message: r.error.clone(),
            })?;
            self.next += 1;
        }
        Ok(())
    }
}

/// For a falsified image: the class that wins at the counterexample, and
/// the class of the image itself (which may already be wrong).
fn classes(r: &mut Record, net: &Network, centre: Option<&[f64]>) {
    let (Some(x), Some(centre)) = (&r.counterexample, centre) else { return };
    let top = |y: Vec<f32>| y.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(k, _)| k);
    r.wins = top(polycert_deeppoly::base::eval::eval::<f32>(net, x));
    let c: Vec<f32> = centre.iter().map(|&v| v as f32).collect();
    r.image_class = top(polycert_deeppoly::base::eval::eval::<f32>(net, &c));
}

fn write_result(rf: &Path, first: Option<&Record>, imported: &model::Imported) -> Result<()> {
    match first {
        Some(Record { counterexample: Some(x), .. }) => {
            let y = crate::model::outputs(imported, x);
            vnncomp::write_cex(rf, &imported.from_ir_input(x), &y)
        }
        r => {
            let r = r.map(|r| vnncomp::vnn_result(&r.result)).unwrap_or("unknown");
            std::fs::write(rf, format!("{r}\n")).with_context(|| format!("{}: cannot write", rf.display()))
        }
    }
}
