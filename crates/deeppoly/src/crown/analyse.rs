//! Both passes for a batch of sub-problems, with the α/β parameters of
//! their output rows chosen in between: forward intervals and the output
//! rows; then, for the sub-problems still open, refinement of their
//! unstable ReLU inputs, the choice of slopes and β (`duals.rs`), and the
//! output rows again.

use crate::base::analyzer::{AnalysisError, Analyzer};
use crate::base::backend::Backend;
use crate::base::bounds::{LoHi, NodeBounds};
use crate::base::budget::Budget;
use crate::base::property::{InputBox, SubProblem};
use crate::base::relax::{LayerSlopes, Slopes};
use crate::crown::lagrange::SplitConstraint;
use crate::gpupoly::forward::RunState;
use crate::gpupoly::passes::{LayerGate, SlotResult};
use polycert_interval::Fp;
use std::collections::HashMap;

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

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// Both passes for a batch of sub-problems: forward intervals and the
    /// output rows; then, for the sub-problems still open, refinement of
    /// their unstable ReLU inputs and the output rows again.
    pub(crate) fn analyze_subproblems(
        &self,
        sps: &[&SubProblem],
        budget: Budget,
    ) -> Result<Vec<SlotResult>, AnalysisError> {
        Ok(self.analyze_state(sps, &[], None, budget)?.0)
    }

    /// [`Analyzer::analyze_subproblems`] for search leaves (see [`Within`]);
    /// also returns every open slot's final node bounds (none for a proved
    /// slot) and the rows' β. `gate`, where given, is the search's
    /// refinement gate (`bab/gate.rs`).
    pub(crate) fn analyze_within(
        &self,
        sps: &[&SubProblem],
        within: &[Within<'_, T>],
        gate: Option<&dyn LayerGate>,
        budget: Budget,
    ) -> Result<Searched<T>, AnalysisError> {
        let (res, st, duals) = self.analyze_state(sps, within, gate, budget)?;
        // Only open slots are split further: a proved one's bounds are not copied.
        let bounds = (0..sps.len())
            .map(|s| {
                st.iter()
                    .filter(|_| !res[s].proved)
                    .flat_map(|st| &st.bounds)
                    .map(|b| {
                        let n = b.lo.len() / sps.len();
                        LoHi { lo: b.lo[s * n..(s + 1) * n].to_vec(), hi: b.hi[s * n..(s + 1) * n].to_vec() }
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
        gate: Option<&dyn LayerGate>,
        budget: Budget,
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
        // By default the outputs are proved before the refinement only where
        // the result steers what follows: the optimised slopes' rows, and
        // search leaves (their inherited bounds often prove them). Else, as
        // GPUPoly, the refinement comes first.
        let leaves = within.iter().any(|w| w.prior.is_some());
        let first = leaves || self.opts.passes.first_output.unwrap_or(self.opts.crown.optimize_slopes);
        let mut res = if first || !self.opts.passes.refine {
            let _p = crate::base::profile::span("prove_output");
            self.prove_output(&mut st, sps, &all, None, budget)?
        } else {
            unproved(sps)
        };
        let open: Vec<usize> = all.into_iter().filter(|&s| !res[s].proved).collect();
        let mut duals = Duals::default();
        if !open.is_empty() && self.opts.passes.refine {
            {
                let _p = crate::base::profile::span("refine_all");
                let after: Vec<Option<usize>> = within.iter().map(|w| w.after).collect();
                let inter: Vec<_> = within.iter().map(|w| w.inter).collect();
                self.refine_all(&mut st, &open, &after, &inter, gate, budget)?;
            }
            Self::check_consistent(&st)?;
            duals = self.choose_parameters(&st, sps, &open, within, &res, budget);
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
            let again = self.prove_output(&mut st, sps, &open, Some(&get), budget)?;
            for (&s, SlotResult { lower: l2, proved: p2 }) in open.iter().zip(again) {
                let lbs: Vec<f64> = res[s].lower.iter().zip(&l2).map(|(a, b)| a.max(*b)).collect();
                // A disjunct either pass proved is proved.
                let proved = p2 || crate::base::property::unproved_disjuncts(&sps[s].unsafe_region, &lbs).is_empty();
                res[s] = SlotResult { lower: lbs, proved };
            }
        }
        Ok((res, Some(st), duals))
    }
}

/// Each sub-problem's result before any output pass: nothing proved.
fn unproved(sps: &[&SubProblem]) -> Vec<SlotResult> {
    let m = |sp: &SubProblem| sp.unsafe_region.iter().map(|c| c.len()).sum::<usize>();
    sps.iter().map(|sp| SlotResult { lower: vec![f64::NEG_INFINITY; m(sp)], proved: false }).collect()
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
