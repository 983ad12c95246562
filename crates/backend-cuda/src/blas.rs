//! cuBLAS for the point arithmetic and the attack's inference: the handle
//! in pedantic math mode, the GEMMs' float model (with the float32 GEMM's
//! subnormal probe), and the row-major GEMM `G = A·W`.

use crate::{CudaBackend, GpuScalar};
use cudarc::cublas::{CudaBlas, GemmConfig, sys as blas_sys};
use cudarc::driver::CudaSlice;
use polycert_deeppoly::{BResult, BackendError, FloatModel};

/// The float model of a GEMM in `T` (round-to-nearest, FMA allowed). Its
/// underflow term assumes gradual underflow; where the float32 GEMM was seen
/// to flush subnormals ([`gemm_keeps_subnormals`]) each product and sum errs
/// by up to `2^-126` instead, paid as `η = 2^-125` (`(m+2)·η ≥ 2m·2^-126`).
pub(crate) fn gemm_model<T: GpuScalar>() -> FloatModel {
    let flushes = T::SUFFIX == "f32" && GEMM_F32_SUBNORMALS.get() != Some(&true);
    let eta = if flushes { 2.0 * f32::MIN_POSITIVE as f64 } else { T::MIN_SUBNORMAL.to_f64_exact() };
    FloatModel { unit_roundoff: T::UNIT_ROUNDOFF, min_subnormal: eta }
}

/// Whether the float32 GEMM keeps subnormals, once probed.
static GEMM_F32_SUBNORMALS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Whether cuBLAS's float32 GEMM, in the mode the analysis uses, keeps
/// subnormal inputs, products and sums: `[2^-70, 2^-130, 1]·[2^-70, 1,
/// 2^-140]ᵀ` must give exactly `2^-130 + 2^-139`.
pub(crate) fn gemm_keeps_subnormals(blas: &CudaBlas, b: &CudaBackend) -> BResult<bool> {
    let p = |e: i32| 2f32.powi(e);
    let (a, w) = ([p(-70), p(-130), 1.0], [p(-70), 1.0, p(-140)]);
    let (a, w) = (b.htod(&a)?, b.htod(&w)?);
    let mut g = b.htod(&[0f32])?;
    gemm_rm(blas, &a, 1, 3, &w, 1, &mut g)?;
    let got = b.dtoh(&g, 1)?[0];
    Ok(got == p(-130) + p(-139))
}

/// A cuBLAS handle on the backend's stream, in pedantic math mode: the
/// prescribed precision in every phase (no TF32, no emulation).
pub(crate) fn new_blas(b: &CudaBackend) -> BResult<CudaBlas> {
    let span = polycert_deeppoly::base::profile::span("cuda.cublas.load");
    if !unsafe { blas_sys::is_culib_present() } {
        return Err(BackendError::Unavailable("cuBLAS (libcublas) not found: point arithmetic needs it".into()));
    }
    drop(span);
    let span = polycert_deeppoly::base::profile::span("cuda.cublas.handle");
    let blas = CudaBlas::new(b.dev.stream.clone()).map_err(|e| BackendError::Failure(format!("cuBLAS: {e:?}")))?;
    drop(span);
    let _p = polycert_deeppoly::base::profile::span("cuda.cublas.probe");
    let st = unsafe { blas_sys::cublasSetMathMode(*blas.handle(), blas_sys::cublasMath_t::CUBLAS_PEDANTIC_MATH) };
    if st != blas_sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        return Err(BackendError::Failure(format!("cuBLAS math mode: {st:?}")));
    }
    if GEMM_F32_SUBNORMALS.get().is_none() {
        let _ = GEMM_F32_SUBNORMALS.set(gemm_keeps_subnormals(&blas, b)?);
    }
    Ok(blas)
}

/// Loads cuBLAS's libraries, where they are, and keeps them loaded (run
/// on a thread of its own while the context is made). `is_culib_present`
/// alone loads and unloads them; `culib` keeps them, and would panic
/// where they are missing, so it comes second.
pub(crate) fn preload() {
    // SAFETY: loading a shared library; cudarc keeps the handle in a
    // process-wide `OnceLock`, safe to race with its other users.
    unsafe {
        if blas_sys::is_culib_present() {
            let _ = blas_sys::culib();
        }
    }
}

/// `G = A·W` for row-major `A` (`rows × k`), `W` (`k × n`): in cuBLAS's
/// column-major view, `Gᵀ = Wᵀ·Aᵀ`.
pub(crate) fn gemm_rm<T: GpuScalar>(
    blas: &CudaBlas,
    a: &CudaSlice<T>,
    rows: usize,
    k: usize,
    w: &CudaSlice<T>,
    n: usize,
    g: &mut CudaSlice<T>,
) -> BResult<()> {
    if rows == 0 || n == 0 || k == 0 {
        return Ok(());
    }
    let too_big = |v: usize| i32::try_from(v).is_err();
    if too_big(rows) || too_big(n) || too_big(k) {
        return Err(BackendError::Failure(format!("GEMM {rows}x{k}x{n} exceeds cuBLAS's 32-bit sizes")));
    }
    let op = blas_sys::cublasOperation_t::CUBLAS_OP_N;
    let cfg = GemmConfig {
        transa: op,
        transb: op,
        m: n as i32,
        n: rows as i32,
        k: k as i32,
        alpha: T::one(),
        lda: n as i32,
        ldb: k as i32,
        beta: T::zero(),
        ldc: n as i32,
    };
    unsafe { T::gemm(blas, cfg, w, a, g) }.map_err(|e| BackendError::Failure(format!("cuBLAS GEMM: {e:?}")))
}
