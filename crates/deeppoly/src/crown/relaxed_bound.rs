//! The relaxed bound `L(α, β)` of one output row on the host, in f64
//! without rounding care (it only steers α and β): the backward pass of
//! the row's coefficients through the ReLU lines the bound uses, then the
//! relaxed network at the input corner that minimises it, which gives the
//! bound and its supergradients `−s_k·ẑ_k` (β) and `a_j·ẑ_j` (α). The
//! backend evaluates the same bound for many rows at once (`relaxed.rs`),
//! and `hostrows.rs` for a round's rows on MLPs.

use crate::base::ir::{Network, NodeId, Op};
use crate::base::relax::Slopes;
use crate::base::relax::{ReluLower, relu_relax, unstable};
use crate::crown::lagrange::{SlotBias, SlotBounds, SplitConstraint};
use polycert_interval::Fp;

/// Per node: the coefficients of the relaxed bound's backward pass; per
/// ReLU node and neuron, the line `y = a·x + b` it uses and the coefficient
/// of `y` where that line is a free lower one (else 0).
type Backward = (Vec<Vec<f64>>, Vec<Vec<(f64, f64)>>, Slopes);

/// The backward pass of `L(α, β)` (`None`: a layer it does not evaluate).
fn backward<T: Fp>(
    net: &Network,
    bounds: &SlotBounds<'_, T>,
    (start, c): (NodeId, &[f64]),
    (splits, beta): (&[SplitConstraint], &[f64]),
    alpha: Option<&Slopes>,
    lower: ReluLower,
) -> Option<Backward> {
    let nodes = net.nodes();
    let mut coef: Vec<Vec<f64>> = nodes.iter().map(|n| vec![0.0; n.shape.numel()]).collect();
    coef[start].iter_mut().zip(c).for_each(|(a, &v)| *a = v);
    for (s, &b) in splits.iter().zip(beta) {
        coef[s.node][s.neuron] -= b * s.sign();
    }
    let mut lines: Vec<Vec<(f64, f64)>> = vec![Vec::new(); nodes.len()];
    let mut free: Slopes = vec![Vec::new(); nodes.len()];
    let complete = crate::base::eval::backpropagate(net, &mut coef, |id, g, gx| {
        if nodes[id].op != Op::Relu {
            return false;
        }
        let lo_hi = bounds[nodes[id].inputs[0]];
        let al = alpha.map(|al| &al[id][..]);
        free[id] = vec![0.0; g.len()];
        lines[id] = g
            .iter()
            .zip(gx)
            .enumerate()
            .map(|(j, (&gj, a))| {
                let (line, is_free) = Line::new(lo_hi.0[j], lo_hi.1[j], lower).pick(gj, al.map(|al| al[j]));
                if is_free {
                    free[id][j] = gj;
                }
                *a += gj * line.0;
                line
            })
            .collect();
        true
    });
    complete.then_some((coef, lines, free))
}

/// One ReLU neuron's lines over its input bounds `[l, h]`: the upper line
/// `(slope, intercept)`, the relaxation's lower slope, and whether the
/// lower slope is free (the input straddles 0).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Line {
    up: (f64, f64),
    lo: f64,
    free: bool,
}

impl Line {
    pub(crate) fn new<T: Fp>(l: T, h: T, lower: ReluLower) -> Self {
        let r = relu_relax(l, h, lower);
        Line {
            up: (r.lam_up.to_f64_exact(), r.mu_up.to_f64_exact()),
            lo: r.lam_lo.to_f64_exact(),
            free: unstable(l, h),
        }
    }

    /// The line `(slope, intercept)` through which a lower bound with
    /// coefficient `g` on the ReLU's output passes: the upper line where
    /// `g < 0`; else the free slope `alpha` where the lower slope is free
    /// and slopes are given; else the relaxation's lower line. And whether
    /// it took the free slope.
    pub(crate) fn pick(&self, g: f64, alpha: Option<f64>) -> ((f64, f64), bool) {
        match alpha {
            _ if g < 0.0 => (self.up, false),
            Some(a) if self.free => ((a, 0.0), true),
            _ => ((self.lo, 0.0), false),
        }
    }
}

/// The input box corner that minimises the relaxed bound of `c·y`: a
/// candidate counterexample of a leaf whose relaxation is exact.
pub(crate) fn minimising_corner<T: Fp>(
    net: &Network,
    bounds: &SlotBounds<'_, T>,
    c: &[f64],
    (splits, beta): (&[SplitConstraint], &[f64]),
    alpha: Option<&Slopes>,
    lower: ReluLower,
) -> Option<Vec<f64>> {
    let (coef, _, _) = backward(net, bounds, (net.output(), c), (splits, beta), alpha, lower)?;
    Some(corner(&coef[0], bounds[0]))
}

/// Per affine node with a known constant interval, per neuron: its ends
/// less the bias (what the relaxed network adds to the exact layer for a
/// bound with a coefficient `≥ 0`, resp. `< 0` there).
pub(crate) type Offsets = Vec<Option<Vec<(f64, f64)>>>;

pub(crate) fn rounding_offsets<T: Fp>(net: &Network, bias: &SlotBias<'_, T>) -> Offsets {
    net.nodes()
        .iter()
        .enumerate()
        .map(|(id, node)| {
            let (lo, hi) = (*bias.get(id)?)?;
            let at = |j: usize| match &node.op {
                Op::Dense { bias, .. } => Some(bias[j]),
                Op::Conv2d(c) => Some(c.bias[j / (node.shape.h * node.shape.w).max(1)]),
                _ => None,
            };
            (0..lo.len()).map(|j| at(j).map(|b| (lo[j].to_f64_exact() - b, hi[j].to_f64_exact() - b))).collect()
        })
        .collect()
}

fn corner<T: Fp>(a: &[f64], (lo, hi): (&[T], &[T])) -> Vec<f64> {
    a.iter().enumerate().map(|(i, &a)| if a >= 0.0 { lo[i] } else { hi[i] }.to_f64_exact()).collect()
}

/// `L(α, β)` of `c·x_start` (in f64, no rounding care) and its
/// supergradients in `β` and in the slopes (`alpha`: `None` for the
/// relaxation's own).
pub(crate) fn relaxed_bound<T: Fp>(
    net: &Network,
    (bounds, offsets): (&SlotBounds<'_, T>, &Offsets),
    (start, c): (NodeId, &[f64]),
    splits: &[SplitConstraint],
    beta: &[f64],
    alpha: Option<&Slopes>,
    lower: ReluLower,
) -> Option<(f64, Vec<f64>, Slopes)> {
    let nodes = net.nodes();
    let (coef, lines, mut free) = backward(net, bounds, (start, c), (splits, beta), alpha, lower)?;
    // The minimising input corner, then the relaxed network there.
    let x = corner(&coef[0], bounds[0]);
    let mut z: Vec<Vec<f64>> = Vec::with_capacity(start + 1);
    z.push(x);
    for id in 1..=start {
        let node = &nodes[id];
        let v = if node.op == Op::Relu {
            z[node.inputs[0]].iter().zip(&lines[id]).map(|(&x, &(a, b))| a * x + b).collect()
        } else {
            let ins: Vec<&[f64]> = node.inputs.iter().map(|&k| &z[k][..]).collect();
            let mut v = crate::base::eval::eval_node(net, id, &ins);
            // The constant interval's end the bound uses, in place of the bias.
            if let Some(Some(off)) = offsets.get(id) {
                for ((x, &(lo, hi)), &a) in v.iter_mut().zip(off).zip(&coef[id]) {
                    *x += if a >= 0.0 { lo } else { hi };
                }
            }
            v
        };
        z.push(v);
    }
    let y = &z[start];
    let mut bound: f64 = c.iter().zip(y).map(|(a, b)| a * b).sum();
    let grad: Vec<f64> = splits.iter().map(|s| -s.sign() * z[s.node][s.neuron]).collect();
    for (g, &b) in grad.iter().zip(beta) {
        bound += b * g;
    }
    // ∂L/∂α_j = a_j·x_j at the relaxed network's ReLU input (past `start`
    // the coefficients, so the gradients, are 0).
    for (id, f) in free.iter_mut().enumerate().take(start) {
        if !f.is_empty() {
            let x = &z[nodes[id].inputs[0]];
            f.iter_mut().zip(x).for_each(|(g, &xj)| *g *= xj);
        }
    }
    bound.is_finite().then_some((bound, grad, free))
}
