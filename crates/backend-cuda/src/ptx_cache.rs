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

/// The file of `key` in the cache folder.
fn path_of(key: &[&str]) -> Option<PathBuf> {
    Some(folder()?.join(format!("kernels-{:016x}.ptx", fnv1a(key))))
}

/// The cached PTX of `key`, if a complete file is there (PTX text starts
/// with a comment and names its `.version`).
pub fn read(key: &[&str]) -> Option<String> {
    let text = std::fs::read_to_string(path_of(key)?).ok()?;
    (text.starts_with("//") && text.contains(".version")).then_some(text)
}

/// Stores `ptx` for `key` (best effort).
pub fn write(key: &[&str], ptx: &str) {
    let Some(path) = path_of(key) else { return };
    let Some(dir) = path.parent() else { return };
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

    /// A key's PTX comes back from its file; another key finds nothing, and
    /// `off` turns the cache off. (One test: it sets the process's environment.)
    #[test]
    fn ptx_round_trips_through_the_folder() {
        let dir = std::env::temp_dir().join(format!("polycert-ptx-test-{}", std::process::id()));
        // SAFETY: no other test of this crate reads this variable.
        unsafe { std::env::set_var("POLYCERT_PTX_CACHE", &dir) };
        let ptx = "//\n// Generated\n.version 8.0\n.target sm_90\n";
        write(&["src", "compute_90"], ptx);
        assert_eq!(read(&["src", "compute_90"]).as_deref(), Some(ptx));
        assert_eq!(read(&["src", "compute_80"]), None);
        assert_ne!(fnv1a(&["ab", "c"]), fnv1a(&["a", "bc"]));
        std::fs::write(path_of(&["bad"]).unwrap(), "truncat").unwrap();
        assert_eq!(read(&["bad"]), None, "a file that is not PTX is not used");
        unsafe { std::env::set_var("POLYCERT_PTX_CACHE", "off") };
        assert_eq!(read(&["src", "compute_90"]), None);
        unsafe { std::env::remove_var("POLYCERT_PTX_CACHE") };
        let _ = std::fs::remove_dir_all(&dir);
    }
}
