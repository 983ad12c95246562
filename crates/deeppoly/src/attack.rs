//! Falsification: a short PGD attack on the IR (f64 gradients), with every
//! candidate re-checked by plain float32 inference before it is reported.

use crate::eval::eval;
use crate::ir::{Network, Op};
use crate::property::{Counterexample, SubProblem};
use rayon::prelude::*;

/// Whether float32 inference at `x` lands in the unsafe region (checked
/// with an exact enclosure of `c·y`, so rounding cannot fake a hit).
pub fn check_f32(net: &Network, sp: &SubProblem, x: &[f32]) -> Option<Counterexample> {
    let inside = x.iter().enumerate().all(|(i, &v)| (v as f64) >= sp.input.lo[i] && (v as f64) <= sp.input.hi[i]);
    if !inside {
        return None;
    }
    let y = eval::<f32>(net, x);
    let y64: Vec<f64> = y.iter().map(|&v| v as f64).collect();
    let hit =
        sp.unsafe_region.iter().any(|conj| conj.iter().all(|h| polycert_interval::dot_scalar(&h.c, &y64).hi() <= h.d));
    hit.then(|| Counterexample { input: x.to_vec(), output: y, checked_with: "float32, sequential sums".into() })
}

/// Gradient of `Σ g_out·y` with respect to the input, given every node's
/// values `vals` at the point.
fn input_gradient(net: &Network, vals: &[Vec<f64>], g_out: &[f64]) -> Vec<f64> {
    let mut grads: Vec<Vec<f64>> = net.nodes().iter().map(|n| vec![0.0; n.shape.numel()]).collect();
    let last = net.output();
    grads[last].copy_from_slice(g_out);
    for id in (1..=last).rev() {
        let node = net.node(id);
        let g = std::mem::take(&mut grads[id]);
        if g.iter().all(|&v| v == 0.0) {
            continue;
        }
        let x0 = node.inputs[0];
        match &node.op {
            Op::Dense { weight, .. } => {
                let n = vals[x0].len();
                let gx = &mut grads[x0];
                for (i, &gi) in g.iter().enumerate() {
                    if gi != 0.0 {
                        for (gj, w) in gx.iter_mut().zip(&weight[i * n..(i + 1) * n]) {
                            *gj += gi * w;
                        }
                    }
                }
            }
            Op::Conv2d(c) => {
                let (si, so, sw) = (net.node(x0).shape, node.shape, c.stride.1);
                let gx = &mut grads[x0];
                crate::eval::conv_runs(c, si, so, |w, o, i, n| {
                    for (t, &gt) in g[o..o + n].iter().enumerate() {
                        gx[i + t * sw] += w * gt;
                    }
                });
            }
            Op::Relu => {
                for (j, &gi) in g.iter().enumerate() {
                    if vals[x0][j] > 0.0 {
                        grads[x0][j] += gi;
                    }
                }
            }
            Op::Add => {
                for &k in &node.inputs {
                    for (j, &gi) in g.iter().enumerate() {
                        grads[k][j] += gi;
                    }
                }
            }
            Op::Reshape => {
                for (j, &gi) in g.iter().enumerate() {
                    grads[x0][j] += gi;
                }
            }
            Op::ChannelAffine { mul, .. } => {
                let hw = node.shape.h * node.shape.w;
                for (j, &gi) in g.iter().enumerate() {
                    grads[x0][j] += gi * mul[j / hw].midpoint();
                }
            }
            Op::Concat => {
                let mut off = 0;
                for &k in &node.inputs {
                    let n = grads[k].len();
                    for j in 0..n {
                        grads[k][j] += g[off + j];
                    }
                    off += n;
                }
            }
            // Pooling and inputs: no gradient (the attack still tries the box centre and corners).
            Op::MaxPool2d(_) | Op::AvgPool2d(_) | Op::Input => {}
        }
    }
    std::mem::take(&mut grads[0])
}

/// The `k` disjuncts closest to being reachable: those whose best certified
/// lower bound (over their half-spaces, flattened in `lbs`) is smallest.
pub fn weakest_disjuncts(sp: &SubProblem, lbs: &[f64], k: usize) -> Vec<usize> {
    let mut at = 0;
    let mut best: Vec<(f64, usize)> = Vec::with_capacity(sp.unsafe_region.len());
    for (i, conj) in sp.unsafe_region.iter().enumerate() {
        let b = lbs
            .get(at..at + conj.len())
            .map_or(f64::NEG_INFINITY, |s| s.iter().copied().fold(f64::NEG_INFINITY, f64::max));
        best.push((b, i));
        at += conj.len();
    }
    best.sort_by(|a, b| a.0.total_cmp(&b.0));
    best.into_iter().filter(|&(b, _)| b <= 0.0).take(k).map(|(_, i)| i).collect()
}

/// Projected gradient descent on `max_k (c_k·y − d_k)` for the listed
/// disjuncts, from the box centre, with sign steps. Returns a
/// float32-checked hit.
pub fn pgd(
    net: &Network,
    sp: &SubProblem,
    disjuncts: &[usize],
    steps: usize,
    deadline: Option<std::time::Instant>,
) -> Option<Counterexample> {
    let late = || deadline.is_some_and(|d| std::time::Instant::now() >= d);
    let (lo, hi) = (&sp.input.lo, &sp.input.hi);
    let project = |x: &mut Vec<f64>| {
        for i in 0..x.len() {
            x[i] = x[i].clamp(lo[i], hi[i]);
        }
    };
    let to_f32 = |x: &[f64]| -> Vec<f32> {
        x.iter()
            .enumerate()
            .map(|(i, &v)| {
                let f = v as f32;
                // Keep the rounded point inside the box.
                if (f as f64) < lo[i] {
                    f.next_up()
                } else if (f as f64) > hi[i] {
                    f.next_down()
                } else {
                    f
                }
            })
            .collect()
    };
    // Each disjunct's run is deterministic and independent: run them in
    // parallel and report the first hit in the given order.
    let run = |conj: &Vec<crate::property::Halfspace>| -> Option<Counterexample> {
        let mut x = sp.input.centre();
        for step in 0..steps {
            if late() {
                return None;
            }
            let vals = crate::eval::eval_all_unordered(net, &x);
            let y = &vals[net.output()];
            let (k, v) = conj
                .iter()
                .enumerate()
                .map(|(k, h)| (k, h.c.iter().zip(y).map(|(c, y)| c * y).sum::<f64>() - h.d))
                .max_by(|a, b| a.1.total_cmp(&b.1))?;
            if v <= 0.0
                && let Some(cex) = check_f32(net, sp, &to_f32(&x))
            {
                return Some(cex);
            }
            let g = input_gradient(net, &vals, &conj[k].c);
            let alpha = 2.5 / steps as f64 * (1.0 - step as f64 / steps as f64 * 0.5);
            for i in 0..x.len() {
                x[i] -= alpha * (hi[i] - lo[i]) * g[i].signum();
            }
            project(&mut x);
        }
        check_f32(net, sp, &to_f32(&x))
    };
    let conjs: Vec<_> = disjuncts.iter().filter_map(|&i| sp.unsafe_region.get(i)).collect();
    let hits: Vec<Option<Counterexample>> = conjs.par_iter().map(|c| run(c)).collect();
    hits.into_iter().flatten().next()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Shape;
    use crate::property::{InputBox, Property};

    /// y0 = x, y1 = 0.5 on x ∈ [0.4, 1]: the centre is safe for label 0,
    /// the attack must find x < 0.5.
    #[test]
    fn pgd_finds_the_hidden_counterexample() {
        let mut n = Network::new(Shape::flat(1));
        n.push("d", Op::Dense { weight: vec![1.0, 0.0], bias: vec![0.0, 0.5], out: 2 }, &[0]).unwrap();
        let p = Property::robustness("p", InputBox::new(vec![0.4], vec![1.0]).unwrap(), 0, 2).unwrap();
        let sp = &p.subproblems[0];
        assert!(check_f32(&n, sp, &[0.7]).is_none());
        let cex = pgd(&n, sp, &[0], 20, None).expect("counterexample");
        assert!(cex.input[0] <= 0.5 && cex.input[0] >= 0.4, "{cex:?}");
        assert!(cex.output[0] <= cex.output[1]);
    }

    #[test]
    fn pgd_reports_nothing_for_a_robust_box() {
        let mut n = Network::new(Shape::flat(1));
        n.push("d", Op::Dense { weight: vec![1.0, 0.0], bias: vec![0.0, 0.5], out: 2 }, &[0]).unwrap();
        let p = Property::robustness("p", InputBox::new(vec![0.6], vec![1.0]).unwrap(), 0, 2).unwrap();
        assert!(pgd(&n, &p.subproblems[0], &[0], 20, None).is_none());
        assert_eq!(weakest_disjuncts(&p.subproblems[0], &[-1.0], 3), vec![0]);
        assert!(weakest_disjuncts(&p.subproblems[0], &[0.5], 3).is_empty());
    }
}
