//! Negative control: the checks of this suite must reject a deliberately
//! unsound implementation (round-to-nearest arithmetic with no outward
//! widening). Each test runs the very checks used by the real suites over a
//! deterministic stream of generated cases (fixed-seed runner) and asserts
//! that the unsound variant is caught, while the real implementation passes
//! the same cases.

use crate::common::*;
use polycert_interval::{FloatModel, Interval, dot, fp, fp_dot_enclosure};
use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestError, TestRng, TestRunner};

const CASES: u32 = 3000;

fn runner() -> TestRunner {
    let config = Config { cases: CASES, failure_persistence: None, max_shrink_iters: 200, ..Config::default() };
    TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
}

/// Runs `check` on the cases of `strategy`: the unsound variant must fail
/// (its minimal counterexample is printed), the sound one must pass.
fn assert_caught<S: Strategy>(
    name: &str,
    strategy: S,
    unsound: impl Fn(&S::Value) -> Check,
    sound: impl Fn(&S::Value) -> Check,
) where
    S::Value: std::fmt::Debug,
{
    match runner().run(&strategy, |v| unsound(&v)) {
        Err(TestError::Fail(why, case)) => eprintln!("{name}: unsound variant caught: {why}\n  case: {case:?}"),
        other => panic!("{name}: the enclosure check did not catch the unsound variant: {other:?}"),
    }
    if let Err(e) = runner().run(&strategy, |v| sound(&v)) {
        panic!("{name}: the real implementation failed the same cases: {e}");
    }
}

// ----- Unsound variants: round-to-nearest, no widening. -----

fn naive_add<T: TF>(a: Interval<T>, b: Interval<T>) -> (T, T) {
    (a.lo() + b.lo(), a.hi() + b.hi())
}

fn naive_mul<T: TF>(a: Interval<T>, b: Interval<T>) -> (T, T) {
    let m = |x: T, y: T| if x == T::zero() || y == T::zero() { T::zero() } else { x * y };
    let c = [m(a.lo(), b.lo()), m(a.lo(), b.hi()), m(a.hi(), b.lo()), m(a.hi(), b.hi())];
    (c.iter().copied().fold(T::infinity(), T::min), c.iter().copied().fold(T::neg_infinity(), T::max))
}

/// Interval dot product summed in f64 round-to-nearest, rounded to nearest
/// into `T`.
fn naive_dot<T: TF>(x: &[Interval<T>], w: &[T]) -> (T, T) {
    let (mut lo, mut hi) = (0.0f64, 0.0f64);
    for (xi, &wi) in x.iter().zip(w) {
        let (p, q) = (xi.lo().to_f64_exact() * wi.to_f64_exact(), xi.hi().to_f64_exact() * wi.to_f64_exact());
        lo += p.min(q);
        hi += p.max(q);
    }
    if lo.is_nan() || hi.is_nan() || lo > hi {
        return (T::neg_infinity(), T::infinity());
    }
    (T::from_f64_nearest(lo), T::from_f64_nearest(hi))
}

#[test]
fn catches_round_to_nearest_directed_rounding() {
    let finite = pair::<f64>(false);
    assert_caught(
        "add_down = a + b",
        finite.clone(),
        |&(a, b)| check_down("add_down", a + b, &Ext::of(a).add(&Ext::of(b)).unwrap(), 0),
        |&(a, b)| check_down("add_down", fp::add_down(a, b), &Ext::of(a).add(&Ext::of(b)).unwrap(), 0),
    );
    assert_caught(
        "mul_up = a * b",
        finite,
        |&(a, b)| check_up("mul_up", a * b, &Ext::of(a).mul(&Ext::of(b)), 1),
        |&(a, b)| check_up("mul_up", fp::mul_up(a, b), &Ext::of(a).mul(&Ext::of(b)), 1),
    );
    assert_caught(
        "from_f64_down = as f32",
        float::<f64>(false),
        |&x| check_down("from_f64_down", x as f32, &Ext::of(x), 0),
        |&x| check_down("from_f64_down", fp::from_f64_down::<f32>(x), &Ext::of(x), 0),
    );
}

#[test]
fn catches_round_to_nearest_interval_add_and_mul() {
    let data = (iv_pair::<f32>(false), proptest::arbitrary::any::<u64>());
    assert_caught(
        "interval add (f32, nearest)",
        data.clone(),
        |&((a, b), s)| check_binary("add", a, b, naive_add(a, b), |x, y| x.add(y), s),
        |&((a, b), s)| {
            let r = a + b;
            check_binary("add", a, b, (r.lo(), r.hi()), |x, y| x.add(y), s)
        },
    );
    assert_caught(
        "interval mul (f32, nearest)",
        data,
        |&((a, b), s)| check_binary("mul", a, b, naive_mul(a, b), |x, y| Some(x.mul(y)), s),
        |&((a, b), s)| {
            let r = a.mul(b);
            check_binary("mul", a, b, (r.lo(), r.hi()), |x, y| Some(x.mul(y)), s)
        },
    );
    let data64 = (iv_pair::<f64>(false), proptest::arbitrary::any::<u64>());
    assert_caught(
        "interval add (f64, nearest)",
        data64,
        |&((a, b), s)| check_binary("add", a, b, naive_add(a, b), |x, y| x.add(y), s),
        |&((a, b), s)| {
            let r = a + b;
            check_binary("add", a, b, (r.lo(), r.hi()), |x, y| x.add(y), s)
        },
    );
}

#[test]
fn catches_unwidened_dot_products() {
    let zero = (Ext::zero(), Ext::zero());
    for tame in [false, true] {
        let data = (
            if tame { tame_dot_data::<f64>(300) } else { dot_data::<f64>(300, true) },
            proptest::arbitrary::any::<u64>(),
        );
        assert_caught(
            if tame { "dot (f64, tame data, no widening)" } else { "dot (f64, no widening)" },
            data,
            |((x, w), s)| check_dot("dot", x, w, &zero, naive_dot(x, w), *s),
            |((x, w), s)| {
                let d = dot(x, w);
                check_dot("dot", x, w, &zero, (d.lo(), d.hi()), *s)
            },
        );
    }
    let data = (dot_data::<f32>(300, true), proptest::arbitrary::any::<u64>());
    assert_caught(
        "dot (f32, no widening)",
        data,
        |((x, w), s)| check_dot("dot", x, w, &zero, naive_dot(x, w), *s),
        |((x, w), s)| {
            let d = dot(x, w);
            check_dot("dot", x, w, &zero, (d.lo(), d.hi()), *s)
        },
    );
}

#[test]
fn catches_fp_dot_enclosure_without_the_float_model_error() {
    // The exact range (soundly rounded) plus the bias, but without the
    // float32 rounding-error term: float programs land outside it.
    let data = (tame_dot_data::<f32>(300), moderate::<f32>(), proptest::arbitrary::any::<u64>());
    assert_caught(
        "fp_dot_enclosure without model error (tame data)",
        data,
        |((x, w), b, s)| {
            let e = dot(x, w) + Interval::point(*b).unwrap();
            check_fp_dot(w, x, *b, (e.lo(), e.hi()), *s, true)
        },
        |((x, w), b, s)| {
            let e = fp_dot_enclosure(w, x, *b, FloatModel::F32);
            check_fp_dot(w, x, *b, (e.lo(), e.hi()), *s, true)
        },
    );
}
