//! A bound's value: a short decimal literal kept in machine integers (the
//! thousands of pixel bounds of an image property), or an exact rational.
//! Both compare and round exactly; the decimal without a heap allocation.

use super::exact::{self, Q};
use num_bigint::BigInt;
use std::borrow::Cow;
use std::cmp::Ordering;

/// An exact value.
#[derive(Debug, Clone)]
pub enum Num {
    Dec(Dec),
    Q(Q),
}

/// `±n / 10^k` with at most 19 digits in all (so `n < 10^19`, `k ≤ 19`),
/// and the f64 nearest to it.
#[derive(Debug, Clone, Copy)]
pub struct Dec {
    neg: bool,
    n: u64,
    k: u32,
    near: f64,
}

impl Dec {
    /// `[+-]digits[.digits]` (either side may be empty, not both) of at most
    /// 19 digits; `None` for anything else, which [`exact::decimal`] reads.
    pub fn parse(s: &str) -> Option<Dec> {
        let (neg, body) = match s.as_bytes().first()? {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let (int, frac) = body.split_once('.').unwrap_or((body, ""));
        let digits = int.bytes().chain(frac.bytes());
        if int.len() + frac.len() > 19 || int.len() + frac.len() == 0 || !digits.clone().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n = digits.fold(0u64, |n, b| n * 10 + u64::from(b - b'0'));
        let near = s.parse::<f64>().ok()?;
        Some(Dec { neg, n, k: frac.len() as u32, near })
    }

    fn sign(&self) -> i8 {
        match (self.n, self.neg) {
            (0, _) => 0,
            (_, true) => -1,
            (_, false) => 1,
        }
    }

    /// Exact comparison: both scaled to the larger `k` (below 10^38).
    fn cmp(&self, o: &Dec) -> Ordering {
        let (sa, sb) = (self.sign(), o.sign());
        if sa != sb || sa == 0 {
            return sa.cmp(&sb);
        }
        let k = self.k.max(o.k);
        let a = u128::from(self.n) * 10u128.pow(k - self.k);
        let b = u128::from(o.n) * 10u128.pow(k - o.k);
        if sa > 0 { a.cmp(&b) } else { b.cmp(&a) }
    }

    fn to_q(self) -> Q {
        let n = if self.neg { -BigInt::from(self.n) } else { BigInt::from(self.n) };
        Q::new(n, BigInt::from(10u64.pow(self.k)))
    }

    /// The roundings from the nearest f64 and one comparison in 128-bit
    /// integers (`|near| = m·2^e` against `n/10^k` as `m·10^k` against
    /// `n·2^-e`); `None` where they do not fit.
    fn rounded(&self) -> Option<exact::Rounded> {
        if self.n == 0 {
            return Some(exact::Rounded::from_parts(0.0, true));
        }
        let (m, e, _) = num_traits::float::FloatCore::integer_decode(self.near);
        let shift = u32::try_from(e.checked_neg()?).ok()?;
        let n = u128::from(self.n);
        if e >= 0 || shift >= n.leading_zeros() {
            return None;
        }
        let magnitude = (u128::from(m) * 10u128.pow(self.k)).cmp(&(n << shift));
        let signed = if self.neg { magnitude.reverse() } else { magnitude };
        let down = if signed == Ordering::Greater { self.near.next_down() } else { self.near };
        Some(exact::Rounded::from_parts(down + 0.0, signed == Ordering::Equal))
    }
}

impl Num {
    /// A decimal literal, `None` when `s` is not a number (as
    /// [`exact::decimal`]).
    pub fn decimal(s: &str) -> Option<Result<Num, String>> {
        match Dec::parse(s) {
            Some(d) => Some(Ok(Num::Dec(d))),
            None => exact::decimal(s).map(|r| r.map(Num::Q)),
        }
    }

    pub fn q(&self) -> Cow<'_, Q> {
        match self {
            Num::Dec(d) => Cow::Owned(d.to_q()),
            Num::Q(q) => Cow::Borrowed(q),
        }
    }

    pub fn cmp(&self, o: &Num) -> Ordering {
        match (self, o) {
            (Num::Dec(a), Num::Dec(b)) => a.cmp(b),
            _ => exact::cmp_q(&self.q(), &o.q()),
        }
    }

    pub fn rounded(&self) -> exact::Rounded {
        match self {
            Num::Dec(d) => d.rounded().unwrap_or_else(|| exact::Rounded::of(&d.to_q())),
            Num::Q(q) => exact::Rounded::of(q),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Literals of every shape `Dec` takes: up to 19 digits, either sign,
    /// the point anywhere, tiny and large, exact halves.
    fn literals() -> Vec<String> {
        let mut out: Vec<String> = [
            "0",
            "-0.0",
            "+.5",
            "0.50",
            "0.500000000000000000",
            "5.",
            "-.25",
            "-0.250",
            "0.1",
            "9999999999999999999",
            "0.0000000000000000001",
            "1.5",
        ]
        .map(String::from)
        .to_vec();
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let digits = 1 + (x % 19) as usize;
            let mut d: String = (0..digits).map(|i| char::from(b'0' + ((x >> (i * 3 % 60)) % 10) as u8)).collect();
            if x >> 62 == 0 {
                d = format!("{}", (x >> 20) as f64 / (1u64 << 44) as f64);
                d.truncate(20);
            }
            let point = (x >> 40) as usize % (d.len() + 1);
            let sign = ["", "-", "+"][(x >> 50) as usize % 3];
            if !d.contains('.') {
                d.insert(point, '.');
            }
            out.push(format!("{sign}{d}"));
        }
        out
    }

    #[test]
    fn decimals_agree_with_rationals() {
        let lits = literals();
        let nums: Vec<(Num, Q)> =
            lits.iter().filter_map(|s| Some((Num::Dec(Dec::parse(s)?), exact::decimal(s)?.ok()?))).collect();
        assert!(nums.len() > 19_000, "{} of {} read", nums.len(), lits.len());
        for (a, qa) in &nums {
            assert_eq!(*a.q(), *qa);
            let (r, want) = (a.rounded(), exact::Rounded::of(qa));
            assert_eq!(r.f64_down().to_bits(), want.f64_down().to_bits(), "{qa}");
            assert_eq!(r.f64_up().to_bits(), want.f64_up().to_bits(), "{qa}");
            for strict in [false, true] {
                assert_eq!(r.f32_below(strict).to_bits(), want.f32_below(strict).to_bits(), "{qa}");
                assert_eq!(r.f32_above(strict).to_bits(), want.f32_above(strict).to_bits(), "{qa}");
            }
        }
        let fast = nums.iter().filter(|(a, _)| matches!(a, Num::Dec(d) if d.rounded().is_some())).count();
        assert!(fast * 10 > nums.len() * 9, "{fast} of {} rounded in 128-bit integers", nums.len());
        for w in nums.windows(2) {
            assert_eq!(w[0].0.cmp(&w[1].0), exact::cmp_q(&w[0].1, &w[1].1), "{} {}", w[0].1, w[1].1);
            assert_eq!(w[0].0.cmp(&w[0].0), Ordering::Equal);
        }
    }

    #[test]
    fn other_literals_are_left_to_rationals() {
        for s in ["1e3", "12345678901234567890", "0.12345678901234567890", "X_0", ".", "-", "1.2.3", "0x10"] {
            assert!(Dec::parse(s).is_none(), "{s}");
        }
    }
}
