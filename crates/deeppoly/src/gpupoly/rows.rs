//! The two arithmetics of backsubstitution behind one interface, so that
//! the driver (`backsub.rs`: pending set, early termination, compaction,
//! residual merge) is written once: interval coefficients (GPUPoly) and
//! point coefficients with the rounding folded into the constant.

use crate::base::analyzer::{AnalysisError, Analyzer, Params};
use crate::base::backend::{Backend, ConvParams, Magnitudes, PoolParams, ReluParams};
use crate::base::geom::Geom;
use crate::base::ir::{NodeId, Op};
use crate::gpupoly::forward::{RunState, Step};
use polycert_interval::{Fp, fp};

type R<X> = Result<X, AnalysisError>;
/// A step's result: the matrix over the next node and per-row constant increments.
pub(crate) type StepOut<M, C> = R<(M, C)>;

/// One arithmetic for expression matrices. Node `k` is the node a step
/// goes through; its inputs' bounds pay for the point arithmetic's rounding.
pub(crate) trait RowArith<B: Backend<T>, T: Fp> {
    type M: Send + Sync;
    /// Per-row constants, wherever the arithmetic keeps them.
    type C: Send + Sync;
    /// Bytes per coefficient.
    const PLANES: usize;
    /// A matrix over `node` from host planes (`lo ≤ coefficient ≤ hi`), and
    /// the per-row constant increment that choosing it costs.
    fn from_host(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        node: NodeId,
        g: &Geom,
        lo: &[T],
        hi: &[T],
    ) -> R<(Self::M, Vec<f64>)>;
    /// A matrix of exact unit rows (`val[r]` at column `col[r]`).
    fn from_unit(an: &Analyzer<B, T>, g: &Geom, col: &[u32], val: &[T]) -> R<(Self::M, Vec<f64>)>;
    fn c_from_host(be: &B, v: &[f64]) -> R<Self::C>;
    /// A download of constants in flight.
    type F: Send;
    /// Starts copying the constants to the host.
    fn c_fetch(be: &B, c: &Self::C) -> R<Self::F>;
    /// Waits for a started download.
    fn c_fetched(be: &B, f: Self::F) -> R<Vec<f64>>;
    /// Whether a download overlaps the work queued after it.
    fn fetch_overlaps(be: &B) -> bool;
    /// `acc += inc`, rounded down.
    fn c_add(be: &B, acc: &mut Self::C, inc: &Self::C) -> R<()>;
    fn c_compact(be: &B, c: &Self::C, keep: &[u32]) -> R<Self::C>;
    fn zeros(be: &B, rows: usize, cols: usize) -> R<Self::M>;
    fn compact(be: &B, m: &Self::M, g: &Geom, keep: &[u32]) -> R<Self::M>;
    fn slice_cols(be: &B, m: &Self::M, start: usize, len: usize) -> R<Self::M>;
    /// `base +` the rows' lower bound over `node`'s bounds, rounded down.
    fn concretize_add(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        node: NodeId,
        m: &Self::M,
        g: &Geom,
        base: &Self::C,
    ) -> R<Self::C>;
    /// `dst += src` over `node`; returns the constant increments.
    #[allow(clippy::too_many_arguments)]
    fn add_into(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        node: NodeId,
        dst: &mut Self::M,
        dg: &Geom,
        src: &Self::M,
        sg: &Geom,
    ) -> R<Self::C>;
    /// The dense step; `g` is `m`'s (full) geometry.
    fn dense(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        k: NodeId,
        m: &Self::M,
        g: &Geom,
    ) -> StepOut<Self::M, Self::C>;
    fn conv(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        k: NodeId,
        m: &Self::M,
        g: &Geom,
        out: &Geom,
    ) -> StepOut<Self::M, Self::C>;
    fn relu(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        k: NodeId,
        m: &Self::M,
        g: &Geom,
    ) -> StepOut<Self::M, Self::C>;
    /// The per-neuron affine steps (Add, ChannelAffine).
    fn diag(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        k: NodeId,
        m: &Self::M,
        g: &Geom,
    ) -> StepOut<Self::M, Self::C>;
    fn avgpool(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        k: NodeId,
        m: &Self::M,
        g: &Geom,
        out: &Geom,
    ) -> StepOut<Self::M, Self::C>;
    fn maxpool(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        k: NodeId,
        m: &Self::M,
        g: &Geom,
        out: &Geom,
    ) -> StepOut<Self::M, Self::C>;
}

/// Elementwise sum rounded down.
pub(crate) fn sum_down(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| fp::add_down(*x, *y)).collect()
}

fn bias<Buf>(st: &RunState<impl Fp, Buf>, k: NodeId) -> (&Buf, &Buf) {
    match &st.steps[k] {
        Step::Bias { lo, hi } => (lo, hi),
        _ => unreachable!("affine node {k} has a bias step"),
    }
}

fn affine_w<Buf>(an_params: &[Params<Buf>], k: NodeId) -> &Buf {
    match &an_params[k] {
        Params::Affine { w, .. } => w,
        _ => unreachable!("affine node {k} has weights"),
    }
}

fn conv_of(op: &Op) -> &crate::base::ir::Conv2d {
    match op {
        Op::Conv2d(c) => c,
        _ => unreachable!("conv step on a conv node"),
    }
}

fn relu_params<'s, B: Backend<T>, T: Fp>(st: &'s RunState<T, B::Buf>, k: NodeId) -> ReluParams<'s, B, T> {
    match &st.steps[k] {
        Step::Relu { lam_lo, lam_up, mu_up, mu_lo } => ReluParams { lam_lo, lam_up, mu_up, mu_lo: mu_lo.as_ref() },
        _ => unreachable!("ReLU node {k} has a ReLU step"),
    }
}

#[allow(clippy::type_complexity)]
fn diag_params<Buf>(st: &RunState<impl Fp, Buf>, k: NodeId) -> ((&Buf, &Buf), (&Buf, &Buf)) {
    match &st.steps[k] {
        Step::Diag { m_lo, m_hi, c_lo, c_hi } => ((m_lo, m_hi), (c_lo, c_hi)),
        _ => unreachable!("diagonal node {k} has a diagonal step"),
    }
}

fn pool_params<'s, B: Backend<T>, T: Fp>(
    an: &'s Analyzer<B, T>,
    st: &'s RunState<T, B::Buf>,
    k: NodeId,
) -> PoolParams<'s, B, T> {
    match (&an.net.node(k).op, &st.steps[k]) {
        (Op::MaxPool2d(pool), Step::MaxPool { sel_lo, sel_up, lo, up }) => PoolParams { pool, sel_lo, sel_up, lo, up },
        _ => unreachable!("MaxPool node {k} has a MaxPool step"),
    }
}

/// Interval coefficients (GPUPoly's arithmetic).
pub(crate) struct IntervalRows;

impl<B: Backend<T>, T: Fp> RowArith<B, T> for IntervalRows {
    type M = B::Mat;
    type C = Vec<f64>;
    const PLANES: usize = 2;

    fn c_from_host(_: &B, v: &[f64]) -> R<Vec<f64>> {
        Ok(v.to_vec())
    }
    type F = Vec<f64>;
    fn c_fetch(_: &B, c: &Vec<f64>) -> R<Vec<f64>> {
        Ok(c.clone())
    }
    fn c_fetched(_: &B, f: Vec<f64>) -> R<Vec<f64>> {
        Ok(f)
    }
    fn fetch_overlaps(_: &B) -> bool {
        false
    }
    fn c_add(_: &B, acc: &mut Vec<f64>, inc: &Vec<f64>) -> R<()> {
        for (a, i) in acc.iter_mut().zip(inc) {
            *a = fp::add_down(*a, *i);
        }
        Ok(())
    }
    fn c_compact(_: &B, c: &Vec<f64>, keep: &[u32]) -> R<Vec<f64>> {
        Ok(keep.iter().map(|&r| c[r as usize]).collect())
    }

    fn from_host(
        an: &Analyzer<B, T>,
        _: &mut RunState<T, B::Buf>,
        _: NodeId,
        g: &Geom,
        lo: &[T],
        hi: &[T],
    ) -> R<(B::Mat, Vec<f64>)> {
        Ok((an.backend.mat_from_host(g.rows(), g.cols(), lo, hi)?, vec![0.0; g.rows()]))
    }
    fn from_unit(an: &Analyzer<B, T>, g: &Geom, col: &[u32], val: &[T]) -> R<(B::Mat, Vec<f64>)> {
        let (rows, cols) = (g.rows(), g.cols());
        let a = crate::base::backend::unit_rows(rows, cols, col, val)?;
        Ok((an.backend.mat_from_host(rows, cols, &a, &a)?, vec![0.0; rows]))
    }
    fn zeros(be: &B, rows: usize, cols: usize) -> R<B::Mat> {
        Ok(be.mat_zeros(rows, cols)?)
    }
    fn compact(be: &B, m: &B::Mat, g: &Geom, keep: &[u32]) -> R<B::Mat> {
        Ok(be.compact(m, g, keep)?)
    }
    fn slice_cols(be: &B, m: &B::Mat, start: usize, len: usize) -> R<B::Mat> {
        Ok(be.slice_cols(m, start, len)?)
    }
    fn concretize_add(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        node: NodeId,
        m: &B::Mat,
        g: &Geom,
        base: &Vec<f64>,
    ) -> R<Vec<f64>> {
        let (lo, hi) = an.bounds_dev(st, node)?;
        let part = an.backend.concretize(m, g, lo, hi)?;
        Ok(base.iter().zip(&part).map(|(&b, &p)| fp::add_down(b, p)).collect())
    }
    fn add_into(
        an: &Analyzer<B, T>,
        _: &mut RunState<T, B::Buf>,
        _: NodeId,
        dst: &mut B::Mat,
        dg: &Geom,
        src: &B::Mat,
        sg: &Geom,
    ) -> R<Vec<f64>> {
        an.backend.add_into(dst, dg, src, sg)?;
        Ok(vec![0.0; sg.rows()])
    }
    fn dense(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        k: NodeId,
        m: &B::Mat,
        _: &Geom,
    ) -> StepOut<B::Mat, Vec<f64>> {
        let n_in = an.net.node(an.net.node(k).inputs[0]).shape.numel();
        let (lo, hi) = bias(st, k);
        Ok(an.backend.dense_backsub(m, affine_w(&an.params, k), n_in, lo, hi)?)
    }
    fn conv(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        k: NodeId,
        m: &B::Mat,
        g: &Geom,
        out: &Geom,
    ) -> StepOut<B::Mat, Vec<f64>> {
        let (bias_lo, bias_hi) = bias(st, k);
        let p = ConvParams { conv: conv_of(&an.net.node(k).op), weight: affine_w(&an.params, k), bias_lo, bias_hi };
        Ok(an.backend.conv_backsub(m, g, &p, out)?)
    }
    fn relu(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        k: NodeId,
        m: &B::Mat,
        g: &Geom,
    ) -> StepOut<B::Mat, Vec<f64>> {
        Ok(an.backend.relu_backsub(m, g, &relu_params::<B, T>(st, k))?)
    }
    fn diag(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        k: NodeId,
        m: &B::Mat,
        g: &Geom,
    ) -> StepOut<B::Mat, Vec<f64>> {
        let (mm, c) = diag_params(st, k);
        Ok(an.backend.diag_backsub(m, g, mm, c)?)
    }
    fn avgpool(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        k: NodeId,
        m: &B::Mat,
        g: &Geom,
        out: &Geom,
    ) -> StepOut<B::Mat, Vec<f64>> {
        let (Params::AvgPool { conv, w, .. }, Step::AvgPool { sum_lo, sum_hi, m_lo, m_hi, c_lo, c_hi, .. }) =
            (&an.params[k], &st.steps[k])
        else {
            unreachable!("AvgPool node {k} has an AvgPool step")
        };
        let (m1, d1) = an.backend.diag_backsub(m, g, (m_lo, m_hi), (c_lo, c_hi))?;
        let p = ConvParams { conv, weight: w, bias_lo: sum_lo, bias_hi: sum_hi };
        let (m2, d2) = an.backend.conv_backsub(&m1, g, &p, out)?;
        Ok((m2, sum_down(&d1, &d2)))
    }
    fn maxpool(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        k: NodeId,
        m: &B::Mat,
        g: &Geom,
        out: &Geom,
    ) -> StepOut<B::Mat, Vec<f64>> {
        Ok(an.backend.maxpool_backsub(m, g, &pool_params(an, st, k), out)?)
    }
}

/// Point coefficients on plain GEMMs, rounding paid in the constant.
pub(crate) struct PointRows;

impl<B: Backend<T>, T: Fp> RowArith<B, T> for PointRows {
    type M = B::PMat;
    type C = B::Cst;
    const PLANES: usize = 1;

    fn c_from_host(be: &B, v: &[f64]) -> R<B::Cst> {
        Ok(be.cst_from_host(v)?)
    }
    type F = B::CstFetch;
    fn c_fetch(be: &B, c: &B::Cst) -> R<B::CstFetch> {
        Ok(be.cst_fetch(c)?)
    }
    fn c_fetched(be: &B, f: B::CstFetch) -> R<Vec<f64>> {
        Ok(be.cst_fetched(f)?)
    }
    fn fetch_overlaps(be: &B) -> bool {
        be.fetch_overlaps()
    }
    fn c_add(be: &B, acc: &mut B::Cst, inc: &B::Cst) -> R<()> {
        Ok(be.cst_add(acc, inc)?)
    }
    fn c_compact(be: &B, c: &B::Cst, keep: &[u32]) -> R<B::Cst> {
        Ok(be.cst_compact(c, keep)?)
    }

    /// Takes `lo` as the coefficients; where `lo < hi` (a property
    /// coefficient not representable in `T`) the constant pays `(hi − lo)·r`.
    fn from_host(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        node: NodeId,
        g: &Geom,
        lo: &[T],
        hi: &[T],
    ) -> R<(B::PMat, Vec<f64>)> {
        let (rows, cols) = (g.rows(), g.cols());
        let mut cst = vec![0.0; rows];
        if lo != hi {
            assert!(g.is_full(), "inexact coefficients only on full rows");
            let b = &st.bounds[node];
            for (r, c) in cst.iter_mut().enumerate() {
                let base = g.table_base(r);
                for j in 0..cols {
                    let w = fp::sub_up(hi[r * cols + j].to_f64_exact(), lo[r * cols + j].to_f64_exact());
                    if w > 0.0 {
                        let rj = b.lo[base + j].abs().max(b.hi[base + j].abs()).to_f64_exact();
                        *c = fp::sub_down(*c, fp::mul_up(w, rj));
                    }
                }
            }
        }
        Ok((an.backend.pmat_from_host(rows, cols, lo)?, cst))
    }
    fn from_unit(an: &Analyzer<B, T>, g: &Geom, col: &[u32], val: &[T]) -> R<(B::PMat, Vec<f64>)> {
        Ok((an.backend.pmat_unit(g.rows(), g.cols(), col, val)?, vec![0.0; g.rows()]))
    }
    fn zeros(be: &B, rows: usize, cols: usize) -> R<B::PMat> {
        Ok(be.pmat_zeros(rows, cols)?)
    }
    fn compact(be: &B, m: &B::PMat, g: &Geom, keep: &[u32]) -> R<B::PMat> {
        Ok(be.point_compact(m, g, keep)?)
    }
    fn slice_cols(be: &B, m: &B::PMat, start: usize, len: usize) -> R<B::PMat> {
        Ok(be.point_slice_cols(m, start, len)?)
    }
    fn concretize_add(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        node: NodeId,
        m: &B::PMat,
        g: &Geom,
        base: &B::Cst,
    ) -> R<B::Cst> {
        let (lo, hi) = an.bounds_dev(st, node)?;
        Ok(an.backend.point_concretize_add(m, g, lo, hi, base)?)
    }
    fn add_into(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        node: NodeId,
        dst: &mut B::PMat,
        dg: &Geom,
        src: &B::PMat,
        sg: &Geom,
    ) -> R<B::Cst> {
        let (r, _) = an.abs_dev(st, node)?;
        Ok(an.backend.point_add_into(dst, dg, src, sg, r)?)
    }
    fn dense(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        k: NodeId,
        m: &B::PMat,
        g: &Geom,
    ) -> StepOut<B::PMat, B::Cst> {
        let n_in = an.net.node(an.net.node(k).inputs[0]).shape.numel();
        let r1 = an.wabs_dev(st, k)?;
        let (lo, hi) = bias(st, k);
        let mag = Magnitudes { wr: st.wabs[k].as_ref().expect("computed"), r1: &r1 };
        Ok(an.backend.point_dense(m, g, affine_w(&an.params, k), n_in, (lo, hi), &mag)?)
    }
    fn conv(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        k: NodeId,
        m: &B::PMat,
        g: &Geom,
        out: &Geom,
    ) -> StepOut<B::PMat, B::Cst> {
        let r1 = an.wabs_dev(st, k)?;
        let (bias_lo, bias_hi) = bias(st, k);
        let p = ConvParams { conv: conv_of(&an.net.node(k).op), weight: affine_w(&an.params, k), bias_lo, bias_hi };
        let mag = Magnitudes { wr: st.wabs[k].as_ref().expect("computed"), r1: &r1 };
        Ok(an.backend.point_conv(m, g, &p, out, &mag)?)
    }
    fn relu(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        k: NodeId,
        m: &B::PMat,
        g: &Geom,
    ) -> StepOut<B::PMat, B::Cst> {
        an.abs_dev(st, an.net.node(k).inputs[0])?;
        let r = &st.abs[an.net.node(k).inputs[0]].as_ref().expect("computed").0;
        Ok(an.backend.point_relu(m, g, &relu_params::<B, T>(st, k), r)?)
    }
    /// For Add the multiplier is exactly 1, so no rounding arises and the
    /// node's own magnitudes serve; ChannelAffine pays with its input's.
    fn diag(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        k: NodeId,
        m: &B::PMat,
        g: &Geom,
    ) -> StepOut<B::PMat, B::Cst> {
        let x = if matches!(an.net.node(k).op, Op::Add) { k } else { an.net.node(k).inputs[0] };
        an.abs_dev(st, x)?;
        let r = &st.abs[x].as_ref().expect("computed").0;
        let (mm, c) = diag_params(st, k);
        Ok(an.backend.point_diag(m, g, mm, c, r)?)
    }
    fn avgpool(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        k: NodeId,
        m: &B::PMat,
        g: &Geom,
        out: &Geom,
    ) -> StepOut<B::PMat, B::Cst> {
        let r1 = an.wabs_dev(st, k)?;
        let (Params::AvgPool { conv, w, .. }, Step::AvgPool { sum_lo, sum_hi, m_lo, m_hi, c_lo, c_hi, sum_abs }) =
            (&an.params[k], &st.steps[k])
        else {
            unreachable!("AvgPool node {k} has an AvgPool step")
        };
        let (m1, d1) = an.backend.point_diag(m, g, (m_lo, m_hi), (c_lo, c_hi), sum_abs)?;
        let p = ConvParams { conv, weight: w, bias_lo: sum_lo, bias_hi: sum_hi };
        let mag = Magnitudes { wr: st.wabs[k].as_ref().expect("computed"), r1: &r1 };
        let (m2, mut d2) = an.backend.point_conv(&m1, g, &p, out, &mag)?;
        an.backend.cst_add(&mut d2, &d1)?;
        Ok((m2, d2))
    }
    fn maxpool(
        an: &Analyzer<B, T>,
        st: &mut RunState<T, B::Buf>,
        k: NodeId,
        m: &B::PMat,
        g: &Geom,
        out: &Geom,
    ) -> StepOut<B::PMat, B::Cst> {
        an.abs_dev(st, an.net.node(k).inputs[0])?;
        let r = &st.abs[an.net.node(k).inputs[0]].as_ref().expect("computed").0;
        Ok(an.backend.point_maxpool(m, g, &pool_params(an, st, k), out, r)?)
    }
}
