//! CPU against GPU on random networks: the same verdicts, and bounds within
//! 1e-5 relative (skips without a GPU).

use polycert_backend_cpu::CpuBackend;
use polycert_deeppoly::LoHi;
use polycert_deeppoly::base::rng::SplitMix;
use polycert_deeppoly::testnets::{random_maxpool, random_mlp, random_pool_concat, random_resnet, random_sigmoid_mlp};
use polycert_deeppoly::{Analyzer, Arith, Backend, InputBox, Options, Property, Shape};
use polycert_interval::Fp;

fn compare<T: Fp>(gpu: &impl Backend<T>, arith: Arith)
where
    CpuBackend: Backend<T>,
{
    let cpu = CpuBackend::default();
    let mut rng = SplitMix(99);
    for k in 0..15 {
        let net = match k % 5 {
            0 => random_mlp(&mut rng, &[20, 64, 64, 5]),
            1 => random_resnet(&mut rng, Shape::new(2, 9, 9), 4, 5),
            2 => random_pool_concat(&mut rng, Shape::new(2, 9, 9), 4, 5),
            3 => random_maxpool(&mut rng, Shape::new(2, 8, 8), 4, 5),
            _ => random_sigmoid_mlp(&mut rng, &[20, 64, 64, 64, 5]),
        };
        let n_in = net.input_shape().numel();
        let c: Vec<f64> = (0..n_in).map(|_| rng.unit()).collect();
        let eps = 0.004 * (1 + k % 3) as f64;
        let input = InputBox::new(c.iter().map(|v| v - eps).collect(), c.iter().map(|v| v + eps).collect()).unwrap();
        let y = polycert_deeppoly::base::eval::eval::<f64>(&net, &input.centre());
        let label = (0..y.len()).max_by(|&i, &j| y[i].total_cmp(&y[j])).unwrap();
        let prop = Property::robustness("p", input.clone(), label, y.len()).unwrap();
        let o = Options::default().with(|o| o.passes.arith = arith);
        let a = Analyzer::<_, T>::new(&net, &cpu, o.clone()).unwrap();
        let b = Analyzer::<_, T>::new(&net, gpu, o).unwrap();
        let (ba, bb) = (
            a.node_bounds(&input, polycert_deeppoly::base::budget::Budget::UNLIMITED).unwrap(),
            b.node_bounds(&input, polycert_deeppoly::base::budget::Budget::UNLIMITED).unwrap(),
        );
        for (n, (LoHi { lo: la, hi: ha }, LoHi { lo: lb, hi: hb })) in ba.iter().zip(&bb).enumerate() {
            for j in 0..la.len() {
                let close = |x: f64, y: f64| (x - y).abs() <= 1e-5 * (1.0 + x.abs().max(y.abs()));
                assert!(
                    close(la[j], lb[j]) && close(ha[j], hb[j]),
                    "{arith:?} net {k} node {n}[{j}]: cpu [{}, {}] gpu [{}, {}]",
                    la[j],
                    ha[j],
                    lb[j],
                    hb[j]
                );
            }
        }
        let (ra, rb) = (a.analyze(&prop).unwrap(), b.analyze(&prop).unwrap());
        assert_eq!(ra.verdict, rb.verdict, "net {k}");
        for (x, y) in ra.lower_bounds.iter().zip(&rb.lower_bounds) {
            assert!((x - y).abs() <= 1e-5 * (1.0 + x.abs()), "net {k}: lower bounds {x} vs {y}");
        }
    }
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: cargo xtask gpu-prepare builds it to run")]
fn cpu_and_gpu_agree_f64() {
    let Some(gpu) = polycert_backend_cuda::test_backend() else { return };
    compare::<f64>(&gpu, Arith::Point);
    compare::<f64>(&gpu, Arith::Interval);
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: cargo xtask gpu-prepare builds it to run")]
fn cpu_and_gpu_agree_f32() {
    let Some(gpu) = polycert_backend_cuda::test_backend() else { return };
    compare::<f32>(&gpu, Arith::Point);
    compare::<f32>(&gpu, Arith::Interval);
}

/// Uploads and downloads from one value to 20 MiB give back the values
/// sent, and the device holds them: `x + x` there is `2x` here.
fn transfers<T: Fp>(gpu: &impl Backend<T>) {
    let mut rng = SplitMix(7);
    for n in [1, 1000, (1 << 20) / std::mem::size_of::<T>() + 3, (20 << 20) / std::mem::size_of::<T>() + 5] {
        let v: Vec<T> = (0..n).map(|_| T::from_f64_nearest(rng.weight(8.0))).collect();
        let buf = gpu.upload(&v).unwrap();
        assert!(gpu.download(&buf).unwrap() == v, "round trip of {n} values");
        let twice = gpu.download(&gpu.pointwise(polycert_deeppoly::Pointwise::Add(&buf, &buf)).unwrap()).unwrap();
        assert!(twice.iter().zip(&v).all(|(&d, &x)| d == x + x), "device copy of {n} values");
    }
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: cargo xtask gpu-prepare builds it to run")]
fn transfers_round_trip() {
    let Some(gpu) = polycert_backend_cuda::test_backend() else { return };
    transfers::<f64>(&gpu);
    transfers::<f32>(&gpu);
}

/// The point bound's underflow term assumes that cuBLAS's float32 GEMM (in
/// pedantic mode) keeps subnormal inputs, products and sums. Where a device
/// flushes them the bound pays `2^-126` per operation instead; this test
/// says which holds here, and fails where the flush is not noticed.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: cargo xtask gpu-prepare builds it to run")]
fn cublas_f32_gemm_keeps_subnormals() {
    let Some(gpu) = polycert_backend_cuda::test_backend() else { return };
    let keeps = gpu.gemm_f32_keeps_subnormals().expect("probe");
    eprintln!("cuBLAS f32 GEMM keeps subnormals: {keeps}");
    assert!(keeps, "cuBLAS flushes subnormals on this device: the point bound pays 2^-126 per operation");
}
