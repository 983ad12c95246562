//! The driver: [`Analyzer::analyze`] and the batched entry points, which
//! compose the layers (the passes with α/β from `crown`, the attacks
//! before or after them, branch and bound of what stays open).
//!
//! Batched analysis: the sub-problems of many properties go through one
//! forward pass, and their rows share the backsubstitution GEMMs (a row is
//! a (property, neuron) pair). Each keeps its own box, bounds, relaxations,
//! magnitudes, early termination and compaction; a property proved by the
//! first pass leaves the batch before the refinement pass.

use crate::attack::check::falsify_centre;
use crate::attack::pgd::{Start, Target};
use crate::base::analyzer::{AnalysisError, Analyzer};
use crate::base::backend::Backend;
use crate::base::budget::Budget;
use crate::base::property::{Counterexample, Outcome, Property, SubProblem, Verdict};
use crate::gpupoly::passes::SlotResult;
use polycert_interval::Fp;
use rayon::prelude::*;
use std::ops::{ControlFlow, Range};
use std::time::Instant;

/// Takes each property's outcome as it is decided; `Break` stops the batch.
pub type Each<'a> = dyn FnMut(usize, Result<Outcome, AnalysisError>) -> ControlFlow<()> + 'a;

/// Per property: what the batch analyses of it.
struct Plan {
    /// Its sub-problems to analyse (slots of the batch).
    slots: Vec<usize>,
    /// The counterexample that stopped the list early, if any.
    stop: Option<Counterexample>,
}

/// What the first pass gives: per sub-problem its confirmed hit, the
/// sub-problems analysed (slots of the batch), and their results.
type FirstPass = (Vec<Option<Counterexample>>, Vec<usize>, Result<Vec<SlotResult>, AnalysisError>);

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// Decides a property. Sub-problems are analysed in order; the property
    /// is verified only when all of them are.
    pub fn analyze(&self, prop: &Property) -> Result<Outcome, AnalysisError> {
        let mut out = None;
        self.run_batch(&[prop], &mut |_, o| {
            out = Some(o);
            ControlFlow::Continue(())
        })?;
        out.expect("one outcome per property")
    }

    /// Decides several properties together (see the module docs), with the
    /// verdicts that [`Analyzer::analyze`] gives each alone. A batch that
    /// times out or fails as a whole is re-run one property at a time, each
    /// with its own timeout. `seconds` is the batch's time shared evenly,
    /// plus the property's own attack.
    pub fn analyze_batch(&self, props: &[&Property]) -> Vec<Result<Outcome, AnalysisError>> {
        let mut out: Vec<_> = props.iter().map(|_| None).collect();
        self.analyze_batch_each(props, &mut |k, o| {
            out[k] = Some(o);
            ControlFlow::Continue(())
        });
        out.into_iter().map(|o| o.expect("one outcome per property")).collect()
    }

    /// [`Analyzer::analyze_batch`], handing each property's outcome (its
    /// index, in order) to `each` as soon as it is decided: a property's
    /// search does not wait for the others'. `each` returning
    /// `ControlFlow::Break` (its results file failed, say) stops the batch:
    /// the properties after it are not searched.
    pub fn analyze_batch_each(&self, props: &[&Property], each: &mut Each<'_>) {
        match self.run_batch(props, each) {
            Ok(()) => {}
            Err(e) if props.len() == 1 => {
                let _ = each(0, Err(e));
            }
            Err(_) => {
                for (k, p) in props.iter().enumerate() {
                    if each(k, self.analyze(p)).is_break() {
                        return;
                    }
                }
            }
        }
    }

    /// The error is the batch's (timeout, backend), returned before any
    /// outcome went to `each`; per-property errors (bad dimensions) go there.
    fn run_batch(&self, props: &[&Property], each: &mut Each<'_>) -> Result<(), AnalysisError> {
        let start = Instant::now();
        let budget = Budget::within(self.opts.end(start, std::time::Duration::ZERO));
        let (n_in, n_out) = (self.net.input_shape().numel(), self.net.output_shape().numel());
        // Per property, its sub-problems' range in `sps` (or its error).
        let mut sps: Vec<&SubProblem> = Vec::new();
        let ranges: Vec<Result<Range<usize>, AnalysisError>> = props
            .iter()
            .map(|p| {
                p.check_dims(n_in, n_out).map_err(AnalysisError::from)?;
                let first = sps.len();
                sps.extend(p.subproblems.iter());
                Ok(first..sps.len())
            })
            .collect();
        let (hits, work, results) = self.first_pass(&sps, &ranges, budget);
        let results = match results {
            Err(AnalysisError::Timeout) if props.len() == 1 => {
                let first = ranges[0].as_ref().ok().and_then(|r| hits.get(r.start).cloned().flatten());
                let verdict = first.map_or(Verdict::Timeout, Verdict::Falsified);
                let seconds = start.elapsed().as_secs_f64();
                let _ = each(0, Ok(Outcome { verdict, lower_bounds: Vec::new(), seconds, search: None }));
                return Ok(());
            }
            r => r?,
        };
        let plans = plans(ranges, &hits, &work, sps.len());
        let analysed: Vec<&SubProblem> = work.iter().map(|&k| sps[k]).collect();
        let late = {
            let _p = crate::base::profile::span("attack_after");
            self.attack_after(&plans, &analysed, &results, budget)
        };
        let shared = start.elapsed().as_secs_f64() / props.len().max(1) as f64;
        let outcome = |Plan { slots, stop }: Plan, hit| {
            let mut o = conclude(Plan { slots: slots.clone(), stop: stop.clone() }, &results, hit, shared);
            if o.verdict == Verdict::Unknown && self.branching().is_some() {
                self.branch(&mut o, &slots, stop, &analysed, &results);
            }
            o
        };
        for (k, (plan, hit)) in plans.into_iter().zip(late).enumerate() {
            if each(k, plan.map(|p| outcome(p, hit))).is_break() {
                break;
            }
        }
        Ok(())
    }

    /// The first pass over every sub-problem (per property, its `ranges`
    /// in `sps`), with the attacks before it (`AttackOptions::first`) or the
    /// box centres checked beside it.
    fn first_pass(
        &self,
        sps: &[&SubProblem],
        ranges: &[Result<Range<usize>, AnalysisError>],
        budget: Budget,
    ) -> FirstPass {
        if self.opts.attack.first && self.opts.attack.steps > 0 {
            let hits = {
                let _p = crate::base::profile::span("attack_before");
                self.attack_before(sps, budget)
            };
            // A property's sub-problems after its first hit are not analysed.
            let work: Vec<usize> =
                ranges.iter().flatten().flat_map(|r| r.clone().take_while(|&k| hits[k].is_none())).collect();
            let todo: Vec<&SubProblem> = work.iter().map(|&k| sps[k]).collect();
            (hits, work, self.analyze_subproblems(&todo, budget))
        } else {
            // The box centres are checked on the host while the backend analyses.
            let net = self.net;
            let (centres, results) = std::thread::scope(|s| {
                let centres = s.spawn(|| {
                    let _p = crate::base::profile::span("centres");
                    sps.par_iter().map(|sp| falsify_centre(net, sp)).collect::<Vec<_>>()
                });
                let results = self.analyze_subproblems(sps, budget);
                (centres.join(), results)
            });
            let hits = self.confirmed(sps, centres.unwrap_or_else(|_| vec![None; sps.len()]));
            (hits, (0..sps.len()).collect(), results)
        }
    }

    /// Branch and bound for a property left open: its unproved sub-problems
    /// in order, each searched until proved, falsified, or out of time
    /// (the property's timeout less what it has spent).
    fn branch(
        &self,
        o: &mut Outcome,
        slots: &[usize],
        stop: Option<Counterexample>,
        work: &[&SubProblem],
        results: &[SlotResult],
    ) {
        let start = Instant::now();
        let spent = std::time::Duration::from_secs_f64(o.seconds);
        let budget = Budget::within(self.opts.end(start, spent));
        let mut stats = crate::base::property::SearchStats::default();
        let mut verdict = stop.map_or(Verdict::Verified, Verdict::Falsified);
        // A ReLU search splits max pooling as ReLUs (`base/lower.rs`).
        let lowered = match self.branching() {
            Some(crate::bab::search::Branching::Relus) => crate::base::lower::maxpool_as_relus(self.net).ok().flatten(),
            _ => None,
        };
        // Its scores see the leaves' α and β unless told otherwise (`SearchOptions::babsr_duals`).
        let mut low_opts = self.opts.clone();
        low_opts.search.babsr_duals.get_or_insert(true);
        let low = lowered.as_ref().and_then(|n| Analyzer::new(n, self.backend, low_opts).ok());
        let searcher = low.as_ref().unwrap_or(self);
        for &s in slots.iter().filter(|&&s| !results[s].proved) {
            match searcher.search(work[s], &results[s].lower, budget, &mut stats) {
                Ok(crate::bab::search::Search::Proved) => {}
                // Found on the rewritten network: confirmed on this one too.
                Ok(crate::bab::search::Search::Falsified(c)) if !self.confirm(work[s], &c.input) => {
                    verdict = Verdict::Unknown;
                    break;
                }
                Ok(crate::bab::search::Search::Falsified(c)) => {
                    verdict = Verdict::Falsified(c);
                    break;
                }
                Ok(crate::bab::search::Search::Open { timed_out }) => {
                    verdict = if timed_out { Verdict::Timeout } else { Verdict::Unknown };
                    break;
                }
                // A backend failure proves nothing: the property stays open.
                Err(_) => {
                    verdict = Verdict::Unknown;
                    break;
                }
            }
        }
        o.verdict = verdict;
        o.seconds += start.elapsed().as_secs_f64();
        o.search = Some(stats);
    }

    /// The hits that [`Analyzer::confirm`] confirms (every summation order).
    fn confirmed(&self, sps: &[&SubProblem], mut hits: Vec<Option<Counterexample>>) -> Vec<Option<Counterexample>> {
        for (h, sp) in hits.iter_mut().zip(sps) {
            if h.as_ref().is_some_and(|c| !self.confirm(sp, &c.input)) {
                *h = None;
            }
        }
        hits
    }

    /// Counterexamples found before the analysis (`AttackOptions::first`), one entry
    /// per sub-problem: the box centre in float32, then PGD on every disjunct.
    pub(crate) fn attack_before(&self, sps: &[&SubProblem], budget: Budget) -> Vec<Option<Counterexample>> {
        let centres = sps.par_iter().map(|sp| falsify_centre(self.net, sp)).collect();
        let mut hits = self.confirmed(sps, centres);
        let targets: Vec<Target<'_>> = (0..sps.len())
            .filter(|&g| hits[g].is_none())
            .flat_map(|g| (0..sps[g].unsafe_region.len()).map(move |d| (g, d)))
            .map(|(group, disjunct)| Target { sp: sps[group], disjunct, group, start: Start::Centre })
            .collect();
        let found = self.attack_or_nothing(&targets, sps.len(), budget);
        for (h, f) in hits.iter_mut().zip(found) {
            if h.is_none() {
                *h = f;
            }
        }
        hits
    }

    /// The batched attack; a backend failure in it (out of memory) finds
    /// nothing rather than failing the batch: the verdicts stay sound,
    /// counterexamples are only missed.
    fn attack_or_nothing(&self, targets: &[Target<'_>], groups: usize, budget: Budget) -> Vec<Option<Counterexample>> {
        self.attack_batch(targets, groups, self.opts.attack.steps, budget).unwrap_or_else(|_| vec![None; groups])
    }

    /// After the analysis: PGD on the first unproved sub-problem of each
    /// property, its three weakest disjuncts, all properties in one batch.
    fn attack_after(
        &self,
        plans: &[Result<Plan, AnalysisError>],
        work: &[&SubProblem],
        results: &[SlotResult],
        budget: Budget,
    ) -> Vec<Option<Counterexample>> {
        if self.opts.attack.first || self.opts.attack.steps == 0 {
            return vec![None; plans.len()];
        }
        let mut targets = Vec::new();
        for (group, plan) in plans.iter().enumerate() {
            let Ok(Plan { slots, .. }) = plan else { continue };
            if let Some(&s) = slots.iter().find(|&&s| !results[s].proved) {
                for disjunct in crate::base::property::weakest_disjuncts(work[s], &results[s].lower, 3) {
                    for restart in 0..=self.opts.attack.restarts as u32 {
                        let start = if restart == 0 { Start::Centre } else { Start::Random(restart) };
                        targets.push(Target { sp: work[s], disjunct, group, start });
                    }
                }
            }
        }
        self.attack_or_nothing(&targets, plans.len(), budget)
    }
}

/// A property's verdict from its sub-problems' results, in order: the
/// first unproved one decides (by the attack's `hit`, if any); a
/// counterexample found before the analysis decides once every earlier
/// sub-problem is proved.
fn conclude(Plan { slots, stop }: Plan, results: &[SlotResult], hit: Option<Counterexample>, seconds: f64) -> Outcome {
    let mut verdict = stop.map_or(Verdict::Verified, Verdict::Falsified);
    if slots.iter().any(|&s| !results[s].proved) {
        verdict = hit.map_or(Verdict::Unknown, Verdict::Falsified);
    }
    let lower_bounds = slots.first().map(|&s| results[s].lower.clone()).unwrap_or_default();
    Outcome { verdict, lower_bounds, seconds, search: None }
}

/// Per property, its plan: the slots in `work` of its sub-problems (of
/// `n`) before its first hit, and that hit.
fn plans(
    ranges: Vec<Result<Range<usize>, AnalysisError>>,
    hits: &[Option<Counterexample>],
    work: &[usize],
    n: usize,
) -> Vec<Result<Plan, AnalysisError>> {
    let mut slot_of = vec![usize::MAX; n];
    for (slot, &k) in work.iter().enumerate() {
        slot_of[k] = slot;
    }
    ranges
        .into_iter()
        .map(|r| {
            r.map(|r| {
                let (mut slots, mut stop) = (Vec::new(), None);
                for k in r {
                    if let Some(c) = &hits[k] {
                        stop = Some(c.clone());
                        break;
                    }
                    slots.push(slot_of[k]);
                }
                Plan { slots, stop }
            })
        })
        .collect()
}
