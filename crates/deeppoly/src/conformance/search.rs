//! The search's part of the conformance suite: input and ReLU splitting,
//! optimised slopes, and falsification inside the search.

use super::opts;
use crate::base::analyzer::Analyzer;
use crate::base::backend::{Arith, Backend};
use crate::base::ir::{Network, Shape};
use crate::base::options::Options;
use crate::base::property::{InputBox, Property, Verdict};
use polycert_interval::Fp;

/// `y = relu(x) − relu(x)` on `x ∈ [−1, 1]`, and the property `y ≤ −1/4`.
fn relu_difference() -> (Network, Property) {
    let mut net = Network::new(Shape::flat(1));
    let d1 = net.push("d1", crate::base::ir::Op::Dense { weight: vec![1.0, 1.0], bias: vec![0.0, 0.0], out: 2 }, &[0]);
    let r = net.push("r", crate::base::ir::Op::Relu, &[d1.expect("d1")]).expect("relu");
    let w2 = vec![1.0, -1.0, 0.0, 0.0];
    net.push("d2", crate::base::ir::Op::Dense { weight: w2, bias: vec![0.0, 0.0], out: 2 }, &[r]).expect("d2");
    let input = InputBox::new(vec![-1.0], vec![1.0]).expect("box");
    let mut prop = Property::robustness("p", input, 0, 2).expect("prop");
    prop.subproblems[0].unsafe_region = vec![vec![crate::base::property::Halfspace::new(vec![1.0, 0.0], -0.25)]];
    (net, prop)
}

/// `y = relu(x) − relu(x)` is 0 on `x ∈ [−1, 1]`, but one DeepPoly pass
/// bounds it below by −1: `y ≤ −1/4` is not excluded. Input splitting at 0
/// makes both ReLUs stable and proves it; a one-leaf budget leaves it open.
pub fn input_splitting_proves<B: Backend<T>, T: Fp>(be: &B) {
    let (net, prop) = relu_difference();
    let run = |o: Options| Analyzer::<B, T>::new(&net, be, o).expect("prepare").analyze(&prop).expect("analysis");
    let one_pass = run(opts(Arith::Point).with(|o| {
        o.search.split_inputs = 0;
        o.search.split_relus = false;
    }));
    assert_eq!(one_pass.verdict, Verdict::Unknown, "the test needs a property one pass cannot prove");
    assert!(one_pass.search.is_none());
    let split = run(opts(Arith::Point));
    assert_eq!(split.verdict, Verdict::Verified);
    let s = split.search.expect("search ran");
    assert!(s.leaves_proved >= 2 && s.leaves_open == 0, "{s:?}");
    let capped = run(opts(Arith::Point).with(|o| o.search.max_leaves = 1));
    assert_eq!(capped.verdict, Verdict::Unknown);
    let c = capped.search.expect("search ran");
    assert!(c.leaves_open >= 1 && c.leaf_limit == Some(1), "{c:?}");
    assert_eq!(s.leaf_limit, None, "a finished search names no limit");
    // With a deadline, the leaf limit of a search without one does not apply.
    let timed = opts(Arith::Point).with(|o| {
        o.search.max_leaves = 1;
        o.timeout = Some(std::time::Duration::from_secs(60));
    });
    let t = run(timed);
    assert_eq!(t.verdict, Verdict::Verified, "{:?}", t.search);
    assert_eq!(t.search.expect("search ran").leaf_limit, None);
}

/// A batch hands each property's outcome on as soon as its search ends:
/// `y = relu(x) − relu(x) ≤ −1/4` (see `input_splitting_proves`) three
/// times over; each needs a search, and each outcome comes out (in order)
/// before the next search's first round. `Break` from the taker stops the
/// batch: no later property is searched.
pub fn batch_streams_outcomes<B: Backend<T>, T: Fp>(be: &B) {
    let (net, prop) = relu_difference();
    let progress = std::sync::Arc::new(crate::base::progress::Progress::default());
    let o = opts(Arith::Point).with(|o| o.progress = Some(progress.clone()));
    let a = Analyzer::<B, T>::new(&net, be, o).expect("prepare");
    let props = [&prop, &prop, &prop];
    let mut seen = Vec::new();
    a.analyze_batch_each(&props, &mut |k, o| {
        let o = o.expect("analysis");
        assert_eq!(o.verdict, Verdict::Verified, "property {k}");
        assert!(o.search.is_some(), "property {k} needs a search");
        seen.push((k, progress.snapshot().rounds));
        std::ops::ControlFlow::Continue(())
    });
    let (order, rounds): (Vec<usize>, Vec<usize>) = seen.into_iter().unzip();
    assert_eq!(order, [0, 1, 2]);
    assert!(rounds[0] >= 1 && rounds[0] < rounds[1] && rounds[1] < rounds[2], "rounds when handed on: {rounds:?}");
    let before = progress.snapshot().rounds;
    let (mut taken, mut at) = (Vec::new(), 0);
    a.analyze_batch_each(&props, &mut |k, _| {
        taken.push(k);
        at = progress.snapshot().rounds;
        std::ops::ControlFlow::Break(())
    });
    assert_eq!(taken, [0], "a batch goes on after Break");
    assert!(at > before && progress.snapshot().rounds == at, "searched after Break: {at} → {:?}", progress.snapshot());
}

/// `y = relu(s) − s/2` with `s = Σ x_i` over `[−1, 1]^17` (too many inputs
/// to split them): `y = |s|/2 ≥ 0`, and the property excludes `y ≤ d`.
fn relu_minus_half<B: Backend<T>, T: Fp>(be: &B) -> impl Fn(Options, f64) -> crate::base::property::Outcome + '_ {
    let n = 17;
    let mut net = Network::new(Shape::flat(n));
    // s = Σ x; y = relu(s)·(1, 0) + s·(−1/2, 0) (no Concat: every layer
    // runs on the backends' batched relaxed bound too).
    use crate::base::ir::Op::{Add, Dense, Relu};
    let s = net.push("s", Dense { weight: vec![1.0; n], bias: vec![0.0], out: 1 }, &[0]).expect("s");
    let r = net.push("r", Relu, &[s]).expect("relu");
    let a = net.push("a", Dense { weight: vec![1.0, 0.0], bias: vec![0.0; 2], out: 2 }, &[r]).expect("a");
    let b = net.push("b", Dense { weight: vec![-0.5, 0.0], bias: vec![0.0; 2], out: 2 }, &[s]).expect("b");
    net.push("y", Add, &[a, b]).expect("y");
    let input = InputBox::new(vec![-1.0; n], vec![1.0; n]).expect("box");
    move |o: Options, d: f64| {
        let mut p = Property::robustness("p", input.clone(), 0, 2).expect("prop");
        p.subproblems[0].unsafe_region = vec![vec![crate::base::property::Halfspace::new(vec![1.0, 0.0], d)]];
        Analyzer::<B, T>::new(&net, be, o).expect("prepare").analyze(&p).expect("analysis")
    }
}

/// `y = relu(s) − s/2` (see `relu_minus_half`): one pass with DeepPoly's
/// slopes bounds it below by −8.5, so `y ≤ −1/4` is not excluded.
/// Splitting the ReLU of `s` proves it (both sides are exact); `y ≤ 0`
/// holds at `s = 0` and is never verified.
pub fn relu_splitting_proves<B: Backend<T>, T: Fp>(be: &B) {
    let n = 17;
    let run = relu_minus_half(be);
    let fixed = opts(Arith::Point).with(|o| o.crown.optimize_slopes = false);
    let one_pass = run(fixed.clone().with(|o| o.search.split_relus = false), -0.25);
    assert_eq!(one_pass.verdict, Verdict::Unknown, "the test needs a property one pass cannot prove");
    assert!(one_pass.lower_bounds[0] < -8.0, "{:?}", one_pass.lower_bounds);
    let progress = std::sync::Arc::new(crate::base::progress::Progress::default());
    let split = run(fixed.clone().with(|o| o.progress = Some(progress.clone())), -0.25);
    assert_eq!(split.verdict, Verdict::Verified);
    let s = split.search.expect("search ran");
    assert!(s.leaves_proved == 2 && s.leaves_open == 0, "{s:?}");
    // Both sides are exact, y = |s|/2 ≥ 0: each closes y ≤ −1/4 by 1/4.
    assert!(s.best_bound > 0.25 - 1e-5 && s.best_bound <= 0.25, "{s:?}");
    // The progress line saw the search: its root, its two leaves, its end.
    let p = progress.snapshot();
    assert!(!p.searching && p.rounds >= 3 && p.leaves_proved == 2 && p.leaves_open == 0, "{p:?}");
    // y = |s|/2 meets y ≤ 0 at s = 0 exactly: a counterexample.
    let tie = run(fixed.clone(), 0.0);
    assert!(matches!(tie.verdict, Verdict::Falsified(_)), "{:?}", tie.verdict);
    let capped = run(fixed.clone().with(|o| o.search.max_relu_leaves = 1), -0.25);
    assert_eq!(capped.verdict, Verdict::Unknown);
    // Its two open children count with their parent's bound, the root's.
    let c = capped.search.expect("search ran");
    assert!((c.best_bound - one_pass.lower_bounds[0]).abs() < 1e-9, "{c:?} against {:?}", one_pass.lower_bounds);
    // y = relu(s) − relu(s'), s' = s another neuron: the leaf s ≤ 0 ≤ s'
    // needs the split constraints in the bound (β on s cancels s').
    let mut twin = Network::new(Shape::flat(n));
    let d = twin.push("d", crate::base::ir::Op::Dense { weight: vec![1.0; 2 * n], bias: vec![0.0; 2], out: 2 }, &[0]);
    let r = twin.push("r", crate::base::ir::Op::Relu, &[d.expect("d")]).expect("relu");
    let w = vec![1.0, -1.0, 0.0, 0.0];
    twin.push("y", crate::base::ir::Op::Dense { weight: w, bias: vec![0.0, 0.0], out: 2 }, &[r]).expect("y");
    let input = InputBox::new(vec![-1.0; n], vec![1.0; n]).expect("box");
    let mut prop = Property::robustness("p", input, 0, 2).expect("prop");
    prop.subproblems[0].unsafe_region = vec![vec![crate::base::property::Halfspace::new(vec![1.0, 0.0], -0.25)]];
    let got = Analyzer::<B, T>::new(&twin, be, fixed).expect("prepare").analyze(&prop);
    let got = got.expect("analysis");
    assert_eq!(got.verdict, Verdict::Verified, "{:?}", got.search);
    assert_eq!(got.search.expect("search ran").leaves_proved, 3);
}

/// `y = relu(s) − s/2` (see `relu_minus_half`): optimised slopes prove
/// `y > −1/4` in one analysis, with no search (the slope ½ gives the exact
/// minimum 0), and falsify the tie `y ≤ 0` (met exactly at the centre).
pub fn optimised_slopes_prove<B: Backend<T>, T: Fp>(be: &B) {
    let run = relu_minus_half(be);
    let one = opts(Arith::Point).with(|o| o.search.split_relus = false);
    let got = run(one.clone(), -0.25);
    assert_eq!(got.verdict, Verdict::Verified, "{:?}", got.lower_bounds);
    assert!(got.lower_bounds[0] > 0.0 && got.search.is_none(), "{:?}", got.lower_bounds);
    let no_alpha = run(one.clone().with(|o| o.crown.optimize_slopes = false), -0.25);
    assert!(no_alpha.lower_bounds[0] < -8.0, "{:?}", no_alpha.lower_bounds);
    for o in [one, opts(Arith::Point)] {
        // The centre s = 0 gives y = 0 exactly in float32: a counterexample.
        let tie = run(o, 0.0);
        assert!(matches!(tie.verdict, Verdict::Falsified(_)), "{:?}", tie.verdict);
        assert!(tie.lower_bounds.iter().all(|&l| l <= 0.0), "{:?}", tie.lower_bounds);
    }
}

/// `y = relu(s)`, `s = Σ x_i` over `[−1, 1]^17`, reaches 17 only at the
/// all-ones corner; `y ≥ 16.5` is unsafe. With no attack and a centre at
/// `y = 0`, only the search finds it: the leaf `s ≥ 0` has no unstable ReLU
/// left (`y = s` exactly) and the corner minimising its bound is a
/// counterexample. Without it the search stops open.
pub fn exact_leaf_corner_falsifies<B: Backend<T>, T: Fp>(be: &B) {
    let n = 17;
    let mut net = Network::new(Shape::flat(n));
    let s =
        net.push("s", crate::base::ir::Op::Dense { weight: vec![1.0; n], bias: vec![0.0], out: 1 }, &[0]).expect("s");
    let r = net.push("r", crate::base::ir::Op::Relu, &[s]).expect("relu");
    net.push("y", crate::base::ir::Op::Dense { weight: vec![1.0, 0.0], bias: vec![0.0, 0.0], out: 2 }, &[r])
        .expect("y");
    let input = InputBox::new(vec![-1.0; n], vec![1.0; n]).expect("box");
    let mut p = Property::robustness("p", input, 0, 2).expect("prop");
    p.subproblems[0].unsafe_region = vec![vec![crate::base::property::Halfspace::new(vec![-1.0, 0.0], -16.5)]];
    let o = opts(Arith::Point).with(|o| o.attack.steps = 0);
    let got = Analyzer::<B, T>::new(&net, be, o).expect("prepare").analyze(&p).expect("analysis");
    let Verdict::Falsified(c) = got.verdict else { panic!("{:?} {:?}", got.verdict, got.search) };
    assert!(c.input.iter().all(|&v| v == 1.0), "{:?}", c.input);
}

/// `y = 1 − relu(s − 15)`, `s = Σ x_i` over `[−1, 1]^17`: flat at the
/// centre, so PGD from there steps every input down (a zero gradient) and
/// never leaves `y = 1`; `y ≤ 0` needs `s ≥ 16`. The root leaf's relaxed
/// bound is least at the all-ones corner (`y = −1`): the search's corner
/// attack finds it in its first round (a budget of one leaf), before any
/// split; without the search, or without attacks, it stays unknown.
pub fn corner_attack_falsifies<B: Backend<T>, T: Fp>(be: &B) {
    let n = 17;
    let mut net = Network::new(Shape::flat(n));
    let s =
        net.push("s", crate::base::ir::Op::Dense { weight: vec![1.0; n], bias: vec![-15.0], out: 1 }, &[0]).expect("s");
    let r = net.push("r", crate::base::ir::Op::Relu, &[s]).expect("relu");
    net.push("y", crate::base::ir::Op::Dense { weight: vec![-1.0, 0.0], bias: vec![1.0, 0.0], out: 2 }, &[r])
        .expect("y");
    let input = InputBox::new(vec![-1.0; n], vec![1.0; n]).expect("box");
    let mut p = Property::robustness("p", input, 0, 2).expect("prop");
    p.subproblems[0].unsafe_region = vec![vec![crate::base::property::Halfspace::new(vec![1.0, 0.0], 0.0)]];
    let run = |o: Options| Analyzer::<B, T>::new(&net, be, o).expect("prepare").analyze(&p).expect("analysis");
    let one_leaf = opts(Arith::Point).with(|o| o.search.max_relu_leaves = 1);
    let got = run(one_leaf.clone());
    let Verdict::Falsified(c) = got.verdict else { panic!("{:?} {:?}", got.verdict, got.search) };
    assert!(c.input.iter().map(|&v| v as f64).sum::<f64>() >= 16.0, "{:?}", c.input);
    assert!(c.output[0] <= 0.0, "{:?}", c.output);
    assert_eq!(run(one_leaf.clone().with(|o| o.search.split_relus = false)).verdict, Verdict::Unknown);
    assert_eq!(run(one_leaf.with(|o| o.attack.steps = 0)).verdict, Verdict::Unknown);
}

/// `y = 1 − 64·relu(x_0 − 15/16)` over `[−1, 1]²`: `y ≤ 0` only where
/// `x_0 ≥ 0.953125`, a sliver of 2.3% of the range. PGD from the centre
/// meets a zero gradient and walks to `x_0 = −1`; a random start with
/// `x_0 > 15/16` climbs to the face. The input search's first round (a
/// budget of one leaf) runs its restarts; without the search, or without
/// attacks, the property stays unknown.
pub fn restarts_falsify_a_sliver<B: Backend<T>, T: Fp>(be: &B) {
    use crate::base::ir::Op::{Dense, Relu};
    let mut net = Network::new(Shape::flat(2));
    let s = net.push("s", Dense { weight: vec![1.0, 0.0], bias: vec![-0.9375], out: 1 }, &[0]).expect("s");
    let r = net.push("r", Relu, &[s]).expect("relu");
    net.push("y", Dense { weight: vec![-64.0, 0.0], bias: vec![1.0, 0.0], out: 2 }, &[r]).expect("y");
    let input = InputBox::new(vec![-1.0; 2], vec![1.0; 2]).expect("box");
    let mut p = Property::robustness("p", input, 0, 2).expect("prop");
    p.subproblems[0].unsafe_region = vec![vec![crate::base::property::Halfspace::new(vec![1.0, 0.0], 0.0)]];
    let run = |o: Options| Analyzer::<B, T>::new(&net, be, o).expect("prepare").analyze(&p).expect("analysis");
    let one_leaf = opts(Arith::Point).with(|o| o.search.max_leaves = 1);
    let got = run(one_leaf.clone());
    let Verdict::Falsified(c) = got.verdict else { panic!("{:?} {:?}", got.verdict, got.search) };
    assert!(c.input[0] as f64 >= 0.953125, "{:?}", c.input);
    assert!(c.output[0] <= 0.0, "{:?}", c.output);
    let s = got.search.expect("search ran");
    assert_eq!((s.branching, s.leaves_proved), ("input", 0), "{s:?}");
    assert_eq!(
        run(one_leaf.clone().with(|o| {
            o.search.split_inputs = 0;
            o.search.split_relus = false;
        }))
        .verdict,
        Verdict::Unknown
    );
    assert_eq!(run(one_leaf.with(|o| o.attack.steps = 0)).verdict, Verdict::Unknown);
}

/// `y = q − relu(q)` with `q = relu(s) − s/2 = |s|/2`, `s = Σ x_i` over
/// `[−1, 1]^17`: `y = 0`. DeepPoly bounds `q` below by −8.5, so `relu(q)`
/// looks unstable and `y` is bounded below by −4.25 at best (slopes of the
/// output row only: `relu(q)` enters through its upper line). Per-neuron
/// slopes for `q`'s lower end (½ on `relu(s)`) make `q ≥ −ε`, and the root
/// leaf proves `y ≤ −1` infeasible before any split.
pub fn intermediate_slopes_prove<B: Backend<T>, T: Fp>(be: &B) {
    use crate::base::ir::Op::{Concat, Dense, Relu};
    let n = 17;
    let mut net = Network::new(Shape::flat(n));
    let s = net.push("s", Dense { weight: vec![1.0; n], bias: vec![0.0], out: 1 }, &[0]).expect("s");
    let r = net.push("r", Relu, &[s]).expect("relu");
    let rs = net.push("rs", Concat, &[r, s]).expect("concat");
    let q = net.push("q", Dense { weight: vec![1.0, -0.5], bias: vec![0.0], out: 1 }, &[rs]).expect("q");
    let rq = net.push("rq", Relu, &[q]).expect("relu q");
    let both = net.push("both", Concat, &[q, rq]).expect("concat q");
    net.push("y", Dense { weight: vec![1.0, -1.0, 0.0, 0.0], bias: vec![0.0; 2], out: 2 }, &[both]).expect("y");
    let input = InputBox::new(vec![-1.0; n], vec![1.0; n]).expect("box");
    let mut p = Property::robustness("p", input, 0, 2).expect("prop");
    p.subproblems[0].unsafe_region = vec![vec![crate::base::property::Halfspace::new(vec![1.0, 0.0], -1.0)]];
    let run = |o: Options| Analyzer::<B, T>::new(&net, be, o).expect("prepare").analyze(&p).expect("analysis");
    let one_leaf = opts(Arith::Point).with(|o| {
        o.search.max_relu_leaves = 1;
        o.attack.steps = 0;
        o.search.optimize_intermediate = true;
    });
    let got = run(one_leaf.clone());
    assert_eq!(got.verdict, Verdict::Verified, "{:?}", got.search);
    let s = got.search.expect("search ran");
    assert_eq!((s.leaves_proved, s.leaves_open), (1, 0), "{s:?}");
    let plain = run(one_leaf.clone().with(|o| o.search.optimize_intermediate = false));
    assert_eq!(plain.verdict, Verdict::Unknown, "{:?}", plain.search);
    assert_eq!(run(one_leaf.with(|o| o.search.split_relus = false)).verdict, Verdict::Unknown);
}

/// `y = relu(q)` with `q = relu(s) − s/2` and `s = x` (one input): the
/// network of the refinement cases below, with the nodes `[s, r, q]`
/// (`r = relu(s)`).
fn refinement_net() -> (Network, [crate::base::ir::NodeId; 3]) {
    use crate::base::ir::Op::{Concat, Dense, Relu};
    let mut net = Network::new(Shape::flat(1));
    let s = net.push("s", Dense { weight: vec![1.0], bias: vec![0.0], out: 1 }, &[0]).expect("s");
    let r = net.push("r", Relu, &[s]).expect("relu");
    let rs = net.push("rs", Concat, &[r, s]).expect("concat");
    let q = net.push("q", Dense { weight: vec![1.0, -0.5], bias: vec![0.0], out: 1 }, &[rs]).expect("q");
    let rq = net.push("rq", Relu, &[q]).expect("relu q");
    net.push("y", Dense { weight: vec![1.0], bias: vec![0.0], out: 1 }, &[rq]).expect("y");
    (net, [s, r, q])
}

/// Refinement with a layer's slope tables (`Within::inter`, what a search's
/// leaves inherit from its root): `q = relu(s) − s/2` over `s ∈ [−1, 1]`.
/// The relaxation's own lower slope 0 on `relu(s)` gives `q ≥ −½`; the
/// table's ½ gives `q ≥ 0`. The upper end pays `relu(s)`'s upper line, so
/// its table changes nothing: `q ≤ ½` either way. A slot without tables in the same batch keeps `−½`, and
/// afterwards the ReLU's lower slopes are the relaxation's own again.
pub fn refinement_uses_layer_slopes<B: Backend<T>, T: Fp>(be: &B) {
    use crate::gpupoly::forward::Step;
    let (net, [s, r, q]) = refinement_net();
    let input = InputBox::new(vec![-1.0], vec![1.0]).expect("box");
    let a = Analyzer::<B, T>::new(&net, be, opts(Arith::Point)).expect("prepare");
    let mut half: crate::base::relax::Slopes = vec![Vec::new(); net.nodes().len()];
    half[r] = vec![0.5];
    let mut inter: crate::base::relax::LayerSlopes = vec![[None, None]; net.nodes().len()];
    inter[q] = [Some(half.clone()), Some(half)];
    let mut st = a.forward_pass(&[&input, &input]).expect("forward");
    a.refine_all(&mut st, &[0, 1], &[], &[Some(&inter), None], None, crate::base::budget::Budget::UNLIMITED)
        .expect("refine");
    let (lo, hi) = (&st.bounds[q].lo, &st.bounds[q].hi);
    let f = |v: T| v.to_f64_exact();
    assert!((-1e-5..=0.0).contains(&f(lo[0])), "with the table: q ≥ {}", f(lo[0]));
    assert!((-0.5 - 1e-5..=-0.5).contains(&f(lo[1])), "without: q ≥ {}", f(lo[1]));
    for h in hi.iter().map(|&v| f(v)) {
        assert!((0.5..=0.5 + 1e-5).contains(&h), "q ≤ {h}");
    }
    let Step::Relu { lam_lo, .. } = &st.steps[r] else { panic!("relu step") };
    let got = be.download(lam_lo).expect("download");
    let b = &st.bounds[s];
    for (k, &g) in got.iter().enumerate() {
        assert_eq!(g, crate::base::relax::relu_relax(b.lo[k], b.hi[k], a.opts.passes.relu_lower).lam_lo, "slot {k}");
    }
}

/// The refinement gate (`gate.rs`): with `q = relu(s) − s/2` over
/// `s ∈ [−1, 1]`, refinement bounds `q ≤ ½`. A leaf slot (one with `after`)
/// keeps its forward bound on `q` while the gate has closed `q`'s layer; the
/// root slot beside it is refined all the same, and the gate's probe
/// refines the leaf too and measures it.
pub fn gated_leaves_skip_a_layer<B: Backend<T>, T: Fp>(be: &B) {
    use crate::bab::gate::RefineGate;
    use crate::gpupoly::passes::LayerGate;
    let crate::base::options::GateOptions { warmup, probe_every, .. } = Default::default();
    let (net, [s, _, q]) = refinement_net();
    let input = InputBox::new(vec![-1.0], vec![1.0]).expect("box");
    let a = Analyzer::<B, T>::new(&net, be, opts(Arith::Point)).expect("prepare");
    let after = [None, Some(s)];
    let f = |v: T| v.to_f64_exact();
    let closed = RefineGate::default();
    for _ in 0..warmup {
        closed.record(q, 100, 0, 1.0, 1.0);
    }
    let mut st = a.forward_pass(&[&input, &input]).expect("forward");
    let before = f(st.bounds[q].hi[1]);
    assert!(before > 0.6, "the forward pass alone: q ≤ {before}");
    a.refine_all(&mut st, &[0, 1], &after, &[], Some(&closed), crate::base::budget::Budget::UNLIMITED).expect("refine");
    let hi: Vec<f64> = st.bounds[q].hi.iter().map(|&v| f(v)).collect();
    assert!((0.5..=0.5 + 1e-5).contains(&hi[0]), "root refined: q ≤ {}", hi[0]);
    assert_eq!(hi[1], before, "gated leaf keeps its forward bound");
    // A closed layer's probe (every probe_every-th round, the skip above
    // being the first) refines the leaf and measures it: narrowed from
    // [−½, ≥0.6] to [−½, ½], the average gain passes min_gain and the
    // layer opens again.
    for _ in 2..probe_every {
        assert!(!closed.open(q));
    }
    let mut st = a.forward_pass(&[&input, &input]).expect("forward");
    a.refine_all(&mut st, &[0, 1], &after, &[], Some(&closed), crate::base::budget::Budget::UNLIMITED).expect("refine");
    let hi = f(st.bounds[q].hi[1]);
    assert!((0.5..=0.5 + 1e-5).contains(&hi), "probe: leaf refined, q ≤ {hi}");
    assert!(closed.open(q), "the probe's gain reopens the layer");
}

/// A random 24-40-40-40-5 MLP (`seed`) and the robustness of its label at
/// a random point over the box of radius `eps` around it.
fn mlp_robustness(seed: u64, eps: f64) -> (Network, Property) {
    let mut rng = crate::base::rng::SplitMix(seed);
    let net = crate::testnets::random_mlp(&mut rng, &[24, 40, 40, 40, 5]);
    let c: Vec<f64> = (0..24).map(|_| rng.unit()).collect();
    let y = crate::base::eval::eval::<f64>(&net, &c);
    let label = (0..y.len()).max_by(|&i, &j| y[i].total_cmp(&y[j])).expect("outputs");
    let input = InputBox::new(c.iter().map(|v| v - eps).collect(), c.iter().map(|v| v + eps).collect()).expect("box");
    let prop = Property::robustness("p", input, label, y.len()).expect("prop");
    (net, prop)
}

/// The α/β search's host evaluators agree: on a random MLP whose box is not
/// robust, a search of about 100 leaves (64 a round, so `RelaxedOn::HostRows`
/// batches their rows) ends with the same counterexample row by row and in
/// batches, after as many leaves (the same search up to summation order).
pub fn host_rows_search_agrees<B: Backend<T>, T: Fp>(be: &B) {
    let (net, prop) = mlp_robustness(31, 0.02);
    let run = |on| {
        let o = opts(Arith::Point).with(|o| {
            o.crown.relaxed_on = on;
            o.passes.batch = Some(64);
            o.search.max_relu_leaves = 2000;
            o.attack.steps = 0;
            // One worker: the same search, leaf for leaf.
            o.search.workers = Some(1);
        });
        Analyzer::<B, T>::new(&net, be, o).expect("prepare").analyze(&prop).expect("analysis")
    };
    let (h, r) = (run(crate::base::options::RelaxedOn::Host), run(crate::base::options::RelaxedOn::HostRows));
    let (hs, rs) = (h.search.expect("search ran"), r.search.expect("search ran"));
    assert!(matches!(h.verdict, Verdict::Falsified(_)), "{:?} {hs:?}", h.verdict);
    assert_eq!(h.verdict, r.verdict);
    assert!(hs.leaves_proved >= 64, "the search needs full rounds: {hs:?}");
    assert!(hs.leaves_proved.abs_diff(rs.leaves_proved) * 10 <= hs.leaves_proved, "{hs:?} against {rs:?}");
}

/// Search workers (`workers.rs`) reach the single worker's verdicts: on a
/// random MLP, a robust box that a search of about 260 leaves proves (8 a
/// round, so both workers take part) is proved with two, and a leaf budget
/// leaves it open with its open leaves counted and their weakest bound;
/// leaves past the search memory keep only their root's bounds.
pub fn search_workers_agree<B: Backend<T>, T: Fp>(be: &B) {
    let (net, prop) = mlp_robustness(7, 0.065);
    let run = |workers, leaves| {
        let o = opts(Arith::Point).with(|o| {
            o.passes.batch = Some(8);
            o.search.max_relu_leaves = leaves;
            o.search.workers = Some(workers);
        });
        let r = Analyzer::<B, T>::new(&net, be, o).expect("prepare").analyze(&prop).expect("analysis");
        let s = r.search.expect("search ran");
        (r.verdict, s)
    };
    let (one, s1) = run(1, 4000);
    assert_eq!(one, Verdict::Verified, "{s1:?}");
    assert!(s1.leaves_proved >= 64 && s1.leaves_open == 0, "the test needs many rounds: {s1:?}");
    let (two, s2) = run(2, 4000);
    assert_eq!(two, Verdict::Verified, "{s2:?}");
    assert!(s2.leaves_proved >= 64 && s2.leaves_open == 0, "{s2:?}");
    let (capped, s3) = run(2, 40);
    assert_eq!(capped, Verdict::Unknown, "{s3:?}");
    assert!(s3.leaves_open >= 1 && s3.leaves_proved < s1.leaves_proved, "{s3:?}");
    // Proved: the smallest margin a leaf closed by; open: its open leaves'
    // weakest bound, no better than the one a full search starts from.
    assert!(s1.best_bound > 0.0 && s2.best_bound > 0.0, "{s1:?} {s2:?}");
    assert!(s3.best_bound <= 0.0 && s3.best_bound.is_finite(), "{s3:?}");
    // A search that analyses no leaf reports its roots (one per disjunct)
    // with the bounds of the analysis before it, not with −∞.
    let o = opts(Arith::Point).with(|o| {
        o.search.max_relu_leaves = 0;
        o.search.workers = Some(2);
    });
    let r = Analyzer::<B, T>::new(&net, be, o).expect("prepare").analyze(&prop).expect("analysis");
    let s0 = r.search.expect("search ran");
    let roots = crate::base::property::weakest(&prop.subproblems[0].unsafe_region, &r.lower_bounds);
    assert!(s0.leaves_proved == 0 && s0.leaves_open == 4 && roots.is_finite() && roots <= 0.0, "{s0:?} {r:?}");
    assert_eq!(s0.best_bound, roots, "{s0:?}");
    // With no search memory, every child keeps only its root's bounds,
    // with all its splits clamped in: looser, and still proved.
    let o = opts(Arith::Point).with(|o| {
        o.passes.batch = Some(8);
        o.search.memory = Some(0);
        o.search.workers = Some(2);
    });
    let r = Analyzer::<B, T>::new(&net, be, o).expect("prepare").analyze(&prop).expect("analysis");
    let sm = r.search.expect("search ran");
    assert_eq!(r.verdict, Verdict::Verified, "{sm:?}");
    assert!(sm.leaves_from_root > 0 && sm.leaves_from_root + 4 >= sm.leaves_proved, "{sm:?} against {s1:?}");
    // A box that is not robust is not proved so either: its search, with no
    // attack, ends at a leaf's corner.
    let (fragile, not_robust) = mlp_robustness(31, 0.02);
    let o = opts(Arith::Point).with(|o| {
        o.attack.steps = 0;
        o.search.max_relu_leaves = 2000;
        o.search.memory = Some(0);
    });
    let r = Analyzer::<B, T>::new(&fragile, be, o).expect("prepare").analyze(&not_robust).expect("analysis");
    assert!(matches!(r.verdict, Verdict::Falsified(_)), "{:?} {:?}", r.verdict, r.search);
    assert!(r.search.expect("search ran").leaves_from_root > 0, "{:?}", r.search);
    // The α/β clock counts the host as shared while the workers run, and
    // after them as `Options::host_shared` says.
    for host_shared in [false, true] {
        let o = opts(Arith::Point).with(|o| {
            o.passes.batch = Some(8);
            o.search.workers = Some(2);
            o.host_shared = host_shared;
        });
        let an = Analyzer::<B, T>::new(&net, be, o).expect("prepare");
        assert_eq!(an.relaxed_clock.borrow().shared, host_shared);
        assert_eq!(an.analyze(&prop).expect("analysis").verdict, Verdict::Verified);
        assert_eq!(an.relaxed_clock.borrow().shared, host_shared);
    }
}
