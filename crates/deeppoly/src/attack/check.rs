//! Falsification helpers: the float32 check every counterexample passes
//! before it is reported, the choice of disjuncts to attack, and a host
//! reference of the input gradient (the attack itself runs on the backend,
//! batched: [`crate::attack::pgd`]).

use crate::base::eval::eval;
use crate::base::ir::{Network, Op};
use crate::base::property::{Counterexample, SubProblem};

/// After a dropped Softmax: the margin a comparison needs at outputs within
/// `[lo, hi]` (subtracted from `d` for a hit); else 0.
fn softmax_margin(net: &Network, lo: &[f64], hi: &[f64]) -> f64 {
    if net.softmax_output() { crate::base::softmax::margin(crate::base::softmax::magnitude(lo, hi)) } else { 0.0 }
}

/// After a dropped Softmax only comparisons of outputs can be reached.
fn margin_ok(net: &Network, h: &crate::base::property::Halfspace) -> bool {
    !net.softmax_output() || crate::base::softmax::is_comparison(h)
}

/// Whether float32 inference at `x` lands in the unsafe region (checked
/// with an exact enclosure of `c·y`, so rounding cannot fake a hit), `x`
/// lying in the box as the property states it.
pub fn check_f32(net: &Network, sp: &SubProblem, x: &[f32]) -> Option<Counterexample> {
    if !sp.input.holds_f32(x) {
        return None;
    }
    let y = eval::<f32>(net, x);
    let y64: Vec<f64> = y.iter().map(|&v| v as f64).collect();
    hits(net, sp, &y64, &y64).then(|| Counterexample {
        input: x.to_vec(),
        output: y,
        checked_with: "float32, sequential sums".into(),
    })
}

/// Whether every output vector within `[lo, hi]` meets one disjunct of the
/// unsafe region as stated (each half-space's `hit`, after a dropped
/// Softmax with its margin).
fn hits(net: &Network, sp: &SubProblem, lo: &[f64], hi: &[f64]) -> bool {
    let tau = softmax_margin(net, lo, hi);
    sp.unsafe_region.iter().any(|conj| {
        conj.iter().all(|h| {
            let up = h.c.iter().enumerate().fold(0.0, |s, (j, &c)| {
                let y = if c >= 0.0 { hi[j] } else { lo[j] };
                if c == 0.0 { s } else { polycert_interval::fp::add_up(s, polycert_interval::fp::mul_up(c, y)) }
            });
            margin_ok(net, h) && up <= polycert_interval::fp::sub_down(h.hit, tau)
        })
    })
}

impl<B: crate::base::backend::Backend<T>, T: polycert_interval::Fp> crate::base::analyzer::Analyzer<'_, B, T> {
    /// Whether every output the deployed network can give at `x` (any
    /// summation order, σ within its tolerance) lies in one disjunct of the
    /// unsafe region: the float32 outputs where they are exact in every
    /// order ([`crate::attack::exact`]), else the interval forward pass over
    /// the zero-width box at `x`. A counterexample passes this as well as [`check_f32`], so other
    /// runtimes (onnxruntime, VNN-COMP's checker) reproduce it. A backend
    /// failure confirms nothing.
    pub fn confirm(&self, sp: &SubProblem, x: &[f32]) -> bool {
        self.confirm_all(&[(sp, x)])[0]
    }

    /// [`Self::confirm`] for several points, in one forward pass over
    /// their zero-width boxes (at most [`CONFIRM_BATCH`] at a time).
    pub fn confirm_all(&self, points: &[(&SubProblem, &[f32])]) -> Vec<bool> {
        let mut ok = vec![false; points.len()];
        let mut pending = Vec::new();
        for (i, &(sp, x)) in points.iter().enumerate() {
            if !sp.input.holds_f32(x) {
                continue;
            }
            // Float32 computes these outputs exactly, in every order.
            match crate::attack::exact::exact_f32_outputs(self.net, x) {
                Some(y) => ok[i] = hits(self.net, sp, &y, &y),
                None => pending.push(i),
            }
        }
        let n = self.net.output_shape().numel();
        for part in pending.chunks(CONFIRM_BATCH) {
            let boxes: Vec<_> = part.iter().map(|&i| crate::base::property::InputBox::point(points[i].1)).collect();
            let Ok(st) = self.forward_pass(&boxes.iter().collect::<Vec<_>>()) else { continue };
            let out = &st.bounds[self.net.output()];
            for (s, &i) in part.iter().enumerate() {
                let f = |v: &[T]| v[s * n..(s + 1) * n].iter().map(|v| v.to_f64_exact()).collect::<Vec<f64>>();
                ok[i] = hits(self.net, points[i].0, &f(&out.lo), &f(&out.hi));
            }
        }
        ok
    }
}

/// Points confirmed in one forward pass, at most.
pub const CONFIRM_BATCH: usize = 64;

/// Gradient of `Σ g_out·y` with respect to the input, given every node's
/// values `vals` at the point (f64, on the host: the conformance suite's
/// reference for the backends' gradients).
pub fn reference_gradient(net: &Network, vals: &[Vec<f64>], g_out: &[f64]) -> Vec<f64> {
    let mut grads: Vec<Vec<f64>> = net.nodes().iter().map(|n| vec![0.0; n.shape.numel()]).collect();
    grads[net.output()].copy_from_slice(g_out);
    crate::base::eval::backpropagate(net, &mut grads, |id, g, gx| {
        let x = &vals[net.node(id).inputs[0]];
        match net.node(id).op {
            Op::Relu => gx.iter_mut().zip(g).zip(x).filter(|(_, x)| **x > 0.0).for_each(|((a, &v), _)| *a += v),
            Op::Elementwise(f) => gx.iter_mut().zip(g).zip(x).for_each(|((a, &v), &x)| *a += v * f.slope(x)),
            Op::Sigmoid => gx.iter_mut().zip(g).zip(x).for_each(|((a, &v), &x)| {
                let s = 1.0 / (1.0 + (-x).exp());
                *a += v * s * (1.0 - s);
            }),
            Op::MaxPool2d(ref p) | Op::AvgPool2d(ref p) => {
                let shapes = (net.node(net.node(id).inputs[0]).shape, net.node(id).shape);
                crate::base::eval::pool_grad(x, g, gx, shapes, p, matches!(net.node(id).op, Op::MaxPool2d(_)))
            }
            _ => {}
        }
        true
    });
    std::mem::take(&mut grads[0])
}

/// The sign steps of an attack run, as shares of each input's width.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Schedule {
    /// From `2.5/steps`, shrinking to half: explores the box.
    Coarse(usize),
    /// The coarse schedule's first half, then shrinking geometrically to
    /// `AttackOptions::fine_end` of it, so that a run can settle inside a region much
    /// narrower than the box. For random restarts: on ACAS Xu 1_5 property 2
    /// (a sliver about 1% of one input's range wide) 2.6× as many of 200
    /// steps land there (a host experiment, 20,000 starts).
    Fine(usize),
}

impl Schedule {
    pub(crate) fn steps(self) -> usize {
        match self {
            Self::Coarse(n) | Self::Fine(n) => n,
        }
    }

    /// The step sizes, a fine schedule's last `fine_end` of its coarse phase's last.
    pub(crate) fn sizes(self, fine_end: f64) -> Vec<f64> {
        let n = self.steps();
        let coarse = |s: usize| 2.5 / n as f64 * (1.0 - s as f64 / n as f64 * 0.5);
        let half = n / 2;
        (0..n)
            .map(|s| match self {
                Self::Fine(_) if n >= 2 && s >= half => {
                    coarse(half) * fine_end.powf((s - half + 1) as f64 / (n - half) as f64)
                }
                _ => coarse(s),
            })
            .collect()
    }
}

/// `c·y − d`: how far `y` is from meeting the half-space (≤ 0 where it does).
fn excess(h: &crate::base::property::Halfspace, y: &[f64]) -> f64 {
    h.c.iter().zip(y).map(|(c, y)| c * y).sum::<f64>() - h.d
}

/// The half-space of a disjunct furthest from holding at `y`, and by how
/// much: `max_k (c_k·y − d_k)` (at most 0 inside the region).
pub(crate) fn worst_halfspace(sp: &SubProblem, disjunct: usize, y: &[f64]) -> Option<(usize, f64)> {
    sp.unsafe_region
        .get(disjunct)?
        .iter()
        .enumerate()
        .map(|(k, h)| (k, excess(h, y)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// The output gradient of the hinge loss `Σ_k max(0, c_k·y − d_k + margin)`
/// over the half-spaces of `conj` (`k`: the worst, always included; `margin`:
/// `AttackOptions::hinge` times the outputs' scale): every
/// half-space not yet met by the margin descends at once. A conjunction's
/// region can be a sliver where several are nearly equal, around which
/// chasing the worst alone zigzags.
pub(crate) fn hinge_seed(conj: &[crate::base::property::Halfspace], y: &[f64], k: usize, margin: f64) -> Vec<f64> {
    let mut seed = conj[k].c.clone();
    for (j, h) in conj.iter().enumerate() {
        if j != k && excess(h, y) > -margin {
            seed.iter_mut().zip(&h.c).for_each(|(s, c)| *s += c);
        }
    }
    seed
}

/// How far `y` is from the whole unsafe region: the least, over its
/// disjuncts, of [`worst_halfspace`] (at most 0 inside it). A point aimed at
/// one disjunct often lands in another.
pub(crate) fn region_excess(sp: &SubProblem, y: &[f64]) -> f64 {
    (0..sp.unsafe_region.len()).filter_map(|d| worst_halfspace(sp, d, y)).map(|(_, m)| m).fold(f64::INFINITY, f64::min)
}

/// Checks the box centre in float32 inference against the unsafe region.
pub(crate) fn falsify_centre(net: &Network, sp: &SubProblem) -> Option<Counterexample> {
    let x: Vec<f32> = sp.input.centre().iter().map(|&v| v as f32).collect();
    check_f32(net, sp, &x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ir::Shape;
    use crate::base::property::weakest_disjuncts;
    use crate::base::property::{Halfspace, InputBox, Property};

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
    fn fine_schedule_keeps_the_coarse_half_then_shrinks_to_a_hundredth() {
        let (coarse, fine) = (Schedule::Coarse(10).sizes(0.01), Schedule::Fine(10).sizes(0.01));
        // 2.5/10·(1 − s/20): 0.25 at s = 0, 0.1375 at s = 9.
        assert!((coarse[0] - 0.25).abs() < 1e-15 && (coarse[9] - 0.1375).abs() < 1e-15, "{coarse:?}");
        assert_eq!(fine[..5], coarse[..5]);
        // From 0.1875 (s = 5 coarse) to 0.1875·0.01, by a factor 0.01^(1/5).
        assert!((fine[9] - 0.1875 * 0.01).abs() < 1e-15, "{fine:?}");
        assert!((fine[5] / 0.1875 - 0.01f64.powf(0.2)).abs() < 1e-12, "{fine:?}");
        assert!(fine.windows(2).all(|w| w[1] < w[0]), "{fine:?}");
        assert_eq!(Schedule::Fine(1).sizes(0.01), Schedule::Coarse(1).sizes(0.01));
    }

    /// The conjunction `y_0 ≤ y_1`, `y_0 ≤ y_2` (`y_0 − y_k ≤ 0`) at
    /// `y = (0.5, 0.4996, −1)`: the worst is `y_0 − y_2 = 1.5`; `y_0 − y_1 =
    /// 4e-4` is not met either, so both descend. At `y_1 = 0.6` the first is
    /// met by 0.1 and only the worst descends; at `y_1 = 0.504` it is met by
    /// 4e-3: enough for the margin 1e-3, not for 1e-2.
    #[test]
    fn hinge_seed_adds_the_half_spaces_not_met_by_the_margin() {
        let h = |k: usize| {
            crate::base::property::Halfspace::new((0..3).map(|i| f64::from(i == 0) - f64::from(i == k)).collect(), 0.0)
        };
        let conj = [h(1), h(2)];
        let y = [0.5, 0.4996, -1.0];
        let sp = SubProblem {
            input: crate::base::property::InputBox::new(vec![0.0], vec![1.0]).expect("box"),
            unsafe_region: vec![conj.to_vec()],
        };
        assert_eq!(worst_halfspace(&sp, 0, &y), Some((1, 1.5)));
        assert_eq!(hinge_seed(&conj, &y, 1, 1e-3), vec![2.0, -1.0, -1.0]);
        assert_eq!(hinge_seed(&conj, &[0.5, 0.6, -1.0], 1, 1e-3), vec![1.0, 0.0, -1.0]);
        assert_eq!(hinge_seed(&conj, &[0.5, 0.504, -1.0], 1, 1e-3), vec![1.0, 0.0, -1.0]);
        assert_eq!(hinge_seed(&conj, &[0.5, 0.504, -1.0], 1, 1e-2), vec![2.0, -1.0, -1.0]);
    }

    #[test]
    fn f32_points_stay_in_the_box() {
        let b = |lo: f64, hi: f64| crate::base::property::InputBox::new(vec![lo], vec![hi]).expect("box");
        // fl32(0.1) = 0.100000001490116... lies above 0.1 + 1e-9.
        let x = b(0.05, 0.1 + 1e-9).to_f32_inside(&[0.1]);
        assert!((x[0] as f64) <= 0.1 + 1e-9 && (x[0] as f64) >= 0.05, "{x:?}");
        assert_eq!(b(0.0, 1.0).to_f32_inside(&[0.5]), vec![0.5f32]);
        let y = b(0.1, 0.2).to_f32_inside(&[0.1]);
        assert!((y[0] as f64) >= 0.1 && (y[0] as f64) <= 0.2);
        // The stated box's float32 bounds hold too.
        let s = b(0.0, 1.0f64.next_up()).with_float32(vec![0.0], vec![1.0]).expect("f32");
        assert_eq!(s.to_f32_inside(&[2.0]), vec![1.0f32]);
        assert!(!s.holds_f32(&[1.0f32.next_up()]) && s.holds_f32(&[1.0]));
    }

    /// The distance to the whole region is the least over its disjuncts,
    /// each disjunct's being its worst half-space's.
    #[test]
    fn region_excess_is_the_nearest_disjunct() {
        let h = |c: [f64; 2], d: f64| Halfspace::new(c.to_vec(), d);
        let sp = SubProblem {
            input: InputBox::point(&[0.0]),
            unsafe_region: vec![vec![h([1.0, 0.0], 0.0), h([0.0, 1.0], 5.0)], vec![h([-1.0, 0.0], -3.0)]],
        };
        // At y = (2, 1): the first disjunct misses by 2 (its worst), the second by 1.
        assert_eq!(worst_halfspace(&sp, 0, &[2.0, 1.0]), Some((0, 2.0)));
        assert_eq!(region_excess(&sp, &[2.0, 1.0]), 1.0);
        assert_eq!(region_excess(&sp, &[4.0, 1.0]), -1.0);
    }
}
