//! Batched analysis: the sub-problems of many properties go through one
//! forward pass, and their rows share the backsubstitution GEMMs (a row is
//! a (property, neuron) pair). Each keeps its own box, bounds, relaxations,
//! magnitudes, early termination and compaction; a property proved by the
//! first pass leaves the batch before the refinement pass.

use crate::base::analyzer::{AnalysisError, Analyzer, falsify_centre};
use crate::base::backend::{Arith, Backend};
use crate::gpupoly::forward::RunState;
use crate::bab::gate::RefineGate;
use crate::crown::lagrange::{LayerSlopes, Slopes, SplitConstraint};
use crate::attack::pgd::{Start, Target};
use crate::base::property::{Counterexample, InputBox, Outcome, Property, SubProblem, Verdict};
use polycert_interval::Fp;
use rayon::prelude::*;
use std::collections::HashMap;
use std::ops::{ControlFlow, Range};
use std::time::Instant;

/// Takes each property's outcome as it is decided; `Break` stops the batch.
pub type Each<'a> = dyn FnMut(usize, Result<Outcome, AnalysisError>) -> ControlFlow<()> + 'a;

/// The most sub-problems analysed together (`Options::batch`).
pub const MAX_BATCH: usize = 1024;

/// The largest default batch a backend's [`Backend::batch_neurons`] gives.
pub const SMALL_NET_BATCH: usize = 128;

/// The default batch of a backend that names none ([`Backend::batch_hint`]).
pub const DEFAULT_BATCH: usize = 256;

/// Values per neuron and batch slot that a run state keeps: host and device
/// bounds, relaxation or bias tables, `r` and `|W|·r`.
const VALUES_PER_NEURON: usize = 16;

/// Per property: the sub-problems to analyse (slots of the batch), and the
/// counterexample that stopped the list early, if any.
type Plan = (Vec<usize>, Option<Counterexample>);

/// One box's bounds of every node, `(lo, hi)` per node.
pub(crate) type NodeBounds<T> = Vec<(Vec<T>, Vec<T>)>;

/// Node bounds in `f64` (exactly).
pub(crate) fn bounds_f64<T: Fp>(b: NodeBounds<T>) -> Vec<crate::base::analyzer::NodeBounds> {
    let f64s = |v: Vec<T>| v.into_iter().map(|x| x.to_f64_exact()).collect();
    b.into_iter().map(|(l, h)| (f64s(l), f64s(h))).collect()
}

/// The slots' results, the run state they came from, and the parameters
/// their output rows were bounded with.
type Analysed<T, Buf> = (Vec<SlotResult>, Option<RunState<T, Buf>>, Duals);

/// β per (slot, half-space index within the slot), one per split constraint.
pub(crate) type Betas = HashMap<(usize, usize), Vec<f64>>;

/// The parameters the output rows were bounded with: β per (slot,
/// half-space), and per slot its optimised lower slopes.
#[derive(Default)]
pub(crate) struct Duals {
    pub betas: Betas,
    pub slopes: HashMap<usize, Slopes>,
}

/// What [`Analyzer::analyze_within`] returns: per slot its result and final
/// node bounds, and the parameters of its rows.
pub(crate) type Searched<T> = (Vec<SlotResult>, Vec<NodeBounds<T>>, Duals);

/// Lower bounds of every half-space row of a sub-problem, and whether all
/// its disjuncts are proved infeasible.
pub(crate) type SlotResult = (Vec<f64>, bool);

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// How many properties [`Analyzer::analyze_batch`] should take at once:
    /// `Options::batch`, else as many run states as a quarter of the memory
    /// budget holds, at most the backend's [`Backend::batch_hint`] (or, on
    /// small networks, what its [`Backend::batch_neurons`] allows). The
    /// interval arithmetic runs one property at a time.
    pub fn batch_capacity(&self) -> usize {
        if self.opts.arith == Arith::Interval {
            return 1;
        }
        if let Some(b) = self.opts.batch {
            return b.clamp(1, MAX_BATCH);
        }
        let neurons: usize = self.net.nodes().iter().map(|n| n.shape.numel()).sum();
        let per_slot = neurons.max(1) * VALUES_PER_NEURON * std::mem::size_of::<T>();
        let mut hint = self.backend.batch_hint();
        if let Some(total) = self.backend.batch_neurons() {
            hint = hint.max((total / neurons.max(1)).min(SMALL_NET_BATCH));
        }
        (self.budget() / 4 / per_slot).clamp(1, hint.clamp(1, MAX_BATCH))
    }

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
        let deadline = self.opts.timeout.map(|t| start + t);
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
        let (hits, work, results) = if self.opts.attack_first && self.opts.attack_steps > 0 {
            let hits = {
                let _p = crate::base::profile::span("attack_before");
                self.attack_before(&sps, deadline)
            };
            // A property's sub-problems after its first hit are not analysed.
            let work: Vec<usize> =
                ranges.iter().flatten().flat_map(|r| r.clone().take_while(|&k| hits[k].is_none())).collect();
            let todo: Vec<&SubProblem> = work.iter().map(|&k| sps[k]).collect();
            (hits, work, self.analyze_subproblems(&todo, deadline))
        } else {
            // The box centres are checked on the host while the backend analyses.
            let net = self.net;
            let (centres, results) = std::thread::scope(|s| {
                let centres = s.spawn(|| {
                    let _p = crate::base::profile::span("centres");
                    sps.par_iter().map(|sp| falsify_centre(net, sp)).collect::<Vec<_>>()
                });
                let results = self.analyze_subproblems(&sps, deadline);
                (centres.join(), results)
            });
            let hits = self.confirmed(&sps, centres.unwrap_or_else(|_| vec![None; sps.len()]));
            (hits, (0..sps.len()).collect(), results)
        };
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
        let mut slot_of = vec![usize::MAX; sps.len()];
        for (slot, &k) in work.iter().enumerate() {
            slot_of[k] = slot;
        }
        let plans: Vec<Result<Plan, AnalysisError>> = ranges
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
                    (slots, stop)
                })
            })
            .collect();
        let analysed: Vec<&SubProblem> = work.iter().map(|&k| sps[k]).collect();
        let late = {
            let _p = crate::base::profile::span("attack_after");
            self.attack_after(&plans, &analysed, &results, deadline)
        };
        let shared = start.elapsed().as_secs_f64() / props.len().max(1) as f64;
        let outcome = |(slots, stop): Plan, hit| {
            let mut o = conclude((slots.clone(), stop.clone()), &results, hit, shared);
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
        let deadline = self.opts.timeout.map(|t| start + t.saturating_sub(spent));
        let mut stats = crate::bab::search::SearchStats::default();
        let mut verdict = stop.map_or(Verdict::Verified, Verdict::Falsified);
        for &s in slots.iter().filter(|&&s| !results[s].1) {
            match self.search(work[s], &results[s].0, deadline, &mut stats) {
                Ok(crate::bab::search::Search::Proved) => {}
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

    /// Counterexamples found before the analysis (`attack_first`), one entry
    /// per sub-problem: the box centre in float32, then PGD on every disjunct.
    pub(crate) fn attack_before(&self, sps: &[&SubProblem], deadline: Option<Instant>) -> Vec<Option<Counterexample>> {
        let centres = sps.par_iter().map(|sp| falsify_centre(self.net, sp)).collect();
        let mut hits = self.confirmed(sps, centres);
        let targets: Vec<Target<'_>> = (0..sps.len())
            .filter(|&g| hits[g].is_none())
            .flat_map(|g| (0..sps[g].unsafe_region.len()).map(move |d| (g, d)))
            .map(|(group, disjunct)| Target { sp: sps[group], disjunct, group, start: Start::Centre })
            .collect();
        let found = self.attack_or_nothing(&targets, sps.len(), deadline);
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
    fn attack_or_nothing(
        &self,
        targets: &[Target<'_>],
        groups: usize,
        deadline: Option<Instant>,
    ) -> Vec<Option<Counterexample>> {
        self.attack_batch(targets, groups, self.opts.attack_steps, deadline).unwrap_or_else(|_| vec![None; groups])
    }

    /// After the analysis: PGD on the first unproved sub-problem of each
    /// property, its three weakest disjuncts, all properties in one batch.
    fn attack_after(
        &self,
        plans: &[Result<Plan, AnalysisError>],
        work: &[&SubProblem],
        results: &[SlotResult],
        deadline: Option<Instant>,
    ) -> Vec<Option<Counterexample>> {
        if self.opts.attack_first || self.opts.attack_steps == 0 {
            return vec![None; plans.len()];
        }
        let mut targets = Vec::new();
        for (group, plan) in plans.iter().enumerate() {
            let Ok((slots, _)) = plan else { continue };
            if let Some(&s) = slots.iter().find(|&&s| !results[s].1) {
                for disjunct in crate::attack::check::weakest_disjuncts(work[s], &results[s].0, 3) {
                    for restart in 0..=self.opts.attack_restarts as u32 {
                        let start = if restart == 0 { Start::Centre } else { Start::Random(restart) };
                        targets.push(Target { sp: work[s], disjunct, group, start });
                    }
                }
            }
        }
        self.attack_or_nothing(&targets, plans.len(), deadline)
    }

    /// Both passes for a batch of sub-problems: forward intervals and the
    /// output rows; then, for the sub-problems still open, refinement of
    /// their unstable ReLU inputs and the output rows again.
    pub(crate) fn analyze_subproblems(
        &self,
        sps: &[&SubProblem],
        deadline: Option<Instant>,
    ) -> Result<Vec<SlotResult>, AnalysisError> {
        Ok(self.analyze_state(sps, &[], None, deadline)?.0)
    }

    /// [`Analyzer::analyze_subproblems`] for search leaves (see [`Within`]);
    /// also returns every open slot's final node bounds (none for a proved
    /// slot) and the rows' β. `gate`, where given, is the search's
    /// refinement gate (`gate.rs`).
    pub(crate) fn analyze_within(
        &self,
        sps: &[&SubProblem],
        within: &[Within<'_, T>],
        gate: Option<&RefineGate>,
        deadline: Option<Instant>,
    ) -> Result<Searched<T>, AnalysisError> {
        let (res, st, duals) = self.analyze_state(sps, within, gate, deadline)?;
        // Only open slots are split further: a proved one's bounds are not copied.
        let bounds = (0..sps.len())
            .map(|s| {
                st.iter()
                    .filter(|_| !res[s].1)
                    .flat_map(|st| &st.bounds)
                    .map(|b| {
                        let n = b.lo.len() / sps.len();
                        (b.lo[s * n..(s + 1) * n].to_vec(), b.hi[s * n..(s + 1) * n].to_vec())
                    })
                    .collect()
            })
            .collect();
        Ok((res, bounds, duals))
    }

    /// The two passes, returning the run state (none for no sub-problems).
    fn analyze_state(
        &self,
        sps: &[&SubProblem],
        within: &[Within<'_, T>],
        gate: Option<&RefineGate>,
        deadline: Option<Instant>,
    ) -> Result<Analysed<T, B::Buf>, AnalysisError> {
        if sps.is_empty() {
            return Ok((Vec::new(), None, Duals::default()));
        }
        let inputs: Vec<&InputBox> = sps.iter().map(|s| &s.input).collect();
        let mut st = {
            let _p = crate::base::profile::span("forward_pass");
            let prior: Vec<Option<&NodeBounds<T>>> = within.iter().map(|w| w.prior).collect();
            self.forward_pass_within(&inputs, &prior)?
        };
        Self::check_consistent(&st)?;
        let all: Vec<usize> = (0..sps.len()).collect();
        let mut res = {
            let _p = crate::base::profile::span("prove_output");
            self.prove_output(&mut st, sps, &all, None, deadline)?
        };
        let open: Vec<usize> = all.into_iter().filter(|&s| !res[s].1).collect();
        let mut duals = Duals::default();
        if !open.is_empty() && self.opts.refine {
            {
                let _p = crate::base::profile::span("refine_all");
                let after: Vec<Option<usize>> = within.iter().map(|w| w.after).collect();
                let inter: Vec<_> = within.iter().map(|w| w.inter).collect();
                self.refine_all(&mut st, &open, &after, &inter, gate, deadline)?;
            }
            Self::check_consistent(&st)?;
            duals = self.choose_parameters(&st, sps, &open, within, &res);
            if !duals.slopes.is_empty() {
                self.set_slopes(&mut st, &duals.slopes)?;
            }
            let _p = crate::base::profile::span("prove_output");
            let get = |s: usize, h: usize| {
                let (Some(w), Some(b)) = (within.get(s), duals.betas.get(&(s, h))) else { return Vec::new() };
                w.splits
                    .iter()
                    .zip(b)
                    .filter(|(_, b)| **b > 0.0)
                    .map(|(sp, &b)| (sp.node, sp.neuron, if sp.active { -b } else { b }))
                    .collect()
            };
            let again = self.prove_output(&mut st, sps, &open, Some(&get), deadline)?;
            for (&s, (l2, p2)) in open.iter().zip(again) {
                let lbs: Vec<f64> = res[s].0.iter().zip(&l2).map(|(a, b)| a.max(*b)).collect();
                // A disjunct either pass proved is proved.
                let proved = p2 || crate::base::property::unproved_disjuncts(&sps[s].unsafe_region, &lbs).is_empty();
                res[s] = (lbs, proved);
            }
        }
        Ok((res, Some(st), duals))
    }
}

/// What a search leaf brings to its analysis: bounds known to hold over
/// its domain (its parent's final ones, with a ReLU split's clamp: every
/// node's bounds are intersected with them, and a contradiction proves the
/// leaf), the last node whose bounds equal its parent's (refinement starts
/// after it), and its ReLU split constraints (Lagrangian terms of its
/// output rows, `lagrange.rs`).
pub(crate) struct Within<'p, T> {
    pub prior: Option<&'p NodeBounds<T>>,
    pub after: Option<usize>,
    pub splits: &'p [SplitConstraint],
    /// A starting β per half-space of the leaf (its parent's, warm start).
    pub betas: &'p [Option<Vec<f64>>],
    /// Starting lower slopes (its parent's).
    pub slopes: Option<&'p Slopes>,
    /// The lower slopes its refinement uses per layer (its search root's,
    /// `tighten.rs`).
    pub inter: Option<&'p LayerSlopes>,
}

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// Without prior bounds, contradicting bounds are a bug, never a proof.
    fn check_consistent(st: &RunState<T, B::Buf>) -> Result<(), AnalysisError> {
        match st.empty.iter().position(|&e| e) {
            Some(s) if !st.within => {
                let msg = format!("inconsistent bounds in batch slot {s} without prior bounds");
                Err(crate::base::backend::BackendError::Failure(msg).into())
            }
            _ => Ok(()),
        }
    }
}

/// A property's verdict from its sub-problems' results, in order: the
/// first unproved one decides (by the attack's `hit`, if any); a
/// counterexample found before the analysis decides once every earlier
/// sub-problem is proved.
fn conclude((slots, stop): Plan, results: &[SlotResult], hit: Option<Counterexample>, seconds: f64) -> Outcome {
    let mut verdict = stop.map_or(Verdict::Verified, Verdict::Falsified);
    if slots.iter().any(|&s| !results[s].1) {
        verdict = hit.map_or(Verdict::Unknown, Verdict::Falsified);
    }
    let lower_bounds = slots.first().map(|&s| results[s].0.clone()).unwrap_or_default();
    Outcome { verdict, lower_bounds, seconds, search: None }
}
