//! Falsification on the backend: PGD with sign steps, batched. Every
//! attack run (a sub-problem's box and one disjunct of its unsafe region)
//! is one point of the batch, so many properties share the inference and
//! gradient GEMMs. The search runs in `T` with sums in any order; a point
//! is reported only after plain float32 inference confirms it
//! ([`crate::attack::check::check_f32`]).

use crate::attack::check::{Schedule, check_f32, hinge_seed, region_excess, worst_halfspace};
use crate::base::analyzer::{Analyzer, Params};
use crate::base::backend::{BResult, Backend, Pointwise};
use crate::base::budget::Budget;
use crate::base::ir::{NodeId, Op};
use crate::base::property::{Counterexample, SubProblem};
use crate::base::recorded::StepGraph;
use polycert_interval::{Fp, fp};
use rayon::prelude::*;

/// How far short of the unsafe region (a share of the outputs' largest
/// magnitude) a point is checked in float32: the backend's sums differ from
/// float32 inference's by far less. At the last step, ten times as far.
const SHORT: f64 = 1e-4;
const LAST_SHORT: f64 = 1e-3;

/// One attack run: a sub-problem, one disjunct of its unsafe region, and
/// the group (property) a hit decides.
#[derive(Clone, Copy)]
pub struct Target<'p> {
    pub sp: &'p SubProblem,
    pub disjunct: usize,
    pub group: usize,
    pub start: Start<'p>,
}

/// Where an attack run starts.
#[derive(Clone, Copy, Debug)]
pub enum Start<'p> {
    /// The box centre.
    Centre,
    /// A point drawn uniformly from the box, seeded by the number: a random restart.
    Random(u32),
    /// A given point (clamped to the box): e.g. the input corner that
    /// minimises a search leaf's relaxed bound.
    At(&'p [f64]),
}

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
        budget: Budget,
    ) -> BResult<Vec<Option<Counterexample>>> {
        self.attack_scheduled(targets, groups, Schedule::Coarse(steps), budget)
    }

    /// [`Self::attack_batch`] with a given step schedule.
    pub(crate) fn attack_scheduled(
        &self,
        targets: &[Target<'_>],
        groups: usize,
        schedule: Schedule,
        budget: Budget,
    ) -> BResult<Vec<Option<Counterexample>>> {
        let steps = schedule.steps();
        let mut hits: Vec<Option<Counterexample>> = vec![None; groups];
        if steps == 0 {
            return Ok(hits);
        }
        let per_point: usize = self.net.nodes().iter().map(|n| n.shape.numel()).sum::<usize>() * 3 * size_of::<T>();
        let chunk = (self.memory_budget() / 4 / per_point.max(1)).clamp(1, self.opts.attack.max_points);
        let mut at = 0;
        while at < targets.len() {
            let todo: Vec<Target<'_>> =
                targets[at..].iter().filter(|t| hits[t.group].is_none()).take(chunk).copied().collect();
            at = targets.len().min(at + chunk);
            if !todo.is_empty() {
                self.attack_chunk(&todo, schedule, budget, &mut hits)?;
            }
        }
        Ok(hits)
    }

    fn attack_chunk(
        &self,
        pts: &[Target<'_>],
        schedule: Schedule,
        budget: Budget,
        hits: &mut [Option<Counterexample>],
    ) -> BResult<()> {
        let be = self.backend;
        let setup = crate::base::profile::span("pgd.setup");
        let (n_in, p) = (self.net.input_shape().numel(), pts.len());
        let (mut lo, mut hi, mut x0) = (Vec::with_capacity(p * n_in), Vec::with_capacity(p * n_in), Vec::new());
        for t in pts {
            let b = &t.sp.input;
            let seed = if let Start::Random(r) = t.start { r } else { 0 };
            // `--seed` 0 keeps the draws of the earlier fixed seed.
            let user = self.opts.attack.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let mut rng = crate::base::rng::SplitMix(0x5EED_0000 ^ u64::from(seed) << 32 ^ t.disjunct as u64 ^ user);
            for (i, ((&l, &h), c)) in b.lo.iter().zip(&b.hi).zip(b.centre()).enumerate() {
                // Inside the box in `T` where it can be; the f32 check nudges.
                let (lt, ht) = (fp::from_f64_up::<T>(l), fp::from_f64_down::<T>(h));
                let (lt, ht) = if lt <= ht { (lt, ht) } else { (T::from_f64_nearest(l), T::from_f64_nearest(l)) };
                lo.push(lt);
                hi.push(ht);
                let start = match t.start {
                    Start::Centre => c,
                    Start::Random(_) => l + (h - l) * rng.unit(),
                    Start::At(x) => x.get(i).copied().unwrap_or(c),
                };
                x0.push(T::from_f64_nearest(start).max(lt).min(ht));
            }
        }
        let steps = schedule.steps();
        let alphas: Vec<T> = schedule.sizes(self.opts.attack.fine_end).into_iter().map(T::from_f64_nearest).collect();
        let mut active: Vec<bool> = pts.iter().map(|t| hits[t.group].is_none()).collect();
        drop(setup);
        if steps > 2
            && self.recordable(pts)
            && self.attack_replayed(pts, steps, budget, (hits, &mut active), [&lo, &hi, &x0], &alphas)?
        {
            return Ok(());
        }
        let (lo_d, hi_d) = (be.upload(&lo)?, be.upload(&hi)?);
        let mut x = be.upload(&x0)?;
        let tables = self.scale_tables()?;
        let (alphas_d, mut alpha_d) = (be.upload(&alphas)?, be.upload(&alphas[..1])?);
        for s in 0..=steps {
            let v = {
                let _p = crate::base::profile::span("pgd.infer");
                self.infer_all(&x, p, &tables)?
            };
            let y = be.download(self.value(&v, &x, self.net.output()))?;
            let seeds = self.check_step(pts, (s, steps), &y, &mut active, hits, || be.download(&x))?;
            let late = budget.expired();
            if s == steps || late || !active.iter().any(|&a| a) {
                break;
            }
            let _p = crate::base::profile::span("pgd.gradient");
            let Some(g) = self.gradient(&v, &x, p, &tables, be.upload(&seeds)?)? else {
                break;
            };
            be.copy_range(&mut alpha_d, 0, &alphas_d, s, 1)?;
            x = be.pointwise(Pointwise::SignStep { x: &x, g: &g, lo: &lo_d, hi: &hi_d, alpha: &alpha_d })?;
        }
        Ok(())
    }

    /// The attack on the recorded step (recorded on first use): `false`
    /// where the backend records no graphs (nothing was run).
    fn attack_replayed(
        &self,
        pts: &[Target<'_>],
        steps: usize,
        budget: Budget,
        (hits, active): (&mut [Option<Counterexample>], &mut [bool]),
        [lo, hi, x0]: [&[T]; 3],
        alphas: &[T],
    ) -> BResult<bool> {
        let be = self.backend;
        let p = pts.len();
        let mut rec = self.step_graph.borrow_mut();
        if rec.unavailable {
            return Ok(false);
        }
        let at = match rec.graphs.iter().position(|g| g.points == p) {
            Some(i) => i,
            None => {
                let _p = crate::base::profile::span("pgd.capture");
                let Some(g) = self.record_step(p)? else {
                    rec.unavailable = true;
                    return Ok(false);
                };
                if rec.graphs.len() >= self.opts.attack.kept_graphs {
                    rec.graphs.remove(0);
                }
                rec.graphs.push(g);
                rec.graphs.len() - 1
            }
        };
        let gr = &mut rec.graphs[at];
        // The seeds are fixed: each disjunct is one half-space.
        let n_out = self.net.output_shape().numel();
        let mut seeds = vec![T::zero(); p * n_out];
        for (i, t) in pts.iter().enumerate() {
            for (o, &c) in t.sp.unsafe_region[t.disjunct][0].c.iter().enumerate() {
                seeds[i * n_out + o] = T::from_f64_nearest(c);
            }
        }
        for (dst, v) in [(&mut gr.x, x0), (&mut gr.lo, lo), (&mut gr.hi, hi), (&mut gr.seeds, &seeds[..])] {
            be.copy_range(dst, 0, &be.upload(v)?, 0, v.len())?;
        }
        let alphas_d = be.upload(alphas)?;
        // Replay s: `y` at x_s (in `x_prev`), `x` moved to x_{s+1}; the
        // last replay's move is not used.
        for s in 0..=steps {
            be.copy_range(&mut gr.alpha, 0, &alphas_d, s.min(steps - 1), 1)?;
            {
                let _p = crate::base::profile::span("pgd.replay");
                be.replay(&gr.graph)?;
            }
            let y = {
                let _p = crate::base::profile::span("pgd.outputs");
                be.download(&gr.y)?
            };
            let x_prev = &gr.x_prev;
            self.check_step(pts, (s, steps), &y, active, hits, || be.download(x_prev))?;
            let late = budget.expired();
            if late || !active.iter().any(|&a| a) {
                break;
            }
        }
        // A large count (from a batch of many properties) is dropped: its
        // buffers are large and the next batch's count differs.
        if p > self.opts.attack.kept_points {
            rec.graphs.remove(at);
        }
        Ok(true)
    }

    /// After inference at step `s` of `steps` (outputs `y`, points from
    /// `xs`): checks in float32 the points a little short of the unsafe
    /// region (any of its disjuncts, not only the one aimed at), further
    /// short at the last step, recording hits; returns the seeds of the
    /// next gradient (each active point's worst half-space).
    #[allow(clippy::too_many_arguments)]
    fn check_step(
        &self,
        pts: &[Target<'_>],
        (s, steps): (usize, usize),
        y: &[T],
        active: &mut [bool],
        hits: &mut [Option<Counterexample>],
        xs: impl FnOnce() -> BResult<Vec<T>>,
    ) -> BResult<Vec<T>> {
        let (n_in, n_out, p) = (self.net.input_shape().numel(), self.net.output_shape().numel(), pts.len());
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
            // The search's arithmetic differs from float32 inference.
            let scale = yp.iter().fold(1.0f64, |a, v| a.max(v.abs()));
            let short = if s == steps { LAST_SHORT } else { SHORT };
            if m.min(region_excess(t.sp, &yp)) <= short * scale {
                candidates.push(i);
            }
            let seed = hinge_seed(&t.sp.unsafe_region[t.disjunct], &yp, k, self.opts.attack.hinge * scale);
            for (o, &c) in seed.iter().enumerate() {
                seeds[i * n_out + o] = T::from_f64_nearest(c);
            }
        }
        if candidates.is_empty() {
            return Ok(seeds);
        }
        let _p = crate::base::profile::span("pgd.check");
        let xs = xs()?;
        let f32_span = crate::base::profile::span("pgd.check.f32");
        let found: Vec<(usize, Counterexample)> = candidates
            .par_iter()
            .filter_map(|&i| {
                let box_ = &pts[i].sp.input;
                let xp: Vec<f64> = xs[i * n_in..(i + 1) * n_in].iter().map(|v| v.to_f64_exact()).collect();
                check_f32(self.net, pts[i].sp, &box_.to_f32_inside(&xp)).map(|c| (i, c))
            })
            .collect();
        drop(f32_span);
        let _c = crate::base::profile::span("pgd.check.confirm");
        // All confirmed at once; a group takes its first confirmed point.
        let points: Vec<_> = found.iter().map(|(i, c)| (pts[*i].sp, &c.input[..])).collect();
        let ok = self.confirm_all(&points);
        for ((i, cex), ok) in found.into_iter().zip(ok) {
            let g = pts[i].group;
            if ok && hits[g].is_none() {
                hits[g] = Some(cex);
            }
        }
        for (i, t) in pts.iter().enumerate() {
            if hits[t.group].is_some() && active[i] {
                active[i] = false;
                seeds[i * n_out..(i + 1) * n_out].iter_mut().for_each(|v| *v = T::zero());
            }
        }
        Ok(seeds)
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
                        | Op::Conv2d(_)
                        | Op::Relu
                        | Op::Sigmoid
                        | Op::Add
                        | Op::Reshape
                        | Op::ChannelAffine { .. }
                )
            })
    }

    /// Records the step for `p` points on buffers of its own (`None`
    /// when the backend records no graphs). One step runs first, so that
    /// the backend's caches hold what the recording reads.
    fn record_step(&self, p: usize) -> BResult<Option<StepGraph<B::Graph, B::Buf>>> {
        let be = self.backend;
        let (n_in, n_out) = (self.net.input_shape().numel(), self.net.output_shape().numel());
        let zeros = |n: usize| be.upload(&vec![T::zero(); n]);
        let (mut x, lo, hi, alpha, seeds) =
            (zeros(p * n_in)?, zeros(p * n_in)?, zeros(p * n_in)?, zeros(1)?, zeros(p * n_out)?);
        let (mut y, mut x_prev) = (zeros(p * n_out)?, zeros(p * n_in)?);
        let tables = self.scale_tables()?;
        let v = self.infer_all(&x, p, &tables)?;
        if self.gradient(&v, &x, p, &tables, be.pointwise(Pointwise::Copy(&seeds))?)?.is_none() {
            return Ok(None);
        }
        drop(v);
        let graph = be.capture(&mut || {
            let v = self.infer_all(&x, p, &tables)?;
            be.copy_range(&mut y, 0, self.value(&v, &x, self.net.output()), 0, p * n_out)?;
            be.copy_range(&mut x_prev, 0, &x, 0, p * n_in)?;
            let seed = be.pointwise(Pointwise::Copy(&seeds))?;
            let g = self
                .gradient(&v, &x, p, &tables, seed)?
                .ok_or_else(|| crate::base::backend::BackendError::Failure("no input gradient".into()))?;
            let next = be.pointwise(Pointwise::SignStep { x: &x, g: &g, lo: &lo, hi: &hi, alpha: &alpha })?;
            be.copy_range(&mut x, 0, &next, 0, p * n_in)
        })?;
        Ok(graph.map(|graph| StepGraph { points: p, graph, x, lo, hi, alpha, seeds, y, x_prev, _tables: tables }))
    }

    /// Per-neuron `(m, c, 0)` tables of the ChannelAffine nodes (midpoints).
    pub(crate) fn scale_tables(&self) -> BResult<Vec<Option<[B::Buf; 3]>>> {
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
            out.extend(crate::base::eval::eval_node(self.net, id, &slices).into_iter().map(T::from_f64_nearest));
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
                (Op::Elementwise(f), _) => acc(&mut grads, x0, self.elementwise_grad(*f, &g, self.value(v, x, x0))?)?,
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
                (Op::MaxPool2d(pl) | Op::AvgPool2d(pl), _) => {
                    let max = matches!(node.op, Op::MaxPool2d(_));
                    acc(
                        &mut grads,
                        x0,
                        self.pool_grad_on_host((pl, max), (shape_in, node.shape), &g, self.value(v, x, x0), p)?,
                    )?
                }
                _ => {}
            }
        }
        Ok(grads[0].take())
    }

    /// An elementwise function's input gradient, on the host: `g` times the
    /// derivative at the input values `xv` (for a step, 1 on the value's
    /// piece, else 0).
    fn elementwise_grad(&self, f: crate::base::elementwise::Elementwise, g: &B::Buf, xv: &B::Buf) -> BResult<B::Buf> {
        let (gh, xh) = (self.backend.download(g)?, self.backend.download(xv)?);
        let gx: Vec<T> = gh
            .iter()
            .zip(&xh)
            .map(|(&g, &x)| match f.slope(x.to_f64_exact()) {
                0.0 => T::zero(),
                1.0 => g,
                // A derivative past T's range steers nothing (0, not ±inf).
                d => Some(T::from_f64_nearest(d)).filter(|t| t.is_finite()).map_or(T::zero(), |t| g * t),
            })
            .collect();
        self.backend.upload(&gx)
    }

    /// Pooling's input gradient (`crate::base::eval::pool_grad`) on the
    /// host, point by point: `g` the output's, `xv` the input's values.
    fn pool_grad_on_host(
        &self,
        (pool, max): (&crate::base::ir::Pool, bool),
        (si, so): (crate::base::ir::Shape, crate::base::ir::Shape),
        g: &B::Buf,
        xv: &B::Buf,
        p: usize,
    ) -> BResult<B::Buf> {
        let to_f64 = |b: &B::Buf| -> BResult<Vec<f64>> {
            Ok(self.backend.download(b)?.iter().map(|t| t.to_f64_exact()).collect())
        };
        let (g, xv) = (to_f64(g)?, to_f64(xv)?);
        let (ni, no) = (si.numel(), so.numel());
        let mut gx = vec![0.0; p * ni];
        for pt in 0..p {
            let (x, go) = (&xv[pt * ni..(pt + 1) * ni], &g[pt * no..(pt + 1) * no]);
            crate::base::eval::pool_grad(x, go, &mut gx[pt * ni..(pt + 1) * ni], (si, so), pool, max);
        }
        self.backend.upload(&gx.into_iter().map(T::from_f64_nearest).collect::<Vec<T>>())
    }
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
            return Err(crate::base::backend::BackendError::Failure(format!(
                "input_gradients: {} seeds for {p} points",
                s.len()
            )));
        }
        Ok(match self.gradient(&v, &x, p, &tables, self.backend.upload(&s)?)? {
            Some(g) => self.backend.download(&g)?.iter().map(|t| t.to_f64_exact()).collect(),
            None => vec![0.0; xs.len()],
        })
    }

    fn upload_points(&self, xs: &[f64], p: usize) -> BResult<B::Buf> {
        if xs.len() != p * self.net.input_shape().numel() {
            return Err(crate::base::backend::BackendError::Failure(format!(
                "{} input values for {p} points",
                xs.len()
            )));
        }
        self.backend.upload(&xs.iter().map(|&v| T::from_f64_nearest(v)).collect::<Vec<T>>())
    }
}
