//! The kernels compiled for one GPU. NVRTC compiles `KERNELS` to the GPU's
//! machine code (a cubin for `sm_XY`), so the driver has nothing to
//! translate when it loads them: the PTX path made the first process on a
//! machine wait for the driver's translation. Where NVRTC cannot target
//! the GPU (a GPU newer than the library), the kernels go as PTX
//! (`compute_XY`), which the driver translates. Both are kept on disk
//! (`kernel_cache.rs`) and in memory for the life of the process.
//!
//! `POLYCERT_KERNEL_IMAGE=ptx` skips the cubin (to compare, or where a
//! driver refuses NVRTC's machine code).

use cudarc::nvrtc::{Ptx, result, sys};
use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char};
use std::sync::{Mutex, OnceLock};

/// How the kernels are compiled: no fused multiply-add (every rounding
/// step is the one the source writes), no flush to zero, IEEE division and
/// square root.
const OPTIONS: [&str; 4] = ["--fmad=false", "--ftz=false", "--prec-div=true", "--prec-sqrt=true"];

/// What NVRTC makes of the source.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Kind {
    /// Machine code for one GPU architecture.
    Cubin,
    /// PTX, which the driver translates at load.
    Ptx,
}

impl Kind {
    /// The kinds to try, best first.
    pub fn in_order() -> &'static [Kind] {
        match std::env::var("POLYCERT_KERNEL_IMAGE").as_deref() {
            Ok("ptx") => &[Kind::Ptx],
            _ => &[Kind::Cubin, Kind::Ptx],
        }
    }

    /// NVRTC's `--gpu-architecture` for compute capability `major.minor`.
    fn arch(self, (major, minor): (i32, i32)) -> String {
        match self {
            Kind::Cubin => format!("sm_{major}{minor}"),
            Kind::Ptx => format!("compute_{major}{minor}"),
        }
    }
}

/// A compiled image, and whether it came from the disk cache.
pub struct Image {
    pub ptx: Ptx,
    pub cached: bool,
}

/// Images compiled or read in this process, by architecture and kind,
/// with whether they came from the disk cache.
type Images = HashMap<(String, Kind), (Vec<u8>, bool)>;

/// `src` compiled as `kind` for compute capability `cc`: from memory, the
/// disk cache (unless `fresh`) or NVRTC.
pub fn image(src: &str, cc: (i32, i32), kind: Kind, fresh: bool) -> Result<Image, String> {
    static MEMORY: OnceLock<Mutex<Images>> = OnceLock::new();
    let memory = MEMORY.get_or_init(Default::default);
    let mut map = memory.lock().map_err(|_| "kernel cache poisoned".to_string())?;
    let arch = kind.arch(cc);
    if let Some((bytes, cached)) = map.get(&(arch.clone(), kind)).filter(|_| !fresh) {
        return Ok(Image { ptx: as_ptx(kind, bytes.clone()), cached: *cached });
    }
    let options = format!("{OPTIONS:?}");
    let version = nvrtc_version();
    let key = [src, &arch, &options, &version, if kind == Kind::Cubin { "cubin" } else { "ptx" }];
    let cached = if fresh { None } else { crate::kernel_cache::read(&key) };
    let hit = cached.is_some();
    let bytes = match cached {
        Some(b) => b,
        None => {
            let b = compile(src, &arch, kind)?;
            crate::kernel_cache::write(&key, &b);
            b
        }
    };
    map.insert((arch, kind), (bytes.clone(), hit));
    Ok(Image { ptx: as_ptx(kind, bytes), cached: hit })
}

fn as_ptx(kind: Kind, bytes: Vec<u8>) -> Ptx {
    match kind {
        Kind::Cubin => Ptx::from_binary(bytes),
        Kind::Ptx => Ptx::from_src(String::from_utf8_lossy(&bytes).into_owned()),
    }
}

/// NVRTC's version, part of the cache key.
fn nvrtc_version() -> String {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: NVRTC is loaded (checked by the caller); it writes two ints.
    let _ = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
    format!("nvrtc {major}.{minor}")
}

/// Compiles `src` for `arch`: the cubin or the PTX (without its final NUL).
fn compile(src: &str, arch: &str, kind: Kind) -> Result<Vec<u8>, String> {
    let code = CString::new(src).map_err(|_| "kernel source holds a NUL byte".to_string())?;
    let prog = result::create_program(&code, None).map_err(|e| format!("NVRTC: {e:?}"))?;
    let mut opts: Vec<String> = OPTIONS.iter().map(|o| o.to_string()).collect();
    opts.push(format!("--gpu-architecture={arch}"));
    // SAFETY: `prog` is a live program from `create_program`, destroyed once below.
    let out = unsafe { result::compile_program(prog, &opts) }
        .map_err(|e| format!("NVRTC failed to compile kernels/*.cu for {arch}: {e:?}: {}", log(prog)))
        .and_then(|()| unsafe { fetch(prog, kind) }.map_err(|e| format!("NVRTC: {e:?}")));
    // SAFETY: as above; nothing uses `prog` after this.
    let _ = unsafe { result::destroy_program(prog) };
    out
}

/// The compiled image of `prog`.
///
/// # Safety
/// `prog` is a live, compiled program.
unsafe fn fetch(prog: sys::nvrtcProgram, kind: Kind) -> Result<Vec<u8>, result::NvrtcError> {
    match kind {
        Kind::Ptx => {
            let ptx = unsafe { result::get_ptx(prog) }?;
            let mut bytes: Vec<u8> = ptx.into_iter().map(|c| c as u8).collect();
            while bytes.last() == Some(&0) {
                bytes.pop();
            }
            Ok(bytes)
        }
        Kind::Cubin => {
            let mut size = 0usize;
            unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) }.result()?;
            let mut buf = vec![0 as c_char; size];
            unsafe { sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr()) }.result()?;
            Ok(buf.into_iter().map(|c| c as u8).collect())
        }
    }
}

/// The line of NVRTC's log of `prog` that names an error (else its first).
fn log(prog: sys::nvrtcProgram) -> String {
    // SAFETY: `prog` is live (the caller's); the log ends with a NUL.
    let Ok(raw) = (unsafe { result::get_program_log(prog) }) else { return String::new() };
    let text = unsafe { CStr::from_ptr(raw.as_ptr()) }.to_string_lossy().into_owned();
    let line = text.lines().find(|l| l.contains("error")).or_else(|| text.lines().next());
    line.unwrap_or("").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_names_its_architecture() {
        assert_eq!(Kind::Cubin.arch((9, 0)), "sm_90");
        assert_eq!(Kind::Ptx.arch((12, 0)), "compute_120");
    }
}
