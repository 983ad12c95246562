//! Falsification helpers: the float32 check every counterexample passes
//! before it is reported, the choice of disjuncts to attack, and a host
//! reference of the input gradient (the attack itself runs on the backend,
//! batched: [`crate::pgd`]).

use crate::eval::eval;
use crate::ir::{Network, Op};
use crate::property::{Counterexample, SubProblem};

/// After a dropped Softmax: the margin a comparison needs at outputs within
/// `[lo, hi]` (subtracted from `d` for a hit); else 0.
fn softmax_margin(net: &Network, lo: &[f64], hi: &[f64]) -> f64 {
    if net.softmax_output() { crate::softmax::margin(crate::softmax::magnitude(lo, hi)) } else { 0.0 }
}

/// After a dropped Softmax only comparisons of outputs can be reached.
fn margin_ok(net: &Network, h: &crate::property::Halfspace) -> bool {
    !net.softmax_output() || crate::softmax::is_comparison(h)
}

/// Whether float32 inference at `x` lands in the unsafe region (checked
/// with an exact enclosure of `c·y`, so rounding cannot fake a hit).
pub fn check_f32(net: &Network, sp: &SubProblem, x: &[f32]) -> Option<Counterexample> {
    let inside = x.iter().enumerate().all(|(i, &v)| (v as f64) >= sp.input.lo[i] && (v as f64) <= sp.input.hi[i]);
    if !inside {
        return None;
    }
    let y = eval::<f32>(net, x);
    let y64: Vec<f64> = y.iter().map(|&v| v as f64).collect();
    let tau = softmax_margin(net, &y64, &y64);
    let hit = sp.unsafe_region.iter().any(|conj| {
        conj.iter().all(|h| {
            polycert_interval::dot_scalar(&h.c, &y64).hi() <= polycert_interval::fp::sub_down(h.d, tau)
                && margin_ok(net, h)
        })
    });
    hit.then(|| Counterexample { input: x.to_vec(), output: y, checked_with: "float32, sequential sums".into() })
}

impl<B: crate::backend::Backend<T>, T: polycert_interval::Fp> crate::analysis::Analyzer<'_, B, T> {
    /// Whether every output the deployed network can give at `x` (any
    /// summation order, σ within its tolerance) lies in one disjunct of the
    /// unsafe region: the interval forward pass over the zero-width box at
    /// `x`. A counterexample passes this as well as [`check_f32`], so other
    /// runtimes (onnxruntime, VNN-COMP's checker) reproduce it. A backend
    /// failure confirms nothing.
    pub fn confirm(&self, sp: &SubProblem, x: &[f32]) -> bool {
        let v: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let at = crate::property::InputBox { lo: v.clone(), hi: v };
        let Ok(st) = self.forward_pass(&[&at]) else { return false };
        let out = &st.bounds[self.net.output()];
        let (lo, hi): (Vec<f64>, Vec<f64>) =
            (out.lo.iter().map(|v| v.to_f64_exact()).collect(), out.hi.iter().map(|v| v.to_f64_exact()).collect());
        let tau = softmax_margin(self.net, &lo, &hi);
        sp.unsafe_region.iter().any(|conj| {
            conj.iter().all(|h| {
                if !margin_ok(self.net, h) {
                    return false;
                }
                let up = h.c.iter().enumerate().fold(0.0, |s, (j, &c)| {
                    let y = if c >= 0.0 { hi[j] } else { lo[j] };
                    if c == 0.0 { s } else { polycert_interval::fp::add_up(s, polycert_interval::fp::mul_up(c, y)) }
                });
                up <= polycert_interval::fp::sub_down(h.d, tau)
            })
        })
    }
}

/// Gradient of `Σ g_out·y` with respect to the input, given every node's
/// values `vals` at the point (f64, on the host: the conformance suite's
/// reference for the backends' gradients).
pub fn reference_gradient(net: &Network, vals: &[Vec<f64>], g_out: &[f64]) -> Vec<f64> {
    let mut grads: Vec<Vec<f64>> = net.nodes().iter().map(|n| vec![0.0; n.shape.numel()]).collect();
    grads[net.output()].copy_from_slice(g_out);
    crate::eval::backpropagate(net, &mut grads, |id, g, gx| {
        let x = &vals[net.node(id).inputs[0]];
        match net.node(id).op {
            Op::Relu => gx.iter_mut().zip(g).zip(x).filter(|(_, x)| **x > 0.0).for_each(|((a, &v), _)| *a += v),
            Op::Sigmoid => gx.iter_mut().zip(g).zip(x).for_each(|((a, &v), &x)| {
                let s = 1.0 / (1.0 + (-x).exp());
                *a += v * s * (1.0 - s);
            }),
            // Pooling: no gradient (the attack still tries the box centre and corners).
            _ => {}
        }
        true
    });
    std::mem::take(&mut grads[0])
}

/// The `k` disjuncts closest to being reachable: those whose best certified
/// lower bound (over their half-spaces, flattened in `lbs`) is smallest.
pub fn weakest_disjuncts(sp: &SubProblem, lbs: &[f64], k: usize) -> Vec<usize> {
    let mut open = crate::property::unproved_disjuncts(&sp.unsafe_region, lbs);
    open.sort_by(|a, b| a.2.total_cmp(&b.2));
    open.into_iter().take(k).map(|(d, _, _)| d).collect()
}

/// `x` in float32, nudged to stay inside `[lo, hi]`.
pub fn to_f32_in_box(x: &[f64], lo: &[f64], hi: &[f64]) -> Vec<f32> {
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            let f = v as f32;
            if (f as f64) < lo[i] {
                f.next_up()
            } else if (f as f64) > hi[i] {
                f.next_down()
            } else {
                f
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Shape;
    use crate::property::{InputBox, Property};

    #[test]
    fn weakest_disjuncts_keeps_the_unproved_ones_in_order() {
        let mut n = Network::new(Shape::flat(1));
        n.push("d", Op::Dense { weight: vec![1.0, 0.0, 0.0], bias: vec![0.0, 0.5, 0.2], out: 3 }, &[0]).unwrap();
        let p = Property::robustness("p", InputBox::new(vec![0.6], vec![1.0]).unwrap(), 0, 3).unwrap();
        let sp = &p.subproblems[0];
        assert_eq!(weakest_disjuncts(sp, &[-1.0, -3.0], 3), vec![1, 0]);
        assert_eq!(weakest_disjuncts(sp, &[0.5, -3.0], 3), vec![1]);
        assert!(weakest_disjuncts(sp, &[0.5, 0.1], 3).is_empty());
        // Centre 0.8: y = (0.8, 0.5, 0.2) is safe; 0.3 is not inside the box.
        assert!(check_f32(&n, sp, &[0.8]).is_none());
        assert!(check_f32(&n, sp, &[0.3]).is_none());
    }

    #[test]
    fn f32_points_stay_in_the_box() {
        // fl32(0.1) = 0.100000001490116... lies above 0.1 + 1e-9.
        let x = to_f32_in_box(&[0.1], &[0.05], &[0.1 + 1e-9]);
        assert!((x[0] as f64) <= 0.1 + 1e-9 && (x[0] as f64) >= 0.05, "{x:?}");
        assert_eq!(to_f32_in_box(&[0.5], &[0.0], &[1.0]), vec![0.5f32]);
        let y = to_f32_in_box(&[0.1], &[0.1], &[0.2]);
        assert!((y[0] as f64) >= 0.1 && (y[0] as f64) <= 0.2);
    }
}
