//! The enclosure checks. They take the result under test as plain values so
//! that the negative control can run them on an unsound implementation.

use super::SplitMix;
use super::exact::*;
use polycert_interval::{Fp, Interval};
use proptest::test_runner::TestCaseError;

pub type Check = Result<(), TestCaseError>;

fn fail(msg: String) -> Check {
    Err(TestCaseError::fail(msg))
}

/// `r` is a lower bound of `q` and, with `slack_ulps = 0`, exactly the
/// correctly rounded-down value (`T` ordering), or at most `slack_ulps`
/// ulps below it.
pub fn check_down<T: Fp>(what: &str, r: T, q: &Ext, slack_ulps: u32) -> Check {
    if r.is_nan() {
        return fail(format!("{what}: NaN result (exact {q:?})"));
    }
    if Ext::of(r) > *q {
        return fail(format!("{what}: lower result {r:?} above the exact value {}", show(q)));
    }
    let mut bound: T = rd(q);
    for _ in 0..slack_ulps {
        bound = bound.next_down_();
    }
    if r < bound {
        return fail(format!("{what}: lower result {r:?} more than {slack_ulps} ulp below exact {}", show(q)));
    }
    Ok(())
}

/// Mirror of [`check_down`] for upper bounds.
pub fn check_up<T: Fp>(what: &str, r: T, q: &Ext, slack_ulps: u32) -> Check {
    if r.is_nan() {
        return fail(format!("{what}: NaN result (exact {q:?})"));
    }
    if Ext::of(r) < *q {
        return fail(format!("{what}: upper result {r:?} below the exact value {}", show(q)));
    }
    let mut bound: T = ru(q);
    for _ in 0..slack_ulps {
        bound = bound.next_up_();
    }
    if r > bound {
        return fail(format!("{what}: upper result {r:?} more than {slack_ulps} ulp above exact {}", show(q)));
    }
    Ok(())
}

/// A short display of an extended real (17 significant digits; rug's Float
/// has an unbounded exponent, so values beyond the f64 range print too).
pub fn show(q: &Ext) -> String {
    match q {
        Ext::Fin(r) => format!("~{:.17e}", rug::Float::with_val(64, r)),
        other => format!("{other:?}"),
    }
}

/// `(lo, hi)` is a valid interval result (no NaN, ordered).
fn valid<T: Fp>(what: &str, res: (T, T)) -> Check {
    if res.0.is_nan() || res.1.is_nan() || res.0 > res.1 {
        return fail(format!("{what}: invalid result [{:?}, {:?}]", res.0, res.1));
    }
    Ok(())
}

fn contain<T: Fp>(what: &str, res: (T, T), p: &Ext, detail: &dyn Fn() -> String) -> Check {
    if !inside(&ext_bounds(res.0, res.1), p) {
        return fail(format!("{what}: exact {} not in [{:?}, {:?}] ({})", show(p), res.0, res.1, detail()));
    }
    Ok(())
}

/// Unary op: `f(x)` for sample points `x` of `a` must lie in `res`.
pub fn check_unary<A: Fp, T: Fp>(
    what: &str,
    a: Interval<A>,
    res: (T, T),
    f: impl Fn(&Ext) -> Option<Ext>,
    seed: u64,
) -> Check {
    valid(what, res)?;
    let mut rng = SplitMix::new(seed);
    for x in points(a, &mut rng, 3) {
        if let Some(v) = f(&x) {
            contain(what, res, &v, &|| format!("a = {a:?}, x = {}", show(&x)))?;
        }
    }
    Ok(())
}

/// Binary op: `f(x, y)` for all pairs of sample points must lie in `res`.
pub fn check_binary<T: Fp>(
    what: &str,
    a: Interval<T>,
    b: Interval<T>,
    res: (T, T),
    f: impl Fn(&Ext, &Ext) -> Option<Ext>,
    seed: u64,
) -> Check {
    valid(what, res)?;
    let mut rng = SplitMix::new(seed);
    let (pa, pb) = (points(a, &mut rng, 2), points(b, &mut rng, 2));
    for x in &pa {
        for y in &pb {
            if let Some(v) = f(x, y) {
                contain(what, res, &v, &|| format!("a = {a:?}, b = {b:?}, x = {}, y = {}", show(x), show(y)))?;
            }
        }
    }
    Ok(())
}

/// Ternary op (`x * y + z`).
pub fn check_ternary<T: Fp>(
    what: &str,
    (a, b, c): (Interval<T>, Interval<T>, Interval<T>),
    res: (T, T),
    f: impl Fn(&Ext, &Ext, &Ext) -> Option<Ext>,
    seed: u64,
) -> Check {
    valid(what, res)?;
    let mut rng = SplitMix::new(seed);
    let (pa, pb, pc) = (points(a, &mut rng, 1), points(b, &mut rng, 1), points(c, &mut rng, 1));
    for x in &pa {
        for y in &pb {
            for z in &pc {
                if let Some(v) = f(x, y, z) {
                    contain(what, res, &v, &|| format!("a = {a:?}, b = {b:?}, c = {c:?}"))?;
                }
            }
        }
    }
    Ok(())
}

/// Exact range of `Σ x_i·w_i` over the box (`None` if undefined): the sum of
/// the smaller and the sum of the larger corner products (`0 · inf = 0`).
pub fn exact_dot_range<T: Fp>(x: &[Interval<T>], w: &[T]) -> Option<(Ext, Ext)> {
    let (mut lo, mut hi) = (ExactSum::new(), ExactSum::new());
    for (xi, &wi) in x.iter().zip(w) {
        let (a, b) = if wi >= T::zero() { (xi.lo(), xi.hi()) } else { (xi.hi(), xi.lo()) };
        lo.add_prod(a, wi);
        hi.add_prod(b, wi);
    }
    Some((lo.value()?, hi.value()?))
}

/// Dot product enclosure: `res` must contain the exact range of
/// `Σ x_i·w_i + c` (`c = [c.0, c.1]` an extra constant term, e.g. from
/// `push_constant`; use `(Ext::zero(), Ext::zero())` for none), and the exact
/// value at a random point of the box (each `x_i` an endpoint, possibly at
/// infinity, or a random dyadic convex combination of the endpoints).
pub fn check_dot<T: Fp, R: Fp>(
    what: &str,
    x: &[Interval<T>],
    w: &[T],
    c: &(Ext, Ext),
    res: (R, R),
    seed: u64,
) -> Check {
    valid(what, res)?;
    if let Some((lo, hi)) = exact_dot_range(x, w)
        && let (Some(lo), Some(hi)) = (lo.add(&c.0), hi.add(&c.1))
    {
        let b = ext_bounds(res.0, res.1);
        if !(b.0 <= lo && hi <= b.1) {
            return fail(format!(
                "{what}: exact range [{}, {}] not inside [{:?}, {:?}] (n = {})",
                show(&lo),
                show(&hi),
                res.0,
                res.1,
                x.len()
            ));
        }
    }
    let mut rng = SplitMix::new(seed);
    let mut s = ExactSum::new();
    for (xi, &wi) in x.iter().zip(w) {
        let (l, h) = (xi.lo(), xi.hi());
        match rng.below(3) {
            0 => s.add_prod(l, wi),
            1 => s.add_prod(h, wi),
            _ if l.is_finite() && h.is_finite() => {
                let k = rng.below((1u64 << WEIGHT_BITS) + 1);
                s.add_prod_weighted(l, wi, (1u64 << WEIGHT_BITS) - k);
                s.add_prod_weighted(h, wi, k);
            }
            _ => s.add_prod(if l.is_finite() { l } else { h }, wi),
        }
    }
    let cpt = if rng.coin() { &c.0 } else { &c.1 };
    if let Some(v) = s.value().and_then(|v| v.add(cpt)) {
        contain(what, res, &v, &|| format!("random point, n = {}", x.len()))?;
    }
    Ok(())
}

/// Pairwise (tree) summation in `T`.
pub fn pairwise<T: Fp>(ts: &[T]) -> T {
    match ts.len() {
        0 => T::zero(),
        1 => ts[0],
        n => pairwise(&ts[..n / 2]) + pairwise(&ts[n / 2..]),
    }
}

fn seq<T: Fp>(ts: &[T]) -> T {
    ts.iter().fold(T::zero(), |s, &t| s + t)
}

fn key_cmp<T: Fp>(a: T, b: T) -> std::cmp::Ordering {
    a.partial_cmp(&b).unwrap_or(std::cmp::Ordering::Equal)
}

/// Values a float program (in `T`, round-to-nearest) can compute for
/// `Σ w_i·x_i + b` under many evaluation orders, with and without FMA.
pub fn float_evaluations<T: Fp>(w: &[T], x: &[T], b: T, rng: &mut SplitMix) -> Vec<(&'static str, T)> {
    let n = w.len();
    let mut terms: Vec<T> = w.iter().zip(x).map(|(&wi, &xi)| wi * xi).collect();
    terms.push(b);
    let mut out = vec![("left-to-right", seq(&terms))];
    let mut bias_first = vec![b];
    bias_first.extend_from_slice(&terms[..n]);
    out.push(("bias-first", seq(&bias_first)));
    let mut rev = terms.clone();
    rev.reverse();
    out.push(("right-to-left", seq(&rev)));
    for _ in 0..3 {
        let mut p = terms.clone();
        rng.shuffle(&mut p);
        out.push(("random permutation", seq(&p)));
        out.push(("pairwise, permuted", pairwise(&p)));
    }
    let mut s = terms.clone();
    s.sort_by(|a, b| key_cmp(a.abs(), b.abs()));
    out.push(("ascending |t|", seq(&s)));
    s.reverse();
    out.push(("descending |t|", seq(&s)));
    s.sort_by(|a, b| key_cmp(*a, *b));
    out.push(("ascending", seq(&s)));
    s.reverse();
    out.push(("descending", seq(&s)));
    out.push(("pairwise", pairwise(&terms)));
    // FMA chains.
    let fma_ltr = (0..n).fold(b, |s, i| w[i].fma_(x[i], s));
    out.push(("fma left-to-right", fma_ltr));
    let fma_rev = (0..n).rev().fold(T::zero(), |s, i| w[i].fma_(x[i], s)) + b;
    out.push(("fma right-to-left, bias last", fma_rev));
    let mut idx: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut idx);
    out.push(("fma permuted", idx.iter().fold(b, |s, &i| w[i].fma_(x[i], s))));
    // Blocked (split-K): FMA chains over blocks of 8, then a tree.
    let blocks: Vec<T> = idx.chunks(8).map(|c| c.iter().fold(T::zero(), |s, &i| w[i].fma_(x[i], s))).collect();
    out.push(("blocked fma + pairwise", pairwise(&blocks) + b));
    out
}

/// `res` must contain the float evaluations of `Σ w_i·x_i + b` (in `T`,
/// many orders) at random float points `x_i ∈ x[i]`, and the exact value.
/// A NaN evaluation is only allowed when `res` is the whole line.
pub fn check_fp_dot<T: Fp>(w: &[T], x: &[Interval<T>], b: T, res: (T, T), seed: u64, floats: bool) -> Check {
    valid("fp_dot_enclosure", res)?;
    let mut rng = SplitMix::new(seed);
    let xs: Vec<T> = x.iter().map(|&iv| float_point(iv, &mut rng)).collect();
    let mut exact = ExactSum::new();
    exact.add(b);
    for (&wi, &xi) in w.iter().zip(&xs) {
        exact.add_prod(wi, xi);
    }
    let e = exact.value().unwrap();
    contain("fp_dot_enclosure (exact value)", res, &e, &|| format!("n = {}", w.len()))?;
    if !floats {
        return Ok(());
    }
    let entire = res.0 == T::neg_infinity() && res.1 == T::infinity();
    for (how, v) in float_evaluations(w, &xs, b, &mut rng) {
        let ok = if v.is_nan() { entire } else { res.0 <= v && v <= res.1 };
        if !ok {
            return fail(format!(
                "fp_dot_enclosure: float evaluation ({how}) = {v:?} not in [{:?}, {:?}]; exact {}; n = {}",
                res.0,
                res.1,
                show(&e),
                w.len()
            ));
        }
    }
    Ok(())
}
