//! ReLU branching for branch and bound on high-dimensional inputs: which
//! unstable ReLU to split (a BaBSR-style score), and the two children.
//!
//! A split of ReLU input `x_j` (bounds `l < 0 < u`) gives the domains
//! `x_j ≥ 0` and `x_j ≤ 0`: every execution of the network (exact, or
//! float32 in any summation order) lies in one of them, since `x_j` has
//! one value in it. Each child carries its parent's final node bounds with
//! `x_j`'s clamped to `[0, u]` or `[l, 0]` (they hold over the child's
//! domain, a subset of the parent's; open siblings share the parent's, and
//! the clamp is applied when a child is analysed); the analysis intersects every node's
//! bounds with them, so the split ReLU is exact there and every later
//! layer's bounds and relaxations are recomputed under it. Bounds that
//! contradict each other prove the child (its domain is empty).

use crate::bab::babsr::{LANES, LeafDuals, LeafObjective, relaxed_coefficients};
use crate::base::bounds::{LoHi, NodeBounds};
use crate::base::ir::{Network, NodeId, Op};
use crate::base::relax::{ReluLower, relu_relax};
use crate::crown::lagrange::SplitConstraint;
use polycert_interval::Fp;

/// A ReLU to split: the ReLU's input node and the neuron in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReluSplit {
    pub node: NodeId,
    pub neuron: usize,
}

/// The first of the highest scores.
fn top(bests: &[(ReluSplit, (f64, f64))]) -> Option<ReluSplit> {
    bests
        .iter()
        .fold(None, |b: Option<&(ReluSplit, (f64, f64))>, x| if b.is_none_or(|b| x.1 > b.1) { Some(x) } else { b })
        .map(|b| b.0)
}

/// Per leaf (node bounds and objective), the splits it tries: BaBSR's choice (the best by its
/// intercept score over every layer, see [`layer_bests`]) and
/// the best by the same score in the first layer with an unstable ReLU,
/// when they differ. BaBSR counts only the bound's own use of a
/// relaxation; a split in an early layer also tightens every later layer's
/// bounds. On a 6-layer MNIST net whose last layers are wholly unstable,
/// BaBSR splits 140 last-layer ReLUs before any leaf is proved, where six
/// first-layer splits take the best leaf's bound from −1065 to −0.5; on a
/// 2-layer one,
/// BaBSR needs fewer leaves. The search analyses both pairs of children and
/// keeps the better (`bab/search.rs`). The leaves' backward passes run
/// [`LANES`] at a time.
pub(crate) fn relu_candidates<T: Fp>(
    net: &Network,
    leaves: &[LeafObjective<'_, T>],
    duals: &[LeafDuals<'_>],
    lower: ReluLower,
) -> Vec<Vec<ReluSplit>> {
    let mut out = Vec::with_capacity(leaves.len());
    for (n, block) in leaves.chunks(LANES).enumerate() {
        let d = duals.get(n * LANES..).map_or(&[][..], |d| &d[..d.len().min(block.len())]);
        // The fewest lanes that hold the block: idle lanes cost as much.
        match block.len() {
            1 => block_candidates::<T, 1>(net, (block, d), lower, &mut out),
            2 => block_candidates::<T, 2>(net, (block, d), lower, &mut out),
            3 | 4 => block_candidates::<T, 4>(net, (block, d), lower, &mut out),
            _ => block_candidates::<T, LANES>(net, (block, d), lower, &mut out),
        }
    }
    out
}

/// [`relu_candidates`] of one block of at most `L` leaves, onto `out`.
fn block_candidates<T: Fp, const L: usize>(
    net: &Network,
    (block, duals): (&[LeafObjective<'_, T>], &[LeafDuals<'_>]),
    lower: ReluLower,
    out: &mut Vec<Vec<ReluSplit>>,
) {
    let coef = relaxed_coefficients::<T, L>(net, block, duals, lower);
    for (k, (b, _)) in block.iter().enumerate() {
        let bests = layer_bests(net, b, &coef, k, lower);
        out.push(match (top(&bests), bests.first()) {
            (None, _) => Vec::new(),
            (Some(top), Some(&(first, _))) if first != top => vec![top, first],
            (Some(top), _) => vec![top],
        });
    }
}

/// Per ReLU layer with an unstable ReLU (in order), its best split by
/// BaBSR's intercept score: the objective's coefficient `a_j` on the ReLU's
/// output (lane `k` of `coef`, `babsr.rs`) times the upper line's
/// intercept `μ_j` when the bound uses that line (`a_j < 0`); ties (no
/// negative coefficient) by `|a_j|·min(u, −l)`, the lower line's gap.
fn layer_bests<T: Fp, const L: usize>(
    net: &Network,
    bounds: &NodeBounds<T>,
    coef: &[Vec<[f64; L]>],
    k: usize,
    lower: ReluLower,
) -> Vec<(ReluSplit, (f64, f64))> {
    let mut out = Vec::new();
    for (id, node) in net.nodes().iter().enumerate() {
        if node.op != Op::Relu {
            continue;
        }
        let p = node.inputs[0];
        let LoHi { lo, hi } = &bounds[p];
        let mut best: Option<(ReluSplit, (f64, f64))> = None;
        for (j, a) in coef[id].iter().map(|a| a[k]).enumerate() {
            if !crate::base::relax::unstable(lo[j], hi[j]) {
                continue;
            }
            let (l, u) = (lo[j].to_f64_exact(), hi[j].to_f64_exact());
            let mu = relu_relax(lo[j], hi[j], lower).mu_up.to_f64_exact();
            let score = ((-a).max(0.0) * mu, a.abs() * u.min(-l));
            if score.0.is_finite() && score.1.is_finite() && best.is_none_or(|(_, s)| score > s) {
                best = Some((ReluSplit { node: p, neuron: j }, score));
            }
        }
        out.extend(best);
    }
    out
}

/// A child's bounds: its parent's with each split ReLU input of `splits`
/// clamped, `x_j ≥ 0` (active) or `x_j ≤ 0`. Open leaves share their
/// parent's bounds and are clamped only when analysed.
pub(crate) fn child_bounds<T: Fp>(parent: &NodeBounds<T>, splits: &[SplitConstraint]) -> NodeBounds<T> {
    let mut b = parent.clone();
    for c in splits {
        let LoHi { lo, hi } = &mut b[c.node];
        if c.active {
            lo[c.neuron] = lo[c.neuron].max(T::zero());
        } else {
            hi[c.neuron] = hi[c.neuron].min(T::zero());
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ir::Shape;

    fn lohi(lo: Vec<f64>, hi: Vec<f64>) -> LoHi<f64> {
        LoHi { lo, hi }
    }

    fn candidates(n: &Network, b: &NodeBounds<f64>, c: &[f64]) -> Vec<ReluSplit> {
        relu_candidates(n, &[(b, c)], &[], ReluLower::Area).remove(0)
    }

    fn lane0(n: &Network, b: &NodeBounds<f64>, c: &[f64], id: usize) -> Vec<f64> {
        relaxed_coefficients::<f64, 1>(n, &[(b, c)], &[], ReluLower::Area)[id].iter().map(|a| a[0]).collect()
    }

    /// y = relu(x0) − relu(x1) with x0 = a + b, x1 = a − b.
    fn net() -> Network {
        let mut n = Network::new(Shape::flat(2));
        n.push("fc", Op::Dense { weight: vec![1.0, 1.0, 1.0, -1.0], bias: vec![0.0, 0.0], out: 2 }, &[0]).unwrap();
        n.push("relu", Op::Relu, &[1]).unwrap();
        n.push("out", Op::Dense { weight: vec![1.0, -1.0], bias: vec![0.0], out: 1 }, &[2]).unwrap();
        n
    }

    #[test]
    fn chooses_the_relu_whose_upper_line_the_bound_pays() {
        let n = net();
        // x0 ∈ [−1, 3] (intercept 0.75), x1 ∈ [−2, 2] (intercept 1).
        let b: NodeBounds<f64> = [
            (vec![-1.0, -1.0], vec![1.0, 1.0]),
            (vec![-1.0, -2.0], vec![3.0, 2.0]),
            (vec![0.0, 0.0], vec![3.0, 2.0]),
            (vec![-2.0], vec![3.0]),
        ]
        .into_iter()
        .map(|(lo, hi)| lohi(lo, hi))
        .collect();
        // Lower bound of +y: relu(x0) by its lower line, −relu(x1) by its upper line.
        assert_eq!(lane0(&n, &b, &[1.0], 2), vec![1.0, -1.0]);
        // The pass stops at the first ReLU's output: nothing below it.
        assert_eq!(lane0(&n, &b, &[1.0], 1), vec![0.0, 0.0]);
        assert_eq!(candidates(&n, &b, &[1.0]).first().copied(), Some(ReluSplit { node: 1, neuron: 1 }));
        // Lower bound of −y: now relu(x0) pays its intercept.
        assert_eq!(candidates(&n, &b, &[-1.0]).first().copied(), Some(ReluSplit { node: 1, neuron: 0 }));
        let split = |active| SplitConstraint { node: 1, neuron: 0, active };
        let (a, i) = (child_bounds(&b, &[split(true)]), child_bounds(&b, &[split(false)]));
        assert_eq!((a[1].lo[0], a[1].hi[0], i[1].lo[0], i[1].hi[0]), (0.0, 3.0, -1.0, 0.0));
        assert_eq!(a[1].lo[1], -2.0);
        // Every ReLU stable: nothing to split.
        let mut s = b.clone();
        s[1] = lohi(vec![0.5, -2.0], vec![3.0, -1.0]);
        assert_eq!(candidates(&n, &s, &[1.0]).first().copied(), None);
    }

    /// `y = −relu(g)`, `g = 0.1·relu(x0) + relu(x1 + 2) − 2 ∈ [−1, 1.1]`:
    /// BaBSR scores g's ReLU `1.1/2.1` and x0's `0.05·0.5`, so it splits g;
    /// the first layer's candidate is x0.
    #[test]
    fn candidates_are_babsr_then_the_first_layers_best() {
        let mut n = Network::new(Shape::flat(2));
        n.push("h", Op::Dense { weight: vec![1.0, 0.0, 0.0, 1.0], bias: vec![0.0, 2.0], out: 2 }, &[0]).unwrap();
        n.push("r1", Op::Relu, &[1]).unwrap();
        n.push("g", Op::Dense { weight: vec![0.1, 1.0], bias: vec![-2.0], out: 1 }, &[2]).unwrap();
        n.push("r2", Op::Relu, &[3]).unwrap();
        n.push("y", Op::Dense { weight: vec![-1.0], bias: vec![0.0], out: 1 }, &[4]).unwrap();
        let b: NodeBounds<f64> = [
            (vec![-1.0, -1.0], vec![1.0, 1.0]),
            (vec![-1.0, 1.0], vec![1.0, 3.0]),
            (vec![0.0, 1.0], vec![1.0, 3.0]),
            (vec![-1.0], vec![1.1]),
            (vec![0.0], vec![1.1]),
            (vec![-1.1], vec![0.0]),
        ]
        .into_iter()
        .map(|(lo, hi)| lohi(lo, hi))
        .collect();
        // −1 on r2's output pays r2's upper line: slope 1.1/2.1 on g.
        assert_eq!(lane0(&n, &b, &[1.0], 4), vec![-1.0]);
        let (r1, slope) = (lane0(&n, &b, &[1.0], 2), 1.1 / 2.1);
        assert!((r1[0] + 0.1 * slope).abs() < 1e-15 && (r1[1] + slope).abs() < 1e-15);
        // Below the first ReLU's output the pass has stopped.
        assert_eq!(lane0(&n, &b, &[1.0], 1), vec![0.0, 0.0]);
        // The same leaf in a block with others: the same candidates.
        let neg = [-1.0];
        let three = [(&b, &[1.0][..]), (&b, &neg[..]), (&b, &[1.0][..])];
        let got = relu_candidates(&n, &three, &[], ReluLower::Area);
        assert_eq!((&got[0], &got[2]), (&candidates(&n, &b, &[1.0]), &candidates(&n, &b, &[1.0])));
        assert_eq!(got[1], candidates(&n, &b, &neg));
        // Nine leaves: a block of eight and a block of one.
        let nine: Vec<_> = three.iter().cycle().take(9).copied().collect();
        assert_eq!(relu_candidates(&n, &nine, &[], ReluLower::Area), [&got[..]; 3].concat());
        let got = candidates(&n, &b, &[1.0]);
        assert_eq!(got, vec![ReluSplit { node: 3, neuron: 0 }, ReluSplit { node: 1, neuron: 0 }]);
        // The leaf's own α and β move the coefficients (`LeafDuals`): for
        // −y, r2's lower line takes α = 0.25 instead of the area slope 1,
        // and a split `g ≥ 0` with β = 0.5 adds −β on g.
        let neg = [-1.0];
        let with = |d: LeafDuals<'_>| {
            let got = relaxed_coefficients::<f64, 1>(&n, &[(&b, &neg[..])], &[d], ReluLower::Area);
            got[2].iter().map(|a| a[0]).collect::<Vec<f64>>()
        };
        assert_eq!(with(LeafDuals::default()), vec![0.1, 1.0]);
        let slopes: crate::base::relax::Slopes = vec![vec![], vec![], vec![], vec![], vec![0.25], vec![]];
        assert_eq!(with(LeafDuals { slopes: Some(&slopes), ..LeafDuals::default() }), vec![0.025, 0.25]);
        let split = [SplitConstraint { node: 3, neuron: 0, active: true }];
        assert_eq!(with(LeafDuals { splits: &split, betas: &[0.5], ..LeafDuals::default() }), vec![0.05, 0.5]);
        // A split of another node adds nothing here.
        let other = [SplitConstraint { node: 1, neuron: 0, active: true }];
        assert_eq!(with(LeafDuals { splits: &other, betas: &[0.5], ..LeafDuals::default() }), vec![0.1, 1.0]);
        // With g stable, x0 is both BaBSR's and the first layer's: one candidate.
        let mut s = b.clone();
        s[3] = lohi(vec![0.1], vec![1.1]);
        assert_eq!(candidates(&n, &s, &[1.0]), vec![ReluSplit { node: 1, neuron: 0 }]);
    }
}
