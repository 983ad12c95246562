//! Batched analysis: the sub-problems of many properties go through one
//! forward pass, and their rows share the backsubstitution GEMMs (a row is
//! a (property, neuron) pair). Each keeps its own box, bounds, relaxations,
//! magnitudes, early termination and compaction; a property proved by the
//! first pass leaves the batch before the refinement pass.

use crate::analysis::{AnalysisError, Analyzer, falsify_centre};
use crate::backend::{Arith, Backend};
use crate::property::{Counterexample, InputBox, Outcome, Property, SubProblem, Verdict};
use polycert_interval::Fp;
use std::time::Instant;

/// The most properties analysed together.
pub const MAX_BATCH: usize = 256;

/// Values per neuron and batch slot that a run state keeps: host and device
/// bounds, relaxation or bias tables, `r` and `|W|·r`.
const VALUES_PER_NEURON: usize = 16;

/// Per property: the sub-problems to analyse (slots of the batch), and the
/// counterexample that stopped the list early, if any.
type Plan = (Vec<usize>, Option<Counterexample>);

/// Lower bounds of every half-space row of a sub-problem, and whether all
/// its disjuncts are proved infeasible.
pub(crate) type SlotResult = (Vec<f64>, bool);

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// How many properties [`Analyzer::analyze_batch`] should take at once:
    /// `Options::batch`, else as many run states as a quarter of the memory
    /// budget holds, at most the backend's [`Backend::batch_hint`]. The
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
        (self.budget() / 4 / per_slot).clamp(1, self.backend.batch_hint().clamp(1, MAX_BATCH))
    }

    /// Decides a property. Sub-problems are analysed in order; the property
    /// is verified only when all of them are.
    pub fn analyze(&self, prop: &Property) -> Result<Outcome, AnalysisError> {
        let mut v = self.run_batch(&[prop])?;
        v.pop().expect("one outcome per property")
    }

    /// Decides several properties together (see the module docs), with the
    /// verdicts that [`Analyzer::analyze`] gives each alone. A batch that
    /// times out or fails as a whole is re-run one property at a time, each
    /// with its own timeout. `seconds` is the batch's time shared evenly,
    /// plus the property's own attack.
    pub fn analyze_batch(&self, props: &[&Property]) -> Vec<Result<Outcome, AnalysisError>> {
        match self.run_batch(props) {
            Ok(v) => v,
            Err(e) if props.len() == 1 => vec![Err(e)],
            Err(_) => props.iter().map(|p| self.analyze(p)).collect(),
        }
    }

    /// The outer error is the batch's (timeout, backend); the inner ones are
    /// per property (bad dimensions).
    fn run_batch(&self, props: &[&Property]) -> Result<Vec<Result<Outcome, AnalysisError>>, AnalysisError> {
        let start = Instant::now();
        let deadline = self.opts.timeout.map(|t| start + t);
        let (n_in, n_out) = (self.net.input_shape().numel(), self.net.output_shape().numel());
        let mut work: Vec<&SubProblem> = Vec::new();
        let mut plans: Vec<Result<Plan, AnalysisError>> = Vec::with_capacity(props.len());
        for p in props {
            if let Err(e) = p.check_dims(n_in, n_out) {
                plans.push(Err(e.into()));
                continue;
            }
            let (mut slots, mut stop) = (Vec::new(), None);
            for sp in &p.subproblems {
                stop = falsify_centre(self.net, sp);
                if stop.is_none() && self.opts.attack_first && self.opts.attack_steps > 0 {
                    let all: Vec<usize> = (0..sp.unsafe_region.len()).collect();
                    stop = crate::attack::pgd(self.net, sp, &all, self.opts.attack_steps, deadline);
                }
                if stop.is_some() {
                    break;
                }
                slots.push(work.len());
                work.push(sp);
            }
            plans.push(Ok((slots, stop)));
        }
        let results = match self.analyze_subproblems(&work, deadline) {
            Err(AnalysisError::Timeout) if props.len() == 1 => {
                let seconds = start.elapsed().as_secs_f64();
                return Ok(vec![Ok(Outcome { verdict: Verdict::Timeout, lower_bounds: Vec::new(), seconds })]);
            }
            r => r?,
        };
        let shared = start.elapsed().as_secs_f64() / props.len().max(1) as f64;
        // The attacks on unproved properties run on the host, one property at
        // a time (each attacks its disjuncts in parallel): attacking several
        // properties at once measured no faster, on 2 and on 16 cores.
        Ok(plans.into_iter().map(|plan| plan.map(|p| self.conclude(p, &work, &results, shared, deadline))).collect())
    }

    /// A property's verdict from its sub-problems' results, in order: the
    /// first unproved one is attacked and decides; a counterexample found
    /// before the analysis decides once every earlier one is proved.
    fn conclude(
        &self,
        (slots, stop): Plan,
        work: &[&SubProblem],
        results: &[SlotResult],
        shared: f64,
        deadline: Option<Instant>,
    ) -> Outcome {
        let t0 = Instant::now();
        let mut first_bounds: Option<Vec<f64>> = None;
        let mut verdict = stop.map_or(Verdict::Verified, Verdict::Falsified);
        for &s in &slots {
            let (lbs, proved) = &results[s];
            first_bounds.get_or_insert_with(|| lbs.clone());
            if !proved {
                let order = crate::attack::weakest_disjuncts(work[s], lbs, 3);
                verdict = match self.opts.attack_steps {
                    // Already attacked (every disjunct) before the analysis.
                    _ if self.opts.attack_first => Verdict::Unknown,
                    0 => Verdict::Unknown,
                    n => crate::attack::pgd(self.net, work[s], &order, n, deadline)
                        .map_or(Verdict::Unknown, Verdict::Falsified),
                };
                break;
            }
        }
        let seconds = shared + t0.elapsed().as_secs_f64();
        Outcome { verdict, lower_bounds: first_bounds.unwrap_or_default(), seconds }
    }

    /// Both passes for a batch of sub-problems: forward intervals and the
    /// output rows; then, for the sub-problems still open, refinement of
    /// their unstable ReLU inputs and the output rows again.
    pub(crate) fn analyze_subproblems(
        &self,
        sps: &[&SubProblem],
        deadline: Option<Instant>,
    ) -> Result<Vec<SlotResult>, AnalysisError> {
        if sps.is_empty() {
            return Ok(Vec::new());
        }
        let inputs: Vec<&InputBox> = sps.iter().map(|s| &s.input).collect();
        let mut st = self.forward_pass(&inputs)?;
        let all: Vec<usize> = (0..sps.len()).collect();
        let mut res = self.prove_output(&mut st, sps, &all, deadline)?;
        let open: Vec<usize> = all.into_iter().filter(|&s| !res[s].1).collect();
        if !open.is_empty() && self.opts.refine {
            self.refine_all(&mut st, &open, deadline)?;
            let again = self.prove_output(&mut st, sps, &open, deadline)?;
            for (&s, (l2, p2)) in open.iter().zip(again) {
                let lbs = res[s].0.iter().zip(&l2).map(|(a, b)| a.max(*b)).collect();
                res[s] = (lbs, p2);
            }
        }
        Ok(res)
    }
}
