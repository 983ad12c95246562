//! Backsubstitution with early termination, row compaction, residual
//! merging and memory-bounded row chunks.

use crate::base::analyzer::{AnalysisError, Analyzer, Params};
use crate::base::backend::{Arith, Backend, BackendError};
use crate::base::budget::Budget;
use crate::base::geom::Geom;
use crate::base::ir::{NodeId, Op, Shape};
use crate::gpupoly::forward::RunState;
use crate::gpupoly::rows::{IntervalRows, PointRows, RowArith, sum_down};
use polycert_interval::Fp;
use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

/// The starting coefficients of rows to backsubstitute.
pub(crate) enum Coef<T> {
    /// Host planes `rows × cols` (`lo ≤ coefficient ≤ hi`).
    Planes { lo: Vec<T>, hi: Vec<T> },
    /// One exact coefficient per row: `val[r]` at column `col[r]`.
    Unit { col: Vec<u32>, val: Vec<T> },
}

/// Rows to backsubstitute, all starting at one node.
pub(crate) struct Rows<T> {
    pub start: NodeId,
    pub geom: Geom,
    pub coef: Coef<T>,
    pub cst: Vec<f64>,
    /// Rows of a group are dropped together once one of them is decided.
    pub group: Vec<u32>,
    /// Further exact terms on earlier nodes (split constraints' Lagrangian
    /// terms): per node, `rows × numel` coefficients.
    pub extra: Vec<(NodeId, Vec<T>)>,
}

impl<T: Fp> Rows<T> {
    /// One row per listed neuron of node `start`: `val[r]·x_neurons[r]`, in
    /// batch slot `props[r]`, each its own group (a ReLU input's end).
    pub(crate) fn units(start: NodeId, shape: Shape, neurons: &[usize], props: Vec<u32>, val: Vec<T>) -> Self {
        let geom = Geom::unit(shape, neurons).with_props(props);
        // The unit window's column of neuron i is its channel.
        let hw = shape.h * shape.w;
        let col = neurons.iter().map(|&i| (i / hw) as u32).collect();
        let group = (0..neurons.len() as u32).collect();
        Rows { start, geom, coef: Coef::Unit { col, val }, cst: vec![0.0; neurons.len()], group, extra: Vec::new() }
    }
}

/// When a row is decided.
#[derive(Clone, Copy)]
pub(crate) enum Goal {
    /// `lb ≥ 0` (a ReLU input no longer straddles 0).
    NonNegative,
    /// `lb > 0` (a property half-space is infeasible).
    Positive,
    /// None: the tightest bound (σ inputs, whose relaxation depends on both ends).
    Tightest,
}

impl Goal {
    fn met(self, lb: f64) -> bool {
        match self {
            Goal::NonNegative => lb >= 0.0,
            Goal::Positive => lb > 0.0,
            Goal::Tightest => false,
        }
    }
}

type Pending<G, M> = BTreeMap<NodeId, (G, M)>;

/// Most coefficients pending at a check read late by default (larger steps
/// keep the GPU busy while the host waits: a batch of a test set's images).
const LATE_MAX: usize = 1 << 20;

/// Most multiply-adds of one step of a chunk on a backend whose steps the
/// host waits for, with a deadline (a few hundredths of a second on two
/// CPU cores: a timeout then holds to that).
const STEP_WORK_MAX: usize = 1 << 32;

/// A chunk's rows during backsubstitution: each row's best lower bound so
/// far, for each row still in the matrices its index among the chunk's
/// rows, and the groups decided so far.
struct Tracked<'g> {
    best: Vec<f64>,
    orig: Vec<u32>,
    group: &'g [u32],
    goal: Goal,
    decided: HashSet<u32>,
}

/// A check whose bounds are on their way: the download and the rows (their
/// indices among the chunk's rows) it covers.
struct InFlight<F> {
    fetch: F,
    orig: Vec<u32>,
}

impl<'g> Tracked<'g> {
    fn new(group: &'g [u32], goal: Goal) -> Self {
        let n = group.len();
        let orig = (0..n as u32).collect();
        Tracked { best: vec![f64::NEG_INFINITY; n], orig, group, goal, decided: HashSet::new() }
    }

    /// Raises the best bounds of the rows `orig` (as a check saw them) to
    /// `lb`, skipping groups an earlier check decided; whether a group is
    /// newly decided.
    fn record(&mut self, lb: &[f64], orig: &[u32]) -> bool {
        let mut newly = Vec::new();
        for (&l, &o) in lb.iter().zip(orig) {
            let o = o as usize;
            if self.decided.contains(&self.group[o]) {
                continue;
            }
            // A NaN bound proves nothing (and `max` keeps the old one).
            self.best[o] = self.best[o].max(l);
            if self.goal.met(self.best[o]) {
                newly.push(self.group[o]);
            }
        }
        let any = !newly.is_empty();
        self.decided.extend(newly);
        any
    }

    /// The rows in the matrices (their places there) outside decided groups.
    fn open(&self) -> Vec<u32> {
        (0..self.orig.len() as u32)
            .filter(|&r| !self.decided.contains(&self.group[self.orig[r as usize] as usize]))
            .collect()
    }

    /// Only the rows `keep` (places in the matrices) stay.
    fn keep(&mut self, keep: &[u32]) {
        self.orig = keep.iter().map(|&r| self.orig[r as usize]).collect();
    }
}

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// Best certified lower bound of every row, processing rows in chunks
    /// that fit the memory budget, in the arithmetic of `opts.passes.arith`.
    pub(crate) fn backsubstitute(
        &self,
        st: &mut RunState<T, B::Buf>,
        rows: &Rows<T>,
        goal: Goal,
        budget: Budget,
    ) -> Result<Vec<f64>, AnalysisError> {
        match self.opts.passes.arith {
            Arith::Interval => {
                // Interval kernels read per-neuron tables without batch slots.
                debug_assert!(rows.geom.single_slot(), "the interval arithmetic runs one property at a time");
                self.backsubstitute_in::<IntervalRows>(st, rows, goal, budget)
            }
            Arith::Point => self.backsubstitute_in::<PointRows>(st, rows, goal, budget),
        }
    }

    fn backsubstitute_in<A: RowArith<B, T>>(
        &self,
        st: &mut RunState<T, B::Buf>,
        rows: &Rows<T>,
        goal: Goal,
        budget: Budget,
    ) -> Result<Vec<f64>, AnalysisError> {
        let n = rows.cst.len();
        let cols = rows.geom.cols();
        let per_row = self.predict_row_bytes(rows.start, &rows.geom, A::PLANES).max(1);
        let mut chunk = (self.memory_budget() / per_row).clamp(1, n.max(1));
        // Where steps run while the host waits (the CPU), a deadline holds
        // only between steps: a chunk's steps stay short.
        if budget.deadline().is_some() && !A::fetch_overlaps(self.backend) {
            chunk = chunk.min((STEP_WORK_MAX / self.step_work_per_row(rows.start)).max(1));
        }
        let mut out = Vec::with_capacity(n);
        let mut start = 0;
        while start < n {
            let end = (start + chunk).min(n);
            let idx: Vec<u32> = (start as u32..end as u32).collect();
            let geom = rows.geom.select(&idx);
            let made = match &rows.coef {
                Coef::Planes { lo, hi } => {
                    let (lo, hi) = (&lo[start * cols..end * cols], &hi[start * cols..end * cols]);
                    A::from_host(self, st, rows.start, &geom, lo, hi)
                }
                Coef::Unit { col, val } => A::from_unit(self, &geom, &col[start..end], &val[start..end]),
            };
            let res = made.and_then(|(m, d)| {
                let mut c0 = sum_down(&rows.cst[start..end], &d);
                let mut parts = vec![(rows.start, geom, m)];
                for (node, planes) in &rows.extra {
                    let k = self.net.node(*node).shape.numel();
                    let g = Geom::full(self.net.node(*node).shape, end - start).with_props(parts[0].1.props.clone());
                    let v = &planes[start * k..end * k];
                    let (m, d) = A::from_host(self, st, *node, &g, v, v)?;
                    c0 = sum_down(&c0, &d);
                    parts.push((*node, g, m));
                }
                let cst = A::c_from_host(self.backend, &c0)?;
                self.backsub_chunk::<A>(st, parts, cst, &rows.group[start..end], goal, budget)
            });
            match res {
                // Out of memory: halve the chunk and retry (never a different relaxation).
                Err(AnalysisError::Backend(BackendError::OutOfMemory(_))) if chunk > 1 => chunk /= 2,
                r => {
                    out.extend(r?);
                    start = end;
                }
            }
        }
        Ok(out)
    }

    /// Backsubstitutes one chunk of rows, whose expression starts as
    /// `parts` (the rows' start node first) plus `cst`.
    ///
    /// Where a download overlaps later work (the GPU), an early-termination
    /// check is read one step late: the next step is queued before the host
    /// waits for it. The rows it decides then run one step more and are
    /// ignored by the next check, so every row's bound is the one it gets when
    /// each check is read at once.
    fn backsub_chunk<A: RowArith<B, T>>(
        &self,
        st: &mut RunState<T, B::Buf>,
        parts: Vec<(NodeId, Geom, A::M)>,
        mut cst: A::C,
        group: &[u32],
        goal: Goal,
        budget: Budget,
    ) -> Result<Vec<f64>, AnalysisError> {
        let be = self.backend;
        let mut rows = Tracked::new(group, goal);
        let mut pending: Pending<Geom, A::M> = BTreeMap::new();
        for (node, g, m) in parts {
            if let Some(d) = self.merge::<A>(st, &mut pending, node, g, m)? {
                A::c_add(be, &mut cst, &d)?;
            }
        }
        let late = self.opts.passes.late_checks;
        // A late check pays one more step for the rows it decides: only
        // worth it while steps are small enough to wait on the host.
        let lag = |pending: &Pending<Geom, A::M>| {
            late.unwrap_or_else(|| {
                A::fetch_overlaps(be) && pending.values().map(|(g, _)| g.rows() * g.cols()).sum::<usize>() <= LATE_MAX
            })
        };
        let mut inflight: Option<InFlight<A::F>> = None;
        // A check right after a ReLU step is dominated by the one before it
        // (bounds over ReLU outputs are at least as tight as the relaxation's).
        let mut after_relu = false;
        // A step predicted (1.5× the last one, for a busy machine) to end past
        // the deadline is not started: one step of a large chunk can take a
        // tenth of a second or more.
        let mut last_step = std::time::Duration::ZERO;
        loop {
            budget.ending_before(last_step.mul_f64(1.5)).check()?;
            let step_start = Instant::now();
            let top = *pending.keys().next_back().expect("pending is never empty");
            let last = top == 0;
            if last || (self.opts.passes.early_termination && !after_relu) {
                let _p = crate::base::profile::span("backsub.check");
                let fetch = self.fetch_pending::<A>(st, &pending, &cst)?;
                let now = InFlight { fetch, orig: rows.orig.clone() };
                let lazy = lag(&pending);
                if let Some(prev) = inflight.replace(now)
                    && !self.settle::<A>(&mut rows, prev, &mut pending, &mut cst, lazy)?
                {
                    break;
                }
                if last || !lazy {
                    let now = inflight.take().expect("just queued");
                    if !self.settle::<A>(&mut rows, now, &mut pending, &mut cst, lazy)? || last {
                        break;
                    }
                }
            }
            after_relu = self.step_top::<A>(st, &mut pending, top, &mut cst)?;
            last_step = step_start.elapsed();
        }
        // A download still in flight is waited for before its buffers go.
        if let Some(f) = inflight {
            A::c_fetched(be, f.fetch)?;
        }
        Ok(rows.best)
    }

    /// Reads a check's bounds into `rows` and drops the rows it decides from
    /// the matrices; whether any row is left open. With `lazy` (small steps
    /// whose checks are read late), decided rows stay until they are a
    /// quarter of the matrices' rows: a compaction costs more host time than
    /// their share of the next steps. Later checks ignore them either way.
    fn settle<A: RowArith<B, T>>(
        &self,
        rows: &mut Tracked<'_>,
        check: InFlight<A::F>,
        pending: &mut Pending<Geom, A::M>,
        cst: &mut A::C,
        lazy: bool,
    ) -> Result<bool, AnalysisError> {
        let _p = crate::base::profile::span("backsub.settle");
        let lb = A::c_fetched(self.backend, check.fetch)?;
        if rows.record(&lb, &check.orig) {
            let keep = rows.open();
            if keep.is_empty() {
                return Ok(false);
            }
            if !lazy || (rows.orig.len() - keep.len()) * 4 >= rows.orig.len() {
                let _p = crate::base::profile::span("backsub.compact");
                *cst = self.compact_pending::<A>(pending, cst, &keep)?;
                rows.keep(&keep);
            }
        }
        Ok(true)
    }

    /// Starts the download of the rows' lower bounds now: every pending part
    /// concretized over its node's bounds and added to the constants.
    fn fetch_pending<A: RowArith<B, T>>(
        &self,
        st: &mut RunState<T, B::Buf>,
        pending: &Pending<Geom, A::M>,
        cst: &A::C,
    ) -> Result<A::F, AnalysisError> {
        let _p = crate::base::profile::span("backsub.fetch");
        let mut parts = pending.iter();
        let (&node, (g, mat)) = parts.next().expect("pending is never empty");
        let mut sum = A::concretize_add(self, st, node, mat, g, cst)?;
        for (&node, (g, mat)) in parts {
            sum = A::concretize_add(self, st, node, mat, g, &sum)?;
        }
        A::c_fetch(self.backend, &sum)
    }

    /// Row compaction: only the rows `keep` stay in every pending part; the
    /// constants of those rows.
    fn compact_pending<A: RowArith<B, T>>(
        &self,
        pending: &mut Pending<Geom, A::M>,
        cst: &A::C,
        keep: &[u32],
    ) -> Result<A::C, AnalysisError> {
        for (g, mat) in pending.values_mut() {
            *mat = A::compact(self.backend, mat, g, keep)?;
            *g = g.select(keep);
        }
        A::c_compact(self.backend, cst, keep)
    }

    /// One backsubstitution step of the pending part at `top` (the latest
    /// node) through its node, the parts it gives merged back into
    /// `pending`. Whether the next check is dominated by the last one: the
    /// step was a ReLU's or σ's and merged into no other part.
    fn step_top<A: RowArith<B, T>>(
        &self,
        st: &mut RunState<T, B::Buf>,
        pending: &mut Pending<Geom, A::M>,
        top: NodeId,
        cst: &mut A::C,
    ) -> Result<bool, AnalysisError> {
        let be = self.backend;
        let _p = crate::base::profile::span("backsub.step");
        let (g, mat) = pending.remove(&top).expect("top exists");
        let (parts, delta) = self.step::<A>(st, top, &g, mat)?;
        if let Some(d) = delta {
            A::c_add(be, cst, &d)?;
        }
        // A merge can cancel terms: the next check is no longer dominated.
        let merges = parts.iter().any(|(node, _, _)| pending.contains_key(node));
        let after_relu = matches!(self.net.node(top).op, Op::Relu | Op::Sigmoid | Op::Elementwise(_)) && !merges;
        for (node, g2, m2) in parts {
            if let Some(d) = self.merge::<A>(st, pending, node, g2, m2)? {
                A::c_add(be, cst, &d)?;
            }
        }
        Ok(after_relu)
    }

    /// An upper bound on a row's multiply-adds in any step from node
    /// `start` back: a node's size times, for an affine one, each output's
    /// weights.
    fn step_work_per_row(&self, start: NodeId) -> usize {
        let nodes = &self.net.nodes()[..=start.min(self.net.nodes().len() - 1)];
        let fan = |op: &Op, n_in: usize| match op {
            Op::Dense { .. } => n_in,
            Op::Conv2d(c) => c.weight.len() / c.c_out.max(1),
            _ => 1,
        };
        let n_in = |node: &crate::base::ir::Node| node.inputs.first().map_or(1, |&i| self.net.node(i).shape.numel());
        nodes.iter().map(|node| node.shape.numel().saturating_mul(fan(&node.op, n_in(node)))).max().unwrap_or(1).max(1)
    }

    /// Adds an expression part into the pending set (residual merge);
    /// returns the constant increments the sums cost, if any.
    fn merge<A: RowArith<B, T>>(
        &self,
        st: &mut RunState<T, B::Buf>,
        pending: &mut Pending<Geom, A::M>,
        node: NodeId,
        g: Geom,
        m: A::M,
    ) -> Result<Option<A::C>, AnalysisError> {
        let rows = g.rows();
        Ok(match pending.remove(&node) {
            None => {
                pending.insert(node, (g, m));
                None
            }
            Some((g0, mut m0)) if g0 == g => {
                let d = A::add_into(self, st, node, &mut m0, &g0, &m, &g)?;
                pending.insert(node, (g0, m0));
                Some(d)
            }
            Some((g0, m0)) => {
                let u = g0.union(&g).unwrap_or_else(|| g.full_over(g.shape));
                let mut z = A::zeros(self.backend, rows, u.cols())?;
                let mut d0 = A::add_into(self, st, node, &mut z, &u, &m0, &g0)?;
                let d1 = A::add_into(self, st, node, &mut z, &u, &m, &g)?;
                pending.insert(node, (u, z));
                A::c_add(self.backend, &mut d0, &d1)?;
                Some(d0)
            }
        })
    }

    /// Converts to the full window (the dense case); also returns the
    /// constant increments, if any.
    fn to_full<A: RowArith<B, T>>(
        &self,
        st: &mut RunState<T, B::Buf>,
        node: NodeId,
        g: &Geom,
        m: A::M,
    ) -> Result<(A::M, Option<A::C>), AnalysisError> {
        if g.is_full() {
            return Ok((m, None));
        }
        let full = g.full_over(g.shape);
        let mut z = A::zeros(self.backend, g.rows(), full.cols())?;
        let d = A::add_into(self, st, node, &mut z, &full, &m, g)?;
        Ok((z, Some(d)))
    }

    /// One backsubstitution step through node `k`.
    #[allow(clippy::type_complexity)]
    fn step<A: RowArith<B, T>>(
        &self,
        st: &mut RunState<T, B::Buf>,
        k: NodeId,
        g: &Geom,
        m: A::M,
    ) -> Result<(Vec<(NodeId, Geom, A::M)>, Option<A::C>), AnalysisError> {
        let node = self.net.node(k);
        let be = self.backend;
        let x = node.inputs[0];
        let in_shape = self.net.node(x).shape;
        Ok(match &node.op {
            Op::Dense { .. } => {
                let (m, d0) = self.to_full::<A>(st, k, g, m)?;
                let (m2, mut d) = A::dense(self, st, k, &m, &g.full_over(g.shape))?;
                if let Some(d0) = d0 {
                    A::c_add(be, &mut d, &d0)?;
                }
                (vec![(x, g.full_over(in_shape), m2)], Some(d))
            }
            Op::Conv2d(conv) => {
                let out = g.through_conv(conv, in_shape);
                let (m2, d) = A::conv(self, st, k, &m, g, &out)?;
                (vec![(x, out, m2)], Some(d))
            }
            Op::Relu | Op::Sigmoid | Op::Elementwise(_) => {
                let (m2, d) = A::relu(self, st, k, &m, g)?;
                (vec![(x, g.relabel(in_shape), m2)], Some(d))
            }
            Op::Add => {
                let (m2, d) = A::diag(self, st, k, &m, g)?;
                let copy = A::slice_cols(be, &m2, 0, g.cols())?;
                let y = node.inputs[1];
                (vec![(x, g.relabel(in_shape), m2), (y, g.relabel(self.net.node(y).shape), copy)], Some(d))
            }
            Op::ChannelAffine { .. } => {
                let (m2, d) = A::diag(self, st, k, &m, g)?;
                (vec![(x, g.relabel(in_shape), m2)], Some(d))
            }
            Op::AvgPool2d(_) => {
                let Params::AvgPool { conv, .. } = &self.params[k] else { unreachable!("AvgPool params") };
                let out = g.through_conv(conv, in_shape);
                let (m2, d) = A::avgpool(self, st, k, &m, g, &out)?;
                (vec![(x, out, m2)], Some(d))
            }
            Op::MaxPool2d(pool) => {
                let out = g.through_window(in_shape, pool.kernel, pool.stride, (pool.pad.0, pool.pad.1));
                let (m2, d) = A::maxpool(self, st, k, &m, g, &out)?;
                (vec![(x, out, m2)], Some(d))
            }
            Op::Concat => {
                let (wh, ww) = g.win;
                let mut parts = Vec::with_capacity(node.inputs.len());
                let mut start = 0;
                for &i in &node.inputs {
                    let s = self.net.node(i).shape;
                    let len = s.c * wh * ww;
                    parts.push((i, g.relabel(s), A::slice_cols(be, &m, start, len)?));
                    start += len;
                }
                (parts, None)
            }
            Op::Reshape => {
                let (m, d) = self.to_full::<A>(st, k, g, m)?;
                (vec![(x, g.full_over(in_shape), m)], d)
            }
            Op::Input => return Err(AnalysisError::Unsupported { layer: node.name.clone(), op: node.op.kind() }),
        })
    }

    /// Predicted bytes per row along the backsubstitution from `start`: the
    /// largest total footprint of the dependence sets pending at once
    /// (the paper's equations 5 and 9), for one row.
    pub(crate) fn predict_row_bytes(&self, start: NodeId, geom: &Geom, planes: usize) -> usize {
        let elem = planes * std::mem::size_of::<T>();
        let one = Geom::windowed(geom.shape, geom.win, vec![geom.offsets.first().copied().unwrap_or((0, 0))]);
        let mut pending: BTreeMap<NodeId, Geom> = BTreeMap::new();
        pending.insert(start, one);
        let mut peak = 0;
        while let Some((&k, _)) = pending.iter().next_back() {
            let total: usize = pending.values().map(|g| g.row_bytes(elem)).sum();
            peak = peak.max(total);
            if k == 0 {
                break;
            }
            let g = pending.remove(&k).expect("exists");
            let node = self.net.node(k);
            let mut next = Vec::new();
            for &i in &node.inputs {
                let s = self.net.node(i).shape;
                let g2 = match &node.op {
                    Op::Conv2d(c) => g.through_conv(c, s),
                    Op::AvgPool2d(p) | Op::MaxPool2d(p) => g.through_window(s, p.kernel, p.stride, (p.pad.0, p.pad.1)),
                    Op::Relu | Op::Sigmoid | Op::Elementwise(_) | Op::Add | Op::ChannelAffine { .. } | Op::Concat => {
                        g.relabel(s)
                    }
                    _ => Geom::full(s, 1),
                };
                next.push((i, g2));
            }
            for (i, g2) in next {
                let merged = match pending.remove(&i) {
                    Some(g0) if g0 != g2 => g0.union(&g2).unwrap_or_else(|| Geom::full(g2.shape, 1)),
                    _ => g2,
                };
                peak = peak.max(merged.row_bytes(elem) * 2);
                pending.insert(i, merged);
            }
        }
        peak
    }
}
