//! The forward interval pass, the layers' constant intervals (bias plus the
//! inference's rounding) and the ReLU relaxations.

use crate::base::analyzer::{AnalysisError, Analyzer, Params};
use crate::base::backend::Backend;
use crate::base::ir::{NodeId, Op};
use crate::base::property::InputBox;
use crate::base::relax::relu_relax;
use polycert_interval::{Fp, fp};
use rayon::prelude::*;

/// Host bounds of a node, with a lazily uploaded copy.
pub(crate) struct Bounds<T, Buf> {
    pub lo: Vec<T>,
    pub hi: Vec<T>,
    pub dev: Option<(Buf, Buf)>,
}

/// What backsubstitution through a node needs besides its weights.
pub(crate) enum Step<Buf> {
    None,
    /// Constant interval of an affine layer (bias ± rounding).
    Bias {
        lo: Buf,
        hi: Buf,
    },
    /// Per-neuron `y = x·m + c`.
    Diag {
        m_lo: Buf,
        m_hi: Buf,
        c_lo: Buf,
        c_hi: Buf,
    },
    /// ReLU (`mu_lo: None`) or σ relaxation (see `ReluParams`).
    Relu {
        lam_lo: Buf,
        lam_up: Buf,
        mu_up: Buf,
        mu_lo: Option<Buf>,
    },
    /// MaxPool relaxation (see `PoolParams`).
    MaxPool {
        sel_lo: Buf,
        sel_up: Buf,
        lo: Buf,
        up: Buf,
    },
    /// Average pooling: the sum's constant interval, then `y = s·m + c`.
    AvgPool {
        sum_lo: Buf,
        sum_hi: Buf,
        m_lo: Buf,
        m_hi: Buf,
        c_lo: Buf,
        c_hi: Buf,
        /// `≥ |s|`, for the point arithmetic.
        sum_abs: Buf,
    },
}

/// Bounds and backsubstitution data of one node.
pub(crate) type NodeResult<T, Buf> = (Bounds<T, Buf>, Step<Buf>);

/// State of an analysis of a batch of input boxes. Every per-neuron
/// vector holds `batch × neurons` values, one slot per box (property-major).
pub(crate) struct RunState<T, Buf> {
    pub batch: usize,
    pub bounds: Vec<Bounds<T, Buf>>,
    pub steps: Vec<Step<Buf>>,
    /// Point arithmetic, per node: `r ≥ |x|` on the device and `‖r‖₁` per slot.
    pub abs: Vec<Option<(Buf, Vec<f64>)>>,
    /// Point arithmetic, per affine node: `|W|·r` over its input.
    pub wabs: Vec<Option<Buf>>,
    /// Per slot: its prior bounds contradict the analysis (some node's
    /// lower bound passed its upper one), so no input of the slot's box
    /// meets its split constraints and the slot holds vacuously.
    pub empty: Vec<bool>,
    /// Whether contradicting bounds mean an empty domain (slots with prior
    /// bounds, such as ReLU split constraints) rather than a bug.
    pub within: bool,
}

impl<T: Fp, Buf> RunState<T, Buf> {
    /// Intersects value `k` (of a node with `n` neurons per slot) with
    /// `[lo, hi]`. An empty intersection marks the slot empty and keeps a
    /// point (`lo`), so later steps see consistent bounds.
    pub(crate) fn intersect(b: &mut Bounds<T, Buf>, empty: &mut [bool], n: usize, k: usize, lo: T, hi: T) {
        if meet((&mut b.lo[k], &mut b.hi[k]), (lo, hi)) {
            empty[k / n.max(1)] = true;
        }
    }
}

/// Narrows `[lo, hi]` to its intersection with `[l, h]`; an empty one
/// keeps the point `lo` and gives `true`.
fn meet<T: Fp>((lo, hi): (&mut T, &mut T), (l, h): (T, T)) -> bool {
    *lo = lo.max(l);
    *hi = hi.min(h);
    let empty = *lo > *hi;
    if empty {
        *hi = *lo;
    }
    empty
}

impl<T, Buf> RunState<T, Buf> {
    /// Every node's bounds, off the device.
    pub(crate) fn into_bounds(self) -> crate::base::bounds::NodeBounds<T> {
        self.bounds.into_iter().map(|b| crate::base::bounds::LoHi { lo: b.lo, hi: b.hi }).collect()
    }

    /// Drops the magnitudes derived from the bounds of nodes `from..`.
    pub fn invalidate_from(&mut self, from: NodeId) {
        for i in from..self.abs.len() {
            self.abs[i] = None;
            if i > from {
                self.wabs[i] = None;
            }
        }
    }
}

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// Interval bounds of every node for a batch of input boxes.
    pub(crate) fn forward_pass(&self, inputs: &[&InputBox]) -> Result<RunState<T, B::Buf>, AnalysisError> {
        self.forward_pass_within(inputs, &[])
    }

    /// [`Analyzer::forward_pass`], each node's bounds intersected, slot by
    /// slot, with the slot's `prior` bounds where given (bounds known to
    /// hold over a box containing the slot's), before any later node reads
    /// them.
    pub(crate) fn forward_pass_within(
        &self,
        inputs: &[&InputBox],
        prior: &[Option<&crate::base::bounds::NodeBounds<T>>],
    ) -> Result<RunState<T, B::Buf>, AnalysisError> {
        let lo: Vec<T> = inputs.iter().flat_map(|b| b.lo.iter().map(|&v| fp::from_f64_down(v))).collect();
        let hi: Vec<T> = inputs.iter().flat_map(|b| b.hi.iter().map(|&v| fp::from_f64_up(v))).collect();
        let n = self.net.nodes().len();
        let mut st = RunState {
            batch: inputs.len(),
            bounds: Vec::new(),
            steps: Vec::new(),
            abs: (0..n).map(|_| None).collect(),
            wabs: (0..n).map(|_| None).collect(),
            empty: vec![false; inputs.len()],
            within: prior.iter().any(|p| p.is_some()),
        };
        st.bounds.push(Bounds { lo, hi, dev: None });
        st.steps.push(Step::None);
        for id in 1..self.net.nodes().len() {
            let (mut b, s) = self.forward_node(&mut st, id)?;
            let n = self.net.node(id).shape.numel();
            if prior.iter().any(|p| p.and_then(|p| p.get(id)).is_some()) {
                let with = |slot: usize| {
                    let crate::base::bounds::LoHi { lo, hi } = prior.get(slot).copied().flatten()?.get(id)?;
                    Some((&lo[..], &hi[..]))
                };
                intersect_slots(&mut b, &mut st.empty, n, with);
                b.dev = None;
            }
            st.bounds.push(b);
            st.steps.push(s);
        }
        Ok(st)
    }

    /// Recomputes nodes `from+1..=to` after the bounds of `from` changed,
    /// intersecting with their old bounds. Nodes past `to` keep older (looser,
    /// still sound) bounds until recomputed; their magnitudes are dropped.
    pub(crate) fn forward_range(
        &self,
        st: &mut RunState<T, B::Buf>,
        from: NodeId,
        to: NodeId,
    ) -> Result<(), AnalysisError> {
        st.invalidate_from(from);
        for id in from + 1..=to.min(self.net.nodes().len() - 1) {
            let (mut b, s) = self.forward_node(st, id)?;
            let old = &st.bounds[id];
            let n = self.net.node(id).shape.numel().max(1);
            let with = |slot: usize| Some((&old.lo[slot * n..(slot + 1) * n], &old.hi[slot * n..(slot + 1) * n]));
            intersect_slots(&mut b, &mut st.empty, n, with);
            // ReLU and σ relaxations already follow their input's current
            // (intersected) bounds: the input was updated before this node.
            st.steps[id] = s;
            st.bounds[id] = b;
        }
        Ok(())
    }

    pub(crate) fn bounds_dev<'s>(
        &self,
        st: &'s mut RunState<T, B::Buf>,
        id: NodeId,
    ) -> Result<&'s (B::Buf, B::Buf), AnalysisError> {
        let b = &mut st.bounds[id];
        if b.dev.is_none() {
            b.dev = Some(self.upload_pair(&b.lo, &b.hi)?);
        }
        Ok(b.dev.as_ref().expect("uploaded"))
    }

    /// `r = max(|lo|, |hi|)` of a node on the device, and `‖r‖₁` rounded up
    /// per batch slot.
    pub(crate) fn abs_dev<'s>(
        &self,
        st: &'s mut RunState<T, B::Buf>,
        id: NodeId,
    ) -> Result<&'s (B::Buf, Vec<f64>), AnalysisError> {
        if st.abs[id].is_none() {
            let b = &st.bounds[id];
            let len = b.lo.len().min(b.hi.len());
            let r: Vec<T> = map_n(len, len, |i| b.lo[i].abs().max(b.hi[i].abs()));
            let n = self.net.node(id).shape.numel().max(1);
            let l1 = map_n(len.div_ceil(n), len, |s| {
                r[s * n..((s + 1) * n).min(len)].iter().fold(0.0, |a, v| fp::add_up(a, v.to_f64_exact()))
            });
            st.abs[id] = Some((self.backend.upload(&r)?, l1));
        }
        Ok(st.abs[id].as_ref().expect("computed"))
    }

    /// Computes `|W|·r` over the input of affine node `k` (cached in
    /// `st.wabs[k]`) and returns `‖r‖₁` per batch slot.
    pub(crate) fn wabs_dev(&self, st: &mut RunState<T, B::Buf>, k: NodeId) -> Result<Vec<f64>, AnalysisError> {
        let node = self.net.node(k);
        let x = node.inputs[0];
        let in_shape = self.net.node(x).shape;
        let r1 = self.abs_dev(st, x)?.1.clone();
        let batch = st.batch;
        if st.wabs[k].is_some() {
            return Ok(r1);
        }
        let r = &st.abs[x].as_ref().expect("computed").0;
        let be = self.backend;
        // The forward pass of |W| over the point box [r, r] with a zero
        // bias, in exact arithmetic: its upper end bounds |W|·r.
        let exact = polycert_interval::FloatModel::EXACT;
        let f = match (&node.op, &self.params[k]) {
            (Op::Dense { .. }, Params::Affine { abs: Some((wa, z)), .. }) => {
                be.forward_dense(wa, z, in_shape.numel(), (r, r), batch, exact)?
            }
            (Op::Conv2d(c), Params::Affine { abs: Some((wa, z)), .. }) => {
                be.forward_conv(c, wa, z, in_shape, (r, r), batch, exact)?
            }
            (Op::AvgPool2d(_), Params::AvgPool { conv, w, b }) => {
                be.forward_conv(conv, w, b, in_shape, (r, r), batch, exact)?
            }
            _ => return Err(AnalysisError::Unsupported { layer: node.name.clone(), op: node.op.kind() }),
        };
        st.wabs[k] = Some(f.hi);
        Ok(r1)
    }

    /// Replaces the lower slopes of the listed slots' unstable ReLUs by
    /// optimised ones (`lagrange.rs`), each rounded into `[0, 1]`, where any
    /// slope gives a valid lower line.
    pub(crate) fn set_slopes(
        &self,
        st: &mut RunState<T, B::Buf>,
        slopes: &std::collections::HashMap<usize, crate::base::relax::Slopes>,
    ) -> Result<(), AnalysisError> {
        let list: Vec<(usize, &crate::base::relax::Slopes)> = slopes.iter().map(|(&s, a)| (s, a)).collect();
        self.write_slopes(st, &list, self.net.nodes().len())
    }

    /// [`Analyzer::set_slopes`] for the ReLUs before node `end` only; every
    /// other slot's (and every stable neuron's) lower slope is the
    /// relaxation's own again.
    pub(crate) fn write_slopes(
        &self,
        st: &mut RunState<T, B::Buf>,
        slopes: &[(usize, &crate::base::relax::Slopes)],
        end: NodeId,
    ) -> Result<(), AnalysisError> {
        for (k, node) in self.net.nodes().iter().enumerate().take(end) {
            if node.op != Op::Relu {
                continue;
            }
            let x = &st.bounds[node.inputs[0]];
            let n = node.shape.numel();
            let lower = self.opts.passes.relu_lower;
            let len = x.lo.len().min(x.hi.len());
            let mut lam: Vec<T> = map_n(len, len, |i| relu_relax(x.lo[i], x.hi[i], lower).lam_lo);
            for &(s, a) in slopes {
                for (j, &v) in a[k].iter().enumerate().take(n) {
                    let i = s * n + j;
                    if crate::base::relax::unstable(x.lo[i], x.hi[i]) {
                        lam[i] = T::from_f64_nearest(v).max(T::zero()).min(T::one());
                    }
                }
            }
            let buf = self.backend.upload(&lam)?;
            if let Step::Relu { lam_lo, mu_lo: None, .. } = &mut st.steps[k] {
                *lam_lo = buf;
            }
        }
        Ok(())
    }

    /// One node's bounds and step: a dispatch on its op to `steps.rs`.
    fn forward_node(&self, st: &mut RunState<T, B::Buf>, id: NodeId) -> Result<NodeResult<T, B::Buf>, AnalysisError> {
        let node = self.net.node(id);
        let x0 = node.inputs[0];
        Ok(match (&node.op, &self.params[id]) {
            (Op::Dense { .. } | Op::Conv2d(_), Params::Affine { w, b, .. }) => self.affine_step(st, id, (w, b))?,
            (Op::Relu, _) => self.relu_node(&st.bounds[x0])?,
            (Op::Sigmoid, _) => self.sigmoid_step(&st.bounds[x0])?,
            (Op::Elementwise(f), _) => self.elementwise_step(id, *f, &st.bounds[x0])?,
            (Op::Reshape, _) => {
                (Bounds { lo: st.bounds[x0].lo.clone(), hi: st.bounds[x0].hi.clone(), dev: None }, Step::None)
            }
            (Op::MaxPool2d(p), _) => self.maxpool_step(st, id, p)?,
            (Op::Concat, _) => (self.concat_bounds(st, id), Step::None),
            (Op::AvgPool2d(p), Params::AvgPool { conv, w, b }) => self.avgpool_step(st, id, p, (conv, w, b))?,
            (Op::Add, _) => self.add_step(st, id)?,
            (Op::ChannelAffine { mul, add, float_ops }, _) => {
                self.channel_affine_step(st, id, (mul, add, float_ops))?
            }
            _ => return Err(AnalysisError::Unsupported { layer: node.name.clone(), op: node.op.kind() }),
        })
    }
}

/// `f(i)` for `i < n`, `values` values in all: small loops run on the
/// calling thread (`par.rs`; search workers are not pool threads).
pub(super) fn map_n<R: Send>(n: usize, values: usize, f: impl Fn(usize) -> R + Sync + Send) -> Vec<R> {
    crate::base::par::map_range(n, values * crate::base::par::VALUE_WORK, f)
}

/// `f(i)` for `i < n` in parallel, as `K` vectors (the `k`-th of each
/// result in the `k`-th): the per-neuron loops of the forward pass.
pub(super) fn par_columns<T: Fp, const K: usize>(n: usize, f: impl Fn(usize) -> [T; K] + Sync + Send) -> [Vec<T>; K] {
    let rows: Vec<[T; K]> = map_n(n, n, &f);
    std::array::from_fn(|k| map_n(n, n, |i| rows[i][k]))
}

/// A slot's index, its lower and upper bounds, and whether it is empty.
type SlotMeet<'a, T> = (usize, ((&'a mut [T], &'a mut [T]), &'a mut bool));

/// Intersects every slot's `n` values of `b` with `[lo, hi]` (per slot,
/// `None`: nothing to intersect), slots in parallel (see
/// [`RunState::intersect`]).
fn intersect_slots<'w, T: Fp, Buf>(
    b: &mut Bounds<T, Buf>,
    empty: &mut [bool],
    n: usize,
    with: impl Fn(usize) -> Option<(&'w [T], &'w [T])> + Sync,
) {
    let n = n.max(1);
    let with = &with;
    let slot = |(slot, ((lo, hi), empty)): SlotMeet<'_, T>| {
        let Some((pl, ph)) = with(slot) else { return };
        for (((lo, hi), &l), &h) in lo.iter_mut().zip(hi.iter_mut()).zip(pl).zip(ph) {
            if meet((lo, hi), (l, h)) {
                *empty = true;
            }
        }
    };
    if !crate::base::par::worth(b.lo.len() * crate::base::par::VALUE_WORK) {
        b.lo.chunks_mut(n).zip(b.hi.chunks_mut(n)).zip(empty.iter_mut()).enumerate().for_each(slot);
    } else {
        b.lo.par_chunks_mut(n).zip(b.hi.par_chunks_mut(n)).zip(empty.par_iter_mut()).enumerate().for_each(slot);
    }
}
