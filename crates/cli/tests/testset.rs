//! `verify --images` as a test set (`src/testset.rs`): a first pass over
//! every image, then the open ones refined within `--budget`. Its verdicts
//! are checked against the image-by-image mode (`--timeout`, no budget).

mod util;

use std::collections::BTreeMap;
use util::polycert;

/// Per image (property name), its result; with the run's stdout and stderr.
fn verdicts(args: &[&str]) -> (BTreeMap<String, String>, String) {
    let mut all = vec!["verify", "--backend", "cpu", "--json"];
    all.extend_from_slice(args);
    let o = polycert(&all);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{err}");
    let mut seen = BTreeMap::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("json");
        let name = v["property"].as_str().expect("a name").to_string();
        let prev = seen.insert(name.clone(), v["result"].as_str().expect("a result").to_string());
        assert!(prev.is_none(), "{name} twice");
    }
    (seen, err)
}

fn count(v: &BTreeMap<String, String>, word: &str) -> usize {
    v.values().filter(|r| *r == word).count()
}

/// With time enough, the test set answers every image as the full analysis
/// of each image alone does, and its summary names the phases.
#[test]
fn a_test_set_answers_as_image_by_image() {
    let (set, err) = verdicts(&["--budget", "600"]);
    let (alone, _) = verdicts(&["--timeout", "600"]);
    assert_eq!(set.len(), 300);
    assert_eq!(set, alone);
    assert!(count(&set, "verified") > 0 && count(&set, "falsified") > 0, "{set:?}");
    for phase in ["first pass", "optimised slopes", "branch and bound"] {
        assert!(err.contains(phase), "{phase} missing: {err}");
    }
    assert!(!err.contains("not refined"), "{err}");
}

/// A spent budget still gives every image its first pass (DeepPoly and
/// the attack, as `--no-alpha --no-bab` answers it), and says how many open
/// images it left unrefined.
#[test]
fn a_spent_budget_still_answers_every_image() {
    let (set, err) = verdicts(&["--budget", "0.000001"]);
    let (cheap, _) = verdicts(&["--timeout", "600", "--no-alpha", "--no-bab"]);
    assert_eq!(set, cheap);
    let open = count(&set, "unknown");
    assert!(open > 0, "{set:?}");
    assert!(
        err.contains(&format!(
            "not refined        {open:>7} open images (branch and bound did not reach them, --budget 0.000001 s spent)"
        )),
        "{err}"
    );
}

/// A larger budget certifies at least as many images as a smaller one.
#[test]
fn more_budget_certifies_no_fewer() {
    let (small, _) = verdicts(&["--budget", "0.000001"]);
    let (large, _) = verdicts(&[]);
    assert!(count(&large, "verified") >= count(&small, "verified"));
    assert!(count(&large, "verified") > count(&small, "verified"), "the refinement verified nothing");
}
