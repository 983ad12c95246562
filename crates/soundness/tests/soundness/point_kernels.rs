//! Soundness of the point arithmetic (`Backend::point_*`) in exact rationals.
//! A step takes a row `a` over `y` to `(g, δ)` over `x`; it is sound when
//! `a·y ≥ g·x + δ` for all `x` with `|x_j| ≤ r_j` and `y` in the layer's
//! relation to `x`. With the exact step `a·y ≥ e·x + C`, each check verifies
//! the sufficient condition `δ ≤ C − Σ_j |e_j − g_j|·r_j` exactly (`0·∞ = 0`;
//! NaN fails). Concretization must not exceed the exact minimum over the
//! box; uploads, compaction and slices must copy bit for bit. Data: ±0,
//! few-bit and full mantissas, magnitudes near `2^±96` scaled so that nothing
//! overflows, subnormal coefficients and products, infinite `r`; f32 and f64;
//! CPU, and CUDA when present. `PROPTEST_CASES` cases per operation and
//! precision (small sizes, a few long or wide GEMMs); `POINT_SEED=<hex>`
//! reruns one case. The negative control must catch an unpaid rounding.

#![allow(clippy::needless_range_loop)] // index arithmetic mirrors the kernels

use crate::common::kernels::{conv_layer, conv_scatter, placed, rand_geom, rand_shape};
use crate::common::{ExactSum, Ext, TF, rat, rd};
use polycert_backend_cpu::CpuBackend;
use polycert_deeppoly::base::rng::SplitMix;
use polycert_deeppoly::{Backend, ConvParams, Geom, Magnitudes, Pool, PoolParams, ReluParams, Shape};
use rug::Rational;

mod data;

use data::{coeffs, ivs, magnitudes, mags, rowwise, scales, vals};

type Res<X> = Result<X, String>;
/// Per row the exact bound δ must respect, and the δ under test.
type Out = (Vec<Lb>, Vec<f64>);

/// The exact bound on one row's δ: `cst − pay` (−∞ when `inf`).
#[derive(Debug, Clone)]
struct Lb {
    cst: Ext,
    pay: Rational,
    inf: bool,
}

impl Lb {
    fn new(cst: &ExactSum) -> Self {
        Lb { cst: cst.value().expect("constants are not ±inf together"), pay: Rational::new(), inf: false }
    }
    /// Pays `|s − g|·r` for the exact sum `s` and the stored coefficient `g`.
    fn pay<T: TF>(&mut self, s: &ExactSum, g: T, r: T) -> Res<()> {
        self.pay_dev(dev(s, g)?, r);
        Ok(())
    }
    /// Pays `d·r` for a deviation `d ≥ 0` (`0·∞ = 0`).
    fn pay_dev<T: TF>(&mut self, d: Rational, r: T) {
        if d != 0 {
            if r.is_infinite() {
                self.inf = true;
            } else {
                self.pay += d * rat(r);
            }
        }
    }
    /// The bound as an extended real.
    fn bound(&self) -> Ext {
        if self.inf { Ext::NegInf } else { self.cst.sub(&Ext::Fin(self.pay.clone())).expect("finite pay") }
    }
}

/// `|s − g|` exactly; `g` must be finite.
fn dev<T: TF>(s: &ExactSum, g: T) -> Res<Rational> {
    if !g.is_finite() {
        return Err(format!("non-finite coefficient {g:?}"));
    }
    let mut s = s.clone();
    s.add_prod(g, -T::one());
    match s.value() {
        Some(Ext::Fin(q)) => Ok(q.abs()),
        v => Err(format!("exact coefficient not finite: {v:?}")),
    }
}

/// Every δ is a sound lower bound: not NaN, at most its exact bound.
fn verdict(lbs: &[Lb], d: &[f64]) -> Res<()> {
    if lbs.len() != d.len() {
        return Err(format!("{} constants for {} rows", d.len(), lbs.len()));
    }
    for (r, (lb, &dr)) in lbs.iter().zip(d).enumerate() {
        let b = lb.bound();
        if dr.is_nan() || dr == f64::INFINITY || (dr > f64::NEG_INFINITY && Ext::of(dr) > b) {
            return Err(format!("row {r}: δ = {dr:e} above the exact bound {} ({lb:?})", crate::common::show(&b)));
        }
    }
    Ok(())
}

/// The exact bounds of a step that moves row `i` onto coefficients `gv`
/// over `og`: `fill(i, constant, coefficients)` adds the exact terms, and
/// every in-range column pays `|exact − g|·r`.
fn moved<T: TF>(
    og: &Geom,
    gv: &[T],
    r: &[T],
    mut fill: impl FnMut(usize, &mut ExactSum, &mut [ExactSum]) -> Res<()>,
) -> Res<Vec<Lb>> {
    zero_padding(og, gv)?;
    (0..og.rows())
        .map(|i| {
            let (mut c, mut ex) = (ExactSum::new(), vec![ExactSum::new(); og.cols()]);
            fill(i, &mut c, &mut ex)?;
            let mut lb = Lb::new(&c);
            for (t, p) in placed(og, i).iter().enumerate() {
                if let Some(n) = *p {
                    lb.pay(&ex[t], gv[i * og.cols() + t], r[n])?;
                }
            }
            Ok(lb)
        })
        .collect()
}

/// Stored coefficients outside a row's node (padding) must be zero.
fn zero_padding<T: TF>(g: &Geom, out: &[T]) -> Res<()> {
    match (0..g.rows()).flat_map(|r| placed(g, r)).zip(out).position(|(p, &x)| p.is_none() && x != T::zero()) {
        Some(k) => Err(format!("row {} col {}: padding holds {:?}", k / g.cols(), k % g.cols(), out[k])),
        None => Ok(()),
    }
}

fn e<E: std::fmt::Display>(x: E) -> String {
    format!("backend: {x}")
}

fn dense<B: Backend<T>, T: TF>(be: &B, rng: &mut SplitMix) -> Res<Out> {
    let (rows, n_out, n_in) = match rng.below(32) {
        0 => (1 + rng.below(2), 1 + rng.below(300), 1 + rng.below(4)),
        1 => (1 + rng.below(24), 1 + rng.below(24), 1 + rng.below(40)),
        _ => (1 + rng.below(3), 1 + rng.below(12), 1 + rng.below(12)),
    };
    let sc = scales::<T>(rng);
    let a: Vec<T> = vals(rng, rows * n_out, sc.a, sc.spread);
    let w: Vec<T> = vals(rng, n_out * n_in, sc.w, sc.spread);
    let (blo, bhi) = ivs::<T>(rng, n_out, sc.b, sc.spread);
    let r = mags::<T>(rng, n_in, &sc);
    let taps: Vec<Vec<(T, usize)>> = (0..n_out).map(|k| (0..n_in).map(|j| (w[k * n_in + j], j)).collect()).collect();
    let (wr, r1) = magnitudes(rng, &taps, &r);
    let up = |v: &Vec<T>| be.upload(v).map_err(e);
    let am = be.pmat_from_host(rows, n_out, &a).map_err(e)?;
    let (wb, wrb, lo, hi) = (up(&w)?, up(&wr)?, up(&blo)?, up(&bhi)?);
    let ga = Geom::full(Shape::flat(n_out), rows);
    let (gm, d) = be.point_dense(&am, &ga, &wb, n_in, (&lo, &hi), &Magnitudes { wr: &wrb, r1: &[r1] }).map_err(e)?;
    let g = be.pmat_to_host(&gm).map_err(e)?;
    let lbs = moved(&Geom::full(Shape::flat(n_in), rows), &g, &r, |i, c, ex| {
        for k in 0..n_out {
            let ak = a[i * n_out + k];
            c.add_prod(ak, if ak >= T::zero() { blo[k] } else { bhi[k] });
            for j in 0..n_in {
                ex[j].add_prod(ak, w[k * n_in + j]);
            }
        }
        Ok(())
    })?;
    Ok((lbs, be.cst_to_host(&d).map_err(e)?))
}

fn conv<B: Backend<T>, T: TF>(be: &B, rng: &mut SplitMix) -> Res<Out> {
    let sc = scales::<T>(rng);
    let (conv, si, so) =
        conv_layer(rng, 3..=6, |rng, n| vals::<T>(rng, n, sc.w, sc.spread).iter().map(|v| v.to_f64_exact()).collect());
    let rows = 1 + rng.below(3);
    let g = if rng.below(6) == 0 { Geom::full(so, rows) } else { rand_geom(rng, so, rows) };
    let out = g.through_conv(&conv, si);
    let a: Vec<T> = coeffs(rng, &g, &sc);
    let w: Vec<T> = conv.weight.iter().map(|&v| T::from_f64_nearest(v)).collect();
    let (blo, bhi) = ivs::<T>(rng, so.numel(), sc.b, sc.spread);
    let r = mags::<T>(rng, si.numel(), &sc);
    let taps: Vec<Vec<(T, usize)>> = (0..so.numel())
        .map(|o| conv.taps(si, o / (so.h * so.w), (o / so.w) % so.h, o % so.w).map(|(k, i)| (w[k], i)).collect())
        .collect();
    let (wr, r1) = magnitudes(rng, &taps, &r);
    let up = |v: &Vec<T>| be.upload(v).map_err(e);
    let am = be.pmat_from_host(rows, g.cols(), &a).map_err(e)?;
    let (wb, wrb, lo, hi) = (up(&w)?, up(&wr)?, up(&blo)?, up(&bhi)?);
    let p = ConvParams { conv: &conv, weight: &wb, bias_lo: &lo, bias_hi: &hi };
    let (gm, d) = be.point_conv(&am, &g, &p, &out, &Magnitudes { wr: &wrb, r1: &[r1] }).map_err(e)?;
    let gv = be.pmat_to_host(&gm).map_err(e)?;
    let lbs = moved(&out, &gv, &r, |i, c, ex| {
        conv_scatter(&conv, &g, &out, i, |j, nrn, tap| {
            let aj = a[i * g.cols() + j];
            match tap {
                None => c.add_prod(aj, if aj >= T::zero() { blo[nrn] } else { bhi[nrn] }),
                Some((t, k)) => ex[t].add_prod(aj, w[k]),
            }
        });
        Ok(())
    })?;
    Ok((lbs, be.cst_to_host(&d).map_err(e)?))
}

/// The exact bounds of an elementwise step: `step(a_j, t, constant)` (`t`
/// the table index of the row's slot and the column's neuron) adds the
/// exact constant of column `j` and returns its candidate exact
/// multipliers; the column pays its worst `|a_j·m − g_j|·r_t`.
fn rowwise_bounds<T: TF>(
    g: &Geom,
    a: &[T],
    out: &[T],
    r: &[T],
    step: impl Fn(T, usize, &mut ExactSum) -> [T; 2],
) -> Res<Vec<Lb>> {
    zero_padding(g, out)?;
    (0..g.rows())
        .map(|i| {
            let (mut c, mut devs) = (ExactSum::new(), vec![]);
            for (j, p) in placed(g, i).iter().enumerate() {
                let Some(n) = p.map(|n| g.table_base(i) + n) else { continue };
                let (aj, gj) = (a[i * g.cols() + j], out[i * g.cols() + j]);
                let mut worst = Rational::new();
                for m in step(aj, n, &mut c) {
                    let mut s = ExactSum::new();
                    s.add_prod(aj, m);
                    worst = worst.max(dev(&s, gj)?);
                }
                devs.push((worst, r[n]));
            }
            let mut lb = Lb::new(&c);
            devs.into_iter().for_each(|(d, rn)| lb.pay_dev(d, rn));
            Ok(lb)
        })
        .collect()
}

fn relu<B: Backend<T>, T: TF>(be: &B, rng: &mut SplitMix) -> Res<Out> {
    let (g, a, r, sc) = rowwise::<T>(rng);
    let n = g.table_len();
    let unit = |rng: &mut SplitMix| T::from_f64_nearest(rng.unit());
    let lam_lo: Vec<T> = (0..n)
        .map(|_| match rng.below(3) {
            0 => T::zero(),
            1 => T::one(),
            _ => unit(rng),
        })
        .collect();
    let lam_up: Vec<T> = (0..n).map(|_| if rng.below(4) == 0 { T::one() } else { unit(rng) }).collect();
    let mu: Vec<T> = vals::<T>(rng, n, sc.b, sc.spread).iter().map(|v| v.abs()).collect();
    let up = |v: &Vec<T>| be.upload(v).map_err(e);
    // Half the cases carry a lower intercept (σ's relaxation), of either sign.
    let mu_lo: Option<Vec<T>> = (rng.below(2) == 0).then(|| vals::<T>(rng, n, sc.b, sc.spread));
    let (ll, lu, mm, rb) = (up(&lam_lo)?, up(&lam_up)?, up(&mu)?, up(&r)?);
    let ml = mu_lo.as_ref().map(up).transpose()?;
    let am = be.pmat_from_host(g.rows(), g.cols(), &a).map_err(e)?;
    let p = ReluParams { lam_lo: &ll, lam_up: &lu, mu_up: &mm, mu_lo: ml.as_ref() };
    let (gm, d) = be.point_relu(&am, &g, &p, &rb).map_err(e)?;
    let out = be.pmat_to_host(&gm).map_err(e)?;
    let lbs = rowwise_bounds(&g, &a, &out, &r, |aj, i, c| {
        // a_j ≥ 0: y ≥ λ_lo·x (+ μ_lo); a_j < 0: y ≤ λ_up·x + μ.
        if aj < T::zero() {
            c.add_prod(aj, mu[i]);
            [lam_up[i]; 2]
        } else {
            if let Some(m) = &mu_lo {
                c.add_prod(aj, m[i]);
            }
            [lam_lo[i]; 2]
        }
    })?;
    Ok((lbs, be.cst_to_host(&d).map_err(e)?))
}

fn diag<B: Backend<T>, T: TF>(be: &B, rng: &mut SplitMix) -> Res<Out> {
    let (g, a, r, sc) = rowwise::<T>(rng);
    let n = g.table_len();
    let one = rng.below(4) == 0; // Add: multipliers exactly 1
    let (mlo, mhi) = if one { (vec![T::one(); n], vec![T::one(); n]) } else { ivs(rng, n, sc.w.min(0), sc.spread) };
    let (clo, chi) = ivs::<T>(rng, n, sc.b, sc.spread);
    let up = |v: &Vec<T>| be.upload(v).map_err(e);
    let (ml, mh, cl, ch, rb) = (up(&mlo)?, up(&mhi)?, up(&clo)?, up(&chi)?, up(&r)?);
    let am = be.pmat_from_host(g.rows(), g.cols(), &a).map_err(e)?;
    let (gm, d) = be.point_diag(&am, &g, (&ml, &mh), (&cl, &ch), &rb).map_err(e)?;
    let out = be.pmat_to_host(&gm).map_err(e)?;
    let lbs = rowwise_bounds(&g, &a, &out, &r, |aj, i, c| {
        c.add_prod(aj, if aj >= T::zero() { clo[i] } else { chi[i] });
        [mlo[i], mhi[i]]
    })?;
    Ok((lbs, be.cst_to_host(&d).map_err(e)?))
}

fn maxpool<B: Backend<T>, T: TF>(be: &B, rng: &mut SplitMix) -> Res<Out> {
    let sc = scales::<T>(rng);
    let (k, s) = ((1 + rng.below(3), 1 + rng.below(3)), (1 + rng.below(3), 1 + rng.below(3)));
    let pad = (rng.below(k.0), rng.below(k.1));
    let pool = Pool { kernel: k, stride: s, pad: (pad.0, pad.1, pad.0, pad.1) };
    let si = Shape::new(1 + rng.below(3), k.0 + rng.below(6), k.1 + rng.below(6));
    let so = Shape::new(si.c, (si.h + 2 * pad.0 - k.0) / s.0 + 1, (si.w + 2 * pad.1 - k.1) / s.1 + 1);
    let rows = 1 + rng.below(4);
    let g = rand_geom(rng, so, rows);
    let out = g.through_window(si, k, s, pad);
    let a: Vec<T> = coeffs(rng, &g, &sc);
    let (mut sel_lo, mut sel_up) = (vec![], vec![]);
    for o in 0..so.numel() {
        let win: Vec<usize> = pool.window(si, o / (so.h * so.w), (o / so.w) % so.h, o % so.w).collect();
        sel_lo.push(win[rng.below(win.len())] as i64);
        sel_up.push(if rng.below(3) == 0 { -1 } else { win[rng.below(win.len())] as i64 });
    }
    let idx = |v: &[i64]| v.iter().map(|&i| T::from_f64_nearest(i as f64)).collect::<Vec<T>>();
    let upv: Vec<T> = vals(rng, so.numel(), sc.b, sc.spread);
    let r = mags::<T>(rng, si.numel(), &sc);
    let up = |v: &Vec<T>| be.upload(v).map_err(e);
    let (sl, su, lo, ub, rb) =
        (up(&idx(&sel_lo))?, up(&idx(&sel_up))?, up(&vec![T::zero(); so.numel()])?, up(&upv)?, up(&r)?);
    let am = be.pmat_from_host(rows, g.cols(), &a).map_err(e)?;
    let p = PoolParams { pool: &pool, sel_lo: &sl, sel_up: &su, lo: &lo, up: &ub };
    let (gm, d) = be.point_maxpool(&am, &g, &p, &out, &rb).map_err(e)?;
    let gv = be.pmat_to_host(&gm).map_err(e)?;
    // a_j > 0: y ≥ x_{sel_lo}; a_j < 0: y ≤ x_{sel_up}, or y ≤ up.
    let lbs = moved(&out, &gv, &r, |i, c, ex| {
        let col = placed(&out, i);
        for (j, p) in placed(&g, i).iter().enumerate() {
            let (Some(n), aj) = (*p, a[i * g.cols() + j]) else { continue };
            let target = if aj > T::zero() { sel_lo[n] } else { sel_up[n] };
            if aj == T::zero() {
                continue;
            } else if target < 0 {
                c.add_prod(aj, upv[n]);
            } else {
                ex[col.iter().position(|&x| x == Some(target as usize)).ok_or("selection outside window")?].add(aj);
            }
        }
        Ok(())
    })?;
    Ok((lbs, be.cst_to_host(&d).map_err(e)?))
}

/// Concretization is at most the exact minimum over the box (bounds may be
/// infinite; zero coefficients contribute nothing).
fn concretize<B: Backend<T>, T: TF>(be: &B, rng: &mut SplitMix) -> Res<Out> {
    let (g, a, _, sc) = rowwise::<T>(rng);
    let n = g.table_len();
    let (mut lo, mut hi) = ivs::<T>(rng, n, sc.r, sc.spread);
    if rng.below(16) == 0 {
        for i in 0..n {
            match rng.below(8) {
                0 => lo[i] = T::neg_infinity(),
                1 => hi[i] = T::infinity(),
                _ => {}
            }
        }
    }
    let am = be.pmat_from_host(g.rows(), g.cols(), &a).map_err(e)?;
    let (lb, hb) = (be.upload(&lo).map_err(e)?, be.upload(&hi).map_err(e)?);
    let d = be.point_concretize(&am, &g, &lb, &hb).map_err(e)?;
    let lbs = (0..g.rows())
        .map(|i| {
            let mut c = ExactSum::new();
            for (j, p) in placed(&g, i).iter().enumerate() {
                if let Some(n) = p.map(|n| g.table_base(i) + n) {
                    let aj = a[i * g.cols() + j];
                    c.add_prod(aj, if aj >= T::zero() { lo[n] } else { hi[n] });
                }
            }
            Lb::new(&c)
        })
        .collect();
    Ok((lbs, be.cst_to_host(&d).map_err(e)?))
}

/// The residual merge `dst += src` into a window containing the source's
/// (the union of two windows, or the full node).
fn add_into<B: Backend<T>, T: TF>(be: &B, rng: &mut SplitMix) -> Res<Out> {
    let sc = scales::<T>(rng);
    let (s, rows) = (rand_shape(rng, 3, 6), 1 + rng.below(4));
    let sg = rand_geom(rng, s, rows);
    let dg = if sg.is_full() || rng.below(4) == 0 {
        Geom::full(s, rows)
    } else {
        let (dy, dx) = (rng.below(3) as i32 - 1, rng.below(3) as i32 - 1);
        let offsets = sg.offsets.iter().map(|&(y, x)| (y + dy, x + dx)).collect();
        sg.union(&Geom::windowed(s, (1 + rng.below(s.h), 1 + rng.below(s.w)), offsets)).expect("uniform shift")
    };
    let src: Vec<T> = coeffs(rng, &sg, &sc);
    let dst: Vec<T> = if rng.below(4) == 0 { vec![T::zero(); rows * dg.cols()] } else { coeffs(rng, &dg, &sc) };
    let r = mags::<T>(rng, s.numel(), &sc);
    let mut dm = if dst.iter().all(|&x| x == T::zero()) && rng.below(2) == 0 {
        be.pmat_zeros(rows, dg.cols()).map_err(e)?
    } else {
        be.pmat_from_host(rows, dg.cols(), &dst).map_err(e)?
    };
    let sm = be.pmat_from_host(rows, sg.cols(), &src).map_err(e)?;
    let d = be.point_add_into(&mut dm, &dg, &sm, &sg, &be.upload(&r).map_err(e)?).map_err(e)?;
    let out = be.pmat_to_host(&dm).map_err(e)?;
    let lbs = moved(&dg, &out, &r, |i, _, ex| {
        (0..dg.cols()).for_each(|t| ex[t].add(dst[i * dg.cols() + t]));
        let dcol = placed(&dg, i);
        for (j, p) in placed(&sg, i).iter().enumerate() {
            if let Some(n) = p {
                ex[dcol.iter().position(|x| x == &Some(*n)).ok_or("source outside window")?]
                    .add(src[i * sg.cols() + j]);
            }
        }
        Ok(())
    })?;
    Ok((lbs, be.cst_to_host(&d).map_err(e)?))
}

/// Upload, zeros, compaction and column slices copy exactly (bit for bit).
fn copies<B: Backend<T>, T: TF>(be: &B, rng: &mut SplitMix) -> Res<Out> {
    let (g, a, _, _) = rowwise::<T>(rng);
    let (rows, cols) = (g.rows(), g.cols());
    let bits = |v: &[T]| v.iter().map(|x| x.to_f64_exact().to_bits()).collect::<Vec<_>>();
    let same = |what: &str, got: &[T], want: &[T]| {
        if bits(got) == bits(want) { Ok(()) } else { Err(format!("{what}: {got:?} is not {want:?}")) }
    };
    let am = be.pmat_from_host(rows, cols, &a).map_err(e)?;
    same("round trip", &be.pmat_to_host(&am).map_err(e)?, &a)?;
    let z = be.pmat_zeros(rows, cols).map_err(e)?;
    same("zeros", &be.pmat_to_host(&z).map_err(e)?, &vec![T::zero(); rows * cols])?;
    // Non-empty, as the analysis uses them.
    let mut keep: Vec<u32> = (0..rows as u32).filter(|_| rng.below(3) != 0).collect();
    if keep.is_empty() {
        keep.push(rng.below(rows) as u32);
    }
    let want: Vec<T> = keep.iter().flat_map(|&k| a[k as usize * cols..(k as usize + 1) * cols].to_vec()).collect();
    let cm = be.point_compact(&am, &g, &keep).map_err(e)?;
    same("compact", &be.pmat_to_host(&cm).map_err(e)?, &want)?;
    let start = rng.below(cols);
    let len = 1 + rng.below(cols - start);
    let want: Vec<T> = (0..rows).flat_map(|i| a[i * cols + start..i * cols + start + len].to_vec()).collect();
    let sm = be.point_slice_cols(&am, start, len).map_err(e)?;
    same("slice", &be.pmat_to_host(&sm).map_err(e)?, &want)?;
    Ok((vec![], vec![]))
}

type Op<B> = fn(&B, &mut SplitMix) -> Res<Out>;

/// Runs `op` on `PROPTEST_CASES` cases (or the one case `POINT_SEED`) and
/// checks every δ; at least half of the rows must get a finite δ (a
/// backend answering −∞ everywhere would be sound but useless).
fn run<B: Backend<T>, T: TF>(be: &B, name: &str, op: Op<B>) {
    let tag = format!("{name}<{}>", std::any::type_name::<T>());
    let base = tag.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    let one = std::env::var("POINT_SEED").map(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).expect("hex"));
    let seeds: Vec<u64> = match one {
        Ok(s) => vec![s],
        Err(_) => (0..crate::common::cases() as u64)
            .map(|i| base.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
            .collect(),
    };
    let (mut rows, mut finite) = (0usize, 0usize);
    for &seed in &seeds {
        let res = op(be, &mut SplitMix(seed)).and_then(|(lbs, d)| {
            rows += d.len();
            finite += d.iter().filter(|x| x.is_finite()).count();
            verdict(&lbs, &d)
        });
        if let Err(msg) = res {
            panic!("{tag}, POINT_SEED={seed:#x}: {msg}");
        }
    }
    assert!(2 * finite >= rows, "{tag}: only {finite} of {rows} rows got a finite constant");
}

macro_rules! point_tests {
    (#[$m:meta] $backend:expr; $($op:ident),*) => {$(
        #[test]
        #[$m]
        fn $op() {
            let Some(be) = $backend else { return };
            super::run::<_, f32>(&be, stringify!($op), super::$op::<_, f32>);
            super::run::<_, f64>(&be, stringify!($op), super::$op::<_, f64>);
        }
    )*};
}

mod cpu {
    // `cfg_attr(any(), …)`: never ignored.
    point_tests!(#[cfg_attr(any(), ignore)] Some(polycert_backend_cpu::CpuBackend::default()); dense, conv, relu, diag, maxpool, concretize, add_into, copies);
}

mod gpu {
    point_tests!(#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: cargo xtask gpu-prepare builds it to run")]
        polycert_backend_cuda::test_backend(); dense, conv, relu, diag, maxpool, concretize, add_into, copies);
}

/// The checker can fail: δ set to the exact constant rounded down, paying
/// nothing for the rounding of the coefficients (the GEMM's γ term, the
/// ReLU's products), must be caught, while the backend's δ passes.
fn caught<T: TF>(name: &str, op: Op<CpuBackend>) {
    let (mut rng, mut caught) = (SplitMix(7), 0);
    for _ in 0..500 {
        let (lbs, d) = op(&CpuBackend::default(), &mut rng).expect("the real backend passes");
        verdict(&lbs, &d).expect("the real backend passes");
        let unsound: Vec<f64> = lbs.iter().map(|lb| rd::<f64>(&lb.cst)).collect();
        caught += verdict(&lbs, &unsound).is_err() as usize;
    }
    eprintln!("{name}<{}>: unsound δ caught in {caught} of 500 cases", std::any::type_name::<T>());
    assert!(caught > 0, "{name}: the checker never caught the unsound δ");
}

#[test]
fn negative_control_catches_unpaid_rounding() {
    caught::<f32>("dense", dense::<_, f32>);
    caught::<f64>("dense", dense::<_, f64>);
    caught::<f32>("conv", conv::<_, f32>);
    caught::<f64>("relu", relu::<_, f64>);
    caught::<f32>("maxpool", maxpool::<_, f32>);
}
