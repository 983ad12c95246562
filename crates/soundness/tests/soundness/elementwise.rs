//! The exact elementwise functions' relaxations (steps, selections and
//! truncations: `polycert_deeppoly::Elementwise`) hold in exact rational
//! arithmetic: for random thresholds, constants and input intervals, the
//! lines and bounds hold at both ends, at the threshold and its float
//! neighbours, and at random points in between. `ELEMENTWISE_CASES`
//! intervals (default 10^5).

use polycert_deeppoly::base::rng::SplitMix;
use polycert_deeppoly::{Cmp, Elementwise, Piece};
use rug::Rational;

fn q(x: f64) -> Rational {
    Rational::from_f64(x).expect("finite")
}

/// A float32 value of a random scale (exact in f64).
fn value(rng: &mut SplitMix) -> f64 {
    let scale = [0.5, 4.0, 1e3, 3e9, 1e19][rng.below(5)];
    ((rng.unit() * 2.0 - 1.0) * scale) as f32 as f64
}

fn function(rng: &mut SplitMix) -> Elementwise {
    let cmps = [Cmp::Gt, Cmp::Ge, Cmp::Lt, Cmp::Le, Cmp::Eq, Cmp::Ne];
    let piece = |rng: &mut SplitMix| if rng.below(2) == 0 { Piece::Value } else { Piece::Const(value(rng)) };
    match rng.below(3) {
        0 => Elementwise::Trunc { bits: [8, 32, 64][rng.below(3)] },
        _ => Elementwise::Select { cmp: cmps[rng.below(6)], at: value(rng), then: piece(rng), other: piece(rng) },
    }
}

#[test]
fn relaxations_hold_exactly() {
    let cases: usize = std::env::var("ELEMENTWISE_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let mut rng = SplitMix(0xE1E7);
    for _ in 0..cases {
        let f = function(&mut rng);
        let at = match f {
            Elementwise::Select { at, .. } => at,
            Elementwise::Trunc { bits } => 2f64.powi(bits as i32 - 1),
            Elementwise::Power(_) | Elementwise::Square => unreachable!("not drawn here: see power.rs"),
        };
        // Intervals around the threshold as often as elsewhere.
        let (a, b) = if rng.below(2) == 0 { (value(&mut rng), value(&mut rng)) } else { (at, value(&mut rng)) };
        let (l, u) = (a.min(b), a.max(b));
        let r = f.relax((l, u)).expect("steps always relax");
        let mut points = vec![l, u, at, at.next_up(), at.next_down(), -at];
        points.extend((0..4).map(|_| l + (u - l) * rng.unit()));
        for x in points.into_iter().filter(|&x| l <= x && x <= u) {
            let y = q(f.eval(x));
            let (lo_line, up_line) = (q(r.lam_lo) * q(x) + q(r.mu_lo), q(r.lam_up) * q(x) + q(r.mu_up));
            assert!(lo_line <= y && y <= up_line, "{f:?} on [{l}, {u}] at {x}: lines {r:?}");
            assert!(q(r.lo) <= y && y <= q(r.hi), "{f:?} on [{l}, {u}] at {x}: bounds {r:?}");
        }
    }
}
