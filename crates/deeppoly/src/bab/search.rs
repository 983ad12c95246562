//! Branch and bound. A sub-problem the analysis leaves open is split into
//! leaves, analysed together as one batch (a row is (leaf, neuron)), depth
//! first, until every leaf is proved (the sub-problem is), a leaf gives a
//! confirmed counterexample, or the budget runs out. Each leaf starts from
//! its parent's final node bounds (they hold over it) and keeps only the
//! disjuncts its parent did not prove.
//!
//! - **Input splitting** (networks with at most `SearchOptions::split_inputs`
//!   inputs, ACAS Xu-style): a leaf is cut in two along the input with the
//!   largest smear `|∂m/∂x_i|·w_i` (the gradient, at the box centre, of the
//!   half-space nearest to closing its weakest disjunct, times the box's
//!   width there). Both halves are closed at the midpoint, so their union is
//!   the box. A leaf's centre or PGD point that float32 inference and
//!   [`Analyzer::confirm`] accept falsifies the sub-problem.
//! - **ReLU splitting** (any other network with ReLUs): a leaf is split on
//!   one unstable ReLU (`branch.rs`); the two children's split constraints
//!   live in their bounds, and only the layers after the split are refined
//!   again.

use crate::attack::falsify::LeafView;
use crate::bab::stabilize::Rung;
pub(crate) use crate::bab::tally::RootTally;
use crate::bab::workers::Round;
use crate::base::analyzer::{AnalysisError, Analyzer};
use crate::base::backend::{Arith, Backend};
use crate::base::bounds::NodeBounds;
use crate::base::budget::Budget;
use crate::base::ir::Op;
use crate::base::options::Stabilize;
use crate::base::property::{Counterexample, SearchStats, SubProblem, closed_margin, unproved_disjuncts, weakest};
use crate::base::relax::{LayerSlopes, Slopes};
use crate::crown::analyse::Within;
use crate::crown::lagrange::SplitConstraint;
use crate::gpupoly::passes::{LayerGate, SlotResult};
use polycert_interval::Fp;
use std::sync::Arc;

/// How a search ended.
pub(crate) enum Search {
    Proved,
    Falsified(Counterexample),
    /// The deadline (`timed_out`) or the leaf limit ran out, or a leaf
    /// cannot be split.
    Open {
        timed_out: bool,
    },
}

/// How the search splits a leaf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Branching {
    Inputs,
    Relus,
}

/// Per half-space of a leaf: the β to start from, if any.
pub(crate) type Warm = Vec<Option<Vec<f64>>>;

/// What a parent's rows ended with, for its children to start from.
pub(crate) struct Start {
    /// Per half-space β.
    pub(crate) betas: Warm,
    /// The lower slopes.
    pub(crate) slopes: Option<Arc<Slopes>>,
}

/// A leaf of the search: its box and open disjuncts, the bounds it starts
/// from, and the last layer whose bounds it shares with its parent.
pub(crate) struct Leaf<T> {
    /// Shared by the children of one parent (a ReLU split keeps the box).
    pub(crate) sp: Arc<SubProblem>,
    /// Its parent's final bounds (a root: the root's). A ReLU child's
    /// are clamped by its last split only when it is analysed, so
    /// siblings share them while open.
    pub(crate) prior: Option<Arc<NodeBounds<T>>>,
    pub(crate) after: Option<usize>,
    pub(crate) splits: Vec<SplitConstraint>,
    /// Per half-space of `sp`: the β its parent's row ended with.
    pub(crate) betas: Warm,
    /// The lower slopes its parent's rows ended with.
    pub(crate) slopes: Option<Arc<Slopes>>,
    /// Its search root's slopes for refinement (`tighten.rs`).
    pub(crate) inter: Option<Arc<LayerSlopes>>,
    /// Its parent's weakest bound (input splitting takes the weakest first).
    pub(crate) weakest: f64,
    /// `(parent, candidate)` when its parent tried several splits: only the
    /// candidate whose children end better is kept.
    pub(crate) pick: Option<(usize, usize)>,
    /// The search root it descends from.
    pub(crate) root: usize,
    /// Its share of the bytes of the bounds and slopes it inherits
    /// (`SearchOptions::memory`).
    pub(crate) held: usize,
    /// It holds its root's bounds instead of its parent's: every split is
    /// clamped in when it is analysed.
    pub(crate) from_root: bool,
}

impl<T> Leaf<T> {
    /// A search's root: the sub-problem alone, nothing inherited.
    pub(crate) fn root(sp: SubProblem, root: usize) -> Self {
        Self {
            sp: Arc::new(sp),
            prior: None,
            after: None,
            splits: Vec::new(),
            betas: Vec::new(),
            slopes: None,
            inter: None,
            weakest: f64::NEG_INFINITY,
            pick: None,
            root,
            held: 0,
            from_root: false,
        }
    }

    /// Drops what it inherits from its parent for its root's bounds `root`
    /// (sound: they hold over every leaf's domain); its splits are clamped
    /// in when it is analysed.
    pub(crate) fn keep_root_bounds(&mut self, root: Option<Arc<NodeBounds<T>>>) {
        (self.prior, self.after, self.slopes, self.held, self.from_root) = (root, None, None, 0, true);
    }
}

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// How properties the analysis leaves open are searched, if at all.
    pub(crate) fn branching(&self) -> Option<Branching> {
        let n = self.net.input_shape().numel();
        if self.opts.passes.arith != Arith::Point || n == 0 {
            None
        } else if n <= self.opts.search.split_inputs {
            Some(Branching::Inputs)
        } else if self.opts.search.split_relus && self.net.nodes().iter().any(|n| n.op == Op::Relu) {
            Some(Branching::Relus)
        } else {
            None
        }
    }

    /// `budget` as a search of kind `how` spends it: a search with neither
    /// a deadline nor a leaf limit of its own stops at `SearchOptions::max_leaves`
    /// (input splitting) or `SearchOptions::max_relu_leaves` (ReLU splitting)
    /// leaves, and says so in its [`SearchStats::leaf_limit`].
    pub(crate) fn leaf_limited(&self, budget: Budget, how: Branching) -> Budget {
        if budget.deadline().is_some() || budget.leaves().is_some() {
            return budget;
        }
        budget.with_leaves(match how {
            Branching::Inputs => self.opts.search.max_leaves,
            Branching::Relus => self.opts.search.max_relu_leaves,
        })
    }

    /// Splits sub-problem `sp` until it is proved, falsified, or `budget`
    /// runs out (see [`Analyzer::leaf_limited`]). `lbs`: the
    /// lower bounds of its half-spaces from the analysis before the search
    /// (empty: none), which its roots report until they are analysed.
    pub(crate) fn search(
        &self,
        sp: &SubProblem,
        lbs: &[f64],
        budget: Budget,
        stats: &mut SearchStats,
    ) -> Result<Search, AnalysisError> {
        let root_bound = weakest(&sp.unsafe_region, lbs);
        let Some(how) = self.branching() else {
            // Nothing to split: its root stays open.
            stats.best_bound = stats.best_bound.min(root_bound);
            return Ok(Search::Open { timed_out: false });
        };
        let mut start = None;
        let stabilize = match self.opts.search.stabilize.when {
            _ if how != Branching::Relus || self.opts.search.optimize_intermediate => false,
            Stabilize::Off => false,
            Stabilize::On => true,
            Stabilize::Auto => match budget.deadline() {
                Some(_) if self.stages_stabilization() => match self.quick_rung(sp, lbs, budget, stats)? {
                    Rung::Decided(r) => return Ok(r),
                    Rung::Stabilize(s) => {
                        start = s;
                        true
                    }
                },
                _ => false,
            },
        };
        // The root's bounds, tightened once: every disjunct and leaf
        // inherits them.
        let prior = match how {
            Branching::Relus if self.opts.search.optimize_intermediate => {
                Some(self.root_prior(&sp.input, budget).map(|(b, s)| (b, Some(Arc::new(s)))))
            }
            Branching::Relus if stabilize => {
                Some(self.stable_prior(&sp.input, budget, start.as_deref()).map(|b| (b, None)))
            }
            _ => None,
        };
        let (prior, inter) = match prior.transpose() {
            Err(AnalysisError::Timeout) => {
                stats.branching = "ReLU";
                stats.best_bound = stats.best_bound.min(root_bound);
                stats.leaves_open += sp.unsafe_region.len().max(1);
                return Ok(Search::Open { timed_out: true });
            }
            r => r?.map_or((None, None), |(b, s)| (Some(Arc::new(b)), s)),
        };
        self.search_from((sp, lbs), (prior, inter), budget, stats, &mut RootTally::default())
    }

    /// [`Analyzer::search`] of `sp` (its half-spaces' bounds `lbs`, as
    /// there) from the roots' bounds `prior` (they hold over the box) and
    /// their leaves' refinement slopes `inter`; `tally` tells which roots
    /// (a ReLU search's disjuncts) were proved.
    pub(crate) fn search_from(
        &self,
        (sp, lbs): (&SubProblem, &[f64]),
        (prior, inter): (Option<Arc<NodeBounds<T>>>, Option<Arc<LayerSlopes>>),
        budget: Budget,
        stats: &mut SearchStats,
        tally: &mut RootTally,
    ) -> Result<Search, AnalysisError> {
        let Some(how) = self.branching() else {
            // Nothing to split: its root stays open.
            stats.best_bound = stats.best_bound.min(weakest(&sp.unsafe_region, lbs));
            return Ok(Search::Open { timed_out: false });
        };
        let cap = self.batch_capacity().max(2);
        stats.branching = match how {
            Branching::Inputs => "input",
            Branching::Relus => "ReLU",
        };
        let budget = self.leaf_limited(budget, how);
        // The root is analysed again, for its node bounds. A ReLU search
        // takes each disjunct as its own root: its rows then get their own
        // slopes, and their searches split different ReLUs.
        let roots: Vec<(SubProblem, f64)> = match how {
            Branching::Relus if sp.unsafe_region.len() > 1 => {
                crate::base::property::disjunct_bounds(&sp.unsafe_region, lbs)
                    .map(|(d, r, _)| {
                        let region = vec![sp.unsafe_region[d].clone()];
                        let bound = weakest(&region, lbs.get(r).unwrap_or_default());
                        (SubProblem { input: sp.input.clone(), unsafe_region: region }, bound)
                    })
                    .collect()
            }
            _ => vec![(sp.clone(), weakest(&sp.unsafe_region, lbs))],
        };
        tally.outstanding = vec![1; roots.len()];
        tally.analysed = vec![0; roots.len()];
        tally.stuck = vec![false; roots.len()];
        let open: Vec<Leaf<T>> = roots
            .into_iter()
            .enumerate()
            .map(|(k, (r, weakest))| Leaf { prior: prior.clone(), inter: inter.clone(), weakest, ..Leaf::root(r, k) })
            .collect();
        let plan = crate::bab::workers::Plan { sp, how, cap, budget, min_round: self.opts.search.min_round };
        self.run_workers(&plan, open, stats, tally)
    }

    /// One round of a search worker: `leaves` analysed as one batch, and
    /// what became of them (`Err(Timeout)`: they stay open).
    pub(crate) fn round(
        &self,
        leaves: Vec<Leaf<T>>,
        w: &mut crate::bab::workers::WorkerState,
        plan: &crate::bab::workers::Plan<'_>,
        proofs_only: bool,
    ) -> Result<Round<T>, AnalysisError> {
        let (how, budget) = (plan.how, plan.budget);
        let refs: Vec<&SubProblem> = leaves.iter().map(|l| &*l.sp).collect();
        let clamped = clamped_priors(&leaves);
        let within = within_of(&leaves, &clamped);
        let (res, bounds, mut duals) =
            self.analyze_within(&refs, &within, w.gate.as_ref().map(|g| g as &dyn LayerGate), budget)?;
        let keep = w.picks.keep(&leaves, &res);
        let todo: Vec<usize> = (0..leaves.len()).filter(|&i| keep[i] && !res[i].proved).collect();
        let mut round = settled(&leaves, &keep, &res, &refs);
        if todo.is_empty() {
            return Ok(round);
        }
        // Each open leaf keeps the disjuncts it has not proved.
        let parts: Vec<_> = todo.iter().map(|&i| open_part(refs[i], &res[i].lower)).collect();
        let sps: Vec<&SubProblem> = parts.iter().map(|p| &p.sp).collect();
        let lbs: Vec<&[f64]> = parts.iter().map(|p| &p.lbs[..]).collect();
        // ReLU leaves share their box: their centre and PGD are the root's.
        let crate::bab::workers::Restarts { share, seed } = &mut w.restarts;
        if how == Branching::Inputs
            && let Some(c) =
                self.falsify_leaves(&sps, &lbs, budget).or_else(|| self.restart_root(plan.sp, (share, seed), budget))
        {
            round.falsified = Some(c);
            return Ok(round);
        }
        let weak: Vec<f64> = sps.iter().zip(&lbs).map(|(sp, l)| weakest(&sp.unsafe_region, l)).collect();
        let mut bounds: Vec<Option<NodeBounds<T>>> = bounds.into_iter().map(Some).collect();
        let children = match how {
            Branching::Inputs => {
                let slopes: Vec<Option<Arc<Slopes>>> =
                    todo.iter().map(|i| duals.slopes.remove(i).map(Arc::new)).collect();
                let open = InputOpen { sps: &sps, lbs: &lbs, todo: &todo, slopes: &slopes, weak: &weak };
                self.input_round_children(open, &mut bounds, &leaves, (&mut w.share, proofs_only, budget))?
            }
            Branching::Relus => {
                // Each open half-space's β, to start its children's search from.
                let warm: Vec<Start> = todo
                    .iter()
                    .zip(&parts)
                    .map(|(&i, OpenPart { kept, .. })| {
                        let b = kept.iter().map(|&h| duals.betas.get(&(i, h)).cloned()).collect();
                        Start { betas: b, slopes: duals.slopes.remove(&i).map(Arc::new) }
                    })
                    .collect();
                let views: Vec<LeafView<'_, T>> = (0..todo.len())
                    .filter_map(|k| {
                        Some(LeafView {
                            sp: sps[k],
                            lbs: lbs[k],
                            bounds: bounds[todo[k]].as_ref()?,
                            splits: &leaves[todo[k]].splits,
                            betas: &warm[k].betas,
                            slopes: warm[k].slopes.as_deref(),
                        })
                    })
                    .collect();
                let found = if proofs_only { None } else { self.attack_corners(&views, &mut w.share, budget) };
                match found {
                    Some(c) => Err(c),
                    None => {
                        self.relu_children(&sps, &lbs, &todo, &mut bounds, (&leaves, &warm, proofs_only), &mut w.picks)
                    }
                }
            }
        };
        // A leaf that cannot be split stays open: the sub-problem cannot be
        // proved any more, but the other leaves may still falsify it.
        record_children(&mut round, children, &todo, &weak, &leaves);
        Ok(round)
    }
}

/// What of a leaf stays open: its sub-problem without the disjuncts its
/// analysis proved, the lower bounds of the half-spaces left, and their
/// indices among the leaf's.
struct OpenPart {
    sp: SubProblem,
    lbs: Vec<f64>,
    kept: Vec<usize>,
}

/// `sp`'s open part, from its half-spaces' lower bounds `lbs`.
fn open_part(sp: &SubProblem, lbs: &[f64]) -> OpenPart {
    let open = unproved_disjuncts(&sp.unsafe_region, lbs);
    let region = open.iter().map(|(d, _, _)| sp.unsafe_region[*d].clone()).collect();
    let kept: Vec<usize> = open.into_iter().flat_map(|(_, r, _)| r).collect();
    let l = kept.iter().map(|&h| lbs.get(h).copied().unwrap_or(f64::NEG_INFINITY)).collect();
    OpenPart { sp: SubProblem { input: sp.input.clone(), unsafe_region: region }, lbs: l, kept }
}

/// Per leaf with splits, its prior clamped by the splits it lacks.
fn clamped_priors<T: Fp>(leaves: &[Leaf<T>]) -> Vec<Option<NodeBounds<T>>> {
    leaves
        .iter()
        .map(|l| {
            // Its parent's bounds hold every split but the last; its root's, none.
            let from = if l.from_root { 0 } else { l.splits.len().saturating_sub(1) };
            let p = l.prior.as_deref().filter(|_| !l.splits.is_empty())?;
            Some(crate::bab::branch::child_bounds(p, &l.splits[from..]))
        })
        .collect()
}

/// Per leaf, what its analysis starts from: its clamped prior, else its own.
fn within_of<'l, T>(leaves: &'l [Leaf<T>], clamped: &'l [Option<NodeBounds<T>>]) -> Vec<Within<'l, T>> {
    leaves
        .iter()
        .zip(clamped)
        .map(|(l, c)| Within {
            prior: c.as_ref().or(l.prior.as_deref()),
            after: l.after,
            splits: &l.splits,
            betas: &l.betas,
            slopes: l.slopes.as_deref(),
            inter: l.inter.as_deref(),
        })
        .collect()
}

/// A round's analysed leaves: which are done, how many proved, and the
/// smallest margin a kept leaf closed a disjunct by.
fn settled<T>(leaves: &[Leaf<T>], keep: &[bool], res: &[SlotResult], refs: &[&SubProblem]) -> Round<T> {
    Round {
        // A proved or dropped leaf is done; an open one once split.
        done: leaves.iter().enumerate().map(|(i, l)| (l.root, !keep[i] || res[i].proved)).collect(),
        proved: (0..leaves.len()).filter(|&i| keep[i] && res[i].proved).count(),
        closed: (0..leaves.len())
            .filter(|&i| keep[i])
            .map(|i| closed_margin(&refs[i].unsafe_region, &res[i].lower))
            .fold(f64::INFINITY, f64::min),
        ..Round::default()
    }
}

/// The round's children, or the counterexample found instead.
fn record_children<T>(round: &mut Round<T>, children: Children<T>, todo: &[usize], weak: &[f64], leaves: &[Leaf<T>]) {
    match children {
        Ok((children, stuck)) => {
            let weak_of = |i: usize| todo.iter().position(|&t| t == i).map_or(f64::NEG_INFINITY, |k| weak[k]);
            round.stuck_weakest = stuck.iter().map(|&i| weak_of(i)).fold(f64::INFINITY, f64::min);
            round.stuck = stuck.into_iter().map(|i| leaves[i].root).collect();
            round.split = todo.iter().map(|&i| leaves[i].root).collect();
            round.children = children;
        }
        Err(c) => round.falsified = Some(c),
    }
}

/// A round's new leaves and the leaves that could not be split, or the
/// counterexample found instead.
type Children<T> = Result<(Vec<Leaf<T>>, Vec<usize>), Counterexample>;

/// The open leaves of an input round: open parts, their lower bounds,
/// their indices among the round's leaves, slopes and weakest bounds.
struct InputOpen<'r> {
    sps: &'r [&'r SubProblem],
    lbs: &'r [&'r [f64]],
    todo: &'r [usize],
    slopes: &'r [Option<Arc<Slopes>>],
    weak: &'r [f64],
}

impl<B: Backend<T>, T: Fp> Analyzer<'_, B, T> {
    /// An input round's children, after PGD from the corner that minimises
    /// each open leaf's bound: a sliver on a face of the box lies near it
    /// once the leaf is small, where PGD from the centre may never go.
    fn input_round_children(
        &self,
        o: InputOpen<'_>,
        bounds: &mut [Option<NodeBounds<T>>],
        leaves: &[Leaf<T>],
        (share, proofs_only, budget): (&mut crate::attack::falsify::Share, bool, Budget),
    ) -> Result<Children<T>, AnalysisError> {
        let views: Vec<LeafView<'_, T>> = (0..o.todo.len())
            .filter_map(|k| {
                let bounds = bounds[o.todo[k]].as_ref()?;
                let slopes = o.slopes[k].as_deref();
                Some(LeafView { sp: o.sps[k], lbs: o.lbs[k], bounds, splits: &[], betas: &[], slopes })
            })
            .collect();
        let found = if proofs_only { None } else { self.attack_corners(&views, share, budget) };
        Ok(match found {
            Some(c) => Err(c),
            None => Ok(self.input_children(o.sps, o.lbs, o.todo, bounds, (o.slopes, o.weak), leaves)?),
        })
    }
}
