//! The results file of `polycert vnncomp`: one CSV row per instance, written
//! and flushed as soon as it is known, never rewritten.
//!
//! - `polycert` format: a header line, then
//!   `onnx,vnnlib,result,seconds,counterexample,message,parse_seconds`,
//!   quoted where needed (`parse_seconds`: the part of `seconds` spent
//!   reading the property file; empty where none was read).
//! - `vnncomp` format: exactly the lines VNN-COMP's `run_single_instance.sh`
//!   appends, `category,onnx,vnnlib,prepare_seconds,result,seconds`, no header.

use crate::InputError;
use crate::say::errln;
use anyhow::{Context, Result, bail};
use std::fs::File;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Header line; onnx,vnnlib,result,seconds,counterexample,message,parse_seconds.
    Polycert,
    /// VNN-COMP's own: category,onnx,vnnlib,prepare_seconds,result,seconds.
    Vnncomp,
}

/// What to do with a results file that already holds rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Refuse it: a second run would repeat every row.
    New,
    /// Keep its rows (the caller skips their instances).
    Resume,
    /// Empty it first.
    Overwrite,
}

pub const HEADER: [&str; 7] = ["onnx", "vnnlib", "result", "seconds", "counterexample", "message", "parse_seconds"];

/// One finished instance.
pub struct Row<'a> {
    pub onnx: &'a str,
    pub vnnlib: &'a str,
    /// VNN-COMP's word: unsat, sat, unknown, timeout, error.
    pub result: &'a str,
    pub seconds: f64,
    /// The part of `seconds` spent reading the property file.
    pub parse_seconds: Option<f64>,
    /// Time to load the network, charged to its first instance.
    pub prepare_seconds: f64,
    pub counterexample: Option<PathBuf>,
    pub message: Option<String>,
}

pub struct ResultsFile {
    path: PathBuf,
    format: Format,
    category: String,
    out: csv::Writer<File>,
}

impl ResultsFile {
    /// Opens `path` for appending (emptied first with `Mode::Overwrite`;
    /// refused with `Mode::New` where it holds results). A row cut off by a
    /// killed run (no final newline) is dropped: it is not a result.
    /// Returns the file and the `(onnx, vnnlib)` pairs of its complete rows.
    pub fn open(path: &Path, format: Format, category: String, mode: Mode) -> Result<(Self, Vec<(String, String)>)> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("{}: cannot open", path.display()))?;
        if mode == Mode::Overwrite {
            file.set_len(0).with_context(|| format!("{}: cannot empty", path.display()))?;
        }
        let (text, keep) = complete_rows(path)?;
        let mut rows = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(text.as_bytes());
        let mut done = Vec::new();
        let mut first = true;
        for (k, rec) in rows.records().enumerate() {
            let rec = rec.map_err(|e| InputError(format!("{}: row {}: {e}", path.display(), k + 1)))?;
            let fields: Vec<&str> = rec.iter().collect();
            let ok = match format {
                Format::Polycert if first => fields == HEADER,
                Format::Polycert => fields.len() == HEADER.len(),
                Format::Vnncomp => fields.len() == 6 && fields[..3] != HEADER[..3],
            };
            if !ok {
                bail!(InputError(format!(
                    "{}: row {} ({}) is not in the {format:?} format; use --overwrite, or the file's --format",
                    path.display(),
                    k + 1,
                    fields.join(",")
                )));
            }
            if !first || format == Format::Vnncomp {
                let (o, v) = if format == Format::Vnncomp { (1, 2) } else { (0, 1) };
                done.push((fields[o].to_string(), fields[v].to_string()));
            }
            first = false;
        }
        if mode == Mode::New && !done.is_empty() {
            bail!(InputError(format!(
                "{}: already holds {} results; give --resume to run only the instances it lacks, or --overwrite",
                path.display(),
                done.len()
            )));
        }
        if (keep as u64) < file.metadata().map(|m| m.len()).unwrap_or(0) {
            errln!("polycert: {}: dropping a partial last row (an interrupted run)", path.display());
            file.set_len(keep as u64).with_context(|| format!("{}: cannot truncate", path.display()))?;
        }
        let mut out = csv::WriterBuilder::new().has_headers(false).from_writer(file);
        if text.is_empty() && format == Format::Polycert {
            out.write_record(HEADER)?;
            out.flush()?;
        }
        Ok((Self { path: path.to_path_buf(), format, category, out }, done))
    }

    /// Appends one row and flushes it to the file.
    pub fn write(&mut self, r: &Row) -> Result<()> {
        let one_line = |s: &str| s.replace(['\n', '\r'], " ");
        let secs = format!("{:.6}", r.seconds);
        let res = match self.format {
            Format::Polycert => {
                let cex = r.counterexample.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
                let msg = r.message.as_deref().map(one_line).unwrap_or_default();
                let parse = r.parse_seconds.map(|s| format!("{s:.6}")).unwrap_or_default();
                self.out.write_record([r.onnx, r.vnnlib, r.result, &secs, &cex, &msg, &parse])
            }
            Format::Vnncomp => {
                let prep = format!("{:.6}", r.prepare_seconds);
                self.out.write_record([&self.category, r.onnx, r.vnnlib, &prep, r.result, &secs])
            }
        };
        res.and_then(|_| Ok(self.out.flush()?)).with_context(|| format!("{}: cannot write", self.path.display()))
    }
}

/// The complete rows of a results file, and the length they take (less
/// than the file's where a killed run left a partial last row).
pub fn complete_rows(path: &Path) -> Result<(String, usize)> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    Ok((String::from_utf8_lossy(&bytes[..keep]).into_owned(), keep))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_and_read_back() {
        let path = std::env::temp_dir().join(format!("polycert-results-{}.csv", std::process::id()));
        let row = |vnnlib, message: Option<&str>| Row {
            onnx: "a,b.onnx",
            vnnlib,
            result: "error",
            seconds: 0.5,
            parse_seconds: (vnnlib == "q.vnnlib").then_some(0.25),
            prepare_seconds: 0.0,
            counterexample: None,
            message: message.map(String::from),
        };
        let (mut f, done) = ResultsFile::open(&path, Format::Polycert, String::new(), Mode::Overwrite).unwrap();
        assert!(done.is_empty());
        f.write(&row("p.vnnlib", Some("bad \"x\", line 2\nthen more"))).unwrap();
        f.write(&row("q.vnnlib", None)).unwrap();
        drop(f);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "onnx,vnnlib,result,seconds,counterexample,message,parse_seconds\n\
             \"a,b.onnx\",p.vnnlib,error,0.500000,,\"bad \"\"x\"\", line 2 then more\",\n\
             \"a,b.onnx\",q.vnnlib,error,0.500000,,,0.250000\n"
        );
        assert!(ResultsFile::open(&path, Format::Polycert, String::new(), Mode::New).is_err());
        let (_, done) = ResultsFile::open(&path, Format::Polycert, String::new(), Mode::Resume).unwrap();
        assert_eq!(done, [("a,b.onnx".into(), "p.vnnlib".into()), ("a,b.onnx".into(), "q.vnnlib".into())]);
        std::fs::remove_file(&path).ok();
    }
}
