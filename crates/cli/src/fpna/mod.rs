//! `polycert fpna`: instruments for floating-point non-associativity.
//! `order` records the order of thread blocks in a GPU sum reduction and
//! `reduce` compares reduction variants (`gpu.rs`); `kendall` compares
//! orderings (Kendall's tau-b); `variability` runs inference with varying
//! summation orders and checks every output against the certified bounds
//! (exit code 3 when one is outside: a soundness bug).

mod gpu;
mod kendall;
mod variability;

use crate::say::{errln, outln};
use crate::{InputError, images, model};
use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use polycert_backend_cpu::CpuBackend;
use polycert_deeppoly::base::budget::Budget;
use polycert_deeppoly::{Analyzer, InputBox, Options};
use rayon::prelude::*;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum FpnaCmd {
    /// The order in which thread blocks reach a reduction's atomic last stage (GPU), one CSV line per sample.
    Order(gpu::OrderArgs),
    /// Run-to-run variability of a GPU sum: deterministic two-pass, atomic last stage, atomics only.
    Reduce(gpu::ReduceArgs),
    /// Kendall's tau-b between orderings: every pair of lines of one file, or every line of A against every line of B.
    Kendall(KendallArgs),
    /// Inference with varying summation orders: variability between runs, and a check against the certified bounds.
    Variability(VariabilityArgs),
}

#[derive(Args)]
pub struct KendallArgs {
    /// Orderings: one sample per line, comma-separated indices.
    a: PathBuf,
    /// A second file: compare its lines with A's.
    b: Option<PathBuf>,
    /// Print a histogram of this many bins over [-1, 1] instead of the matrix.
    #[arg(long)]
    histogram: Option<usize>,
    /// Write the histogram (default 40 bins) as a PNG bar chart.
    #[arg(long)]
    png: Option<PathBuf>,
    /// Print {"pairs": [[i, j, tau], ...]}.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct VariabilityArgs {
    /// ONNX model (default: the embedded digits MLP and its held-out images).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Images: IDX (gzipped or not) or ERAN-style CSV.
    #[arg(long)]
    images: Option<PathBuf>,
    /// Use the first N images.
    #[arg(long)]
    count: Option<usize>,
    /// Inference runs (each with its own summation orders).
    #[arg(long, default_value_t = 10)]
    runs: usize,
    #[arg(long, value_enum, default_value = "cpu")]
    backend: VarBackend,
    /// L∞ radius: outputs at random points of the box are checked too.
    #[arg(long, default_value_t = 0.0)]
    eps: f64,
    /// Pixel order of CSV images.
    #[arg(long, value_enum, default_value = "chw")]
    layout: images::Layout,
    /// Per-channel normalisation mean, comma separated (as `verify`).
    #[arg(long, value_delimiter = ',')]
    mean: Vec<f64>,
    #[arg(long, value_delimiter = ',')]
    std: Vec<f64>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum VarBackend {
    /// Every dense and conv sum in a random order (products and bias shuffled).
    Cpu,
    /// Split-K GEMMs with atomicAdd on the GPU.
    Cuda,
}

/// Runs an `fpna` subcommand; returns the exit code (3: an output outside
/// the certified bounds).
pub fn run(cmd: FpnaCmd) -> Result<u8> {
    match cmd {
        FpnaCmd::Order(a) => gpu::order(a).map(|_| 0),
        FpnaCmd::Reduce(a) => gpu::reduce(a).map(|_| 0),
        FpnaCmd::Kendall(a) => kendall_cmd(a).map(|_| 0),
        FpnaCmd::Variability(a) => variability_cmd(a),
    }
}

fn kendall_cmd(a: KendallArgs) -> Result<()> {
    let xs = kendall::read_orderings(&a.a)?;
    let ys = match &a.b {
        Some(b) => kendall::read_orderings(b)?,
        None => xs.clone(),
    };
    if xs[0].len() != ys[0].len() {
        bail!(InputError(format!("the orderings have {} and {} values", xs[0].len(), ys[0].len())));
    }
    let pairs: Vec<(usize, usize)> = match a.b {
        Some(_) => (0..xs.len()).flat_map(|i| (0..ys.len()).map(move |j| (i, j))).collect(),
        None => (0..xs.len()).flat_map(|i| (0..i).map(move |j| (i, j))).collect(),
    };
    let taus: Vec<Option<f64>> = pairs.par_iter().map(|&(i, j)| kendall::tau_b(&xs[i], &ys[j])).collect();
    let defined: Vec<f64> = taus.iter().flatten().copied().collect();
    if let Some(p) = &a.png {
        crate::plot::svg_to_png(
            &crate::plot::histogram_svg(&kendall::histogram(&defined, a.histogram.unwrap_or(40)))?,
            p,
        )?;
    }
    if a.json {
        let rows: Vec<serde_json::Value> =
            pairs.iter().zip(&taus).map(|(&(i, j), t)| serde_json::json!([i, j, t])).collect();
        outln!("{}", serde_json::json!({ "pairs": rows }));
    } else if let Some(bins) = a.histogram {
        for (k, c) in kendall::histogram(&defined, bins.max(1)).iter().enumerate() {
            let lo = -1.0 + 2.0 * k as f64 / bins as f64;
            outln!("{lo:+.4}\t{c}");
        }
    } else {
        // Row i: tau against every earlier line (one file) or every line of B.
        let mut k = 0;
        for i in 0..xs.len() {
            let n = if a.b.is_some() { ys.len() } else { i };
            let row: Vec<String> =
                taus[k..k + n].iter().map(|t| t.map_or("nan".into(), |v| format!("{v:.6}"))).collect();
            outln!("{}", row.join(","));
            k += n;
        }
    }
    Ok(())
}

fn variability_cmd(a: VariabilityArgs) -> Result<u8> {
    let (imported, imgs) = match (&a.model, &a.images) {
        (None, None) => (model::embedded()?, model::embedded_images()?),
        (Some(m), Some(i)) => {
            let imported = model::load(m)?;
            let channels = images::channels(imported.network.input_shape(), &a.mean);
            (imported, images::load(i, None, channels, a.layout)?)
        }
        (Some(_), None) => bail!(InputError("--model needs --images".into())),
        (None, Some(_)) => bail!(InputError("--images needs --model".into())),
    };
    if a.runs < 2 {
        bail!(InputError("--runs must be at least 2".into()));
    }
    let net = &imported.network;
    let n_in = net.input_shape().numel();
    let imgs: Vec<_> = imgs.into_iter().take(a.count.unwrap_or(usize::MAX)).collect();
    let mut boxes = Vec::with_capacity(imgs.len());
    for (k, img) in imgs.iter().enumerate() {
        if img.pixels.len() != n_in {
            bail!(InputError(format!("image {k} has {} values, the model takes {n_in}", img.pixels.len())));
        }
        let px = imported.to_ir_input(&img.pixels);
        boxes.push(InputBox::linf(&px, a.eps, (0.0, 1.0), &a.mean, &a.std).map_err(|e| InputError(e.to_string()))?);
    }
    // Inference at each box's centre (the metrics); with eps > 0 also at a
    // random point of the box per run (checked against the bounds only).
    let centres: Vec<Vec<f32>> = boxes.iter().map(|b| b.centre().iter().map(|&v| v as f32).collect()).collect();
    let infer = |xs: &[Vec<f32>], seed: u64| match a.backend {
        VarBackend::Cpu => Ok(variability::cpu_runs(net, xs, a.runs, seed)),
        VarBackend::Cuda => gpu::cuda_runs(net, xs, a.runs),
    };
    let runs = infer(&centres, a.seed)?;
    let v = variability::variability(&runs);
    let mut observed: Vec<(usize, Vec<f32>)> = runs.iter().flat_map(|r| r.iter().cloned().enumerate()).collect();
    if a.eps > 0.0 {
        let mut rng = polycert_deeppoly::base::rng::SplitMix(a.seed.wrapping_add(77));
        let pts: Vec<Vec<f32>> = boxes
            .iter()
            .map(|b| {
                let x: Vec<f64> = b.lo.iter().zip(&b.hi).map(|(l, h)| l + (h - l) * rng.unit()).collect();
                b.to_f32_inside(&x)
            })
            .collect();
        for r in infer(&pts, a.seed.wrapping_add(1))? {
            observed.extend(r.into_iter().enumerate());
        }
    }
    // The certified bounds of every image's box (CPU, f64 analysis).
    let be = CpuBackend::default();
    let an = Analyzer::<_, f64>::new(net, &be, Options::default()).map_err(|e| InputError(e.to_string()))?;
    let bounds: Vec<polycert_deeppoly::LoHi<f64>> = boxes
        .iter()
        .map(|b| an.node_bounds(b, Budget::UNLIMITED).map(|mut nb| nb.swap_remove(net.output())))
        .collect::<Result<_, _>>()?;
    let outside = variability::outside_bounds(&observed, &bounds, &mut |k, j, v, lo, hi| {
        errln!("polycert: SOUNDNESS BUG: image {k} output {j} = {v} is outside the certified [{lo}, {hi}]")
    });
    let correct = variability::accuracy(&imgs, &runs[0]);
    if a.json {
        outln!(
            "{}",
            serde_json::json!({
                "v_ermv": v.v_ermv, "v_c": v.v_c, "flips": v.flips, "runs": a.runs,
                "outside_bounds": outside, "images": imgs.len(), "compared": v.d,
                "checked": observed.len(), "correct": correct, "eps": a.eps, "backend": match a.backend { VarBackend::Cpu => "cpu", VarBackend::Cuda => "cuda" },
            })
        );
    } else {
        outln!("images {}, runs {}, correct {correct}", imgs.len(), a.runs);
        outln!("V_ermv {:.3e}  V_c {:.4}  label flips {}", v.v_ermv, v.v_c, v.flips);
        outln!(
            "outputs checked against the certified bounds: {}, outside: {outside}",
            observed.len() * net.output_shape().numel()
        );
    }
    Ok(if outside > 0 { 3 } else { 0 })
}
