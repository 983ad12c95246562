//! The forward pass's step of each op: a node's interval bounds from its
//! inputs' and what backsubstitution through it needs (DeepPoly's
//! relaxations, the layers' constant intervals).

use crate::base::analyzer::{AnalysisError, Analyzer};
use crate::base::backend::Backend;
use crate::base::ir::{Conv2d, NodeId, Op, Pool, Shape};
use crate::base::relax::relu_relax;
use crate::base::scurve::{SIGMOID_TOLERANCE, sigmoid_relax};
use crate::gpupoly::forward::{Bounds, NodeResult, RunState, Step, map_n, par_columns};
use polycert_interval::{Fp, Interval, fp};

/// The inference's rounding bound for `ops` operations on values up to a
/// magnitude, or `+inf` when they could overflow the network's format; its
/// constants computed once per layer.
#[derive(Clone, Copy)]
struct RoundingOrOverflow {
    err: polycert_interval::ErrorBound,
    limit: f64,
}

impl RoundingOrOverflow {
    fn new(model: polycert_interval::FloatModel, ops: usize) -> Self {
        Self { err: model.error_bound(ops), limit: model.overflow_threshold() }
    }

    fn of(self, mag: f64) -> f64 {
        let e = self.err.of(mag);
        if fp::add_up(mag, e) < self.limit { e } else { f64::INFINITY }
    }
}

/// Bounds held on the host only.
fn host<T, Buf>(lo: Vec<T>, hi: Vec<T>) -> Bounds<T, Buf> {
    Bounds { lo, hi, dev: None }
}

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// A dense or conv node (weights `w`, bias `b`) on the device.
    pub(super) fn affine_step(
        &self,
        st: &mut RunState<T, B::Buf>,
        id: NodeId,
        (w, b): (&B::Buf, &B::Buf),
    ) -> Result<NodeResult<T, B::Buf>, AnalysisError> {
        let node = self.net.node(id);
        let (be, mut model, batch, x0) = (self.backend, self.opts.passes.network_float, st.batch, node.inputs[0]);
        if self.net.is_exact(id) {
            model = polycert_interval::FloatModel::EXACT;
        }
        let in_shape = self.net.node(x0).shape;
        let (xl, xh) = self.bounds_dev(st, x0)?;
        let f = match &node.op {
            Op::Dense { .. } => be.forward_dense(w, b, in_shape.numel(), (xl, xh), batch, model)?,
            Op::Conv2d(c) => be.forward_conv(c, w, b, in_shape, (xl, xh), batch, model)?,
            _ => unreachable!(),
        };
        let (lo, hi) = (be.download(&f.lo)?, be.download(&f.hi)?);
        Ok((Bounds { lo, hi, dev: Some((f.lo, f.hi)) }, Step::Bias { lo: f.bias_lo, hi: f.bias_hi }))
    }

    /// A ReLU: its input's bounds clamped at 0, and DeepPoly's relaxation.
    pub(super) fn relu_node(&self, x: &Bounds<T, B::Buf>) -> Result<NodeResult<T, B::Buf>, AnalysisError> {
        let lo = map_n(x.lo.len(), x.lo.len(), |i| x.lo[i].max(T::zero()));
        let hi = map_n(x.hi.len(), x.hi.len(), |i| x.hi[i].max(T::zero()));
        Ok((host(lo, hi), self.relu_step(x)?))
    }

    /// DeepPoly's ReLU relaxation over `x`, uploaded.
    fn relu_step(&self, x: &Bounds<T, B::Buf>) -> Result<Step<B::Buf>, AnalysisError> {
        let lower = self.opts.passes.relu_lower;
        let [a, b, c] = par_columns(x.lo.len(), |i| {
            let r = relu_relax(x.lo[i], x.hi[i], lower);
            [r.lam_lo, r.lam_up, r.mu_up]
        });
        let be = self.backend;
        Ok(Step::Relu { lam_lo: be.upload(&a)?, lam_up: be.upload(&b)?, mu_up: be.upload(&c)?, mu_lo: None })
    }

    /// σ's bounds and relaxation over its input's bounds.
    pub(super) fn sigmoid_step(&self, x: &Bounds<T, B::Buf>) -> Result<NodeResult<T, B::Buf>, AnalysisError> {
        let n = x.lo.len();
        let (mut ll, mut ml, mut lu, mut mu) =
            (vec![T::zero(); n], vec![T::zero(); n], vec![T::zero(); n], vec![T::zero(); n]);
        let (mut lo, mut hi) = (vec![T::zero(); n], vec![T::zero(); n]);
        for i in 0..n {
            let r = sigmoid_relax(x.lo[i], x.hi[i], SIGMOID_TOLERANCE);
            (ll[i], ml[i], lu[i], mu[i], lo[i], hi[i]) = (r.lam_lo, r.mu_lo, r.lam_up, r.mu_up, r.lo, r.hi);
        }
        self.host_lines([ll, ml, lu, mu], (lo, hi))
    }

    /// Per-neuron lines `lam_lo·x + mu_lo ≤ y ≤ lam_up·x + mu_up` built on
    /// the host, uploaded as a step, with the output's bounds.
    fn host_lines(
        &self,
        [ll, ml, lu, mu]: [Vec<T>; 4],
        (lo, hi): (Vec<T>, Vec<T>),
    ) -> Result<NodeResult<T, B::Buf>, AnalysisError> {
        let be = self.backend;
        let step = Step::Relu {
            lam_lo: be.upload(&ll)?,
            lam_up: be.upload(&lu)?,
            mu_up: be.upload(&mu)?,
            mu_lo: Some(be.upload(&ml)?),
        };
        Ok((Bounds { lo, hi, dev: None }, step))
    }

    /// An elementwise function's bounds and relaxation (its lines' slopes
    /// are float32 values, held exactly; its constants rounded outward).
    pub(super) fn elementwise_step(
        &self,
        id: NodeId,
        f: crate::base::elementwise::Elementwise,
        x: &Bounds<T, B::Buf>,
    ) -> Result<NodeResult<T, B::Buf>, AnalysisError> {
        let n = x.lo.len();
        let mut cols: [Vec<T>; 6] = std::array::from_fn(|_| Vec::with_capacity(n));
        for i in 0..n {
            let (l, u) = (x.lo[i].to_f64_exact(), x.hi[i].to_f64_exact());
            let Some(r) = f.relax((l, u)) else {
                let layer = self.net.node(id).name.clone();
                let what = match f {
                    crate::base::elementwise::Elementwise::Power(p) => p.to_string(),
                    crate::base::elementwise::Elementwise::Square => {
                        "x² (a product of two variables the property takes)".into()
                    }
                    _ => format!("{f:?}"),
                };
                let msg =
                    format!("{what} may be undefined or past float32's range for inputs in [{l:e}, {u:e}]: no bound");
                return Err(AnalysisError::Undefined { layer, msg });
            };
            cols[0].push(T::from_f64_nearest(r.lam_lo));
            cols[1].push(fp::from_f64_down(r.mu_lo));
            cols[2].push(T::from_f64_nearest(r.lam_up));
            cols[3].push(fp::from_f64_up(r.mu_up));
            cols[4].push(fp::from_f64_down(r.lo));
            cols[5].push(fp::from_f64_up(r.hi));
        }
        let [ll, ml, lu, mu, lo, hi] = cols;
        self.host_lines([ll, ml, lu, mu], (lo, hi))
    }

    /// A max pooling `p`: per output, the selected input's lines.
    pub(super) fn maxpool_step(
        &self,
        st: &RunState<T, B::Buf>,
        id: NodeId,
        p: &Pool,
    ) -> Result<NodeResult<T, B::Buf>, AnalysisError> {
        let node = self.net.node(id);
        let (be, batch, x0) = (self.backend, st.batch, node.inputs[0]);
        let si = self.net.node(x0).shape;
        let x = &st.bounds[x0];
        let (ni, no) = (si.numel(), node.shape.numel());
        let mut r = PoolRelax::with_capacity(batch * no);
        for s in 0..batch {
            let slot = s * ni..(s + 1) * ni;
            maxpool_relax(&x.lo[slot.clone()], &x.hi[slot], si, node.shape, p, &mut r);
        }
        let step = Step::MaxPool {
            sel_lo: be.upload(&r.sel_lo)?,
            sel_up: be.upload(&r.sel_up)?,
            lo: be.upload(&r.lo)?,
            up: be.upload(&r.hi)?,
        };
        Ok((host(r.lo, r.hi), step))
    }

    /// A concatenation's bounds: no step.
    pub(super) fn concat_bounds(&self, st: &RunState<T, B::Buf>, id: NodeId) -> Bounds<T, B::Buf> {
        let node = self.net.node(id);
        let batch = st.batch;
        // Per slot, the inputs' values one after the other.
        let (mut lo, mut hi) = (Vec::new(), Vec::new());
        for s in 0..batch {
            for &i in &node.inputs {
                let n = self.net.node(i).shape.numel();
                lo.extend_from_slice(&st.bounds[i].lo[s * n..(s + 1) * n]);
                hi.extend_from_slice(&st.bounds[i].hi[s * n..(s + 1) * n]);
            }
        }
        host(lo, hi)
    }

    /// An average pooling `p`: the sum (a conv with unit weights) on the
    /// device, then the division and its rounding on the host.
    pub(super) fn avgpool_step(
        &self,
        st: &mut RunState<T, B::Buf>,
        id: NodeId,
        p: &Pool,
        (conv, w, b): (&Conv2d, &B::Buf, &B::Buf),
    ) -> Result<NodeResult<T, B::Buf>, AnalysisError> {
        let node = self.net.node(id);
        let (be, model, batch, x0) = (self.backend, self.opts.passes.network_float, st.batch, node.inputs[0]);
        let in_shape = self.net.node(x0).shape;
        let (xl, xh) = self.bounds_dev(st, x0)?;
        let f = be.forward_conv(conv, w, b, in_shape, (xl, xh), batch, model)?;
        let (slo, shi) = (be.download(&f.lo)?, be.download(&f.hi)?);
        // y = fl(s / k): the exact quotient, then one rounding.
        let k = (p.kernel.0 * p.kernel.1) as f64;
        let inv = Interval::new_unchecked(fp::div_down(1.0, k), fp::div_up(1.0, k));
        let n = slo.len();
        let (mut lo, mut hi, mut el, mut eh) =
            (vec![T::zero(); n], vec![T::zero(); n], vec![T::zero(); n], vec![T::zero(); n]);
        let bound = RoundingOrOverflow::new(model, 1);
        for i in 0..n {
            let s = Interval::new_unchecked(slo[i].to_f64_exact(), shi[i].to_f64_exact());
            let y = s * inv;
            let e = bound.of(y.mag());
            lo[i] = fp::from_f64_down(fp::sub_down(y.lo(), e));
            hi[i] = fp::from_f64_up(fp::add_up(y.hi(), e));
            eh[i] = fp::from_f64_up(e);
            el[i] = -eh[i];
        }
        let (ml, mh) = (vec![fp::from_f64_down::<T>(inv.lo()); n], vec![fp::from_f64_up::<T>(inv.hi()); n]);
        let sabs: Vec<T> = slo.iter().zip(&shi).map(|(l, h)| l.abs().max(h.abs())).collect();
        let step = Step::AvgPool {
            sum_abs: be.upload(&sabs)?,
            sum_lo: f.bias_lo,
            sum_hi: f.bias_hi,
            m_lo: be.upload(&ml)?,
            m_hi: be.upload(&mh)?,
            c_lo: be.upload(&el)?,
            c_hi: be.upload(&eh)?,
        };
        Ok((host(lo, hi), step))
    }

    /// A sum of two nodes, with its rounding.
    pub(super) fn add_step(
        &self,
        st: &RunState<T, B::Buf>,
        id: NodeId,
    ) -> Result<NodeResult<T, B::Buf>, AnalysisError> {
        let node = self.net.node(id);
        let (be, model, x0) = (self.backend, self.opts.passes.network_float, node.inputs[0]);
        let (a, b) = (&st.bounds[x0], &st.bounds[node.inputs[1]]);
        let n = a.lo.len();
        let bound = RoundingOrOverflow::new(model, 1);
        let [lo, hi, elo, ehi] = par_columns(n, |i| {
            let l = fp::add_down(a.lo[i].to_f64_exact(), b.lo[i].to_f64_exact());
            let h = fp::add_up(a.hi[i].to_f64_exact(), b.hi[i].to_f64_exact());
            // One rounding: |fl(a+b) − (a+b)| ≤ u·|a+b| (+ nothing: sums of floats do not underflow inexactly).
            let e = bound.of(l.abs().max(h.abs()));
            let eh: T = fp::from_f64_up(e);
            [fp::from_f64_down(fp::sub_down(l, e)), fp::from_f64_up(fp::add_up(h, e)), -eh, eh]
        });
        let ones = vec![T::one(); n];
        let step = Step::Diag {
            m_lo: be.upload(&ones)?,
            m_hi: be.upload(&ones)?,
            c_lo: be.upload(&elo)?,
            c_hi: be.upload(&ehi)?,
        };
        Ok((host(lo, hi), step))
    }

    /// A per-channel `x·mul + add`, with `float_ops` roundings.
    pub(super) fn channel_affine_step(
        &self,
        st: &RunState<T, B::Buf>,
        id: NodeId,
        (mul, add, float_ops): (&[Interval<f64>], &[Interval<f64>], &u32),
    ) -> Result<NodeResult<T, B::Buf>, AnalysisError> {
        let node = self.net.node(id);
        let (be, model, x0) = (self.backend, self.opts.passes.network_float, node.inputs[0]);
        let x = &st.bounds[x0];
        let hw = node.shape.h * node.shape.w;
        let per = node.shape.numel().max(1);
        let n = x.lo.len();
        let bound = RoundingOrOverflow::new(model, *float_ops as usize);
        let [lo, hi, ml, mh, cl, ch] = par_columns(n, |i| {
            let (m, c) = (mul[(i % per) / hw], add[(i % per) / hw]);
            let xi = Interval::new_unchecked(x.lo[i].to_f64_exact(), x.hi[i].to_f64_exact());
            let y = xi.mul(m) + c;
            let mag = fp::add_up(fp::mul_up(xi.mag(), m.mag()), c.mag());
            let e = bound.of(mag);
            [
                fp::from_f64_down(fp::sub_down(y.lo(), e)),
                fp::from_f64_up(fp::add_up(y.hi(), e)),
                fp::from_f64_down(m.lo()),
                fp::from_f64_up(m.hi()),
                fp::from_f64_down(fp::sub_down(c.lo(), e)),
                fp::from_f64_up(fp::add_up(c.hi(), e)),
            ]
        });
        let step =
            Step::Diag { m_lo: be.upload(&ml)?, m_hi: be.upload(&mh)?, c_lo: be.upload(&cl)?, c_hi: be.upload(&ch)? };
        Ok((host(lo, hi), step))
    }
}

/// MaxPool relaxation of every output neuron, from its inputs' bounds.
struct PoolRelax<T> {
    sel_lo: Vec<T>,
    sel_up: Vec<T>,
    lo: Vec<T>,
    hi: Vec<T>,
}

impl<T> PoolRelax<T> {
    fn with_capacity(n: usize) -> Self {
        Self {
            sel_lo: Vec::with_capacity(n),
            sel_up: Vec::with_capacity(n),
            lo: Vec::with_capacity(n),
            hi: Vec::with_capacity(n),
        }
    }
}

/// Per output: the input with the largest lower bound (`y ≥ x_j`), and it
/// again as the upper line when its lower bound dominates every other
/// input's upper bound (then `y = x_j`), else −1 (`y ≤ max u_i`). Max is
/// exact in floating point, so no rounding enters. Appends one box's
/// outputs to `r`; selected inputs are neuron indices within the box.
fn maxpool_relax<T: Fp>(xl: &[T], xh: &[T], si: Shape, so: Shape, p: &crate::base::ir::Pool, r: &mut PoolRelax<T>) {
    let n = so.numel();
    for o in 0..n {
        let (c, oy, ox) = (o / (so.h * so.w), (o / so.w) % so.h, o % so.w);
        let mut best: Option<usize> = None;
        let mut hi = T::neg_infinity();
        let mut taps = Vec::with_capacity(p.kernel.0 * p.kernel.1);
        for ky in 0..p.kernel.0 {
            for kx in 0..p.kernel.1 {
                let iy = (oy * p.stride.0 + ky) as isize - p.pad.0 as isize;
                let ix = (ox * p.stride.1 + kx) as isize - p.pad.1 as isize;
                if iy < 0 || ix < 0 || iy >= si.h as isize || ix >= si.w as isize {
                    continue;
                }
                let i = (c * si.h + iy as usize) * si.w + ix as usize;
                taps.push(i);
                hi = hi.max(xh[i]);
                if best.is_none_or(|b| xl[i] > xl[b]) {
                    best = Some(i);
                }
            }
        }
        let j = best.expect("every pooling window overlaps its input");
        let exact = taps.iter().all(|&i| i == j || xh[i] <= xl[j]);
        r.sel_lo.push(T::from_f64_nearest(j as f64));
        r.sel_up.push(if exact { T::from_f64_nearest(j as f64) } else { -T::one() });
        r.lo.push(xl[j]);
        r.hi.push(if exact { xh[j] } else { hi });
    }
}
