//! Shared by the test targets that read the shared benchmarks.

use std::path::PathBuf;

/// `$POLYCERT_BENCH`, else `../shared/bench` next to the repository; `None`
/// where it does not exist (the tests then skip).
pub fn bench_dir() -> Option<PathBuf> {
    let d = std::env::var_os("POLYCERT_BENCH")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/bench")));
    d.exists().then_some(d)
}
