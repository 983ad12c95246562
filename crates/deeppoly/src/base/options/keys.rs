//! The tuning constants by dotted key (`crown.lr_alpha`,
//! `search.stabilize.share`), each value checked: for `--set` and
//! `--config` files, and experiments.

use super::Options;
use std::time::Duration;

/// Declares the keys, each its field's path (`crown.steps`) and the check
/// that parses its value.
macro_rules! keys {
    ($($first:ident $(. $rest:ident)+ : $check:ident,)*) => {
        /// Every dotted key [`Options::set`] takes.
        pub const TUNING_KEYS: &[&str] = &[$(concat!(stringify!($first) $(, ".", stringify!($rest))+)),*];

        impl Options {
            /// Sets the tuning constant `key` (one of [`TUNING_KEYS`]) from
            /// its text; the error says what the key takes.
            pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
                $(
                    if key == concat!(stringify!($first) $(, ".", stringify!($rest))+) {
                        self.$first$(.$rest)+ = $check(value.trim())?;
                        return Ok(());
                    }
                )*
                Err(format!("unknown key '{key}'"))
            }
        }
    };
}

keys! {
    passes.late_checks: auto_switch,
    passes.first_output: auto_switch,
    crown.steps: count,
    crown.warm_steps: count,
    crown.stable_steps: count,
    crown.lr_alpha: above_zero,
    crown.lr_beta: above_zero,
    crown.proved_margin: at_least_zero,
    crown.hopeless_pace: at_least_zero,
    crown.host_batch_rows: positive,
    crown.layer_max_unstable: count,
    crown.layer_leaf_gain: at_least_zero,
    attack.corner_leaves: count,
    attack.corner_share: share,
    attack.search_restarts: count,
    attack.search_restart_steps: count,
    attack.restart_grace: at_least_zero,
    attack.fine_end: fraction,
    attack.hinge: at_least_zero,
    attack.max_points: positive,
    attack.kept_graphs: positive,
    attack.kept_points: count,
    search.table_depth: count,
    search.min_round: positive,
    search.free_apart: count,
    search.babsr_duals: auto_switch,
    search.picks.warmup: count,
    search.picks.probe: positive,
    search.gate.min_gain: at_least_zero,
    search.gate.warmup: count,
    search.gate.probe_every: positive,
    search.gate.decay: share,
    search.stabilize.share: share,
    search.stabilize.plain_share: share,
    search.stabilize.quick_rung: seconds,
    search.stabilize.end_leaves: positive,
    search.stabilize.max_end_leaves: count,
    search.stabilize.max_unstable: count,
    search.stabilize.halvings: count,
}

/// `auto` (`None`), else on (`on`, `true`, `1`) or off (`off`, `false`, `0`).
fn auto_switch(v: &str) -> Result<Option<bool>, String> {
    match v {
        "auto" => Ok(None),
        "on" | "true" | "1" => Ok(Some(true)),
        "off" | "false" | "0" => Ok(Some(false)),
        _ => Err(format!("expected auto, on or off, not '{v}'")),
    }
}

/// A whole number (`usize` or `u32`).
fn count<N: std::str::FromStr>(v: &str) -> Result<N, String> {
    v.parse().map_err(|_| format!("expected a whole number, not '{v}'"))
}

/// A whole number of at least 1.
fn positive<N: std::str::FromStr + PartialOrd + From<u8>>(v: &str) -> Result<N, String> {
    match v.parse::<N>() {
        Ok(n) if n >= N::from(1) => Ok(n),
        _ => Err(format!("expected a whole number of at least 1, not '{v}'")),
    }
}

/// A finite number accepted by `ok`, else the error `what`.
fn number(v: &str, ok: impl Fn(f64) -> bool, what: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() && ok(x) => Ok(x),
        _ => Err(format!("expected {what}, not '{v}'")),
    }
}

fn above_zero(v: &str) -> Result<f64, String> {
    number(v, |x| x > 0.0, "a number above 0")
}

fn at_least_zero(v: &str) -> Result<f64, String> {
    number(v, |x| x >= 0.0, "a number of at least 0")
}

/// A number in [0, 1].
fn share(v: &str) -> Result<f64, String> {
    number(v, |x| (0.0..=1.0).contains(&x), "a number in [0, 1]")
}

/// A number in (0, 1].
fn fraction(v: &str) -> Result<f64, String> {
    number(v, |x| x > 0.0 && x <= 1.0, "a number in (0, 1]")
}

fn seconds(v: &str) -> Result<Duration, String> {
    number(v, |x| x >= 0.0, "a number of seconds of at least 0").map(Duration::from_secs_f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key names a field: 1 or 2 (one of them a good value for each,
    /// and not its default) changes it.
    #[test]
    fn every_key_sets_its_field() {
        let text = |o: &Options| format!("{:?}{:?}{:?}{:?}", o.passes, o.crown, o.attack, o.search);
        let d = text(&Options::default());
        for key in TUNING_KEYS {
            let changed = ["1", "2"].iter().any(|v| {
                let mut o = Options::default();
                o.set(key, v).is_ok() && text(&o) != d
            });
            assert!(changed, "{key}");
        }
    }

    #[test]
    fn values_are_checked() {
        let mut o = Options::default();
        o.set("crown.lr_alpha", "0.2").unwrap();
        o.set("search.stabilize.quick_rung", "2.5").unwrap();
        o.set("search.gate.probe_every", "3").unwrap();
        assert_eq!((o.crown.lr_alpha, o.search.stabilize.quick_rung), (0.2, Duration::from_millis(2500)));
        assert_eq!(o.search.gate.probe_every, 3);
        assert!(o.set("crown.lr_alpha", "0").unwrap_err().contains("above 0"));
        assert!(o.set("search.stabilize.share", "1.5").unwrap_err().contains("in [0, 1]"));
        assert!(o.set("attack.kept_graphs", "0").unwrap_err().contains("at least 1"));
        assert!(o.set("crown.steps", "-1").unwrap_err().contains("whole number"));
        assert!(o.set("crown.steps", "nan").is_err() && o.set("attack.hinge", "inf").is_err());
        o.set("search.babsr_duals", "off").unwrap();
        assert_eq!(o.search.babsr_duals, Some(false));
        assert!(o.set("search.babsr_duals", "maybe").unwrap_err().contains("auto, on or off"));
        assert_eq!(o.set("crown.nope", "1").unwrap_err(), "unknown key 'crown.nope'");
    }
}
