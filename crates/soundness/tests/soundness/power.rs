//! The powers' relaxations (`x^e`, `b^x`: `polycert_deeppoly::PowerFn`)
//! hold the whole deployed band `f(x) ± (POWER_TOLERANCE·|f(x)| +
//! POWER_FLOOR)`, checked in exact rationals against `f(x)` computed with
//! 300-bit MPFR: for random exponents, bases and input intervals (around
//! 0 as often as elsewhere), at both ends and random points in between.
//! Where no relaxation is given, the function must be undefined or leave
//! float32 somewhere on the interval. `POWER_CASES` intervals (default 10^5).

use polycert_deeppoly::PowerFn;
use polycert_deeppoly::base::power::{POWER_FLOOR, POWER_TOLERANCE};
use polycert_deeppoly::base::rng::SplitMix;
use rug::ops::Pow;
use rug::{Float, Rational};

fn q(x: f64) -> Rational {
    Rational::from_f64(x).expect("finite")
}

/// `f(x)` to 300 bits, as a rational (`None` where it is not finite).
fn exact(f: PowerFn, x: f64) -> Option<Rational> {
    let p = 300;
    let v = match f {
        PowerFn::Power(e) => Float::with_val(p, x).pow(&Float::with_val(p, e)),
        PowerFn::Exponential(b) => Float::with_val(p, b).pow(&Float::with_val(p, x)),
    };
    v.to_rational()
}

fn function(rng: &mut SplitMix) -> PowerFn {
    let exps = [2.0, 3.0, 4.0, -1.0, -2.0, -3.0, 0.5, -0.5, 1.5, 2.5, 0.0, 1.0];
    match rng.below(4) {
        0 => PowerFn::Exponential([2.0, 0.5, 10.0, 1.0 + rng.unit() * 3.0][rng.below(4)] as f32 as f64),
        1 => PowerFn::Power(((rng.unit() * 8.0 - 4.0) as f32) as f64),
        _ => PowerFn::Power(exps[rng.below(exps.len())]),
    }
}

/// A float32 value of a random scale.
fn value(rng: &mut SplitMix) -> f64 {
    let scale = [0.01, 1.0, 4.0, 100.0, 1e6][rng.below(5)];
    ((rng.unit() * 2.0 - 1.0) * scale) as f32 as f64
}

#[test]
fn relaxations_hold_the_band_exactly() {
    let cases: usize = std::env::var("POWER_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let mut rng = SplitMix(0x90E5);
    let (eta, floor) = (q(POWER_TOLERANCE), q(POWER_FLOOR));
    let (mut related, mut refused) = (0, 0);
    for _ in 0..cases {
        let f = function(&mut rng);
        let (a, b) = if rng.below(3) == 0 { (0.0, value(&mut rng)) } else { (value(&mut rng), value(&mut rng)) };
        let (l, u) = (a.min(b), a.max(b));
        let mut points = vec![l, u, l / 2.0 + u / 2.0];
        points.extend((0..4).map(|_| (l + (u - l) * rng.unit()).clamp(l, u)));
        let Some(r) = f.relax((l, u)) else {
            // Undefined, infinite or past float32 somewhere on [l, u].
            let max = q(f32::MAX as f64);
            let bad = |x: f64| exact(f, x).is_none_or(|y| y.abs() >= max);
            let undefined =
                matches!(f, PowerFn::Power(e) if (e < 0.0 && l <= 0.0 && u >= 0.0) || (e != e.trunc() && l < 0.0));
            assert!(undefined || points.iter().any(|&x| bad(x)) || bad(0.0), "{f:?} on [{l}, {u}]: no relaxation");
            refused += 1;
            continue;
        };
        related += 1;
        // x^0 and x^1 are exact in deployment too.
        let exact_fn = matches!(f, PowerFn::Power(e) if e == 0.0 || e == 1.0);
        for x in points {
            let y = exact(f, x).unwrap_or_else(|| panic!("{f:?} relaxed on [{l}, {u}] but undefined at {x}"));
            let tol = if exact_fn { Rational::new() } else { eta.clone() * y.clone().abs() + &floor };
            let (lo_y, hi_y) = (y.clone() - &tol, y + &tol);
            let (lo_line, up_line) = (q(r.lam_lo) * q(x) + q(r.mu_lo), q(r.lam_up) * q(x) + q(r.mu_up));
            assert!(lo_line <= lo_y && hi_y <= up_line, "{f:?} on [{l}, {u}] at {x}: lines {r:?}");
            assert!(q(r.lo) <= lo_y && hi_y <= q(r.hi), "{f:?} on [{l}, {u}] at {x}: bounds {r:?}");
        }
    }
    assert!(related > cases / 3 && refused > cases / 20, "{related} relaxed, {refused} refused");
}
