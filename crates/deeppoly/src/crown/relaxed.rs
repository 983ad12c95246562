//! The relaxed bound `L(α, β)` of many output rows at once, on the backend
//! (`lagrange.rs` chooses α and β with it). A row is (leaf, half-space):
//! per evaluation, one backward pass of every row's coefficients and one
//! forward pass of the relaxed network at each row's minimising input
//! corner, the affine layers as the backend's inference and gradient GEMMs
//! shared by all rows, the ReLU lines and corner choices as elementwise
//! steps. Plain arithmetic in `T` with sums in any order, as
//! [`crate::crown::relaxed_bound::relaxed_bound`] on the host: only the choice of α and
//! β depends on it, and the sound backsubstitution bounds the rows after.

use crate::base::analyzer::{Analyzer, Params};
use crate::base::backend::{BResult, Backend, Pointwise};
use crate::base::ir::{NodeId, Op};
use crate::base::relax::Slopes;
use crate::base::relax::{ReluLower, relu_relax, unstable};
use crate::crown::lagrange::{Eval, SlopeGrads, SlotBounds, SplitConstraint};
use crate::crown::relaxed_bound::Offsets;
use polycert_interval::Fp;
use rayon::prelude::*;

/// One row: its slot's node bounds and rounding offsets, its objective
/// `c` on the outputs, and its slot's split constraints.
pub(crate) struct RowSpec<'r, T> {
    pub bounds: &'r SlotBounds<'r, T>,
    pub offsets: &'r Offsets,
    pub c: &'r [f64],
    pub splits: &'r [SplitConstraint],
}

/// A ReLU node's per-row lines: the upper line's slope and intercept,
/// which lower slopes are free (unstable input; 1 or 0) and the
/// relaxation's lower slopes on the backend, the free ones' indices on the
/// host. Per evaluation only the rows' own free slopes go up
/// (`Backend::scatter`) and the supergradients come down at the free
/// slopes only (`Backend::gather`).
struct ReluLines<Buf> {
    up: Buf,
    icpt: Buf,
    free_mask: Buf,
    lam_lo: Buf,
    /// Per row, its free neurons.
    free: Vec<Vec<u32>>,
    /// The free neurons' positions in the `rows × n` tables, row by row.
    free_at: Vec<u32>,
}

/// One sparse upload of an evaluation: the node, its own base (zeros for a
/// split node; none for a ReLU, whose base is its relaxation's lower slopes),
/// the indices and the values.
type SparseJob<Buf, T> = (NodeId, Option<Buf>, Vec<u32>, Vec<T>);

/// An evaluation's sparse uploads, per node where it has one.
struct Scattered<Buf> {
    /// A ReLU's lower slopes.
    lo_tab: Vec<Option<Buf>>,
    /// A split node's coefficients.
    coef: Vec<Option<Buf>>,
}

/// What stays fixed across a search's evaluations: the rows' tables on the
/// backend.
pub(crate) struct RelaxedRows<'r, 'a, B: Backend<T>, T: Fp> {
    an: &'a Analyzer<'a, B, T>,
    rows: &'r [RowSpec<'r, T>],
    input: (B::Buf, B::Buf),
    seed: B::Buf,
    relu: Vec<Option<ReluLines<B::Buf>>>,
    offsets: Vec<Option<(B::Buf, B::Buf)>>,
    scale: Vec<Option<[B::Buf; 3]>>,
    /// Nodes holding a split neuron of some row.
    split_nodes: Vec<NodeId>,
}

impl<'r, 'a, B: Backend<T>, T: Fp> RelaxedRows<'r, 'a, B, T> {
    /// The rows' tables (`None`: a layer the backend path does not
    /// evaluate, or no rows).
    pub(crate) fn new(
        an: &'a Analyzer<'a, B, T>,
        rows: &'r [RowSpec<'r, T>],
        lower: ReluLower,
    ) -> BResult<Option<Self>> {
        let (net, be) = (an.net, an.backend);
        let supported = |op: &Op| {
            matches!(op, Op::Input | Op::Dense { .. } | Op::Conv2d(_) | Op::Relu | Op::Add | Op::Reshape)
                || matches!(op, Op::ChannelAffine { .. })
        };
        if rows.is_empty() || !net.nodes().iter().all(|n| supported(&n.op)) {
            return Ok(None);
        }
        // Gather and scatter index the `rows × n` tables with u32.
        let widest = net.nodes().iter().map(|n| n.shape.numel()).max().unwrap_or(0);
        if rows.len().saturating_mul(widest) > u32::MAX as usize {
            return Ok(None);
        }
        let t = |v: f64| T::from_f64_nearest(v);
        // The rows of one slot (consecutive, on the same bounds and offsets)
        // share its tables: built and uploaded once per slot, then repeated
        // per row on the backend.
        let (mut slots, mut slot_of): (Vec<&RowSpec<'r, T>>, Vec<u32>) = (Vec::new(), Vec::with_capacity(rows.len()));
        for r in rows {
            let same =
                slots.last().is_some_and(|p| std::ptr::eq(p.bounds, r.bounds) && std::ptr::eq(p.offsets, r.offsets));
            if !same {
                slots.push(r);
            }
            slot_of.push(slots.len() as u32 - 1);
        }
        let per_row = |table: B::Buf, n: usize| -> BResult<B::Buf> {
            if slots.len() == rows.len() { Ok(table) } else { be.repeat_rows(&table, n, &slot_of) }
        };
        let up_rows = |(lo, hi): (Vec<T>, Vec<T>), n: usize| -> BResult<(B::Buf, B::Buf)> {
            Ok((per_row(be.upload(&lo)?, n)?, per_row(be.upload(&hi)?, n)?))
        };
        let n_in = net.node(0).shape.numel();
        let input = up_rows(
            pair_tables(&slots, n_in, |r, lo, hi| {
                lo.iter_mut().zip(r.bounds[0].0).for_each(|(d, &v)| *d = v);
                hi.iter_mut().zip(r.bounds[0].1).for_each(|(d, &v)| *d = v);
            }),
            n_in,
        )?;
        let n_out = net.output_shape().numel();
        let seed: Vec<T> =
            rows.iter().flat_map(|r| (0..n_out).map(|j| t(r.c.get(j).copied().unwrap_or(0.0)))).collect();
        let mut relu = Vec::with_capacity(net.nodes().len());
        let mut offsets = Vec::with_capacity(net.nodes().len());
        for (id, node) in net.nodes().iter().enumerate() {
            relu.push(if node.op == Op::Relu {
                Some(Self::lines(be, &slots, &slot_of, node.inputs[0], lower, &per_row)?)
            } else {
                None
            });
            let known = slots.iter().all(|r| matches!(r.offsets.get(id), Some(Some(_))));
            let n = node.shape.numel();
            offsets.push(if known {
                let tables = pair_tables(&slots, n, |r, lo, hi| {
                    if let Some(Some(o)) = r.offsets.get(id) {
                        for ((l, h), &(a, b)) in lo.iter_mut().zip(hi.iter_mut()).zip(o) {
                            (*l, *h) = (t(a), t(b));
                        }
                    }
                });
                Some(up_rows(tables, n)?)
            } else {
                None
            });
        }
        let mut split_nodes: Vec<NodeId> = rows.iter().flat_map(|r| r.splits.iter().map(|s| s.node)).collect();
        split_nodes.sort_unstable();
        split_nodes.dedup();
        let scale = an.scale_tables()?;
        Ok(Some(Self { an, rows, input, seed: be.upload(&seed)?, relu, offsets, scale, split_nodes }))
    }

    /// The ReLU lines of the node whose input is `x0`: built per slot in
    /// parallel, repeated per row (`per_row`).
    fn lines(
        be: &B,
        slots: &[&RowSpec<'r, T>],
        slot_of: &[u32],
        x0: NodeId,
        lower: ReluLower,
        per_row: &impl Fn(B::Buf, usize) -> BResult<B::Buf>,
    ) -> BResult<ReluLines<B::Buf>> {
        let n = slots.first().map_or(0, |r| r.bounds[x0].0.len());
        let table = || vec![T::zero(); slots.len() * n];
        let (mut up, mut icpt, mut lam_lo, mut mask) = (table(), table(), table(), table());
        fn chunks<T: Send>(v: &mut [T], n: usize) -> Vec<&mut [T]> {
            v.par_chunks_mut(n.max(1)).collect()
        }
        let free_of_slot: Vec<Vec<u32>> =
            (chunks(&mut up, n), chunks(&mut icpt, n), chunks(&mut lam_lo, n), chunks(&mut mask, n))
                .into_par_iter()
                .zip(slots)
                .map(|((u, i, l, m), r)| {
                    let (lo, hi) = r.bounds[x0];
                    let mut free = Vec::new();
                    for (j, (&a, &b)) in lo.iter().zip(hi).enumerate().take(n) {
                        let rr = relu_relax(a, b, lower);
                        (u[j], i[j], l[j]) = (rr.lam_up, rr.mu_up, rr.lam_lo);
                        if unstable(a, b) {
                            m[j] = T::one();
                            free.push(j as u32);
                        }
                    }
                    free
                })
                .collect();
        let free: Vec<Vec<u32>> = slot_of.iter().map(|&s| free_of_slot[s as usize].clone()).collect();
        let free_at = free.iter().enumerate().flat_map(|(r, f)| f.iter().map(move |&j| (r * n) as u32 + j)).collect();
        let up_row = |v: Vec<T>| -> BResult<B::Buf> { per_row(be.upload(&v)?, n) };
        Ok(ReluLines {
            up: up_row(up)?,
            icpt: up_row(icpt)?,
            free_mask: up_row(mask)?,
            lam_lo: up_row(lam_lo)?,
            free,
            free_at,
        })
    }

    /// Per row, `c·y` at its minimising corner with its β terms, and its
    /// supergradients (`alpha[r]`: row `r`'s slot's slopes, `None` for the
    /// relaxation's own; `beta[r]`: one per split of its slot).
    pub(crate) fn eval(&self, alpha: &[Option<&Slopes>], beta: &[&[f64]]) -> BResult<Vec<Eval>> {
        let passes = crate::base::profile::span("relaxed.passes");
        let jobs = self.sparse_jobs(alpha, beta)?;
        let Scattered { lo_tab, coef } = self.scatter_jobs(&jobs)?;
        let coef = self.backward(coef, &lo_tab)?;
        let z = self.forward_at_corners(&coef, &lo_tab)?;
        drop(passes);
        let _d = crate::base::profile::span("relaxed.download");
        self.bounds_and_gradients(&coef, &z, alpha, beta)
    }

    /// Sparse uploads, all in one: per ReLU, its lower slopes (the slot's
    /// α where free, else the relaxation's); per split node, its
    /// coefficients, nonzero (−β·s) at the split neurons only.
    fn sparse_jobs(&self, alpha: &[Option<&Slopes>], beta: &[&[f64]]) -> BResult<Vec<SparseJob<B::Buf, T>>> {
        let (be, r_n) = (self.an.backend, self.rows.len());
        let nodes = self.an.net.nodes();
        let mut jobs: Vec<SparseJob<B::Buf, T>> = Vec::new();
        for (id, lines) in self.relu.iter().enumerate() {
            let Some(l) = lines else { continue };
            let n = nodes[id].shape.numel();
            // Rows without slopes of their own keep the relaxation's.
            let (mut idx, mut vals) = (Vec::new(), Vec::new());
            let mut at = 0;
            for (free, a) in l.free.iter().zip(alpha) {
                let mine = &l.free_at[at..at + free.len()];
                at += free.len();
                if let Some(a) = a.and_then(|a| a.get(id)).filter(|a| a.len() == n) {
                    idx.extend_from_slice(mine);
                    vals.extend(free.iter().map(|&j| T::from_f64_nearest(a[j as usize])));
                }
            }
            jobs.push((id, None, idx, vals));
        }
        for &k in &self.split_nodes {
            let n = nodes[k].shape.numel();
            let mut at: Vec<(u32, f64)> = Vec::new();
            for (r, (row, b)) in self.rows.iter().zip(beta).enumerate() {
                for (s, &bk) in row.splits.iter().zip(b.iter()).filter(|(s, _)| s.node == k) {
                    let sign = if s.active { 1.0 } else { -1.0 };
                    at.push(((r * n + s.neuron) as u32, -bk * sign));
                }
            }
            at.sort_by_key(|a| a.0);
            let (mut idx, mut vals): (Vec<u32>, Vec<T>) = (Vec::with_capacity(at.len()), Vec::with_capacity(at.len()));
            for (i, group) in at.chunk_by(|a, b| a.0 == b.0).map(|g| (g[0].0, g)) {
                idx.push(i);
                vals.push(T::from_f64_nearest(group.iter().map(|a| a.1).sum()));
            }
            jobs.push((k, Some(be.zeros(r_n * n)?), idx, vals));
        }
        Ok(jobs)
    }

    /// The jobs uploaded.
    fn scatter_jobs(&self, jobs: &[SparseJob<B::Buf, T>]) -> BResult<Scattered<B::Buf>> {
        let (be, nodes) = (self.an.backend, self.an.net.nodes());
        let parts: Vec<(&B::Buf, &[u32], &[T])> = jobs
            .iter()
            .map(|(id, own, i, v)| {
                (own.as_ref().unwrap_or_else(|| &self.relu[*id].as_ref().expect("lines").lam_lo), &i[..], &v[..])
            })
            .collect();
        let mut lo_tab: Vec<Option<B::Buf>> = (0..nodes.len()).map(|_| None).collect();
        let mut coef: Vec<Option<B::Buf>> = (0..nodes.len()).map(|_| None).collect();
        for (buf, (id, own, _, _)) in be.scatter_many(&parts)?.into_iter().zip(jobs) {
            if own.is_none() { lo_tab[*id] = Some(buf) } else { coef[*id] = Some(buf) }
        }
        Ok(Scattered { lo_tab, coef })
    }

    /// Backward: every row's coefficients of every node, from the output's
    /// seed and the split nodes' β terms in `coef`.
    fn backward(&self, mut coef: Vec<Option<B::Buf>>, lo_tab: &[Option<B::Buf>]) -> BResult<Vec<B::Buf>> {
        let (net, be, r_n) = (self.an.net, self.an.backend, self.rows.len());
        let nodes = net.nodes();
        let acc = |coef: &mut Vec<Option<B::Buf>>, k: NodeId, g: B::Buf| -> BResult<()> {
            coef[k] = Some(match coef[k].take() {
                None => g,
                Some(h) => be.pointwise(Pointwise::Add(&h, &g))?,
            });
            Ok(())
        };
        acc(&mut coef, net.output(), be.pointwise(Pointwise::Copy(&self.seed))?)?;
        for id in (1..=net.output()).rev() {
            let node = &nodes[id];
            let Some(g) = coef[id].take() else { continue };
            let x0 = node.inputs[0];
            let shape_in = net.node(x0).shape;
            match (&node.op, &self.an.params[id]) {
                (Op::Dense { .. }, Params::Affine { w, .. }) => {
                    acc(&mut coef, x0, be.grad_dense(&g, w, shape_in.numel(), r_n)?)?
                }
                (Op::Conv2d(c), Params::Affine { w, .. }) => {
                    acc(&mut coef, x0, be.grad_conv(c, w, shape_in, &g, r_n)?)?
                }
                (Op::Relu, _) => {
                    let (l, lo) = (self.relu[id].as_ref().expect("lines"), lo_tab[id].as_ref().expect("lower"));
                    acc(&mut coef, x0, be.pointwise(Pointwise::RelaxBack { g: &g, up: &l.up, lo })?)?
                }
                (Op::Add, _) => {
                    acc(&mut coef, node.inputs[1], be.pointwise(Pointwise::Copy(&g))?)?;
                    acc(&mut coef, x0, be.pointwise(Pointwise::Copy(&g))?)?;
                }
                (Op::Reshape, _) => acc(&mut coef, x0, be.pointwise(Pointwise::Copy(&g))?)?,
                (Op::ChannelAffine { .. }, _) => {
                    let [m, _, zero] = self.scale[id].as_ref().expect("table per ChannelAffine");
                    acc(&mut coef, x0, be.pointwise(Pointwise::Scale { x: &g, m, c: zero })?)?
                }
                (op, _) => return Err(crate::base::backend::BackendError::Failure(format!("relaxed bound: {op:?}"))),
            }
            coef[id] = Some(g);
        }
        // A node no row's bound reaches has coefficients 0.
        let zero_of = |id: NodeId| be.zeros(r_n * nodes[id].shape.numel());
        for (id, c) in coef.iter_mut().enumerate() {
            if c.is_none() {
                *c = Some(zero_of(id)?);
            }
        }
        let coef: Vec<B::Buf> = coef.into_iter().map(|c| c.expect("filled")).collect();
        Ok(coef)
    }

    /// Forward: the relaxed network at each row's minimising corner.
    fn forward_at_corners(&self, coef: &[B::Buf], lo_tab: &[Option<B::Buf>]) -> BResult<Vec<Option<B::Buf>>> {
        let (net, be, r_n) = (self.an.net, self.an.backend, self.rows.len());
        let nodes = net.nodes();
        let mut z: Vec<Option<B::Buf>> = Vec::with_capacity(nodes.len());
        z.push(Some(be.pointwise(Pointwise::Select { a: &coef[0], pos: &self.input.0, neg: &self.input.1 })?));
        for (id, node) in nodes.iter().enumerate().skip(1) {
            let x = value(net, &z, node.inputs[0]);
            let v = match (&node.op, &self.an.params[id]) {
                (Op::Dense { .. }, Params::Affine { w, b, .. }) => {
                    Some(be.infer_dense(w, b, net.node(node.inputs[0]).shape.numel(), x, r_n)?)
                }
                (Op::Conv2d(c), Params::Affine { w, b, .. }) => {
                    Some(be.infer_conv(c, w, b, net.node(node.inputs[0]).shape, x, r_n)?)
                }
                (Op::Relu, _) => {
                    let (l, lo) = (self.relu[id].as_ref().expect("lines"), lo_tab[id].as_ref().expect("lower"));
                    Some(be.pointwise(Pointwise::RelaxLine { x, g: &coef[id], up: &l.up, icpt: &l.icpt, lo })?)
                }
                (Op::Add, _) => Some(be.pointwise(Pointwise::Add(x, value(net, &z, node.inputs[1])))?),
                (Op::Reshape, _) => None,
                (Op::ChannelAffine { .. }, _) => {
                    let [m, c, _] = self.scale[id].as_ref().expect("table per ChannelAffine");
                    Some(be.pointwise(Pointwise::Scale { x, m, c })?)
                }
                (op, _) => return Err(crate::base::backend::BackendError::Failure(format!("relaxed bound: {op:?}"))),
            };
            // The constant interval's end the bound uses, in place of the bias.
            let v = match (v, &self.offsets[id]) {
                (Some(v), Some((lo, hi))) => {
                    let off = be.pointwise(Pointwise::Select { a: &coef[id], pos: lo, neg: hi })?;
                    Some(be.pointwise(Pointwise::Add(&v, &off))?)
                }
                (v, _) => v,
            };
            z.push(v);
        }
        Ok(z)
    }

    /// Downloads what the rows' bounds and supergradients need.
    fn bounds_and_gradients(
        &self,
        coef: &[B::Buf],
        z: &[Option<B::Buf>],
        alpha: &[Option<&Slopes>],
        beta: &[&[f64]],
    ) -> BResult<Vec<Eval>> {
        let (net, be) = (self.an.net, self.an.backend);
        let nodes = net.nodes();
        let n_out = net.output_shape().numel();
        // Everything comes down in one transfer: the outputs, the split
        // neurons' values (row by row in the order of its splits) and
        // ∂L/∂α_j = a_j·x_j where the row's lower slope j is free and used,
        // at the free slopes only.
        let out = value(net, z, net.output());
        let all_out: Vec<u32> = (0..(self.rows.len() * n_out) as u32).collect();
        let mut parts: Vec<(&B::Buf, Vec<u32>)> = vec![(out, all_out)];
        let at = |k: NodeId, r: usize| self.rows[r].splits.iter().enumerate().filter(move |(_, s)| s.node == k);
        for &k in &self.split_nodes {
            let n = nodes[k].shape.numel();
            let idx =
                (0..self.rows.len()).flat_map(|r| at(k, r).map(move |(_, s)| (r * n + s.neuron) as u32)).collect();
            parts.push((value(net, z, k), idx));
        }
        let want_alpha = alpha.iter().any(Option::is_some);
        let slope_grads: Vec<(usize, B::Buf)> = if want_alpha {
            let mut v = Vec::new();
            for (id, lines) in self.relu.iter().enumerate() {
                let Some(l) = lines else { continue };
                let x = value(net, z, nodes[id].inputs[0]);
                v.push((id, be.pointwise(Pointwise::SlopeGrad { g: &coef[id], x, free: &l.free_mask })?));
            }
            v
        } else {
            Vec::new()
        };
        for (id, g) in &slope_grads {
            parts.push((g, self.relu[*id].as_ref().expect("lines").free_at.clone()));
        }
        let refs: Vec<(&B::Buf, &[u32])> = parts.iter().map(|(b, i)| (*b, &i[..])).collect();
        let mut got = be.gather_many(&refs)?.into_iter();
        let f64s = |v: Vec<T>| -> Vec<f64> { v.into_iter().map(|x| x.to_f64_exact()).collect() };
        let y = f64s(got.next().unwrap_or_default());
        let mut zs: Vec<Vec<f64>> = self.rows.iter().map(|r| vec![0.0; r.splits.len()]).collect();
        for &k in &self.split_nodes {
            let mut g = got.next().unwrap_or_default().into_iter();
            for (r, zr) in zs.iter_mut().enumerate() {
                for (i, _) in at(k, r) {
                    zr[i] = g.next().map_or(0.0, |v| v.to_f64_exact());
                }
            }
        }
        let mut grads: Vec<Vec<f64>> = vec![Vec::new(); self.rows.len()];
        for (id, _) in &slope_grads {
            let l = self.relu[*id].as_ref().expect("lines");
            let mut g = got.next().unwrap_or_default().into_iter();
            for ((grad, free), a) in grads.iter_mut().zip(&l.free).zip(alpha) {
                let mine = g.by_ref().take(free.len()).map(|v| v.to_f64_exact());
                if a.is_some() {
                    grad.extend(mine);
                } else {
                    mine.for_each(drop);
                }
            }
        }
        Ok(self
            .rows
            .iter()
            .zip(grads)
            .enumerate()
            .map(|(r, (row, ga))| {
                let mut bound: f64 = row.c.iter().zip(&y[r * n_out..(r + 1) * n_out]).map(|(a, b)| a * b).sum();
                let gb: Vec<f64> =
                    row.splits.iter().zip(&zs[r]).map(|(s, zk)| -(if s.active { 1.0 } else { -1.0 }) * zk).collect();
                bound += gb.iter().zip(beta[r]).map(|(g, b)| g * b).sum::<f64>();
                (if bound.is_finite() { bound } else { f64::NEG_INFINITY }, gb, SlopeGrads::Free(ga))
            })
            .collect())
    }
}

/// Two `rows × n` tables, each row's pair of chunks filled by `f`, rows
/// in parallel.
fn pair_tables<R: Sync, T: Fp>(rows: &[R], n: usize, f: impl Fn(&R, &mut [T], &mut [T]) + Sync) -> (Vec<T>, Vec<T>) {
    let (mut a, mut b) = (vec![T::zero(); rows.len() * n], vec![T::zero(); rows.len() * n]);
    a.par_chunks_mut(n.max(1)).zip(b.par_chunks_mut(n.max(1))).zip(rows).for_each(|((a, b), r)| f(r, a, b));
    (a, b)
}

/// The value of node `id` (following reshapes).
fn value<'v, Buf>(net: &crate::base::ir::Network, z: &'v [Option<Buf>], mut id: NodeId) -> &'v Buf {
    loop {
        match (&net.node(id).op, &z[id]) {
            (Op::Reshape, _) => id = net.node(id).inputs[0],
            (_, Some(v)) => return v,
            (_, None) => unreachable!("every node but a reshape has values"),
        }
    }
}
