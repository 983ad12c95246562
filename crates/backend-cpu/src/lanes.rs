//! Branch-free kernels over contiguous runs of a row: the element-wise
//! terms of the point steps summed in [`W`] f64 lanes, so the compiler
//! vectorises them. A row's sums are widened for any summation order of
//! its terms (zero terms add exactly), so lanes change no bound's validity.
//!
//! [`twin!`] compiles a row function three times, for the baseline, AVX2
//! and AVX-512, and picks one at run time. Rust never fuses a multiply and
//! an add by itself, so all copies round alike.

use polycert_interval::Fp;

/// Lanes per running sum.
pub const W: usize = 8;

/// Three running sums in lanes: a row's terms `s`, their magnitudes `m`,
/// and the rounding errors `e` it pays.
#[derive(Clone, Copy)]
pub struct Lanes {
    s: [f64; W],
    m: [f64; W],
    e: [f64; W],
}

impl Lanes {
    pub fn new() -> Self {
        Lanes { s: [0.0; W], m: [0.0; W], e: [0.0; W] }
    }

    /// `(Σ s, Σ m, Σ e)`.
    pub fn total(&self) -> (f64, f64, f64) {
        let sum = |v: &[f64; W]| v.iter().sum::<f64>();
        (sum(&self.s), sum(&self.m), sum(&self.e))
    }

    #[inline(always)]
    fn add(&mut self, l: usize, (s, m, e): (f64, f64, f64)) {
        self.s[l] += s;
        self.m[l] += m;
        self.e[l] += e;
    }

    /// Concretization terms: `a_k·x_k` with `x_k` the end of `[lo_k, hi_k]`
    /// that minimises it (0 where `a_k = 0`, even at an infinite end).
    #[inline(always)]
    pub fn min_terms<T: Fp>(&mut self, a: &[T], lo: &[T], hi: &[T]) {
        let n = a.len();
        let whole = n / W * W;
        for c in (0..whole).step_by(W) {
            let (a, lo, hi) = (chunk(a, c), chunk(lo, c), chunk(hi, c));
            for l in 0..W {
                self.add(l, min_term(a[l], lo[l], hi[l]));
            }
        }
        for k in whole..n {
            self.add(k - whole, min_term(a[k], lo[k], hi[k]));
        }
    }

    /// An affine step's constant terms: `min(a_k·b_lo, a_k·b_hi)`, its
    /// magnitude bound `|a_k|·max(|b_lo|, |b_hi|)`, and `|a_k|·wr_k`.
    #[inline(always)]
    pub fn affine_terms<T: Fp>(&mut self, a: &[T], (bl, bh): (&[T], &[T]), wr: &[T]) {
        let n = a.len();
        let whole = n / W * W;
        for c in (0..whole).step_by(W) {
            let (a, bl, bh, wr) = (chunk(a, c), chunk(bl, c), chunk(bh, c), chunk(wr, c));
            for l in 0..W {
                self.add(l, affine_term(a[l], bl[l], bh[l], wr[l]));
            }
        }
        for k in whole..n {
            self.add(k - whole, affine_term(a[k], bl[k], bh[k], wr[k]));
        }
    }

    /// The point ReLU (or σ) terms, writing the new coefficients `o`: see
    /// [`relu_term`].
    #[inline(always)]
    pub fn relu_terms<T: Fp>(&mut self, a: &[T], o: &mut [T], lam: (&[T], &[T]), mu: (&[T], &[T]), r: &[T]) {
        let n = a.len();
        let whole = n / W * W;
        for c in (0..whole).step_by(W) {
            let (a, ll, lu, mu, ml, r) =
                (chunk(a, c), chunk(lam.0, c), chunk(lam.1, c), chunk(mu.0, c), chunk(mu.1, c), chunk(r, c));
            let o: &mut [T; W] = (&mut o[c..c + W]).try_into().expect("a whole chunk");
            for l in 0..W {
                let (g, t) = relu_term(a[l], (ll[l], lu[l]), (mu[l], ml[l]), r[l]);
                o[l] = g;
                self.add(l, t);
            }
        }
        for k in whole..n {
            let (g, t) = relu_term(a[k], (lam.0[k], lam.1[k]), (mu.0[k], mu.1[k]), r[k]);
            o[k] = g;
            self.add(k - whole, t);
        }
    }
}

/// The [`W`] values of `v` from `c` on.
#[inline(always)]
fn chunk<T>(v: &[T], c: usize) -> &[T; W] {
    v[c..c + W].try_into().expect("a whole chunk")
}

#[inline(always)]
fn min_term<T: Fp>(a: T, lo: T, hi: T) -> (f64, f64, f64) {
    let x = if a > T::zero() { lo } else { hi };
    let p = a.to_f64_exact() * x.to_f64_exact();
    let p = if a == T::zero() { 0.0 } else { p };
    (p, p.abs(), 0.0)
}

#[inline(always)]
fn affine_term<T: Fp>(a: T, bl: T, bh: T, wr: T) -> (f64, f64, f64) {
    let a = a.to_f64_exact();
    let (l, h) = (bl.to_f64_exact(), bh.to_f64_exact());
    let p = (a * l).min(a * h);
    let q = a.abs() * l.abs().max(h.abs());
    let e = a.abs() * wr.to_f64_exact();
    if a == 0.0 { (0.0, 0.0, 0.0) } else { (p, q, e) }
}

/// One column of the point ReLU (or σ) step: `g = fl(a·λ)` (λ: `lam.0`
/// where `a > 0`, else `lam.1`) and the terms `a·μ` (μ: `mu.0` where
/// `a < 0`, else `mu.1`) and `err·r`, where `err` bounds g's rounding: 0
/// for λ ∈ {0, 1} (exact), else `2u·|g| + 4η` (round-to-nearest:
/// `u·|g| + η/2`, doubled).
#[inline(always)]
fn relu_term<T: Fp>(a: T, lam: (T, T), mu: (T, T), r: T) -> (T, (f64, f64, f64)) {
    let (u2, eta4) = (2.0 * T::UNIT_ROUNDOFF, 4.0 * T::MIN_SUBNORMAL.to_f64_exact());
    let zero = a == T::zero();
    let l = if a > T::zero() { lam.0 } else { lam.1 };
    let g = if zero { T::zero() } else { a * l };
    let gf = g.to_f64_exact();
    let exact = zero || l == T::zero() || l == T::one();
    let err = if gf.abs() < f64::INFINITY { if exact { 0.0 } else { u2 * gf.abs() + eta4 } } else { f64::INFINITY };
    let e = if err > 0.0 { err * r.to_f64_exact() } else { 0.0 };
    let c = if a < T::zero() { mu.0 } else { mu.1 };
    let p = if zero { 0.0 } else { a.to_f64_exact() * c.to_f64_exact() };
    (g, (p, p.abs(), e))
}

/// Whether this CPU runs AVX2 and FMA code (asked once).
#[cfg(target_arch = "x86_64")]
pub fn has_avx2() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
}

/// Whether this CPU runs AVX-512 code (F and VL, asked once).
#[cfg(target_arch = "x86_64")]
pub fn has_avx512() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| has_avx2() && is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vl"))
}

/// A generic row function compiled for the baseline, for AVX2 and for
/// AVX-512, the copy picked at run time.
macro_rules! twin {
    ($(#[$m:meta])* $vis:vis fn $name:ident<T: Fp>($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty $body:block) => {
        $(#[$m])*
        $vis fn $name<T: Fp>($($arg: $ty),*) -> $ret {
            #[inline(always)]
            fn body<T: Fp>($($arg: $ty),*) -> $ret $body
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            fn wide<T: Fp>($($arg: $ty),*) -> $ret {
                body($($arg),*)
            }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
            fn widest<T: Fp>($($arg: $ty),*) -> $ret {
                body($($arg),*)
            }
            #[cfg(target_arch = "x86_64")]
            if $crate::lanes::has_avx512() {
                // SAFETY: the CPU runs AVX-512 F/VL, AVX2 and FMA code (checked above).
                return unsafe { widest($($arg),*) };
            }
            #[cfg(target_arch = "x86_64")]
            if $crate::lanes::has_avx2() {
                // SAFETY: the CPU runs AVX2 and FMA code (checked above).
                return unsafe { wide($($arg),*) };
            }
            body($($arg),*)
        }
    };
}
pub(crate) use twin;

#[cfg(test)]
mod tests {
    use super::*;

    /// The lane sums equal the plain sums (exact here: small integers).
    #[test]
    fn lanes_sum_every_term_once() {
        for n in [0, 1, 7, 8, 9, 23, 64] {
            let a: Vec<f32> = (0..n).map(|k| (k as f32) - 5.0).collect();
            let (lo, hi): (Vec<f32>, Vec<f32>) = (0..n).map(|k| (-(k as f32), k as f32 + 1.0)).unzip();
            let mut acc = Lanes::new();
            acc.min_terms(&a, &lo, &hi);
            let want: f64 = a
                .iter()
                .zip(lo.iter().zip(&hi))
                .map(|(&a, (&l, &h))| f64::from(a) * f64::from(if a > 0.0 { l } else { h }))
                .sum();
            let (s, m, e) = acc.total();
            assert_eq!((s, e), (want, 0.0), "n = {n}");
            assert!(m >= s.abs());
        }
    }

    /// A zero coefficient contributes nothing, even at an infinite end.
    #[test]
    fn zero_coefficients_skip_infinite_ends() {
        let mut acc = Lanes::new();
        acc.min_terms(&[0.0f64, 2.0], &[f64::NEG_INFINITY, 1.0], &[f64::INFINITY, 3.0]);
        assert_eq!(acc.total(), (2.0, 2.0, 0.0));
    }
}
