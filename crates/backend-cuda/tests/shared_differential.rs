//! CPU against GPU on every shared benchmark instance: the same verdicts
//! and certified lower bounds within 1e-5 relative. Reads the instances
//! from `$POLYCERT_BENCH` (default `../shared/bench` next to the repo);
//! skips without a GPU or without the files.

use polycert_backend_cpu::CpuBackend;
use polycert_deeppoly::{Analyzer, Options, Verdict};
use std::path::PathBuf;

fn bench_dir() -> Option<PathBuf> {
    let d = std::env::var_os("POLYCERT_BENCH")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/bench")));
    d.exists().then_some(d)
}

#[test]
#[cfg_attr(not(all(shared_bench, gpu_tests)), ignore = "needs a CUDA GPU and ../shared/bench")]
fn cpu_and_gpu_agree_on_every_shared_instance() {
    let Some(gpu) = polycert_backend_cuda::test_backend() else { return };
    let Some(dir) = bench_dir() else {
        panic!("no shared benchmarks at run time (set POLYCERT_BENCH)");
    };
    let cpu = CpuBackend::default();
    // One analysis each (branch and bound is compared by the conformance suite).
    let opts = Options::default().with(|o| {
        o.attack.steps = 0;
        o.search.split_relus = false;
        o.crown.optimize_slopes = false;
    });
    let mut checked = 0;
    for set in ["mnist_fc", "cifar10_resnet"] {
        let base = dir.join(set);
        let text = std::fs::read_to_string(base.join("instances.csv")).expect("instances.csv");
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            let model = polycert_onnx::load_onnx(base.join(f[0])).expect("model");
            let prop =
                polycert_onnx::load_vnnlib(base.join(f[1]), model.n_inputs(), model.n_outputs()).expect("vnnlib");
            let prop = model.property_to_ir(&prop);
            let a = Analyzer::<_, f64>::new(&model.network, &cpu, opts.clone())
                .expect("cpu")
                .analyze(&prop)
                .expect("cpu run");
            let b = Analyzer::<_, f64>::new(&model.network, &gpu, opts.clone())
                .expect("gpu")
                .analyze(&prop)
                .expect("gpu run");
            assert_eq!(a.verdict, b.verdict, "{line}");
            for (x, y) in a.lower_bounds.iter().zip(&b.lower_bounds) {
                assert!((x - y).abs() <= 1e-5 * (1.0 + x.abs().max(y.abs())), "{line}: cpu {x} gpu {y}");
            }
            println!("{line}: {} (cpu {:.3}s, gpu {:.3}s)", a.verdict.name(), a.seconds, b.seconds);
            checked += 1;
        }
    }
    assert_eq!(checked, 96, "every shared instance");
}

/// With branch and bound (the default analysis), the CPU and the GPU answer
/// every mnist-net_256x2 instance alike: both prove it, or both find a
/// counterexample (not necessarily the same one). `shared_search.rs` in
/// the CPU backend pins the CPU's answers to α,β-CROWN's.
#[test]
#[cfg_attr(not(all(shared_bench, gpu_tests)), ignore = "needs a CUDA GPU and ../shared/bench")]
fn cpu_and_gpu_searches_agree_on_256x2() {
    let Some(gpu) = polycert_backend_cuda::test_backend() else { return };
    let Some(dir) = bench_dir() else {
        panic!("no shared benchmarks at run time (set POLYCERT_BENCH)");
    };
    let cpu = CpuBackend::default();
    let opts = Options::default().with(|o| o.timeout = Some(std::time::Duration::from_secs(120)));
    let base = dir.join("mnist_fc");
    let model = polycert_onnx::load_onnx(base.join("mnist-net_256x2.onnx")).expect("model");
    let on_cpu = Analyzer::<_, f64>::new(&model.network, &cpu, opts.clone()).expect("cpu");
    let on_gpu = Analyzer::<_, f64>::new(&model.network, &gpu, opts).expect("gpu");
    let mut answered = 0;
    for eps in ["0.03", "0.05"] {
        for k in 0..10 {
            let name = format!("prop_{k}_{eps}");
            let prop =
                polycert_onnx::load_vnnlib(base.join(format!("{name}.vnnlib")), model.n_inputs(), model.n_outputs())
                    .expect("vnnlib");
            let prop = model.property_to_ir(&prop);
            let a = on_cpu.analyze(&prop).expect("cpu run");
            let b = on_gpu.analyze(&prop).expect("gpu run");
            println!(
                "{name}: cpu {} in {:.2}s, gpu {} in {:.2}s",
                a.verdict.name(),
                a.seconds,
                b.verdict.name(),
                b.seconds
            );
            assert_eq!(a.verdict.name(), b.verdict.name(), "{name}");
            answered += usize::from(matches!(a.verdict, Verdict::Verified | Verdict::Falsified(_)));
        }
    }
    assert_eq!(answered, 20, "every 256x2 instance answered");
}
