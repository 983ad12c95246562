//! Imports the real benchmark files of `../shared/bench` (VNN-COMP 2021
//! mnist_fc and cifar10_resnet). Ignored where `../shared` was not
//! there at build time (`build/test_cfg.rs`).

use polycert_deeppoly::base::eval::eval;
use polycert_deeppoly::{Op, Shape};
use polycert_onnx::{Imported, load_onnx, load_vnnlib};
use std::path::{Path, PathBuf};

/// `$POLYCERT_BENCH`, else `../shared/bench` beside the repository.
fn bench() -> Option<PathBuf> {
    let dir = std::env::var_os("POLYCERT_BENCH")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/bench"));
    dir.is_dir().then_some(dir)
}

/// `(onnx, vnnlib)` pairs of a benchmark folder's instances.csv.
fn instances(dir: &Path) -> Vec<(PathBuf, PathBuf)> {
    let csv = std::fs::read_to_string(dir.join("instances.csv")).expect("instances.csv");
    csv.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (dir.join(f[0].trim()), dir.join(f[1].trim()))
        })
        .collect()
}

fn kinds(m: &Imported) -> Vec<&'static str> {
    m.network.nodes().iter().map(|n| n.op.kind()).collect()
}

fn argmax(v: &[f64]) -> usize {
    (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b })
}

#[test]
#[cfg_attr(not(shared_bench), ignore = "needs ../shared/bench (or POLYCERT_BENCH)")]
fn mnist_fc_networks_import() {
    let b = bench().expect("the shared benchmarks, found when built");
    for (name, hidden) in [("mnist-net_256x2.onnx", 2), ("mnist-net_256x4.onnx", 4), ("mnist-net_256x6.onnx", 6)] {
        let m = load_onnx(b.join("mnist_fc").join(name)).unwrap();
        assert_eq!(m.network.input_shape(), Shape::flat(784), "{name}");
        assert_eq!(m.network.output_shape(), Shape::flat(10), "{name}");
        assert_eq!(m.input_dims, vec![1, 784, 1]);
        assert_eq!(m.opset, 9);
        let k = kinds(&m);
        assert_eq!(k.iter().filter(|&&k| k == "Dense").count(), hidden + 1, "{name}: {k:?}");
        assert_eq!(k.iter().filter(|&&k| k == "Relu").count(), hidden, "{name}: {k:?}");
        assert!(m.network.nodes().iter().all(|n| match &n.op {
            Op::Dense { out, .. } => *out == 256 || *out == 10,
            _ => true,
        }));
    }
}

#[test]
#[cfg_attr(not(shared_bench), ignore = "needs ../shared/bench (or POLYCERT_BENCH)")]
fn cifar_resnets_import() {
    let b = bench().expect("the shared benchmarks, found when built");
    for (name, convs, adds) in [("resnet_2b.onnx", 7, 2), ("resnet_4b.onnx", 11, 4)] {
        let path = b.join("cifar10_resnet/onnx").join(name);
        let m = load_onnx(&path).unwrap();
        assert_eq!(m.network.input_shape(), Shape::new(3, 32, 32), "{name}");
        assert_eq!(m.network.output_shape(), Shape::flat(10), "{name}");
        let k = kinds(&m);
        assert!(k.iter().filter(|&&k| k == "Conv2d").count() >= convs - 2, "{name}: {k:?}");
        assert_eq!(k.iter().filter(|&&k| k == "Add").count(), adds, "{name}: {k:?}");
        assert_eq!(k.iter().filter(|&&k| k == "Dense").count(), 2, "{name}: {k:?}");
        assert_eq!(k.iter().filter(|&&k| k == "Reshape").count(), 1, "{name}: {k:?}");
    }
}

#[test]
#[cfg_attr(not(shared_bench), ignore = "needs ../shared/bench (or POLYCERT_BENCH)")]
fn every_instance_parses_and_its_centre_is_classified_as_the_label() {
    let b = bench().expect("the shared benchmarks, found when built");
    let mut checked = 0;
    for folder in ["mnist_fc", "cifar10_resnet"] {
        let mut last: Option<(PathBuf, Imported)> = None;
        for (onnx, vnnlib) in instances(&b.join(folder)) {
            if last.as_ref().is_none_or(|(p, _)| *p != onnx) {
                last = Some((onnx.clone(), load_onnx(&onnx).unwrap()));
            }
            let Some((_, m)) = &last else { unreachable!() };
            let prop = load_vnnlib(&vnnlib, m.n_inputs(), m.n_outputs()).unwrap();
            prop.check_dims(m.n_inputs(), m.n_outputs()).unwrap();
            let [sp] = &prop.subproblems[..] else {
                panic!("{}: {} sub-problems", vnnlib.display(), prop.subproblems.len())
            };
            assert_eq!(sp.unsafe_region.len(), m.n_outputs() - 1);
            let label = prop.label.unwrap_or_else(|| panic!("{}: no robustness label", vnnlib.display()));
            let y = eval::<f64>(&m.network, &sp.input.centre());
            assert_eq!(argmax(&y), label, "{} with {}", vnnlib.display(), onnx.display());
            checked += 1;
        }
    }
    assert_eq!(checked, 60 + 36);
}

#[test]
#[cfg_attr(not(shared_bench), ignore = "needs ../shared/bench (or POLYCERT_BENCH)")]
fn forward_pass_matches_onnxruntime_reference() {
    let b = bench().expect("the shared benchmarks, found when built");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference_outputs.json");
    let text = std::fs::read_to_string(&fixture).expect("reference_outputs.json");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let cases = json["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 15);
    for case in cases {
        let onnx = b.join(case["onnx"].as_str().unwrap());
        let m = load_onnx(&onnx).unwrap();
        let vnn = b.join(case["vnnlib"].as_str().unwrap());
        let prop = load_vnnlib(&vnn, m.n_inputs(), m.n_outputs()).unwrap();
        let x: Vec<f32> = prop.subproblems[0].input.centre().iter().map(|&v| v as f32).collect();
        let y = eval::<f32>(&m.network, &x);
        let want: Vec<f64> = case["output"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        let scale = want.iter().fold(0.0f64, |a, v| a.max(v.abs())).max(1e-6);
        for (i, (&got, &w)) in y.iter().zip(&want).enumerate() {
            let err = (got as f64 - w).abs() / scale;
            assert!(err <= 1e-4, "{} at {}: output {i} is {got}, onnxruntime gives {w}", onnx.display(), vnn.display());
        }
    }
}
