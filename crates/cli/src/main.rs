//! The `polycert` binary: `verify`, `vnncomp` and `fpna`.

mod cpuprof;
mod engine;
mod fpna;
mod images;
mod live;
mod model;
mod report;
mod results;
mod vnncomp;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use engine::{BackendChoice, Job, Precision};
use polycert_deeppoly::{Arith, InputBox, Options, Property, RelaxedOn, ReluLower, Stabilize};
use report::Record;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(name = "polycert", version, about = "Sound DeepPoly verification of neural networks (GPUPoly algorithms)")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Verify properties of a model (with no arguments: the embedded digits model).
    Verify(VerifyArgs),
    /// Run a VNN-COMP instances file, appending one row per instance.
    Vnncomp(vnncomp::VnncompArgs),
    /// Instruments for floating-point non-associativity (summation orders).
    #[command(subcommand)]
    Fpna(fpna::FpnaCmd),
}

/// Options shared by every command that analyses.
#[derive(Args, Clone)]
pub struct AnalysisArgs {
    #[arg(long, value_enum, default_value = "auto")]
    backend: BackendChoice,
    #[arg(long, value_enum, default_value = "f64")]
    precision: Precision,
    /// Lower ReLU line for unstable neurons.
    #[arg(long, value_enum, default_value = "area")]
    relu_lower: ReluLowerArg,
    /// Backsubstitution arithmetic: point coefficients on plain GEMMs with the
    /// rounding folded into the constants, or GPUPoly's interval coefficients.
    #[arg(long, value_enum, default_value = "point")]
    arith: ArithArg,
    /// Memory budget for expression matrices, in MiB.
    #[arg(long)]
    memory_mb: Option<usize>,
    /// Skip the second pass that tightens ReLU inputs.
    #[arg(long)]
    no_refine: bool,
    /// PGD steps to look for a counterexample when a property is not proved (0: none).
    #[arg(long, default_value_t = 20)]
    attack_steps: usize,
    /// Random restarts of the attack after the analysis (each attacked disjunct
    /// also starts from this many points drawn from the box).
    #[arg(long, default_value_t = 0)]
    attack_restarts: usize,
    /// Attack every disjunct before the analysis instead of the weakest ones after it.
    #[arg(long)]
    attack_first: bool,
    /// No branch and bound: answer from one analysis (and the attack).
    /// Otherwise a property left open is split: on its inputs for networks
    /// with at most 16 inputs, on its unstable ReLUs for the others.
    #[arg(long)]
    no_bab: bool,
    /// Keep DeepPoly's lower ReLU slopes: do not optimise them for the
    /// property's output rows (α-CROWN style) in the second pass.
    #[arg(long)]
    no_alpha: bool,
    /// Optimise lower slopes per layer for a ReLU search's intermediate
    /// bounds (α-CROWN style) at its root; every leaf refines with them too
    /// and keeps the tighter bounds. Fewer leaves, each dearer: off by default.
    #[arg(long)]
    intermediate_alpha: bool,
    /// At a ReLU search's root, prove unstable ReLU inputs stable layer by
    /// layer, each end by a small search on the network cut at its layer
    /// (within a quarter of the time left); the search then starts from those
    /// bounds. `auto`: on networks without convolutions and with a timeout,
    /// in two rungs: within the first 25 s a plain search (a tenth of that),
    /// then a short stabilisation and search; where the property is still
    /// open, stabilisation again from those bounds and the search to the
    /// timeout; `on`: before every ReLU search (`--stabilize` alone); `off`.
    #[arg(long, value_enum, default_value = "auto", num_args = 0..=1, default_missing_value = "on")]
    stabilize: StabilizeArg,
    /// Refine every layer after a ReLU search leaf's split, even where that
    /// gains little. By default a layer whose refinement gains under 1% in
    /// leaves (of its unstable ReLUs made stable, or of their width) is
    /// skipped there (and measured again every 16th round).
    #[arg(long)]
    refine_every_leaf: bool,
    /// Where the α/β search evaluates its relaxed bounds: `auto` (on CUDA,
    /// times both on the first rounds and keeps the faster; on the CPU, the
    /// host), `host` (row by row), `backend` (every open row at once in its
    /// GEMMs) or `host-rows` (an experiment: the host, each dense layer one
    /// GEMM over the open rows).
    #[arg(long, value_enum, default_value = "auto")]
    relaxed_on: RelaxedOnArg,
    /// Worker threads, each analysing its own batches (on CUDA, each with its
    /// own stream); results stay in order. Default: on CUDA up to 3 when
    /// there is more than one batch (one worker's host work overlaps the
    /// others' kernels), 1 on the CPU (the kernels use every core).
    #[arg(long)]
    jobs: Option<usize>,
    /// Threads that run one branch and bound's rounds at once, taking leaves
    /// from one open list (on CUDA each with its own stream). Default: 4 on
    /// CUDA (a round is mostly host work), 1 on the CPU; 1 wherever several
    /// properties run at once (`--jobs` above 1).
    #[arg(long)]
    search_workers: Option<usize>,
    /// Properties whose rows share one backsubstitution (`verify` with several
    /// properties; default: as many as a quarter of the memory budget holds, at
    /// most 256; given, up to 1024; also the leaves a search analyses at once;
    /// 1: one at a time; the interval arithmetic always takes one).
    #[arg(long)]
    batch: Option<usize>,
    /// Host threads for the parallel loops (default: `RAYON_NUM_THREADS`, else
    /// every core this process may run on). Search workers and CUDA's own
    /// threads come on top.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
    /// Host memory, in MiB, that the searches' open leaves may hold in
    /// bounds inherited from their parents, shared among `--jobs`; past it,
    /// new leaves keep only their root's (sound, looser). Default: half the
    /// memory available when the property starts (`MemAvailable`); no limit
    /// where that cannot be read.
    #[arg(long)]
    search_memory_mb: Option<usize>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ArithArg {
    Point,
    Interval,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum RelaxedOnArg {
    Auto,
    Host,
    Backend,
    HostRows,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum StabilizeArg {
    Auto,
    On,
    Off,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ReluLowerArg {
    Area,
    Zero,
    One,
}

impl AnalysisArgs {
    fn options(&self, timeout: Option<f64>) -> Options {
        Options {
            relu_lower: match self.relu_lower {
                ReluLowerArg::Area => ReluLower::Area,
                ReluLowerArg::Zero => ReluLower::Zero,
                ReluLowerArg::One => ReluLower::One,
            },
            arith: match self.arith {
                ArithArg::Point => Arith::Point,
                ArithArg::Interval => Arith::Interval,
            },
            refine: !self.no_refine,
            attack_steps: self.attack_steps,
            attack_first: self.attack_first,
            attack_restarts: self.attack_restarts,
            split_inputs: if self.no_bab { 0 } else { Options::default().split_inputs },
            split_relus: !self.no_bab,
            optimize_slopes: !self.no_alpha,
            optimize_intermediate: self.intermediate_alpha,
            stabilize: match self.stabilize {
                StabilizeArg::Auto => Stabilize::Auto,
                StabilizeArg::On => Stabilize::On,
                StabilizeArg::Off => Stabilize::Off,
            },
            gate_refinement: !self.refine_every_leaf,
            relaxed_on: match self.relaxed_on {
                RelaxedOnArg::Auto => RelaxedOn::Auto,
                RelaxedOnArg::Host => RelaxedOn::Host,
                RelaxedOnArg::Backend => RelaxedOn::Backend,
                RelaxedOnArg::HostRows => RelaxedOn::HostRows,
            },
            timeout: timeout.map(Duration::from_secs_f64),
            batch: self.batch,
            search_workers: self.search_workers,
            search_memory: self.search_memory_mb.map(|m| m << 20).or_else(|| Some(available_memory()? / 2)),
            ..Options::default()
        }
    }
    fn budget(&self) -> Option<usize> {
        self.memory_mb.map(|m| m << 20)
    }
    /// Sizes the host's thread pool (`--threads`); before any parallel loop.
    fn start_threads(&self) -> Result<()> {
        let Some(n) = self.threads else { return Ok(()) };
        rayon::ThreadPoolBuilder::new()
            .num_threads(n.into())
            .build_global()
            .with_context(|| format!("--threads {n}: cannot start the thread pool"))
    }
}

#[derive(Args)]
struct VerifyArgs {
    /// ONNX model (default: the embedded digits MLP).
    #[arg(long)]
    model: Option<PathBuf>,
    /// VNNLIB property (.vnnlib or .vnnlib.gz).
    #[arg(long, conflicts_with = "images")]
    vnnlib: Option<PathBuf>,
    /// Images: IDX (gzipped or not) or ERAN-style CSV.
    #[arg(long)]
    images: Option<PathBuf>,
    /// Label file for IDX images (default: derived from the image file name).
    #[arg(long)]
    labels: Option<PathBuf>,
    /// L∞ radius in pixel scale [0, 1].
    #[arg(long)]
    eps: Option<f64>,
    /// Per-channel normalisation mean, comma separated.
    #[arg(long, value_delimiter = ',')]
    mean: Vec<f64>,
    /// Per-channel normalisation standard deviation, comma separated.
    #[arg(long, value_delimiter = ',')]
    std: Vec<f64>,
    /// Verify only the first N images.
    #[arg(long)]
    count: Option<usize>,
    #[arg(long, value_enum, default_value = "chw")]
    layout: images::Layout,
    /// Timeout per property, seconds.
    #[arg(long)]
    timeout: Option<f64>,
    /// One JSON object per property on stdout.
    #[arg(long)]
    json: bool,
    /// Write the VNN-COMP result (unsat/sat/unknown/timeout) to this file.
    #[arg(long)]
    result_file: Option<PathBuf>,
    #[command(flatten)]
    analysis: AnalysisArgs,
}

/// Input or usage errors: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct InputError(String);

const DEFAULT_EPS: f64 = 0.03;

fn verify(a: VerifyArgs) -> Result<bool> {
    a.analysis.start_threads()?;
    let engine = engine::open_backend(a.analysis.backend, a.analysis.budget())?;
    let (imported, model_name) = match &a.model {
        Some(p) => (model::load(p)?, p.display().to_string()),
        None => (model::embedded()?, "embedded:digits_mlp".to_string()),
    };
    let net = &imported.network;
    let n_in = net.input_shape().numel();
    let n_out = net.output_shape().numel();
    let mut jobs = Vec::new();
    if let Some(p) = &a.vnnlib {
        let property = model::load_vnnlib(&imported, p)?;
        jobs.push(Job { name: p.display().to_string(), property });
    } else {
        let (imgs, src) = match &a.images {
            Some(p) => {
                let channels = images::channels(net.input_shape(), &a.mean);
                (images::load(p, a.labels.as_deref(), channels, a.layout)?, p.display().to_string())
            }
            None if a.model.is_none() => (model::embedded_images()?, "embedded:digits_test".to_string()),
            None => bail!(InputError("give --vnnlib or --images (with --eps)".into())),
        };
        let eps = a.eps.unwrap_or(DEFAULT_EPS);
        for (i, img) in imgs.iter().take(a.count.unwrap_or(usize::MAX)).enumerate() {
            if img.pixels.len() != n_in {
                bail!(InputError(format!("{src}: image {i} has {} values, the model takes {n_in}", img.pixels.len())));
            }
            let pixels = imported.to_ir_input(&img.pixels);
            let input = InputBox::linf(&pixels, eps, (0.0, 1.0), &a.mean, &a.std)
                .map_err(|e| InputError(format!("{src}: {e}")))?;
            let name = format!("{src}#{i} eps={eps}");
            let property = Property::robustness(name.clone(), input, img.label, n_out)
                .map_err(|e| InputError(format!("{src}: image {i}: {e}")))?;
            jobs.push(Job { name, property });
        }
    }
    let mut opts = a.analysis.options(a.timeout);
    let progress = std::sync::Arc::new(polycert_deeppoly::base::progress::Progress::default());
    opts.progress = Some(progress.clone());
    let bar = live::bar(jobs.len());
    let mut records = Vec::new();
    let stdout = std::io::stdout();
    let workers = a.analysis.jobs.unwrap_or_else(|| engine.default_workers(jobs.len(), a.analysis.batch));
    live::while_running(&bar, &progress, || {
        engine::run_jobs_parallel(
            &engine,
            workers,
            net,
            &model_name,
            &jobs,
            &opts,
            a.analysis.precision,
            &mut |r: Record| {
                let mut out = stdout.lock();
                bar.suspend(|| if a.json { r.emit_json(&mut out) } else { writeln!(out, "{}", r.line()) })?;
                bar.inc(1);
                records.push(r);
                Ok(())
            },
        )
    })?;
    bar.finish_and_clear();
    if let Some(rf) = &a.result_file {
        match records.first() {
            Some(Record { counterexample: Some(x), .. }) => {
                let y = polycert_deeppoly::base::eval::eval::<f32>(net, x);
                vnncomp::write_cex(rf, &imported.from_ir_input(x), &y)?;
            }
            r => {
                let r = r.map(|r| vnncomp::vnn_result(&r.result)).unwrap_or("unknown");
                std::fs::write(rf, format!("{r}\n")).with_context(|| format!("{}: cannot write", rf.display()))?;
            }
        }
    }
    if a.json {
        eprint!("{}", report::summary(&records));
    } else {
        print!("{}", report::summary(&records));
    }
    if let Some(e) = records.iter().find_map(|r| r.error.clone()) {
        bail!(InputError(e));
    }
    Ok(records.iter().all(|r| r.result == "verified"))
}

/// Keeps glibc from returning the analysis's large, short-lived buffers to
/// the kernel after each step (and faulting fresh pages in for the next):
/// buffers up to 32 MiB come from the heap, and the heap is not trimmed.
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only adjusts allocator parameters; called before any threads start.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
}

fn main() -> ExitCode {
    tune_allocator();
    let cli = Cli::parse();
    let res = {
        let _sampler = cpuprof::start();
        match cli.cmd {
            Cmd::Verify(a) => verify(a).map(|ok| if ok { 0 } else { 1 }),
            Cmd::Vnncomp(a) => vnncomp::run(a).map(|ok| if ok { 0 } else { 1 }),
            Cmd::Fpna(c) => fpna::run(c),
        }
    };
    let phases = polycert_deeppoly::base::profile::report();
    if !phases.is_empty() {
        eprintln!("polycert phases:\n{phases}");
    }
    match res {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("polycert: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The host memory available now (`MemAvailable` of `/proc/meminfo`), in
/// bytes, where it can be read.
fn available_memory() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}
