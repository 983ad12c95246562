//! The CUDA device: context, stream, and the kernels compiled by NVRTC
//! (fmad off, no flush-to-zero; `kernel_image.rs`).

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, DriverError};
use polycert_deeppoly::BackendError;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The kernel sources, embedded.
pub const KERNELS: &str = concat!(
    include_str!("../../../kernels/deeppoly.cu"),
    include_str!("../../../kernels/point.cu"),
    include_str!("../../../kernels/infer.cu"),
    include_str!("../../../kernels/fpna.cu")
);

/// Every kernel, instantiated for `f32` and `f64`.
pub const KERNEL_NAMES: &[&str] = &[
    "dense_backsub",
    "conv_backsub",
    "concretize",
    "relu_backsub",
    "diag_backsub",
    "maxpool_backsub",
    "maxpool_const",
    "compact",
    "add_into",
    "slice_cols",
    "forward_dense",
    "forward_conv",
    "point_affine_const",
    "point_conv_im",
    "point_conv_col2im",
    "point_conv_direct",
    "point_diag",
    "point_maxpool",
    "point_maxpool_const",
    "point_concretize",
    "point_concretize_add",
    "point_add_into",
    "point_compact",
    "point_slice_cols",
    "point_unit",
    "infer_bias",
    "pw_relu",
    "pw_relu_grad",
    "pw_sigmoid",
    "pw_sigmoid_grad",
    "pw_add",
    "pw_scale",
    "pw_sign_step",
    "pw_relax_back",
    "pw_relax_line",
    "pw_select",
    "pw_slope_grad",
    "gather",
    "scatter",
    "repeat_rows",
    "fpna_order",
    "fpna_partials",
    "fpna_final",
    "fpna_atomic_all",
    "fpna_splitk_dense",
];

/// Kernels with one instantiation (no type suffix).
pub const PLAIN_KERNELS: &[&str] = &["point_row_sum_neg", "cst_add_rd"];

pub fn driver_err(what: &str, e: DriverError) -> BackendError {
    if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        BackendError::OutOfMemory(format!("{what}: {e:?}"))
    } else {
        BackendError::Failure(format!("{what}: {e:?}"))
    }
}

/// The kernels loaded into `ctx`: a cubin, else PTX (`kernel_image.rs`);
/// a cached image the driver refuses is compiled again.
fn load_kernels(ctx: &Arc<CudaContext>, cc: (i32, i32)) -> Result<Arc<CudaModule>, BackendError> {
    use crate::kernel_image::{Kind, image};
    let mut why = String::new();
    for &kind in Kind::in_order() {
        for fresh in [false, true] {
            match image(KERNELS, cc, kind, fresh) {
                Ok(img) => match ctx.load_module(img.ptx) {
                    Ok(m) => return Ok(m),
                    Err(e) if img.cached => why = format!("loading kernels ({kind:?}): {e:?}"),
                    Err(e) => {
                        why = format!("loading kernels ({kind:?}): {e:?}");
                        break;
                    }
                },
                Err(e) => {
                    why = e;
                    break;
                }
            }
        }
    }
    Err(BackendError::Failure(why))
}

/// An initialised GPU with its kernels loaded.
pub struct Device {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub name: String,
    _module: Arc<CudaModule>,
    funcs: HashMap<String, CudaFunction>,
    /// Live streams of this context (this device and its workers').
    streams: Arc<AtomicUsize>,
}

impl Drop for Device {
    fn drop(&mut self) {
        self.streams.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Freed bytes the device's memory pool keeps across syncs. At the driver's
/// default (0), memory the pool holds unused goes back to the driver at
/// every sync (CUDA's documentation), and later allocations map it again.
const POOL_KEEP: u64 = 1 << 30;

/// Sets the default memory pool's release threshold to [`POOL_KEEP`]
/// (a failure only costs speed).
fn keep_pool(ctx: &CudaContext) {
    use cudarc::driver::sys;
    if ctx.bind_to_thread().is_err() {
        return;
    }
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: `pool` receives the device's pool handle; the attribute's
    // value is a u64, as the driver reads it.
    unsafe {
        if sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) == sys::CUresult::CUDA_SUCCESS {
            let mut keep = POOL_KEEP;
            let attr = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
            let _ = sys::cuMemPoolSetAttribute(pool, attr, (&mut keep as *mut u64).cast());
        }
    }
}

/// GPU `ordinal`'s compute capability (the driver started, no context).
fn compute_capability(ordinal: usize) -> Result<(i32, i32), BackendError> {
    use cudarc::driver::{result::device, sys::CUdevice_attribute as A};
    let dev = device::get(ordinal as i32).map_err(|e| driver_err("CUDA device", e))?;
    // SAFETY: `dev` is a device handle of the started driver.
    let attr = |a| unsafe { device::get_attribute(dev, a) }.map_err(|e| driver_err("compute capability", e));
    Ok((attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?, attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?))
}

impl Device {
    /// Opens GPU `ordinal`, or says clearly why it cannot.
    pub fn open(ordinal: usize) -> Result<Self, BackendError> {
        // Creating a context panics when libcuda is missing: check first.
        let n = crate::gpus::visible_gpus()?;
        // cuBLAS's libraries take a few hundred ms to load: start that now,
        // beside the context's creation (`blas.rs` uses them on the first GEMM).
        std::thread::spawn(crate::blas::preload);
        let span = polycert_deeppoly::base::profile::span("cuda.context");
        if n <= ordinal {
            return Err(BackendError::Unavailable(format!("no CUDA GPU {ordinal} (found {n})")));
        }
        let cc = compute_capability(ordinal)?;
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(BackendError::Unavailable("NVRTC (libnvrtc) not found: it compiles polycert's kernels".into()));
        }
        // NVRTC (its libraries read from disk, on a fresh machine for seconds)
        // compiles beside the context's creation; failures show again below.
        let kind = crate::kernel_image::Kind::in_order()[0];
        let compiling = std::thread::spawn(move || crate::kernel_image::image(KERNELS, cc, kind, false).map(|_| ()));
        let ctx = CudaContext::new(ordinal).map_err(|e| BackendError::Unavailable(format!("CUDA context: {e:?}")))?;
        keep_pool(&ctx);
        drop(span);
        let span = polycert_deeppoly::base::profile::span("cuda.kernels");
        let _ = compiling.join();
        let module = load_kernels(&ctx, cc)?;
        let mut funcs = HashMap::new();
        for base in KERNEL_NAMES {
            for s in ["f32", "f64"] {
                let name = format!("{base}_{s}");
                let f = module.load_function(&name).map_err(|e| driver_err(&name, e))?;
                funcs.insert(name, f);
            }
        }
        for name in PLAIN_KERNELS {
            let f = module.load_function(name).map_err(|e| driver_err(name, e))?;
            funcs.insert(name.to_string(), f);
        }
        drop(span);
        let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        // Each backend keeps to its own stream and its own buffers, so
        // cudarc's cross-stream events are not needed; without them, and on
        // a stream of its own (the legacy default stream cannot be
        // captured), a sequence of calls can be recorded as a CUDA graph.
        // SAFETY: no buffer of this context is used on two streams.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(|e| driver_err("new stream", e))?;
        Ok(Self { ctx, stream, name, _module: module, funcs, streams: Arc::new(AtomicUsize::new(1)) })
    }

    /// The same GPU and kernels with a fresh (non-blocking) stream, for a
    /// worker thread whose work should overlap this one's.
    pub fn with_new_stream(&self) -> Result<Self, BackendError> {
        let stream = self.ctx.new_stream().map_err(|e| driver_err("new stream", e))?;
        self.streams.fetch_add(1, Ordering::Relaxed);
        Ok(Self {
            ctx: self.ctx.clone(),
            stream,
            name: self.name.clone(),
            _module: self._module.clone(),
            funcs: self.funcs.clone(),
            streams: self.streams.clone(),
        })
    }

    /// Whether another stream of this context (a worker's) is live. cudarc
    /// keeps one error slot per context: the errors of a recording that
    /// fails (buffers freed on the invalidated stream) would be reported by
    /// another worker's next call.
    pub fn shares_context(&self) -> bool {
        self.streams.load(Ordering::Relaxed) > 1
    }

    pub fn func(&self, base: &str, suffix: &str) -> &CudaFunction {
        &self.funcs[&format!("{base}_{suffix}")]
    }

    /// A kernel with a single instantiation.
    pub fn plain(&self, name: &str) -> &CudaFunction {
        &self.funcs[name]
    }

    /// Free device memory in bytes.
    pub fn free_memory(&self) -> usize {
        self.ctx.mem_get_info().map(|(free, _)| free).unwrap_or(0)
    }
}
