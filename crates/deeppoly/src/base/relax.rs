//! The ReLU relaxation of DeepPoly, rounded so that it stays sound.

use polycert_interval::{Fp, fp};

/// Choice of the lower line `y ≥ λ·x` for unstable ReLUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum ReluLower {
    /// λ = 1 when `u > −l`, else 0 (DeepPoly's minimal-area choice).
    #[default]
    Area,
    Zero,
    One,
}

/// Relaxation of one neuron: `y ≥ lam_lo·x`, `y ≤ lam_up·x + mu_up`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReluRelax<T> {
    pub lam_lo: T,
    pub lam_up: T,
    pub mu_up: T,
}

/// Whether a ReLU with input range `[l, u]` is unstable (straddles 0):
/// only then is its relaxation inexact and its lower slope free.
pub fn unstable<T: Fp>(l: T, u: T) -> bool {
    l < T::zero() && u > T::zero()
}

/// Relaxation for an input range `[l, u]`. The upper line uses the slope
/// `λ = u/(u − l)` rounded to nearest, and an intercept rounded up so the
/// line lies above ReLU at both ends of `[l, u]` (hence on all of it).
pub fn relu_relax<T: Fp>(l: T, u: T, lower: ReluLower) -> ReluRelax<T> {
    let (zero, one) = (T::zero(), T::one());
    if u <= zero {
        return ReluRelax { lam_lo: zero, lam_up: zero, mu_up: zero };
    }
    if l >= zero {
        return ReluRelax { lam_lo: one, lam_up: one, mu_up: zero };
    }
    let lam_lo = match lower {
        ReluLower::Area => {
            if u > -l {
                one
            } else {
                zero
            }
        }
        ReluLower::Zero => zero,
        ReluLower::One => one,
    };
    if !u.is_finite() || !l.is_finite() {
        // No useful line: y ≤ u is all we know (u may be +inf).
        return ReluRelax { lam_lo, lam_up: zero, mu_up: u };
    }
    let (lf, uf) = (l.to_f64_exact(), u.to_f64_exact());
    let lam = T::from_f64_nearest(uf / (uf - lf)).min(one).max(zero);
    let lam64 = lam.to_f64_exact();
    // μ ≥ −λ·l (x = l) and μ ≥ u − λ·u (x = u), both rounded up.
    let at_l = fp::mul_up(-lam64, lf);
    let at_u = fp::sub_up(uf, fp::mul_down(lam64, uf));
    let mu = fp::from_f64_up::<T>(at_l.max(at_u));
    ReluRelax { lam_lo, lam_up: lam, mu_up: mu }
}

/// Lower slopes per node (indexed by node id; empty but for ReLU nodes),
/// one per neuron; read where the neuron's input straddles 0.
pub(crate) type Slopes = Vec<Vec<f64>>;

/// Per node `p` (a ReLU's input), the lower slopes its refinement uses
/// (`crown::tighten::layer_slopes`) for its lower ends, then for its upper ends (`None`:
/// the relaxation's own).
pub(crate) type LayerSlopes = Vec<[Option<Slopes>; 2]>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upper_line_dominates_relu_at_both_ends() {
        for &(l, u) in &[(-1.0f32, 1.0), (-0.3, 0.7), (-1e-3, 5.0), (-7.0, 1e-4), (-0.1, 0.1)] {
            let r = relu_relax(l, u, ReluLower::Area);
            let up = |x: f32| r.lam_up as f64 * x as f64 + r.mu_up as f64;
            assert!(up(l) >= 0.0 && up(u) >= u as f64, "{l} {u} {r:?}");
        }
        let r = relu_relax(-1.0f64, 3.0, ReluLower::Area);
        assert_eq!((r.lam_lo, r.lam_up, r.mu_up), (1.0, 0.75, 0.75));
        assert_eq!(relu_relax(-3.0f64, 1.0, ReluLower::Area).lam_lo, 0.0);
        assert_eq!(relu_relax(0.5f64, 1.0, ReluLower::Zero).lam_up, 1.0);
    }
}
