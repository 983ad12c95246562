//! polycert's compiled kernels kept on disk between runs: the GPU's machine
//! code (cubin) or PTX. NVRTC compiles the kernels once per (source,
//! options, architecture, NVRTC version, image kind); a later process reads
//! the file instead (a VNN-COMP run starts one process per instance).
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
    dir.join(format!("kernels-{:016x}.bin", fnv1a(key)))
}

/// The cached image of `key`, if a complete file is there.
pub fn read(key: &[&str]) -> Option<Vec<u8>> {
    read_in(&folder()?, key)
}

/// Stores `image` for `key` (best effort).
pub fn write(key: &[&str], image: &[u8]) {
    if let Some(dir) = folder() {
        write_in(&dir, key, image);
    }
}

/// Whether `bytes` look whole: an ELF file (cubin) with its section
/// headers inside it, or PTX text that starts with a comment and names its
/// `.version` (files are renamed into place whole). The driver checks the rest when it
/// loads it; a file it refuses is compiled again.
fn looks_whole(bytes: &[u8]) -> bool {
    if bytes.starts_with(b"\x7fELF") && bytes.len() >= 64 && bytes[4] == 2 {
        // ELF64: e_shoff at 40, e_shentsize at 58, e_shnum at 60.
        let u = |a: usize, n: usize| bytes[a..a + n].iter().rev().fold(0u64, |v, &b| v << 8 | u64::from(b));
        let end = u(40, 8).saturating_add(u(58, 2) * u(60, 2));
        return end <= bytes.len() as u64;
    }
    bytes.starts_with(b"//") && bytes.windows(8).any(|w| w == b".version")
}

/// [`read`] from `dir`.
fn read_in(dir: &std::path::Path, key: &[&str]) -> Option<Vec<u8>> {
    let bytes = std::fs::read(path_in(dir, key)).ok()?;
    looks_whole(&bytes).then_some(bytes)
}

/// [`write`] into `dir`.
fn write_in(dir: &std::path::Path, key: &[&str], image: &[u8]) {
    let path = path_in(dir, key);
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp =
        dir.join(format!(".{}.{}", path.file_name().and_then(|n| n.to_str()).unwrap_or("ptx"), std::process::id()));
    if std::fs::write(&tmp, image).is_ok() && std::fs::rename(&tmp, &path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key's image comes back from its file; another key finds nothing,
    /// nor does a file cut short.
    #[test]
    fn images_round_trip_through_the_folder() {
        let dir = std::env::temp_dir().join(format!("polycert-kernel-test-{}", std::process::id()));
        let ptx = b"//\n// Generated\n.version 8.0\n.target sm_90\n";
        write_in(&dir, &["src", "compute_90"], ptx);
        assert_eq!(read_in(&dir, &["src", "compute_90"]).as_deref(), Some(&ptx[..]));
        assert_eq!(read_in(&dir, &["src", "compute_80"]), None);
        assert_ne!(fnv1a(&["ab", "c"]), fnv1a(&["a", "bc"]));
        std::fs::write(path_in(&dir, &["bad"]), "truncat").unwrap();
        assert_eq!(read_in(&dir, &["bad"]), None);
        // An ELF64 header whose section table (at 64, 2 entries of 64 bytes) fits.
        let mut elf = vec![0u8; 192];
        elf[..5].copy_from_slice(b"\x7fELF\x02");
        elf[40] = 64;
        elf[58] = 64;
        elf[60] = 2;
        write_in(&dir, &["elf"], &elf);
        assert_eq!(read_in(&dir, &["elf"]), Some(elf.clone()));
        write_in(&dir, &["elf"], &elf[..191]);
        assert_eq!(read_in(&dir, &["elf"]), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
