//! Random case data for the point-kernel checks: scales near the float
//! limits, values, magnitudes, interval planes, row coefficients.

use crate::common::kernels::{placed, rand_geom, rand_shape};
use crate::common::{ExactSum, TF, pow2, ru};
use polycert_deeppoly::base::rng::SplitMix;
use polycert_deeppoly::{Geom, Shape};

/// Exponents `2^96 ≈ 1e29` of the big and small scales.
pub(super) const K: i32 = 96;

/// Base-2 exponents of a case's data: coefficients `a`, weights or
/// multipliers `w`, magnitudes `r` and bounds, biases and constants `b`;
/// each value's exponent lies within `spread` of its base.
pub(super) struct Sc {
    pub a: i32,
    pub w: i32,
    pub r: i32,
    pub b: i32,
    pub spread: i32,
}

pub(super) fn scales<T: TF>(rng: &mut SplitMix) -> Sc {
    // Products a·w in the subnormal range of T (each factor normal).
    let sub = (2 * T::EMIN_SUB + T::MANT as i32) / 4;
    let signed = |rng: &mut SplitMix| rng.below(2 * K as usize + 1) as i32 - K;
    let (a, w, r, b) = match rng.below(9) {
        0..=2 => (0, 0, 0, 0),
        3 => (K, -K, 0, 0),
        4 => (-K, K, -K, K),
        5 => (K, 0, -K, -K),
        6 => (sub, sub, K, 0),
        7 if rng.below(2) == 0 => (T::EMIN_SUB + 12, 0, K, 0), // subnormal coefficients
        7 => (-K, -K, K, K),                                   // a·w underflows to zero in f32
        _ => {
            let (a, w, r) = (signed(rng), signed(rng), signed(rng));
            let w = w.min(K - a.max(0));
            (a, w, r.min(K - w.max(0)), signed(rng))
        }
    };
    let spread = if (a, w, r, b) == (0, 0, 0, 0) { [0, 3, 8, 20][rng.below(4)] } else { [0, 3, 8][rng.below(3)] };
    Sc { a, w, r, b, spread }
}

/// A value of magnitude about `2^e` (within `spread`): ±0, few mantissa
/// bits, or a full mantissa (in the subnormal range it rounds).
pub(super) fn val<T: TF>(rng: &mut SplitMix, e: i32, spread: i32) -> T {
    let e = (e + rng.below(2 * spread as usize + 1) as i32 - spread).clamp(T::EMIN_SUB, T::EMAX - 1);
    let m = match rng.below(10) {
        0 => return T::zero(),
        1 => return -T::zero(),
        2 | 3 => (rng.below(64) as f64 + 1.0) / 64.0,
        _ => 1.0 + rng.unit(),
    };
    let x = T::from_f64_nearest(m) * pow2::<T>(e);
    if rng.below(2) == 0 { -x } else { x }
}

pub(super) fn vals<T: TF>(rng: &mut SplitMix, n: usize, e: i32, spread: i32) -> Vec<T> {
    (0..n).map(|_| val(rng, e, spread)).collect()
}

/// Magnitudes `r ≥ 0`: some zero, and in one case of 16 some infinite.
pub(super) fn mags<T: TF>(rng: &mut SplitMix, n: usize, sc: &Sc) -> Vec<T> {
    let inf = rng.below(16) == 0;
    (0..n)
        .map(|_| if inf && rng.below(24) == 0 { T::infinity() } else { val::<T>(rng, sc.r, sc.spread).abs() })
        .collect()
}

/// An interval plane pair `lo ≤ hi` (often of width zero).
pub(super) fn ivs<T: TF>(rng: &mut SplitMix, n: usize, e: i32, spread: i32) -> (Vec<T>, Vec<T>) {
    (0..n)
        .map(|_| {
            let (x, y): (T, T) = (val(rng, e, spread), val(rng, e, spread));
            let y = if rng.below(3) == 0 { x } else { y };
            if x <= y { (x, y) } else { (y, x) }
        })
        .unzip()
}

/// Row coefficients over `g`, zero on padding.
pub(super) fn coeffs<T: TF>(rng: &mut SplitMix, g: &Geom, sc: &Sc) -> Vec<T> {
    let a: Vec<T> = vals(rng, g.rows() * g.cols(), sc.a, sc.spread);
    (0..g.rows()).flat_map(|r| placed(g, r)).zip(a).map(|(p, x)| if p.is_some() { x } else { T::zero() }).collect()
}

/// `wr ≥ |W|·r` per output (rounded up from the exact value, sometimes
/// enlarged) and `r1 ≥ ‖r‖₁`, from each output's `(weight, input)` taps.
pub(super) fn magnitudes<T: TF>(rng: &mut SplitMix, taps: &[Vec<(T, usize)>], r: &[T]) -> (Vec<T>, f64) {
    let big = |rng: &mut SplitMix| T::from_f64_nearest([1.0, 1.0, 1.5, 1024.0][rng.below(4)]);
    let wr = taps
        .iter()
        .map(|t| {
            let mut s = ExactSum::new();
            t.iter().for_each(|&(w, i)| s.add_prod(w.abs(), r[i]));
            ru::<T>(&s.value().expect("≥ 0")) * big(rng)
        })
        .collect();
    let mut s = ExactSum::new();
    r.iter().for_each(|&x| s.add(x));
    (wr, ru::<f64>(&s.value().expect("≥ 0")) * big(rng).to_f64_exact())
}

/// A random elementwise-step case: geometry, coefficients, `r`, scales.
pub(super) fn rowwise<T: TF>(rng: &mut SplitMix) -> (Geom, Vec<T>, Vec<T>, Sc) {
    let sc = scales::<T>(rng);
    let rows = 1 + rng.below(4);
    let g = if rng.below(4) == 0 {
        Geom::full(Shape::flat(1 + rng.below(64)), rows)
    } else {
        let s = rand_shape(rng, 3, 6);
        rand_geom(rng, s, rows)
    };
    // Half the cases put the rows in random batch slots: every table then
    // holds `slots × neurons` values and row `i` reads from `table_base(i)`.
    let g = if rng.below(2) == 0 {
        let slots = 1 + rng.below(3) as u32;
        let props = (0..rows).map(|_| rng.below(slots as usize) as u32).collect();
        g.with_props(props)
    } else {
        g
    };
    let a = coeffs(rng, &g, &sc);
    let r = mags(rng, g.table_len(), &sc);
    (g, a, r, sc)
}
