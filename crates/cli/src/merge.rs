//! `polycert merge`: joins the results files of the shards of one run
//! (`--shard K/N`) into one, in the order of one unsharded run, after
//! checking that they are the shards of one run (same input, options and
//! `N`; each `K` once) and that every shard finished (as many rows as it
//! has items, no row twice).

use crate::InputError;
use crate::results::{HEADER, complete_rows};
use crate::say::errln;
use crate::shard::RunRecord;
use anyhow::{Context, Result, bail};
use clap::Args;
use std::collections::HashSet;
use std::path::PathBuf;

#[derive(Args)]
pub struct MergeArgs {
    /// The shards' results files (each with its `.shard.json` beside it).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The merged results file.
    #[arg(long)]
    out: PathBuf,
    /// Replace `--out` if it exists.
    #[arg(long)]
    overwrite: bool,
}

/// One shard's complete rows, without the header.
fn rows(path: &std::path::Path) -> Result<(bool, Vec<csv::StringRecord>)> {
    let (text, _) = complete_rows(path)?;
    let mut rd = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(text.as_bytes());
    let mut out = Vec::new();
    for (k, rec) in rd.records().enumerate() {
        out.push(rec.map_err(|e| InputError(format!("{}: row {}: {e}", path.display(), k + 1)))?);
    }
    let header = out.first().is_some_and(|r| r.iter().eq(HEADER));
    if header {
        out.remove(0);
    }
    Ok((header, out))
}

pub fn run(a: MergeArgs) -> Result<u8> {
    if a.out.exists() && !a.overwrite {
        bail!(InputError(format!("{}: exists; give --overwrite to replace it", a.out.display())));
    }
    let recs = a.files.iter().map(|f| RunRecord::read(f)).collect::<Result<Vec<_>>>()?;
    let (first, n) = (&a.files[0], recs[0].shard.n);
    let mut owner: Vec<Option<&PathBuf>> = vec![None; n];
    for (f, r) in a.files.iter().zip(&recs) {
        if let Some(m) = recs[0].mismatch(r) {
            bail!(InputError(format!("{}: not a shard of the run of {}: {m}", f.display(), first.display())));
        }
        if let Some(g) = owner[r.shard.k - 1].replace(f) {
            bail!(InputError(format!("{} and {} are both shard {}/{n}", g.display(), f.display(), r.shard.k)));
        }
    }
    let missing: Vec<String> = (1..=n).filter(|k| owner[k - 1].is_none()).map(|k| format!("{k}/{n}")).collect();
    if !missing.is_empty() {
        bail!(InputError(format!("shards {} are missing (merge needs all {n})", missing.join(", "))));
    }
    let mut header = None;
    // (item index in the unsharded run, row)
    let mut all: Vec<(usize, csv::StringRecord)> = Vec::new();
    let mut seen = HashSet::new();
    for (f, r) in a.files.iter().zip(&recs) {
        let (h, rs) = rows(f)?;
        if *header.get_or_insert(h) != h {
            bail!(InputError(format!("{}: another results format than {}", f.display(), first.display())));
        }
        if rs.len() != r.items {
            bail!(InputError(format!(
                "{}: {} rows for {} items: the shard did not finish (run it again with --resume)",
                f.display(),
                rs.len(),
                r.items
            )));
        }
        // The polycert format starts with onnx,vnnlib; VNN-COMP's with the category.
        let key = if h { 0 } else { 1 };
        for (j, row) in rs.into_iter().enumerate() {
            let id = (row.get(key).unwrap_or("").to_string(), row.get(key + 1).unwrap_or("").to_string());
            if !seen.insert(id.clone()) {
                bail!(InputError(format!("{}: {} {} has a row in two shards", f.display(), id.0, id.1)));
            }
            all.push((r.shard.k - 1 + j * n, row));
        }
    }
    all.sort_by_key(|(i, _)| *i);
    let file = std::fs::File::create(&a.out).with_context(|| format!("{}: cannot create", a.out.display()))?;
    let mut w = csv::WriterBuilder::new().has_headers(false).flexible(true).from_writer(file);
    if header == Some(true) {
        w.write_record(HEADER)?;
    }
    for (_, row) in &all {
        w.write_record(row)?;
    }
    w.flush().with_context(|| format!("{}: cannot write", a.out.display()))?;
    errln!("polycert: merged {} rows of {n} shards into {}", all.len(), a.out.display());
    // The tally of the merged run, as `vnncomp` ends with it.
    let (res, secs) = if header == Some(true) { (2, 3) } else { (4, 5) };
    let tally: Vec<(&'static str, f64)> = all
        .iter()
        .map(|(_, r)| {
            (
                crate::vnncomp::vnn_result_word(r.get(res).unwrap_or("")),
                r.get(secs).and_then(|s| s.parse().ok()).unwrap_or(0.0),
            )
        })
        .collect();
    crate::say::err!("{}", crate::records::vnn_summary(&tally));
    Ok(0)
}
