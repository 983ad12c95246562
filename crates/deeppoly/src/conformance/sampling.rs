//! Uniform sampling as the attack's yardstick: where float32 samples of a
//! box find a violation, the analysis must answer falsified, with a
//! counterexample that holds in float32 (issue 45: the attack must never
//! lose to sampling). The shared-benchmark tests of each backend run it.

use crate::attack::check::check_f32;
use crate::base::analyzer::Analyzer;
use crate::base::backend::Backend;
use crate::base::ir::Network;
use crate::base::property::{Property, SubProblem, Verdict};
use crate::base::rng::SplitMix;

/// Points screened on the backend per batch.
const CHUNK: usize = 1000;

/// The first of `n` uniform float32 samples of `sp`'s box that sequential
/// float32 inference puts in its unsafe region (`check_f32`). The backend
/// (`screen`, in f32, any order) picks the candidates, the host confirms
/// them; a candidate is any sample within 10⁻³ of its outputs' scale of
/// meeting a disjunct.
pub fn sampled_violation<B: Backend<f32>>(
    screen: &Analyzer<'_, B, f32>,
    net: &Network,
    sp: &SubProblem,
    (n, seed): (usize, u64),
) -> Option<Vec<f32>> {
    let mut rng = SplitMix(seed);
    let n_in = sp.input.lo.len();
    let n_out = net.output_shape().numel();
    let mut left = n;
    while left > 0 {
        let p = left.min(CHUNK);
        left -= p;
        let xs: Vec<f32> = (0..p * n_in)
            .map(|k| {
                let (l, h) = (sp.input.lo[k % n_in], sp.input.hi[k % n_in]);
                ((l + (h - l) * rng.unit()) as f32).clamp(l as f32, h as f32)
            })
            .collect();
        let x64: Vec<f64> = xs.iter().map(|&v| v as f64).collect();
        let Ok(ys) = screen.infer_outputs(&x64, p) else {
            panic!("the backend's inference failed while sampling");
        };
        for k in 0..p {
            let y = &ys[k * n_out..(k + 1) * n_out];
            let scale = 1e-3 * (1.0 + y.iter().fold(0.0f64, |m, v| m.max(v.abs())));
            let near = sp
                .unsafe_region
                .iter()
                .any(|conj| conj.iter().all(|h| h.c.iter().zip(y).map(|(c, v)| c * v).sum::<f64>() <= h.d + scale));
            let x = &xs[k * n_in..(k + 1) * n_in];
            if near && check_f32(net, sp, x).is_some() {
                return Some(x.to_vec());
            }
        }
    }
    None
}

/// Whether `prop`'s answer stands against sampling: falsified with a
/// counterexample that holds in float32 wherever `sampled` found a
/// violation, and never verified there. Returns the failure, if any.
pub fn judge_against_sampling(net: &Network, prop: &Property, sampled: bool, verdict: &Verdict) -> Option<String> {
    match verdict {
        Verdict::Falsified(c) => prop
            .subproblems
            .iter()
            .all(|sp| check_f32(net, sp, &c.input).is_none())
            .then(|| "a counterexample that does not hold in float32".to_string()),
        v if sampled => Some(format!("{} where uniform sampling finds a violation", v.name())),
        _ => None,
    }
}

/// One benchmark instance: its name, network and property.
pub struct Instance {
    pub name: String,
    pub net: std::sync::Arc<Network>,
    pub prop: Property,
}

/// Samples every instance's sub-problems (`samples` points each); where
/// sampling finds a violation, runs the default analysis within `timeout`
/// and judges its answer ([`judge_against_sampling`]). Each instance's
/// samples are seeded by its name. Returns the failures and the names of
/// the instances that sampling falsified.
pub fn never_lose_to_sampling<B: Backend<f32> + Backend<f64>>(
    be: &B,
    cases: &[Instance],
    samples: usize,
    timeout: std::time::Duration,
) -> (Vec<String>, Vec<String>) {
    let opts = crate::base::options::Options::default().with(|o| o.timeout = Some(timeout));
    let (mut failures, mut sampled_names) = (Vec::new(), Vec::new());
    for group in cases.chunk_by(|a, b| std::sync::Arc::ptr_eq(&a.net, &b.net)) {
        let net = &*group[0].net;
        let screen = Analyzer::<B, f32>::new(net, be, opts.clone()).expect("prepare (f32)");
        let an = Analyzer::<B, f64>::new(net, be, opts.clone()).expect("prepare");
        for c in group {
            // FNV-1a of the name.
            let seed =
                c.name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
            let sampled =
                c.prop.subproblems.iter().any(|sp| sampled_violation(&screen, net, sp, (samples, seed)).is_some());
            if !sampled {
                println!("{}: sampling finds no violation", c.name);
                continue;
            }
            sampled_names.push(c.name.clone());
            let out = an.analyze(&c.prop).expect("run");
            println!("{}: sampling finds a violation; {} in {:.3}s", c.name, out.verdict.name(), out.seconds);
            if let Some(f) = judge_against_sampling(net, &c.prop, sampled, &out.verdict) {
                failures.push(format!("{}: {f} ({:.3}s)", c.name, out.seconds));
            }
        }
    }
    (failures, sampled_names)
}
