//! Falsification inside the search. Every counterexample passes float32
//! inference (`attack::check_f32`) and [`Analyzer::confirm`].
//!
//! - **Input leaves:** the leaf's centre, then PGD from it (a small box
//!   finds what its parent's attack missed), and, within the corner share
//!   below, PGD from the corner that minimises the leaf's relaxed bound.
//! - **ReLU leaves** share their parent's box, so its centre and PGD are the
//!   root's. Instead, PGD starts at the input corner that minimises the
//!   leaf's relaxed bound (with its β and slopes): that point lies where the
//!   leaf's activation pattern nearly closes the disjunct, which a start at
//!   the centre may never reach (on a flat network, a few hundredths of the
//!   margin from the centre in every direction). These attacks take at most
//!   `AttackOptions::corner_share` of the search's time.
//! - **Exact leaves** (no unstable ReLU left): their minimising corner.
//! - **Restarts in an input search:** each round,
//!   `AttackOptions::search_restarts` random starts in the search's box,
//!   `search_restart_steps` steps each, with fresh seeds, within the same
//!   share of the time. A conjunction's region can
//!   be a sliver that PGD from a centre never reaches and that the bounds
//!   isolate only at the search's end (ACAS Xu 1_5 property 2: on a face of
//!   the box, about 1% of one input's range wide; in a host experiment about
//!   one random start in 300 ended there, and no run from the centre).

use crate::attack::check::Schedule;
use crate::attack::check::falsify_centre;
use crate::attack::pgd::{Start, Target};
use crate::base::analyzer::Analyzer;
use crate::base::backend::Backend;
use crate::base::bounds::NodeBounds;
use crate::base::budget::Budget;
use crate::base::property::{Counterexample, SubProblem};
use crate::base::relax::Slopes;
use crate::crown::lagrange::{SlotBounds, SplitConstraint};
use polycert_interval::Fp;
use std::time::{Duration, Instant};

/// A leaf's view for its corner: the sub-problem, its half-spaces' lower
/// bounds, node bounds, split constraints, and per half-space β and slopes.
pub(crate) struct LeafView<'v, T> {
    pub sp: &'v SubProblem,
    pub lbs: &'v [f64],
    pub bounds: &'v NodeBounds<T>,
    pub splits: &'v [SplitConstraint],
    pub betas: &'v [Option<Vec<f64>>],
    pub slopes: Option<&'v Slopes>,
}

/// Time spent in the corner attacks against the search's.
pub(crate) struct Share {
    since: Instant,
    spent: Duration,
    /// The share they may take (`AttackOptions::corner_share`).
    most: f64,
    /// Seconds they may take besides (`AttackOptions::restart_grace`).
    grace: f64,
}

impl Share {
    pub fn new(most: f64, grace: f64) -> Self {
        Self { since: Instant::now(), spent: Duration::ZERO, most, grace }
    }

    /// Whether an attack may run now: the first round's, and then while
    /// the attacks have taken under their share of the time so far and
    /// the grace.
    fn allows(&self) -> bool {
        self.spent.is_zero() || self.spent.as_secs_f64() < self.most * self.since.elapsed().as_secs_f64() + self.grace
    }
}

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// A confirmed counterexample at an open input leaf: its centre, else
    /// PGD on its weakest disjunct (all open leaves of the round in one batch).
    pub(crate) fn falsify_leaves(&self, sps: &[&SubProblem], lbs: &[&[f64]], budget: Budget) -> Option<Counterexample> {
        for sp in sps {
            if let Some(c) = falsify_centre(self.net, sp).filter(|c| self.confirm(sp, &c.input)) {
                return Some(c);
            }
        }
        let targets: Vec<Target<'_>> = sps
            .iter()
            .zip(lbs)
            .enumerate()
            .flat_map(|(g, (sp, l))| {
                crate::base::property::weakest_disjuncts(sp, l, 1).into_iter().map(move |d| Target {
                    sp,
                    disjunct: d,
                    group: g,
                    start: Start::Centre,
                })
            })
            .collect();
        let hits = self.attack_batch(&targets, sps.len(), self.opts.attack.steps, budget).ok()?;
        hits.into_iter().flatten().next()
    }

    /// PGD from `AttackOptions::search_restarts` random points of an input
    /// search's box, on each of its disjuncts (seeds from `seed` on, which it advances),
    /// within the time share.
    pub(crate) fn restart_root(
        &self,
        sp: &SubProblem,
        (share, seed): (&mut Share, &mut u32),
        budget: Budget,
    ) -> Option<Counterexample> {
        if self.opts.attack.steps == 0 || sp.unsafe_region.is_empty() || !share.allows() {
            return None;
        }
        let t0 = Instant::now();
        let _p = crate::base::profile::span("search.restarts");
        let per = self.opts.attack.search_restarts.div_ceil(sp.unsafe_region.len());
        let mut targets = Vec::with_capacity(per * sp.unsafe_region.len());
        for d in 0..sp.unsafe_region.len() {
            for _ in 0..per {
                *seed = seed.wrapping_add(1).max(1);
                targets.push(Target { sp, disjunct: d, group: 0, start: Start::Random(*seed) });
            }
        }
        let hits =
            self.attack_scheduled(&targets, 1, Schedule::Fine(self.opts.attack.search_restart_steps), budget).ok();
        share.spent += t0.elapsed();
        hits?.into_iter().flatten().next()
    }

    /// A leaf with no unstable ReLU left has an exact relaxation: its
    /// minimising corner is tried as a counterexample.
    pub(crate) fn exact_leaf_corner(&self, v: &LeafView<'_, T>) -> Option<Counterexample> {
        let (_, x) = leaf_corner(self.net, self.opts.passes.relu_lower, v)?;
        let xf = v.sp.input.to_f32_inside(&x);
        crate::attack::check::check_f32(self.net, v.sp, &xf).filter(|c| self.confirm(v.sp, &c.input))
    }

    /// PGD from the minimising corners of the weakest open ReLU leaves of a
    /// round (at most `AttackOptions::corner_leaves`, one batch), within
    /// the time share.
    pub(crate) fn attack_corners(
        &self,
        views: &[LeafView<'_, T>],
        share: &mut Share,
        budget: Budget,
    ) -> Option<Counterexample> {
        use rayon::prelude::*;
        if self.opts.attack.steps == 0 || views.is_empty() || !share.allows() {
            return None;
        }
        let t0 = Instant::now();
        let _p = crate::base::profile::span("search.attack_corners");
        let mut order: Vec<usize> = (0..views.len()).collect();
        let weakest = |i: usize| crate::base::property::weakest(&views[i].sp.unsafe_region, views[i].lbs);
        order.sort_by(|&a, &b| weakest(a).total_cmp(&weakest(b)));
        order.truncate(self.opts.attack.corner_leaves);
        let (net, lower) = (self.net, self.opts.passes.relu_lower);
        let corners: Vec<(usize, usize, Vec<f64>)> =
            order.par_iter().filter_map(|&i| leaf_corner(net, lower, &views[i]).map(|(d, x)| (i, d, x))).collect();
        let targets: Vec<Target<'_>> = corners
            .iter()
            .enumerate()
            .map(|(g, (i, d, x))| Target { sp: views[*i].sp, disjunct: *d, group: g, start: Start::At(x) })
            .collect();
        let hits = self.attack_batch(&targets, targets.len(), self.opts.attack.steps, budget).ok();
        share.spent += t0.elapsed();
        hits?.into_iter().flatten().next()
    }
}

/// The corner minimising the relaxed bound of the leaf's nearest
/// half-space, and that half-space's disjunct.
fn leaf_corner<T: Fp>(
    net: &crate::base::ir::Network,
    lower: crate::base::relax::ReluLower,
    v: &LeafView<'_, T>,
) -> Option<(usize, Vec<f64>)> {
    let d = *crate::base::property::weakest_disjuncts(v.sp, v.lbs, 1).first()?;
    let (h, half) = crate::base::property::nearest_halfspace(v.sp, v.lbs)?;
    let beta = v.betas.get(h).cloned().flatten().unwrap_or_default();
    let view: SlotBounds<'_, T> = v.bounds.iter().map(|b| (&b.lo[..], &b.hi[..])).collect();
    let x = crate::crown::relaxed_bound::minimising_corner(net, &view, &half.c, (v.splits, &beta), v.slopes, lower)?;
    Some((d, x))
}
