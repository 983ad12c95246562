//! Powers `x^e` with a constant exponent (ONNX Pow, Sqrt, Reciprocal, and
//! the squares and reciprocals the importer builds products and quotients
//! of two network values from) and exponentials `b^x` with a constant base
//! `b > 0`, as float inference computes them.
//!
//! Float powers are not always correctly rounded (libm's `powf` is within
//! an ulp, GPU libraries within a few), so the analysis takes the deployed
//! value of `f(x)` to lie in the band `f(x) ± (POWER_TOLERANCE·|f(x)| +
//! POWER_FLOOR)`. `f64::powf` is taken to be within 2 ulps.
//!
//! Where `f` may be undefined or leave float32 on the interval (a pole, a
//! negative base under a fractional exponent, a value past `f32::MAX`),
//! there is no relaxation: the analysis stops with an error.
//!
//! **Lines** (DeepPoly): where `f` keeps its sign and its convexity on
//! `[l, u]`, so does each edge of the band. Convex: the chord of the
//! upper edge (its excess over the line is largest at an end) and the
//! tangent of the lower edge at the midpoint `t`, whose intercept is
//! bounded below through convexity, `h(x) ≥ h(t) − |h'(t)|·max|x − t|`
//! with `h'(t)` enclosed. Concave: the mirror image. Elsewhere, constant
//! bounds. Slopes are float32 values, so every backend holds them exactly.

use super::elementwise::Relaxation;
use polycert_interval::fp;

/// Relative tolerance of the deployed power: 2^-20, 16 float32 ulps.
/// It also covers one float32 rounding of a product or quotient (2^-24)
/// spread over the squares it is built from (see the importer).
pub const POWER_TOLERANCE: f64 = 1.0 / 1048576.0;

/// Absolute tolerance: underflow to subnormals or to zero (2^-120).
pub const POWER_FLOOR: f64 = 7.52316384526264e-37;

/// `x^e` or `b^x`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PowerFn {
    /// `x^e`.
    Power(f64),
    /// `b^x`, `b > 0`.
    Exponential(f64),
}

/// `v` widened by 2 ulps each way (`None` where not finite).
fn widen(v: f64) -> Option<(f64, f64)> {
    v.is_finite().then(|| (v.next_down().next_down(), v.next_up().next_up()))
}

/// `k·[a, b]`, rounded outward.
fn scale(k: f64, (a, b): (f64, f64)) -> (f64, f64) {
    let (p, q) = (fp::mul_down(k, a), fp::mul_down(k, b));
    let (r, s) = (fp::mul_up(k, a), fp::mul_up(k, b));
    (p.min(q), r.max(s))
}

/// A band's relative and absolute half-widths.
type Tolerance = (f64, f64);

/// The deployed value's tolerance.
const DEPLOYED: Tolerance = (POWER_TOLERANCE, POWER_FLOOR);

/// The band of tolerance `(rel, abs)` around an enclosure `[a, b]` of `f(x)`.
fn band((a, b): (f64, f64), (rel, abs): Tolerance) -> (f64, f64) {
    let tol = fp::add_up(fp::mul_up(rel, a.abs().max(b.abs())), abs);
    (fp::sub_down(a, tol), fp::add_up(b, tol))
}

/// The nearest float32 value, as f64 (`None` past float32's range).
fn f32_slope(v: f64) -> Option<f64> {
    let s = v as f32;
    s.is_finite().then_some(s as f64)
}

impl std::fmt::Display for PowerFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PowerFn::Power(e) => write!(f, "x^{e}"),
            PowerFn::Exponential(b) => write!(f, "{b}^x"),
        }
    }
}

fn is_int(e: f64) -> bool {
    e == e.trunc()
}

impl PowerFn {
    pub fn eval(self, x: f64) -> f64 {
        match self {
            PowerFn::Power(e) => x.powf(e),
            PowerFn::Exponential(b) => b.powf(x),
        }
    }

    /// The derivative (0 where it is not finite).
    pub fn slope(self, x: f64) -> f64 {
        let d = match self {
            PowerFn::Power(0.0) => 0.0,
            PowerFn::Power(e) => e * x.powf(e - 1.0),
            PowerFn::Exponential(b) => b.ln() * b.powf(x),
        };
        if d.is_finite() { d } else { 0.0 }
    }

    /// Whether `f` is finite at every point of `[l, u]`.
    fn defined(self, l: f64, u: f64) -> bool {
        match self {
            PowerFn::Power(0.0) => true,
            PowerFn::Power(e) => (is_int(e) || l >= 0.0) && (e > 0.0 || l > 0.0 || u < 0.0),
            PowerFn::Exponential(b) => b > 0.0,
        }
    }

    /// `f(x)` enclosed (exact reals).
    fn at(self, x: f64) -> Option<(f64, f64)> {
        match self {
            PowerFn::Power(0.0) => Some((1.0, 1.0)),
            PowerFn::Power(1.0) => Some((x, x)),
            PowerFn::Power(2.0) => Some((fp::mul_down(x, x), fp::mul_up(x, x))),
            _ => widen(self.eval(x)),
        }
    }

    /// `f'(x)` enclosed.
    fn deriv(self, x: f64) -> Option<(f64, f64)> {
        match self {
            PowerFn::Power(0.0) => Some((0.0, 0.0)),
            PowerFn::Power(e) => Some(scale(e, PowerFn::Power(e - 1.0).at(x)?)),
            PowerFn::Exponential(b) => {
                let (ln, v) = (widen(b.ln())?, self.at(x)?);
                let c = [ln.0 * v.0, ln.0 * v.1, ln.1 * v.0, ln.1 * v.1];
                let lo = c.iter().map(|&p| p.next_down()).fold(f64::INFINITY, f64::min);
                Some((lo, c.iter().map(|&p| p.next_up()).fold(f64::NEG_INFINITY, f64::max)))
            }
        }
    }

    /// `f`'s sign on `[l, u]` (±1) and curvature (1 convex, −1 concave),
    /// where both are constant.
    fn shape(self, l: f64, u: f64) -> Option<(f64, i32)> {
        let PowerFn::Power(e) = self else { return Some((1.0, 1)) };
        let even = is_int(e) && (e / 2.0) == (e / 2.0).trunc();
        if l >= 0.0 {
            return Some((1.0, if !(0.0..=1.0).contains(&e) { 1 } else { -1 }));
        }
        match (u <= 0.0, even) {
            (true, true) => Some((1.0, 1)),
            (true, false) => Some((-1.0, -1)),
            // Across 0 (a positive integer exponent): x², x⁴, … are convex.
            (false, true) => Some((1.0, 1)),
            (false, false) => None,
        }
    }

    /// A sound relaxation of the deployed `f` over `[l, u]` (`l ≤ u`), or
    /// `None` where `f` may be undefined or leave float32 there.
    pub fn relax(self, lu: (f64, f64)) -> Option<Relaxation> {
        self.relax_within(lu, DEPLOYED)
    }

    /// A sound relaxation of the exact `f` (no deployed tolerance: for
    /// arithmetic that only the analysis does, a property's products).
    pub fn relax_exact(self, lu: (f64, f64)) -> Option<Relaxation> {
        self.relax_within(lu, (0.0, 0.0))
    }

    fn relax_within(self, (l, u): (f64, f64), tol: Tolerance) -> Option<Relaxation> {
        if !(l.is_finite() && u.is_finite() && self.defined(l, u)) {
            return None;
        }
        match self {
            PowerFn::Power(0.0) => return Some(Relaxation::between(1.0, 1.0)),
            PowerFn::Power(1.0) => return Some(Relaxation::identity((l, u))),
            _ => {}
        }
        let (fl, fu) = (self.at(l)?, self.at(u)?);
        let mut range = (fl.0.min(fu.0), fl.1.max(fu.1));
        if matches!(self, PowerFn::Power(e) if e > 0.0 && l < 0.0 && u > 0.0) {
            range.0 = range.0.min(0.0); // an even power's least value, at 0
        }
        // Each end with its own band: `v ∓ (rel·|v| + abs)` moves with `v`,
        // so the band's edges over the range are those at its ends (one band
        // around the whole range would be relative to its largest value).
        let (lo, hi) = (band((range.0, range.0), tol).0, band((range.1, range.1), tol).1);
        let max = f32::MAX as f64;
        if !(lo > -max && hi < max) {
            return None;
        }
        let flat = Relaxation::between(lo, hi);
        let Some((s, curv)) = self.shape(l, u).filter(|_| u > l) else { return Some(flat) };
        let lines = self.lines((l, u), (fl, fu), (s, curv), tol);
        Some(lines.map_or(flat, |[lam_lo, mu_lo, lam_up, mu_up]| Relaxation { lam_lo, mu_lo, lam_up, mu_up, lo, hi }))
    }

    /// The chord of the band's outer edge and the tangent of its inner edge.
    fn lines(
        self,
        (l, u): (f64, f64),
        (fl, fu): ((f64, f64), (f64, f64)),
        (s, curv): (f64, i32),
        tol: Tolerance,
    ) -> Option<[f64; 4]> {
        let mid = |v: (f64, f64)| v.0 / 2.0 + v.1 / 2.0;
        let chord = f32_slope((mid(fu) - mid(fl)) / (u - l))?;
        let t = l / 2.0 + u / 2.0;
        // The edge tangent at t: k·f with k = 1 ∓ η·s (the inner edge).
        let k = if curv > 0 { 1.0 - tol.0 * s } else { 1.0 + tol.0 * s };
        let g = scale(k, self.deriv(t)?);
        let tangent = f32_slope(mid(g))?;
        let d = fp::sub_up(tangent, g.0).max(fp::sub_up(g.1, tangent)).max(0.0);
        let reach = fp::mul_up(d, fp::sub_up(t, l).max(fp::sub_up(u, t)));
        let (bl, bu, bt) = (band(fl, tol), band(fu, tol), band(self.at(t)?, tol));
        let below = |y: f64, lam: f64, x: f64| fp::sub_down(y, fp::mul_up(lam, x));
        let above = |y: f64, lam: f64, x: f64| fp::sub_up(y, fp::mul_down(lam, x));
        let out = if curv > 0 {
            let mu_up = above(bl.1, chord, l).max(above(bu.1, chord, u));
            [tangent, fp::sub_down(below(bt.0, tangent, t), reach), chord, mu_up]
        } else {
            let mu_lo = below(bl.0, chord, l).min(below(bu.0, chord, u));
            [chord, mu_lo, tangent, fp::add_up(above(bt.1, tangent, t), reach)]
        };
        out.iter().all(|v| v.is_finite()).then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every relaxation holds the whole band at points across its interval.
    #[test]
    fn relaxations_hold_the_band() {
        let fs = [2.0, 3.0, 4.0, -1.0, -2.0, 0.5, -0.5, 1.5, 0.0, 1.0]
            .map(PowerFn::Power)
            .into_iter()
            .chain([2.0, 0.5, 10.0].map(PowerFn::Exponential));
        let grid: Vec<f64> = (-16..=16).map(|k| k as f64 * 0.375).collect();
        for f in fs {
            for (i, &l) in grid.iter().enumerate() {
                for &u in &grid[i..] {
                    let Some(r) = f.relax((l, u)) else {
                        assert!(!f.defined(l, u), "{f:?} on [{l}, {u}]");
                        continue;
                    };
                    for k in 0..=64 {
                        let x = l + (u - l) * k as f64 / 64.0;
                        let y = f.eval(x);
                        // x^0 and x^1 are exact.
                        let exact = matches!(f, PowerFn::Power(e) if e == 0.0 || e == 1.0);
                        let tol = if exact { 0.0 } else { POWER_TOLERANCE * y.abs() + POWER_FLOOR };
                        let (a, b) = (y - tol, y + tol);
                        let ok = r.lam_lo * x + r.mu_lo <= a && b <= r.lam_up * x + r.mu_up && r.lo <= a && b <= r.hi;
                        assert!(ok, "{f:?} on [{l}, {u}] at {x}: {y} vs {r:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn lines_are_tight_and_undefined_intervals_have_none() {
        let r = PowerFn::Power(2.0).relax((1.0, 3.0)).unwrap();
        assert_eq!(r.lam_up, 4.0);
        assert!((r.lam_lo - 4.0).abs() < 1e-5, "{r:?}");
        assert!((r.mu_up + 3.0).abs() < 1e-4 && (r.mu_lo + 4.0).abs() < 1e-4, "{r:?}");
        assert!(PowerFn::Power(-1.0).relax((-1.0, 1.0)).is_none());
        assert!(PowerFn::Power(0.5).relax((-1.0, 1.0)).is_none());
        assert!(PowerFn::Power(2.0).relax((0.0, 1e20)).is_none(), "past float32");
        assert!(PowerFn::Exponential(2.0).relax((0.0, 200.0)).is_none());
        assert_eq!(PowerFn::Power(0.0).relax((-5.0, 5.0)), Some(Relaxation::between(1.0, 1.0)));
    }
}
