//! Build script of the crates whose tests need what CI lacks, so that those
//! tests report themselves ignored there instead of passing:
//! - `cfg(shared_bench)` where `../shared/bench` is (or `POLYCERT_BENCH`);
//! - `cfg(gpu_tests)` where `POLYCERT_GPU_TESTS` is set at build time
//!   (`cargo xtask gpu-prepare` sets it): the GPU tests then run, and fail
//!   without a GPU.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(shared_bench)");
    println!("cargo::rustc-check-cfg=cfg(gpu_tests)");
    println!("cargo::rerun-if-env-changed=POLYCERT_GPU_TESTS");
    if std::env::var_os("POLYCERT_GPU_TESTS").is_some() {
        println!("cargo::rustc-cfg=gpu_tests");
    }
    println!("cargo::rerun-if-env-changed=POLYCERT_BENCH");
    let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let shared = root.join("../../../shared");
    // The folder above the repository changes when `shared` appears.
    let watch = if shared.exists() { shared.clone() } else { root.join("../../..") };
    println!("cargo::rerun-if-changed={}", watch.display());
    let bench = std::env::var_os("POLYCERT_BENCH").map(std::path::PathBuf::from).unwrap_or(shared.join("bench"));
    if bench.is_dir() {
        println!("cargo::rustc-cfg=shared_bench");
    }
}
