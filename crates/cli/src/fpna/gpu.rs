//! The GPU side of `polycert fpna`: block orders (`order`), reduction
//! variants (`reduce`) and split-K inference for `variability --backend cuda`.

use crate::InputError;
use crate::say::{errln, outln};
use anyhow::{Context, Result, bail};
use clap::Args;
use polycert_backend_cuda::fpna::{Fpna, Variant};
use polycert_deeppoly::base::rng::SplitMix;
use polycert_deeppoly::{Network, Op};
use std::io::Write;
use std::path::PathBuf;

#[derive(Args)]
pub struct ReductionArgs {
    /// Elements to sum (uniform in [0, 1)).
    #[arg(long, default_value_t = 1 << 20)]
    n: usize,
    /// Threads per block (a power of two, 32..=1024).
    #[arg(long, default_value_t = 256)]
    block: usize,
    /// Elements per block (default: 16 per thread).
    #[arg(long)]
    chunk: Option<usize>,
    /// Samples (runs of the reduction).
    #[arg(long, default_value_t = 100)]
    samples: usize,
    #[arg(long, value_enum, default_value = "f32")]
    precision: crate::engine::Precision,
    /// Concurrent load: square f32 cuBLAS GEMMs of this size on another stream (0: none).
    #[arg(long, default_value_t = 0)]
    load: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Args)]
pub struct OrderArgs {
    #[command(flatten)]
    r: ReductionArgs,
    /// How the order is read: the atomicInc retirement tickets, or the values atomicAdd returned.
    #[arg(long, value_enum, default_value = "ticket")]
    method: Method,
    /// CSV file (default: stdout), one sample per line: block indices in arrival order.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Method {
    Ticket,
    Value,
}

#[derive(Args)]
pub struct ReduceArgs {
    #[command(flatten)]
    r: ReductionArgs,
    #[arg(long)]
    json: bool,
}

fn open(r: &ReductionArgs) -> Result<Fpna> {
    let mut f = Fpna::open().map_err(|e| InputError(format!("fpna needs a CUDA GPU: {e}")))?;
    if r.load > 0 {
        // About a second of work for the GPU to share with the samples.
        let count = (2e14 / (2.0 * (r.load as f64).powi(3))).clamp(1.0, 5000.0) as usize;
        f.start_load(r.load, count)?;
    }
    Ok(f)
}

fn data(r: &ReductionArgs) -> Vec<f64> {
    let mut rng = SplitMix(r.seed);
    (0..r.n).map(|_| rng.unit()).collect()
}

fn chunk(r: &ReductionArgs) -> usize {
    r.chunk.unwrap_or(16 * r.block).max(1)
}

pub fn order(a: OrderArgs) -> Result<()> {
    let mut f = open(&a.r)?;
    let x = data(&a.r);
    let orders = match a.r.precision {
        crate::engine::Precision::F32 => {
            let x: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            f.block_orders(&x, chunk(&a.r), a.r.block, a.r.samples)?
        }
        crate::engine::Precision::F64 => f.block_orders(&x, chunk(&a.r), a.r.block, a.r.samples)?,
    };
    f.finish_load()?;
    let mut text = String::new();
    for (by_ticket, by_value) in &orders {
        let o = match a.method {
            Method::Ticket => by_ticket,
            Method::Value => by_value,
        };
        let line: Vec<String> = o.iter().map(u32::to_string).collect();
        text += &line.join(",");
        text.push('\n');
    }
    match &a.out {
        Some(p) => std::fs::write(p, text).with_context(|| format!("{}: cannot write", p.display()))?,
        None => std::io::stdout().write_all(text.as_bytes())?,
    }
    // The two readings use atomics on different addresses, which other
    // blocks' atomics can fall between: how far apart are they?
    let agree = orders.iter().filter(|(t, v)| t == v).count();
    let taus: Vec<f64> = orders
        .iter()
        .filter_map(|(t, v)| {
            let t: Vec<i64> = t.iter().map(|&i| i as i64).collect();
            let v: Vec<i64> = v.iter().map(|&i| i as i64).collect();
            super::kendall::tau_b(&t, &v)
        })
        .collect();
    let mean = taus.iter().sum::<f64>() / taus.len().max(1) as f64;
    errln!(
        "{}: {} samples of {} blocks; ticket and value orders identical in {agree}, mean Kendall tau between them {mean:.4}",
        f.device_name(),
        orders.len(),
        orders.first().map_or(0, |o| o.0.len())
    );
    Ok(())
}

pub fn reduce(a: ReduceArgs) -> Result<()> {
    let mut f = open(&a.r)?;
    let x = data(&a.r);
    let mut rows = Vec::new();
    for (name, v) in [("two-pass", Variant::TwoPass), ("last-atomic", Variant::LastAtomic), ("atomic", Variant::Atomic)]
    {
        let sums: Vec<f64> = match a.r.precision {
            crate::engine::Precision::F32 => {
                let x: Vec<f32> = x.iter().map(|&v| v as f32).collect();
                f.reduce(&x, chunk(&a.r), a.r.block, v, a.r.samples)?.into_iter().map(f64::from).collect()
            }
            crate::engine::Precision::F64 => f.reduce(&x, chunk(&a.r), a.r.block, v, a.r.samples)?,
        };
        let mut distinct = sums.clone();
        distinct.sort_by(f64::total_cmp);
        distinct.dedup();
        let (lo, hi) = (distinct[0], distinct[distinct.len() - 1]);
        rows.push(serde_json::json!({
            "variant": name, "samples": sums.len(), "distinct": distinct.len(), "min": lo, "max": hi,
            "relative_spread": (hi - lo) / ((hi + lo) / 2.0).abs(),
        }));
    }
    f.finish_load()?;
    if a.json {
        outln!("{}", serde_json::json!({ "device": f.device_name(), "n": a.r.n, "variants": rows }));
    } else {
        for r in &rows {
            outln!(
                "{:<12} {} distinct sums of {}, relative spread {:.3e}",
                r["variant"].as_str().unwrap_or(""),
                r["distinct"],
                r["samples"],
                r["relative_spread"].as_f64().unwrap_or(0.0)
            );
        }
    }
    Ok(())
}

/// Largest convolution run as a dense matrix on the GPU (`n_out × n_in`).
const MAX_CONV_DENSE: usize = 1 << 26;

/// The dense `n_out × n_in` matrix (f32) and per-output bias of a convolution.
fn conv_as_dense(net: &Network, id: usize) -> Option<(Vec<f32>, Vec<f32>)> {
    let node = net.node(id);
    let Op::Conv2d(c) = &node.op else { return None };
    let (si, so) = (net.node(node.inputs[0]).shape, node.shape);
    let (n_in, n_out) = (si.numel(), so.numel());
    if n_in.saturating_mul(n_out) > MAX_CONV_DENSE {
        return None;
    }
    let mut w = vec![0.0f32; n_out * n_in];
    let mut b = vec![0.0f32; n_out];
    for o in 0..n_out {
        let (co, oy, ox) = (o / (so.h * so.w), (o / so.w) % so.h, o % so.w);
        for (k, i) in c.taps(si, co, oy, ox) {
            w[o * n_in + i] = c.weight[k] as f32;
        }
        b[o] = c.bias[co] as f32;
    }
    Some((w, b))
}

/// `runs` inferences of every input on the GPU: dense layers, and
/// convolutions as dense matrices, as split-K GEMMs ending in atomicAdd
/// (float32); other layers on the host.
pub fn cuda_runs(net: &Network, inputs: &[Vec<f32>], runs: usize) -> Result<Vec<Vec<Vec<f32>>>> {
    let mut convs = std::collections::HashMap::new();
    for (id, n) in net.nodes().iter().enumerate() {
        if let Op::Conv2d(_) = n.op {
            let Some(d) = conv_as_dense(net, id) else {
                bail!(InputError(format!(
                    "fpna variability --backend cuda: convolution '{}' is too large to run as a dense matrix",
                    n.name
                )));
            };
            convs.insert(id, d);
        }
    }
    let f = Fpna::open().map_err(|e| InputError(format!("fpna needs a CUDA GPU: {e}")))?;
    let batch = inputs.len();
    let mut out = Vec::with_capacity(runs);
    for _ in 0..runs {
        // Every node's values for the whole batch, point-major.
        let mut vals: Vec<Vec<f32>> = Vec::with_capacity(net.nodes().len());
        for (id, node) in net.nodes().iter().enumerate() {
            let v = match &node.op {
                Op::Input => inputs.concat(),
                Op::Dense { weight, bias, out } => {
                    let x = &vals[node.inputs[0]];
                    let n_in = x.len() / batch.max(1);
                    let w: Vec<f32> = weight.iter().map(|&v| v as f32).collect();
                    let b: Vec<f32> = bias.iter().map(|&v| v as f32).collect();
                    f.splitk_dense(&w, &b, x, n_in, *out, batch, 16)?
                }
                Op::Conv2d(_) => {
                    let (w, b) = &convs[&id];
                    let x = &vals[node.inputs[0]];
                    let n_in = x.len() / batch.max(1);
                    f.splitk_dense(w, b, x, n_in, b.len(), batch, 256)?
                }
                _ => {
                    let sizes: Vec<usize> = node.inputs.iter().map(|&k| net.node(k).shape.numel()).collect();
                    (0..batch)
                        .flat_map(|p| {
                            let ins: Vec<&[f32]> =
                                node.inputs.iter().zip(&sizes).map(|(&k, &n)| &vals[k][p * n..(p + 1) * n]).collect();
                            polycert_deeppoly::base::eval::eval_node(net, id, &ins)
                        })
                        .collect()
                }
            };
            vals.push(v);
        }
        let y = vals.pop().unwrap_or_default();
        let n_out = net.output_shape().numel();
        out.push(y.chunks(n_out).map(<[f32]>::to_vec).collect());
    }
    Ok(out)
}
