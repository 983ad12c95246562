//! Optimised slopes for a ReLU search's intermediate bounds (α-CROWN's α
//! for intermediate layers, shared over a layer's ends of one sign).
//!
//! DeepPoly bounds each unstable ReLU input with the relaxation's own lower
//! slopes. On deep MLPs those bounds are loose, and every later layer
//! inherits the looseness (256x6 MNIST: the last three layers wholly
//! unstable). Here, at a search's root, each layer in turn gets two tables
//! of lower slopes for the ReLUs before it, one for its lower ends and one
//! for its upper ends, chosen on the host (`lagrange::layer_slopes`), and is
//! refined again with them. Every leaf of the search refines its layers
//! with the tables that gained most (`Within::inter`), so a split's effect
//! on later layers is bounded with them too.
//!
//! **Why it is sound.** The host only picks the slopes. The bounds come from
//! the backend's sound backsubstitution with the slopes in the relaxation
//! tables (any slope in `[0, 1]` is a valid lower line), and a new bound only
//! replaces a looser one.

use crate::base::analyzer::{AnalysisError, Analyzer};
use crate::base::backend::Backend;
use crate::base::bounds::NodeBounds;
use crate::base::budget::Budget;
use crate::base::ir::Op;
use crate::base::ir::{Network, NodeId};
use crate::base::options::CrownOptions;
use crate::base::property::InputBox;
use crate::base::relax::ReluLower;
use crate::base::relax::unstable;
use crate::base::relax::{LayerSlopes, Slopes};
use crate::crown::lagrange::{Adam, SlotBounds, free_slopes, relaxation_slopes};
use crate::crown::relaxed_bound::{Offsets, relaxed_bound, rounding_offsets};
use crate::gpupoly::forward::RunState;
use polycert_interval::Fp;
use rayon::prelude::*;

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// A ReLU search root's node bounds, both passes' (DeepPoly) tightened
    /// with optimised slopes, and the slopes its leaves refine with (the
    /// tables that gain at least `CrownOptions::layer_leaf_gain`).
    pub(crate) fn root_prior(
        &self,
        input: &InputBox,
        budget: Budget,
    ) -> Result<(NodeBounds<T>, LayerSlopes), AnalysisError> {
        let mut st = self.refined_root(input, None, budget)?;
        let (mut inter, gains) = self.tighten_intermediate(&mut st, budget)?;
        for (t, g) in inter.iter_mut().zip(gains) {
            for (t, g) in t.iter_mut().zip(g) {
                if g < self.opts.crown.layer_leaf_gain {
                    *t = None;
                }
            }
        }
        Ok((st.into_bounds(), inter))
    }

    /// [`Analyzer::node_bounds`] tightened as a ReLU search's root is (see
    /// the module's notes), within `budget`.
    pub fn tightened_node_bounds(
        &self,
        input: &InputBox,
        budget: Budget,
    ) -> Result<Vec<crate::base::bounds::LoHi<f64>>, AnalysisError> {
        Ok(crate::base::bounds::bounds_f64(self.root_prior(input, budget)?.0))
    }

    /// Layer by layer, the slopes of a one-slot state's unstable ReLU
    /// inputs and their gains, each layer refined again with them (and the
    /// later layers after it) before the next is chosen.
    fn tighten_intermediate(
        &self,
        st: &mut RunState<T, B::Buf>,
        budget: Budget,
    ) -> Result<(LayerSlopes, Vec<[f64; 2]>), AnalysisError> {
        let _p = crate::base::profile::span("tighten");
        let net = self.net;
        let nodes = net.nodes();
        let lower = self.opts.passes.relu_lower;
        let offsets = rounding_offsets::<T>(net, &vec![None; nodes.len()]);
        let mut inter: LayerSlopes = vec![[None, None]; nodes.len()];
        let mut gains = vec![[0.0; 2]; nodes.len()];
        // The first ReLU's input depends on no slope: skip it.
        let relus: Vec<usize> = (0..nodes.len()).filter(|&r| nodes[r].op == Op::Relu).skip(1).collect();
        for r in relus {
            budget.check()?;
            let p = nodes[r].inputs[0];
            let (lo, hi) = (&st.bounds[p].lo, &st.bounds[p].hi);
            let unstable: Vec<usize> = (0..lo.len()).filter(|&i| unstable(lo[i], hi[i])).collect();
            if unstable.is_empty() || unstable.len() > self.opts.crown.layer_max_unstable {
                continue;
            }
            let tables = {
                let _p = crate::base::profile::span("tighten.slopes");
                let view: SlotBounds<'_, T> = st.bounds.iter().map(|b| (&b.lo[..], &b.hi[..])).collect();
                let ends = |s: f64| unstable.iter().map(|&i| (i, s)).collect::<Vec<_>>();
                let tune = (lower, &self.opts.crown, budget);
                [1.0, -1.0].map(|s| layer_slopes(net, (&view, &offsets), p, &ends(s), tune))
            };
            if tables.iter().all(Option::is_none) {
                continue;
            }
            gains[p] = [0, 1].map(|k| tables[k].as_ref().map_or(0.0, |t| t.1));
            inter[p] = tables.map(|t| t.map(|t| t.0));
            self.refine_all(st, &[0], &[Some(p - 1)], &[Some(&inter)], None, budget)?;
        }
        Ok((inter, gains))
    }
}

/// Lower slopes shared by the ends `(i, s)` of node `p` (bounds of `s·x_i`;
/// one sign per call, α-CROWN's α shared over a layer): Adam on the sum of
/// their relaxed bounds from the relaxation's own slopes, over the unstable
/// ReLUs before `p`. On the 4- and 6-layer MNIST nets the shared slopes
/// narrow a layer's unstable inputs within 2% of what one α per end does,
/// at the cost of one sound backsubstitution per sign instead of one batch
/// slot per end. With the slopes, their gain: how much they raise the sum
/// of the ends' relaxed bounds, as a share of its magnitude with the
/// relaxation's own. `None`: no free slope there, or no gain. Past the
/// deadline it stops with the best slopes so far; `tune` gives Adam's steps
/// and step size.
pub(crate) fn layer_slopes<T: Fp>(
    net: &Network,
    (bounds, offsets): (&SlotBounds<'_, T>, &Offsets),
    p: NodeId,
    ends: &[(usize, f64)],
    (lower, tune, budget): (ReluLower, &CrownOptions, Budget),
) -> Option<(Slopes, f64)> {
    let free = free_slopes(net, bounds, p);
    if free.is_empty() || ends.is_empty() {
        return None;
    }
    let n = net.node(p).shape.numel();
    let mut alpha = relaxation_slopes(net, bounds, lower);
    let mut flat: Vec<f64> = free.iter().map(|&(id, j)| alpha[id][j]).collect();
    let mut adam = Adam::new(free.len(), tune.lr_alpha, (0.0, 1.0));
    let (mut first, mut best) = (None, None::<(f64, Slopes)>);
    for t in 1..=tune.steps + 1 {
        let evals: Option<Vec<(f64, Slopes)>> = ends
            .par_iter()
            .map(|&(i, s)| {
                let mut c = vec![0.0; n];
                c[i] = s;
                relaxed_bound(net, (bounds, offsets), (p, &c), &[], &[], Some(&alpha), lower).map(|r| (r.0, r.2))
            })
            .collect();
        let evals = evals?;
        let l: f64 = evals.iter().map(|e| e.0).sum();
        let base = *first.get_or_insert(l);
        if l > base && best.as_ref().is_none_or(|b| l > b.0) {
            best = Some((l, alpha.clone()));
        }
        if t > tune.steps || budget.expired() {
            break;
        }
        let grad: Vec<f64> = free.iter().map(|&(id, j)| evals.iter().map(|e| e.1[id][j]).sum()).collect();
        adam.step(t, &mut flat, &grad);
        for (&(id, j), &v) in free.iter().zip(&flat) {
            alpha[id][j] = v;
        }
    }
    let base = first?;
    best.map(|(l, a)| (a, (l - base) / base.abs().max(f64::MIN_POSITIVE)))
}
