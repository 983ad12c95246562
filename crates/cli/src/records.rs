//! Per-property records (JSON lines) and the closing summary table.

use polycert_deeppoly::{Outcome, Verdict};
use serde::Serialize;

/// One property's result, as printed with `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    pub model: String,
    pub property: String,
    pub seconds: f64,
    /// The property file's parse, counted in `seconds` (`vnncomp`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parse_seconds: Option<f64>,
    /// verified, falsified, unknown, timeout or error.
    pub result: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<usize>,
    pub lower_bounds: Vec<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counterexample: Option<Vec<f32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Input splitting's leaves and bound, where it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search: Option<polycert_deeppoly::base::property::SearchStats>,
    /// A falsified image: the class the network gives the counterexample.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wins: Option<usize>,
    /// A falsified image: the class the network gives the image itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_class: Option<usize>,
}

impl Record {
    pub fn from_outcome(model: &str, property: &str, label: Option<usize>, o: &Outcome) -> Self {
        Self {
            model: model.into(),
            property: property.into(),
            seconds: o.seconds,
            parse_seconds: None,
            result: o.verdict.name().into(),
            label,
            lower_bounds: o.lower_bounds.clone(),
            counterexample: match &o.verdict {
                Verdict::Falsified(c) => Some(c.input.clone()),
                _ => None,
            },
            error: None,
            search: o.search,
            wins: None,
            image_class: None,
        }
    }

    pub fn error(model: &str, property: &str, msg: String) -> Self {
        Self {
            model: model.into(),
            property: property.into(),
            seconds: 0.0,
            parse_seconds: None,
            result: "error".into(),
            label: None,
            lower_bounds: vec![],
            counterexample: None,
            error: Some(msg),
            search: None,
            wins: None,
            image_class: None,
        }
    }

    /// Writes the record as one JSON line on stdout (a closed pipe ends
    /// the printing, not the run).
    pub fn emit_json(&self) {
        match serde_json::to_string(self) {
            Ok(line) => crate::say::outln!("{line}"),
            Err(e) => crate::say::errln!("polycert: {}: cannot write JSON: {e}", self.property),
        }
    }

    /// A short human-readable line under [`header`].
    pub fn line(&self) -> String {
        format!("{:<40} {:<10} {:>9.4}s  {}", self.property, self.result, self.seconds, self.detail())
    }

    /// What backs the result: the margin, the search, or the counterexample.
    fn detail(&self) -> String {
        if let Some(e) = &self.error {
            return e.clone();
        }
        let lb = self.lower_bounds.iter().copied().fold(f64::INFINITY, f64::min);
        let analysis = if lb.is_finite() { format!("analysis alone {lb:+.5}") } else { String::new() };
        let label = self.label.map(|l| format!(" (label {l})")).unwrap_or_default();
        match (self.result.as_str(), self.search, self.wins, self.image_class) {
            ("falsified", _, _, Some(c)) if Some(c) != self.label => {
                format!("misclassified: the image itself gives class {c}{label}")
            }
            ("falsified", _, Some(w), _) => format!("class {w} wins{label}"),
            ("falsified", ..) => "counterexample found".into(),
            ("verified", Some(s), ..) => format!(
                "margin {:+.5} after a search of {} leaves{}; {analysis}",
                s.best_bound,
                s.leaves_proved,
                rate(&s)
            ),
            ("verified", None, ..) => format!("margin {lb:+.5}"),
            (_, Some(s), ..) if s.leaf_limit.is_some() => format!(
                "search stopped at its limit of {} leaves (no --timeout): {} proved, {} open, bound {:+.5}; {analysis}",
                s.leaf_limit.unwrap_or_default(),
                s.leaves_proved,
                s.leaves_open,
                s.best_bound
            ),
            (_, Some(s), ..) => format!(
                "search: {} leaves proved, {} open, bound {:+.5}{}; {analysis}",
                s.leaves_proved,
                s.leaves_open,
                s.best_bound,
                rate(&s)
            ),
            _ => analysis,
        }
    }
}

/// A search's pace, ", 1234 sub-boxes/s" (empty where it analysed none).
pub fn rate(s: &polycert_deeppoly::base::property::SearchStats) -> String {
    s.leaves_per_second().map(|r| format!(", {r:.0} {}/s", s.leaf_word())).unwrap_or_default()
}

/// The table's header, above [`Record::line`]s.
pub fn header() -> String {
    format!(
        "{:<40} {:<10} {:>10}  {}",
        "property", "result", "time", "detail (bounds: the property's margin, > 0 proves it)"
    )
}

/// The median of `sorted` (ascending): its middle value, or the mean of
/// its two middle values for an even count; 0 when empty. The one median
/// of the run summaries and of `polycert report`.
pub fn median(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The value at fraction `p` of `sorted` (ascending), the nearest rank.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The summary table printed at the end of a run.
pub fn summary(records: &[Record]) -> String {
    let mut s = String::new();
    let kinds = ["verified", "falsified", "unknown", "timeout", "error"];
    let mut times: Vec<f64> = records.iter().map(|r| r.seconds).collect();
    times.sort_by(f64::total_cmp);
    s.push_str(&format!("{:-<52}\n", ""));
    s.push_str(&format!("{:<12} {:>8} {:>8}\n", "result", "count", "share"));
    for k in kinds {
        let n = records.iter().filter(|r| r.result == k).count();
        if n > 0 {
            s.push_str(&format!("{k:<12} {n:>8} {:>7.1}%\n", 100.0 * n as f64 / records.len() as f64));
        }
    }
    s.push_str(&format!("{:<12} {:>8}\n", "total", records.len()));
    s.push_str(&format!(
        "time per property: median {:.4}s, p90 {:.4}s, max {:.4}s, total {:.2}s\n",
        median(&times),
        percentile(&times, 0.9),
        times.last().copied().unwrap_or(0.0),
        times.iter().sum::<f64>()
    ));
    let solved: Vec<f64> =
        records.iter().filter(|r| r.result == "verified" || r.result == "falsified").map(|r| r.seconds).collect();
    s.push_str(&solved_line(solved));
    s
}

/// The median time per solved instance (VNN-COMP's `unsat`/`sat`, or
/// `verified`/`falsified`), given the seconds of those only.
pub fn solved_line(mut times: Vec<f64>) -> String {
    times.sort_by(f64::total_cmp);
    if times.is_empty() {
        return "solved: none\n".into();
    }
    format!("solved: {}, median {:.4}s, total {:.2}s\n", times.len(), median(&times), times.iter().sum::<f64>())
}

/// `vnncomp`'s closing lines: the count of each result, then
/// [`solved_line`], from `(result, seconds)` per instance.
pub fn vnn_summary(rows: &[(&'static str, f64)]) -> String {
    let mut s = String::new();
    for k in ["unsat", "sat", "timeout", "unknown", "error"] {
        let n = rows.iter().filter(|r| r.0 == k).count();
        if n > 0 {
            s.push_str(&format!("{k} {n}  "));
        }
    }
    s.push_str(&format!("(of {})\n", rows.len()));
    let solved: Vec<f64> = rows.iter().filter(|r| r.0 == "unsat" || r.0 == "sat").map(|r| r.1).collect();
    s + &solved_line(solved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_counts() {
        let mut a = Record::error("m", "p1", "boom".into());
        a.seconds = 1.0;
        let mut b = a.clone();
        b.result = "verified".into();
        b.seconds = 3.0;
        let s = summary(&[a.clone(), b]);
        assert!(s.contains("verified            1"), "{s}");
        assert!(s.contains("error               1"), "{s}");
        assert!(s.contains("max 3.0000s"), "{s}");
        assert!(s.contains("solved: 1, median 3.0000s, total 3.00s"), "{s}");
        let v = serde_json::to_value(&a).unwrap();
        assert_eq!(v["result"], "error");
        assert_eq!(v["error"], "boom");
    }

    #[test]
    fn median_is_the_middle_or_the_mean_of_the_two_middles() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[1.0, 2.0, 7.0]), 2.0);
        assert_eq!(median(&[1.0, 2.0, 4.0, 10.0]), 3.0);
    }

    #[test]
    fn vnn_summary_counts_and_solved_median() {
        let rows = [("unsat", 4.0), ("timeout", 300.0), ("sat", 1.0), ("unsat", 10.0), ("error", 0.5)];
        assert_eq!(
            vnn_summary(&rows),
            "unsat 2  sat 1  timeout 1  error 1  (of 5)\nsolved: 3, median 4.0000s, total 15.00s\n"
        );
        assert_eq!(vnn_summary(&[("timeout", 300.0)]), "timeout 1  (of 1)\nsolved: none\n");
    }

    #[test]
    fn a_leaf_limit_is_named() {
        let mut r = Record::error("m", "p", String::new());
        (r.error, r.result) = (None, "unknown".into());
        let stats = polycert_deeppoly::base::property::SearchStats { leaves_open: 3, ..Default::default() };
        r.search = Some(stats);
        assert!(r.detail().starts_with("search: 0 leaves proved, 3 open"), "{}", r.detail());
        r.search = Some(polycert_deeppoly::base::property::SearchStats { leaf_limit: Some(1024), ..stats });
        assert!(r.detail().starts_with("search stopped at its limit of 1024 leaves (no --timeout)"), "{}", r.detail());
    }

    #[test]
    fn a_search_reports_its_pace_in_its_own_unit() {
        let mut r = Record::error("m", "p", String::new());
        (r.error, r.result) = (None, "unknown".into());
        let s = polycert_deeppoly::base::property::SearchStats {
            branching: "input",
            leaves_analysed: 3000,
            seconds: 1.5,
            ..Default::default()
        };
        r.search = Some(s);
        assert!(r.detail().contains(", 2000 sub-boxes/s;"), "{}", r.detail());
        r.search = Some(polycert_deeppoly::base::property::SearchStats { branching: "ReLU", ..s });
        assert!(r.detail().contains(", 2000 leaves/s;"), "{}", r.detail());
        // No leaf analysed: no pace.
        r.search = Some(polycert_deeppoly::base::property::SearchStats { leaves_analysed: 0, ..s });
        assert!(!r.detail().contains("/s"), "{}", r.detail());
    }
}
