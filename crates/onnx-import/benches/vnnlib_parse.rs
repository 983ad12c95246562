//! Criterion benchmark of the VNNLIB parse of one image property (CIFAR-10
//! sized: 3,072 inputs bounded by 17-digit decimals, 9 disjuncts over the
//! outputs), generated in memory. One-property latency counts this parse.

use criterion::{Criterion, criterion_group, criterion_main};
use polycert_onnx::vnnlib::parse_vnnlib;
use std::fmt::Write;
use std::hint::black_box;

const INPUTS: usize = 3072;
const OUTPUTS: usize = 10;

/// A robustness property in the VNN-COMP style: `X_i` in a box of width
/// 0.06 around a pixel value, label 2.
fn cifar_property() -> String {
    let mut s = String::new();
    for i in 0..INPUTS {
        writeln!(s, "(declare-const X_{i} Real)").unwrap();
    }
    for j in 0..OUTPUTS {
        writeln!(s, "(declare-const Y_{j} Real)").unwrap();
    }
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    for i in 0..INPUTS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let c = (x >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0;
        writeln!(s, "(assert (<= X_{i} {:?}))\n(assert (>= X_{i} {:?}))", c + 0.03, c - 0.03).unwrap();
    }
    s.push_str("(assert (or\n");
    for j in (0..OUTPUTS).filter(|&j| j != 2) {
        writeln!(s, "    (and (>= Y_{j} Y_2))").unwrap();
    }
    s.push_str("))\n");
    s
}

fn bench(c: &mut Criterion) {
    let text = cifar_property();
    c.bench_function("parse_vnnlib cifar 3072 inputs", |b| {
        b.iter(|| parse_vnnlib(black_box(&text), "prop.vnnlib", INPUTS, OUTPUTS).expect("parses"))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
