//! DeepPoly's relaxation of the S-shaped logistic function σ(x) = 1/(1+e^−x),
//! rounded so that it stays sound.
//!
//! Float inference of σ is not correctly rounded (libraries use their own
//! exp or polynomial approximations), so the analysis takes the deployed
//! value to be within [`SIGMOID_TOLERANCE`] of the exact one, and in
//! `[0, 1]`. Every line and bound below holds for that whole set.
//!
//! Lines (DeepPoly, Singh et al. 2019): with the chord slope
//! `λ = (σ(u) − σ(l))/(u − l)` and `λ' = min(σ'(l), σ'(u))`,
//! - lower: the chord slope when `l ≥ 0` (σ is concave there, so
//!   `σ(x) − λx` is smallest at an end, whatever λ is); else `λ'` rounded
//!   down, which is `≤ σ'` on all of `[l, u]` (σ' is unimodal), so
//!   `σ(x) − λ'x` is smallest at `l`;
//! - upper: symmetric (chord when `u ≤ 0`, else `λ'` with the largest value at `u`).
//!
//! The intercepts are those extremes, computed from outward enclosures of σ.
//! `f64::exp` is taken to be within 2 ulps (glibc and Rust's libm are
//! within 1).

use polycert_interval::{Fp, fp};

/// Largest `|σ_float(x) − σ(x)|` assumed of the deployed network's σ: 2^-20,
/// about 16 float32 ulps of 1 (libm-based σ is within a few ulps; onnxruntime's
/// polynomial σ within about 1e-7).
pub const SIGMOID_TOLERANCE: f64 = 1.0 / 1048576.0;

/// `exp(x)` enclosed: the library result widened by 2 ulps each way.
fn exp_enclosure(x: f64) -> (f64, f64) {
    let e = x.exp();
    if e == f64::INFINITY {
        return (f64::MAX, f64::INFINITY);
    }
    let lo = e.next_down().next_down().max(0.0);
    (lo, e.next_up().next_up())
}

/// `σ(x)` enclosed (exact reals, no deployed tolerance).
pub fn sigmoid_enclosure(x: f64) -> (f64, f64) {
    let (el, eh) = exp_enclosure(-x);
    let lo = fp::div_down(1.0, fp::add_up(1.0, eh));
    let hi = fp::div_up(1.0, fp::add_down(1.0, el));
    (lo.max(0.0), hi.min(1.0))
}

/// A lower bound of `σ'(x) = e^−|x| / (1 + e^−|x|)²`.
fn sigmoid_slope_down(x: f64) -> f64 {
    let (el, eh) = exp_enclosure(-x.abs());
    let d = fp::add_up(1.0, eh);
    fp::div_down(el, fp::mul_up(d, d)).max(0.0)
}

/// Relaxation of one neuron: `lam_lo·x + mu_lo ≤ y ≤ lam_up·x + mu_up` on
/// `[l, u]`, and bounds `lo ≤ y ≤ hi`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SCurveRelax<T> {
    pub lam_lo: T,
    pub mu_lo: T,
    pub lam_up: T,
    pub mu_up: T,
    pub lo: T,
    pub hi: T,
}

/// DeepPoly's σ relaxation on `[l, u]` for deployed values within `tol` of
/// σ (the analysis uses [`SIGMOID_TOLERANCE`]).
pub fn sigmoid_relax<T: Fp>(l: T, u: T, tol: f64) -> SCurveRelax<T> {
    let (lf, uf) = (l.to_f64_exact(), u.to_f64_exact());
    let (sl, su) = (sigmoid_enclosure(lf), sigmoid_enclosure(uf));
    // Output bounds: σ is increasing; the deployed value is in [0, 1].
    let lo64 = fp::sub_down(sl.0, tol).max(0.0);
    let hi64 = fp::add_up(su.1, tol).min(1.0);
    let (lo, hi) = (fp::from_f64_down::<T>(lo64), fp::from_f64_up::<T>(hi64));
    let flat = SCurveRelax { lam_lo: T::zero(), mu_lo: lo, lam_up: T::zero(), mu_up: hi, lo, hi };
    if !(lf.is_finite() && uf.is_finite()) || uf - lf <= 0.0 {
        return flat;
    }
    // Slopes as T values; every intercept below uses their exact value.
    let chord = T::from_f64_nearest(((su.0 + su.1) / 2.0 - (sl.0 + sl.1) / 2.0) / (uf - lf)).max(T::zero());
    let tangent = fp::from_f64_down::<T>(sigmoid_slope_down(lf).min(sigmoid_slope_down(uf)));
    // σ(x) − λx at an end, rounded down (from σ's lower end) or up.
    let at_down = |s: f64, lam: T, x: f64| fp::sub_down(s, fp::mul_up(lam.to_f64_exact(), x));
    let at_up = |s: f64, lam: T, x: f64| fp::sub_up(s, fp::mul_down(lam.to_f64_exact(), x));
    let (lam_lo, mu_lo) = if lf >= 0.0 {
        (chord, at_down(sl.0, chord, lf).min(at_down(su.0, chord, uf)))
    } else {
        (tangent, at_down(sl.0, tangent, lf))
    };
    let (lam_up, mu_up) = if uf <= 0.0 {
        (chord, at_up(sl.1, chord, lf).max(at_up(su.1, chord, uf)))
    } else {
        (tangent, at_up(su.1, tangent, uf))
    };
    let mu_lo = fp::from_f64_down::<T>(fp::sub_down(mu_lo, tol));
    let mu_up = fp::from_f64_up::<T>(fp::add_up(mu_up, tol));
    if !(mu_lo.is_finite() && mu_up.is_finite()) {
        return flat;
    }
    SCurveRelax { lam_lo, mu_lo, lam_up, mu_up, lo, hi }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sigma(x: f64) -> f64 {
        1.0 / (1.0 + (-x).exp())
    }

    #[test]
    fn enclosures_hold_known_values() {
        let (lo, hi) = sigmoid_enclosure(0.0);
        assert!(lo <= 0.5 && 0.5 <= hi && hi - lo < 1e-15);
        // σ(ln 3) = 3/4 exactly.
        let (lo, hi) = sigmoid_enclosure(3f64.ln());
        assert!(lo <= 0.75 + 1e-15 && 0.75 - 1e-15 <= hi);
        assert_eq!(sigmoid_enclosure(800.0).1, 1.0);
        assert_eq!(sigmoid_enclosure(-800.0).0, 0.0);
        // σ'(0) = 1/4.
        let s = sigmoid_slope_down(0.0);
        assert!(s <= 0.25 && s > 0.25 - 1e-15);
    }

    #[test]
    fn lines_bound_sigma_on_the_interval() {
        for &(l, u) in &[(-3.0, -1.0), (-2.0, 1.5), (0.5, 4.0), (-0.1, 0.1), (-30.0, 30.0), (2.0, 2.0 + 1e-9)] {
            for tol in [0.0, SIGMOID_TOLERANCE] {
                let r = sigmoid_relax::<f64>(l, u, tol);
                for k in 0..=1000 {
                    let x = l + (u - l) * k as f64 / 1000.0;
                    let (y, slack) = (sigma(x), 1e-15);
                    assert!(r.lam_lo * x + r.mu_lo <= y - tol + slack, "lower at {x} on [{l}, {u}]");
                    assert!(r.lam_up * x + r.mu_up >= y + tol - slack, "upper at {x} on [{l}, {u}]");
                    assert!(r.lo <= (y - tol).max(0.0) + slack && (y + tol).min(1.0) - slack <= r.hi);
                }
            }
        }
        // DeepPoly's choices: chord below on the concave side, tangent slope above.
        let r = sigmoid_relax::<f64>(0.5, 4.0, 0.0);
        assert!((r.lam_lo - (sigma(4.0) - sigma(0.5)) / 3.5).abs() < 1e-15);
        assert!((r.lam_up - sigma(4.0) * (1.0 - sigma(4.0))).abs() < 1e-12);
        // A tight interval gives nearly tight lines.
        let r = sigmoid_relax::<f64>(1.0, 1.0 + 1e-6, 0.0);
        assert!((r.lam_lo * 1.0 + r.mu_lo - sigma(1.0)).abs() < 1e-12);
        // Unbounded inputs: flat lines at [0, 1].
        let r = sigmoid_relax::<f32>(f32::NEG_INFINITY, 3.0, SIGMOID_TOLERANCE);
        assert_eq!((r.lam_lo, r.lam_up, r.mu_lo), (0.0, 0.0, 0.0));
    }
}
