//! A search's children: both halves of an input-split leaf's box, and both
//! sides of the ReLU that BaBSR's scores pick in a ReLU-split leaf.

use crate::attack::falsify::LeafView;
use crate::bab::babsr::{LeafDuals, LeafObjective};
use crate::bab::branch::ReluSplit;
use crate::bab::picks::Picks;
use crate::bab::search::{Leaf, Start};
use crate::base::analyzer::{AnalysisError, Analyzer};
use crate::base::backend::Backend;
use crate::base::bounds::NodeBounds;
use crate::base::property::{Counterexample, SubProblem, nearest_halfspace, weakest};
use crate::base::relax::Slopes;
use crate::crown::lagrange::SplitConstraint;
use polycert_interval::Fp;
use std::sync::Arc;

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// Both halves of each open leaf, and the leaves that could not be halved.
    pub(crate) fn input_children(
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
    pub(crate) fn relu_children(
        &self,
        sps: &[&SubProblem],
        lbs: &[&[f64]],
        todo: &[usize],
        bounds: &mut [Option<NodeBounds<T>>],
        (leaves, warm, proofs_only): (&[Leaf<T>], &[Start], bool),
        picks: &mut Picks,
    ) -> Result<(Vec<Leaf<T>>, Vec<usize>), Counterexample> {
        let _p = crate::base::profile::span("branch.choose");
        let chosen = self.babsr_choices((sps, lbs, todo), bounds, (leaves, warm));
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
                let (betas, slopes) = (&warm.betas[..], warm.slopes.as_deref());
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
            let held = inherited_bytes(&b, warm.slopes.as_deref()) / (2 * cands.len());
            let parent = Parent {
                sp,
                leaf: &leaves[i],
                bounds: Arc::new(b),
                warm,
                weakest: parent_weakest,
                held,
                table_depth: self.opts.search.table_depth,
            };
            out.extend(split_children(&parent, &cands, picks.parents));
        }
        Ok((out, stuck))
    }

    /// Per leaf, the ReLUs BaBSR's scores pick to split (none for a leaf
    /// without bounds or open half-space), scored a block of lanes per
    /// backward pass (`babsr.rs`).
    fn babsr_choices(
        &self,
        (sps, lbs, todo): (&[&SubProblem], &[&[f64]], &[usize]),
        bounds: &[Option<NodeBounds<T>>],
        (leaves, warm): (&[Leaf<T>], &[Start]),
    ) -> Vec<Vec<ReluSplit>> {
        use rayon::prelude::*;
        let lower = self.opts.passes.relu_lower;
        let net = self.net;
        let scored: Vec<(usize, LeafObjective<'_, T>, LeafDuals<'_>)> = sps
            .iter()
            .zip(lbs)
            .zip(todo)
            .enumerate()
            .filter_map(|(k, ((sp, l), &i))| {
                let (h, half) = nearest_halfspace(sp, l)?;
                let duals = if self.opts.search.babsr_duals.unwrap_or(false) {
                    LeafDuals {
                        slopes: warm[k].slopes.as_deref(),
                        splits: &leaves[i].splits,
                        betas: warm[k].betas.get(h).and_then(|b| b.as_deref()).unwrap_or_default(),
                    }
                } else {
                    LeafDuals::default()
                };
                Some((k, (bounds[i].as_ref()?, &half.c[..]), duals))
            })
            .collect();
        let mut chosen: Vec<Vec<ReluSplit>> = vec![Vec::new(); sps.len()];
        // Blocks as full as keeps every thread busy.
        let block = scored.len().div_ceil(rayon::current_num_threads().max(1)).clamp(1, crate::bab::babsr::LANES);
        let blocks: Vec<Vec<Vec<ReluSplit>>> = scored
            .par_chunks(block)
            .map(|block| {
                let leaves: Vec<LeafObjective<'_, T>> = block.iter().map(|&(_, x, _)| x).collect();
                let duals: Vec<LeafDuals<'_>> = block.iter().map(|&(_, _, d)| d).collect();
                crate::bab::branch::relu_candidates(net, &leaves, &duals, lower)
            })
            .collect();
        for (&(k, ..), cands) in scored.iter().zip(blocks.into_iter().flatten()) {
            chosen[k] = cands;
        }
        chosen
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

/// A ReLU-split leaf about to have children: its open part `sp`, its node
/// bounds, its start for the children's search, its bound and the bytes
/// each child holds of what it inherits.
struct Parent<'p, T> {
    sp: &'p SubProblem,
    leaf: &'p Leaf<T>,
    bounds: Arc<NodeBounds<T>>,
    warm: &'p Start,
    weakest: f64,
    held: usize,
    /// Children with more splits than this leave the slope tables
    /// (`SearchOptions::table_depth`).
    table_depth: usize,
}

/// Both phases (active, inactive) of each ReLU in `cands` as children of
/// `p`; where there are several, each pair records the candidate it came
/// from (`pick`, with the parent's number `parent_no`).
fn split_children<T>(p: &Parent<'_, T>, cands: &[ReluSplit], parent_no: usize) -> Vec<Leaf<T>> {
    let mut out = Vec::with_capacity(2 * cands.len());
    let shared = Arc::new(p.sp.clone());
    for (k, &s) in cands.iter().enumerate() {
        let pick = (cands.len() > 1).then_some((parent_no, k));
        for active in [true, false] {
            let mut splits = p.leaf.splits.clone();
            splits.push(SplitConstraint { node: s.node, neuron: s.neuron, active });
            out.push(Leaf {
                sp: shared.clone(),
                prior: Some(p.bounds.clone()),
                after: Some(s.node),
                betas: p.warm.betas.clone(),
                slopes: p.warm.slopes.clone(),
                inter: p.leaf.inter.clone().filter(|_| splits.len() <= p.table_depth),
                splits,
                weakest: p.weakest,
                pick,
                root: p.leaf.root,
                held: p.held,
                from_root: false,
            });
        }
    }
    out
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
    b.iter().map(|b| b.lo.len() + b.hi.len()).sum::<usize>() * std::mem::size_of::<T>() + slopes
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
