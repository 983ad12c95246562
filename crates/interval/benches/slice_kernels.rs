//! Criterion benchmarks of the slice kernels and the interval dot product.
//!
//! Throughput is reported as `Elements` = number of multiply-add terms per
//! iteration (`n` for a length-`n` axpy or dot). Count 2 flops per term
//! (one multiply + one add, as for a real axpy/dot) to get GFLOP/s:
//! `GFLOP/s = 2 · elements/s / 1e9`. The interval kernels actually execute
//! more instructions per term (two products and min/max for the bounds, one
//! product for the magnitude sum, three adds), so this is the "useful" flop
//! rate of the interval computation, comparable with a plain f64 dot.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use polycert_interval::kernels::{axpy, dot_planes};
use polycert_interval::{Fp, Interval, dot};
use std::hint::black_box;

const LENGTHS: [usize; 2] = [256, 4096];

/// Deterministic values in about `[-1, 1]` (xorshift).
fn values<T: Fp>(n: usize, seed: u64) -> Vec<T> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            T::from_f64_nearest((s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
        })
        .collect()
}

fn intervals<T: Fp>(n: usize, seed: u64) -> Vec<Interval<T>> {
    let c = values::<T>(n, seed);
    let r = values::<T>(n, seed ^ 0x5555);
    c.iter()
        .zip(&r)
        .map(|(&c, &r)| {
            let r = r.abs() * T::from_f64_nearest(0.01);
            Interval::new(c - r, c + r).unwrap()
        })
        .collect()
}

fn bench_axpy_t<T: Fp>(c: &mut Criterion, name: &str) {
    let mut g = c.benchmark_group(format!("axpy/{name}"));
    for &n in &LENGTHS {
        let w = values::<T>(n, 1);
        let a = Interval::new(T::from_f64_nearest(-0.25), T::from_f64_nearest(0.5)).unwrap();
        let p = Interval::point(T::from_f64_nearest(0.75)).unwrap();
        let (mut lo, mut hi, mut mag) = (vec![0.0f64; n], vec![0.0f64; n], vec![0.0f64; n]);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::new("interval", n), &n, |b, _| {
            b.iter(|| axpy(&mut lo, &mut hi, &mut mag, black_box(a), black_box(&w)))
        });
        g.bench_with_input(BenchmarkId::new("point", n), &n, |b, _| {
            b.iter(|| axpy(&mut lo, &mut hi, &mut mag, black_box(p), black_box(&w)))
        });
        black_box((&lo, &hi, &mag));
    }
    g.finish();
}

fn bench_dot_planes_t<T: Fp>(c: &mut Criterion, name: &str) {
    let mut g = c.benchmark_group(format!("dot_planes/{name}"));
    for &n in &LENGTHS {
        let x = intervals::<T>(n, 2);
        let (xl, xh): (Vec<T>, Vec<T>) = x.iter().map(|i| (i.lo(), i.hi())).unzip();
        let w = values::<T>(n, 3);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| dot_planes(black_box(&xl), black_box(&xh), black_box(&w)).finish::<T>())
        });
    }
    g.finish();
}

fn bench_dot_t<T: Fp>(c: &mut Criterion, name: &str) {
    let mut g = c.benchmark_group(format!("interval_dot/{name}"));
    for &n in &LENGTHS {
        let x = intervals::<T>(n, 4);
        let w = values::<T>(n, 5);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| b.iter(|| dot(black_box(&x), black_box(&w))));
    }
    g.finish();
}

fn benches(c: &mut Criterion) {
    bench_axpy_t::<f32>(c, "f32");
    bench_axpy_t::<f64>(c, "f64");
    bench_dot_planes_t::<f32>(c, "f32");
    bench_dot_planes_t::<f64>(c, "f64");
    bench_dot_t::<f32>(c, "f32");
    bench_dot_t::<f64>(c, "f64");
}

criterion_group!(slice_kernels, benches);
criterion_main!(slice_kernels);
