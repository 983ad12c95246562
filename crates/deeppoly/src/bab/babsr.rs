//! BaBSR's backward pass for a block of leaves at once: per node from the
//! first ReLU on, the coefficient of each leaf's objective `c·y` on that
//! node's values, backsubstituted through the ReLU relaxations of the
//! leaf's own bounds with the lower slopes α and split multipliers β its
//! last bound chose (`LeafDuals`). The leaves are lanes of `[f64; L]` in
//! `eval::backpropagate` (`eval::Coef`), so every weight is read once per
//! block and the lanes' updates vectorise. Each lane takes the same
//! operations in the same order as a pass of its own, so its coefficients
//! are bit for bit those, zeros' signs aside. In f64 without rounding: it
//! steers the search only.

use crate::base::bounds::{LoHi, NodeBounds};
use crate::base::ir::{Network, Op};
use crate::base::relax::{ReluLower, Slopes, relu_relax, unstable};
use crate::crown::lagrange::SplitConstraint;
use polycert_interval::Fp;

/// The most leaves per backward pass.
pub(crate) const LANES: usize = 8;

/// A leaf's node bounds and objective `c`.
pub(crate) type LeafObjective<'l, T> = (&'l NodeBounds<T>, &'l [f64]);

/// What a leaf's last α/β bound chose, for its scores to see: its lower
/// slopes (`None`: the relaxation's own) and its split constraints with
/// their β (for the objective's half-space; empty: none). With them the
/// scores are those of the bound the leaf was left with, as in α,β-CROWN,
/// where the relaxation's own slopes and no β pick other ReLUs.
#[derive(Clone, Copy, Default)]
pub(crate) struct LeafDuals<'l> {
    pub slopes: Option<&'l Slopes>,
    pub splits: &'l [SplitConstraint],
    pub betas: &'l [f64],
}

/// Per node, per neuron, each leaf's coefficient (lane `k` of `L` for
/// `leaves[k]`, a pair of node bounds and objective, with `duals[k]`
/// where given: α for the unstable ReLUs' lower lines, `−β·s` on each split
/// neuron). Nodes below the first
/// ReLU's output stay zero: the scores need nothing below it, and on a
/// fully connected net the first layer is the largest. Other
/// nonlinearities pass by their slope at the bounds' midpoint; pooling
/// stops the pass. At most `L` leaves.
pub(crate) fn relaxed_coefficients<T: Fp, const L: usize>(
    net: &Network,
    leaves: &[LeafObjective<'_, T>],
    duals: &[LeafDuals<'_>],
    lower: ReluLower,
) -> Vec<Vec<[f64; L]>> {
    assert!(leaves.len() <= L, "{} leaves in a BaBSR pass of {L}", leaves.len());
    let nodes = net.nodes();
    let mut coef: Vec<Vec<[f64; L]>> = nodes.iter().map(|n| vec![[0.0; L]; n.shape.numel()]).collect();
    for (k, (_, c)) in leaves.iter().enumerate() {
        coef[net.output()].iter_mut().zip(c.iter()).for_each(|(a, &v)| a[k] = v);
    }
    let first_relu = nodes.iter().position(|n| n.op == Op::Relu);
    crate::base::eval::backpropagate(net, &mut coef, |id, g, gx| {
        if Some(id) == first_relu {
            return false;
        }
        let x0 = nodes[id].inputs[0];
        for (k, (b, _)) in leaves.iter().enumerate() {
            let LoHi { lo, hi } = &b[x0];
            match nodes[id].op {
                Op::Relu => {
                    let d = duals.get(k).copied().unwrap_or_default();
                    let alpha = d.slopes.and_then(|s| s.get(id)).filter(|s| s.len() == gx.len());
                    for (j, (a, gj)) in gx.iter_mut().zip(g).enumerate() {
                        let r = relu_relax(lo[j], hi[j], lower);
                        let lam_lo = match alpha {
                            Some(s) if unstable(lo[j], hi[j]) => s[j],
                            _ => r.lam_lo.to_f64_exact(),
                        };
                        a[k] += gj[k] * if gj[k] >= 0.0 { lam_lo } else { r.lam_up.to_f64_exact() };
                    }
                    // The Lagrangian's `−β·s·x` on each split neuron of this input.
                    for (c, b) in d.splits.iter().zip(d.betas).filter(|(c, _)| c.node == x0) {
                        gx[c.neuron][k] -= b * c.sign();
                    }
                }
                Op::Sigmoid => {
                    for (j, (a, gj)) in gx.iter_mut().zip(g).enumerate() {
                        let m = (lo[j].to_f64_exact() + hi[j].to_f64_exact()) / 2.0;
                        let s = 1.0 / (1.0 + (-m).exp());
                        a[k] += gj[k] * s * (1.0 - s);
                    }
                }
                _ => {}
            }
        }
        true
    });
    coef
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::rng::SplitMix;
    use crate::testnets::{random_mlp, random_resnet};

    /// The single-leaf pass this one batches, as it was: the oracle.
    fn one_leaf<T: Fp>(net: &Network, bounds: &NodeBounds<T>, c: &[f64], lower: ReluLower) -> Vec<Vec<f64>> {
        let mut coef: Vec<Vec<f64>> = net.nodes().iter().map(|n| vec![0.0; n.shape.numel()]).collect();
        coef[net.output()].iter_mut().zip(c).for_each(|(a, &v)| *a = v);
        crate::base::eval::backpropagate(net, &mut coef, |id, g, gx| {
            let LoHi { lo, hi } = &bounds[net.node(id).inputs[0]];
            if net.node(id).op == Op::Relu {
                for (j, (a, &gj)) in gx.iter_mut().zip(g).enumerate() {
                    let r = relu_relax(lo[j], hi[j], lower);
                    *a += gj * if gj >= 0.0 { r.lam_lo } else { r.lam_up }.to_f64_exact();
                }
            }
            true
        });
        coef
    }

    /// Random node bounds around a point, with some neurons stable.
    fn random_bounds(net: &Network, rng: &mut SplitMix) -> NodeBounds<f64> {
        net.nodes()
            .iter()
            .map(|n| {
                let k = n.shape.numel();
                let mid: Vec<f64> = (0..k).map(|_| rng.weight(1.0)).collect();
                let rad: Vec<f64> = (0..k).map(|_| rng.weight(1.0).abs()).collect();
                LoHi {
                    lo: mid.iter().zip(&rad).map(|(m, r)| m - r).collect(),
                    hi: mid.iter().zip(&rad).map(|(m, r)| m + r).collect(),
                }
            })
            .collect()
    }

    /// Every lane of a full block gives, bit for bit, its leaf's own pass
    /// on every ReLU node, on an MLP and a residual conv net; a partial
    /// block leaves its other lanes zero.
    #[test]
    fn lanes_equal_one_leaf_passes() {
        let mut rng = SplitMix(11);
        let nets = [
            random_mlp(&mut rng, &[9, 17, 13, 5]),
            random_resnet(&mut rng, crate::base::ir::Shape::new(2, 6, 5), 7, 4),
        ];
        for net in &nets {
            let n_out = net.output_shape().numel();
            let bounds: Vec<NodeBounds<f64>> = (0..LANES).map(|_| random_bounds(net, &mut rng)).collect();
            let cs: Vec<Vec<f64>> = (0..LANES).map(|_| (0..n_out).map(|_| rng.weight(1.0)).collect()).collect();
            for lower in [ReluLower::Area, ReluLower::Zero] {
                for used in [LANES, 3] {
                    let leaves: Vec<LeafObjective<'_, f64>> =
                        bounds.iter().zip(&cs).take(used).map(|(b, c)| (b, &c[..])).collect();
                    let got = relaxed_coefficients::<f64, LANES>(net, &leaves, &[], lower);
                    let mut relus = 0;
                    for (id, node) in net.nodes().iter().enumerate().filter(|(_, n)| n.op == Op::Relu) {
                        relus += 1;
                        for (k, (b, c)) in leaves.iter().enumerate() {
                            let want = one_leaf(net, b, c, lower);
                            let lane: Vec<f64> = got[id].iter().map(|a| a[k]).collect();
                            assert_eq!(lane, want[id], "node {id} lane {k} ({lower:?})");
                        }
                        assert!(got[id].iter().all(|a| a[used..].iter().all(|&v| v == 0.0)));
                        assert!(node.shape.numel() > 0);
                    }
                    assert!(relus >= 2);
                }
            }
        }
    }

    /// Per-leaf time of the pass by lane count on a CIFAR-sized residual
    /// net and a 256x6 MLP (`cargo test --release -p polycert-deeppoly
    /// babsr_lane_timing -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn babsr_lane_timing() {
        fn time<const L: usize>(net: &Network, b: &NodeBounds<f64>, c: &[f64]) -> f64 {
            let leaves: Vec<LeafObjective<'_, f64>> = (0..L).map(|_| (b, c)).collect();
            let t = std::time::Instant::now();
            let reps = 24;
            for _ in 0..reps {
                std::hint::black_box(relaxed_coefficients::<f64, L>(net, &leaves, &[], ReluLower::Area));
            }
            t.elapsed().as_secs_f64() * 1e6 / (reps * L) as f64
        }
        let mut rng = SplitMix(3);
        let mut widths = vec![784];
        widths.extend([256; 6]);
        widths.push(10);
        let nets =
            [random_resnet(&mut rng, crate::base::ir::Shape::new(3, 32, 32), 32, 10), random_mlp(&mut rng, &widths)];
        for net in &nets {
            let b = random_bounds(net, &mut rng);
            let c: Vec<f64> = (0..net.output_shape().numel()).map(|_| rng.weight(1.0)).collect();
            let t = std::time::Instant::now();
            for _ in 0..24 {
                std::hint::black_box(one_leaf(net, &b, &c, ReluLower::Area));
            }
            let old = t.elapsed().as_secs_f64() * 1e6 / 24.0;
            let us =
                [old, time::<1>(net, &b, &c), time::<2>(net, &b, &c), time::<4>(net, &b, &c), time::<8>(net, &b, &c)];
            println!(
                "{} neurons: us per leaf, one-leaf pass and 1/2/4/8 lanes: {us:.1?}",
                net.nodes().iter().map(|n| n.shape.numel()).sum::<usize>()
            );
        }
    }
}
