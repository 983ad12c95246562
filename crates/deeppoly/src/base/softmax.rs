//! Properties of a model whose deployed outputs are the Softmax of the
//! network's (the importer drops a final Softmax).
//!
//! Softmax keeps the order of the outputs over the reals, so a comparison
//! `s_a ≤ s_b` of Softmax outputs is `y_a ≤ y_b` of the logits. In float32
//! it can tie or flip near equality. With `m = max y`, `a_k = fl(y_k − m)`
//! (error `≤ u·2M`, `u = 2^-24`, `M ≥ max |y|`), `exp` within a relative
//! `2^-20` (assumed, like σ's tolerance) and one rounding of the
//! normalisation (the same divisor for every output):
//! `y_b − y_a > 2^-18 + 2^-22·M` implies `s_b > s_a` in float32, as long as
//! `s_a` is a normal float32 number (below `2^-126` the spacing is absolute,
//! `2^-149`, and nearby outputs tie). With `n` outputs the divisor is at
//! most about `n`, so `s_a` is normal when `y_a` is within
//! [`normal_range`]`(n)` of every output's upper bound.
//! So a comparison half-space `y_a − y_b ≤ 0` is proved infeasible only
//! with that margin and that range; a counterexample must reach it with
//! that margin (ties and underflow then only help it).

use crate::base::property::Halfspace;
use polycert_interval::fp;

/// How far below the largest logit an output's Softmax stays a normal
/// float32 number with `n` outputs: each `exp` is at most `1 + 2^-20`, the
/// float32 sum of `n` of them at most `n(1 + 2^-20)(1 + γ_n)`, so
/// `exp(−r)/divisor ≥ 2^-126` for `r = 126·ln 2 − ln n − ln(1 + γ_n) − 1/8`
/// (the eighth covers `exp`'s and the subtraction's errors). Negative or
/// `−inf` (nothing proved) for huge `n`.
pub fn normal_range(n: usize) -> f64 {
    let sum = polycert_interval::FloatModel::F32.gamma(n.max(1));
    126.0 * std::f64::consts::LN_2 - (n.max(1) as f64).ln() - sum.ln_1p() - 0.125
}

/// The margin `2^-18 + 2^-22·M` (rounded up) for logits of magnitude `≤ m`.
pub fn margin(m: f64) -> f64 {
    fp::add_up(1.0 / 262144.0, fp::mul_up(m.abs(), 1.0 / 4194304.0))
}

/// Whether `c·s ≤ d` compares two outputs (`a·s_i − a·s_j ≤ 0`, `a > 0`),
/// the only half-spaces whose meaning a Softmax keeps.
pub fn is_comparison(h: &Halfspace) -> bool {
    let nz: Vec<f64> = h.c.iter().copied().filter(|&v| v != 0.0).collect();
    h.d == 0.0 && matches!(nz[..], [a, b] if a == -b)
}

/// The index with the positive coefficient of a comparison (the output
/// that must stay larger).
pub fn larger(h: &Halfspace) -> Option<usize> {
    h.c.iter().position(|&v| v > 0.0)
}

/// Whether the Softmax output `a` stays a normal float32 number for
/// logits within `lo`/`hi` (as many as the outputs).
pub fn no_underflow(a: usize, lo: &[f64], hi: &[f64]) -> bool {
    let top = hi.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
    fp::sub_down(lo[a], top) >= -normal_range(lo.len())
}

/// The largest magnitude of outputs bounded by `lo`/`hi`.
pub fn magnitude(lo: &[f64], hi: &[f64]) -> f64 {
    lo.iter().chain(hi).fold(0.0, |m, v| m.max(v.abs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Float32 Softmax as onnxruntime computes it (max subtracted first).
    fn softmax32(y: &[f32]) -> Vec<f32> {
        let m = y.iter().copied().fold(f32::MIN, f32::max);
        let e: Vec<f32> = y.iter().map(|&v| (v - m).exp()).collect();
        let s: f32 = e.iter().sum();
        e.iter().map(|&v| v / s).collect()
    }

    #[test]
    fn comparisons() {
        let h = |c: Vec<f64>, d| Halfspace::new(c, d);
        assert!(is_comparison(&h(vec![1.0, 0.0, -1.0], 0.0)));
        assert!(is_comparison(&h(vec![0.0, -2.0, 2.0], 0.0)));
        assert!(!is_comparison(&h(vec![1.0, -1.0], 0.5)));
        assert!(!is_comparison(&h(vec![1.0, 0.0], 0.0)));
        assert!(!is_comparison(&h(vec![1.0, -1.0, 1.0], 0.0)));
        assert!(!is_comparison(&h(vec![1.0, -0.5], 0.0)));
    }

    /// Logits closer than the margin can tie after float32 Softmax; logits
    /// further apart never do (checked on many nearby pairs).
    #[test]
    fn the_margin_separates_float_softmax_outputs() {
        let tie = softmax32(&[0.0, 1e-9, -5.0]);
        assert_eq!(tie[0], tie[1], "below the margin, Softmax ties");
        for m in [1.0f32, 30.0, 1000.0] {
            // Every output below is within 80 + m in magnitude.
            let tau = margin(m as f64 + 80.0) as f32;
            for k in 0..2000 {
                // Outputs within 80 of the largest (no underflow).
                let a = m * (k as f32 / 1000.0 - 1.0);
                let b = a + tau * (1.0 + (k % 7) as f32 / 3.0);
                let s = softmax32(&[a, b, a - 1.0, a - 79.0]);
                assert!(s[1] > s[0], "{a} vs {b} (margin {tau}): {s:?}");
                let s = softmax32(&[b, a, b + 79.0]);
                assert!(s[0] > s[1], "{b} vs {a} below the top (margin {tau}): {s:?}");
            }
        }
    }

    /// Within `normal_range(n)` of the top, with every other output at the
    /// top (the largest divisor), Softmax outputs are normal and keep their
    /// order; 80 below the top of 10^6 outputs they are subnormal (issue 42:
    /// onnxruntime then ties logits 6.1e-5 apart), and nothing is proved.
    #[test]
    fn compared_outputs_must_be_normal() {
        for n in [2usize, 10, 1000, 100_000] {
            let r = normal_range(n) as f32;
            let mut y = vec![0.0f32; n];
            y[0] = -r;
            y[1] = -r + margin(r as f64) as f32;
            let s = softmax32(&y);
            assert!(s[0] >= f32::MIN_POSITIVE && s[1] > s[0], "{n} outputs: {} {}", s[0], s[1]);
        }
        let n = 1_000_000;
        let (mut lo, mut hi) = (vec![0.0; n], vec![0.0; n]);
        (lo[0], hi[0], lo[1], hi[1]) = (-80.0, -80.0, -80.0 + 6.1e-5, -80.0 + 6.1e-5);
        assert!(!no_underflow(0, &lo, &hi) && !no_underflow(1, &lo, &hi));
        (lo[0], hi[0]) = (-73.0, -73.0);
        assert!(no_underflow(0, &lo, &hi) && no_underflow(2, &lo, &hi));
        assert!(normal_range(n) > 73.0 && normal_range(n) < 74.0);
    }
}
