//! The two passes: tightening unstable ReLU inputs, and proving the
//! property's half-spaces infeasible.

use crate::base::analyzer::{AnalysisError, Analyzer};
use crate::base::backend::{Backend, BackendError};
use crate::base::budget::Budget;
use crate::base::geom::Geom;
use crate::base::ir::Op;
use crate::base::property::SubProblem;
use crate::base::relax::LayerSlopes;
use crate::gpupoly::backsub::{Coef, Goal, Rows};
use crate::gpupoly::forward::{Bounds, RunState};
use polycert_interval::{Fp, fp};
use std::collections::BTreeMap;

/// A sub-problem's result after a pass.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SlotResult {
    /// The lower bound of every half-space row, flattened in order.
    pub(crate) lower: Vec<f64>,
    /// Whether every disjunct is proved infeasible.
    pub(crate) proved: bool,
}

/// Whether leaves refine a layer, asked by [`Analyzer::refine_all`] and
/// told what refining gained: a search's per-layer gate (`bab/gate.rs`).
pub(crate) trait LayerGate {
    /// Whether leaves refine layer `p` this round (counts a skipped round).
    fn open(&self, p: usize) -> bool;
    /// Records a refinement of layer `p` in leaves: `stabilised` of its
    /// `unstable` ReLUs became stable and their summed width went from
    /// `before` to `after`.
    fn record(&self, p: usize, unstable: usize, stabilised: usize, before: f64, after: f64);
}

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
        budget: Budget,
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
            let (tau, l, u) = if softmax { softmax_margin(&st.bounds[out], s, n) } else { (0.0, vec![], vec![]) };
            let no_underflow = |h: &crate::base::property::Halfspace| {
                crate::base::softmax::larger(h).is_some_and(|a| crate::base::softmax::no_underflow(a, &l, &u))
            };
            let mut hi_at = 0;
            for conj in &sps[s].unsafe_region {
                for h in conj {
                    if let Some(t) = terms {
                        self.add_terms(&mut extra, &t(s, hi_at), cst.len());
                    }
                    hi_at += 1;
                    lo.extend(h.c.iter().map(|&c| fp::from_f64_down::<T>(c)));
                    hi.extend(h.c.iter().map(|&c| fp::from_f64_up::<T>(c)));
                    let d = match softmax {
                        false => h.d,
                        true if crate::base::softmax::is_comparison(h) && no_underflow(h) => fp::add_up(h.d, tau),
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
            if rows.cst.is_empty() { Vec::new() } else { self.backsubstitute(st, &rows, Goal::Positive, budget)? };
        Ok(slot_results(sps, slots, &st.empty, &lbs))
    }

    /// Adds a row's exact terms `(node, neuron, coefficient)` to `extra`
    /// (per node, by index `row·neurons + neuron`).
    fn add_terms(&self, extra: &mut Vec<(usize, BTreeMap<usize, T>)>, terms: &[(usize, usize, f64)], row: usize) {
        for &(node, neuron, v) in terms.iter() {
            let k = self.net.node(node).shape.numel();
            let e = match extra.iter().position(|(n, _)| *n == node) {
                Some(e) => e,
                None => {
                    extra.push((node, BTreeMap::new()));
                    extra.len() - 1
                }
            };
            extra[e].1.insert(row * k + neuron, T::from_f64_nearest(v));
        }
    }

    /// Certified bounds of every node's values over `input`, after the
    /// forward pass and (if enabled) the refinement pass, within `budget`
    /// (past its deadline: `Err(Timeout)`).
    pub fn node_bounds(
        &self,
        input: &crate::base::property::InputBox,
        budget: Budget,
    ) -> Result<Vec<crate::base::bounds::LoHi<f64>>, AnalysisError> {
        let st = self.refined_root(input, None, budget)?;
        Ok(crate::base::bounds::bounds_f64(st.into_bounds()))
    }

    /// One box's state after the forward pass (within `start`, bounds that
    /// hold over the box, where given) and (if enabled) the refinement pass.
    pub(crate) fn refined_root(
        &self,
        input: &crate::base::property::InputBox,
        start: Option<&crate::base::bounds::NodeBounds<T>>,
        budget: Budget,
    ) -> Result<RunState<T, B::Buf>, AnalysisError> {
        let mut st = self.forward_pass_within(&[input], &[start])?;
        if self.opts.passes.refine {
            self.refine_all(&mut st, &[0], &[], &[], None, budget)?;
        }
        Ok(st)
    }

    /// Tightens the input bounds of every ReLU whose interval straddles 0,
    /// and of every σ (all of its inputs), layer by layer in topological order. After a layer, the forward pass
    /// re-runs only up to the next layer to refine (backsubstitution from a
    /// node reads nothing later), and to the end once all are done. Only
    /// the listed batch slots are refined; their rows share each step.
    /// `after[s]`, where given, skips slot `s`'s layers whose input is node
    /// `after[s]` or earlier (their bounds are already refined, e.g. a ReLU
    /// split leaf's layers up to its split). `inter[s]`, where given, holds
    /// slot `s`'s lower slopes per layer and end (`tighten::layer_slopes`):
    /// a layer's lower ends are bounded again with the ReLUs before it at
    /// the first table, its upper ends at the second (any slope in `[0, 1]`
    /// is a valid lower line), and the tighter bound is kept: the root's
    /// tables alone left deep leaves looser than the relaxation's own slopes
    /// (bench/results/2026-11-25-layer-slopes.md). `gate`, where given (a ReLU search), skips a layer
    /// in the slots with `after` (leaves) while refining it gains too little
    /// there (`gate.rs`).
    pub(crate) fn refine_all(
        &self,
        st: &mut RunState<T, B::Buf>,
        slots: &[usize],
        after: &[Option<usize>],
        inter: &[Option<&LayerSlopes>],
        gate: Option<&dyn LayerGate>,
        budget: Budget,
    ) -> Result<(), AnalysisError> {
        let last = self.net.nodes().len() - 1;
        // Nodes `..=fresh` reflect every refinement so far.
        let mut fresh = last;
        let mut sloped = false;
        for r in 0..self.net.nodes().len() {
            let sigmoid = match self.net.node(r).op {
                Op::Relu => false,
                // Host relaxations: every layer whose bounds are not a point.
                Op::Sigmoid | Op::Elementwise(_) => true,
                _ => continue,
            };
            let p = self.net.node(r).inputs[0];
            if p > fresh {
                let _p = crate::base::profile::span("refine.forward_range");
                self.forward_range(st, fresh, p)?;
                fresh = p;
            }
            let shape = self.net.node(p).shape;
            let n = shape.numel();
            let b = &st.bounds[p];
            // A leaf's last node shared with its parent (`None`: not a leaf).
            let split = |s: usize| after.get(s).copied().flatten();
            // The gate is asked only when leaves would refine this layer.
            let gated = gate
                .is_some_and(|g| slots.iter().any(|&s| !st.empty[s] && split(s).is_some_and(|a| p > a)) && !g.open(p));
            let skip = |s: usize| st.empty[s] || split(s).is_some_and(|a| gated || p <= a);
            let live: Vec<usize> = slots.iter().copied().filter(|&s| !skip(s)).collect();
            // (slot, neuron) pairs; table index slot·n + neuron.
            let unstable: Vec<(usize, usize)> = live
                .iter()
                .flat_map(|&s| (0..n).map(move |i| (s, i)))
                .filter(|&(s, i)| {
                    let (l, h) = (b.lo[s * n + i], b.hi[s * n + i]);
                    if sigmoid { l < h } else { crate::base::relax::unstable(l, h) }
                })
                .collect();
            if unstable.is_empty() {
                continue;
            }
            let layer = Layer { p, sigmoid, live, unstable };
            let lbs = self.refine_ends(st, &layer, inter, &mut sloped, budget)?;
            self.meet_ends(st, &layer, &lbs, after, gate)?;
            st.bounds[p].dev = None;
            st.invalidate_from(p);
            fresh = p;
        }
        if sloped {
            // The relaxation's own lower slopes again, for the output rows.
            self.write_slopes(st, &[], last + 1)?;
        }
        if fresh < last {
            let _p = crate::base::profile::span("refine.forward_range");
            self.forward_range(st, fresh, last)?;
        }
        Ok(())
    }

    /// GPUPoly's backsubstitution of both ends of a layer's pairs, with
    /// `inter`'s tables. `sloped`: whether slopes other than the
    /// relaxation's are written.
    fn refine_ends(
        &self,
        st: &mut RunState<T, B::Buf>,
        &Layer { p, sigmoid, ref live, ref unstable }: &Layer,
        inter: &[Option<&LayerSlopes>],
        sloped: &mut bool,
        budget: Budget,
    ) -> Result<Vec<(f64, f64)>, AnalysisError> {
        let shape = self.net.node(p).shape;
        let tables = |s: usize| inter.get(s).copied().flatten().and_then(|l| l.get(p));
        let goal = if sigmoid { Goal::Tightest } else { Goal::NonNegative };
        // Per pair: the lower bounds of +x_i (l_i) and −x_i (−u_i). Every
        // end once with the relaxation's own slopes; a slot's end with a
        // table once more with it, keeping the tighter bound.
        let mut lbs = vec![(f64::NEG_INFINITY, f64::NEG_INFINITY); unstable.len()];
        for call in 0..3 {
            let rows: Vec<(usize, bool)> = match call {
                0 => (0..unstable.len()).flat_map(|t| [(t, true), (t, false)]).collect(),
                _ => (0..unstable.len())
                    .filter(|&t| tables(unstable[t].0).is_some_and(|tb| tb[call - 1].is_some()))
                    .map(|t| (t, call == 1))
                    .collect(),
            };
            if rows.is_empty() {
                continue;
            }
            let with: Vec<(usize, &crate::base::relax::Slopes)> = match call {
                0 => Vec::new(),
                _ => live.iter().filter_map(|&s| Some((s, tables(s)?[call - 1].as_ref()?))).collect(),
            };
            if !with.is_empty() || *sloped {
                self.write_slopes(st, &with, p)?;
                *sloped = !with.is_empty();
            }
            let neurons: Vec<usize> = rows.iter().map(|&(t, _)| unstable[t].1).collect();
            let props: Vec<u32> = rows.iter().map(|&(t, _)| unstable[t].0 as u32).collect();
            let val = rows.iter().map(|&(_, lower)| if lower { T::one() } else { -T::one() }).collect();
            let set = Rows::units(p, shape, &neurons, props, val);
            let got = {
                let _p = crate::base::profile::span("refine.backsub");
                self.backsubstitute(st, &set, goal, budget)?
            };
            for (&(t, lower), v) in rows.iter().zip(got) {
                let e = if lower { &mut lbs[t].0 } else { &mut lbs[t].1 };
                *e = e.max(v);
            }
        }
        Ok(lbs)
    }

    /// Intersects a layer's bounds with its pairs' refined ends `lbs`, and
    /// tells `gate` what refining gained in the leaves.
    fn meet_ends(
        &self,
        st: &mut RunState<T, B::Buf>,
        &Layer { p, ref live, ref unstable, .. }: &Layer,
        lbs: &[(f64, f64)],
        after: &[Option<usize>],
        gate: Option<&dyn LayerGate>,
    ) -> Result<(), AnalysisError> {
        let n = self.net.node(p).shape.numel();
        let split = |s: usize| after.get(s).copied().flatten();
        // What refining gained in the leaves, for the gate: pairs, made
        // stable, summed width before and after.
        let measure = gate.is_some() && live.iter().any(|&s| split(s).is_some());
        let width = |lo: T, hi: T| (hi - lo).to_f64().unwrap_or(f64::INFINITY).max(0.0);
        let (mut pairs, mut stable, mut w0, mut w1) = (0, 0, 0.0, 0.0);
        let b = &mut st.bounds[p];
        for (&(s, i), &(l, u)) in unstable.iter().zip(lbs) {
            let i = s * n + i;
            let before = width(b.lo[i], b.hi[i]);
            let (l, h) = (fp::from_f64_down(l), fp::from_f64_up(-u));
            RunState::intersect(b, &mut st.empty, n, i, l, h);
            if st.empty[s] && !st.within {
                let msg = format!("inconsistent bounds for neuron {} of '{}'", i % n.max(1), self.net.node(p).name);
                return Err(BackendError::Failure(msg).into());
            }
            if measure && split(s).is_some() {
                pairs += 1;
                stable += usize::from(!crate::base::relax::unstable(b.lo[i], b.hi[i]));
                w0 += before;
                w1 += width(b.lo[i], b.hi[i]);
            }
        }
        if let Some(g) = gate.filter(|_| measure) {
            g.record(p, pairs, stable, w0, w1);
        }
        Ok(())
    }
}

/// A layer of the refinement pass: node `p`, the input of a ReLU or (if
/// `sigmoid`) a σ, the `live` slots that refine it, and their `unstable`
/// (slot, neuron) pairs.
struct Layer {
    p: usize,
    sigmoid: bool,
    live: Vec<usize>,
    unstable: Vec<(usize, usize)>,
}

/// After a dropped Softmax: the float margin comparisons of slot `s` need,
/// and the output's bounds `b` in the slot (`n` values).
fn softmax_margin<T: Fp, Buf>(b: &Bounds<T, Buf>, s: usize, n: usize) -> (f64, Vec<f64>, Vec<f64>) {
    let (l, h): (Vec<f64>, Vec<f64>) = (
        b.lo[s * n..(s + 1) * n].iter().map(|v| v.to_f64_exact()).collect(),
        b.hi[s * n..(s + 1) * n].iter().map(|v| v.to_f64_exact()).collect(),
    );
    (crate::base::softmax::margin(crate::base::softmax::magnitude(&l, &h)), l, h)
}

/// Each listed slot's result from the live slots' row bounds `lbs`, in
/// order; an empty slot proves every disjunct.
fn slot_results(sps: &[&SubProblem], slots: &[usize], empty: &[bool], lbs: &[f64]) -> Vec<SlotResult> {
    let mut k = 0;
    let mut res = Vec::with_capacity(slots.len());
    for &s in slots {
        if empty[s] {
            let m = sps[s].unsafe_region.iter().map(|c| c.len()).sum();
            res.push(SlotResult { lower: vec![f64::INFINITY; m], proved: true });
            continue;
        }
        let m: usize = sps[s].unsafe_region.iter().map(|c| c.len()).sum();
        let l = lbs[k..k + m].to_vec();
        k += m;
        let proved = crate::base::property::unproved_disjuncts(&sps[s].unsafe_region, &l).is_empty();
        res.push(SlotResult { lower: l, proved });
    }
    res
}
