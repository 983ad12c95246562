//! Conformance of the attack: attack-first against the default order,
//! batched inference and input gradients against the host, and
//! counterexamples only gradient steps reach.

use super::{opts, random_box, robust_label};
use crate::base::analyzer::Analyzer;
use crate::base::backend::{Arith, Backend};
use crate::base::ir::{Network, Shape};
use crate::base::options::Options;
use crate::base::property::{InputBox, Property, Verdict};
use crate::base::rng::SplitMix;
use crate::testnets::{
    random_bn_pool, random_maxpool, random_mlp, random_pool_concat, random_resnet, random_sigmoid_mlp,
};
use polycert_interval::Fp;

/// Attacking before the analysis finds every counterexample the default
/// order finds, and never one for a property the analysis verifies.
pub fn attack_first_consistent<B: Backend<T>, T: Fp>(be: &B, arith: Arith) {
    let mut rng = SplitMix(23);
    let (mut verified, mut falsified) = (0, 0);
    for k in 0..16 {
        let net = match k % 2 {
            0 => random_mlp(&mut rng, &[6, 16, 16, 4]),
            _ => random_resnet(&mut rng, Shape::new(1, 6, 6), 2, 3),
        };
        let n_in = net.input_shape().numel();
        let input = random_box(&mut rng, n_in, 0.01 * (1 + k % 4) as f64);
        let prop = Property::robustness("p", input.clone(), robust_label(&net, &input), net.output_shape().numel())
            .expect("prop");
        let after = Analyzer::<B, T>::new(&net, be, opts(arith)).expect("prepare").analyze(&prop).expect("run");
        let first = Analyzer::<B, T>::new(&net, be, opts(arith).with(|o| o.attack.first = true))
            .expect("prepare")
            .analyze(&prop)
            .expect("run");
        let fals = |v: &Verdict| matches!(v, Verdict::Falsified(_));
        assert!(!(after.verdict == Verdict::Verified && fals(&first.verdict)), "net {k}: verified and falsified");
        assert!(!fals(&after.verdict) || fals(&first.verdict), "net {k}: attack-first missed a counterexample");
        verified += (after.verdict == Verdict::Verified) as usize;
        falsified += fals(&first.verdict) as usize;
    }
    assert!(verified >= 1 && falsified >= 1, "weak test: {verified} verified, {falsified} falsified");
}

/// Input gradients on the backend against central finite differences of
/// the host's f64 inference (not the attack's own backward pass), on every
/// layer kind: dense, conv, ReLU, σ, residual Add, Concat, max and average
/// pooling, BatchNormalization's per-channel affine. A coordinate whose
/// one-sided differences disagree (a kink within the step) is skipped;
/// most must be compared.
pub fn gradients_match_finite_differences<B: Backend<T>, T: Fp>(be: &B) {
    let mut rng = SplitMix(37);
    let tol = if std::mem::size_of::<T>() == 4 { 1e-3 } else { 1e-6 };
    let (mut compared, mut skipped) = (0usize, 0usize);
    for k in 0..6 {
        let net = match k {
            0 => random_bn_pool(&mut rng, Shape::new(1, 8, 8), 3, 3),
            1 => random_maxpool(&mut rng, Shape::new(1, 8, 8), 2, 3),
            2 => random_pool_concat(&mut rng, Shape::new(2, 6, 6), 3, 4),
            3 => random_resnet(&mut rng, Shape::new(2, 6, 6), 3, 4),
            4 => random_sigmoid_mlp(&mut rng, &[5, 12, 9, 4]),
            _ => random_mlp(&mut rng, &[5, 12, 9, 4]),
        };
        let (n_in, n_out) = (net.input_shape().numel(), net.output_shape().numel());
        // Points exact in `T`, so that backend and host differ only in sums.
        let x: Vec<f64> = (0..n_in).map(|_| T::from_f64_nearest(rng.weight(1.0)).to_f64_exact()).collect();
        let seed: Vec<f64> = (0..n_out).map(|_| rng.weight(1.0)).collect();
        let a = Analyzer::<B, T>::new(&net, be, Options::default()).expect("prepare");
        let g = a.input_gradients(&x, &seed, 1).expect("gradients");
        let f =
            |x: &[f64]| -> f64 { crate::base::eval::eval::<f64>(&net, x).iter().zip(&seed).map(|(y, s)| y * s).sum() };
        let h = 1e-6;
        let (f0, scale) = (f(&x), 1.0 + g.iter().fold(0.0f64, |m, v| m.max(v.abs())));
        for i in 0..n_in {
            let mut xp = x.clone();
            xp[i] += h;
            let up = (f(&xp) - f0) / h;
            xp[i] = x[i] - h;
            let down = (f0 - f(&xp)) / h;
            if (up - down).abs() > 1e-4 * scale {
                skipped += 1;
                continue;
            }
            let fd = (up + down) / 2.0;
            assert!((g[i] - fd).abs() <= tol * scale, "net {k} input {i}: gradient {} vs finite difference {fd}", g[i]);
            compared += 1;
        }
        assert!(g.iter().any(|&v| v != 0.0), "net {k}: a zero gradient tests nothing");
    }
    assert!(compared >= 10 * skipped.max(1), "weak test: {compared} compared, {skipped} skipped");
}

/// Batched inference and input gradients on the backend equal the host's
/// f64 reference at random points, for every kind of test net.
pub fn inference_matches_host<B: Backend<T>, T: Fp>(be: &B) {
    let mut rng = SplitMix(31);
    let tol = if std::mem::size_of::<T>() == 4 { 1e-4 } else { 1e-10 };
    for k in 0..10 {
        let net = match k % 5 {
            0 => random_mlp(&mut rng, &[5, 12, 9, 4]),
            1 => random_resnet(&mut rng, Shape::new(2, 6, 6), 3, 4),
            2 => random_pool_concat(&mut rng, Shape::new(2, 6, 6), 3, 4),
            3 => random_maxpool(&mut rng, Shape::new(1, 8, 8), 2, 3),
            _ => random_sigmoid_mlp(&mut rng, &[5, 12, 9, 4]),
        };
        let (n_in, n_out, p) = (net.input_shape().numel(), net.output_shape().numel(), 5);
        let xs: Vec<f64> = (0..p * n_in).map(|_| rng.weight(1.0)).collect();
        let seeds: Vec<f64> = (0..p * n_out).map(|_| rng.weight(1.0)).collect();
        let a = Analyzer::<B, T>::new(&net, be, Options::default()).expect("prepare");
        let ys = a.infer_outputs(&xs, p).expect("infer");
        let gs = a.input_gradients(&xs, &seeds, p).expect("gradients");
        // Inputs are rounded to T first: the reference runs at those points.
        let xt: Vec<f64> = xs.iter().map(|&v| T::from_f64_nearest(v).to_f64_exact()).collect();
        for pt in 0..p {
            let vals = crate::base::eval::eval_all::<f64>(&net, &xt[pt * n_in..(pt + 1) * n_in]);
            let y = &vals[net.output()];
            let g = crate::attack::check::reference_gradient(&net, &vals, &seeds[pt * n_out..(pt + 1) * n_out]);
            let scale = 1.0 + y.iter().chain(&g).fold(0.0f64, |m, v| m.max(v.abs()));
            for (o, &yo) in y.iter().enumerate() {
                let got = ys[pt * n_out + o];
                assert!((got - yo).abs() <= tol * scale, "net {k} point {pt} output {o}: {got} vs {yo}");
            }
            for (i, &gi) in g.iter().enumerate() {
                let got = gs[pt * n_in + i];
                assert!((got - gi).abs() <= tol * scale, "net {k} point {pt} gradient {i}: {got} vs {gi}");
            }
            assert!(g.iter().any(|&v| v != 0.0), "net {k}: a zero gradient tests nothing");
        }
    }
}

/// The batched attack finds counterexamples that only gradient steps
/// reach (the box centre is safe), confirmed in float32, and leaves the
/// robust properties of the same batch verified.
pub fn attack_finds_hidden_counterexamples<B: Backend<T>, T: Fp>(be: &B) {
    // y0 = x, y1 = 0.5: label 0 fails exactly for x < 0.5.
    let mut net = Network::new(Shape::flat(1));
    let dense = crate::base::ir::Op::Dense { weight: vec![1.0, 0.0], bias: vec![0.0, 0.5], out: 2 };
    net.push("d", dense, &[0]).expect("net");
    let boxes = [(0.4, 1.0), (0.6, 1.0), (0.45, 0.9), (0.49, 0.8), (0.55, 0.7)];
    let props: Vec<Property> = boxes
        .iter()
        .map(|&(l, h)| Property::robustness("p", InputBox::new(vec![l], vec![h]).expect("box"), 0, 2).expect("prop"))
        .collect();
    let refs: Vec<&Property> = props.iter().collect();
    for attack_first in [false, true] {
        let a = Analyzer::<B, T>::new(&net, be, Options::default().with(|o| o.attack.first = attack_first))
            .expect("prepare");
        let out = a.analyze_batch(&refs);
        for (((l, h), o), p) in boxes.iter().zip(out).zip(&props) {
            let o = o.expect("analysis");
            match o.verdict {
                Verdict::Falsified(cex) => {
                    assert!(*l < 0.5, "box [{l}, {h}] is robust");
                    let x = cex.input[0] as f64;
                    assert!(x >= *l && x <= *h && cex.output[0] <= cex.output[1], "{cex:?}");
                    assert!(crate::attack::check::check_f32(&net, &p.subproblems[0], &cex.input).is_some());
                }
                Verdict::Verified => assert!(*l > 0.5, "box [{l}, {h}] verified"),
                v => panic!("box [{l}, {h}] (attack_first {attack_first}): {v:?}"),
            }
        }
    }
}
