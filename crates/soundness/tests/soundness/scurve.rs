//! The σ relaxation encloses the exact logistic function: for random input
//! intervals (narrow and wide, negative, positive, straddling 0, saturated),
//! in f32 and f64, the lines and bounds of `sigmoid_relax` hold at both ends
//! and at random points in between against σ evaluated with 256-bit
//! floating point (its error, below 2^-240 relative, is left as margin),
//! with and without the deployed tolerance (values clamped to `[0, 1]`).
//! `SCURVE_CASES` intervals per precision (default 10^5).

use polycert_deeppoly::base::rng::SplitMix;
use polycert_deeppoly::base::scurve::{SIGMOID_TOLERANCE, sigmoid_relax};
use polycert_interval::Fp;
use rug::{Float, Rational};

const PREC: u32 = 256;

/// σ(x) within a relative 2^-240, as an interval of rationals.
fn sigma(x: f64) -> (Rational, Rational) {
    let e = Float::with_val(PREC, -x).exp();
    let s = Float::with_val(PREC, 1) / (Float::with_val(PREC, 1) + e);
    let v = s.to_rational().expect("finite");
    let pow2 = |k: u32| Rational::from(rug::Integer::from(1) << k);
    let slack = Rational::from(v.abs_ref()) / pow2(240) + Rational::from(1) / pow2(600);
    (v.clone() - slack.clone(), v + slack)
}

fn q(x: f64) -> Rational {
    Rational::from_f64(x).expect("finite")
}

fn interval(rng: &mut SplitMix) -> (f64, f64) {
    let scale = [0.01, 0.5, 2.0, 8.0, 40.0][rng.below(5)];
    let centre = (rng.unit() * 2.0 - 1.0) * scale * 2.0;
    let width = match rng.below(4) {
        0 => 0.0,
        1 => rng.unit() * 1e-6,
        _ => rng.unit() * scale,
    };
    (centre - width / 2.0, centre + width / 2.0)
}

fn check<T: Fp>(cases: usize, seed: u64) {
    let mut rng = SplitMix(seed);
    for case in 0..cases {
        let (l, u) = interval(&mut rng);
        let (lt, ut) = (polycert_interval::fp::from_f64_down::<T>(l), polycert_interval::fp::from_f64_up::<T>(u));
        let tol = if case % 2 == 0 { 0.0 } else { SIGMOID_TOLERANCE };
        let r = sigmoid_relax(lt, ut, tol);
        let (lf, uf) = (lt.to_f64_exact(), ut.to_f64_exact());
        let v = |t: T| q(t.to_f64_exact());
        let (ll, ml, lu, mu) = (v(r.lam_lo), v(r.mu_lo), v(r.lam_up), v(r.mu_up));
        let (lo, hi, t) = (v(r.lo), v(r.hi), q(tol));
        for k in 0..6 {
            let x = match k {
                0 => lf,
                1 => uf,
                _ => lf + (uf - lf) * rng.unit(),
            }
            .clamp(lf, uf);
            let (s_lo, s_hi) = sigma(x);
            let xq = q(x);
            let below = ll.clone() * xq.clone() + ml.clone();
            let above = lu.clone() * xq.clone() + mu.clone();
            let ctx = || format!("case {case}: [{lf}, {uf}] at {x}, tol {tol}: {r:?}");
            // The deployed σ is within tol of σ, in [0, 1].
            let floor = (s_lo - t.clone()).max(Rational::new());
            let ceil = (s_hi + t.clone()).min(Rational::from(1));
            assert!(below <= floor, "lower line {}", ctx());
            assert!(above >= ceil, "upper line {}", ctx());
            assert!(lo <= floor && hi >= ceil, "bounds {}", ctx());
        }
    }
}

fn cases() -> usize {
    std::env::var("SCURVE_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000)
}

#[test]
fn sigmoid_relaxation_encloses_sigma_f64() {
    check::<f64>(cases(), 7);
}

#[test]
fn sigmoid_relaxation_encloses_sigma_f32() {
    check::<f32>(cases(), 8);
}
