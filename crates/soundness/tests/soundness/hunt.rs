//! A short run of the adversarial soundness hunt (`cargo xtask
//! soundness-hunt` runs the long one): no point and summation order leaves
//! the certified bounds or breaks a verified property; and the hunt does
//! catch bounds that are slightly too tight (negative control).

use polycert_soundness::hunt::{KINDS, hunt, hunt_with};

#[test]
fn short_hunt_finds_nothing() {
    let rep = hunt(12, 2026, 60);
    assert_eq!(rep.cases, 12 * KINDS.len());
    assert!(rep.evaluations > 10_000 && rep.verified_properties > 0, "{rep:?}");
    assert!(rep.failures.is_empty(), "unsound: {:#?}", &rep.failures[..rep.failures.len().min(3)]);
    assert!(rep.worst_margin >= 0.0);
}

#[test]
fn hunt_catches_bounds_that_are_too_tight() {
    let rep = hunt_with(4, 5, 40, 0.3);
    assert!(!rep.failures.is_empty(), "bounds shrunk by 30% of their width at each end went unnoticed");
    assert!(rep.worst_margin < 0.0);
}
