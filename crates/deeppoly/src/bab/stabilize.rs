//! Stabilisation: intermediate bounds by search, at a ReLU search's root.
//!
//! DeepPoly's intermediate bounds on deep MLPs call many ReLU inputs
//! unstable that no input of the box drives across 0 (256x6 MNIST,
//! prop_0_0.03: 24 of the second layer's 67 and at least 83 of the third
//! layer's 121). α,β-CROWN tightens those layers with a MIP solver; here
//! each end of such an input, `x_i > 0` or `x_i < 0`, is a property of the
//! network cut after that layer (`Network::prefix`), attacked first (a hit
//! shows the input really changes sign) and then searched with a small
//! budget from the bounds found so far. A proved end clamps the bound to 0,
//! the later layers are refined again, and the next layer follows.
//!
//! **Why it is sound.** A proved end is a verdict of the same sound search
//! on the same semantics (the cut network's output is the layer's input,
//! bounded for exact and float inference alike), over the same box and
//! from bounds that hold over it. Ends not proved keep their bounds.

use crate::bab::search::{Branching, RootTally, Search};
use crate::base::analyzer::{AnalysisError, Analyzer};
use crate::base::backend::Backend;
use crate::base::bounds::{LoHi, NodeBounds};
use crate::base::budget::Budget;
use crate::base::ir::Op;
use crate::base::property::SearchStats;
use crate::base::property::{Halfspace, InputBox, SubProblem};
use crate::gpupoly::forward::RunState;
use polycert_interval::Fp;
use std::sync::Arc;
use std::time::Instant;

/// How `Stabilize::Auto`'s first rung ended.
pub(crate) enum Rung<T> {
    Decided(Search),
    /// Stabilise for the last search, from these bounds where given.
    Stabilize(Option<Arc<NodeBounds<T>>>),
}

/// A layer's input `i` is above (`s = +1`) or below (`s = −1`) `t` over
/// the box: `t = 0` makes it stable, another `t` (half its bound) narrows
/// an input that really changes sign.
type End = (usize, f64, f64);

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// `Stabilize::Auto`'s stages before its last stabilisation, within
    /// `StabilizeOptions::quick_rung` of `budget`'s time: a plain search on
    /// `plain_share` of it, then (where that rung ends before `budget`'s) a
    /// stabilisation and a search within the rung. A sub-problem they decide is answered;
    /// else the last stabilisation starts from the rung's bounds, if any.
    pub(crate) fn quick_rung(
        &self,
        sp: &SubProblem,
        lbs: &[f64],
        budget: Budget,
        stats: &mut SearchStats,
    ) -> Result<Rung<T>, AnalysisError> {
        let tune = &self.opts.search.stabilize;
        let quick = budget.capped(tune.quick_rung);
        let plain = quick.share(tune.plain_share);
        if let Some(r) = self.stage((sp, lbs), None, plain, budget, stats)? {
            return Ok(Rung::Decided(r));
        }
        if quick.deadline() >= budget.deadline() {
            return Ok(Rung::Stabilize(None));
        }
        let start = match self.stable_prior(&sp.input, quick, None) {
            Ok(b) => Arc::new(b),
            // Out of the rung's time: the last stabilisation starts afresh.
            Err(AnalysisError::Timeout) => return Ok(Rung::Stabilize(None)),
            Err(e) => return Err(e),
        };
        if let Some(r) = self.stage((sp, lbs), Some(start.clone()), quick, budget, stats)? {
            return Ok(Rung::Decided(r));
        }
        Ok(Rung::Stabilize(Some(start)))
    }

    /// A search from the roots' bounds `prior` within `until`: its answer,
    /// unless it left the sub-problem open with time in `budget` to spare.
    /// Its leaves proved count in `stats`.
    fn stage(
        &self,
        root: (&SubProblem, &[f64]),
        prior: Option<Arc<NodeBounds<T>>>,
        until: Budget,
        budget: Budget,
        stats: &mut SearchStats,
    ) -> Result<Option<Search>, AnalysisError> {
        let mut first = SearchStats::default();
        let r = self.search_from(root, (prior, None), until, &mut first, &mut RootTally::default())?;
        stats.branching = first.branching;
        stats.leaves_proved += first.leaves_proved;
        stats.leaves_analysed += first.leaves_analysed;
        stats.seconds += first.seconds;
        if matches!(r, Search::Open { .. }) && !budget.expired() {
            return Ok(None);
        }
        stats.leaves_open += first.leaves_open;
        stats.best_bound = stats.best_bound.min(first.best_bound);
        Ok(Some(r))
    }

    /// Whether `Stabilize::Auto` stabilises this network's ReLU searches:
    /// networks without convolutions (measured on the MNIST MLPs; the
    /// ResNets' searches that the default wins take up to 265 s of 300).
    pub(crate) fn stages_stabilization(&self) -> bool {
        !self.net.nodes().iter().any(|n| matches!(n.op, Op::Conv2d(_) | Op::AvgPool2d(_) | Op::MaxPool2d(_)))
    }

    /// A ReLU search root's node bounds: both passes' (within `start`, bounds
    /// that hold over the box), with the unstable ReLU inputs proved stable
    /// clamped at 0, layer by layer (see the module's notes), within
    /// `StabilizeOptions::share` of `budget`'s time.
    pub(crate) fn stable_prior(
        &self,
        input: &InputBox,
        budget: Budget,
        start: Option<&NodeBounds<T>>,
    ) -> Result<NodeBounds<T>, AnalysisError> {
        let _p = crate::base::profile::span("stabilize");
        let stage = budget.share(self.opts.search.stabilize.share);
        let mut st = self.refined_root(input, start, budget)?;
        let live = crate::base::progress::Progress::stabilizing(self.opts.progress.as_deref());
        let nodes = self.net.nodes();
        let last = nodes.len() - 1;
        // The first ReLU's input is affine in the box: its bounds are tight.
        let relus: Vec<usize> = (0..nodes.len()).filter(|&r| nodes[r].op == Op::Relu).skip(1).collect();
        for (k, &r) in relus.iter().enumerate() {
            if stage.expired() || st.empty[0] {
                break;
            }
            // Each layer gets an equal share of the time left.
            let until = stage.share(1.0 / (relus.len() - k) as f64);
            let p = nodes[r].inputs[0];
            let (lo, hi) = (&st.bounds[p].lo, &st.bounds[p].hi);
            let unstable: Vec<usize> = (0..lo.len()).filter(|&i| crate::base::relax::unstable(lo[i], hi[i])).collect();
            if unstable.is_empty() {
                continue;
            }
            let t0 = Instant::now();
            live.layer(p, unstable.len());
            let (proved, reached) = match self.stable_ends(&st, input, (p, &unstable), (stage, until)) {
                Ok(p) => p,
                // A failure (out of memory) keeps the bounds found so far.
                Err(_) => break,
            };
            let stable = proved.iter().filter(|e| e.2 == 0.0).count();
            if crate::base::profile::on() {
                let (u, t, m) = (unstable.len(), t0.elapsed(), proved.len() - stable);
                eprintln!(
                    "stabilize node {p}: {stable} of {u} unstable proved stable in {t:.2?} ({reached} ends reached \
                     by attacks; {m} bounds halved)"
                );
            }
            live.proved(stable);
            // Deeper layers are harder: where one gives nothing, stop. From
            // a start, a layer may have given all it can before: go on.
            if proved.is_empty() {
                if start.is_none() {
                    break;
                }
                continue;
            }
            let n = nodes[p].shape.numel();
            let b = &mut st.bounds[p];
            for (i, s, t) in proved {
                // `t` came from `T` (0 or an exact half of a bound).
                let t = T::from_f64_nearest(t);
                let (l, h) = if s > 0.0 { (t, b.hi[i]) } else { (b.lo[i], t) };
                RunState::intersect(b, &mut st.empty, n, i, l, h);
            }
            b.dev = None;
            self.forward_range(&mut st, p, last)?;
            if self.opts.passes.refine {
                self.refine_all(&mut st, &[0], &[Some(p)], &[], None, budget)?;
            }
        }
        Ok(st.into_bounds())
    }

    /// [`Analyzer::node_bounds`] stabilised as a ReLU search's root is (see
    /// the module's notes), within `budget`.
    pub fn stabilized_node_bounds(
        &self,
        input: &InputBox,
        budget: Budget,
    ) -> Result<Vec<crate::base::bounds::LoHi<f64>>, AnalysisError> {
        Ok(crate::base::bounds::bounds_f64(self.stable_prior(input, budget, None)?))
    }

    /// The ends of node `p`'s `unstable` values that a search proves, each
    /// on the network cut after `p`, from `st`'s bounds, and how many ends
    /// an attack reached (those inputs really change sign).
    fn stable_ends(
        &self,
        st: &RunState<T, B::Buf>,
        input: &InputBox,
        (p, unstable): (usize, &[usize]),
        (stage, until): (Budget, Budget),
    ) -> Result<(Vec<End>, usize), AnalysisError> {
        let tune = &self.opts.search.stabilize;
        if unstable.len() > tune.max_unstable {
            return Ok((Vec::new(), 0));
        }
        let n = st.bounds[p].lo.len();
        let net = self.net.prefix(p);
        let opts = self.opts.clone().with(|o| {
            o.timeout = None;
            o.search.optimize_intermediate = false;
            o.search.stabilize.when = crate::base::options::Stabilize::Off;
            o.progress = None;
        });
        let cut = Analyzer::new(&net, self.backend, opts)?;
        // Input splitting takes the ends as one root: no end by end answer.
        if cut.branching() != Some(Branching::Relus) {
            return Ok((Vec::new(), 0));
        }
        let prior: Arc<NodeBounds<T>> =
            Arc::new(st.bounds[..=p].iter().map(|b| LoHi { lo: b.lo.clone(), hi: b.hi.clone() }).collect());
        // The unsafe side of end (i, s, t): s·x_i ≤ s·t. An attack that
        // reaches it shows the end does not hold.
        let side = |&(i, s, t): &End| {
            let mut c = vec![0.0; n];
            c[i] = s;
            vec![Halfspace::new(c, s * t)]
        };
        // The ends no attack reaches, and the others.
        let attack = |ends: &[End]| -> (Vec<End>, Vec<End>) {
            let sps: Vec<SubProblem> =
                ends.iter().map(|e| SubProblem { input: input.clone(), unsafe_region: vec![side(e)] }).collect();
            let refs: Vec<&SubProblem> = sps.iter().collect();
            let hits = cut.attack_before(&refs, stage);
            let (open, hit): (Vec<_>, Vec<_>) = ends.iter().zip(hits).partition(|(_, h)| h.is_none());
            (open.into_iter().map(|(&e, _)| e).collect(), hit.into_iter().map(|(&e, _)| e).collect())
        };
        let ends: Vec<End> = unstable.iter().flat_map(|&i| [(i, 1.0, 0.0), (i, -1.0, 0.0)]).collect();
        let (todo, reached) = attack(&ends);
        // Within a time share the roots' limits bound the leaves.
        let until = if until.deadline().is_some() {
            until
        } else {
            until.with_leaves(tune.end_leaves.saturating_mul(unstable.len()))
        };
        let mut proved = cut.prove_ends(input, &prior, todo, until, side)?;
        // An input that really changes sign: narrow its bound on that side
        // by halves, while the halves are proved.
        let (lo, hi) = (&st.bounds[p].lo, &st.bounds[p].hi);
        let half = |(i, s, t): End| {
            let t = T::from_f64_nearest(t);
            let h = t * T::from_f64_nearest(0.5);
            let h64 = h.to_f64_exact();
            (h + h == t && h != T::zero() && h64.is_finite()).then_some((i, s, h64))
        };
        let mut level: Vec<End> = reached
            .iter()
            .filter_map(|&(i, s, _)| half((i, s, (if s > 0.0 { lo[i] } else { hi[i] }).to_f64_exact())))
            .collect();
        for _ in 0..tune.halvings {
            if level.is_empty() || until.expired() {
                break;
            }
            let (todo, _) = attack(&level);
            let got = cut.prove_ends(input, &prior, todo, until, side)?;
            level = got.iter().filter_map(|&e| half(e)).collect();
            proved.extend(got);
        }
        Ok((proved, reached.len()))
    }

    /// The ends of `todo` that one proofs-only search on this (cut) network
    /// proves, each end a root with at most `StabilizeOptions::end_leaves`
    /// leaves. With time left in the layer's share, the ends given up at
    /// that limit are searched again with four times as many (256x4
    /// prop_6_0.05's last layer: 61 of 217 in 11 s of 22), up to
    /// `max_end_leaves`.
    fn prove_ends(
        &self,
        input: &InputBox,
        prior: &Arc<NodeBounds<T>>,
        todo: Vec<End>,
        until: Budget,
        side: impl Fn(&End) -> Vec<Halfspace>,
    ) -> Result<Vec<End>, AnalysisError> {
        let mut proved = Vec::new();
        let tune = &self.opts.search.stabilize;
        let (mut todo, mut limit) = (todo, tune.end_leaves);
        while !todo.is_empty() {
            let sp = SubProblem { input: input.clone(), unsafe_region: todo.iter().map(&side).collect() };
            let mut tally = RootTally::proofs_only(limit);
            let root = (&sp, &[][..]);
            match self.search_from(root, (Some(prior.clone()), None), until, &mut SearchStats::default(), &mut tally) {
                Ok(_) | Err(AnalysisError::Timeout) => {}
                Err(e) => return Err(e),
            }
            let done = tally.proved();
            proved.extend(todo.iter().zip(&done).filter(|e| *e.1).map(|e| *e.0));
            let late = until.deadline().is_none() || until.expired();
            if late || limit >= tune.max_end_leaves {
                break;
            }
            todo = todo
                .iter()
                .zip(&done)
                .zip(&tally.analysed)
                .filter(|((_, d), a)| !**d && **a >= limit)
                .map(|((e, _), _)| *e)
                .collect();
            limit = limit.saturating_mul(4);
        }
        Ok(proved)
    }
}
