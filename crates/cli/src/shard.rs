//! Deterministic slices of a run, for clusters: `--shard K/N` takes the
//! items `i` (instances of an instances file, or images) with
//! `i mod N = K − 1`, and writes beside its results file a record of the
//! run (`<results>.shard.json`) that `polycert merge` checks: the same
//! input, options and `N` in every shard, each `K` once, every row there.

use crate::InputError;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::OnceLock;

/// The `K`-th of `N` slices (`1 ≤ K ≤ N`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub k: usize,
    pub n: usize,
}

impl FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("'{s}': expected K/N with 1 ≤ K ≤ N (e.g. 2/8)");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (k, n) = (k.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        if k == 0 || k > n {
            return Err(bad());
        }
        Ok(Shard { k, n })
    }
}

impl Shard {
    /// Whether item `i` (0-based, in input order) is in this slice.
    pub fn takes(&self, i: usize) -> bool {
        i % self.n == self.k - 1
    }
}

/// What a shard ran: written beside its results, read by `merge`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// polycert's version and commit.
    pub polycert: String,
    /// `vnncomp` or `verify`.
    pub command: String,
    /// The input's file name, length and CRC-32 (instances file or images).
    pub input: String,
    pub input_len: u64,
    pub input_crc32: u32,
    /// The command line less the input, results and shard arguments.
    pub options: Vec<String>,
    pub shard: Shard,
    /// How many items this shard holds.
    pub items: usize,
}

/// The record's file beside a results file.
pub fn record_path(results: &Path) -> PathBuf {
    PathBuf::from(format!("{}.shard.json", results.display()))
}

/// The command line after `--config` expansion, set once by `main`.
static COMMAND_LINE: OnceLock<Vec<String>> = OnceLock::new();

pub fn set_command_line(args: &[std::ffi::OsString]) {
    let _ = COMMAND_LINE.set(args.iter().map(|a| a.to_string_lossy().into_owned()).collect());
}

/// Arguments that may differ between the shards of one run, or that name
/// the input (compared by content).
const PER_SHARD: [&str; 8] =
    ["--shard", "--results", "--resume", "--overwrite", "--result-file", "--json", "--instances", "--images"];
/// Those of them that take a value.
const WITH_VALUE: [&str; 5] = ["--shard", "--results", "--result-file", "--instances", "--images"];

/// The options that must agree between shards: the command line less
/// the program, the subcommand and the [`PER_SHARD`] arguments.
fn options() -> Vec<String> {
    let args = COMMAND_LINE.get().cloned().unwrap_or_default();
    let mut out = Vec::new();
    let mut it = args.into_iter().skip(2);
    while let Some(a) = it.next() {
        let name = a.split('=').next().unwrap_or("").to_string();
        if PER_SHARD.contains(&name.as_str()) {
            if WITH_VALUE.contains(&name.as_str()) && !a.contains('=') {
                it.next();
            }
            continue;
        }
        out.push(a);
    }
    out
}

impl RunRecord {
    /// The record of a shard of `command` over `input` holding `items` items.
    pub fn new(command: &str, input: &Path, shard: Shard, items: usize) -> Result<Self> {
        let bytes = std::fs::read(input).with_context(|| format!("{}: cannot read", input.display()))?;
        Ok(RunRecord {
            polycert: concat!(env!("CARGO_PKG_VERSION"), " (", env!("POLYCERT_COMMIT"), ")").into(),
            command: command.into(),
            input: input.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            input_len: bytes.len() as u64,
            input_crc32: crc32fast::hash(&bytes),
            options: options(),
            shard,
            items,
        })
    }

    /// Writes the record beside `results`; on `resume`, first checks that
    /// a record already there is of the same run.
    pub fn keep(&self, results: &Path, resume: bool) -> Result<()> {
        if resume
            && record_path(results).exists()
            && let old = RunRecord::read(results)?
            && let Some(m) =
                old.mismatch(self).or_else(|| (old.shard != self.shard).then(|| "the shard differs".into()))
        {
            return Err(InputError(format!("{}: --resume of another run: {m}", results.display())).into());
        }
        self.write(results)
    }

    fn write(&self, results: &Path) -> Result<()> {
        let path = record_path(results);
        let text = serde_json::to_string_pretty(self)? + "\n";
        std::fs::write(&path, text).with_context(|| format!("{}: cannot write", path.display()))
    }

    pub fn read(results: &Path) -> Result<Self> {
        let path = record_path(results);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            InputError(format!(
                "{}: no shard record ({}: {e}); merge joins results written with --shard K/N",
                results.display(),
                path.display()
            ))
        })?;
        serde_json::from_str(&text).map_err(|e| InputError(format!("{}: {e}", path.display())).into())
    }

    /// Why `other` is not a shard of the same run as `self`, if it is not.
    pub fn mismatch(&self, other: &RunRecord) -> Option<String> {
        let field = |what: &str, a: String, b: String| (a != b).then(|| format!("{what} differs: {a} against {b}"));
        field("polycert", self.polycert.clone(), other.polycert.clone())
            .or_else(|| field("the command", self.command.clone(), other.command.clone()))
            .or_else(|| {
                let id = |r: &RunRecord| format!("{} ({} bytes, crc32 {:08x})", r.input, r.input_len, r.input_crc32);
                field("the input", id(self), id(other))
            })
            .or_else(|| field("the options", self.options.join(" "), other.options.join(" ")))
            .or_else(|| field("the number of shards", self.shard.n.to_string(), other.shard.n.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_items() {
        for n in 1..6 {
            for i in 0..40 {
                let owners = (1..=n).filter(|&k| Shard { k, n }.takes(i)).count();
                assert_eq!(owners, 1, "item {i} of {n} shards");
            }
        }
        assert_eq!("2/3".parse::<Shard>(), Ok(Shard { k: 2, n: 3 }));
        for bad in ["0/3", "4/3", "3", "a/b", "1/0", "-1/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }
}
