//! Results files as `polycert report` reads them: polycert's (`vnncomp`'s
//! CSV, or any CSV with a header naming its columns) and VNN-COMP's own
//! (`category,onnx,vnnlib,prepare_seconds,result,seconds`, no header).

use crate::InputError;
use anyhow::{Context, Result};
use std::path::Path;

/// A verifier's answer, in VNN-COMP's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Unsat,
    Sat,
    /// unknown, timeout, error or anything else: not solved.
    Open,
}

/// One instance of a results file.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The category column where there is one, else the model's name.
    pub benchmark: String,
    /// (model, property) by file name, without folders or `.onnx`.
    pub key: (String, String),
    pub answer: Answer,
    pub seconds: f64,
}

pub fn answer(word: &str) -> Answer {
    match word.trim().to_ascii_lowercase().as_str() {
        "unsat" | "verified" | "holds" | "true" => Answer::Unsat,
        "sat" | "falsified" | "violated" => Answer::Sat,
        _ => Answer::Open,
    }
}

/// A file name without its folders and `.onnx` (or `.gz`) ending.
fn stem(path: &str) -> String {
    let name = path.trim().rsplit(['/', '\\']).next().unwrap_or(path);
    let name = name.strip_suffix(".gz").unwrap_or(name);
    name.strip_suffix(".onnx").unwrap_or(name).to_string()
}

/// Column positions, from a header or VNN-COMP's fixed order.
struct Columns {
    bench: Option<usize>,
    onnx: usize,
    vnnlib: usize,
    result: usize,
    seconds: Option<usize>,
}

fn from_header(h: &[&str]) -> Option<Columns> {
    let find = |names: &[&str]| h.iter().position(|c| names.contains(&c.trim().to_ascii_lowercase().as_str()));
    Some(Columns {
        bench: find(&["category", "benchmark", "set"]),
        onnx: find(&["onnx", "network", "model"])?,
        vnnlib: find(&["vnnlib", "property"])?,
        result: find(&["result", "verified", "verdict"])?,
        seconds: find(&["seconds", "time", "seconds_h200"]),
    })
}

/// Every instance of the results file at `path`.
pub fn results(path: &Path) -> Result<Vec<Row>> {
    let name = path.display();
    let text = std::fs::read_to_string(path).with_context(|| format!("{name}: cannot read"))?;
    let mut rdr = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(text.as_bytes());
    let mut recs = rdr.records();
    let first = match recs.next() {
        Some(r) => r.map_err(|e| InputError(format!("{name}: row 1: {e}")))?,
        None => return Ok(Vec::new()),
    };
    let first: Vec<&str> = first.iter().collect();
    let (cols, header) = match from_header(&first) {
        Some(c) => (c, true),
        None if first.len() == 6 => {
            (Columns { bench: Some(0), onnx: 1, vnnlib: 2, result: 4, seconds: Some(5) }, false)
        }
        None => {
            return Err(InputError(format!(
                "{name}: neither a header naming onnx, vnnlib and result columns nor VNN-COMP's six columns"
            ))
            .into());
        }
    };
    let mut rows = Vec::new();
    let mut take = |k: usize, f: &[&str]| -> Result<()> {
        let get = |i: usize| f.get(i).copied().ok_or_else(|| InputError(format!("{name}: row {k}: too few columns")));
        let seconds = match cols.seconds {
            Some(i) => get(i)?.trim().parse().unwrap_or(f64::NAN),
            None => f64::NAN,
        };
        let key = (stem(get(cols.onnx)?), stem(get(cols.vnnlib)?));
        let benchmark = cols.bench.map(&get).transpose()?.map_or_else(|| key.0.clone(), |b| b.trim().to_string());
        rows.push(Row { benchmark, key, answer: answer(get(cols.result)?), seconds });
        Ok(())
    };
    if !header {
        take(1, &first)?;
    }
    for (k, rec) in recs.enumerate() {
        let rec = rec.map_err(|e| InputError(format!("{name}: row {}: {e}", k + 2)))?;
        take(k + 2, &rec.iter().collect::<Vec<_>>())?;
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(name: &str, text: &str) -> Result<Vec<Row>> {
        let p = std::env::temp_dir().join(format!("polycert-read-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        let r = results(&p);
        std::fs::remove_file(&p).ok();
        r
    }

    #[test]
    fn reads_polycert_vnncomp_and_reference_files() {
        let a = read("a.csv", "onnx,vnnlib,result,seconds,counterexample,message\nonnx/n.onnx,p.vnnlib,sat,1.5,c,\n")
            .unwrap();
        assert_eq!(a[0].key, ("n".into(), "p.vnnlib".into()));
        assert_eq!((a[0].benchmark.as_str(), a[0].answer, a[0].seconds), ("n", Answer::Sat, 1.5));
        let b = read("b.csv", "mnist,n.onnx,p.vnnlib,0.1,unsat,2.0\nmnist,n.onnx,q.vnnlib,0.0,timeout,300\n").unwrap();
        assert_eq!(
            (b.len(), b[0].benchmark.as_str(), b[0].answer, b[1].answer),
            (2, "mnist", Answer::Unsat, Answer::Open)
        );
        let c = read("c.csv", "network,property,label,verified,seconds_h200\nn,p.vnnlib,8,true,0.003\n").unwrap();
        assert_eq!((c[0].key.0.as_str(), c[0].answer), ("n", Answer::Unsat));
        assert!(read("d.csv", "x,y\n1,2\n").unwrap_err().to_string().contains("neither a header"));
    }
}
