//! `L(α, β)` of many rows at once on the host, for networks of dense layers
//! and ReLUs (the MNIST MLPs): [`crate::crown::relaxed_bound::relaxed_bound`]'s backward
//! and forward passes with every dense layer one pass over a group of rows
//! (`rowkernels.rs`), so its weights are read once per group instead of
//! once per row (the per-row matrix-vector products are memory-bound), and
//! the ReLU lines looked up in a table made once per search. f64 sums in
//! any order over f32 weights (the per-row version: f64 throughout): only
//! the choice of α and β depends on it. Used on the CPU (`RelaxedOn::Auto`) and with
//! `RelaxedOn::HostRows`.

use crate::base::analyzer::HostWeights;
use crate::base::ir::{Network, NodeId, Op};
use crate::base::relax::{ReluLower, Slopes};
use crate::crown::lagrange::{Eval, SlopeGrads, SlotBounds};
use crate::crown::relaxed::RowSpec;
use crate::crown::relaxed_bound::Line;
use crate::crown::rowkernels;
use polycert_interval::Fp;
use rayon::prelude::*;

/// Whether [`eval_rows`] evaluates this network.
pub(crate) fn supported(net: &Network) -> bool {
    net.nodes().iter().all(|n| matches!(n.op, Op::Input | Op::Dense { .. } | Op::Relu | Op::Reshape))
}

/// Per ReLU node and neuron, its [`Line`] over a slot's bounds (empty at
/// other nodes), made once per search.
pub(crate) type ReluLines = Vec<Vec<Line>>;

/// A slot's [`ReluLines`].
pub(crate) fn relu_lines<T: Fp>(net: &Network, bounds: &SlotBounds<'_, T>, lower: ReluLower) -> ReluLines {
    net.nodes()
        .iter()
        .map(|node| {
            if node.op != Op::Relu {
                return Vec::new();
            }
            let (lo, hi) = bounds[node.inputs[0]];
            lo.iter().zip(hi).map(|(&l, &h)| Line::new(l, h, lower)).collect()
        })
        .collect()
}

/// One row's inputs: its spec, its slot's lines, its slopes (`None`: the
/// relaxation's own) and its β.
pub(crate) struct RowIn<'r, T> {
    pub spec: &'r RowSpec<'r, T>,
    pub lines: &'r ReluLines,
    pub alpha: Option<&'r Slopes>,
    pub beta: &'r [f64],
}

/// Per row, what `relaxed_bound` gives for it (`None` where the bound is
/// not finite): the row's `L(α, β)` of `c·y` and the supergradients in β
/// and in the free slopes. The rows are split into one group per thread.
/// `net` must be [`supported`].
pub(crate) fn eval_rows<T: Fp>(net: &Network, hw: &HostWeights, rows: &[RowIn<'_, T>]) -> Vec<Option<Eval>> {
    let threads = rayon::current_num_threads().max(1);
    let per = rows.len().div_ceil(threads).max(1);
    rows.par_chunks(per).flat_map_iter(|group| eval_group(net, hw, group)).collect()
}

/// The network's [`HostWeights`]. f32 halves the memory the passes read
/// (they only steer); the transposed copy lets the forward pass run as the
/// backward one, one input neuron's weights at a time, skipping the zero
/// inputs.
pub(crate) fn host_weights(net: &Network) -> HostWeights {
    net.nodes()
        .iter()
        .map(|node| match &node.op {
            Op::Dense { weight, out, .. } => {
                let (n, k) = (*out, weight.len() / (*out).max(1));
                let w: Vec<f32> = weight.iter().map(|&x| x as f32).collect();
                let mut t = vec![0.0f32; w.len()];
                // In 32 × 32 tiles, so both sides stay in cache.
                for o0 in (0..n).step_by(32) {
                    for i0 in (0..k).step_by(32) {
                        for o in o0..(o0 + 32).min(n) {
                            for i in i0..(i0 + 32).min(k) {
                                t[i * n + o] = w[o * k + i];
                            }
                        }
                    }
                }
                (w, t)
            }
            _ => (Vec::new(), Vec::new()),
        })
        .collect()
}

/// [`eval_rows`] for one group of rows, on this thread.
fn eval_group<T: Fp>(net: &Network, hw: &HostWeights, rows: &[RowIn<'_, T>]) -> Vec<Option<Eval>> {
    let back = backward(net, hw, rows);
    let z = forward_at_corners(net, rows, &back, hw);
    let relus: Vec<NodeId> = (0..net.output()).filter(|&id| !back.free[id].is_empty()).collect();
    rows.iter().enumerate().map(|(r, row)| row_eval(net, r, row, &z, &back, &relus)).collect()
}

/// The backward pass, per node: the rows' coefficients (row-major) and, at
/// a ReLU, each row's relaxation line per neuron and the coefficient of its
/// lower slope where that slope is free (else 0).
struct Backward {
    coef: Vec<Vec<f64>>,
    lines: Vec<Vec<(f64, f64)>>,
    free: Vec<Vec<f64>>,
}

fn size(net: &Network, id: NodeId) -> usize {
    net.nodes()[id].shape.numel().max(1)
}

/// Backward: the rows' coefficients carried from the output to the input
/// through every layer, each ReLU through its relaxation's lines.
fn backward<T: Fp>(net: &Network, hw: &HostWeights, rows: &[RowIn<'_, T>]) -> Backward {
    let nodes = net.nodes();
    let (r_n, out) = (rows.len(), net.output());
    let mut coef = start_coefficients(net, rows);
    let mut lines: Vec<Vec<(f64, f64)>> = vec![Vec::new(); nodes.len()];
    let mut free: Vec<Vec<f64>> = vec![Vec::new(); nodes.len()];
    for id in (1..=out).rev() {
        let x0 = nodes[id].inputs[0];
        let (n, n_in) = (size(net, id), size(net, x0));
        let g = std::mem::take(&mut coef[id]);
        match &nodes[id].op {
            Op::Dense { .. } => rowkernels::accumulate(&mut coef[x0], &g, &hw[id].0, (r_n, n, n_in)),
            Op::Reshape => coef[x0].iter_mut().zip(&g).for_each(|(a, &v)| *a += v),
            Op::Relu => (lines[id], free[id]) = relu_backward(&mut coef[x0], &g, (id, n), rows),
            _ => {}
        }
        coef[id] = g;
    }
    Backward { coef, lines, free }
}

/// The backward pass's start: per node, the rows' coefficients, zero but at
/// the output (each row's `c`) and at each split neuron (`−β·s`).
fn start_coefficients<T: Fp>(net: &Network, rows: &[RowIn<'_, T>]) -> Vec<Vec<f64>> {
    let nodes = net.nodes();
    let (r_n, out) = (rows.len(), net.output());
    let mut coef: Vec<Vec<f64>> = nodes.iter().map(|n| vec![0.0; r_n * n.shape.numel()]).collect();
    let n_out = size(net, out);
    for (r, row) in rows.iter().enumerate() {
        coef[out][r * n_out..(r + 1) * n_out].iter_mut().zip(row.spec.c).for_each(|(a, &v)| *a = v);
        for (s, &bk) in row.spec.splits.iter().zip(row.beta) {
            coef[s.node][r * size(net, s.node) + s.neuron] -= bk * if s.active { 1.0 } else { -1.0 };
        }
    }
    coef
}

/// A ReLU's backward step: per row and neuron, the line the coefficient `g`
/// picks ([`Line::pick`], with the row's slopes), `g` carried through it
/// onto the input's coefficients `gx`. The lines, and `g` where the lower
/// slope is free.
fn relu_backward<T: Fp>(
    gx: &mut [f64],
    g: &[f64],
    (id, n): (NodeId, usize),
    rows: &[RowIn<'_, T>],
) -> (Vec<(f64, f64)>, Vec<f64>) {
    let r_n = rows.len();
    let (mut l, mut f) = (vec![(0.0, 0.0); r_n * n], vec![0.0; r_n * n]);
    for (r, row) in rows.iter().enumerate() {
        let t = &row.lines[id];
        let al = row.alpha.map(|al| &al[id][..]);
        let span = r * n..(r + 1) * n;
        let (gx, g, l, f) = (&mut gx[span.clone()], &g[span.clone()], &mut l[span.clone()], &mut f[span]);
        for j in 0..n {
            let (line, free) = t[j].pick(g[j], al.map(|al| al[j]));
            if free {
                f[j] = g[j];
            }
            gx[j] += g[j] * line.0;
            l[j] = line;
        }
    }
    (l, f)
}

/// Forward: the relaxed network at each row's minimising input corner,
/// each affine layer adding the end of its constant interval the bound uses.
/// Per node, the rows' values (row-major).
fn forward_at_corners<T: Fp>(net: &Network, rows: &[RowIn<'_, T>], back: &Backward, hw: &HostWeights) -> Vec<Vec<f64>> {
    let nodes = net.nodes();
    let (r_n, out) = (rows.len(), net.output());
    let n0 = size(net, 0);
    let mut x0 = vec![0.0; r_n * n0];
    for ((x, a), row) in x0.chunks_mut(n0).zip(back.coef[0].chunks(n0)).zip(rows) {
        let (lo, hi) = row.spec.bounds[0];
        for i in 0..x.len() {
            x[i] = if a[i] >= 0.0 { lo[i] } else { hi[i] }.to_f64_exact();
        }
    }
    let mut z: Vec<Vec<f64>> = vec![x0];
    for (id, node) in nodes.iter().enumerate().take(out + 1).skip(1) {
        let x0 = node.inputs[0];
        let (n, n_in) = (size(net, id), size(net, x0));
        let v = match &node.op {
            Op::Relu => z[x0].iter().zip(&back.lines[id]).map(|(&x, &(a, b))| a * x + b).collect(),
            Op::Dense { bias, .. } => {
                let mut v: Vec<f64> = (0..r_n).flat_map(|_| bias.iter().copied()).collect();
                rowkernels::accumulate(&mut v, &z[x0], &hw[id].1, (r_n, n_in, n));
                for ((v, a), row) in v.chunks_mut(n).zip(back.coef[id].chunks(n)).zip(rows) {
                    if let Some(Some(off)) = row.spec.offsets.get(id) {
                        for ((x, &(lo, hi)), &a) in v.iter_mut().zip(off).zip(a) {
                            *x += if a >= 0.0 { lo } else { hi };
                        }
                    }
                }
                v
            }
            _ => z[x0].clone(),
        };
        z.push(v);
    }
    z
}

/// Row `r`'s `L(α, β)` from the relaxed network's values `z`, and its
/// supergradients in β and in the free slopes of the ReLUs `relus`.
fn row_eval<T: Fp>(
    net: &Network,
    r: usize,
    row: &RowIn<'_, T>,
    z: &[Vec<f64>],
    back: &Backward,
    relus: &[NodeId],
) -> Option<Eval> {
    let out = net.output();
    let n_out = size(net, out);
    let y = &z[out][r * n_out..(r + 1) * n_out];
    let mut bound: f64 = row.spec.c.iter().zip(y).map(|(a, b)| a * b).sum();
    let at = |node: NodeId, j: usize| z[node][r * size(net, node) + j];
    let grad: Vec<f64> =
        row.spec.splits.iter().map(|s| -(if s.active { 1.0 } else { -1.0 }) * at(s.node, s.neuron)).collect();
    bound += grad.iter().zip(row.beta).map(|(g, b)| g * b).sum::<f64>();
    // ∂L/∂α_j = a_j·x_j at the relaxed network's ReLU input.
    let mut ga: Slopes = vec![Vec::new(); net.nodes().len()];
    for &id in relus {
        let (n, x) = (size(net, id), net.nodes()[id].inputs[0]);
        ga[id] = (0..n).map(|j| back.free[id][r * n + j] * at(x, j)).collect();
    }
    bound.is_finite().then_some((bound, grad, SlopeGrads::Dense(ga)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::relax::unstable;
    use crate::base::rng::SplitMix;
    use crate::crown::lagrange::SplitConstraint;
    use crate::crown::relaxed_bound::{Offsets, relaxed_bound};
    use crate::testnets::{random_mlp, random_slopes};

    /// Interval bounds of every node over `[c − 0.3, c + 0.3]` (plain f64:
    /// any bounds serve the comparison).
    fn bounds(net: &Network, rng: &mut SplitMix) -> Vec<(Vec<f64>, Vec<f64>)> {
        let n0 = net.input_shape().numel();
        let c: Vec<f64> = (0..n0).map(|_| rng.unit()).collect();
        let mut b: Vec<(Vec<f64>, Vec<f64>)> =
            vec![(c.iter().map(|v| v - 0.3).collect(), c.iter().map(|v| v + 0.3).collect())];
        for node in &net.nodes()[1..] {
            let (lo, hi) = &b[node.inputs[0]];
            let next = match &node.op {
                Op::Dense { weight, bias, out } => (0..*out)
                    .map(|o| {
                        let w = &weight[o * lo.len()..(o + 1) * lo.len()];
                        let (mut l, mut h) = (bias[o], bias[o]);
                        for ((&wi, &li), &hi) in w.iter().zip(lo).zip(hi) {
                            l += (wi * li).min(wi * hi);
                            h += (wi * li).max(wi * hi);
                        }
                        (l, h)
                    })
                    .unzip(),
                _ => (lo.iter().map(|v| v.max(0.0)).collect(), hi.iter().map(|v| v.max(0.0)).collect()),
            };
            b.push(next);
        }
        b
    }

    /// Rows of three slots of one MLP (splits on unstable neurons with β,
    /// rounding offsets on the dense layers, own or optimised slopes) give
    /// the per-row `relaxed_bound`'s bounds and supergradients.
    #[test]
    fn batched_rows_match_the_per_row_bound() {
        let mut rng = SplitMix(5);
        let net = random_mlp(&mut rng, &[12, 20, 16, 4]);
        assert!(supported(&net));
        let nodes = net.nodes();
        let slots: Vec<Vec<(Vec<f64>, Vec<f64>)>> = (0..3).map(|_| bounds(&net, &mut rng)).collect();
        let views: Vec<Vec<(&[f64], &[f64])>> =
            slots.iter().map(|b| b.iter().map(|(l, h)| (&l[..], &h[..])).collect()).collect();
        let offsets: Vec<Offsets> = (0..3)
            .map(|s| {
                nodes
                    .iter()
                    .map(|n| {
                        let k = n.shape.numel();
                        matches!(n.op, Op::Dense { .. }).then(|| vec![(-1e-3 * s as f64, 2e-3); k])
                    })
                    .collect()
            })
            .collect();
        let splits: Vec<Vec<SplitConstraint>> = views
            .iter()
            .map(|v| {
                (0..nodes.len())
                    .filter(|&id| nodes[id].op == Op::Relu)
                    .flat_map(|id| {
                        let p = nodes[id].inputs[0];
                        (0..v[p].0.len())
                            .filter(move |&j| unstable(v[p].0[j], v[p].1[j]))
                            .take(2)
                            .map(move |j| SplitConstraint { node: p, neuron: j, active: j % 2 == 0 })
                    })
                    .collect()
            })
            .collect();
        assert!(splits.iter().all(|s| !s.is_empty()), "every slot has a split");
        let alphas: Vec<Slopes> = (0..3).map(|_| random_slopes(&net, &mut rng)).collect();
        let cs: Vec<Vec<f64>> = (0..6).map(|_| (0..4).map(|_| rng.weight(1.0)).collect()).collect();
        // Two rows per slot; slot 1 keeps the relaxation's own slopes.
        let specs: Vec<RowSpec<'_, f64>> = (0..6)
            .map(|r| RowSpec { bounds: &views[r / 2], offsets: &offsets[r / 2], c: &cs[r], splits: &splits[r / 2] })
            .collect();
        let betas: Vec<Vec<f64>> = (0..6).map(|r| splits[r / 2].iter().map(|_| rng.unit()).collect()).collect();
        let alpha: Vec<Option<&Slopes>> = (0..6).map(|r| (r / 2 != 1).then_some(&alphas[r / 2])).collect();
        let rows: Vec<&RowSpec<'_, f64>> = specs.iter().collect();
        let beta: Vec<&[f64]> = betas.iter().map(|b| &b[..]).collect();
        let lines: Vec<ReluLines> = views.iter().map(|v| relu_lines(&net, v, ReluLower::Area)).collect();
        let ins: Vec<RowIn<'_, f64>> =
            (0..6).map(|r| RowIn { spec: rows[r], lines: &lines[r / 2], alpha: alpha[r], beta: beta[r] }).collect();
        let got = eval_rows(&net, &host_weights(&net), &ins);
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * (1.0 + x.abs().max(y.abs()));
        for (r, g) in got.into_iter().enumerate() {
            let s = &specs[r];
            let want = relaxed_bound(
                &net,
                (s.bounds, s.offsets),
                (net.output(), s.c),
                s.splits,
                beta[r],
                alpha[r],
                ReluLower::Area,
            )
            .expect("finite");
            let g = g.expect("finite");
            assert!(close(g.0, want.0), "row {r}: bound {} against {}", g.0, want.0);
            assert!(
                g.1.iter().zip(&want.1).all(|(&a, &b)| close(a, b)) && g.1.len() == want.1.len(),
                "row {r}: β gradient"
            );
            let SlopeGrads::Dense(ga) = &g.2 else { panic!("row {r}: the host's α gradient is dense") };
            for (id, (a, b)) in ga.iter().zip(&want.2).enumerate() {
                assert!(
                    a.len() == b.len() && a.iter().zip(b).all(|(&x, &y)| close(x, y)),
                    "row {r}: α gradient at node {id}"
                );
            }
        }
    }
}
