//! Split constraints in the bound (β-CROWN's Lagrangian terms). On a leaf
//! with split constraints `g_k = s_k·x_k ≥ 0` (`s_k = +1` for an active
//! split, −1 for an inactive one), `f ≥ f − Σ β_k·g_k` for any `β ≥ 0`: the
//! leaf's objective rows start with `−β_k·s_k` on each split neuron besides
//! `c` on the outputs, and the sound backsubstitution bounds the sum. Any
//! `β ≥ 0` is sound, so `β` is chosen on the host without rounding care: by
//! projected supergradient ascent (Adam) on the relaxed bound `L(β)`, whose
//! supergradient is `−s_k·ẑ_k`, with `ẑ` the relaxed network (the ReLU
//! lines the bound uses) evaluated at the input corner that minimises it.

use crate::ir::{Network, NodeId, Op};
use crate::relax::{ReluLower, relu_relax};
use polycert_interval::Fp;

/// A ReLU split: `x_neuron ≥ 0` (active) or `≤ 0` at ReLU input `node`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SplitConstraint {
    pub node: NodeId,
    pub neuron: usize,
    pub active: bool,
}

impl SplitConstraint {
    fn sign(&self) -> f64 {
        if self.active { 1.0 } else { -1.0 }
    }
}

/// One slot's node bounds, `(lo, hi)` per node.
pub(crate) type SlotBounds<'b, T> = Vec<(&'b [T], &'b [T])>;

/// Adam steps of the β search (from zero, and from a parent's β), and the
/// relaxed bound at which it stops early (the sound backsubstitution with
/// the same β then proves the row).
const STEPS: usize = 20;
const WARM_STEPS: usize = 6;
const STABLE_STEPS: usize = 300;
const LR: f64 = 0.05;
const PROVED_MARGIN: f64 = 1e-4;

/// `β ≥ 0` per split for the lower bound of `c·y − d` (`None`: the relaxed
/// network has a layer the search does not evaluate, or `β = 0` is best).
pub(crate) fn optimize_beta<T: Fp>(
    net: &Network,
    bounds: &SlotBounds<'_, T>,
    (c, d): (&[f64], f64),
    splits: &[SplitConstraint],
    lower: ReluLower,
    start: Option<&[f64]>,
) -> Option<Vec<f64>> {
    if splits.is_empty() || net.nodes().iter().any(|n| matches!(n.op, Op::Sigmoid | Op::MaxPool2d(_))) {
        return None;
    }
    let k = splits.len();
    let (mut beta, mut m, mut v) = (vec![0.0; k], vec![0.0; k], vec![0.0; k]);
    // With every ReLU stable the relaxation is exact, and the best β gives
    // the leaf's exact minimum (LP duality): worth a long search, as the leaf
    // cannot be split further.
    let stable = net.nodes().iter().filter(|n| n.op == Op::Relu).all(|n| {
        let (lo, hi) = bounds[n.inputs[0]];
        lo.iter().zip(hi).all(|(l, h)| !(*l < T::zero() && *h > T::zero()))
    });
    let mut steps = if stable { STABLE_STEPS } else { STEPS };
    if let Some(b) = start.filter(|b| b.len() <= k) {
        beta[..b.len()].copy_from_slice(b);
        steps = if stable { STABLE_STEPS } else { WARM_STEPS };
    }
    let (mut best, mut best_beta) = (f64::NEG_INFINITY, None);
    for t in 1..=steps + 1 {
        let (bound, grad) = relaxed_bound(net, bounds, c, splits, &beta, lower)?;
        let bound = bound - d;
        if bound > best {
            best = bound;
            best_beta = Some(beta.clone());
        }
        // Proved with room (the sound bound with these β is close), or done.
        if (t > 1 && bound > PROVED_MARGIN) || t > steps {
            break;
        }
        let (b1, b2) = (0.9f64, 0.999f64);
        for i in 0..k {
            m[i] = b1 * m[i] + (1.0 - b1) * grad[i];
            v[i] = b2 * v[i] + (1.0 - b2) * grad[i] * grad[i];
            let mh = m[i] / (1.0 - b1.powi(t as i32));
            let vh = v[i] / (1.0 - b2.powi(t as i32));
            beta[i] = (beta[i] + LR * mh / (vh.sqrt() + 1e-8)).max(0.0);
        }
    }
    best_beta.filter(|b| b.iter().any(|&x| x > 0.0))
}

/// `L(β)` (in f64, no rounding care) and its supergradient in `β`.
fn relaxed_bound<T: Fp>(
    net: &Network,
    bounds: &SlotBounds<'_, T>,
    c: &[f64],
    splits: &[SplitConstraint],
    beta: &[f64],
    lower: ReluLower,
) -> Option<(f64, Vec<f64>)> {
    let nodes = net.nodes();
    let mut coef: Vec<Vec<f64>> = nodes.iter().map(|n| vec![0.0; n.shape.numel()]).collect();
    coef[net.output()].iter_mut().zip(c).for_each(|(a, &v)| *a = v);
    for (s, &b) in splits.iter().zip(beta) {
        coef[s.node][s.neuron] -= b * s.sign();
    }
    // Per ReLU node and neuron: the line `y = a·x + b` the bound uses.
    let mut lines: Vec<Vec<(f64, f64)>> = vec![Vec::new(); nodes.len()];
    let complete = crate::eval::backpropagate(net, &mut coef, |id, g, gx| {
        if nodes[id].op != Op::Relu {
            return false;
        }
        let (lo, hi) = bounds[nodes[id].inputs[0]];
        lines[id] = g
            .iter()
            .zip(gx)
            .enumerate()
            .map(|(j, (&gj, a))| {
                let r = relu_relax(lo[j], hi[j], lower);
                let line = if gj >= 0.0 {
                    (r.lam_lo.to_f64_exact(), 0.0)
                } else {
                    (r.lam_up.to_f64_exact(), r.mu_up.to_f64_exact())
                };
                *a += gj * line.0;
                line
            })
            .collect();
        true
    });
    if !complete {
        return None;
    }
    // The minimising input corner, then the relaxed network there.
    let (lo, hi) = bounds[0];
    let x: Vec<f64> =
        coef[0].iter().enumerate().map(|(i, &a)| if a >= 0.0 { lo[i] } else { hi[i] }.to_f64_exact()).collect();
    let mut z: Vec<Vec<f64>> = Vec::with_capacity(nodes.len());
    z.push(x);
    for id in 1..nodes.len() {
        let node = &nodes[id];
        let v = if node.op == Op::Relu {
            z[node.inputs[0]].iter().zip(&lines[id]).map(|(&x, &(a, b))| a * x + b).collect()
        } else {
            let ins: Vec<&[f64]> = node.inputs.iter().map(|&k| &z[k][..]).collect();
            crate::eval::eval_node(net, id, &ins)
        };
        z.push(v);
    }
    let y = &z[net.output()];
    let mut bound: f64 = c.iter().zip(y).map(|(a, b)| a * b).sum();
    let grad: Vec<f64> = splits.iter().map(|s| -s.sign() * z[s.node][s.neuron]).collect();
    for (g, &b) in grad.iter().zip(beta) {
        bound += b * g;
    }
    bound.is_finite().then_some((bound, grad))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Shape;

    /// `y = relu(s) − relu(s)`, `s = a + b` twice over `[−1, 1]²`: with
    /// `s_0 ≤ 0` and `s_1 ≥ 0` split, the bound without β is −2 (the splits
    /// only clamp intervals); `β_0 = 1` cancels `s_1`'s coefficient: 0.
    #[test]
    fn beta_cancels_the_same_neuron_split_twice() {
        let mut n = Network::new(Shape::flat(2));
        n.push("s", Op::Dense { weight: vec![1.0; 4], bias: vec![0.0; 2], out: 2 }, &[0]).unwrap();
        n.push("r", Op::Relu, &[1]).unwrap();
        n.push("y", Op::Dense { weight: vec![1.0, -1.0], bias: vec![0.0], out: 1 }, &[2]).unwrap();
        let b: Vec<(Vec<f64>, Vec<f64>)> = vec![
            (vec![-1.0, -1.0], vec![1.0, 1.0]),
            (vec![-2.0, 0.0], vec![0.0, 2.0]),
            (vec![0.0, 0.0], vec![0.0, 2.0]),
            (vec![-2.0], vec![0.0]),
        ];
        let sb: SlotBounds<'_, f64> = b.iter().map(|(l, h)| (&l[..], &h[..])).collect();
        let splits = [
            SplitConstraint { node: 1, neuron: 0, active: false },
            SplitConstraint { node: 1, neuron: 1, active: true },
        ];
        let (l0, g0) = relaxed_bound(&n, &sb, &[1.0], &splits, &[0.0, 0.0], ReluLower::Area).unwrap();
        assert_eq!(l0, -2.0);
        // At the minimiser (1, 1): s = (2, 2), so g = (−s_0, s_1) → ∂L/∂β = (2, −2).
        assert_eq!(g0, vec![2.0, -2.0]);
        let (l1, _) = relaxed_bound(&n, &sb, &[1.0], &splits, &[1.0, 0.0], ReluLower::Area).unwrap();
        assert_eq!(l1, 0.0);
        let beta = optimize_beta(&n, &sb, (&[1.0], 0.0), &splits, ReluLower::Area, None).unwrap();
        let (lb, _) = relaxed_bound(&n, &sb, &[1.0], &splits, &beta, ReluLower::Area).unwrap();
        assert!(lb > -0.2 && beta[0] > 0.8, "{lb} {beta:?}");
    }
}
