//! `L(α, β)` of many rows at once on the host, for networks of dense layers
//! and ReLUs (the MNIST MLPs): [`crate::crown::relaxed_bound::relaxed_bound`]'s backward
//! and forward passes with every dense layer one GEMM over the rows, so its
//! weights are read once per pass instead of once per row (the per-row
//! matrix-vector products are memory-bound). Plain f64 with sums in any
//! order, as the per-row version: only the choice of α and β depends on it.
//! Used with `RelaxedOn::HostRows` (an experiment, off by default).

use crate::base::ir::{Network, NodeId, Op};
use crate::base::relax::ReluLower;
use crate::base::relax::Slopes;
use crate::crown::lagrange::{Eval, SlopeGrads};
use crate::crown::relaxed::RowSpec;
use crate::crown::relaxed_bound::bound_line;
use polycert_interval::Fp;
use rayon::prelude::*;

/// Whether [`eval_rows`] evaluates this network.
pub(crate) fn supported(net: &Network) -> bool {
    net.nodes().iter().all(|n| matches!(n.op, Op::Input | Op::Dense { .. } | Op::Relu | Op::Reshape))
}

/// Per row, what `relaxed_bound` gives for it (`None` where the bound is
/// not finite): the row's `L(α, β)` of `c·y` with its slot's slopes
/// `alpha[r]` (`None`: the relaxation's own) and its β, and the
/// supergradients in β and in the free slopes. `net` must be
/// [`supported`].
pub(crate) fn eval_rows<T: Fp>(
    net: &Network,
    rows: &[&RowSpec<'_, T>],
    alpha: &[Option<&Slopes>],
    beta: &[&[f64]],
    lower: ReluLower,
) -> Vec<Option<Eval>> {
    let back = backward(net, rows, alpha, beta, lower);
    let z = forward_at_corners(net, rows, &back);
    let relus: Vec<NodeId> = (0..net.output()).filter(|&id| !back.free[id].is_empty()).collect();
    rows.par_iter().zip(beta).enumerate().map(|(r, (row, b))| row_eval(net, r, (row, b), &z, &back, &relus)).collect()
}

/// The backward pass, per node: the rows' coefficients (row-major) and, at
/// a ReLU, each row's relaxation line per neuron and the coefficient of its
/// lower slope where that slope is free (else 0).
struct Backward {
    coef: Vec<Vec<f64>>,
    lines: Vec<Vec<(f64, f64)>>,
    free: Vec<Vec<f64>>,
}

/// Backward: the rows' coefficients carried from the output to the input
/// through every layer, each ReLU through its relaxation's lines.
fn backward<T: Fp>(
    net: &Network,
    rows: &[&RowSpec<'_, T>],
    alpha: &[Option<&Slopes>],
    beta: &[&[f64]],
    lower: ReluLower,
) -> Backward {
    let nodes = net.nodes();
    let (r_n, out) = (rows.len(), net.output());
    let size = |id: NodeId| nodes[id].shape.numel().max(1);
    let mut coef = start_coefficients(net, rows, beta);
    let mut lines: Vec<Vec<(f64, f64)>> = vec![Vec::new(); nodes.len()];
    let mut free: Vec<Vec<f64>> = vec![Vec::new(); nodes.len()];
    for id in (1..=out).rev() {
        let x0 = nodes[id].inputs[0];
        let (n, n_in) = (size(id), size(x0));
        let g = std::mem::take(&mut coef[id]);
        match &nodes[id].op {
            Op::Dense { weight, .. } => gemm_acc(&mut coef[x0], &g, weight, (r_n, n_in, n), (n_in as isize, 1)),
            Op::Reshape => coef[x0].iter_mut().zip(&g).for_each(|(a, &v)| *a += v),
            Op::Relu => (lines[id], free[id]) = relu_backward(&mut coef[x0], &g, (id, x0, n), rows, alpha, lower),
            _ => {}
        }
        coef[id] = g;
    }
    Backward { coef, lines, free }
}

/// The backward pass's start: per node, the rows' coefficients, zero but at
/// the output (each row's `c`) and at each split neuron (`−β·s`).
fn start_coefficients<T: Fp>(net: &Network, rows: &[&RowSpec<'_, T>], beta: &[&[f64]]) -> Vec<Vec<f64>> {
    let nodes = net.nodes();
    let (r_n, out) = (rows.len(), net.output());
    let size = |id: NodeId| nodes[id].shape.numel().max(1);
    let mut coef: Vec<Vec<f64>> = nodes.iter().map(|n| vec![0.0; r_n * n.shape.numel()]).collect();
    coef[out].par_chunks_mut(size(out)).zip(rows).for_each(|(g, r)| g.iter_mut().zip(r.c).for_each(|(a, &v)| *a = v));
    for (r, (row, b)) in rows.iter().zip(beta).enumerate() {
        for (s, &bk) in row.splits.iter().zip(b.iter()) {
            coef[s.node][r * size(s.node) + s.neuron] -= bk * if s.active { 1.0 } else { -1.0 };
        }
    }
    coef
}

/// A ReLU's backward step: per row and neuron, the relaxation line the
/// coefficient `g` picks (with the row's slopes `alpha`), `g` carried
/// through it onto the input's coefficients `gx`. The lines, and `g` where
/// the lower slope is free.
fn relu_backward<T: Fp>(
    gx: &mut [f64],
    g: &[f64],
    (id, x0, n): (NodeId, NodeId, usize),
    rows: &[&RowSpec<'_, T>],
    alpha: &[Option<&Slopes>],
    lower: ReluLower,
) -> (Vec<(f64, f64)>, Vec<f64>) {
    let r_n = rows.len();
    let (mut l, mut f) = (vec![(0.0, 0.0); r_n * n], vec![0.0; r_n * n]);
    gx.par_chunks_mut(n)
        .zip(g.par_chunks(n))
        .zip(l.par_chunks_mut(n).zip(f.par_chunks_mut(n)))
        .zip(rows.par_iter().zip(alpha))
        .for_each(|(((gx, g), (l, f)), (row, a))| {
            let (lo, hi) = row.bounds[x0];
            let al = a.map(|al| &al[id][..]);
            for j in 0..n {
                let (line, free) = bound_line((lo, hi), j, g[j], al, lower);
                if free {
                    f[j] = g[j];
                }
                gx[j] += g[j] * line.0;
                l[j] = line;
            }
        });
    (l, f)
}

/// Forward: the relaxed network at each row's minimising input corner,
/// each affine layer adding the end of its constant interval the bound uses.
/// Per node, the rows' values (row-major).
fn forward_at_corners<T: Fp>(net: &Network, rows: &[&RowSpec<'_, T>], back: &Backward) -> Vec<Vec<f64>> {
    let nodes = net.nodes();
    let (r_n, out) = (rows.len(), net.output());
    let size = |id: NodeId| nodes[id].shape.numel().max(1);
    let n0 = size(0);
    let mut x0 = vec![0.0; r_n * n0];
    x0.par_chunks_mut(n0).zip(back.coef[0].par_chunks(n0)).zip(rows).for_each(|((x, a), row)| {
        let (lo, hi) = row.bounds[0];
        for i in 0..x.len() {
            x[i] = if a[i] >= 0.0 { lo[i] } else { hi[i] }.to_f64_exact();
        }
    });
    let mut z: Vec<Vec<f64>> = vec![x0];
    for (id, node) in nodes.iter().enumerate().take(out + 1).skip(1) {
        let x0 = node.inputs[0];
        let (n, n_in) = (size(id), size(x0));
        let v = match &node.op {
            Op::Relu => z[x0].iter().zip(&back.lines[id]).map(|(&x, &(a, b))| a * x + b).collect(),
            Op::Dense { weight, bias, .. } => {
                let mut v: Vec<f64> = (0..r_n).flat_map(|_| bias.iter().copied()).collect();
                gemm_acc(&mut v, &z[x0], weight, (r_n, n, n_in), (1, n_in as isize));
                v.par_chunks_mut(n).zip(back.coef[id].par_chunks(n)).zip(rows).for_each(|((v, a), row)| {
                    if let Some(Some(off)) = row.offsets.get(id) {
                        for ((x, &(lo, hi)), &a) in v.iter_mut().zip(off).zip(a) {
                            *x += if a >= 0.0 { lo } else { hi };
                        }
                    }
                });
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
    (row, b): (&RowSpec<'_, T>, &[f64]),
    z: &[Vec<f64>],
    back: &Backward,
    relus: &[NodeId],
) -> Option<Eval> {
    let nodes = net.nodes();
    let out = net.output();
    let size = |id: NodeId| nodes[id].shape.numel().max(1);
    let n_out = size(out);
    let y = &z[out][r * n_out..(r + 1) * n_out];
    let mut bound: f64 = row.c.iter().zip(y).map(|(a, b)| a * b).sum();
    let at = |node: NodeId, j: usize| z[node][r * size(node) + j];
    let grad: Vec<f64> =
        row.splits.iter().map(|s| -(if s.active { 1.0 } else { -1.0 }) * at(s.node, s.neuron)).collect();
    bound += grad.iter().zip(b.iter()).map(|(g, b)| g * b).sum::<f64>();
    // ∂L/∂α_j = a_j·x_j at the relaxed network's ReLU input.
    let mut ga: Slopes = vec![Vec::new(); nodes.len()];
    for &id in relus {
        let (n, x) = (size(id), nodes[id].inputs[0]);
        ga[id] = (0..n).map(|j| back.free[id][r * n + j] * at(x, j)).collect();
    }
    bound.is_finite().then_some((bound, grad, SlopeGrads::Dense(ga)))
}

/// `dst (m × n) += a (m × k) · B`, with `B`'s element `(i, j)` at
/// `b[i·rs + j·cs]`.
fn gemm_acc(dst: &mut [f64], a: &[f64], b: &[f64], (m, n, k): (usize, usize, usize), (rs, cs): (isize, isize)) {
    assert!(dst.len() == m * n && a.len() == m * k && b.len() == n * k, "gemm_acc: shapes");
    if m == 0 || n == 0 || k == 0 {
        return;
    }
    // SAFETY: `dst` is `m × n` and `a` is `m × k`, both row-major; every
    // `(i, j)` with `i < k`, `j < n` indexes `b` in bounds for the strides
    // the callers pass (`(n, 1)` for `B = W`, `(1, k)` for `B = Wᵀ`, `W`
    // of `k × n` or `n × k`).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            true,
            a.as_ptr(),
            1,
            k as isize,
            b.as_ptr(),
            cs,
            rs,
            1.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::Rayon(0),
        );
    }
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
        let got = eval_rows(&net, &rows, &alpha, &beta, ReluLower::Area);
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
