//! Branch and bound. A sub-problem the analysis leaves open is split into
//! leaves, analysed together as one batch (a row is (leaf, neuron)), depth
//! first, until every leaf is proved (the sub-problem is), a leaf gives a
//! confirmed counterexample, or the budget runs out. Each leaf starts from
//! its parent's final node bounds (they hold over it) and keeps only the
//! disjuncts its parent did not prove.
//!
//! - **Input splitting** (networks with at most `Options::split_inputs`
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
use crate::bab::picks::Picks;
use crate::bab::stabilize::Rung;
pub(crate) use crate::bab::tally::RootTally;
use crate::bab::workers::Round;
use crate::base::analyzer::{AnalysisError, Analyzer};
use crate::base::backend::{Arith, Backend};
use crate::base::bounds::NodeBounds;
use crate::base::ir::Op;
use crate::base::options::Stabilize;
use crate::base::property::{
    Counterexample, SearchStats, SubProblem, closed_margin, nearest_halfspace, unproved_disjuncts, weakest,
};
use crate::base::relax::{LayerSlopes, Slopes};
use crate::crown::analyse::Within;
use crate::crown::lagrange::SplitConstraint;
use crate::gpupoly::passes::LayerGate;
use polycert_interval::Fp;
use std::sync::Arc;
use std::time::Instant;

/// The most splits of a leaf that refines with its root's slope tables
/// (`tighten.rs`); deeper leaves keep what they inherit through their prior
/// bounds. The tables are the root's, and deep leaves' own bounds have moved
/// away from it: on an H200, 256x4 prop_3_0.03 took 98,555 leaves with 12,
/// 114,978 with 6 and 138,305 without tables; with 6 a 256x6 search proved
/// no leaf in 20 s.
const TABLE_DEPTH: usize = 12;

/// How a search ended.
pub(crate) enum Search {
    Proved,
    Falsified(Counterexample),
    /// The deadline (`timed_out`) or the leaf budget ran out, or a leaf
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
type Warm = Vec<Option<Vec<f64>>>;

/// What a parent's rows ended with: per half-space β, and the slopes.
type Start = (Warm, Option<Arc<Slopes>>);

/// A leaf of the search: its box and open disjuncts, the bounds it starts
/// from, and the last layer whose bounds it shares with its parent.
pub(crate) struct Leaf<T> {
    /// Shared by the children of one parent (a ReLU split keeps the box).
    pub(crate) sp: Arc<SubProblem>,
    /// Its parent's final bounds (a root: the root's). A ReLU child's
    /// are clamped by its last split only when it is analysed, so
    /// siblings share them while open.
    pub(crate) prior: Option<Arc<NodeBounds<T>>>,
    after: Option<usize>,
    splits: Vec<SplitConstraint>,
    /// Per half-space of `sp`: the β its parent's row ended with.
    betas: Warm,
    /// The lower slopes its parent's rows ended with.
    slopes: Option<Arc<Slopes>>,
    /// Its search root's slopes for refinement (`tighten.rs`).
    inter: Option<Arc<LayerSlopes>>,
    /// Its parent's weakest bound (input splitting takes the weakest first).
    pub(crate) weakest: f64,
    /// `(parent, candidate)` when its parent tried several splits: only the
    /// candidate whose children end better is kept.
    pub(crate) pick: Option<(usize, usize)>,
    /// The search root it descends from.
    pub(crate) root: usize,
    /// Its share of the bytes of the bounds and slopes it inherits
    /// (`Options::search_memory`).
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
        if self.opts.arith != Arith::Point || n == 0 {
            None
        } else if n <= self.opts.split_inputs {
            Some(Branching::Inputs)
        } else if self.opts.split_relus && self.net.nodes().iter().any(|n| n.op == Op::Relu) {
            Some(Branching::Relus)
        } else {
            None
        }
    }

    /// Splits sub-problem `sp` until it is proved, falsified, or the deadline
    /// (with a timeout) or the leaf budget (without) is reached. `lbs`: the
    /// lower bounds of its half-spaces from the analysis before the search
    /// (empty: none), which its roots report until they are analysed.
    pub(crate) fn search(
        &self,
        sp: &SubProblem,
        lbs: &[f64],
        deadline: Option<Instant>,
        stats: &mut SearchStats,
    ) -> Result<Search, AnalysisError> {
        let root_bound = weakest(&sp.unsafe_region, lbs);
        let Some(how) = self.branching() else {
            // Nothing to split: its root stays open.
            stats.best_bound = stats.best_bound.min(root_bound);
            return Ok(Search::Open { timed_out: false });
        };
        let mut start = None;
        let stabilize = match self.opts.stabilize {
            _ if how != Branching::Relus || self.opts.optimize_intermediate => false,
            Stabilize::Off => false,
            Stabilize::On => true,
            Stabilize::Auto => match deadline {
                Some(d) if self.stages_stabilization() => match self.quick_rung(sp, lbs, d, stats)? {
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
            Branching::Relus if self.opts.optimize_intermediate => {
                Some(self.root_prior(&sp.input, deadline).map(|(b, s)| (b, Some(Arc::new(s)))))
            }
            Branching::Relus if stabilize => {
                Some(self.stable_prior(&sp.input, deadline, start.as_deref()).map(|b| (b, None)))
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
        self.search_from((sp, lbs), (prior, inter), deadline, stats, &mut RootTally::default())
    }

    /// [`Analyzer::search`] of `sp` (its half-spaces' bounds `lbs`, as
    /// there) from the roots' bounds `prior` (they hold over the box) and
    /// their leaves' refinement slopes `inter`; `tally` tells which roots
    /// (a ReLU search's disjuncts) were proved.
    pub(crate) fn search_from(
        &self,
        (sp, lbs): (&SubProblem, &[f64]),
        (prior, inter): (Option<Arc<NodeBounds<T>>>, Option<Arc<LayerSlopes>>),
        deadline: Option<Instant>,
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
        let budget = match how {
            Branching::Inputs => self.opts.max_leaves,
            Branching::Relus => self.opts.max_relu_leaves,
        };
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
        let plan = crate::bab::workers::Plan { sp, how, cap, budget, deadline };
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
        let (how, deadline) = (plan.how, plan.deadline);
        let refs: Vec<&SubProblem> = leaves.iter().map(|l| &*l.sp).collect();
        let clamped: Vec<Option<NodeBounds<T>>> = leaves
            .iter()
            .map(|l| {
                // Its parent's bounds hold every split but the last; its root's, none.
                let from = if l.from_root { 0 } else { l.splits.len().saturating_sub(1) };
                let p = l.prior.as_deref().filter(|_| !l.splits.is_empty())?;
                Some(crate::bab::branch::child_bounds(p, &l.splits[from..]))
            })
            .collect();
        let within: Vec<Within<'_, T>> = leaves
            .iter()
            .zip(&clamped)
            .map(|(l, c)| Within {
                prior: c.as_ref().or(l.prior.as_deref()),
                after: l.after,
                splits: &l.splits,
                betas: &l.betas,
                slopes: l.slopes.as_deref(),
                inter: l.inter.as_deref(),
            })
            .collect();
        let (res, bounds, mut duals) =
            self.analyze_within(&refs, &within, w.gate.as_ref().map(|g| g as &dyn LayerGate), deadline)?;
        let keep = w.picks.keep(&leaves, &res);
        let todo: Vec<usize> = (0..leaves.len()).filter(|&i| keep[i] && !res[i].1).collect();
        let mut round = Round {
            // A proved or dropped leaf is done; an open one once split.
            done: leaves.iter().enumerate().map(|(i, l)| (l.root, !keep[i] || res[i].1)).collect(),
            proved: (0..leaves.len()).filter(|&i| keep[i] && res[i].1).count(),
            closed: (0..leaves.len())
                .filter(|&i| keep[i])
                .map(|i| closed_margin(&refs[i].unsafe_region, &res[i].0))
                .fold(f64::INFINITY, f64::min),
            ..Round::default()
        };
        if todo.is_empty() {
            return Ok(round);
        }
        // Each open leaf keeps the disjuncts it has not proved.
        let parts: Vec<_> = todo.iter().map(|&i| open_part(refs[i], &res[i].0)).collect();
        let sps: Vec<&SubProblem> = parts.iter().map(|p| &p.0).collect();
        let lbs: Vec<&[f64]> = parts.iter().map(|p| &p.1[..]).collect();
        // ReLU leaves share their box: their centre and PGD are the root's.
        if how == Branching::Inputs
            && let Some(c) = self
                .falsify_leaves(&sps, &lbs, deadline)
                .or_else(|| self.restart_root(plan.sp, (&mut w.restarts.0, &mut w.restarts.1), deadline))
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
                Ok(self.input_children(&sps, &lbs, &todo, &mut bounds, (&slopes, &weak), &leaves)?)
            }
            Branching::Relus => {
                // Each open half-space's β, to start its children's search from.
                let warm: Vec<Start> = todo
                    .iter()
                    .zip(&parts)
                    .map(|(&i, (_, _, kept))| {
                        let b = kept.iter().map(|&h| duals.betas.get(&(i, h)).cloned()).collect();
                        (b, duals.slopes.remove(&i).map(Arc::new))
                    })
                    .collect();
                let views: Vec<LeafView<'_, T>> = (0..todo.len())
                    .filter_map(|k| {
                        Some(LeafView {
                            sp: sps[k],
                            lbs: lbs[k],
                            bounds: bounds[todo[k]].as_ref()?,
                            splits: &leaves[todo[k]].splits,
                            betas: &warm[k].0,
                            slopes: warm[k].1.as_deref(),
                        })
                    })
                    .collect();
                let found = if proofs_only { None } else { self.attack_corners(&views, &mut w.share, deadline) };
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
        Ok(round)
    }

    /// Both halves of each open leaf, and the leaves that could not be halved.
    fn input_children(
        &self,
        sps: &[&SubProblem],
        lbs: &[&[f64]],
        todo: &[usize],
        bounds: &mut [Option<NodeBounds<T>>],
        (slopes, weak): (&[Option<Arc<Slopes>>], &[f64]),
        leaves: &[Leaf<T>],
    ) -> Result<(Vec<Leaf<T>>, Vec<usize>), AnalysisError> {
        let (mut out, mut stuck) = (Vec::with_capacity(2 * sps.len()), Vec::new());
        let dims = self.split_dims(sps, lbs)?;
        for ((((sp, d), &i), slopes), &weakest) in sps.iter().zip(dims).zip(todo).zip(slopes).zip(weak) {
            let h = halves(sp, d);
            if h.is_empty() {
                stuck.push(i);
                continue;
            }
            let root = leaves[i].root;
            let parent = bounds[i].take().map(Arc::new);
            let held = parent.as_deref().map_or(0, |b| inherited_bytes(b, slopes.as_deref())) / h.len();
            out.extend(h.into_iter().map(|sp| Leaf {
                sp: Arc::new(sp),
                prior: parent.clone(),
                after: None,
                splits: Vec::new(),
                betas: Vec::new(),
                slopes: slopes.clone(),
                inter: None,
                weakest,
                pick: None,
                root,
                held,
                from_root: false,
            }));
        }
        Ok((out, stuck))
    }

    /// Both sides of the chosen ReLU of each open leaf, and the leaves with
    /// no unstable ReLU left (or a counterexample one of them gives).
    fn relu_children(
        &self,
        sps: &[&SubProblem],
        lbs: &[&[f64]],
        todo: &[usize],
        bounds: &mut [Option<NodeBounds<T>>],
        (leaves, warm, proofs_only): (&[Leaf<T>], &[Start], bool),
        picks: &mut Picks,
    ) -> Result<(Vec<Leaf<T>>, Vec<usize>), Counterexample> {
        use rayon::prelude::*;
        let _p = crate::base::profile::span("branch.choose");
        let lower = self.opts.relu_lower;
        let net = self.net;
        // The leaves with bounds and an open half-space, a block of lanes
        // per backward pass (`babsr.rs`); the others have no candidate.
        let scored: Vec<(usize, crate::bab::babsr::LeafObjective<'_, T>)> = sps
            .iter()
            .zip(lbs)
            .zip(todo)
            .enumerate()
            .filter_map(|(k, ((sp, l), &i))| Some((k, (bounds[i].as_ref()?, &nearest_halfspace(sp, l)?.1.c[..]))))
            .collect();
        let mut chosen: Vec<Vec<crate::bab::branch::ReluSplit>> = vec![Vec::new(); sps.len()];
        // Blocks as full as keeps every thread busy.
        let block = scored.len().div_ceil(rayon::current_num_threads().max(1)).clamp(1, crate::bab::babsr::LANES);
        let blocks: Vec<Vec<Vec<crate::bab::branch::ReluSplit>>> = scored
            .par_chunks(block)
            .map(|block| {
                let leaves: Vec<crate::bab::babsr::LeafObjective<'_, T>> = block.iter().map(|&(_, x)| x).collect();
                crate::bab::branch::relu_candidates(net, &leaves, lower)
            })
            .collect();
        for (&(k, _), cands) in scored.iter().zip(blocks.into_iter().flatten()) {
            chosen[k] = cands;
        }
        let (mut out, mut stuck) = (Vec::with_capacity(2 * sps.len()), Vec::new());
        for ((((sp, cands), &i), warm), l) in sps.iter().zip(chosen).zip(todo).zip(warm).zip(lbs) {
            // The children's bound until they are analysed: their parent's.
            let parent_weakest = weakest(&sp.unsafe_region, l);
            let Some(b) = bounds[i].take() else {
                stuck.push(i);
                continue;
            };
            if cands.is_empty() {
                stuck.push(i);
                if proofs_only {
                    continue;
                }
                let (betas, slopes) = (&warm.0[..], warm.1.as_deref());
                let view = LeafView { sp, lbs: l, bounds: &b, splits: &leaves[i].splits, betas, slopes };
                match self.exact_leaf_corner(&view) {
                    Some(c) => return Err(c),
                    None => continue,
                }
            }
            picks.parents += 1;
            let cands = match picks.only() {
                Some(k) if cands.len() > 1 => vec![cands[k]],
                _ => cands,
            };
            // Every child shares these bounds until it is analysed.
            let held = inherited_bytes(&b, warm.1.as_deref()) / (2 * cands.len());
            let parent = Arc::new(b);
            let shared = Arc::new((*sp).clone());
            for (k, &s) in cands.iter().enumerate() {
                let pick = (cands.len() > 1).then_some((picks.parents, k));
                for active in [true, false] {
                    let mut splits = leaves[i].splits.clone();
                    splits.push(SplitConstraint { node: s.node, neuron: s.neuron, active });
                    let (prior, after, betas, slopes) =
                        (Some(parent.clone()), Some(s.node), warm.0.clone(), warm.1.clone());
                    let inter = leaves[i].inter.clone().filter(|_| splits.len() <= TABLE_DEPTH);
                    let sp = shared.clone();
                    let weakest = parent_weakest;
                    let root = leaves[i].root;
                    out.push(Leaf {
                        sp,
                        prior,
                        after,
                        splits,
                        betas,
                        slopes,
                        inter,
                        weakest,
                        pick,
                        root,
                        held,
                        from_root: false,
                    });
                }
            }
        }
        Ok((out, stuck))
    }

    /// Per leaf, the input to cut: the largest smear of the half-space
    /// nearest to closing the weakest disjunct, else the widest input.
    fn split_dims(&self, sps: &[&SubProblem], lbs: &[&[f64]]) -> Result<Vec<usize>, AnalysisError> {
        let (n_in, n_out) = (self.net.input_shape().numel(), self.net.output_shape().numel());
        let (mut xs, mut seeds) = (Vec::with_capacity(sps.len() * n_in), Vec::with_capacity(sps.len() * n_out));
        for (sp, l) in sps.iter().zip(lbs) {
            xs.extend(sp.input.centre());
            let h = nearest_halfspace(sp, l);
            seeds.extend(h.map_or(vec![0.0; n_out], |(_, h)| h.c.clone()));
        }
        // Gradients steer the search only; a backend failure falls back to widths.
        let grads = self.input_gradients(&xs, &seeds, sps.len()).unwrap_or_else(|_| vec![0.0; xs.len()]);
        Ok(sps
            .iter()
            .enumerate()
            .map(|(k, sp)| {
                let w: Vec<f64> = sp.input.lo.iter().zip(&sp.input.hi).map(|(l, h)| h - l).collect();
                let g = &grads[k * n_in..(k + 1) * n_in];
                let smear = |i: usize| (g[i].abs() * w[i], w[i]);
                (0..n_in)
                    .filter(|&i| midpoint(sp.input.lo[i], sp.input.hi[i]).is_some())
                    .max_by(|&a, &b| smear(a).partial_cmp(&smear(b)).unwrap_or(std::cmp::Ordering::Equal))
                    .unwrap_or(0)
            })
            .collect())
    }
}

/// `sp` without the disjuncts `lbs` (its half-spaces' lower bounds) prove,
/// the lower bounds of its half-spaces, and their indices in `lbs`.
fn open_part(sp: &SubProblem, lbs: &[f64]) -> (SubProblem, Vec<f64>, Vec<usize>) {
    let open = unproved_disjuncts(&sp.unsafe_region, lbs);
    let region = open.iter().map(|(d, _, _)| sp.unsafe_region[*d].clone()).collect();
    let kept: Vec<usize> = open.into_iter().flat_map(|(_, r, _)| r).collect();
    let l = kept.iter().map(|&h| lbs.get(h).copied().unwrap_or(f64::NEG_INFINITY)).collect();
    (SubProblem { input: sp.input.clone(), unsafe_region: region }, l, kept)
}

/// The two halves of `sp` cut at the midpoint of input `d` (none when the
/// midpoint is an end: the box cannot be cut there).
fn halves(sp: &SubProblem, d: usize) -> Vec<SubProblem> {
    let Some(mid) = midpoint(sp.input.lo[d], sp.input.hi[d]) else {
        return Vec::new();
    };
    let (mut a, mut b) = (sp.clone(), sp.clone());
    a.input.hi[d] = mid;
    b.input.lo[d] = mid;
    vec![a, b]
}

/// The midpoint of `[l, h]` where it lies strictly inside (an input that
/// can be cut there).
fn midpoint(l: f64, h: f64) -> Option<f64> {
    let mid = l + (h - l) / 2.0;
    (mid > l && mid < h).then_some(mid)
}

/// The bytes of a parent's node bounds `b` and slopes that its children
/// share (`Leaf::held`).
fn inherited_bytes<T>(b: &NodeBounds<T>, slopes: Option<&Slopes>) -> usize {
    let slopes = slopes.map_or(0, |s| s.iter().map(Vec::len).sum::<usize>() * std::mem::size_of::<f64>());
    b.iter().map(|(l, h)| l.len() + h.len()).sum::<usize>() * std::mem::size_of::<T>() + slopes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::property::{InputBox, Property};

    #[test]
    fn halves_cover_the_box_and_stop_at_float_resolution() {
        let p =
            Property::robustness("p", InputBox::new(vec![0.0, -1.0], vec![1.0, 3.0]).expect("box"), 0, 2).expect("p");
        let h = halves(&p.subproblems[0], 1);
        assert_eq!((h[0].input.lo[1], h[0].input.hi[1], h[1].input.lo[1], h[1].input.hi[1]), (-1.0, 1.0, 1.0, 3.0));
        assert_eq!((h[0].input.lo[0], h[1].input.hi[0]), (0.0, 1.0));
        let tiny = InputBox::new(vec![1.0], vec![1.0f64.next_up()]).expect("box");
        let q = Property::robustness("q", tiny, 0, 2).expect("q");
        assert!(halves(&q.subproblems[0], 0).is_empty());
    }
}
