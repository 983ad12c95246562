//! `polycert report`: from results files, a per-benchmark table (solved,
//! wrong against a reference, median time) and a cactus plot (instances
//! solved against time), as people compare verifiers.

mod read;

use crate::InputError;
use crate::plot;
use crate::say::out;
use anyhow::{Context, Result, bail};
use clap::Args;
use read::{Answer, Row};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(Args)]
#[command(after_help = "Example:\n  polycert report run1.csv run2.csv --png cactus.png --reference ref.csv")]
pub struct ReportArgs {
    /// Results files: polycert's, VNN-COMP's, or any CSV whose header names
    /// onnx, vnnlib and result columns. Each file is one line of the plot.
    #[arg(required = true, value_name = "RESULTS")]
    files: Vec<PathBuf>,
    /// Known answers (a results file of the same kinds): a sat where it says
    /// unsat, or an unsat where it says sat, counts as wrong.
    #[arg(long, value_name = "FILE")]
    reference: Option<PathBuf>,
    /// Write the cactus plot as PNG.
    #[arg(long, value_name = "FILE")]
    png: Option<PathBuf>,
    /// Write the cactus plot as SVG.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Write the table as markdown to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
}

/// One results file: its name in the table and plot, and its rows.
pub struct Series {
    pub name: String,
    pub rows: Vec<Row>,
}

impl Series {
    /// Seconds of the solved instances, fastest first.
    pub fn solved_times(&self) -> Vec<f64> {
        let mut t: Vec<f64> = self.rows.iter().filter(|r| r.answer != Answer::Open).map(|r| r.seconds).collect();
        t.sort_by(f64::total_cmp);
        t
    }
}

pub fn run(a: ReportArgs) -> Result<u8> {
    let mut series = Vec::new();
    for f in &a.files {
        let name = f.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        series.push(Series { name, rows: read::results(f)? });
    }
    let reference = match &a.reference {
        Some(f) => read::results(f)?.into_iter().map(|r| (r.key, r.answer)).collect(),
        None => HashMap::new(),
    };
    let md = table(&series, a.reference.is_some().then_some(&reference));
    match &a.markdown {
        Some(f) => std::fs::write(f, &md).with_context(|| format!("{}: cannot write", f.display()))?,
        None => out!("{md}"),
    }
    if a.png.is_none() && a.svg.is_none() {
        return Ok(0);
    }
    if series.iter().all(|s| s.solved_times().is_empty()) {
        bail!(InputError("no solved instance to plot".into()));
    }
    let svg = plot::cactus_svg(&series)?;
    if let Some(f) = &a.svg {
        std::fs::write(f, &svg).with_context(|| format!("{}: cannot write", f.display()))?;
    }
    if let Some(f) = &a.png {
        plot::svg_to_png(&svg, f)?;
    }
    Ok(0)
}

/// Counts of one benchmark in one series.
#[derive(Default)]
struct Tally {
    instances: usize,
    sat: usize,
    unsat: usize,
    wrong: usize,
    times: Vec<f64>,
}

impl Tally {
    fn add(&mut self, r: &Row, reference: Option<&HashMap<(String, String), Answer>>) {
        self.instances += 1;
        match r.answer {
            Answer::Sat => self.sat += 1,
            Answer::Unsat => self.unsat += 1,
            Answer::Open => return,
        }
        self.times.push(r.seconds);
        let known = reference.and_then(|m| m.get(&r.key)).copied().unwrap_or(Answer::Open);
        self.wrong += usize::from(known != Answer::Open && known != r.answer);
    }

    fn row(&mut self, bench: &str, series: &str, with_ref: bool) -> String {
        self.times.sort_by(f64::total_cmp);
        let median = match self.times.len() {
            0 => "–".to_string(),
            _ => format!("{:.2}", crate::records::median(&self.times)),
        };
        let wrong = if with_ref { format!(" {} |", self.wrong) } else { String::new() };
        let solved = self.sat + self.unsat;
        format!(
            "| {bench} | {series} | {solved} / {} | {} | {} |{wrong} {median} |\n",
            self.instances, self.unsat, self.sat
        )
    }
}

/// The markdown table: one row per benchmark and series, then the totals.
fn table(series: &[Series], reference: Option<&HashMap<(String, String), Answer>>) -> String {
    let with_ref = reference.is_some();
    let mut s = String::new();
    let wrong = if with_ref { " wrong |" } else { "" };
    let _ = writeln!(s, "| benchmark | results | solved | unsat | sat |{wrong} median s (solved) |");
    let _ = writeln!(s, "|---|---|---|---|---|{}---|", if with_ref { "---|" } else { "" });
    let mut per: BTreeMap<(String, usize), Tally> = BTreeMap::new();
    let mut total: Vec<Tally> = series.iter().map(|_| Tally::default()).collect();
    for (k, ser) in series.iter().enumerate() {
        for r in &ser.rows {
            per.entry((r.benchmark.clone(), k)).or_default().add(r, reference);
            total[k].add(r, reference);
        }
    }
    for ((bench, k), t) in &mut per {
        s += &t.row(bench, &series[*k].name, with_ref);
    }
    for (k, t) in total.iter_mut().enumerate() {
        s += &t.row("**all**", &series[k].name, with_ref);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(bench: &str, prop: &str, answer: Answer, seconds: f64) -> Row {
        Row { benchmark: bench.into(), key: ("n".into(), prop.into()), answer, seconds }
    }

    #[test]
    fn table_counts_solved_wrong_and_medians() {
        let rows = vec![
            row("a", "p0", Answer::Unsat, 1.0),
            row("a", "p1", Answer::Sat, 3.0),
            row("a", "p2", Answer::Open, 300.0),
            row("b", "p3", Answer::Unsat, 2.0),
        ];
        let s = [Series { name: "run".into(), rows }];
        let reference: HashMap<_, _> = [(("n".into(), "p1".into()), Answer::Unsat)].into_iter().collect();
        let t = table(&s, Some(&reference));
        assert!(t.contains("| a | run | 2 / 3 | 1 | 1 | 1 | 2.00 |"), "{t}");
        assert!(t.contains("| b | run | 1 / 1 | 1 | 0 | 0 | 2.00 |"), "{t}");
        assert!(t.contains("| **all** | run | 3 / 4 | 2 | 1 | 1 | 2.00 |"), "{t}");
        assert!(!table(&s, None).contains("wrong"));
    }
}
