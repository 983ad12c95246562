//! Dense backsubstitution throughput, interval kernel and point step:
//! `cargo run --release -p polycert-backend-cuda --example gemm_bench [-- cpu]`.
//! Counts 4 flops per interval multiply-add term (an FMA for each end) and
//! 2 per point term; the point step includes its constant (error terms).

use polycert_backend_cpu::CpuBackend;
use polycert_deeppoly::{Backend, Geom, Magnitudes, Shape};
use polycert_interval::Fp;
use std::time::Instant;

fn bench<B: Backend<T>, T: Fp>(be: &B, n: usize, reps: usize) -> f64 {
    let vals = |k: usize, s: u64| -> Vec<T> {
        (0..k).map(|i| T::from_f64_nearest((((i as u64 * 2654435761 + s) % 2001) as f64 - 1000.0) / 1000.0)).collect()
    };
    let lo = vals(n * n, 1);
    let hi: Vec<T> = lo.iter().map(|&v| v + T::from_f64_nearest(0.01)).collect();
    let a = be.mat_from_host(n, n, &lo, &hi).unwrap();
    let w = be.upload(&vals(n * n, 7)).unwrap();
    let b = be.upload(&vals(n, 3)).unwrap();
    let _ = be.dense_backsub(&a, &w, n, &b, &b).unwrap(); // warm-up (and compile)
    let t = Instant::now();
    for _ in 0..reps {
        let (m, _) = be.dense_backsub(&a, &w, n, &b, &b).unwrap();
        let _ = be.mat_rows(&m);
    }
    // The constant download synchronises each call.
    let s = t.elapsed().as_secs_f64() / reps as f64;
    4.0 * (n * n * n) as f64 / s / 1e9
}

fn bench_point<B: Backend<T>, T: Fp>(be: &B, n: usize, reps: usize) -> f64 {
    let vals = |k: usize, s: u64| -> Vec<T> {
        (0..k).map(|i| T::from_f64_nearest((((i as u64 * 2654435761 + s) % 2001) as f64 - 1000.0) / 1000.0)).collect()
    };
    let a = be.pmat_from_host(n, n, &vals(n * n, 1)).unwrap();
    let w = be.upload(&vals(n * n, 7)).unwrap();
    let b = be.upload(&vals(n, 3)).unwrap();
    let wr = be.upload(&vec![T::one(); n]).unwrap();
    let mag = Magnitudes { wr: &wr, r1: &[n as f64] };
    let g = Geom::full(Shape::flat(n), n);
    let _ = be.point_dense(&a, &g, &w, n, (&b, &b), &mag).unwrap();
    let t = Instant::now();
    for _ in 0..reps {
        let (_, c) = be.point_dense(&a, &g, &w, n, (&b, &b), &mag).unwrap();
        let _ = be.cst_to_host(&c).unwrap(); // synchronises
    }
    let s = t.elapsed().as_secs_f64() / reps as f64;
    2.0 * (n * n * n) as f64 / s / 1e9
}

fn main() {
    let cpu_only = std::env::args().any(|a| a == "cpu");
    if cpu_only {
        let be = CpuBackend::default();
        println!("cpu ({} threads)", std::thread::available_parallelism().map_or(1, |n| n.get()));
        for n in [256, 512, 1024] {
            println!(
                "cpu n={n}: interval f32 {:.2} GFLOP/s, f64 {:.2} GFLOP/s",
                bench::<_, f32>(&be, n, 3),
                bench::<_, f64>(&be, n, 3)
            );
        }
        for n in [256, 512, 1024, 2048] {
            let reps = if n >= 2048 { 2 } else { 5 };
            println!(
                "cpu n={n}: point f32 {:.1} GFLOP/s, f64 {:.1} GFLOP/s",
                bench_point::<_, f32>(&be, n, reps),
                bench_point::<_, f64>(&be, n, reps)
            );
        }
        return;
    }
    let be = match polycert_backend_cuda::CudaBackend::new() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    println!("device: {}", be.device().name);
    for n in [256, 512] {
        for _ in 0..2 {
            let f = bench_point::<_, f64>(&be, n, 200);
            let us = 2.0 * (n * n * n) as f64 / (f * 1e9) * 1e6;
            println!("gpu n={n}: point f64 step {us:.1} us per call ({f:.0} GFLOP/s)");
        }
    }
    if std::env::args().any(|a| a == "small") {
        return;
    }
    for n in [1024, 2048, 4096, 8192] {
        let reps = if n >= 4096 { 3 } else { 10 };
        println!(
            "gpu n={n}: interval f32 {:.0} GFLOP/s, f64 {:.0} GFLOP/s",
            bench::<_, f32>(&be, n, reps),
            bench::<_, f64>(&be, n, reps)
        );
        println!(
            "gpu n={n}: point (cuBLAS) f32 {:.0} GFLOP/s, f64 {:.0} GFLOP/s",
            bench_point::<_, f32>(&be, n, 2 * reps),
            bench_point::<_, f64>(&be, n, 2 * reps)
        );
    }
}
