//! Branch and bound over the input box (input splitting), for networks with
//! few inputs (ACAS Xu-style). A sub-problem the analysis leaves open is cut
//! in two along the input with the largest smear `|∂m/∂x_i|·w_i` (the
//! gradient, at the box centre, of the half-space nearest to closing its
//! weakest disjunct, times the box's width there), and the open leaves are
//! analysed together as one batch. Both halves are closed at the midpoint, so
//! their union is the box: the sub-problem is proved when every leaf is. A
//! leaf's centre or PGD point that float32 inference and
//! [`Analyzer::confirm`] accept falsifies it.

use crate::analysis::{AnalysisError, Analyzer, falsify_centre};
use crate::backend::{Arith, Backend};
use crate::batch::{NodeBounds, SlotResult};
use crate::pgd::Target;
use crate::property::{Counterexample, SubProblem};
use polycert_interval::Fp;
use std::rc::Rc;
use std::time::Instant;

/// Progress of a search: leaves proved, leaves left open, and the weakest
/// open leaf's bound (the largest lower bound among the half-spaces of its
/// weakest disjunct; the sub-problem is proved once every leaf's is > 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct SearchStats {
    pub leaves_proved: usize,
    pub leaves_open: usize,
    pub best_bound: f64,
}

/// How a search ended.
pub(crate) enum Search {
    Proved,
    Falsified(Counterexample),
    /// The deadline (`timed_out`) or the leaf budget ran out, or a leaf
    /// cannot be halved.
    Open {
        timed_out: bool,
    },
}

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// Whether properties the analysis leaves open go to input splitting.
    pub(crate) fn splits_inputs(&self) -> bool {
        let n = self.net.input_shape().numel();
        self.opts.arith == Arith::Point && n > 0 && n <= self.opts.split_inputs
    }

    /// Splits sub-problem `sp` (whose analysis gave `first`) until it is
    /// proved, falsified, or the deadline (with a timeout) or
    /// `Options::max_leaves` (without) is reached.
    pub(crate) fn search(
        &self,
        sp: &SubProblem,
        first: &SlotResult,
        deadline: Option<Instant>,
        stats: &mut SearchStats,
    ) -> Result<Search, AnalysisError> {
        let cap = self.batch_capacity().max(2);
        // Each leaf carries its parent's final node bounds (they hold over it).
        let mut open: Vec<(SubProblem, Option<Rc<NodeBounds<T>>>)> =
            halves(sp, self.split_dims(&[sp], &[first])?[0]).into_iter().map(|h| (h, None)).collect();
        if open.is_empty() {
            return Ok(Search::Open { timed_out: false });
        }
        let mut analysed = 1;
        while !open.is_empty() {
            let late = deadline.is_some_and(|d| Instant::now() >= d);
            if late || (self.opts.timeout.is_none() && analysed >= self.opts.max_leaves) {
                stats.leaves_open += open.len();
                return Ok(Search::Open { timed_out: late });
            }
            // Depth first (the newest leaves), so the open list stays short.
            let leaves = open.split_off(open.len().saturating_sub(cap));
            analysed += leaves.len();
            let refs: Vec<&SubProblem> = leaves.iter().map(|(sp, _)| sp).collect();
            let prior: Vec<Option<&NodeBounds<T>>> = leaves.iter().map(|(_, b)| b.as_deref()).collect();
            let (res, bounds) = match self.analyze_within(&refs, &prior, deadline) {
                Err(AnalysisError::Timeout) => {
                    stats.leaves_open += open.len() + leaves.len();
                    return Ok(Search::Open { timed_out: true });
                }
                r => r?,
            };
            let todo: Vec<usize> = (0..leaves.len()).filter(|&i| !res[i].1).collect();
            stats.leaves_proved += leaves.len() - todo.len();
            if todo.is_empty() {
                continue;
            }
            let todo_sps: Vec<&SubProblem> = todo.iter().map(|&i| refs[i]).collect();
            let todo_res: Vec<&SlotResult> = todo.iter().map(|&i| &res[i]).collect();
            if let Some(c) = self.falsify_leaves(&todo_sps, &todo_res, deadline) {
                return Ok(Search::Falsified(c));
            }
            stats.best_bound = todo_sps
                .iter()
                .zip(&todo_res)
                .map(|(sp, r)| weakest(&sp.unsafe_region, &r.0))
                .fold(f64::INFINITY, f64::min);
            let mut bounds: Vec<Option<NodeBounds<T>>> = bounds.into_iter().map(Some).collect();
            for ((sp, d), &i) in todo_sps.iter().zip(self.split_dims(&todo_sps, &todo_res)?).zip(&todo) {
                let h = halves(sp, d);
                if h.is_empty() {
                    stats.leaves_open += open.len() + 1;
                    return Ok(Search::Open { timed_out: false });
                }
                let parent = bounds[i].take().map(Rc::new);
                open.extend(h.into_iter().map(|h| (h, parent.clone())));
            }
        }
        Ok(Search::Proved)
    }

    /// A confirmed counterexample at an open leaf: its centre, else PGD on
    /// its weakest disjunct (all open leaves of the round in one batch: on
    /// small boxes it finds what it missed on their parent).
    fn falsify_leaves(
        &self,
        sps: &[&SubProblem],
        res: &[&SlotResult],
        deadline: Option<Instant>,
    ) -> Option<Counterexample> {
        for sp in sps {
            if let Some(c) = falsify_centre(self.net, sp).filter(|c| self.confirm(sp, &c.input)) {
                return Some(c);
            }
        }
        let targets: Vec<Target<'_>> = sps
            .iter()
            .zip(res)
            .enumerate()
            .flat_map(|(g, (sp, r))| {
                crate::attack::weakest_disjuncts(sp, &r.0, 1).into_iter().map(move |d| Target {
                    sp,
                    disjunct: d,
                    group: g,
                })
            })
            .collect();
        let hits = self.attack_batch(&targets, sps.len(), self.opts.attack_steps, deadline).ok()?;
        hits.into_iter().flatten().next()
    }

    /// Per leaf, the input to cut: the largest smear of the half-space
    /// nearest to closing the weakest disjunct, else the widest input.
    fn split_dims(&self, sps: &[&SubProblem], res: &[&SlotResult]) -> Result<Vec<usize>, AnalysisError> {
        let (n_in, n_out) = (self.net.input_shape().numel(), self.net.output_shape().numel());
        let (mut xs, mut seeds) = (Vec::with_capacity(sps.len() * n_in), Vec::with_capacity(sps.len() * n_out));
        for (sp, r) in sps.iter().zip(res) {
            xs.extend(sp.input.centre());
            let h = nearest_halfspace(sp, &r.0);
            seeds.extend(h.map_or(vec![0.0; n_out], |h| h.c.clone()));
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
                    .filter(|&i| w[i] > 0.0)
                    .max_by(|&a, &b| smear(a).partial_cmp(&smear(b)).unwrap_or(std::cmp::Ordering::Equal))
                    .unwrap_or(0)
            })
            .collect())
    }
}

/// The two halves of `sp` cut at the midpoint of input `d` (none when the
/// midpoint is an end: the box cannot be cut there).
fn halves(sp: &SubProblem, d: usize) -> Vec<SubProblem> {
    let (l, h) = (sp.input.lo[d], sp.input.hi[d]);
    let mid = l + (h - l) / 2.0;
    if !(mid > l && mid < h) {
        return Vec::new();
    }
    let (mut a, mut b) = (sp.clone(), sp.clone());
    a.input.hi[d] = mid;
    b.input.lo[d] = mid;
    vec![a, b]
}

/// The largest lower bound among the half-spaces of each disjunct, the
/// smallest over the disjuncts that are not closed (`lbs` flattened).
fn weakest(region: &[Vec<crate::property::Halfspace>], lbs: &[f64]) -> f64 {
    let mut at = 0;
    let mut worst = f64::INFINITY;
    for conj in region {
        let best = lbs
            .get(at..at + conj.len())
            .map_or(f64::NEG_INFINITY, |s| s.iter().copied().fold(f64::NEG_INFINITY, f64::max));
        at += conj.len();
        if best <= 0.0 {
            worst = worst.min(best);
        }
    }
    worst
}

/// In the weakest open disjunct, the half-space with the largest lower bound.
fn nearest_halfspace<'s>(sp: &'s SubProblem, lbs: &[f64]) -> Option<&'s crate::property::Halfspace> {
    let d = *crate::attack::weakest_disjuncts(sp, lbs, 1).first()?;
    let at: usize = sp.unsafe_region[..d].iter().map(|c| c.len()).sum();
    let conj = &sp.unsafe_region[d];
    let k = (0..conj.len()).max_by(|&a, &b| {
        let (x, y) = (
            lbs.get(at + a).copied().unwrap_or(f64::NEG_INFINITY),
            lbs.get(at + b).copied().unwrap_or(f64::NEG_INFINITY),
        );
        x.total_cmp(&y)
    })?;
    conj.get(k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::property::{InputBox, Property};

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
