//! Backsubstitution with early termination, row compaction, residual
//! merging and memory-bounded row chunks.

use crate::analysis::{AnalysisError, Analyzer, Params};
use crate::backend::{Backend, BackendError, ConvParams, PoolParams, ReluParams};
use crate::forward::{RunState, Step};
use crate::geom::Geom;
use crate::ir::{NodeId, Op};
use polycert_interval::{Fp, fp};
use std::collections::BTreeMap;
use std::time::Instant;

/// Rows to backsubstitute, all starting at one node.
pub(crate) struct Rows<T> {
    pub start: NodeId,
    pub geom: Geom,
    /// Host planes `rows × geom.cols()`.
    pub lo: Vec<T>,
    pub hi: Vec<T>,
    pub cst: Vec<f64>,
    /// Rows of a group are dropped together once one of them is decided.
    pub group: Vec<u32>,
}

/// When a row is decided.
#[derive(Clone, Copy)]
pub(crate) enum Goal {
    /// `lb ≥ 0` (a ReLU input no longer straddles 0).
    NonNegative,
    /// `lb > 0` (a property half-space is infeasible).
    Positive,
}

impl Goal {
    fn met(self, lb: f64) -> bool {
        match self {
            Goal::NonNegative => lb >= 0.0,
            Goal::Positive => lb > 0.0,
        }
    }
}

type Pending<G, M> = BTreeMap<NodeId, (G, M)>;

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// Best certified lower bound of every row, processing rows in chunks
    /// that fit the memory budget.
    pub(crate) fn backsubstitute(
        &self,
        st: &mut RunState<T, B::Buf>,
        rows: &Rows<T>,
        goal: Goal,
        deadline: Option<Instant>,
    ) -> Result<Vec<f64>, AnalysisError> {
        let n = rows.cst.len();
        let cols = rows.geom.cols();
        let per_row = self.predict_row_bytes(rows.start, &rows.geom).max(1);
        let mut chunk = (self.budget() / per_row).clamp(1, n.max(1));
        let mut out = Vec::with_capacity(n);
        let mut start = 0;
        while start < n {
            let end = (start + chunk).min(n);
            let idx: Vec<u32> = (start as u32..end as u32).collect();
            let geom = rows.geom.select(&idx);
            let (lo, hi) = (&rows.lo[start * cols..end * cols], &rows.hi[start * cols..end * cols]);
            let res =
                self.backend.mat_from_host(end - start, cols, lo, hi).map_err(AnalysisError::from).and_then(|m| {
                    let cst = rows.cst[start..end].to_vec();
                    self.backsub_chunk(st, rows.start, geom, m, cst, &rows.group[start..end], goal, deadline)
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

    #[allow(clippy::too_many_arguments)]
    fn backsub_chunk(
        &self,
        st: &mut RunState<T, B::Buf>,
        start: NodeId,
        geom: Geom,
        m: B::Mat,
        mut cst: Vec<f64>,
        group: &[u32],
        goal: Goal,
        deadline: Option<Instant>,
    ) -> Result<Vec<f64>, AnalysisError> {
        let n = cst.len();
        let mut best = vec![f64::NEG_INFINITY; n];
        let mut orig: Vec<u32> = (0..n as u32).collect();
        let mut pending: Pending<Geom, B::Mat> = BTreeMap::new();
        pending.insert(start, (geom, m));
        loop {
            Self::check_deadline(deadline)?;
            let top = *pending.keys().next_back().expect("pending is never empty");
            let last = top == 0;
            if last || self.opts.early_termination {
                // Concretize every pending part over its node's bounds.
                let mut lb = cst.clone();
                for (&node, (g, mat)) in &pending {
                    let (lo, hi) = self.bounds_dev(st, node)?;
                    let part = self.backend.concretize(mat, g, lo, hi)?;
                    for (l, p) in lb.iter_mut().zip(part) {
                        *l = fp::add_down(*l, p);
                    }
                }
                let mut done_groups = Vec::new();
                for (r, &l) in lb.iter().enumerate() {
                    let o = orig[r] as usize;
                    best[o] = best[o].max(l);
                    if goal.met(best[o]) {
                        done_groups.push(group[o]);
                    }
                }
                if last {
                    break;
                }
                if !done_groups.is_empty() {
                    let keep: Vec<u32> = (0..orig.len() as u32)
                        .filter(|&r| !done_groups.contains(&group[orig[r as usize] as usize]))
                        .collect();
                    if keep.is_empty() {
                        break;
                    }
                    for (g, mat) in pending.values_mut() {
                        *mat = self.backend.compact(mat, g, &keep)?;
                        *g = g.select(&keep);
                    }
                    cst = keep.iter().map(|&r| cst[r as usize]).collect();
                    orig = keep.iter().map(|&r| orig[r as usize]).collect();
                }
            }
            let (g, mat) = pending.remove(&top).expect("top exists");
            let (parts, delta) = self.step(st, top, &g, mat)?;
            for (c, d) in cst.iter_mut().zip(delta) {
                *c = fp::add_down(*c, d);
            }
            for (node, g2, m2) in parts {
                self.merge(&mut pending, node, g2, m2)?;
            }
        }
        Ok(best)
    }

    /// Adds an expression part into the pending set (residual merge).
    fn merge(
        &self,
        pending: &mut Pending<Geom, B::Mat>,
        node: NodeId,
        g: Geom,
        m: B::Mat,
    ) -> Result<(), AnalysisError> {
        let be = self.backend;
        match pending.remove(&node) {
            None => {
                pending.insert(node, (g, m));
            }
            Some((g0, mut m0)) if g0 == g => {
                be.add_into(&mut m0, &g0, &m, &g)?;
                pending.insert(node, (g0, m0));
            }
            Some((g0, m0)) => {
                let rows = g.rows();
                let u = g0.union(&g).unwrap_or_else(|| Geom::full(g.shape, rows));
                let mut z = be.mat_zeros(rows, u.cols())?;
                be.add_into(&mut z, &u, &m0, &g0)?;
                be.add_into(&mut z, &u, &m, &g)?;
                pending.insert(node, (u, z));
            }
        }
        Ok(())
    }

    /// Converts to the full window (the dense case).
    fn to_full(&self, g: &Geom, m: B::Mat) -> Result<(Geom, B::Mat), AnalysisError> {
        if g.is_full() {
            return Ok((g.clone(), m));
        }
        let full = Geom::full(g.shape, g.rows());
        let mut z = self.backend.mat_zeros(g.rows(), full.cols())?;
        self.backend.add_into(&mut z, &full, &m, g)?;
        Ok((full, z))
    }

    /// One backsubstitution step through node `k`.
    #[allow(clippy::type_complexity)]
    fn step(
        &self,
        st: &RunState<T, B::Buf>,
        k: NodeId,
        g: &Geom,
        m: B::Mat,
    ) -> Result<(Vec<(NodeId, Geom, B::Mat)>, Vec<f64>), AnalysisError> {
        let node = self.net.node(k);
        let be = self.backend;
        let x = node.inputs[0];
        let in_shape = self.net.node(x).shape;
        let rows = g.rows();
        let unsupported = || AnalysisError::Unsupported { layer: node.name.clone(), op: node.op.kind() };
        Ok(match (&node.op, &self.params[k], &st.steps[k]) {
            (Op::Dense { .. }, Params::Affine { w, .. }, Step::Bias { lo, hi }) => {
                let (_, m) = self.to_full(g, m)?;
                let (m2, d) = be.dense_backsub(&m, w, in_shape.numel(), lo, hi)?;
                (vec![(x, Geom::full(in_shape, rows), m2)], d)
            }
            (Op::Conv2d(conv), Params::Affine { w, .. }, Step::Bias { lo, hi }) => {
                let out = g.through_conv(conv, in_shape);
                let p = ConvParams { conv, weight: w, bias_lo: lo, bias_hi: hi };
                let (m2, d) = be.conv_backsub(&m, g, &p, &out)?;
                (vec![(x, out, m2)], d)
            }
            (Op::Relu, _, Step::Relu { lam_lo, lam_up, mu_up }) => {
                let p = ReluParams { lam_lo, lam_up, mu_up };
                let (m2, d) = be.relu_backsub(&m, g, &p)?;
                (vec![(x, g.relabel(in_shape), m2)], d)
            }
            (Op::Add, _, Step::Diag { m_lo, m_hi, c_lo, c_hi }) => {
                let (m2, d) = be.diag_backsub(&m, g, (m_lo, m_hi), (c_lo, c_hi))?;
                let all: Vec<u32> = (0..rows as u32).collect();
                let copy = be.compact(&m2, g, &all)?;
                let y = node.inputs[1];
                (vec![(x, g.relabel(in_shape), m2), (y, g.relabel(self.net.node(y).shape), copy)], d)
            }
            (Op::ChannelAffine { .. }, _, Step::Diag { m_lo, m_hi, c_lo, c_hi }) => {
                let (m2, d) = be.diag_backsub(&m, g, (m_lo, m_hi), (c_lo, c_hi))?;
                (vec![(x, g.relabel(in_shape), m2)], d)
            }
            (
                Op::AvgPool2d(_),
                Params::AvgPool { conv, w, .. },
                Step::AvgPool { sum_lo, sum_hi, m_lo, m_hi, c_lo, c_hi },
            ) => {
                let (m1, d1) = be.diag_backsub(&m, g, (m_lo, m_hi), (c_lo, c_hi))?;
                let out = g.through_conv(conv, in_shape);
                let p = ConvParams { conv, weight: w, bias_lo: sum_lo, bias_hi: sum_hi };
                let (m2, d2) = be.conv_backsub(&m1, g, &p, &out)?;
                let d = d1.iter().zip(&d2).map(|(a, b)| fp::add_down(*a, *b)).collect();
                (vec![(x, out, m2)], d)
            }
            (Op::MaxPool2d(pool), _, Step::MaxPool { sel_lo, sel_up, lo, up }) => {
                let out = g.through_window(in_shape, pool.kernel, pool.stride, (pool.pad.0, pool.pad.1));
                let p = PoolParams { pool, sel_lo, sel_up, lo, up };
                let (m2, d) = be.maxpool_backsub(&m, g, &p, &out)?;
                (vec![(x, out, m2)], d)
            }
            (Op::Concat, _, _) => {
                let (wh, ww) = g.win;
                let mut parts = Vec::with_capacity(node.inputs.len());
                let mut start = 0;
                for &i in &node.inputs {
                    let s = self.net.node(i).shape;
                    let len = s.c * wh * ww;
                    parts.push((i, g.relabel(s), be.slice_cols(&m, start, len)?));
                    start += len;
                }
                (parts, vec![0.0; rows])
            }
            (Op::Reshape, _, _) => {
                let (_, m) = self.to_full(g, m)?;
                (vec![(x, Geom::full(in_shape, rows), m)], vec![0.0; rows])
            }
            _ => return Err(unsupported()),
        })
    }

    /// Predicted bytes per row along the backsubstitution from `start`: the
    /// largest total footprint of the dependence sets pending at once
    /// (the paper's equations 5 and 9), for one row.
    pub(crate) fn predict_row_bytes(&self, start: NodeId, geom: &Geom) -> usize {
        let elem = std::mem::size_of::<T>();
        let one =
            Geom { shape: geom.shape, win: geom.win, offsets: vec![geom.offsets.first().copied().unwrap_or((0, 0))] };
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
                    Op::Relu | Op::Add | Op::ChannelAffine { .. } | Op::Concat => g.relabel(s),
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
