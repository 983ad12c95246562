//! The two passes: tightening unstable ReLU inputs, and proving the
//! property's half-spaces infeasible.

use crate::analysis::{AnalysisError, Analyzer};
use crate::backend::{Backend, BackendError};
use crate::backsub::{Coef, Goal, Rows};
use crate::batch::SlotResult;
use crate::forward::RunState;
use crate::geom::Geom;
use crate::ir::Op;
use crate::property::SubProblem;
use polycert_interval::{Fp, fp};
use std::collections::BTreeMap;
use std::time::Instant;

/// Per (slot, half-space index within the slot): exact extra terms of its
/// row, `(node, neuron, coefficient)`.
pub(crate) type Terms<'t> = dyn Fn(usize, usize) -> Vec<(usize, usize, f64)> + 't;

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// For each listed batch slot: the lower bound of `c·y − d` for every
    /// half-space of its sub-problem (flattened in order), and whether every
    /// disjunct has an infeasible half-space. All slots' rows share one
    /// backsubstitution.
    /// `terms(s, h)`, where given, adds exact terms `(node, neuron, coefficient)`
    /// to the row of slot `s`'s half-space `h` (split constraints' Lagrangian
    /// terms, each ≤ 0 on the slot's domain).
    pub(crate) fn prove_output(
        &self,
        st: &mut RunState<T, B::Buf>,
        sps: &[&SubProblem],
        slots: &[usize],
        terms: Option<&Terms>,
        deadline: Option<Instant>,
    ) -> Result<Vec<SlotResult>, AnalysisError> {
        let out = self.net.output();
        let shape = self.net.output_shape();
        let n = shape.numel();
        let (mut lo, mut hi, mut cst, mut group, mut props) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        // Disjuncts are numbered across the batch: a group is one conjunction.
        let mut gi = 0u32;
        let softmax = self.net.softmax_output();
        let mut extra: Vec<(usize, BTreeMap<usize, T>)> = Vec::new();
        // An empty slot's domain holds no input: every disjunct is infeasible.
        let live: Vec<usize> = slots.iter().copied().filter(|&s| !st.empty[s]).collect();
        for &s in &live {
            // After a dropped Softmax, comparisons need a float margin; other
            // half-spaces cannot be proved (an infinite one).
            let (tau, l, u) = if softmax {
                let b = &st.bounds[out];
                let (l, h): (Vec<f64>, Vec<f64>) = (
                    b.lo[s * n..(s + 1) * n].iter().map(|v| v.to_f64_exact()).collect(),
                    b.hi[s * n..(s + 1) * n].iter().map(|v| v.to_f64_exact()).collect(),
                );
                (crate::softmax::margin(crate::softmax::magnitude(&l, &h)), l, h)
            } else {
                (0.0, vec![], vec![])
            };
            let no_underflow = |h: &crate::property::Halfspace| {
                crate::softmax::larger(h).is_some_and(|a| crate::softmax::no_underflow(a, &l, &u))
            };
            let mut hi_at = 0;
            for conj in &sps[s].unsafe_region {
                for h in conj {
                    if let Some(t) = terms {
                        for &(node, neuron, v) in t(s, hi_at).iter() {
                            let k = self.net.node(node).shape.numel();
                            let e = match extra.iter().position(|(n, _)| *n == node) {
                                Some(e) => e,
                                None => {
                                    extra.push((node, BTreeMap::new()));
                                    extra.len() - 1
                                }
                            };
                            extra[e].1.insert(cst.len() * k + neuron, T::from_f64_nearest(v));
                        }
                    }
                    hi_at += 1;
                    lo.extend(h.c.iter().map(|&c| fp::from_f64_down::<T>(c)));
                    hi.extend(h.c.iter().map(|&c| fp::from_f64_up::<T>(c)));
                    let d = match softmax {
                        false => h.d,
                        true if crate::softmax::is_comparison(h) && no_underflow(h) => fp::add_up(h.d, tau),
                        true => f64::INFINITY,
                    };
                    cst.push(-d);
                    group.push(gi);
                    props.push(s as u32);
                }
                gi += 1;
            }
        }
        debug_assert_eq!(lo.len(), cst.len() * n);
        let geom = Geom::full(shape, cst.len()).with_props(props);
        let extra = extra
            .into_iter()
            .map(|(node, vals)| {
                let mut v = vec![T::zero(); cst.len() * self.net.node(node).shape.numel()];
                vals.into_iter().for_each(|(i, x)| v[i] = x);
                (node, v)
            })
            .collect();
        let rows = Rows { start: out, geom, coef: Coef::Planes { lo, hi }, cst, group, extra };
        let lbs =
            if rows.cst.is_empty() { Vec::new() } else { self.backsubstitute(st, &rows, Goal::Positive, deadline)? };
        let mut k = 0;
        let mut res = Vec::with_capacity(slots.len());
        for &s in slots {
            if st.empty[s] {
                let m = sps[s].unsafe_region.iter().map(|c| c.len()).sum();
                res.push((vec![f64::INFINITY; m], true));
                continue;
            }
            let m: usize = sps[s].unsafe_region.iter().map(|c| c.len()).sum();
            let l = lbs[k..k + m].to_vec();
            k += m;
            let proved = crate::property::unproved_disjuncts(&sps[s].unsafe_region, &l).is_empty();
            res.push((l, proved));
        }
        Ok(res)
    }

    /// Tightens the input bounds of every ReLU whose interval straddles 0,
    /// and of every σ (all of its inputs), layer by layer in topological order. After a layer, the forward pass
    /// re-runs only up to the next layer to refine (backsubstitution from a
    /// node reads nothing later), and to the end once all are done. Only
    /// the listed batch slots are refined; their rows share each step.
    /// `after[s]`, where given, skips slot `s`'s layers whose input is node
    /// `after[s]` or earlier (their bounds are already refined, e.g. a ReLU
    /// split leaf's layers up to its split).
    pub(crate) fn refine_all(
        &self,
        st: &mut RunState<T, B::Buf>,
        slots: &[usize],
        after: &[Option<usize>],
        deadline: Option<Instant>,
    ) -> Result<(), AnalysisError> {
        let last = self.net.nodes().len() - 1;
        // Nodes `..=fresh` reflect every refinement so far.
        let mut fresh = last;
        for r in 0..self.net.nodes().len() {
            let sigmoid = match self.net.node(r).op {
                Op::Relu => false,
                Op::Sigmoid => true,
                _ => continue,
            };
            let p = self.net.node(r).inputs[0];
            if p > fresh {
                let _p = crate::profile::span("refine.forward_range");
                self.forward_range(st, fresh, p)?;
                fresh = p;
            }
            let shape = self.net.node(p).shape;
            let n = shape.numel();
            let b = &st.bounds[p];
            let skip = |s: usize| st.empty[s] || after.get(s).copied().flatten().is_some_and(|a| p <= a);
            // (slot, neuron) pairs; table index slot·n + neuron.
            let unstable: Vec<(usize, usize)> = slots
                .iter()
                .filter(|&&s| !skip(s))
                .flat_map(|&s| (0..n).map(move |i| (s, i)))
                .filter(|&(s, i)| {
                    let (l, h) = (b.lo[s * n + i], b.hi[s * n + i]);
                    if sigmoid { l < h } else { crate::relax::unstable(l, h) }
                })
                .collect();
            if unstable.is_empty() {
                continue;
            }
            // Two rows per neuron: +x_i bounds l_i, −x_i bounds −u_i.
            let neurons: Vec<usize> = unstable.iter().flat_map(|&(_, i)| [i, i]).collect();
            let props: Vec<u32> = unstable.iter().flat_map(|&(s, _)| [s as u32, s as u32]).collect();
            let val = (0..neurons.len()).map(|row| if row % 2 == 0 { T::one() } else { -T::one() }).collect();
            let rows = Rows::units(p, shape, &neurons, props, val);
            let goal = if sigmoid { Goal::Tightest } else { Goal::NonNegative };
            let lbs = {
                let _p = crate::profile::span("refine.backsub");
                self.backsubstitute(st, &rows, goal, deadline)?
            };
            let b = &mut st.bounds[p];
            for (t, &(s, i)) in unstable.iter().enumerate() {
                let i = s * n + i;
                let (l, h) = (fp::from_f64_down(lbs[2 * t]), fp::from_f64_up(-lbs[2 * t + 1]));
                RunState::intersect(b, &mut st.empty, n, i, l, h);
                if st.empty[s] && !st.within {
                    let msg = format!("inconsistent bounds for neuron {} of '{}'", i % n.max(1), self.net.node(p).name);
                    return Err(BackendError::Failure(msg).into());
                }
            }
            b.dev = None;
            st.invalidate_from(p);
            fresh = p;
        }
        if fresh < last {
            let _p = crate::profile::span("refine.forward_range");
            self.forward_range(st, fresh, last)?;
        }
        Ok(())
    }
}
