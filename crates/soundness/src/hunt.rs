//! The adversarial soundness hunt (issue 11): on random and hand-built
//! networks and boxes, search for an input and a float32 summation order
//! whose output leaves polycert's certified bounds, or that violates a
//! robustness property polycert verified. The search hill-climbs over the
//! input and evaluates every dense sum in orders chosen to maximise rounding
//! error (sorted by magnitude either way, reversed, positives first, random).
//! A case is reproducible from its kind and seed.

use polycert_backend_cpu::CpuBackend;
use polycert_deeppoly::LoHi;
use polycert_deeppoly::base::rng::SplitMix;
use polycert_deeppoly::testnets::{random_mlp, random_sigmoid_mlp};
use polycert_deeppoly::{Analyzer, Arith, InputBox, Network, Op, Options, Property, Shape, Verdict};

/// Kinds of case, the nasty ones of the issue included.
pub const KINDS: [&str; 8] =
    ["random", "sigmoid", "huge-weights", "tiny-weights", "cancellation", "near-tie", "subnormal", "deep-narrow"];

/// Summation orders tried for every sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Order {
    Sequential,
    Reversed,
    Ascending,
    Descending,
    PositivesFirst,
    Random(u64),
}

const ORDERS: [Order; 6] =
    [Order::Sequential, Order::Reversed, Order::Ascending, Order::Descending, Order::PositivesFirst, Order::Random(0)];

/// A violation: the case, the point and the order that broke a bound.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Failure {
    pub kind: &'static str,
    pub seed: u64,
    pub arith: String,
    pub point: Vec<f32>,
    pub order: Order,
    pub what: String,
}

#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Report {
    pub cases: usize,
    pub evaluations: usize,
    pub verified_properties: usize,
    /// The smallest distance of an output to its bound, relative to the bound's scale (≥ 0 when sound).
    pub worst_margin: f64,
    pub failures: Vec<Failure>,
}

/// Builds a case: a network and an input box.
pub fn case(kind: &str, seed: u64) -> (Network, InputBox) {
    let mut rng = SplitMix(seed);
    let dense = |n: &mut Network, x: usize, w: Vec<f64>, b: Vec<f64>| {
        let out = b.len();
        n.push(format!("d{}", n.nodes().len()), Op::Dense { weight: w, bias: b, out }, &[x]).expect("valid")
    };
    let (net, c, eps) = match kind {
        "random" | "huge-weights" | "tiny-weights" => {
            let mut net = random_mlp(&mut rng, &[4, 8, 8, 3]);
            let scale = match kind {
                "huge-weights" => 1e30,
                "tiny-weights" => 1e-30,
                _ => 1.0,
            };
            let mut scaled = Network::new(net.input_shape());
            for (id, node) in net.nodes().iter().enumerate().skip(1) {
                let op = match &node.op {
                    // One scaled layer (the first): huge or tiny sums, products near the float32 limits.
                    Op::Dense { weight, bias, out } if id == 1 => Op::Dense {
                        weight: weight.iter().map(|w| (w * scale) as f32 as f64).collect(),
                        bias: bias.iter().map(|b| (b * scale) as f32 as f64).collect(),
                        out: *out,
                    },
                    op => op.clone(),
                };
                scaled.push(node.name.clone(), op, &node.inputs).expect("valid");
            }
            net = scaled;
            (net, (0..4).map(|_| rng.unit()).collect::<Vec<_>>(), 0.05 * rng.unit())
        }
        "sigmoid" => (random_sigmoid_mlp(&mut rng, &[4, 8, 8, 3]), (0..4).map(|_| rng.unit()).collect(), 0.05),
        "cancellation" => {
            // y0 = (x·1e8 + 1) − x·1e8, y1 = 0.5: float32 loses the 1.
            let mut net = Network::new(Shape::flat(1));
            let h = dense(&mut net, 0, vec![1e8, 1e8], vec![1.0, 0.0]);
            dense(&mut net, h, vec![1.0, -1.0, 0.0, 0.0], vec![0.0, 0.5]);
            (net, vec![rng.unit()], 0.01 * rng.unit())
        }
        "near-tie" => {
            // Two outputs that differ by a few ulps of the inputs.
            let mut net = Network::new(Shape::flat(2));
            let d = 1.0f32.next_up() as f64 - 1.0;
            dense(&mut net, 0, vec![1.0, 1.0, 1.0 + d, 1.0], vec![0.0, -d]);
            (net, vec![rng.unit(), rng.unit()], if rng.below(2) == 0 { 0.0 } else { 1e-6 })
        }
        "subnormal" => {
            let net = random_mlp(&mut rng, &[3, 6, 2]);
            let c = (0..3).map(|_| rng.unit() * 1e-39).collect();
            (net, c, 1e-40)
        }
        _ => {
            // 60 layers of width 3, near the identity.
            let mut net = Network::new(Shape::flat(3));
            let mut x = 0;
            for l in 0..60 {
                let w = (0..9).map(|k| if k % 4 == 0 { 1.0 } else { rng.weight(0.05) }).collect();
                x = dense(&mut net, x, w, (0..3).map(|_| rng.weight(0.01)).collect());
                if l % 2 == 1 {
                    x = net.push(format!("r{l}"), Op::Relu, &[x]).expect("valid");
                }
            }
            (net, (0..3).map(|_| rng.unit()).collect(), 0.01)
        }
    };
    let lo = c.iter().map(|v| v - eps).collect();
    let hi = c.iter().map(|v| v + eps).collect();
    (net, InputBox::new(lo, hi).expect("box"))
}

/// Float32 inference summing every dense and conv sum (products and bias) in `order`.
pub fn eval_ordered(net: &Network, x: &[f32], order: Order) -> Vec<f32> {
    let mut rng = SplitMix(match order {
        Order::Random(s) => s,
        _ => 0,
    });
    polycert_deeppoly::base::eval::eval_reordered(net, x, &mut |t: &mut [f32]| match order {
        Order::Sequential => {}
        Order::Reversed => t.reverse(),
        Order::Ascending => t.sort_by(|a, b| a.abs().total_cmp(&b.abs())),
        Order::Descending => t.sort_by(|a, b| b.abs().total_cmp(&a.abs())),
        Order::PositivesFirst => t.sort_by(|a, b| b.total_cmp(a)),
        Order::Random(_) => {
            for k in (1..t.len()).rev() {
                t.swap(k, rng.below(k + 1));
            }
        }
    })
}

/// How far `y` is inside `[lo, hi]` (negative: outside), relative to the
/// bounds' finite magnitude. A NaN output is outside any finite bound.
fn margin(y: &[f32], lo: &[f64], hi: &[f64]) -> f64 {
    y.iter()
        .zip(lo.iter().zip(hi))
        .map(|(&v, (&l, &h))| {
            let v = v as f64;
            if v.is_nan() {
                return if l.is_finite() || h.is_finite() { -1.0 } else { f64::INFINITY };
            }
            let d = (v - l).min(h - v);
            if d.is_nan() || d == f64::INFINITY {
                return f64::INFINITY;
            }
            let finite = |b: f64| if b.is_finite() { b.abs() } else { 0.0 };
            d / (1.0 + finite(l).max(finite(h)))
        })
        .fold(f64::INFINITY, f64::min)
}

/// Runs `per_kind` cases of every kind from `seed`, with `steps` hill-climbing steps per output direction.
pub fn hunt(per_kind: usize, seed: u64, steps: usize) -> Report {
    hunt_with(per_kind, seed, steps, 0.0)
}

/// [`hunt`] against bounds shrunk by `shrink` of their width at each end:
/// the negative control (a sound analysis with slightly wrong bounds must be caught).
pub fn hunt_with(per_kind: usize, seed: u64, steps: usize, shrink: f64) -> Report {
    let be = CpuBackend::default();
    let mut rep = Report { worst_margin: f64::INFINITY, ..Report::default() };
    for kind in KINDS {
        for c in 0..per_kind {
            let case_seed = seed.wrapping_mul(1_000_003).wrapping_add(c as u64);
            let (net, input) = case(kind, case_seed);
            rep.cases += 1;
            for arith in [Arith::Point, Arith::Interval] {
                let case = Case { kind, index: c, seed: case_seed, arith, net: &net, input: &input };
                hunt_case(&be, &case, steps, shrink, &mut rep);
            }
        }
    }
    rep
}

/// Case number `index` of `kind` (seed `seed`), analysed in `arith`.
struct Case<'a> {
    kind: &'static str,
    index: usize,
    seed: u64,
    arith: Arith,
    net: &'a Network,
    input: &'a InputBox,
}

/// Hunts one case: its output bounds (shrunk by `shrink`) and, when the
/// robustness property at the centre's label verifies, that property.
fn hunt_case(be: &CpuBackend, case: &Case, steps: usize, shrink: f64, rep: &mut Report) {
    let (net, arith) = (case.net, case.arith);
    let a = Analyzer::<_, f64>::new(
        net,
        be,
        Options::default().with(|o| {
            o.passes.arith = arith;
            o.attack.steps = 0;
        }),
    )
    .expect("prepare");
    let Ok(mut bounds) = a.node_bounds(case.input, polycert_deeppoly::base::budget::Budget::UNLIMITED) else { return };
    let LoHi { mut lo, mut hi } = bounds.swap_remove(net.output());
    for (l, h) in lo.iter_mut().zip(hi.iter_mut()) {
        let w = *h - *l;
        if shrink > 0.0 && w.is_finite() {
            (*l, *h) = (*l + shrink * w, *h - shrink * w);
        }
    }
    let label = {
        let c = case.input.to_f32_inside(&case.input.centre());
        let y = eval_ordered(net, &c, Order::Sequential);
        (0..y.len()).max_by(|&i, &j| y[i].total_cmp(&y[j])).unwrap_or(0)
    };
    let verified = verifies(be, case, &a, label);
    rep.verified_properties += verified as usize;
    let mut probe = Probe { case, lo, hi, label, verified, order_rng: SplitMix(case.seed ^ 0x1234) };
    climb(&mut probe, &mut SplitMix(case.seed ^ 0xABCD), steps, rep);
}

/// Whether the robustness property of `label` over the case's box is
/// verified by `a`, or (point arithmetic) by a ReLU-splitting analysis.
fn verifies(be: &CpuBackend, case: &Case, a: &Analyzer<'_, CpuBackend, f64>, label: usize) -> bool {
    let (net, input, arith, c) = (case.net, case.input, case.arith, case.index);
    // Point: with input splitting (these nets have few inputs) and
    // with ReLU splitting instead (every other case with per-layer
    // slopes in its leaves' refinement); either one's proof is hunted.
    // Half of them have no search memory: every leaf keeps only its
    // root's bounds, its splits clamped in.
    let tables = c % 2 == 1;
    let search_memory = (c % 4 >= 2).then_some(0);
    let relus = Analyzer::<_, f64>::new(
        net,
        be,
        Options::default().with(|o| {
            o.passes.arith = arith;
            o.attack.steps = 0;
            o.search.split_inputs = 0;
            o.search.optimize_intermediate = tables;
            o.search.memory = search_memory;
        }),
    )
    .expect("prepare");
    let proves = |an: &Analyzer<'_, CpuBackend, f64>| {
        net.output_shape().numel() > 1
            && Property::robustness("p", input.clone(), label, net.output_shape().numel())
                .ok()
                .and_then(|p| an.analyze(&p).ok())
                .is_some_and(|o| matches!(o.verdict, Verdict::Verified))
    };
    proves(a) || (arith == Arith::Point && proves(&relus))
}

/// A case's certified output bounds `[lo, hi]` and, when `verified`, its
/// proved label, checked at points in every summation order.
struct Probe<'a> {
    case: &'a Case<'a>,
    lo: Vec<f64>,
    hi: Vec<f64>,
    label: usize,
    verified: bool,
    order_rng: SplitMix,
}

impl Probe<'_> {
    /// Evaluates `x` in every order, records each output outside the
    /// bounds (or tying a verified label) and returns the smallest margin.
    fn check(&mut self, x: &[f64], rep: &mut Report) -> f64 {
        let Case { kind, seed, arith, net, input, .. } = *self.case;
        let (lo, hi, label) = (&self.lo, &self.hi, self.label);
        let xf = input.to_f32_inside(x);
        let mut worst = f64::INFINITY;
        for (k, &o) in ORDERS.iter().enumerate() {
            let order = if let Order::Random(_) = o { Order::Random(self.order_rng.next_u64() ^ k as u64) } else { o };
            let y = eval_ordered(net, &xf, order);
            rep.evaluations += 1;
            let m = margin(&y, lo, hi);
            worst = worst.min(m);
            let tie = self.verified && (0..y.len()).any(|j| j != label && y[j] >= y[label]);
            if m < 0.0 || tie {
                rep.failures.push(Failure {
                    kind,
                    seed,
                    arith: format!("{arith:?}"),
                    point: xf.clone(),
                    order,
                    what: if tie {
                        format!("verified label {label}, outputs {y:?}")
                    } else {
                        format!("outputs {y:?} outside [{lo:?}, {hi:?}]")
                    },
                });
            }
        }
        rep.worst_margin = rep.worst_margin.min(worst);
        worst
    }
}

/// Checks the centre, 8 random corners, then `steps` hill-climbing steps
/// from the point of smallest margin (step sizes halving, cycling every 8).
fn climb(probe: &mut Probe, rng: &mut SplitMix, steps: usize, rep: &mut Report) {
    let input = probe.case.input;
    let n = input.lo.len();
    let mut best = input.centre();
    let mut best_m = probe.check(&best, rep);
    for _ in 0..8 {
        let x: Vec<f64> = (0..n).map(|i| if rng.below(2) == 0 { input.lo[i] } else { input.hi[i] }).collect();
        let m = probe.check(&x, rep);
        if m < best_m {
            (best, best_m) = (x, m);
        }
    }
    for s in 0..steps {
        let step = 0.5f64.powi((s % 8) as i32);
        let x: Vec<f64> = (0..n)
            .map(|i| {
                let w = input.hi[i] - input.lo[i];
                (best[i] + (rng.unit() * 2.0 - 1.0) * step * w).clamp(input.lo[i], input.hi[i])
            })
            .collect();
        let m = probe.check(&x, rep);
        if m < best_m {
            (best, best_m) = (x, m);
        }
    }
}
