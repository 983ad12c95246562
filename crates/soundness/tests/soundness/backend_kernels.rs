//! Every interval a backend kernel outputs encloses the exact rational
//! result: dense and conv backsubstitution, the ReLU and diagonal steps,
//! concretization and the forward pass, on the CPU and (when a GPU is
//! present) on CUDA, in f32 and f64.

#![allow(clippy::needless_range_loop)] // index arithmetic mirrors the kernels

use crate::common::kernels::{conv_layer, conv_scatter, planes, prod, q, vals};
use polycert_backend_cpu::CpuBackend;
use polycert_deeppoly::base::rng::SplitMix;
use polycert_deeppoly::{Backend, ConvParams, FloatModel, Geom, ReluParams, Shape};
use polycert_interval::Fp;
use rug::Rational;

fn check_dense<B: Backend<T>, T: Fp>(be: &B, rng: &mut SplitMix) {
    let (rows, n_out, n_in) = (1 + rng.below(70), 1 + rng.below(70), 1 + rng.below(70));
    let (alo, ahi) = planes::<T>(rng, rows * n_out);
    let w: Vec<T> = vals(rng, n_out * n_in);
    let (blo, bhi) = planes::<T>(rng, n_out);
    let a = be.mat_from_host(rows, n_out, &alo, &ahi).unwrap();
    let (m, cst) = be
        .dense_backsub(&a, &be.upload(&w).unwrap(), n_in, &be.upload(&blo).unwrap(), &be.upload(&bhi).unwrap())
        .unwrap();
    let (olo, ohi) = be.mat_to_host(&m).unwrap();
    for r in 0..rows {
        for j in 0..n_in {
            let (mut lo, mut hi) = (Rational::new(), Rational::new());
            for k in 0..n_out {
                let i = r * n_out + k;
                let (p, s) = prod(&q(alo[i]), &q(ahi[i]), &q(w[k * n_in + j]), &q(w[k * n_in + j]));
                lo += p;
                hi += s;
            }
            assert!(q(olo[r * n_in + j]) <= lo && q(ohi[r * n_in + j]) >= hi, "dense ({r},{j})");
        }
        let mut c = Rational::new();
        for k in 0..n_out {
            let i = r * n_out + k;
            c += prod(&q(alo[i]), &q(ahi[i]), &q(blo[k]), &q(bhi[k])).0;
        }
        assert!(Rational::from_f64(cst[r]).unwrap() <= c, "dense constant row {r}");
    }
}

fn check_conv<B: Backend<T>, T: Fp>(be: &B, rng: &mut SplitMix) {
    let (conv, si, so) = conv_layer(rng, 4..=8, |rng, n| vals::<T>(rng, n).iter().map(|v| v.to_f64_exact()).collect());
    let neurons: Vec<usize> = (0..5).map(|_| rng.below(so.numel())).collect();
    let g = Geom::unit(so, &neurons).through_window(so, (1, 1), (1, 1), (0, 0));
    let out = g.through_conv(&conv, si);
    let rows = g.rows();
    let (alo, ahi) = planes::<T>(rng, rows * g.cols());
    let w: Vec<T> = conv.weight.iter().map(|&v| T::from_f64_nearest(v)).collect();
    let (blo, bhi) = planes::<T>(rng, so.numel());
    let (wb, bl, bh) = (be.upload(&w).unwrap(), be.upload(&blo).unwrap(), be.upload(&bhi).unwrap());
    let a = be.mat_from_host(rows, g.cols(), &alo, &ahi).unwrap();
    let params = ConvParams { conv: &conv, weight: &wb, bias_lo: &bl, bias_hi: &bh };
    let (m, cst) = be.conv_backsub(&a, &g, &params, &out).unwrap();
    let (olo, ohi) = be.mat_to_host(&m).unwrap();
    // Exact: scatter every in-range window coefficient through the kernel.
    for r in 0..rows {
        let mut lo = vec![Rational::new(); out.cols()];
        let mut hi = vec![Rational::new(); out.cols()];
        let mut c = Rational::new();
        conv_scatter(&conv, &g, &out, r, |j, nrn, tap| {
            let i = r * g.cols() + j;
            match tap {
                None => c += prod(&q(alo[i]), &q(ahi[i]), &q(blo[nrn]), &q(bhi[nrn])).0,
                Some((t, wi)) => {
                    let wv = q(w[wi]);
                    let (pl, ph) = prod(&q(alo[i]), &q(ahi[i]), &wv, &wv);
                    lo[t] += pl;
                    hi[t] += ph;
                }
            }
        });
        for t in 0..out.cols() {
            let e = r * out.cols() + t;
            assert!(q(olo[e]) <= lo[t] && q(ohi[e]) >= hi[t], "conv row {r} col {t}");
        }
        assert!(Rational::from_f64(cst[r]).unwrap() <= c, "conv constant row {r}");
    }
}

fn check_rowops<B: Backend<T>, T: Fp>(be: &B, rng: &mut SplitMix) {
    let n = 1 + rng.below(200);
    let rows = 1 + rng.below(6);
    let g = Geom::full(Shape::flat(n), rows);
    let (alo, ahi) = planes::<T>(rng, rows * n);
    let (xlo, xhi) = planes::<T>(rng, n);
    let (lam_lo, lam_up, mu): (Vec<T>, Vec<T>, Vec<T>) = {
        let l: Vec<T> = (0..n).map(|_| if rng.below(2) == 0 { T::zero() } else { T::one() }).collect();
        let u: Vec<T> = (0..n).map(|_| T::from_f64_nearest(rng.unit())).collect();
        let m: Vec<T> = (0..n).map(|_| T::from_f64_nearest(rng.unit() * 3.0)).collect();
        (l, u, m)
    };
    let a = be.mat_from_host(rows, n, &alo, &ahi).unwrap();
    let (xl, xh) = (be.upload(&xlo).unwrap(), be.upload(&xhi).unwrap());
    let conc = be.concretize(&a, &g, &xl, &xh).unwrap();
    // Half the cases carry a lower intercept (σ's relaxation), of either sign.
    let mu_lo: Option<Vec<T>> =
        (rng.below(2) == 0).then(|| (0..n).map(|_| T::from_f64_nearest(rng.unit() * 2.0 - 1.0)).collect());
    let (ll, lu, mm) = (be.upload(&lam_lo).unwrap(), be.upload(&lam_up).unwrap(), be.upload(&mu).unwrap());
    let ml = mu_lo.as_ref().map(|v| be.upload(v).unwrap());
    let p = ReluParams { lam_lo: &ll, lam_up: &lu, mu_up: &mm, mu_lo: ml.as_ref() };
    let (rm, rc) = be.relu_backsub(&a, &g, &p).unwrap();
    let (rlo, rhi) = be.mat_to_host(&rm).unwrap();
    let (dm, dc) = be.diag_backsub(&a, &g, (&xl, &xh), (&xl, &xh)).unwrap();
    let (dlo, dhi) = be.mat_to_host(&dm).unwrap();
    for r in 0..rows {
        let (mut cz, mut rcz, mut dcz) = (Rational::new(), Rational::new(), Rational::new());
        for j in 0..n {
            let i = r * n + j;
            let (al, ah, xl, xh) = (q(alo[i]), q(ahi[i]), q(xlo[j]), q(xhi[j]));
            let (pmin, pmax) = prod(&al, &ah, &xl, &xh);
            cz += pmin.clone();
            dcz += pmin.clone();
            assert!(q(dlo[i]) <= pmin && q(dhi[i]) >= pmax, "diag ({r},{j})");
            let lam = if alo[i] > T::zero() { q(lam_lo[j]) } else { q(lam_up[j]) };
            let exact = al.clone() * lam;
            assert!(q(rlo[i]) <= exact && q(rhi[i]) >= exact, "relu ({r},{j})");
            if alo[i] < T::zero() {
                rcz += al * q(mu[j]);
            } else if let Some(m) = &mu_lo {
                rcz += al * q(m[j]);
            }
        }
        assert!(Rational::from_f64(conc[r]).unwrap() <= cz, "concretize row {r}");
        assert!(Rational::from_f64(rc[r]).unwrap() <= rcz, "relu constant row {r}");
        assert!(Rational::from_f64(dc[r]).unwrap() <= dcz, "diag constant row {r}");
    }
}

fn check_forward<B: Backend<T>, T: Fp>(be: &B, rng: &mut SplitMix) {
    let (n_in, n_out) = (1 + rng.below(300), 1 + rng.below(20));
    let w: Vec<T> = vals(rng, n_in * n_out);
    let b: Vec<T> = vals(rng, n_out);
    let (xlo, xhi) = planes::<T>(rng, n_in);
    let f = be
        .forward_dense(
            &be.upload(&w).unwrap(),
            &be.upload(&b).unwrap(),
            n_in,
            (&be.upload(&xlo).unwrap(), &be.upload(&xhi).unwrap()),
            1,
            FloatModel::EXACT,
        )
        .unwrap();
    let (lo, hi) = (be.download(&f.lo).unwrap(), be.download(&f.hi).unwrap());
    for o in 0..n_out {
        let (mut l, mut h) = (q(b[o]), q(b[o]));
        for j in 0..n_in {
            let wv = q(w[o * n_in + j]);
            let (p, s) = prod(&q(xlo[j]), &q(xhi[j]), &wv, &wv);
            l += p;
            h += s;
        }
        assert!(q(lo[o]) <= l && q(hi[o]) >= h, "forward neuron {o}");
    }
}

fn all<B: Backend<T>, T: Fp>(be: &B, seed: u64) {
    let cases: usize =
        std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).map_or(40, |n: usize| (n / 500).max(40));
    let mut rng = SplitMix(seed);
    for _ in 0..cases {
        check_dense::<B, T>(be, &mut rng);
        check_conv::<B, T>(be, &mut rng);
        check_rowops::<B, T>(be, &mut rng);
        check_forward::<B, T>(be, &mut rng);
    }
}

#[test]
fn cpu_kernels_enclose_exact_results() {
    all::<_, f32>(&CpuBackend::default(), 1);
    all::<_, f64>(&CpuBackend::default(), 2);
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: cargo xtask gpu-prepare builds it to run")]
fn gpu_kernels_enclose_exact_results() {
    let Some(gpu) = polycert_backend_cuda::test_backend() else { return };
    all::<_, f32>(&gpu, 3);
    all::<_, f64>(&gpu, 4);
}
