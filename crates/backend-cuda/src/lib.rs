//! The CUDA backend of polycert: GPUPoly's kernels (tiled interval GEMM,
//! windowed conv backsubstitution, ReLU and diagonal steps,
//! concretization, row compaction, residual merge, forward pass), compiled
//! at first use by NVRTC from `kernels/deeppoly.cu` and driven through
//! cudarc. It builds everywhere; without a GPU, [`CudaBackend::new`]
//! returns [`BackendError::Unavailable`].

mod affine;
mod blas;
mod device;
mod fetch;
pub mod fpna;
mod gpus;
mod infer;
mod kernel_cache;
mod kernel_image;
mod matrix;
mod memory;
mod relax;
mod runtime;
mod trace;

pub use device::{Device, KERNELS};
pub use matrix::{GpuCst, GpuPMat};

use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, result::CublasError};
use cudarc::driver::{CudaSlice, DeviceRepr, LaunchConfig, PinnedHostSlice, PushKernelArg, ValidAsZeroBits};
use device::driver_err;
use polycert_deeppoly::{BResult, BackendError, Conv2d, Geom, Pool, Shape};
use polycert_interval::Fp;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Float types the kernels are instantiated for.
pub trait GpuScalar: Fp + DeviceRepr + ValidAsZeroBits + Unpin {
    const SUFFIX: &'static str;

    /// cuBLAS GEMM in this type.
    ///
    /// # Safety
    /// The slices must hold the matrices `cfg` describes.
    unsafe fn gemm(
        blas: &CudaBlas,
        cfg: GemmConfig<Self>,
        a: &CudaSlice<Self>,
        b: &CudaSlice<Self>,
        c: &mut CudaSlice<Self>,
    ) -> Result<(), CublasError>;
}
impl GpuScalar for f32 {
    const SUFFIX: &'static str = "f32";
    unsafe fn gemm(
        blas: &CudaBlas,
        cfg: GemmConfig<f32>,
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
    ) -> Result<(), CublasError> {
        unsafe { Gemm::<f32>::gemm(blas, cfg, a, b, c) }
    }
}
impl GpuScalar for f64 {
    const SUFFIX: &'static str = "f64";
    unsafe fn gemm(
        blas: &CudaBlas,
        cfg: GemmConfig<f64>,
        a: &CudaSlice<f64>,
        b: &CudaSlice<f64>,
        c: &mut CudaSlice<f64>,
    ) -> Result<(), CublasError> {
        unsafe { Gemm::<f64>::gemm(blas, cfg, a, b, c) }
    }
}

/// Node shape and window, as the kernels take them.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct KGeom {
    c: i32,
    h: i32,
    w: i32,
    wh: i32,
    ww: i32,
}
unsafe impl DeviceRepr for KGeom {}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct KConv {
    kh: i32,
    kw: i32,
    sh: i32,
    sw: i32,
    pt: i32,
    pl: i32,
}
unsafe impl DeviceRepr for KConv {}

fn kgeom(shape: Shape, win: (usize, usize)) -> KGeom {
    KGeom { c: shape.c as i32, h: shape.h as i32, w: shape.w as i32, wh: win.0 as i32, ww: win.1 as i32 }
}

fn kpool(p: &Pool) -> KConv {
    KConv {
        kh: p.kernel.0 as i32,
        kw: p.kernel.1 as i32,
        sh: p.stride.0 as i32,
        sw: p.stride.1 as i32,
        pt: p.pad.0 as i32,
        pl: p.pad.1 as i32,
    }
}

fn kconv(c: &Conv2d) -> KConv {
    KConv {
        kh: c.kernel.0 as i32,
        kw: c.kernel.1 as i32,
        sh: c.stride.0 as i32,
        sw: c.stride.1 as i32,
        pt: c.pad.0 as i32,
        pl: c.pad.1 as i32,
    }
}

/// A device vector with its logical length (allocations are never empty).
pub struct GpuBuf<T> {
    pub data: CudaSlice<T>,
    pub len: usize,
}

/// An interval matrix on the GPU, two planes.
pub struct GpuMat<T> {
    pub rows: usize,
    pub cols: usize,
    pub lo: CudaSlice<T>,
    pub hi: CudaSlice<T>,
}

/// The CUDA backend.
pub struct CudaBackend {
    dev: Device,
    /// The GPUs this backend's workers and forks spread over, and this
    /// one's place among them.
    gpus: Arc<gpus::GpuSet>,
    gpu: usize,
    /// Forks made so far (the next goes to the next GPU).
    forked: std::sync::atomic::AtomicUsize,
    budget: Option<usize>,
    /// cuBLAS handle, created on the first point GEMM.
    blas: OnceLock<CudaBlas>,
    offsets_cache: Mutex<HashMap<u64, OffsetEntry>>,
    props_cache: Mutex<HashMap<u64, PropsEntry>>,
    /// f64 tables by content (as bits): the forward conv's `γ_k`, the point steps' `η·r1`.
    table_cache: RowCache<u64, CudaSlice<f64>>,
    /// Most products of a conv step done in one kernel instead of GEMMs
    /// (small steps: the GEMM's launches cost more than its work).
    conv_direct_max: usize,
    /// Page-locked buffers for downloads that overlap later work.
    pinned: Mutex<Vec<PinnedHostSlice<f64>>>,
    /// Host time in transfers and syncs (`POLYCERT_CUDA_TRACE=1`).
    trace: trace::Trace,
    /// Held by a test's backend (`test_backend`); dropped last.
    _test_lock: Option<TestLock>,
}

type OffsetEntry = (Vec<(i32, i32)>, Arc<CudaSlice<i32>>);
type PropsEntry = (Vec<u32>, Arc<CudaSlice<u32>>);
/// Device copies of host vectors, by content hash.
type RowCache<E, D> = Mutex<HashMap<u64, (Vec<E>, Arc<D>)>>;
const OFFSET_CACHE_ENTRIES: usize = 512;
/// Default of `CudaBackend::conv_direct_max`: one property's conv steps stay
/// below it, a test set's batches take the GEMMs.
const CONV_DIRECT_MAX: usize = 1 << 26;

const BLOCK: u32 = 256;

/// A device copy of `v`, cached by content in `cache`.
fn cached<E: CacheKey, D>(cache: &RowCache<E, D>, v: &[E], upload: impl FnOnce(&[E]) -> BResult<D>) -> BResult<Arc<D>> {
    // A multiplicative hash of the length and at most 33 elements (every
    // element's took ~10 µs for a few thousand rows, several times a step).
    // Hits compare every element, so a collision only costs an upload.
    let step = (v.len() / 32).max(1);
    let key = v
        .iter()
        .step_by(step)
        .chain(v.last())
        .fold(v.len() as u64, |h, e| (h.rotate_left(5) ^ e.word()).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95));
    let same = |k: &[E]| k.len() == v.len() && k.iter().zip(v).fold(true, |ok, (a, b)| ok & (a.word() == b.word()));
    let mut cache = cache.lock().map_err(|_| BackendError::Failure("row cache poisoned".into()))?;
    if let Some((k, d)) = cache.get(&key)
        && same(k)
    {
        return Ok(d.clone());
    }
    let d = Arc::new(upload(v)?);
    if cache.len() >= OFFSET_CACHE_ENTRIES {
        cache.clear();
    }
    cache.insert(key, (v.to_vec(), d.clone()));
    Ok(d)
}

/// An element of a cached host vector, as one word (one-to-one: hits
/// compare words).
trait CacheKey: Clone + PartialEq {
    fn word(&self) -> u64;
}

impl CacheKey for (i32, i32) {
    fn word(&self) -> u64 {
        ((self.0 as u32 as u64) << 32) | self.1 as u32 as u64
    }
}

impl CacheKey for u32 {
    fn word(&self) -> u64 {
        *self as u64
    }
}

impl CacheKey for u64 {
    fn word(&self) -> u64 {
        *self
    }
}

fn grid_for(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: ((n.div_ceil(BLOCK as usize)).max(1) as u32, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The base-2 logarithm of the lanes that share one sum of a kernel over
/// `sums` sums of `parts` parts each: lanes a power of two up to a warp and
/// `parts`, while the threads stay at most `threads` (a launch of few sums,
/// as one property's, then fills the GPU; one of many, as a batch of
/// images', keeps a lane a sum).
fn lanes_per_sum(sums: usize, parts: usize, threads: usize) -> i32 {
    let mut lg = 0;
    while lg < 5 && 1 << lg < parts && sums << (lg + 1) <= threads {
        lg += 1;
    }
    lg
}

/// `cfg` once per batch slot (`blockIdx.y`).
fn batched(mut cfg: LaunchConfig, batch: usize) -> LaunchConfig {
    cfg.grid_dim.1 = batch as u32;
    cfg
}

/// The forward kernels' batch: `x` holds `batch` slots of `n_in` values,
/// and the launch grid's y extent holds the slots.
fn check_batch<T>(what: &str, x: (&GpuBuf<T>, &GpuBuf<T>), n_in: usize, batch: usize) -> BResult<()> {
    if x.0.len != batch * n_in || x.1.len != batch * n_in || batch > 65535 {
        return Err(BackendError::Failure(format!(
            "{what}: {} and {} inputs for {batch} slots of {n_in}",
            x.0.len, x.1.len
        )));
    }
    Ok(())
}

fn per_row(rows: usize) -> LaunchConfig {
    // Rows too few to fill the GPU (one property's) take twice the lanes each.
    let block = if rows <= 512 { 2 * BLOCK } else { BLOCK };
    LaunchConfig { grid_dim: (rows.max(1) as u32, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 }
}

impl CudaBackend {
    /// Opens GPU 0.
    pub fn new() -> BResult<Self> {
        Self::on_device(0)
    }

    pub fn on_device(ordinal: usize) -> BResult<Self> {
        Self::on_devices(&[ordinal])
    }

    /// Opens the first of `ordinals`; workers ([`CudaBackend::worker_on`])
    /// and search forks go to all of them in turn.
    pub fn on_devices(ordinals: &[usize]) -> BResult<Self> {
        let first = *ordinals.first().ok_or_else(|| BackendError::Unavailable("no GPU given".into()))?;
        Ok(Self::with_device(Device::open(first)?, Arc::new(gpus::GpuSet::new(ordinals)), 0, None))
    }

    fn with_device(dev: Device, gpus: Arc<gpus::GpuSet>, gpu: usize, budget: Option<usize>) -> Self {
        Self {
            dev,
            gpus,
            gpu,
            forked: Default::default(),
            budget,
            conv_direct_max: CONV_DIRECT_MAX,
            blas: OnceLock::new(),
            offsets_cache: Mutex::default(),
            props_cache: Mutex::default(),
            table_cache: Mutex::default(),
            pinned: Mutex::default(),
            trace: trace::Trace::from_env(),
            _test_lock: None,
        }
    }

    /// The GPUs the driver shows (after `CUDA_VISIBLE_DEVICES`).
    pub fn visible_gpus() -> BResult<usize> {
        gpus::visible_gpus()
    }

    /// How many GPUs this backend's workers spread over.
    pub fn gpu_count(&self) -> usize {
        self.gpus.len()
    }

    /// A backend for another worker thread: same GPU and kernels, its own
    /// stream, cuBLAS handle and caches, so that one worker's host work
    /// overlaps another's kernels. Give each a share of the memory budget.
    pub fn worker(&self) -> BResult<Self> {
        self.worker_on(self.gpu)
    }

    /// A worker on the `k`-th GPU of this backend's set (counted round
    /// it; this backend's own GPU is the `k`-th where `k` is its place).
    pub fn worker_on(&self, k: usize) -> BResult<Self> {
        let gpu = k % self.gpus.len();
        let dev =
            if gpu == self.gpu { self.dev.with_new_stream()? } else { self.gpus.stream_on(self.gpus.ordinal(gpu))? };
        Ok(Self::with_device(dev, self.gpus.clone(), gpu, self.budget).with_conv_direct_max(self.conv_direct_max))
    }

    /// This backend with its GPU as its only one: its forks and workers
    /// stay there (an analysis worker among one per GPU).
    pub fn alone(mut self) -> Self {
        self.gpus = Arc::new(gpus::GpuSet::new(&[self.gpus.ordinal(self.gpu)]));
        self.gpu = 0;
        self
    }

    /// A search fork: a worker on the next GPU of the set.
    fn next_fork(&self) -> BResult<Self> {
        let k = self.forked.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        self.worker_on(self.gpu + k)
    }

    fn blas(&self) -> BResult<&CudaBlas> {
        if let Some(b) = self.blas.get() {
            return Ok(b);
        }
        let span = polycert_deeppoly::base::profile::span("cuda.cublas");
        let b = blas::new_blas(self)?;
        drop(span);
        let _ = self.blas.set(b);
        Ok(self.blas.get().expect("set above"))
    }

    /// Whether cuBLAS's float32 GEMM in the analysis's mode keeps subnormal
    /// inputs, products and sums on this device (else the point bound pays
    /// the flushed error: `blas::gemm_model`).
    pub fn gemm_f32_keeps_subnormals(&self) -> BResult<bool> {
        blas::gemm_keeps_subnormals(self.blas()?, self)
    }

    /// Conv steps of at most `products` multiplications run in one kernel,
    /// larger ones as GEMMs (a test sets 0 to check the GEMM path).
    pub fn with_conv_direct_max(mut self, products: usize) -> Self {
        self.conv_direct_max = products;
        self
    }

    /// Caps the memory used for expression matrices.
    pub fn with_budget(mut self, bytes: usize) -> Self {
        self.budget = Some(bytes);
        self
    }

    pub fn device(&self) -> &Device {
        &self.dev
    }

    fn alloc<T: GpuScalar>(&self, n: usize) -> BResult<CudaSlice<T>> {
        self.trace
            .time(trace::ALLOC, || self.dev.stream.alloc_zeros::<T>(n.max(1)).map_err(|e| driver_err("allocation", e)))
    }

    fn htod<T: DeviceRepr + Clone + Default + ValidAsZeroBits>(&self, v: &[T]) -> BResult<CudaSlice<T>> {
        if v.is_empty() {
            return self.dev.stream.alloc_zeros::<T>(1).map_err(|e| driver_err("allocation", e));
        }
        self.trace.time(trace::UPLOAD, || self.dev.stream.clone_htod(v).map_err(|e| driver_err("upload", e)))
    }

    fn dtoh<T: DeviceRepr + Clone + Default>(&self, s: &CudaSlice<T>, n: usize) -> BResult<Vec<T>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut v = self
            .trace
            .time(trace::DOWNLOAD, || self.dev.stream.clone_dtoh(s).map_err(|e| driver_err("download", e)))?;
        v.truncate(n);
        Ok(v)
    }

    /// The rows' window offsets on the device, cached by content: most
    /// steps reuse a handful of row sets.
    fn offsets(&self, g: &Geom) -> BResult<Arc<CudaSlice<i32>>> {
        let _span = self.trace.span("offsets");
        cached(&self.offsets_cache, &g.offsets, |v| self.htod(&v.iter().flat_map(|&(y, x)| [y, x]).collect::<Vec<_>>()))
    }

    /// The rows' batch slots on the device (cached as the offsets), after
    /// checking that every per-neuron table of `tables` lengths covers them:
    /// a kernel reading past a table would read garbage, not fail.
    fn props(&self, what: &str, g: &Geom, tables: &[usize]) -> BResult<Arc<CudaSlice<u32>>> {
        let _span = self.trace.span("props");
        g.check_tables(what, tables).map_err(BackendError::Failure)?;
        cached(&self.props_cache, &g.props, |v| self.htod(v))
    }

    /// Device memory every element of which the next kernel writes.
    fn alloc_written<T: GpuScalar>(&self, n: usize) -> BResult<CudaSlice<T>> {
        // SAFETY: callers launch a kernel that writes all `n` elements before
        // anything reads them.
        unsafe { self.dev.stream.alloc::<T>(n.max(1)) }.map_err(|e| driver_err("allocation", e))
    }

    /// Per-row lower bound of `Σ a_j·[xlo, xhi]` (also the constant terms).
    fn row_lower<T: GpuScalar>(
        &self,
        a: &GpuMat<T>,
        g: &Geom,
        xlo: &CudaSlice<T>,
        xhi: &CudaSlice<T>,
    ) -> BResult<Vec<f64>> {
        let out = self.alloc::<f64>(a.rows)?;
        let off = self.offsets(g)?;
        let kg = kgeom(g.shape, g.win);
        let f = self.dev.func("concretize", T::SUFFIX);
        let mut b = self.dev.stream.launch_builder(f);
        b.arg(&a.lo).arg(&a.hi).arg(&kg).arg(&*off).arg(xlo).arg(xhi).arg(&out);
        unsafe { b.launch(per_row(a.rows)) }.map_err(|e| driver_err("concretize", e))?;
        self.dtoh(&out, a.rows)
    }
}

/// For tests: the backend, or `None` (with a notice) on a machine without a
/// GPU. Where the GPU tests were built to run (`cfg(gpu_tests)`, see
/// `build/test_cfg.rs`) or with `POLYCERT_REQUIRE_GPU=1`, a missing GPU
/// fails the test instead.
/// It holds [`TestLock`] until dropped: one test at a time on the GPU.
pub fn test_backend() -> Option<CudaBackend> {
    let lock = TestLock::take();
    match CudaBackend::new() {
        Ok(b) => Some(CudaBackend { _test_lock: Some(lock), ..b }),
        Err(e) if cfg!(gpu_tests) || std::env::var_os("POLYCERT_REQUIRE_GPU").is_some() => panic!("GPU required: {e}"),
        Err(e) => {
            eprintln!("skipping CUDA test: {e}");
            None
        }
    }
}

/// Serialises a process's GPU tests. A test that opened or closed its
/// context or streams while another test recorded a CUDA graph made the
/// recording fail, and errors reached both tests (measured:
/// bench/results/2026-11-27-architecture-measurements.md). The CLI records
/// graphs only while one stream is live (`Device::shares_context`).
struct TestLock;

static TEST_BUSY: (Mutex<bool>, std::sync::Condvar) = (Mutex::new(false), std::sync::Condvar::new());

impl TestLock {
    fn take() -> Self {
        let (busy, free) = &TEST_BUSY;
        let mut b = busy.lock().unwrap_or_else(|e| e.into_inner());
        while *b {
            b = free.wait(b).unwrap_or_else(|e| e.into_inner());
        }
        *b = true;
        TestLock
    }
}

impl Drop for TestLock {
    fn drop(&mut self) {
        let (busy, free) = &TEST_BUSY;
        *busy.lock().unwrap_or_else(|e| e.into_inner()) = false;
        free.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::TestLock;
    use std::time::Duration;

    /// A second taker waits until the first lock is dropped.
    #[test]
    fn test_lock_takes_turns() {
        let first = TestLock::take();
        let (tx, rx) = std::sync::mpsc::channel();
        let second = std::thread::spawn(move || {
            let _held = TestLock::take();
            tx.send(()).expect("send");
        });
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err(), "taken while held");
        drop(first);
        rx.recv_timeout(Duration::from_secs(10)).expect("taken once released");
        second.join().expect("second taker");
    }
}
