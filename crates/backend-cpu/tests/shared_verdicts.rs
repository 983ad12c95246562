//! The default analysis (point arithmetic, f64) on the shared VNN-COMP
//! benchmarks proves exactly the properties GPUPoly proves
//! (`reference/gpupoly_verdicts.csv`). Reads `$POLYCERT_BENCH` (default
//! `../shared/bench` next to the repository) and skips without it.
//! resnet_4b (minutes on 2 cores) runs only with `POLYCERT_BENCH_ALL=1`.

mod util;

use polycert_backend_cpu::CpuBackend;
use polycert_deeppoly::{Analyzer, Arith, Options, Verdict};
use std::collections::BTreeMap;
use util::bench_dir;

/// `(network stem, property file) → verified` from GPUPoly's reference.
fn reference(dir: &std::path::Path) -> BTreeMap<(String, String), bool> {
    let text = std::fs::read_to_string(dir.join("reference/gpupoly_verdicts.csv")).expect("reference verdicts");
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(',').map(str::trim).collect();
            ((f[0].to_string(), f[1].to_string()), f[3] == "true")
        })
        .collect()
}

fn stem(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.trim_end_matches(".onnx").to_string()
}

fn check<T: polycert_interval::Fp>(set: &str, arith: Arith, skip: &[&str]) {
    let Some(dir) = bench_dir() else {
        panic!("no shared benchmarks at run time (set POLYCERT_BENCH)");
    };
    let refs = reference(&dir);
    let be = CpuBackend::default();
    // One analysis, as GPUPoly: no branch and bound.
    let opts = Options::default().with(|o| {
        o.passes.arith = arith;
        o.attack.steps = 0;
        o.search.split_relus = false;
        o.crown.optimize_slopes = false;
    });
    let base = dir.join(set);
    let text = std::fs::read_to_string(base.join("instances.csv")).expect("instances.csv");
    let mut last: Option<(String, polycert_onnx::Imported)> = None;
    let (mut checked, mut verified) = (0, 0);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if skip.iter().any(|s| f[0].contains(s)) {
            continue;
        }
        if last.as_ref().is_none_or(|(p, _)| p != f[0]) {
            last = Some((f[0].to_string(), polycert_onnx::load_onnx(base.join(f[0])).expect("model")));
        }
        let Some((_, model)) = &last else { unreachable!() };
        let prop = polycert_onnx::load_vnnlib(base.join(f[1]), model.n_inputs(), model.n_outputs()).expect("vnnlib");
        let prop = model.property_to_ir(&prop);
        let out =
            Analyzer::<_, T>::new(&model.network, &be, opts.clone()).expect("prepare").analyze(&prop).expect("run");
        let prop_name = f[1].rsplit('/').next().unwrap_or(f[1]).to_string();
        let want = refs[&(stem(f[0]), prop_name)];
        let got = out.verdict == Verdict::Verified;
        assert_eq!(got, want, "{line}: {arith:?} {} verified={got}, GPUPoly verified={want}", T::NAME);
        println!("{line}: {} in {:.3}s", out.verdict.name(), out.seconds);
        checked += 1;
        verified += got as usize;
    }
    println!("{set} ({arith:?}, {}): {checked} instances, {verified} verified, as GPUPoly", T::NAME);
    assert!(checked > 0);
}

fn resnets() -> &'static [&'static str] {
    if std::env::var_os("POLYCERT_BENCH_ALL").is_some() { &[] } else { &["resnet_4b"] }
}

#[test]
#[cfg_attr(not(shared_bench), ignore = "needs ../shared/bench (or POLYCERT_BENCH)")]
fn mnist_fc_point_verdicts_equal_gpupoly() {
    check::<f64>("mnist_fc", Arith::Point, &[]);
}

#[test]
#[cfg_attr(not(shared_bench), ignore = "needs ../shared/bench (or POLYCERT_BENCH)")]
fn cifar10_resnet_point_verdicts_equal_gpupoly() {
    check::<f64>("cifar10_resnet", Arith::Point, resnets());
}

#[test]
#[cfg_attr(not(shared_bench), ignore = "needs ../shared/bench (or POLYCERT_BENCH)")]
fn mnist_fc_point_f32_verdicts_equal_gpupoly() {
    check::<f32>("mnist_fc", Arith::Point, &[]);
}

#[test]
#[cfg_attr(not(shared_bench), ignore = "needs ../shared/bench (or POLYCERT_BENCH)")]
fn cifar10_resnet_point_f32_verdicts_equal_gpupoly() {
    check::<f32>("cifar10_resnet", Arith::Point, resnets());
}
