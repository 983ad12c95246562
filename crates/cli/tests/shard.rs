//! Cluster runs (issue 47): `--shard K/N` slices of `vnncomp` and of
//! `verify --images`, joined by `polycert merge`, give exactly the rows of
//! one unsharded run; merge refuses shards that are not one whole run.

mod util;

use std::path::{Path, PathBuf};
use util::{polycert, tmp};

const DIGITS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/digits_mlp.onnx");
const IMAGES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/digits_test.csv");

/// `onnx,vnnlib,result` of every row (the header skipped).
fn verdicts(path: &Path) -> Vec<[String; 3]> {
    let mut r = csv::Reader::from_path(path).unwrap();
    r.records().map(|rec| rec.unwrap()).map(|rec| [0, 1, 2].map(|k| rec[k].to_string())).collect()
}

fn run_ok(args: &[&str]) {
    let o = polycert(args);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

fn merge(files: &[&PathBuf], out: &Path) -> std::process::Output {
    let mut args = vec!["merge".to_string()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    args.extend(["--out".to_string(), out.display().to_string()]);
    polycert(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

fn assert_refused(o: &std::process::Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
}

/// Seven instances on two networks, some unsat and some sat.
fn instances(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let csv = std::fs::read_to_string(IMAGES).unwrap();
    let mut lines = String::new();
    for (k, eps) in [0.001, 0.5, 0.002, 0.3, 0.004, 0.05, 0.01].iter().enumerate() {
        let img: Vec<f64> = csv.lines().nth(k).unwrap().split(',').map(|v| v.parse().unwrap()).collect();
        let mut s = String::new();
        (0..64).for_each(|i| s += &format!("(declare-const X_{i} Real)\n"));
        (0..10).for_each(|j| s += &format!("(declare-const Y_{j} Real)\n"));
        for (i, x) in img[1..].iter().map(|v| v / 255.0).enumerate() {
            s += &format!("(assert (<= X_{i} {}))\n(assert (>= X_{i} {}))\n", (x + eps).min(1.0), (x - eps).max(0.0));
        }
        let label = img[0] as usize;
        s += "(assert (or\n";
        (0..10).filter(|&j| j != label).for_each(|j| s += &format!("  (and (>= Y_{j} Y_{label}))\n"));
        s += "))\n";
        std::fs::write(dir.join(format!("p{k}.vnnlib")), s).unwrap();
        let net = if k % 2 == 0 { "a" } else { "b" };
        lines += &format!("{net}.onnx,p{k}.vnnlib,60\n");
    }
    for net in ["a", "b"] {
        std::fs::copy(DIGITS, dir.join(format!("{net}.onnx"))).unwrap();
    }
    std::fs::write(dir.join("instances.csv"), lines).unwrap();
    dir.join("instances.csv")
}

#[test]
fn vnncomp_shards_merge_to_one_run() {
    let dir = tmp("shard-vnncomp");
    let inst = instances(&dir);
    let inst = inst.to_str().unwrap();
    let base = ["vnncomp", "--instances", inst, "--backend", "cpu", "--results"];
    let whole = dir.join("whole.csv");
    run_ok(&[&base[..], &[whole.to_str().unwrap()]].concat());
    let shards: Vec<PathBuf> = (1..=3).map(|k| dir.join(format!("s{k}.csv"))).collect();
    for (k, s) in shards.iter().enumerate() {
        let shard = format!("{}/3", k + 1);
        run_ok(&[&base[..], &[s.to_str().unwrap(), "--shard", &shard]].concat());
    }
    assert_eq!(verdicts(&shards[0]).len(), 3, "items 0, 3, 6");
    let merged = dir.join("merged.csv");
    let o = merge(&shards.iter().collect::<Vec<_>>(), &merged);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let want = verdicts(&whole);
    assert_eq!(want.len(), 7);
    // The merged run's tally, as vnncomp prints its own.
    let unsat = want.iter().filter(|r| r[2] == "unsat").count();
    assert!(err.contains(&format!("unsat {unsat}  ")) && err.contains("(of 7)"), "{err}");
    assert!(want.iter().any(|r| r[2] == "unsat") && want.iter().any(|r| r[2] == "sat"), "{want:?}");
    assert_eq!(verdicts(&merged), want);

    // Refusals, each naming what is wrong.
    let [a, b, c] = [&shards[0], &shards[1], &shards[2]];
    assert_refused(&merge(&[a, b], &dir.join("x.csv")), "shards 3/3 are missing");
    assert_refused(&merge(&[a, b, b, c], &dir.join("x.csv")), "are both shard 2/3");
    assert_refused(&merge(&[a, b, c], &merged), "exists");
    assert_refused(&merge(&[a, b, &whole], &dir.join("x.csv")), "whole.csv: no shard record");
    // A shard cut short (a killed run) is not merged; --resume finishes it.
    let text = std::fs::read_to_string(c).unwrap();
    let cut = text.trim_end().rsplit_once('\n').unwrap().0.to_string() + "\n";
    std::fs::write(c, cut).unwrap();
    assert_refused(&merge(&[a, b, c], &dir.join("x.csv")), "did not finish");
    run_ok(&[&base[..], &[c.to_str().unwrap(), "--shard", "3/3", "--resume"]].concat());
    assert_eq!(merge(&[a, b, c], &dir.join("y.csv")).status.code(), Some(0));
    // Resuming a shard with other options, or merging such shards, is refused.
    let other = [&base[..], &[c.to_str().unwrap(), "--shard", "3/3", "--resume", "--no-bab"]].concat();
    assert_refused(&polycert(&other), "--resume of another run");
    let odd = dir.join("odd.csv");
    run_ok(&[&base[..], &[odd.to_str().unwrap(), "--shard", "3/3", "--no-bab"]].concat());
    assert_refused(&merge(&[a, b, &odd], &dir.join("x.csv")), "the options differ");
}

#[test]
fn verify_image_shards_merge_to_one_run() {
    let dir = tmp("shard-verify");
    std::fs::create_dir_all(&dir).unwrap();
    let base = ["verify", DIGITS, "--images", IMAGES, "--count", "40", "--backend", "cpu", "--no-bab", "--no-alpha"];
    let whole = dir.join("whole.csv");
    run_ok(&[&base[..], &["--results", whole.to_str().unwrap()]].concat());
    let shards: Vec<PathBuf> = (1..=4).map(|k| dir.join(format!("s{k}.csv"))).collect();
    for (k, s) in shards.iter().enumerate() {
        let shard = format!("{}/4", k + 1);
        run_ok(&[&base[..], &["--results", s.to_str().unwrap(), "--shard", &shard]].concat());
    }
    let merged = dir.join("merged.csv");
    let o = merge(&shards.iter().collect::<Vec<_>>(), &merged);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let want = verdicts(&whole);
    assert_eq!(want.len(), 40);
    assert!(want[7][1].ends_with("#7 eps=0.03"), "{:?}", want[7]);
    assert_eq!(verdicts(&merged), want);
    // A results file is never overwritten; --shard needs --results.
    assert_refused(&polycert(&[&base[..], &["--results", whole.to_str().unwrap()]].concat()), "already holds");
    let o = polycert(&[&base[..], &["--shard", "1/2"]].concat());
    assert_eq!(o.status.code(), Some(2));
}

/// Shards in VNN-COMP's own results format (no header) merge too.
#[test]
fn vnncomp_format_shards_merge() {
    let dir = tmp("shard-format");
    let inst = instances(&dir);
    let base = ["vnncomp", "--instances", inst.to_str().unwrap(), "--backend", "cpu", "--format", "vnncomp"];
    let shards: Vec<PathBuf> = (1..=2).map(|k| dir.join(format!("s{k}.csv"))).collect();
    for (k, s) in shards.iter().enumerate() {
        let shard = format!("{}/2", k + 1);
        run_ok(&[&base[..], &["--results", s.to_str().unwrap(), "--shard", &shard]].concat());
    }
    let whole = dir.join("whole.csv");
    run_ok(&[&base[..], &["--results", whole.to_str().unwrap()]].concat());
    let merged = dir.join("merged.csv");
    assert_eq!(merge(&shards.iter().collect::<Vec<_>>(), &merged).status.code(), Some(0));
    // category,onnx,vnnlib,prepare_seconds,result,seconds: all but the times.
    let rows = |p: &Path| -> Vec<String> {
        let text = std::fs::read_to_string(p).unwrap();
        text.lines()
            .map(|l| {
                l.split(',')
                    .enumerate()
                    .filter(|(k, _)| ![3, 5].contains(k))
                    .map(|(_, f)| f)
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect()
    };
    assert_eq!(rows(&merged).len(), 7);
    assert_eq!(rows(&merged), rows(&whole));
}
