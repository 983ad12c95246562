//! Falsification on the backend: PGD with sign steps, batched. Every
//! attack run (a sub-problem's box and one disjunct of its unsafe region)
//! is one point of the batch, so many properties share the inference and
//! gradient GEMMs. The search runs in `T` with sums in any order; a point
//! is reported only after plain float32 inference confirms it
//! ([`crate::attack::check_f32`]).

use crate::analysis::{Analyzer, Params};
use crate::attack::{check_f32, to_f32_in_box};
use crate::backend::{BResult, Backend, Pointwise};
use crate::ir::{NodeId, Op};
use crate::property::{Counterexample, SubProblem};
use polycert_interval::{Fp, fp};
use rayon::prelude::*;
use std::time::Instant;

/// One attack run: a sub-problem, one disjunct of its unsafe region, and
/// the group (property) a hit decides.
#[derive(Clone, Copy)]
pub struct Target<'p> {
    pub sp: &'p SubProblem,
    pub disjunct: usize,
    pub group: usize,
}

/// A recorded attack step and the buffers it writes (`y` at the step's
/// start point, which it copies to `x_prev`) or reads.
struct StepGraph<G, Buf> {
    graph: G,
    y: Buf,
    x_prev: Buf,
    _seeds: Buf,
}

/// Buffers a recorded step reads.
#[derive(Clone, Copy)]
struct Bufs<'b, Buf> {
    lo: &'b Buf,
    hi: &'b Buf,
    alpha: &'b Buf,
}

/// Most points per chunk of the attack.
const MAX_POINTS: usize = 4096;

/// Values of every node at the batch's points (`None`: the node aliases
/// its input, or is the input itself).
struct Values<Buf> {
    vals: Vec<Option<Buf>>,
}

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// PGD from each box centre on `max_k (c_k·y − d_k)` over the target's
    /// disjunct, `steps` sign steps, all targets at once. The first
    /// float32-confirmed hit of a group ends its other targets. Returns
    /// one entry per group (`groups` of them).
    pub fn attack_batch(
        &self,
        targets: &[Target<'_>],
        groups: usize,
        steps: usize,
        deadline: Option<Instant>,
    ) -> BResult<Vec<Option<Counterexample>>> {
        let mut hits: Vec<Option<Counterexample>> = vec![None; groups];
        if steps == 0 {
            return Ok(hits);
        }
        let per_point: usize = self.net.nodes().iter().map(|n| n.shape.numel()).sum::<usize>() * 3 * size_of::<T>();
        let chunk = (self.budget() / 4 / per_point.max(1)).clamp(1, MAX_POINTS);
        let mut at = 0;
        while at < targets.len() {
            let todo: Vec<Target<'_>> =
                targets[at..].iter().filter(|t| hits[t.group].is_none()).take(chunk).copied().collect();
            at = targets.len().min(at + chunk);
            if !todo.is_empty() {
                self.attack_chunk(&todo, steps, deadline, &mut hits)?;
            }
        }
        Ok(hits)
    }

    fn attack_chunk(
        &self,
        pts: &[Target<'_>],
        steps: usize,
        deadline: Option<Instant>,
        hits: &mut [Option<Counterexample>],
    ) -> BResult<()> {
        let be = self.backend;
        let setup = crate::profile::span("pgd.setup");
        let (n_in, n_out, p) = (self.net.input_shape().numel(), self.net.output_shape().numel(), pts.len());
        let (mut lo, mut hi, mut x0) = (Vec::with_capacity(p * n_in), Vec::with_capacity(p * n_in), Vec::new());
        for t in pts {
            let b = &t.sp.input;
            for ((&l, &h), c) in b.lo.iter().zip(&b.hi).zip(b.centre()) {
                // Inside the box in `T` where it can be; the f32 check nudges.
                let (lt, ht) = (fp::from_f64_up::<T>(l), fp::from_f64_down::<T>(h));
                let (lt, ht) = if lt <= ht { (lt, ht) } else { (T::from_f64_nearest(l), T::from_f64_nearest(l)) };
                lo.push(lt);
                hi.push(ht);
                x0.push(T::from_f64_nearest(c).max(lt).min(ht));
            }
        }
        let (lo_d, hi_d) = (be.upload(&lo)?, be.upload(&hi)?);
        let mut x = be.upload(&x0)?;
        let tables = self.scale_tables()?;
        let alphas: Vec<T> = (0..steps)
            .map(|s| T::from_f64_nearest(2.5 / steps as f64 * (1.0 - s as f64 / steps as f64 * 0.5)))
            .collect();
        let (alphas_d, mut alpha_d) = (be.upload(&alphas)?, be.upload(&alphas[..1])?);
        let mut active: Vec<bool> = pts.iter().map(|t| hits[t.group].is_none()).collect();
        // After the first step, a backend that records graphs replays the
        // whole step (inference, gradient, sign step) as one launch.
        let mut graph: Option<StepGraph<B::Graph, B::Buf>> = None;
        drop(setup);
        for s in 0..=steps {
            // y at x_s, and (replayed) x already moved to x_{s+1}.
            let mut replayed = false;
            if let Some(gr) = graph.as_ref().filter(|_| s < steps) {
                let _p = crate::profile::span("pgd.replay");
                be.copy_range(&mut alpha_d, 0, &alphas_d, s, 1)?;
                replayed = be.replay(&gr.graph).is_ok();
                if !replayed {
                    graph = None;
                }
            }
            let v = if replayed {
                None
            } else {
                let _p = crate::profile::span("pgd.infer");
                Some(self.infer_all(&x, p, &tables)?)
            };
            let _p = crate::profile::span("pgd.outputs");
            let y = match (&v, &graph) {
                (Some(v), _) => be.download(self.value(v, &x, self.net.output()))?,
                (None, Some(gr)) => be.download(&gr.y)?,
                (None, None) => unreachable!("replayed without a graph"),
            };
            let mut seeds = vec![T::zero(); p * n_out];
            let mut candidates = Vec::new();
            for (i, t) in pts.iter().enumerate() {
                if !active[i] {
                    continue;
                }
                let yp: Vec<f64> = y[i * n_out..(i + 1) * n_out].iter().map(|v| v.to_f64_exact()).collect();
                let Some((k, m)) = worst_halfspace(t.sp, t.disjunct, &yp) else {
                    active[i] = false;
                    continue;
                };
                // The search's arithmetic differs from float32 inference:
                // check points a little short of the region too, and every
                // final point (float32 rounding alone may reach the region).
                let scale = yp.iter().fold(1.0f64, |a, v| a.max(v.abs()));
                if m <= 1e-4 * scale || s == steps {
                    candidates.push(i);
                }
                for (o, &c) in t.sp.unsafe_region[t.disjunct][k].c.iter().enumerate() {
                    seeds[i * n_out + o] = T::from_f64_nearest(c);
                }
            }
            drop(_p);
            if !candidates.is_empty() {
                let _p = crate::profile::span("pgd.check");
                let at_s = match (&graph, replayed) {
                    (Some(gr), true) => &gr.x_prev,
                    _ => &x,
                };
                let xs = be.download(at_s)?;
                let found: Vec<(usize, Counterexample)> = candidates
                    .par_iter()
                    .filter_map(|&i| {
                        let box_ = &pts[i].sp.input;
                        let xp: Vec<f64> = xs[i * n_in..(i + 1) * n_in].iter().map(|v| v.to_f64_exact()).collect();
                        check_f32(self.net, pts[i].sp, &to_f32_in_box(&xp, &box_.lo, &box_.hi)).map(|c| (i, c))
                    })
                    .collect();
                for (i, cex) in found {
                    let g = pts[i].group;
                    if hits[g].is_none() && self.confirm(pts[i].sp, &cex.input) {
                        hits[g] = Some(cex);
                    }
                }
                for (i, t) in pts.iter().enumerate() {
                    if hits[t.group].is_some() && active[i] {
                        active[i] = false;
                        seeds[i * n_out..(i + 1) * n_out].iter_mut().for_each(|v| *v = T::zero());
                    }
                }
            }
            let late = deadline.is_some_and(|d| Instant::now() >= d);
            if s == steps || late || !active.iter().any(|&a| a) {
                break;
            }
            let Some(v) = v else { continue };
            let _p = crate::profile::span("pgd.gradient");
            let Some(g) = self.gradient(&v, &x, p, &tables, be.upload(&seeds)?)? else {
                break;
            };
            be.copy_range(&mut alpha_d, 0, &alphas_d, s, 1)?;
            x = be.pointwise(Pointwise::SignStep { x: &x, g: &g, lo: &lo_d, hi: &hi_d, alpha: &alpha_d })?;
            drop((v, g));
            if s == 0 && steps > 2 && self.recordable(pts) {
                let _p = crate::profile::span("pgd.capture");
                let bufs = Bufs { lo: &lo_d, hi: &hi_d, alpha: &alpha_d };
                graph = self.record_step(&mut x, p, &tables, &seeds, bufs)?;
            }
        }
        Ok(())
    }

    /// Whether a step can be recorded once and replayed: the seeds must not
    /// change (one half-space per disjunct), and every node must run on the
    /// backend without host transfers.
    fn recordable(&self, pts: &[Target<'_>]) -> bool {
        pts.iter().all(|t| t.sp.unsafe_region.get(t.disjunct).is_some_and(|c| c.len() == 1))
            && self.net.nodes().iter().all(|n| {
                matches!(
                    n.op,
                    Op::Input
                        | Op::Dense { .. }
                        | Op::Relu
                        | Op::Sigmoid
                        | Op::Add
                        | Op::Reshape
                        | Op::ChannelAffine { .. }
                )
            })
    }

    /// Records one step from `x` (in place): the outputs at `x` into `y`,
    /// `x` into `x_prev`, then the sign step on the gradient of the fixed
    /// `seeds`. `None` when the backend records no graphs.
    fn record_step(
        &self,
        x: &mut B::Buf,
        p: usize,
        tables: &[Option<[B::Buf; 3]>],
        seeds: &[T],
        b: Bufs<'_, B::Buf>,
    ) -> BResult<Option<StepGraph<B::Graph, B::Buf>>> {
        let be = self.backend;
        let (n_in, n_out) = (self.net.input_shape().numel(), self.net.output_shape().numel());
        let seeds = be.upload(seeds)?;
        let mut y = be.upload(&vec![T::zero(); p * n_out])?;
        let mut x_prev = be.upload(&vec![T::zero(); p * n_in])?;
        let graph = be.capture(&mut || {
            let v = self.infer_all(x, p, tables)?;
            be.copy_range(&mut y, 0, self.value(&v, x, self.net.output()), 0, p * n_out)?;
            be.copy_range(&mut x_prev, 0, x, 0, p * n_in)?;
            let seed = be.pointwise(Pointwise::Copy(&seeds))?;
            let g = self
                .gradient(&v, x, p, tables, seed)?
                .ok_or_else(|| crate::BackendError::Failure("no input gradient".into()))?;
            let next = be.pointwise(Pointwise::SignStep { x, g: &g, lo: b.lo, hi: b.hi, alpha: b.alpha })?;
            be.copy_range(x, 0, &next, 0, p * n_in)
        })?;
        Ok(graph.map(|graph| StepGraph { graph, y, x_prev, _seeds: seeds }))
    }

    /// Per-neuron `(m, c, 0)` tables of the ChannelAffine nodes (midpoints).
    fn scale_tables(&self) -> BResult<Vec<Option<[B::Buf; 3]>>> {
        let be = self.backend;
        self.net
            .nodes()
            .iter()
            .map(|node| match &node.op {
                Op::ChannelAffine { mul, add, .. } => {
                    let hw = node.shape.h * node.shape.w;
                    let n = node.shape.numel();
                    let m: Vec<T> = (0..n).map(|j| T::from_f64_nearest(mul[j / hw].midpoint())).collect();
                    let c: Vec<T> = (0..n).map(|j| T::from_f64_nearest(add[j / hw].midpoint())).collect();
                    Ok(Some([be.upload(&m)?, be.upload(&c)?, be.upload(&vec![T::zero(); n])?]))
                }
                _ => Ok(None),
            })
            .collect()
    }

    /// The value of node `id` (following reshapes; the input is `x`).
    fn value<'v>(&self, v: &'v Values<B::Buf>, x: &'v B::Buf, mut id: NodeId) -> &'v B::Buf {
        loop {
            match self.net.node(id).op {
                Op::Input => return x,
                Op::Reshape => id = self.net.node(id).inputs[0],
                _ => return v.vals[id].as_ref().expect("computed before use"),
            }
        }
    }

    /// Every node's values at the `p` points `x`.
    fn infer_all(&self, x: &B::Buf, p: usize, tables: &[Option<[B::Buf; 3]>]) -> BResult<Values<B::Buf>> {
        let be = self.backend;
        let mut v = Values { vals: Vec::with_capacity(self.net.nodes().len()) };
        for (id, node) in self.net.nodes().iter().enumerate() {
            let input = |k: usize| self.value(&v, x, node.inputs[k]);
            let out = match (&node.op, &self.params[id]) {
                (Op::Input | Op::Reshape, _) => None,
                (Op::Dense { .. }, Params::Affine { w, b, .. }) => {
                    Some(be.infer_dense(w, b, self.net.node(node.inputs[0]).shape.numel(), input(0), p)?)
                }
                (Op::Conv2d(c), Params::Affine { w, b, .. }) => {
                    Some(be.infer_conv(c, w, b, self.net.node(node.inputs[0]).shape, input(0), p)?)
                }
                (Op::Relu, _) => Some(be.pointwise(Pointwise::Relu(input(0)))?),
                (Op::Sigmoid, _) => Some(be.pointwise(Pointwise::Sigmoid(input(0)))?),
                (Op::Add, _) => Some(be.pointwise(Pointwise::Add(input(0), input(1)))?),
                (Op::ChannelAffine { .. }, _) => {
                    let [m, c, _] = tables[id].as_ref().expect("table per ChannelAffine");
                    Some(be.pointwise(Pointwise::Scale { x: input(0), m, c })?)
                }
                _ => Some(self.infer_on_host(id, &v, x, p)?),
            };
            v.vals.push(out);
        }
        Ok(v)
    }

    /// Pooling and Concat, on the host, point by point.
    fn infer_on_host(&self, id: NodeId, v: &Values<B::Buf>, x: &B::Buf, p: usize) -> BResult<B::Buf> {
        let node = self.net.node(id);
        let ins: Vec<Vec<f64>> = node
            .inputs
            .iter()
            .map(|&k| Ok(self.backend.download(self.value(v, x, k))?.iter().map(|t| t.to_f64_exact()).collect()))
            .collect::<BResult<_>>()?;
        let mut out = Vec::with_capacity(p * node.shape.numel());
        for pt in 0..p {
            let slices: Vec<&[f64]> = node
                .inputs
                .iter()
                .zip(&ins)
                .map(|(&k, vals)| {
                    let n = self.net.node(k).shape.numel();
                    &vals[pt * n..(pt + 1) * n]
                })
                .collect();
            out.extend(crate::eval::eval_node(self.net, id, &slices).into_iter().map(T::from_f64_nearest));
        }
        self.backend.upload(&out)
    }

    /// The input gradient of `Σ seed·y` per point (`None`: it does not
    /// reach the input, as through pooling).
    fn gradient(
        &self,
        v: &Values<B::Buf>,
        x: &B::Buf,
        p: usize,
        tables: &[Option<[B::Buf; 3]>],
        seed: B::Buf,
    ) -> BResult<Option<B::Buf>> {
        let be = self.backend;
        let mut grads: Vec<Option<B::Buf>> = (0..self.net.nodes().len()).map(|_| None).collect();
        grads[self.net.output()] = Some(seed);
        let acc = |grads: &mut Vec<Option<B::Buf>>, k: NodeId, g: B::Buf| -> BResult<()> {
            grads[k] = Some(match grads[k].take() {
                None => g,
                Some(h) => be.pointwise(Pointwise::Add(&h, &g))?,
            });
            Ok(())
        };
        for id in (1..=self.net.output()).rev() {
            let Some(g) = grads[id].take() else { continue };
            let node = self.net.node(id);
            let x0 = node.inputs[0];
            let shape_in = self.net.node(x0).shape;
            match (&node.op, &self.params[id]) {
                (Op::Dense { .. }, Params::Affine { w, .. }) => {
                    acc(&mut grads, x0, be.grad_dense(&g, w, shape_in.numel(), p)?)?
                }
                (Op::Conv2d(c), Params::Affine { w, .. }) => acc(&mut grads, x0, be.grad_conv(c, w, shape_in, &g, p)?)?,
                (Op::Relu, _) => {
                    acc(&mut grads, x0, be.pointwise(Pointwise::ReluGrad { g: &g, x: self.value(v, x, x0) })?)?
                }
                (Op::Sigmoid, _) => {
                    acc(&mut grads, x0, be.pointwise(Pointwise::SigmoidGrad { g: &g, y: self.value(v, x, id) })?)?
                }
                (Op::Add, _) => {
                    acc(&mut grads, node.inputs[1], be.pointwise(Pointwise::Copy(&g))?)?;
                    acc(&mut grads, x0, g)?;
                }
                (Op::Reshape, _) => acc(&mut grads, x0, g)?,
                (Op::ChannelAffine { .. }, _) => {
                    let [m, _, zero] = tables[id].as_ref().expect("table per ChannelAffine");
                    acc(&mut grads, x0, be.pointwise(Pointwise::Scale { x: &g, m, c: zero })?)?
                }
                (Op::Concat, _) => {
                    let gh = be.download(&g)?;
                    let n = node.shape.numel();
                    let mut off = 0;
                    for &k in &node.inputs {
                        let nk = self.net.node(k).shape.numel();
                        let part: Vec<T> = (0..p).flat_map(|pt| gh[pt * n + off..pt * n + off + nk].to_vec()).collect();
                        acc(&mut grads, k, be.upload(&part)?)?;
                        off += nk;
                    }
                }
                // Pooling: no gradient (the attack still moves through other paths).
                _ => {}
            }
        }
        Ok(grads[0].take())
    }
}

/// The half-space of a disjunct furthest from holding at `y`, and by how
/// much: `max_k (c_k·y − d_k)` (at most 0 inside the region).
fn worst_halfspace(sp: &SubProblem, disjunct: usize, y: &[f64]) -> Option<(usize, f64)> {
    sp.unsafe_region
        .get(disjunct)?
        .iter()
        .enumerate()
        .map(|(k, h)| (k, h.c.iter().zip(y).map(|(c, y)| c * y).sum::<f64>() - h.d))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// The network's outputs at `p` points (`xs`: `p × n_in`), inferred on
    /// the backend in `T` with sums in any order (not for verdicts).
    pub fn infer_outputs(&self, xs: &[f64], p: usize) -> BResult<Vec<f64>> {
        let x = self.upload_points(xs, p)?;
        let v = self.infer_all(&x, p, &self.scale_tables()?)?;
        Ok(self.backend.download(self.value(&v, &x, self.net.output()))?.iter().map(|t| t.to_f64_exact()).collect())
    }

    /// The gradient of `Σ seed·y` with respect to the input at each of `p`
    /// points (`seeds`: `p × n_out`), on the backend; zeros where it does
    /// not reach the input.
    pub fn input_gradients(&self, xs: &[f64], seeds: &[f64], p: usize) -> BResult<Vec<f64>> {
        let x = self.upload_points(xs, p)?;
        let tables = self.scale_tables()?;
        let v = self.infer_all(&x, p, &tables)?;
        let s: Vec<T> = seeds.iter().map(|&c| T::from_f64_nearest(c)).collect();
        if s.len() != p * self.net.output_shape().numel() {
            return Err(crate::BackendError::Failure(format!("input_gradients: {} seeds for {p} points", s.len())));
        }
        Ok(match self.gradient(&v, &x, p, &tables, self.backend.upload(&s)?)? {
            Some(g) => self.backend.download(&g)?.iter().map(|t| t.to_f64_exact()).collect(),
            None => vec![0.0; xs.len()],
        })
    }

    fn upload_points(&self, xs: &[f64], p: usize) -> BResult<B::Buf> {
        if xs.len() != p * self.net.input_shape().numel() {
            return Err(crate::BackendError::Failure(format!("{} input values for {p} points", xs.len())));
        }
        self.backend.upload(&xs.iter().map(|&v| T::from_f64_nearest(v)).collect::<Vec<T>>())
    }
}
