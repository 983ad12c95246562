//! Stabilisation's case (`stabilize.rs`): intermediate bounds by search.

use super::opts;
use crate::base::analyzer::Analyzer;
use crate::base::backend::{Arith, Backend};
use crate::base::ir::Op::{Concat, Dense, Relu};
use crate::base::ir::{Network, Shape};
use crate::base::property::{Halfspace, InputBox, Property, SubProblem, Verdict};
use polycert_interval::Fp;

/// 17 inputs in `[−1, 1]`, `s = Σx`, `r = relu(s)`,
/// `q = (r − s/2 + 1/4, s/2, r − s/2 − 1/4)`, `y = Σ relu(q_i)`; no PGD.
///  `q_0 = |s|/2 + 1/4 > 0`, but DeepPoly bounds
/// it below by −8.25 (its lower line of `relu(s)` has slope 0 or 1). The
/// search on the network cut at `q` proves `q_0 > 0` (one split of
/// `relu(s)`, or α = ½), so the stabilised lower bound is 0; its upper
/// bound stays. `q_1 = s/2` is 0 at the box centre, which reaches both
/// unsafe sides: its bounds stay `[−8.5, 8.5]` (no half of them holds).
/// `q_2 = |s|/2 − 1/4` is negative at the centre, and `q_2 < 0` cannot be
/// proved: its search's leaves end with no unstable ReLU, so it is given
/// up, not counted proved, and `q_2`'s upper bound stays. As `q_2` really
/// changes sign, its lower bound (−8.75, the truth −1/4) is halved while
/// the half is proved: three times. Later nodes only narrow.
pub fn stabilize_clamps_provable_ends<B: Backend<T>, T: Fp>(be: &B) {
    let (net, q) = clamp_net();
    let (input, a) = unit_box_without_pgd::<B, T>(&net, be);
    let plain = a.node_bounds(&input, crate::base::budget::Budget::UNLIMITED).expect("bounds");
    let got = a.stabilized_node_bounds(&input, crate::base::budget::Budget::UNLIMITED).expect("stabilised bounds");
    let (l0, u0) = (plain[q].lo[0], plain[q].hi[0]);
    assert!((-8.26..=-8.25).contains(&l0) && u0 > 0.0, "DeepPoly's q_0: [{l0}, {u0}]");
    assert_eq!((got[q].lo[0], got[q].hi[0]), (0.0, u0), "q_0 is proved positive");
    let (l1, u1) = (plain[q].lo[1], plain[q].hi[1]);
    assert!((-8.51..=-8.5).contains(&l1) && (8.5..=8.51).contains(&u1), "q_1: [{l1}, {u1}]");
    assert_eq!((got[q].lo[1], got[q].hi[1]), (l1, u1), "q_1 changes sign: its bounds stay");
    let (l2, u2) = (plain[q].lo[2], plain[q].hi[2]);
    assert!((-8.76..=-8.75).contains(&l2) && u2 > 0.0, "q_2: [{l2}, {u2}]");
    assert_eq!((got[q].lo[2], got[q].hi[2]), (l2 / 8.0, u2), "q_2 changes sign: its lower bound is halved 3 times");
    for (node, (g, p)) in got.iter().zip(&plain).enumerate() {
        let inside = g.lo.iter().zip(&p.lo).all(|(a, b)| a >= b) && g.hi.iter().zip(&p.hi).all(|(a, b)| a <= b);
        assert!(inside, "node {node}: {g:?} is not within {p:?}");
    }
}

/// `Stabilize::Auto`'s last stabilisation starts from its first rung's
/// bounds: on the network above, stabilising again from the stabilised
/// bounds keeps every node within them and `q_0 ≥ 0`, and halves `q_2`'s
/// lower bound (about −8.75/8) twice more: to about −8.75/32, while the
/// half holds (`q_2 ≥ −1/4`), and not a third time (the box centre
/// reaches it).
pub fn stabilize_continues_from_its_start<B: Backend<T>, T: Fp>(be: &B) {
    let (net, q) = clamp_net();
    let (input, a) = unit_box_without_pgd::<B, T>(&net, be);
    let start = a.stable_prior(&input, crate::base::budget::Budget::UNLIMITED, None).expect("first stabilisation");
    let again =
        a.stable_prior(&input, crate::base::budget::Budget::UNLIMITED, Some(&start)).expect("second stabilisation");
    let (first, got) = (crate::base::bounds::bounds_f64(start), crate::base::bounds::bounds_f64(again));
    let l2 = first[q].lo[2];
    assert!((-1.0938..=-8.75 / 8.0).contains(&l2), "the first stabilisation halves q_2's lower bound 3 times: {l2}");
    assert_eq!((got[q].lo[0], got[q].hi[0]), (0.0, first[q].hi[0]), "q_0 stays proved positive");
    assert_eq!(got[q].lo[2], l2 / 4.0, "q_2's lower bound is halved twice more");
    assert_eq!(got[q].hi[2], first[q].hi[2], "q_2's upper bound stays");
    for (node, (g, p)) in got.iter().zip(&first).enumerate() {
        let inside = g.lo.iter().zip(&p.lo).all(|(a, b)| a >= b) && g.hi.iter().zip(&p.hi).all(|(a, b)| a <= b);
        assert!(inside, "node {node}: {g:?} is not within its start {p:?}");
    }
}

/// With a layer before `q` that gives nothing (`a = s/2` changes sign and
/// no half of its bounds holds), a stabilisation stops there, and `q`
/// keeps DeepPoly's bounds; from a start (the last of `Stabilize::Auto`'s
/// rungs) it goes on, and proves `q_0 ≥ 0`.
pub fn stabilize_from_a_start_passes_spent_layers<B: Backend<T>, T: Fp>(be: &B) {
    let n = 17;
    let mut net = Network::new(Shape::flat(n));
    let s = net.push("s", Dense { weight: vec![1.0; n], bias: vec![0.0], out: 1 }, &[0]).expect("s");
    let r = net.push("r", Relu, &[s]).expect("relu");
    let rs = net.push("rs", Concat, &[r, s]).expect("concat");
    let half = net.push("a", Dense { weight: vec![0.0, 0.5], bias: vec![0.0], out: 1 }, &[rs]).expect("a");
    let ra = net.push("ra", Relu, &[half]).expect("relu a");
    let w = vec![1.0, -0.5, 0.0, 0.5, 1.0, -0.5];
    let q = net.push("q", Dense { weight: w, bias: vec![0.25, 0.0, -0.25], out: 3 }, &[rs]).expect("q");
    let rq = net.push("rq", Relu, &[q]).expect("relu q");
    let both = net.push("both", Concat, &[ra, rq]).expect("concat 2");
    net.push("y", Dense { weight: vec![0.0, 1.0, 1.0, 1.0], bias: vec![0.0], out: 1 }, &[both]).expect("y");
    let (input, a) = unit_box_without_pgd::<B, T>(&net, be);
    let first = a.stable_prior(&input, crate::base::budget::Budget::UNLIMITED, None).expect("first stabilisation");
    let again =
        a.stable_prior(&input, crate::base::budget::Budget::UNLIMITED, Some(&first)).expect("second stabilisation");
    let (first, got) = (crate::base::bounds::bounds_f64(first), crate::base::bounds::bounds_f64(again));
    assert!(first[q].lo[0] < -8.0, "the first stops at `a`: q_0 ≥ {}", first[q].lo[0]);
    assert_eq!((first[half].lo[0], first[half].hi[0]), (got[half].lo[0], got[half].hi[0]), "a gives nothing");
    assert_eq!(got[q].lo[0], 0.0, "from a start, q_0 is proved positive");
}

/// `[−1, 1]` for every input of `net`, and an analyzer without PGD.
fn unit_box_without_pgd<'a, B: Backend<T>, T: Fp>(net: &'a Network, be: &'a B) -> (InputBox, Analyzer<'a, B, T>) {
    let n = net.input_shape().numel();
    let input = InputBox::new(vec![-1.0; n], vec![1.0; n]).expect("box");
    let no_pgd = opts(Arith::Point).with(|o| o.attack.steps = 0);
    (input, Analyzer::new(net, be, no_pgd).expect("prepare"))
}

/// The network above and its node `q`.
fn clamp_net() -> (Network, usize) {
    let n = 17;
    let mut net = Network::new(Shape::flat(n));
    let s = net.push("s", Dense { weight: vec![1.0; n], bias: vec![0.0], out: 1 }, &[0]).expect("s");
    let r = net.push("r", Relu, &[s]).expect("relu");
    let rs = net.push("rs", Concat, &[r, s]).expect("concat");
    let w = vec![1.0, -0.5, 0.0, 0.5, 1.0, -0.5];
    let q = net.push("q", Dense { weight: w, bias: vec![0.25, 0.0, -0.25], out: 3 }, &[rs]).expect("q");
    let rq = net.push("rq", Relu, &[q]).expect("relu q");
    net.push("y", Dense { weight: vec![1.0; 3], bias: vec![0.0], out: 1 }, &[rq]).expect("y");
    (net, q)
}

/// `y ≥ q_0 = |s|/2 + 1/4` on the network above, so `y > 0.2`, which
/// DeepPoly alone does not prove (its `q_0 ≥ −8.25`): every
/// `StabilizeOptions::when` proves it by search, `Auto` in its plain stage or
/// after it, `On` from the stabilised root. `y > 1` fails at the box centre
/// (`y = 1/4` there), and every mode finds that.
pub fn stabilize_modes_agree<B: Backend<T>, T: Fp>(be: &B) {
    let (net, _) = clamp_net();
    let n = net.input_shape().numel();
    let input = InputBox::new(vec![-1.0; n], vec![1.0; n]).expect("box");
    let prop = |d: f64| Property {
        name: format!("y > {d}"),
        subproblems: vec![SubProblem { input: input.clone(), unsafe_region: vec![vec![Halfspace::new(vec![1.0], d)]] }],
        label: None,
    };
    for mode in [
        crate::base::options::Stabilize::Off,
        crate::base::options::Stabilize::Auto,
        crate::base::options::Stabilize::On,
    ] {
        let o = opts(Arith::Point).with(|o| {
            o.search.stabilize.when = mode;
            o.timeout = Some(std::time::Duration::from_secs(60));
        });
        let a = Analyzer::<B, T>::new(&net, be, o).expect("prepare");
        let holds = a.analyze(&prop(0.2)).expect("y > 0.2");
        assert_eq!(holds.verdict, Verdict::Verified, "{mode:?}: y > 0.2");
        let stats = holds.search.expect("a ReLU search ran");
        assert!(stats.leaves_proved >= 1 && stats.leaves_open == 0, "{mode:?}: {stats:?}");
        let fails = a.analyze(&prop(1.0)).expect("y > 1");
        assert!(matches!(fails.verdict, Verdict::Falsified(_)), "{mode:?}: y > 1 gave {:?}", fails.verdict);
    }
}
