//! The backend conformance suite. Every backend instantiates it unchanged:
//!
//! ```ignore
//! polycert_deeppoly::backend_conformance_tests!(polycert_backend_cpu::CpuBackend::default());
//! ```

use crate::base::analyzer::Analyzer;
use crate::base::backend::{Arith, Backend};
use crate::base::bounds::LoHi;
use crate::base::eval::eval_all;
use crate::base::geom::Geom;
use crate::base::ir::{Network, Shape};
use crate::base::options::Options;
use crate::base::property::{InputBox, Property, Verdict};
use crate::base::rng::SplitMix;
use crate::testnets::{
    densify, random_maxpool, random_mlp, random_pool_concat, random_power_mlp, random_resnet, random_sigmoid_mlp,
    random_step_mlp, two_two,
};
use polycert_interval::{FloatModel, Fp};

mod attack;
mod macros;
mod relaxed;
mod sampling;
mod search;
mod stabilize;
pub use attack::{
    attack_finds_hidden_counterexamples, attack_first_consistent, gradients_match_finite_differences,
    inference_matches_host,
};
pub use relaxed::{gather_and_scatter, relaxed_bound_matches_host};
pub use sampling::{Instance, judge_against_sampling, never_lose_to_sampling, sampled_violation};
pub use search::*;
pub use stabilize::{
    stabilize_clamps_provable_ends, stabilize_continues_from_its_start, stabilize_from_a_start_passes_spent_layers,
    stabilize_modes_agree,
};

/// The suite's options: the α/β search's relaxed bounds on the backend
/// under test (its default picks the host for dense networks).
pub(crate) fn opts(arith: Arith) -> Options {
    Options::default().with(|o| {
        o.passes.arith = arith;
        o.crown.relaxed_on = crate::base::options::RelaxedOn::Backend;
    })
}

/// The paper's 2-2-2-2 example: `u` of the second affine layer's first
/// neuron is 1.25 and the lower bound of `y_1 − y_2` is 1.
pub fn two_two_example<B: Backend<T>, T: Fp>(be: &B, arith: Arith) {
    let net = two_two();
    let a = Analyzer::<B, T>::new(&net, be, opts(arith)).expect("prepare");
    let input = InputBox::new(vec![0.0; 2], vec![0.5; 2]).expect("box");
    let b = a.node_bounds(&input, crate::base::budget::Budget::UNLIMITED).expect("bounds");
    let u = b[3].hi[0];
    assert!((1.25..1.25 + 1e-5).contains(&u), "u(dense2[0]) = {u}");
    let prop = Property::robustness("2222", input, 0, 2).expect("prop");
    let out = a.analyze(&prop).expect("analyze");
    let lb = out.lower_bounds[0];
    assert!((1.0 - 1e-5..=1.0).contains(&lb), "lb(y1 - y2) = {lb}");
    assert_eq!(out.verdict, Verdict::Verified);
}

/// The windowed conv path and its dense re-implementation agree.
pub fn sparse_equals_dense<B: Backend<T>, T: Fp>(be: &B, seed: u64, arith: Arith) {
    let mut rng = SplitMix(seed);
    let net = random_resnet(&mut rng, Shape::new(2, 7, 7), 3, 4);
    let (dense, map) = densify(&net);
    let input = random_box(&mut rng, 2 * 49, 0.05);
    // Exact network: the float-inference error term depends on the term
    // count, which densifying changes (zero weights count as terms).
    // Without early termination: rows stop at different steps otherwise.
    // (The point arithmetic's folded error grows with the inner length,
    // which densifying also changes: compare it in f64 only.)
    let o = opts(arith).with(|o| {
        o.passes.network_float = polycert_interval::FloatModel::EXACT;
        o.passes.early_termination = false;
    });
    let a = Analyzer::<B, T>::new(&net, be, o.clone()).expect("prepare");
    let d = Analyzer::<B, T>::new(&dense, be, o).expect("prepare");
    let (bs, bd) = (
        a.node_bounds(&input, crate::base::budget::Budget::UNLIMITED).expect("sparse"),
        d.node_bounds(&input, crate::base::budget::Budget::UNLIMITED).expect("dense"),
    );
    let tol = if std::mem::size_of::<T>() == 4 { 1e-4 } else { 1e-9 };
    for (i, LoHi { lo, hi }) in bs.iter().enumerate() {
        let LoHi { lo: dl, hi: dh } = &bd[map[i]];
        for j in 0..lo.len() {
            let ok = |x: f64, y: f64| (x - y).abs() <= tol * (1.0 + x.abs().max(y.abs()));
            assert!(
                ok(lo[j], dl[j]) && ok(hi[j], dh[j]),
                "node {i} neuron {j}: [{}, {}] vs [{}, {}]",
                lo[j],
                hi[j],
                dl[j],
                dh[j]
            );
        }
    }
}

fn random_box(rng: &mut SplitMix, n: usize, eps: f64) -> InputBox {
    let c: Vec<f64> = (0..n).map(|_| rng.unit()).collect();
    InputBox::new(c.iter().map(|v| v - eps).collect(), c.iter().map(|v| v + eps).collect()).expect("box")
}

fn robust_label(net: &Network, input: &InputBox) -> usize {
    let y = crate::base::eval::eval::<f64>(net, &input.centre());
    (0..y.len()).max_by(|&i, &j| y[i].total_cmp(&y[j])).unwrap_or(0)
}

/// Case `k` of the backsubstitution tests: an MLP of `widths`, a small
/// residual net or a max-pooling net in turn, a box of radius growing with
/// `k`, and robustness at the centre's label.
fn backsub_case(rng: &mut SplitMix, k: usize, widths: &[usize]) -> (Network, InputBox, Property) {
    let net = match k % 3 {
        0 => random_mlp(rng, widths),
        1 => random_resnet(rng, Shape::new(1, 6, 6), 2, 3),
        _ => random_maxpool(rng, Shape::new(1, 6, 6), 2, 3),
    };
    let input = random_box(rng, net.input_shape().numel(), 0.002 * (1 + k % 4) as f64);
    let prop =
        Property::robustness("p", input.clone(), robust_label(&net, &input), net.output_shape().numel()).expect("prop");
    (net, input, prop)
}

/// Early termination and row chunking do not change verdicts.
pub fn early_termination_same_verdicts<B: Backend<T>, T: Fp>(be: &B, arith: Arith) {
    let mut rng = SplitMix(7);
    let mut verified = 0;
    for k in 0..12 {
        let (net, _, prop) = backsub_case(&mut rng, k, &[6, 16, 16, 4]);
        let on = Analyzer::<B, T>::new(&net, be, opts(arith)).expect("prepare").analyze(&prop).expect("run");
        let off = Analyzer::<B, T>::new(&net, be, opts(arith).with(|o| o.passes.early_termination = false))
            .expect("prepare")
            .analyze(&prop)
            .expect("run");
        let tiny = Analyzer::<B, T>::new(&net, be, opts(arith).with(|o| o.passes.memory_budget = Some(1)))
            .expect("prepare")
            .analyze(&prop)
            .expect("run");
        assert_eq!(on.verdict, off.verdict, "net {k}");
        assert_eq!(on.verdict, tiny.verdict, "net {k}");
        assert_eq!(on.lower_bounds, tiny.lower_bounds, "net {k}: chunking changed bounds");
        verified += (on.verdict == Verdict::Verified) as usize;
    }
    assert!(verified >= 2, "too few verified ({verified}) for the test to mean anything");
}

/// Early-termination checks read one step late give every row the bound it
/// gets when each check is read at once (a decided row's later steps are
/// ignored), in the refined node bounds and in the outputs' bounds. Late
/// checks may leave decided rows in the matrices, and a vendor GEMM may
/// round a row differently among more rows: bounds agree to within 4096
/// units of `T`'s roundoff, not bit for bit (a misplaced row is far off).
pub fn late_checks_same_bounds<B: Backend<T>, T: Fp>(be: &B, arith: Arith) {
    let mut rng = SplitMix(19);
    let tol = 4096.0 * T::UNIT_ROUNDOFF;
    let close = |a: f64, b: f64| a == b || (a - b).abs() <= tol * (1.0 + a.abs().max(b.abs()));
    // Wide layers: checks that decide a few rows at a time leave them in the
    // matrices (lazy compaction) as well as dropping them.
    for k in 0..12 {
        let (net, input, prop) = backsub_case(&mut rng, k, &[6, 40, 40, 40, 40, 40, 4]);
        let run = |late: bool| {
            let a = Analyzer::<B, T>::new(&net, be, opts(arith).with(|o| o.passes.late_checks = Some(late)))
                .expect("prepare");
            let nodes = a.node_bounds(&input, crate::base::budget::Budget::UNLIMITED).expect("bounds");
            (nodes, a.analyze(&prop).expect("run"))
        };
        let ((n0, o0), (n1, o1)) = (run(false), run(true));
        assert_eq!(o0.verdict, o1.verdict, "net {k}");
        let pairs = o0.lower_bounds.iter().zip(&o1.lower_bounds);
        assert!(o0.lower_bounds.len() == o1.lower_bounds.len(), "net {k}: output rows");
        for (j, (&a, &b)) in pairs.enumerate() {
            assert!(close(a, b), "net {k}: output bound {j}: {a} against {b}");
        }
        for (i, (a, b)) in n0.iter().zip(&n1).enumerate() {
            let both = a.lo.iter().zip(&b.lo).chain(a.hi.iter().zip(&b.hi));
            for (&x, &y) in both {
                assert!(close(x, y), "net {k} node {i}: {x} against {y}");
            }
        }
    }
}

/// Concrete inference at random points and corners stays inside every
/// node's certified bounds, in f64 and in float32.
pub fn points_inside_bounds<B: Backend<T>, T: Fp>(be: &B, arith: Arith) {
    let mut rng = SplitMix(11);
    let mut powers = SplitMix(12);
    for k in 0..24 {
        let net = match k % 6 {
            _ if k >= 18 => random_power_mlp(&mut powers, &[4, 8, 8, 8, 3]),
            0 => random_mlp(&mut rng, &[5, 12, 12, 3]),
            1 => random_resnet(&mut rng, Shape::new(1, 5, 5), 2, 3),
            2 => random_pool_concat(&mut rng, Shape::new(2, 7, 7), 3, 3),
            3 => random_maxpool(&mut rng, Shape::new(2, 8, 8), 3, 3),
            4 => random_step_mlp(&mut rng, &[5, 12, 12, 12, 3]),
            _ => random_sigmoid_mlp(&mut rng, &[5, 12, 12, 12, 3]),
        };
        let n_in = net.input_shape().numel();
        let input = random_box(&mut rng, n_in, 0.05);
        let b = Analyzer::<B, T>::new(&net, be, opts(arith))
            .expect("prepare")
            .node_bounds(&input, crate::base::budget::Budget::UNLIMITED)
            .expect("bounds");
        for t in 0..40 {
            let x: Vec<f64> = (0..n_in)
                .map(|i| {
                    let (l, h) = (input.lo[i], input.hi[i]);
                    if t < 10 { if rng.below(2) == 0 { l } else { h } } else { l + (h - l) * rng.unit() }
                })
                .collect();
            let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            let in_box = x32.iter().enumerate().all(|(i, &v)| (v as f64) >= input.lo[i] && (v as f64) <= input.hi[i]);
            let v64 = eval_all::<f64>(&net, &x);
            let v32 = eval_all::<f32>(&net, &x32);
            for (n, LoHi { lo, hi }) in b.iter().enumerate() {
                for j in 0..lo.len() {
                    assert!(
                        lo[j] <= v64[n][j] && v64[n][j] <= hi[j],
                        "net {k} node {n}[{j}]: {} not in [{}, {}]",
                        v64[n][j],
                        lo[j],
                        hi[j]
                    );
                    if in_box {
                        let v = v32[n][j] as f64;
                        assert!(
                            lo[j] <= v && v <= hi[j],
                            "net {k} node {n}[{j}] f32: {v} not in [{}, {}]",
                            lo[j],
                            hi[j]
                        );
                    }
                }
            }
        }
    }
}

/// When the float32 inference can overflow, the bounds are the whole line
/// (inference may return inf), never a finite interval.
pub fn overflow_gives_no_bounds<B: Backend<T>, T: Fp>(be: &B, arith: Arith) {
    let mut net = Network::new(Shape::flat(1));
    let w = 1.0e38f32 as f64; // the f32 threshold is 2^127 ≈ 1.7e38
    net.push("big", crate::base::ir::Op::Dense { weight: vec![w, 1.0], bias: vec![0.0; 2], out: 2 }, &[0])
        .expect("valid");
    let a = Analyzer::<B, T>::new(&net, be, opts(arith)).expect("prepare");
    let b = a
        .node_bounds(&InputBox::new(vec![1.0], vec![2.0]).expect("box"), crate::base::budget::Budget::UNLIMITED)
        .expect("bounds");
    assert_eq!((b[1].lo[0], b[1].hi[0]), (f64::NEG_INFINITY, f64::INFINITY), "{:?}", b[1]);
    assert!(b[1].lo[1] <= 1.0 && b[1].hi[1] >= 2.0 && b[1].hi[1] < 2.001);
    let ok = a
        .node_bounds(&InputBox::new(vec![0.5], vec![1.0]).expect("box"), crate::base::budget::Budget::UNLIMITED)
        .expect("bounds");
    assert!(ok[1].hi[0].is_finite(), "no overflow below 1.7e38: {:?}", ok[1]);
}

/// A batch gives every property the verdict and bounds it gets alone
/// (bounds up to the GEMMs' rounding, which may depend on the row count),
/// also when row chunks cut across properties. Properties with several
/// sub-problems and conjunctive disjuncts are in every batch.
pub fn batch_equals_alone<B: Backend<T>, T: Fp>(be: &B) {
    let mut rng = SplitMix(31);
    let (mut verified, mut other) = (0, 0);
    let tol = if std::mem::size_of::<T>() == 4 { 1e-4 } else { 1e-9 };
    for k in 0..10 {
        let net = match k % 5 {
            0 => random_mlp(&mut rng, &[6, 16, 16, 4]),
            1 => random_resnet(&mut rng, Shape::new(1, 6, 6), 2, 3),
            2 => random_pool_concat(&mut rng, Shape::new(2, 7, 7), 3, 3),
            3 => random_maxpool(&mut rng, Shape::new(1, 6, 6), 2, 3),
            _ => random_sigmoid_mlp(&mut rng, &[6, 16, 16, 4]),
        };
        let (n_in, n_out) = (net.input_shape().numel(), net.output_shape().numel());
        // First, a property falsified at both sub-problems' box centres (its
        // unsafe region is every output): its hits must not reach the others.
        let mut all = Property::robustness("all", random_box(&mut rng, n_in, 0.002), 0, n_out).expect("prop");
        all.subproblems[0].unsafe_region = vec![vec![crate::base::property::Halfspace::new(vec![0.0; n_out], 1.0)]];
        all.subproblems.push(all.subproblems[0].clone());
        let mut props = vec![all];
        for p in 0..6 {
            let input = random_box(&mut rng, n_in, 0.003 * (1 + p % 3) as f64);
            let label = robust_label(&net, &input);
            let mut prop = Property::robustness(format!("p{p}"), input, label, n_out).expect("prop");
            if p >= 4 {
                // A conjunctive disjunct, and a second sub-problem on another box.
                let conj: Vec<_> = prop.subproblems[0].unsafe_region.iter().take(2).flatten().cloned().collect();
                prop.subproblems[0].unsafe_region.push(conj);
                let mut sp2 = prop.subproblems[0].clone();
                sp2.input = random_box(&mut rng, n_in, 0.001);
                prop.subproblems.push(sp2);
            }
            props.push(prop);
        }
        let refs: Vec<&Property> = props.iter().collect();
        for budget in [None, Some(1)] {
            let a = Analyzer::<B, T>::new(&net, be, opts(Arith::Point).with(|o| o.passes.memory_budget = budget))
                .expect("prepare");
            for (p, got) in props.iter().zip(a.analyze_batch(&refs)) {
                let (got, alone) = (got.expect("batched"), a.analyze(p).expect("alone"));
                let what = format!("net {k} {} budget {budget:?}", p.name);
                assert_eq!(got.verdict.name(), alone.verdict.name(), "{what}");
                assert_eq!(got.lower_bounds.len(), alone.lower_bounds.len(), "{what}");
                for (x, y) in got.lower_bounds.iter().zip(&alone.lower_bounds) {
                    let same = x == y || (x - y).abs() <= tol * (1.0 + x.abs().max(y.abs()));
                    assert!(same, "{what}: bound {x} batched, {y} alone");
                }
                if budget.is_none() {
                    if got.verdict == Verdict::Verified { verified += 1 } else { other += 1 }
                }
            }
        }
    }
    assert!(verified >= 4 && other >= 4, "weak test: {verified} verified, {other} not");
}

/// After a dropped Softmax, a gap between two logits that float32 rounding
/// alone would respect is too small for a verdict either way: the Softmax
/// could tie them. A wider gap decides as before.
pub fn softmax_margin_decides<B: Backend<T>, T: Fp>(be: &B, arith: Arith) {
    // y0 = x + 1, y1 = x + (1 − g) on x ∈ [0, 1]: y0 − y1 = g (|y| ≤ 2, margin ≈ 4.3e-6).
    let net_for = |g: f64, softmax: bool| {
        let mut net = Network::new(Shape::flat(1));
        let b1 = (1.0 - g) as f32 as f64;
        net.push("d", crate::base::ir::Op::Dense { weight: vec![1.0, 1.0], bias: vec![1.0, b1], out: 2 }, &[0])
            .expect("net");
        net.set_softmax_output(softmax);
        net
    };
    let prop = Property::robustness("p", InputBox::new(vec![0.0], vec![1.0]).expect("box"), 0, 2).expect("prop");
    let verdict = |g: f64, softmax: bool| {
        let net = net_for(g, softmax);
        let a = Analyzer::<B, T>::new(&net, be, opts(arith)).expect("prepare");
        match a.analyze(&prop).expect("analysis").verdict {
            Verdict::Verified => "verified",
            Verdict::Falsified(_) => "falsified",
            _ => "unknown",
        }
    };
    for (g, plain, softmax) in [
        (2e-6, "verified", "unknown"),
        (2e-5, "verified", "verified"),
        (-2e-6, "falsified", "unknown"),
        (-2e-5, "falsified", "falsified"),
    ] {
        assert_eq!(verdict(g, false), plain, "gap {g} without Softmax");
        assert_eq!(verdict(g, true), softmax, "gap {g} after a dropped Softmax");
    }
}

/// A margin of exactly 0 somewhere in the box is never verified (the
/// verdict needs a strictly positive bound): a tie at a box corner, and
/// outputs equal everywhere.
pub fn zero_margin_is_never_verified<B: Backend<T>, T: Fp>(be: &B, arith: Arith) {
    // (weights of y0 and y1 on x, biases): y0 − y1 = x − 0.5 on [0.5, 1], then y0 = y1 = x.
    for (w, b) in [([1.0, 0.0], [0.0, 0.5]), ([1.0, 1.0], [0.0, 0.0])] {
        let mut net = Network::new(Shape::flat(1));
        net.push("d", crate::base::ir::Op::Dense { weight: w.to_vec(), bias: b.to_vec(), out: 2 }, &[0]).expect("net");
        let prop = Property::robustness("p", InputBox::new(vec![0.5], vec![1.0]).expect("box"), 0, 2).expect("prop");
        // Exact network semantics make the bound exactly 0: only the strict test keeps it unproved.
        for (attack_steps, network_float) in [(0, FloatModel::EXACT), (0, FloatModel::F32), (20, FloatModel::F32)] {
            let o = opts(arith).with(|o| {
                o.attack.steps = attack_steps;
                o.passes.network_float = network_float;
            });
            let a = Analyzer::<B, T>::new(&net, be, o).expect("prepare");
            let o = a.analyze(&prop).expect("analysis");
            assert!(!matches!(o.verdict, Verdict::Verified), "{w:?} {b:?}: a zero margin was verified");
            assert!(o.lower_bounds.iter().all(|&l| l <= 0.0), "{:?}", o.lower_bounds);
        }
    }
}

/// Per-row constants on the backend: sums round down (below the exact sum,
/// at most one step below the nearest), compaction and copies are exact.
pub fn constants_round_down<B: Backend<f64>>(be: &B) {
    let mut rng = SplitMix(17);
    let n = 1000;
    let mut a: Vec<f64> = (0..n).map(|i| (rng.unit() - 0.5) * 10f64.powi((i % 7) as i32 - 3)).collect();
    let b: Vec<f64> = (0..n).map(|i| (rng.unit() - 0.5) * 10f64.powi((i % 5) as i32 - 2)).collect();
    a[0] = f64::NEG_INFINITY;
    let mut acc = be.cst_from_host(&a).expect("upload");
    let copy = be.cst_dup(&acc).expect("dup");
    be.cst_add(&mut acc, &be.cst_from_host(&b).expect("upload")).expect("add");
    let sum = be.cst_to_host(&acc).expect("download");
    assert_eq!(sum[0], f64::NEG_INFINITY);
    for i in 1..n {
        let s = a[i] + b[i];
        let bb = s - a[i];
        let err = (a[i] - (s - bb)) + (b[i] - bb); // exact sum = s + err
        let below = sum[i] < s || (sum[i] == s && err >= 0.0);
        assert!(below && sum[i] >= s.next_down(), "{} + {} gave {}", a[i], b[i], sum[i]);
    }
    assert_eq!(be.cst_to_host(&copy).expect("download"), a, "dup is a copy");
    let fetched = be.cst_fetched(be.cst_fetch(&acc).expect("fetch")).expect("fetched");
    assert_eq!(
        fetched.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        sum.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    let keep = [5u32, 0, 999, 5];
    let k = be.cst_to_host(&be.cst_compact(&acc, &keep).expect("compact")).expect("download");
    assert_eq!(k, keep.iter().map(|&r| sum[r as usize]).collect::<Vec<_>>());
    assert!(be.cst_compact(&acc, &[1000]).is_err(), "row out of range is an error");
}

/// A concretization added to constants in one step gives the bits of a copy,
/// the concretization and `cst_add` (NaN-free, infinities included).
pub fn concretize_add_matches_parts<B: Backend<T>, T: Fp>(be: &B) {
    let mut rng = SplitMix(23);
    let (rows, shape) = (37, Shape::new(2, 3, 5));
    let cols = shape.numel();
    let g = Geom::full(shape, rows);
    let a: Vec<T> = (0..rows * cols)
        .map(|i| if i % 7 == 0 { T::zero() } else { T::from_f64_nearest((rng.unit() - 0.5) * 4.0) })
        .collect();
    let lo: Vec<T> = (0..cols).map(|_| T::from_f64_nearest(rng.unit() - 1.0)).collect();
    let hi: Vec<T> = lo.iter().map(|&l| T::from_f64_nearest(l.to_f64_exact() + rng.unit())).collect();
    let mut base: Vec<f64> = (0..rows).map(|_| (rng.unit() - 0.5) * 1e3).collect();
    base[3] = f64::NEG_INFINITY;
    let (am, lb, hb) =
        (be.pmat_from_host(rows, cols, &a).expect("a"), be.upload(&lo).expect("lo"), be.upload(&hi).expect("hi"));
    let cb = be.cst_from_host(&base).expect("base");
    let fused = be.cst_to_host(&be.point_concretize_add(&am, &g, &lb, &hb, &cb).expect("fused")).expect("down");
    let mut sum = be.cst_dup(&cb).expect("dup");
    be.cst_add(&mut sum, &be.point_concretize(&am, &g, &lb, &hb).expect("part")).expect("add");
    let parts = be.cst_to_host(&sum).expect("down");
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&fused), bits(&parts));
    assert_eq!(fused[3], f64::NEG_INFINITY);
}
