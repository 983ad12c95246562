//! Preparing GPU runs: the device machine has no Rust toolchain, so test
//! binaries and polycert are built here and carried in `carry/` (ignored by
//! git through `.git/info/exclude`), with the shared benchmarks.

use anyhow::{Context, Result, bail};
use std::path::Path;
use std::process::Command;

/// Test targets that exercise the GPU.
const GPU_TESTS: &[(&str, &str)] = &[
    ("polycert-backend-cuda", "conformance"),
    ("polycert-backend-cuda", "conformance_conv_gemm"),
    ("polycert-backend-cuda", "graphs"),
    ("polycert-backend-cuda", "differential"),
    ("polycert-backend-cuda", "shared_differential"),
    ("polycert-backend-cuda", "shared_sampling"),
    ("polycert-soundness", "soundness"),
];

/// Every build here runs with `POLYCERT_GPU_TESTS` set: the GPU tests are
/// compiled to run (and to fail without a GPU) instead of being ignored
/// (`build/test_cfg.rs`), and one setting keeps cargo from rebuilding.
fn run(cmd: &mut Command) -> Result<String> {
    let out = cmd.env("POLYCERT_GPU_TESTS", "1").output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Path of a test executable from cargo's JSON messages.
fn test_exe(root: &Path, pkg: &str, test: &str) -> Result<String> {
    let json = run(Command::new("cargo").current_dir(root).args([
        "test",
        "--release",
        "-p",
        pkg,
        "--test",
        test,
        "--no-run",
        "--message-format=json",
    ]))?;
    json.lines()
        .filter(|l| l.contains("\"executable\":\"") && l.contains(&format!("\"name\":\"{test}\"")))
        .find_map(|l| l.split("\"executable\":\"").nth(1).and_then(|r| r.split('"').next()).map(str::to_string))
        .with_context(|| format!("no executable for {pkg} --test {test}"))
}

pub fn prepare(root: &Path, with_bench: bool) -> Result<()> {
    let carry = root.join("carry");
    for d in ["tests", "bin"] {
        let p = carry.join(d);
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p)?;
    }
    for (pkg, test) in GPU_TESTS {
        let exe = test_exe(root, pkg, test)?;
        let dest = carry.join("tests").join(test);
        std::fs::copy(&exe, &dest).with_context(|| format!("copying {exe}"))?;
        let _ = Command::new("strip").arg(&dest).status();
    }
    run(Command::new("cargo").current_dir(root).args(["build", "--release", "-p", "polycert-cli"]))?;
    let bin = carry.join("bin/polycert");
    std::fs::copy(root.join("target/release/polycert"), &bin)?;
    let _ = Command::new("strip").arg(&bin).status();
    if with_bench {
        let shared = root.join("../shared/bench");
        if !shared.exists() {
            bail!("{} not found: the benchmarks cannot be carried", shared.display());
        }
        let _ = std::fs::remove_dir_all(carry.join("bench"));
        run(Command::new("cp").args([
            "-r",
            "--no-preserve=mode",
            &shared.to_string_lossy(),
            &carry.join("bench").to_string_lossy(),
        ]))?;
    }
    println!("prepared {}", carry.display());
    Ok(())
}
