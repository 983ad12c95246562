//! `cargo xtask bench`: the headline measurements of issue 44 through the
//! release binary, written as JSON, a markdown report and two SVG plots.
//!
//! - **Test set:** `verify --images` per network at several budgets: wall
//!   time, certified, falsified, and the first pass's seconds per image.
//! - **Latency:** one image at a time (`--batch 1 --jobs 1 --no-bab
//!   --no-alpha --attack-steps 0`), the median seconds per image.
//!
//! Networks: the embedded digits MLP always; the shared MNIST networks
//! and test set where `--data` (default `../shared`) holds them.
//! `--quick` takes few images (a CPU run of about a minute).

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// What a run measures, from its arguments.
struct Setup {
    bin: PathBuf,
    backend: String,
    quick: bool,
    out: PathBuf,
    /// The MNIST networks and images, where present.
    mnist: Option<(PathBuf, PathBuf)>,
}

/// One network of the run: its name, its ONNX file (none: the embedded
/// model) and its images (none: the embedded ones).
struct Net {
    name: String,
    model: Option<PathBuf>,
    images: Option<PathBuf>,
}

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let s = setup(root, args)?;
    std::fs::create_dir_all(&s.out).with_context(|| format!("{}: cannot create", s.out.display()))?;
    let nets = networks(&s);
    // Budgets as multiples of the first pass's wall time (a spent budget
    // runs the first pass only), so that every machine draws a curve.
    let (count, scales, lat_count): (usize, &[f64], usize) =
        if s.quick { (100, &[1.5, 3.0], 20) } else { (10_000, &[1.5, 3.0, 6.0, 12.0], 100) };
    let mut testset = Vec::new();
    let mut latency = Vec::new();
    for n in &nets {
        let first = test_set(&s, n, count, 1e-6)?;
        let wall = first["wall"].as_f64().unwrap_or(1.0);
        testset.push(first);
        for &k in scales {
            testset.push(test_set(&s, n, count, (wall * k * 100.0).ceil() / 100.0)?);
        }
        latency.push(latency_of(&s, n, lat_count)?);
    }
    let report = json!({
        "date": date()?,
        "machine": machine(),
        "backend": s.backend,
        "quick": s.quick,
        "commit": commit(root),
        "images_per_network": count,
        "testset": testset,
        "latency": latency,
    });
    write(&s, &report)
}

fn setup(root: &Path, args: &[String]) -> Result<Setup> {
    let mut s = Setup {
        bin: root.join("target/release/polycert"),
        backend: "cpu".into(),
        quick: false,
        out: PathBuf::new(),
        mnist: None,
    };
    let mut data = root.join("../shared");
    let mut out = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or_else(|| anyhow!("{a} needs a value"));
        match a.as_str() {
            "--quick" => s.quick = true,
            "--backend" => s.backend = value()?,
            "--bin" => s.bin = PathBuf::from(value()?),
            "--data" => data = PathBuf::from(value()?),
            "--out" => out = Some(PathBuf::from(value()?)),
            other => bail!("bench: unknown argument '{other}' (--quick, --backend, --bin, --data, --out)"),
        }
    }
    if !args.iter().any(|a| a == "--bin") {
        let ok = Command::new("cargo")
            .current_dir(root)
            .args(["build", "--release", "-q", "-p", "polycert-cli"])
            .status()
            .context("running cargo")?;
        anyhow::ensure!(ok.success(), "building polycert failed");
    }
    let (images, nets) = (data.join("data/mnist/t10k-images-idx3-ubyte.gz"), data.join("bench/mnist_fc"));
    s.mnist = (images.exists() && nets.exists()).then_some((nets, images));
    s.out = out.unwrap_or_else(|| root.join(if s.quick { "target/bench" } else { "bench/results" }));
    Ok(s)
}

fn networks(s: &Setup) -> Vec<Net> {
    let mut nets = vec![Net { name: "digits_mlp (embedded)".into(), model: None, images: None }];
    if let Some((dir, images)) = &s.mnist {
        for n in ["mnist-net_256x2", "mnist-net_256x4", "mnist-net_256x6"] {
            let model = dir.join(format!("{n}.onnx"));
            if model.exists() {
                nets.push(Net { name: n.into(), model: Some(model), images: Some(images.clone()) });
            }
        }
    }
    nets
}

/// `polycert verify` on a network's images with `extra` flags: its JSON
/// records, its stderr and its wall time.
fn verify(s: &Setup, n: &Net, count: usize, extra: &[&str]) -> Result<(Vec<Value>, String, f64)> {
    let mut cmd = Command::new(&s.bin);
    cmd.args(["verify", "--json", "--backend", &s.backend]);
    if let (Some(m), Some(i)) = (&n.model, &n.images) {
        cmd.arg("--model").arg(m).arg("--images").arg(i).args(["--count", &count.to_string()]);
    } else {
        cmd.args(["--count", &count.min(300).to_string()]);
    }
    cmd.args(extra);
    let t = Instant::now();
    let o = cmd.output().with_context(|| format!("running {}", s.bin.display()))?;
    let wall = t.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    anyhow::ensure!(o.status.success(), "{}: polycert failed: {err}", n.name);
    let records = String::from_utf8_lossy(&o.stdout).lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
    Ok((records, err, wall))
}

fn count_of(records: &[Value], word: &str) -> usize {
    records.iter().filter(|r| r["result"] == word).count()
}

fn test_set(s: &Setup, n: &Net, count: usize, budget: f64) -> Result<Value> {
    let (records, err, wall) = verify(s, n, count, &["--budget", &budget.to_string()])?;
    // "first pass   N images   S s  ..." from the summary.
    let first = err
        .lines()
        .find(|l| l.starts_with("first pass"))
        .and_then(|l| l.split_whitespace().find_map(|w| w.strip_suffix('s')?.parse::<f64>().ok()));
    let images = records.len();
    Ok(json!({
        "network": n.name,
        "model_kib": model_kib(n),
        "images": images,
        "budget": budget,
        "wall": wall,
        "verified": count_of(&records, "verified"),
        "falsified": count_of(&records, "falsified"),
        "open": images - count_of(&records, "verified") - count_of(&records, "falsified"),
        "first_pass_seconds": first,
        "first_pass_per_image": first.map(|f| f / images.max(1) as f64),
    }))
}

fn latency_of(s: &Setup, n: &Net, count: usize) -> Result<Value> {
    let flags = ["--batch", "1", "--jobs", "1", "--no-bab", "--no-alpha", "--attack-steps", "0", "--timeout", "600"];
    let (records, _, _) = verify(s, n, count, &flags)?;
    let mut t: Vec<f64> = records.iter().filter_map(|r| r["seconds"].as_f64()).collect();
    t.sort_by(f64::total_cmp);
    let at = |q: f64| t.get(((t.len().max(1) - 1) as f64 * q).round() as usize).copied();
    Ok(json!({ "network": n.name, "images": t.len(), "median_ms": at(0.5).map(|x| x * 1e3),
               "p90_ms": at(0.9).map(|x| x * 1e3), "verified": count_of(&records, "verified") }))
}

fn model_kib(n: &Net) -> Option<f64> {
    let p = n
        .model
        .clone()
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/cli/assets/digits_mlp.onnx"));
    Some(std::fs::metadata(p).ok()?.len() as f64 / 1024.0)
}

fn date() -> Result<String> {
    let o = Command::new("date").arg("+%Y-%m-%d").output().context("running date")?;
    Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn commit(root: &Path) -> Option<String> {
    let o = Command::new("git").current_dir(root).args(["rev-parse", "--short", "HEAD"]).output().ok()?;
    Some(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// The host's processor and core count, and the GPUs `nvidia-smi` lists.
fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|c| {
        c.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
    });
    let gpus = Command::new("nvidia-smi")
        .arg("-L")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    json!({ "cpu": cpu, "cores": std::thread::available_parallelism().map(|n| n.get()).ok(), "gpus": gpus.filter(|g| !g.is_empty()) })
}

/// The JSON, the markdown report and the plots, named by date and backend.
fn write(s: &Setup, r: &Value) -> Result<()> {
    let stem =
        format!("{}-bench-{}{}", r["date"].as_str().unwrap_or("today"), s.backend, if s.quick { "-quick" } else { "" });
    let path = |ext: &str| s.out.join(format!("{stem}{ext}"));
    std::fs::write(path(".json"), serde_json::to_string_pretty(r)?)?;
    std::fs::write(path("-size.svg"), crate::bench_plot::size_plot(r)?)?;
    std::fs::write(path("-budget.svg"), crate::bench_plot::budget_plot(r)?)?;
    std::fs::write(path(".md"), markdown(r, &stem))?;
    println!("wrote {}", path(".md").display());
    Ok(())
}

fn markdown(r: &Value, stem: &str) -> String {
    let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), String::from);
    let mc = &r["machine"];
    let mut m = format!(
        "# `cargo xtask bench`{}\n\n- Date: {}. Commit: {}. Backend: {}.\n- Machine: {} ({} cores){}.\n\n## Test set (`verify --images`)\n\n",
        if r["quick"] == true { " --quick" } else { "" },
        text(&r["date"]),
        text(&r["commit"]),
        text(&r["backend"]),
        text(&mc["cpu"]),
        mc["cores"],
        mc["gpus"].as_str().map_or(String::new(), |g| format!("; {}", g.replace('\n', "; ")))
    );
    m.push_str("Budgets: a spent one (the first pass only), then multiples of that run's wall time.\n\n");
    m.push_str("| network | images | `--budget` s | wall s | verified | falsified | open | first pass ms/image |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for t in r["testset"].as_array().into_iter().flatten() {
        m.push_str(&format!(
            "| {} | {} | {} | {:.2} | {} | {} | {} | {:.3} |\n",
            t["network"].as_str().unwrap_or(""),
            t["images"],
            t["budget"],
            t["wall"].as_f64().unwrap_or(0.0),
            t["verified"],
            t["falsified"],
            t["open"],
            t["first_pass_per_image"].as_f64().unwrap_or(f64::NAN) * 1e3
        ));
    }
    m.push_str("\n## One image at a time (`--batch 1 --jobs 1 --no-bab --no-alpha --attack-steps 0`)\n\n| network | images | median ms | p90 ms | verified |\n|---|---:|---:|---:|---:|\n");
    for l in r["latency"].as_array().into_iter().flatten() {
        m.push_str(&format!(
            "| {} | {} | {:.2} | {:.2} | {} |\n",
            l["network"].as_str().unwrap_or(""),
            l["images"],
            l["median_ms"].as_f64().unwrap_or(f64::NAN),
            l["p90_ms"].as_f64().unwrap_or(f64::NAN),
            l["verified"]
        ));
    }
    m.push_str(&format!("\nPlots: `{stem}-size.svg` (first-pass time per image against model size), `{stem}-budget.svg` (certified share against wall time).\n"));
    m
}
