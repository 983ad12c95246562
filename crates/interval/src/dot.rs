//! Sound dot products: enclosures of exact sums computed at full speed in
//! round-to-nearest, then widened once by an a-priori error bound.
//!
//! All accumulation happens in f64. A product of two f32 values is exact in
//! f64, and for f64 inputs each product rounds once. For `n` terms summed
//! in any order (blocked, split-K, pairwise, fused), Higham's bound gives
//! `|Ŝ − S| ≤ γ_n·Σ|x_i·y_i| + n·η` (η: smallest subnormal). We accumulate
//! `M̂ ≈ Σ|x_i|·|y_i|` alongside and widen by
//! `γ_{2n+2}·(M̂ + (n+1)·η) + 2(n+1)·η`, which covers the rounding of `M̂`
//! itself (`γ_n/(1−γ_n) ≤ γ_{2n}`). The constants are inflated so that the
//! widening can itself be evaluated in round-to-nearest.

use crate::fp::{self, Fp};
use crate::interval::Interval;

/// The precision of a float program whose rounding we must enclose.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FloatModel {
    /// Unit roundoff u (0 for exact arithmetic).
    pub unit_roundoff: f64,
    /// Smallest positive subnormal (0 for exact arithmetic).
    pub min_subnormal: f64,
}

impl FloatModel {
    /// A network evaluated in IEEE float32 (round-to-nearest).
    pub const F32: Self = Self { unit_roundoff: 5.960464477539063e-8, min_subnormal: f32::from_bits(1) as f64 };
    /// A network evaluated in IEEE float64.
    pub const F64: Self = Self { unit_roundoff: 1.1102230246251565e-16, min_subnormal: f64::from_bits(1) };
    /// The exact real network: no rounding to enclose.
    pub const EXACT: Self = Self { unit_roundoff: 0.0, min_subnormal: 0.0 };

    /// `γ_n = n·u / (1 − n·u)`, rounded up (`+inf` when `n·u ≥ 1`).
    pub fn gamma(self, n: usize) -> f64 {
        let nu = fp::mul_up(n as f64, self.unit_roundoff);
        let den = fp::sub_down(1.0, nu);
        if den <= 0.0 { f64::INFINITY } else { fp::div_up(nu, den) }
    }

    /// A magnitude below which no operation of the model overflows:
    /// `2^emax`, with `emax = 1 − emin` (IEEE 754 binary formats) and `emin`
    /// derived from `unit_roundoff = 2^-p` and `min_subnormal = 2^(emin+1-p)`
    /// (rounded so as to err low). `+inf` for the exact model.
    pub fn overflow_threshold(self) -> f64 {
        if self.unit_roundoff == 0.0 {
            return f64::INFINITY;
        }
        // floor(log2(x)) of a positive finite f64, exactly, from its bits.
        fn floor_log2(x: f64) -> i32 {
            let b = x.to_bits();
            let e = ((b >> 52) & 0x7ff) as i32;
            if e == 0 { -1011 - b.leading_zeros() as i32 } else { e - 1023 }
        }
        let ceil_log2 = |x: f64| {
            let e = floor_log2(x);
            if f64::powi(2.0, e) == x { e } else { e + 1 }
        };
        let p = -floor_log2(self.unit_roundoff); // >= -log2(u)
        let emin = ceil_log2(self.min_subnormal) + p - 1;
        let emax = (1 - emin).min(1023);
        f64::powi(2.0, emax)
    }

    /// Upper bound on `|fl(Σ_{i<n} w_i·x_i + b) − (Σ w_i·x_i + b)|` for any
    /// summation order, with or without FMA, given an upper bound
    /// `abs_sum ≥ Σ|w_i·x_i| + |b|` over `n` terms (the bias counts as one).
    pub fn rounding_error_bound(self, n: usize, abs_sum: f64) -> f64 {
        self.error_bound(n).of(abs_sum)
    }

    /// [`FloatModel::rounding_error_bound`] for `n` terms, its constants
    /// computed once (for a loop over many sums of `n` terms).
    pub fn error_bound(self, n: usize) -> ErrorBound {
        if self.unit_roundoff == 0.0 {
            return ErrorBound { g: 0.0, tiny: 0.0, exact: true };
        }
        ErrorBound { g: self.gamma(n), tiny: fp::mul_up((n + 1) as f64, self.min_subnormal), exact: false }
    }
}

/// The rounding error bound of sums of a fixed number of terms
/// ([`FloatModel::error_bound`]).
#[derive(Debug, Clone, Copy)]
pub struct ErrorBound {
    g: f64,
    tiny: f64,
    exact: bool,
}

impl ErrorBound {
    /// The bound for a magnitude sum `abs_sum`.
    pub fn of(self, abs_sum: f64) -> f64 {
        if self.exact { 0.0 } else { fp::add_up(fp::mul_up(self.g, abs_sum), self.tiny) }
    }
}

/// Widening for sums of `n` terms accumulated in f64.
#[derive(Debug, Clone, Copy)]
pub struct Widening {
    /// Factor on the magnitude sum.
    pub g: f64,
    /// Absolute term.
    pub c: f64,
}

impl Widening {
    pub fn for_terms(n: usize) -> Self {
        let m = FloatModel::F64;
        let g = m.gamma(2 * n + 2);
        let eta = m.min_subnormal;
        let c = fp::add_up(fp::mul_up(g, fp::mul_up((n + 1) as f64, eta)), fp::mul_up(2.0 * (n + 1) as f64, eta));
        // Inflate so that `fl(fl(mag·g') + c')` bounds `mag·g + c`.
        let infl = fp::div_up(1.0, fp::sub_down(1.0, 4.0 * m.unit_roundoff));
        Self { g: fp::mul_up(g, infl), c: fp::mul_up(c + 4.0 * eta, infl) }
    }

    /// Error bound for a sum with magnitude sum `mag`.
    #[inline(always)]
    pub fn error(self, mag: f64) -> f64 {
        mag * self.g + self.c
    }

    /// Enclosure `[lo, hi]` in f64 of a sum computed as `slo`/`shi`.
    #[inline(always)]
    pub fn apply(self, slo: f64, shi: f64, mag: f64) -> (f64, f64) {
        let e = self.error(mag);
        let lo = (slo - e).next_down();
        let hi = (shi + e).next_up();
        if lo.is_nan() || hi.is_nan() { (f64::NEG_INFINITY, f64::INFINITY) } else { (lo, hi) }
    }

    /// Enclosure as an `Interval<T>`, rounded outward into `T`.
    #[inline(always)]
    pub fn interval<T: Fp>(self, slo: f64, shi: f64, mag: f64) -> Interval<T> {
        let (lo, hi) = self.apply(slo, shi, mag);
        Interval::new_unchecked(fp::from_f64_down(lo), fp::from_f64_up(hi))
    }
}

/// Running sums of an interval dot product: lower sum, upper sum, magnitude.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DotAcc {
    pub lo: f64,
    pub hi: f64,
    pub mag: f64,
    pub n: usize,
}

impl DotAcc {
    /// Adds `x * w`.
    #[inline(always)]
    pub fn push<T: Fp>(&mut self, x: Interval<T>, w: T) {
        let w = w.to_f64_exact();
        let (a, b) = (x.lo().to_f64_exact() * w, x.hi().to_f64_exact() * w);
        let (mn, mx) = if a < b { (a, b) } else { (b, a) };
        self.lo += mn;
        self.hi += mx;
        self.mag += x.mag().to_f64_exact() * w.abs();
        self.n += 1;
    }

    /// Adds an interval constant (one more term).
    pub fn push_constant<T: Fp>(&mut self, c: Interval<T>) {
        self.lo += c.lo().to_f64_exact();
        self.hi += c.hi().to_f64_exact();
        self.mag += c.mag().to_f64_exact();
        self.n += 1;
    }

    /// Merges a partial accumulation (split-K).
    pub fn merge(&mut self, o: &DotAcc) {
        self.lo += o.lo;
        self.hi += o.hi;
        self.mag += o.mag;
        self.n += o.n;
    }

    /// Sound enclosure of the exact sum.
    pub fn finish<T: Fp>(&self) -> Interval<T> {
        Widening::for_terms(self.n).interval(self.lo, self.hi, self.mag)
    }

    /// Sound upper bound on the exact magnitude sum (`+inf` when the
    /// accumulated magnitude is NaN, e.g. from an infinite bound times a zero
    /// weight).
    pub fn mag_upper(&self) -> f64 {
        let w = Widening::for_terms(self.n);
        let m = (self.mag + w.error(self.mag)).next_up();
        if m.is_nan() { f64::INFINITY } else { m }
    }
}

/// Enclosure of the exact `Σ x_i·w_i`.
pub fn dot<T: Fp>(x: &[Interval<T>], w: &[T]) -> Interval<T> {
    assert_eq!(x.len(), w.len(), "dot: length mismatch");
    let mut acc = DotAcc::default();
    for (&xi, &wi) in x.iter().zip(w) {
        acc.push(xi, wi);
    }
    acc.finish()
}

/// Enclosure of the exact `Σ x_i·w_i` for two scalar slices.
pub fn dot_scalar<T: Fp>(x: &[T], w: &[T]) -> Interval<T> {
    assert_eq!(x.len(), w.len(), "dot_scalar: length mismatch");
    let mut acc = DotAcc::default();
    for (&xi, &wi) in x.iter().zip(w) {
        acc.push(Interval::new_unchecked(xi, xi), wi);
    }
    acc.finish()
}

/// Encloses every value that a float evaluation (precision `model`) of
/// `Σ w_i·x_i + b` can produce for `x_i ∈ x[i]`, in any summation order,
/// with or without FMA: the exact range widened by
/// `γ_{n+1}·(Σ|w_i|·|x_i| + |b|) + (n+2)·η`.
///
/// When some evaluation could overflow in the model's format (a product or
/// partial sum may reach [`FloatModel::overflow_threshold`]), the program can
/// return `±inf` or NaN, so the result is the whole line.
pub fn fp_dot_enclosure<T: Fp>(w: &[T], x: &[Interval<T>], b: T, model: FloatModel) -> Interval<T> {
    assert_eq!(x.len(), w.len(), "fp_dot_enclosure: length mismatch");
    let mut acc = DotAcc::default();
    for (&xi, &wi) in x.iter().zip(w) {
        acc.push(xi, wi);
    }
    let bias = Interval::new_unchecked(b, b);
    acc.push_constant(bias);
    let exact: Interval<f64> = Widening::for_terms(acc.n).interval(acc.lo, acc.hi, acc.mag);
    let mag = acc.mag_upper();
    let e = model.rounding_error_bound(acc.n, mag);
    // Every product and partial sum of any evaluation is at most `mag + e`
    // in magnitude; at or beyond the threshold it may round to infinity.
    let bound = fp::add_up(mag, e);
    if bound.is_nan() || bound >= model.overflow_threshold() {
        return Interval::entire();
    }
    let lo = fp::sub_down(exact.lo(), e);
    let hi = fp::add_up(exact.hi(), e);
    Interval::new_unchecked(fp::from_f64_down(lo), fp::from_f64_up(hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gamma_values() {
        let g = FloatModel::F32.gamma(10);
        assert!(g > 10.0 * 5.96e-8 && g < 10.0 * 5.97e-8);
        assert_eq!(FloatModel::EXACT.gamma(5), 0.0);
        assert_eq!(FloatModel::F32.gamma(1 << 25), f64::INFINITY);
    }

    #[test]
    fn dot_hand_values() {
        let x = [Interval::new(-1.0f32, 2.0).unwrap(), Interval::new(0.5, 1.0).unwrap()];
        let w = [2.0f32, -4.0];
        // [-2, 4] + [-4, -2] = [-6, 2]
        let d = dot(&x, &w);
        assert!(d.contains_interval(Interval::new(-6.0, 2.0).unwrap()));
        assert!(d.lo() > -6.0001 && d.hi() < 2.0001);
        let s = dot_scalar(&[0.1f64, 0.2], &[1.0, 1.0]);
        assert!(s.lo() <= 0.30000000000000004 && s.hi() >= 0.3);
    }

    #[test]
    fn fp_dot_enclosure_is_wider_than_exact() {
        let x = vec![Interval::new(0.0f32, 1.0).unwrap(); 100];
        let w = vec![0.01f32; 100];
        let exact = dot(&x, &w);
        let fpe = fp_dot_enclosure(&w, &x, 0.5, FloatModel::F32);
        assert!(fpe.lo() < exact.lo() + 0.5 && fpe.hi() > exact.hi() + 0.5);
        assert!(fpe.hi() - (exact.hi() + 0.5) < 1e-4);
    }

    #[test]
    fn overflow_thresholds() {
        assert_eq!(FloatModel::F32.overflow_threshold(), 2f64.powi(127));
        assert_eq!(FloatModel::F64.overflow_threshold(), 2f64.powi(1023));
        assert_eq!(FloatModel::EXACT.overflow_threshold(), f64::INFINITY);
    }

    #[test]
    fn fp_dot_enclosure_with_possible_overflow_is_entire() {
        // Found by polycert-soundness: in float32, 2e38 + 2e38 - 2e38 is inf
        // left to right (NaN in other cases), while the exact value is 2e38.
        let x = vec![Interval::point(2e38f32).unwrap(); 3];
        let w = [1.0f32, 1.0, -1.0];
        assert_eq!(fp_dot_enclosure(&w, &x, 0.0, FloatModel::F32), Interval::entire());
        // A NaN magnitude sum (infinite bound times a zero weight) too.
        let x = [Interval::new(1.0f32, f32::INFINITY).unwrap()];
        assert_eq!(fp_dot_enclosure(&[0.0], &x, 1.0, FloatModel::F32), Interval::entire());
        // No overflow possible: finite.
        let e = fp_dot_enclosure(&w, &[Interval::point(1e30f32).unwrap(); 3], 0.0, FloatModel::F32);
        assert!(e.lo().is_finite() && e.hi().is_finite() && e.contains(1e30));
    }

    #[test]
    fn nan_sums_become_entire() {
        let w = Widening::for_terms(2);
        assert_eq!(w.apply(f64::NAN, 1.0, 1.0), (f64::NEG_INFINITY, f64::INFINITY));
    }
}
