//! Exact rationals for VNNLIB's real arithmetic: decimal literals read
//! exactly, combined exactly, and rounded to f64 or float32 only at the end,
//! in the direction each use needs.

use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{Signed, ToPrimitive, Zero};
use std::cmp::Ordering;

pub type Q = BigRational;

/// Largest decimal exponent accepted (f64 spans 10^±324; beyond that a
/// literal only costs memory).
const MAX_EXP10: i64 = 400;

/// A decimal literal (`12`, `-0.5`, `1e-3`, `.25`) as an exact rational;
/// `None` when `s` is not a number.
pub fn decimal(s: &str) -> Option<Result<Q, String>> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let (mant, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    let digits_ok = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() && frac.is_empty() || !digits_ok(int) || !digits_ok(frac) {
        return None;
    }
    let e10: i64 = match exp {
        None => 0,
        Some(e) => {
            let ed = e.strip_prefix(['-', '+']).unwrap_or(e);
            if ed.is_empty() || !digits_ok(ed) {
                return None;
            }
            match e.parse::<i64>() {
                Ok(v) if v.abs() <= MAX_EXP10 => v,
                _ => return Some(Err(format!("exponent of '{s}' out of range (at most {MAX_EXP10} in magnitude)"))),
            }
        }
    };
    let e = e10 - frac.len() as i64;
    if let Some(q) = small_decimal(int, frac, e) {
        return Some(Ok(if neg { -q } else { q }));
    }
    let digits: BigInt = format!("0{int}{frac}").parse().ok()?;
    let q = if e >= 0 {
        Q::from_integer(digits * num_traits::pow(BigInt::from(10u32), e as usize))
    } else {
        over_power_of_ten(digits, e.unsigned_abs() as usize)
    };
    Some(Ok(if neg { -q } else { q }))
}

/// Digits `int`, `frac` times `10^e` in lowest terms, in 128-bit integers
/// where they fit (up to 38 digits, `|e| ≤ 38`: every literal of an image
/// property); `None` elsewhere. The same value as the big-integer path.
fn small_decimal(int: &str, frac: &str, e: i64) -> Option<Q> {
    if int.len() + frac.len() > 38 || e.unsigned_abs() > 38 {
        return None;
    }
    let mut n: u128 = 0;
    for b in int.bytes().chain(frac.bytes()) {
        n = n * 10 + u128::from(b - b'0');
    }
    if n == 0 {
        return Some(Q::zero());
    }
    if e >= 0 {
        let n = n.checked_mul(10u128.pow(e as u32))?;
        return Some(Q::from_integer(BigInt::from(n)));
    }
    let k = e.unsigned_abs() as u32;
    let twos = n.trailing_zeros().min(k);
    n >>= twos;
    let mut fives = 0;
    while fives < k && n.is_multiple_of(5) {
        n /= 5;
        fives += 1;
    }
    // 2^a·5^b ≤ 10^38 < 2^127.
    let den = (1u128 << (k - twos)) * 5u128.pow(k - fives);
    Some(Q::new_raw(BigInt::from(n), BigInt::from(den)))
}

/// `n / 10^k` (`n ≥ 0`) in lowest terms, without a general gcd: the
/// denominator's only factors are 2 and 5, so those are the only ones to
/// cancel (the gcd of big integers was most of a property file's parse).
fn over_power_of_ten(mut n: BigInt, k: usize) -> Q {
    use num_integer::Integer;
    if n.is_zero() {
        return Q::zero();
    }
    let twos = (n.trailing_zeros().unwrap_or(0) as usize).min(k);
    n >>= twos;
    let (five, mut fives) = (BigInt::from(5u32), 0);
    while fives < k {
        let (d, r) = n.div_rem(&five);
        if !r.is_zero() {
            break;
        }
        n = d;
        fives += 1;
    }
    let den = (BigInt::from(1u32) << (k - twos)) * num_traits::pow(five, k - fives);
    // Lowest terms: where 2 (5) is left in the denominator, `n` has no
    // factor 2 (5) left.
    Q::new_raw(n, den)
}

/// The exact value of a finite f64 (or f32) as a rational.
#[cfg(test)]
pub fn of_f64(x: f64) -> Q {
    Q::from_float(x).unwrap_or_else(Q::zero)
}

/// A finite `x` against `q`, exactly: `x = m·2^e` is compared with `n/d` as
/// the integers `m·d·2^e` and `n` (no rational is built or normalised).
fn cmp_f64(x: f64, q: &Q) -> Ordering {
    cmp_f64_small(x, q).unwrap_or_else(|| cmp_f64_big(x, q))
}

fn cmp_f64_big(x: f64, q: &Q) -> Ordering {
    let (mant, exp, sign) = num_traits::float::FloatCore::integer_decode(x);
    let lhs = BigInt::from(sign) * BigInt::from(mant) * q.denom();
    if exp >= 0 { (lhs << exp as usize).cmp(q.numer()) } else { lhs.cmp(&(q.numer() << (-exp) as usize)) }
}

/// [`cmp_f64`] in 128-bit integers, where `q`'s numerator and denominator
/// fit in 64 bits and the shifted products in 128 (decimal literals of up
/// to about 19 digits); `None` elsewhere.
fn cmp_f64_small(x: f64, q: &Q) -> Option<Ordering> {
    let (mant, exp, sign) = num_traits::float::FloatCore::integer_decode(x);
    let sx: i8 = if mant == 0 { 0 } else { sign };
    let sq: i8 = match q.numer().sign() {
        num_bigint::Sign::Minus => -1,
        num_bigint::Sign::NoSign => 0,
        num_bigint::Sign::Plus => 1,
    };
    if sx != sq || sx == 0 {
        return Some(sx.cmp(&sq));
    }
    let n = u128::from(q.numer().magnitude().to_u64()?);
    let d = u128::from(q.denom().magnitude().to_u64()?);
    let shl = |v: u128, s: u32| if v == 0 || s < v.leading_zeros() { Some(v << s) } else { None };
    // |x|·d·2^-exp against |n|, or |x|·d against |n|·2^exp.
    let lhs = u128::from(mant).checked_mul(d)?;
    let mag = if exp >= 0 { shl(lhs, exp as u32)?.cmp(&n) } else { lhs.cmp(&shl(n, exp.unsigned_abs() as u32)?) };
    Some(if sx > 0 { mag } else { mag.reverse() })
}

/// `a` against `b`, exactly, by cross-multiplication (denominators are
/// positive).
pub fn cmp_q(a: &Q, b: &Q) -> Ordering {
    (a.numer() * b.denom()).cmp(&(b.numer() * a.denom()))
}

/// An f64 within a few units of `q` (`±inf` past the range): numerator over
/// denominator in f64 where both convert, else the slow exact conversion.
fn near_f64(q: &Q) -> f64 {
    match (q.numer().to_f64(), q.denom().to_f64()) {
        (Some(n), Some(d)) if n.is_finite() && d.is_finite() && d > 0.0 && (n / d).is_normal() => n / d,
        _ => q.to_f64().unwrap_or(if q.is_negative() { f64::NEG_INFINITY } else { f64::INFINITY }),
    }
}

/// `x` if the rational is exactly an f64.
pub fn exact_f64(q: &Q) -> Option<f64> {
    let f = f64_down(q);
    (f.is_finite() && cmp_f64(f, q) == Ordering::Equal).then_some(f + 0.0)
}

/// The largest f64 `≤ q` (`-inf` below the range).
pub fn f64_down(q: &Q) -> f64 {
    let mut f = near_f64(q);
    if f == f64::INFINITY {
        f = f64::MAX;
    }
    while f.is_finite() && cmp_f64(f, q) == Ordering::Greater {
        f = f.next_down();
    }
    while f.next_up().is_finite() && cmp_f64(f.next_up(), q) != Ordering::Greater {
        f = f.next_up();
    }
    f + 0.0
}

/// The smallest f64 `≥ q` (`+inf` above the range).
pub fn f64_up(q: &Q) -> f64 {
    -f64_down(&-q.clone())
}

/// The largest float32 `≤ q` (`strict`: `< q`), `-inf` where none is
/// ([`Rounded::f32_below`]'s reference).
#[cfg(test)]
fn f32_below(q: &Q, strict: bool) -> f32 {
    let mut f = polycert_interval::fp::from_f64_down::<f32>(f64_down(q));
    // f64_down(q) ≤ q, so f ≤ q; a strict bound excludes q itself.
    if strict && f.is_finite() && cmp_f64(f as f64, q) == Ordering::Equal {
        f = f.next_down();
    }
    f
}

/// The smallest float32 `≥ q` (`strict`: `> q`), `+inf` where none is
/// ([`Rounded::f32_above`]'s reference).
#[cfg(test)]
fn f32_above(q: &Q, strict: bool) -> f32 {
    -f32_below(&-q.clone(), strict)
}

/// The largest f64 `t` with `t ≤ q` (`strict`: `t < q`).
pub fn f64_below(q: &Q, strict: bool) -> f64 {
    let f = f64_down(q);
    if strict && f.is_finite() && cmp_f64(f, q) == Ordering::Equal { f.next_down() } else { f }
}

/// A rational's directed roundings, all from one rounding down and one
/// exact comparison (a box's bound needs four of them).
pub struct Rounded {
    down: f64,
    /// Whether `q` is exactly `down`.
    exact: bool,
}

impl Rounded {
    /// From `down` (the largest f64 `≤ q`) and whether it is `q`.
    pub fn from_parts(down: f64, exact: bool) -> Self {
        Rounded { down, exact }
    }
    pub fn of(q: &Q) -> Self {
        let down = f64_down(q);
        Rounded { down, exact: down.is_finite() && cmp_f64(down, q) == Ordering::Equal }
    }
    /// [`f64_down`].
    pub fn f64_down(&self) -> f64 {
        self.down
    }
    /// [`f64_up`]: past `down` unless `q` is `down`.
    pub fn f64_up(&self) -> f64 {
        if self.exact { self.down } else { self.down.next_up() }
    }
    /// The largest float32 `≤ q` (`strict`: `< q`): a float32 `f ≤ down` equals `q` only where `q` is `down`.
    pub fn f32_below(&self, strict: bool) -> f32 {
        let f = polycert_interval::fp::from_f64_down::<f32>(self.down);
        if strict && f.is_finite() && self.exact && f as f64 == self.down { f.next_down() } else { f }
    }
    /// The smallest float32 `≥ q` (`strict`: `> q`), from [`Rounded::f64_up`].
    pub fn f32_above(&self, strict: bool) -> f32 {
        let up = self.f64_up();
        let f = polycert_interval::fp::from_f64_up::<f32>(up);
        if strict && f.is_finite() && self.exact && f as f64 == up { f.next_up() } else { f }
    }
}

/// `c` scaled by a positive rational so that every entry is an integer
/// with no common factor; the factor is returned with it.
pub fn integer_scaling(c: &[Q]) -> (Vec<Q>, Q) {
    use num_integer::Integer;
    let lcm = c.iter().fold(BigInt::from(1), |l, v| l.lcm(v.denom()));
    let ints: Vec<BigInt> = c.iter().map(|v| v.numer() * (&lcm / v.denom())).collect();
    let gcd = ints.iter().fold(BigInt::zero(), |g, v| g.gcd(v));
    let gcd = if gcd.is_zero() { BigInt::from(1) } else { gcd };
    let k = Q::new(lcm, gcd.clone());
    (ints.into_iter().map(|v| Q::from_integer(v / &gcd)).collect(), k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_traits::FromPrimitive;

    fn int(v: i64) -> Q {
        Q::from_i64(v).unwrap()
    }

    /// A xorshift generator from `seed`.
    fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }
    }

    fn q(s: &str) -> Q {
        decimal(s).unwrap().unwrap()
    }

    #[test]
    fn decimals_are_exact() {
        assert_eq!(q("0.5"), Q::new(1.into(), 2.into()));
        assert_eq!(q("-2"), int(-2));
        assert_eq!(q("1e3"), int(1000));
        assert_eq!(q(".25e1"), Q::new(5.into(), 2.into()));
        assert_eq!(q("0.3") - q("0.1") - q("0.2"), Q::zero());
        assert!(decimal("X_0").is_none() && decimal("inf").is_none() && decimal("1e").is_none());
        assert!(decimal("1e999").unwrap().is_err());
        assert_eq!(exact_f64(&q("0.1")), None);
        assert_eq!(exact_f64(&q("9007199254740992")), Some(9007199254740992.0));
        assert_eq!(exact_f64(&q("9007199254740993")), None);
    }

    #[test]
    fn directed_rounding() {
        let t = q("0.1");
        assert!(f64_down(&t) < 0.1 || of_f64(0.1) < t);
        assert_eq!(f64_down(&t).next_up(), f64_up(&t));
        assert!(of_f64(f64_down(&t)) < t && of_f64(f64_up(&t)) > t);
        assert_eq!(f64_up(&q("1e400")), f64::INFINITY);
        assert_eq!(f64_down(&q("1e400")), f64::MAX);
        assert_eq!(f64_down(&q("-1e400")), f64::NEG_INFINITY);
        assert_eq!(f64_down(&q("0.5")), 0.5);
        assert_eq!(f64_below(&q("0.5"), true), 0.5f64.next_down());
        // Just below 1 + 2^-23: the float32 inside is 1, the f64 above is 1 + 2^-23.
        let b = q("1.000000119209289550781249");
        assert_eq!(f32_below(&b, false), 1.0);
        assert_eq!(f64_up(&b), 1.0 + f64::powi(2.0, -23));
        assert_eq!(f32_above(&q("1"), true), 1.0f32.next_up());
        assert_eq!(f32_above(&q("1"), false), 1.0);
    }

    /// The two shortcuts against what they replace: lowest terms against
    /// `Q::new`'s gcd, the 128-bit comparison against the big-integer one,
    /// on random decimals and the f64s at and around them.
    #[test]
    fn shortcuts_agree_with_big_integers() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
        for _ in 0..20_000 {
            let digits = (next() % 10u64.pow((1 + next() % 19) as u32)).to_string();
            let k = (next() % 30) as usize;
            let lowest = over_power_of_ten(digits.parse().unwrap(), k);
            let by_gcd = Q::new(digits.parse().unwrap(), num_traits::pow(BigInt::from(10u32), k));
            assert!(lowest.numer() == by_gcd.numer() && lowest.denom() == by_gcd.denom(), "{digits}e-{k}");
            let sign = if next().is_multiple_of(2) { "-" } else { "" };
            let v = q(&format!("{sign}{digits}e-{k}"));
            let f = near_f64(&v);
            let scale = f64::powi(2.0, (next() % 200) as i32 - 100);
            for x in [f, f.next_up(), f.next_down(), -f, 0.0, f * scale, (next() as f64) * scale] {
                if let Some(o) = cmp_f64_small(x, &v) {
                    assert_eq!(o, cmp_f64_big(x, &v), "{x:e} against {sign}{digits}e-{k}");
                }
            }
        }
        assert_eq!(cmp_f64_small(0.1, &q("0.1")), Some(Ordering::Greater));
        assert_eq!(cmp_f64_small(-0.5, &q("-0.5")), Some(Ordering::Equal));
    }

    /// The 128-bit decimal path against the big-integer one (and `Q::new`'s
    /// gcd) on random literals of up to 38 digits and exponents of ±40.
    #[test]
    fn small_decimals_agree_with_big_integers() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1du64);
        let mut small = 0;
        for _ in 0..20_000 {
            let len = 1 + (next() % 40) as usize;
            let digits: String = (0..len).map(|_| char::from(b'0' + (next() % 10) as u8)).collect();
            let cut = (next() as usize) % (len + 1);
            let (int, frac) = digits.split_at(cut);
            let e = (next() % 81) as i64 - 40;
            let Some(fast) = small_decimal(int, frac, e - frac.len() as i64) else { continue };
            small += 1;
            let n: BigInt = format!("0{digits}").parse().unwrap();
            let k = e - frac.len() as i64;
            let want = if k >= 0 {
                Q::from_integer(n * num_traits::pow(BigInt::from(10u32), k as usize))
            } else {
                Q::new(n, num_traits::pow(BigInt::from(10u32), k.unsigned_abs() as usize))
            };
            assert!(fast.numer() == want.numer() && fast.denom() == want.denom(), "{int}.{frac}e{e}");
        }
        assert!(small > 5_000, "the 128-bit path ran on {small} literals");
    }

    /// [`Rounded`] against the four roundings it replaces, on random
    /// decimals, floats, float32s and values past the f64 range.
    #[test]
    fn rounded_agrees_with_each_rounding() {
        let mut next = xorshift(0x7f4a_7c15_9e37_79b9u64);
        let mut cases = vec![q("0"), q("1e400"), q("-1e400"), q("1e-400"), q("-1e-400"), of_f64(f64::MAX)];
        for _ in 0..5_000 {
            let digits = (next() % 10u64.pow((1 + next() % 19) as u32)).to_string();
            let e = (next() % 80) as i64 - 40;
            let sign = if next().is_multiple_of(2) { "-" } else { "" };
            cases.push(q(&format!("{sign}{digits}e{e}")));
            let f = f64::from_bits(next() >> 2) * if next().is_multiple_of(2) { 1.0 } else { -1.0 };
            cases.push(of_f64(f));
            cases.push(of_f64(f64::from(f32::from_bits((next() >> 34) as u32))));
        }
        for v in &cases {
            let r = Rounded::of(v);
            assert_eq!(r.f64_down().to_bits(), f64_down(v).to_bits(), "{v}");
            assert_eq!(r.f64_up(), f64_up(v), "{v}");
            for strict in [false, true] {
                assert_eq!(r.f32_below(strict), f32_below(v, strict), "{v} {strict}");
                assert_eq!(r.f32_above(strict), f32_above(v, strict), "{v} {strict}");
            }
        }
    }

    #[test]
    fn scaling_to_integers() {
        let (c, k) = integer_scaling(&[q("0.3"), q("-0.15"), Q::zero()]);
        assert_eq!(c, vec![int(2), int(-1), int(0)]);
        assert_eq!(k, Q::new(20.into(), 3.into()));
    }
}
