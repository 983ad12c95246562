//! polycert's PTX kept on disk between runs. NVRTC compiles the kernels
//! once per (source, options, architecture, NVRTC version); a later process
//! reads the file instead (a VNN-COMP run starts one process per instance).
//!
//! The folder is `POLYCERT_PTX_CACHE` (`off`: no cache), else
//! `$XDG_CACHE_HOME/polycert`, else `~/.cache/polycert`. A file is written
//! whole and renamed into place, so a reader never sees part of one; any
//! failure to read or write only means compiling again.

use std::path::PathBuf;

/// The cache folder, or `None` when caching is off or no folder is known.
fn folder() -> Option<PathBuf> {
    match std::env::var_os("POLYCERT_PTX_CACHE") {
        Some(v) if v == "off" || v == "0" || v.is_empty() => None,
        Some(v) => Some(PathBuf::from(v)),
        None => {
            let base = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
            Some(base.join("polycert"))
        }
    }
}

/// FNV-1a over `parts` (each ended by a 0 byte): a stable name for the key.
fn fnv1a(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in p.as_bytes().iter().chain(&[0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// The file of `key` in folder `dir`.
fn path_in(dir: &std::path::Path, key: &[&str]) -> PathBuf {
    dir.join(format!("kernels-{:016x}.ptx", fnv1a(key)))
}

/// The cached PTX of `key`, if a complete file is there.
pub fn read(key: &[&str]) -> Option<String> {
    read_in(&folder()?, key)
}

/// Stores `ptx` for `key` (best effort).
pub fn write(key: &[&str], ptx: &str) {
    if let Some(dir) = folder() {
        write_in(&dir, key, ptx);
    }
}

/// [`read`] from `dir`: PTX text starts with a comment and names its `.version`.
fn read_in(dir: &std::path::Path, key: &[&str]) -> Option<String> {
    let text = std::fs::read_to_string(path_in(dir, key)).ok()?;
    (text.starts_with("//") && text.contains(".version")).then_some(text)
}

/// [`write`] into `dir`.
fn write_in(dir: &std::path::Path, key: &[&str], ptx: &str) {
    let path = path_in(dir, key);
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp =
        dir.join(format!(".{}.{}", path.file_name().and_then(|n| n.to_str()).unwrap_or("ptx"), std::process::id()));
    if std::fs::write(&tmp, ptx).is_ok() && std::fs::rename(&tmp, &path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key's PTX comes back from its file; another key finds nothing, nor
    /// does a file that is not PTX.
    #[test]
    fn ptx_round_trips_through_the_folder() {
        let dir = std::env::temp_dir().join(format!("polycert-ptx-test-{}", std::process::id()));
        let ptx = "//\n// Generated\n.version 8.0\n.target sm_90\n";
        write_in(&dir, &["src", "compute_90"], ptx);
        assert_eq!(read_in(&dir, &["src", "compute_90"]).as_deref(), Some(ptx));
        assert_eq!(read_in(&dir, &["src", "compute_80"]), None);
        assert_ne!(fnv1a(&["ab", "c"]), fnv1a(&["a", "bc"]));
        std::fs::write(path_in(&dir, &["bad"]), "truncat").unwrap();
        assert_eq!(read_in(&dir, &["bad"]), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
