//! Throughput of the point dense step (`point_dense`: one plain GEMM plus the
//! per-row constants with the folded error): `cargo run --release -p
//! polycert-backend-cpu --example point_gemm_bench`. Counts 2 flops per
//! multiply-add of the GEMM.

use polycert_backend_cpu::CpuBackend;
use polycert_deeppoly::{Backend, Magnitudes};
use polycert_interval::Fp;
use std::time::Instant;

fn bench<T: Fp>(be: &CpuBackend, n: usize, reps: usize) -> f64 {
    let vals = |k: usize, s: u64| -> Vec<T> {
        (0..k).map(|i| T::from_f64_nearest((((i as u64 * 2654435761 + s) % 2001) as f64 - 1000.0) / 1000.0)).collect()
    };
    let a = be.pmat_from_host(n, n, &vals(n * n, 1)).unwrap();
    let w = be.upload(&vals(n * n, 7)).unwrap();
    let b = be.upload(&vals(n, 3)).unwrap();
    let wr = be.upload(&vec![T::one(); n]).unwrap();
    let mag = Magnitudes { wr: &wr, r1: n as f64 };
    let _ = be.point_dense(&a, &w, n, (&b, &b), &mag).unwrap();
    let t = Instant::now();
    for _ in 0..reps {
        let _ = be.point_dense(&a, &w, n, (&b, &b), &mag).unwrap();
    }
    2.0 * (n * n * n) as f64 / (t.elapsed().as_secs_f64() / reps as f64) / 1e9
}

fn main() {
    let be = CpuBackend::default();
    println!("cpu ({} threads)", rayon::current_num_threads());
    for n in [256, 512, 1024, 2048] {
        let reps = if n >= 2048 { 2 } else { 5 };
        println!("n={n}: f32 {:.1} GFLOP/s, f64 {:.1} GFLOP/s", bench::<f32>(&be, n, reps), bench::<f64>(&be, n, reps));
    }
}
