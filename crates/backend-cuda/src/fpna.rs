//! FPNA instruments on the GPU (`polycert fpna`, kernels in `kernels/fpna.cu`):
//! the order in which thread blocks reach the atomic last stage of a sum
//! reduction, the reduction variants, a cuBLAS load on another stream, and a
//! split-K dense layer ending in atomicAdd. Not used by the analysis.

use crate::device::{Device, driver_err};
use crate::{GpuScalar, blas};
use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use polycert_deeppoly::{BResult, BackendError};
use std::sync::Arc;

/// How a reduction ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Per-block partials, then one block sums them: deterministic.
    TwoPass,
    /// Each block adds its partial with atomicAdd: the order varies.
    LastAtomic,
    /// Every element is added with atomicAdd.
    Atomic,
}

/// A background load: square f32 GEMMs queued on a stream of their own.
struct Load {
    stream: Arc<CudaStream>,
    _blas: CudaBlas,
    _bufs: [CudaSlice<f32>; 3],
}

pub struct Fpna {
    dev: Device,
    load: Option<Load>,
}

fn fail(msg: String) -> BackendError {
    BackendError::Failure(msg)
}

fn config(blocks: usize, threads: usize, shared: usize) -> LaunchConfig {
    LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (threads as u32, 1, 1), shared_mem_bytes: shared as u32 }
}

impl Fpna {
    /// Opens GPU 0 (a clear error on machines without CUDA).
    pub fn open() -> BResult<Self> {
        Ok(Self { dev: Device::open(0)?, load: None })
    }

    pub fn device_name(&self) -> &str {
        &self.dev.name
    }

    /// Queues `count` f32 GEMMs of `n × n` matrices on another stream; they
    /// run while the samples are taken. [`Fpna::finish_load`] waits for them.
    pub fn start_load(&mut self, n: usize, count: usize) -> BResult<()> {
        let stream = self.dev.ctx.new_stream().map_err(|e| driver_err("load stream", e))?;
        let blas = CudaBlas::new(stream.clone()).map_err(|e| fail(format!("cuBLAS: {e:?}")))?;
        let alloc = || stream.alloc_zeros::<f32>(n * n).map_err(|e| driver_err("load matrices", e));
        let (a, b, mut c) = (alloc()?, alloc()?, alloc()?);
        for _ in 0..count {
            blas::gemm_rm(&blas, &a, n, n, &b, n, &mut c)?;
        }
        self.load = Some(Load { stream, _blas: blas, _bufs: [a, b, c] });
        Ok(())
    }

    pub fn finish_load(&mut self) -> BResult<()> {
        if let Some(l) = self.load.take() {
            l.stream.synchronize().map_err(|e| driver_err("load", e))?;
        }
        Ok(())
    }

    fn check(&self, n: usize, threads: usize) -> BResult<()> {
        if !threads.is_power_of_two() || !(32..=1024).contains(&threads) {
            return Err(fail(format!("block size {threads} must be a power of two in 32..=1024")));
        }
        if n == 0 {
            return Err(fail("the reduction has no elements".into()));
        }
        Ok(())
    }

    /// For each of `samples` runs of the single-pass reduction of `x` in
    /// blocks of `chunk` elements (`threads` threads each): the block
    /// indices in the order of their atomicInc tickets, and in the order of
    /// the values their atomicAdd returned (`x ≥ 0`, so the sum grows).
    pub fn block_orders<T: GpuScalar>(
        &self,
        x: &[T],
        chunk: usize,
        threads: usize,
        samples: usize,
    ) -> BResult<Vec<(Vec<u32>, Vec<u32>)>> {
        self.check(x.len(), threads)?;
        let s = &self.dev.stream;
        let blocks = x.len().div_ceil(chunk.max(1));
        let xd = s.clone_htod(x).map_err(|e| driver_err("upload", e))?;
        let f = self.dev.func("fpna_order", T::SUFFIX);
        let (n, ch) = (x.len() as u64, chunk as u64);
        let mut out = Vec::with_capacity(samples);
        for _ in 0..samples {
            let mut acc = s.alloc_zeros::<T>(1).map_err(|e| driver_err("alloc", e))?;
            let mut counter = s.alloc_zeros::<u32>(1).map_err(|e| driver_err("alloc", e))?;
            let mut before = s.alloc_zeros::<T>(blocks).map_err(|e| driver_err("alloc", e))?;
            let mut ticket = s.alloc_zeros::<u32>(blocks).map_err(|e| driver_err("alloc", e))?;
            let mut l = s.launch_builder(f);
            l.arg(&xd).arg(&n).arg(&ch).arg(&mut acc).arg(&mut counter).arg(&mut before).arg(&mut ticket);
            unsafe { l.launch(config(blocks, threads, threads * std::mem::size_of::<T>())) }
                .map_err(|e| driver_err("fpna_order", e))?;
            let (b, t) = (
                s.clone_dtoh(&before).map_err(|e| driver_err("download", e))?,
                s.clone_dtoh(&ticket).map_err(|e| driver_err("download", e))?,
            );
            let mut by_ticket: Vec<u32> = (0..blocks as u32).collect();
            by_ticket.sort_by_key(|&i| t[i as usize]);
            let mut by_value: Vec<u32> = (0..blocks as u32).collect();
            by_value.sort_by(|&i, &j| b[i as usize].to_f64_exact().total_cmp(&b[j as usize].to_f64_exact()));
            out.push((by_ticket, by_value));
        }
        Ok(out)
    }

    /// The sum of `x` from each of `samples` runs of one reduction variant.
    pub fn reduce<T: GpuScalar>(
        &self,
        x: &[T],
        chunk: usize,
        threads: usize,
        variant: Variant,
        samples: usize,
    ) -> BResult<Vec<T>> {
        self.check(x.len(), threads)?;
        let s = &self.dev.stream;
        let blocks = x.len().div_ceil(chunk.max(1));
        let xd = s.clone_htod(x).map_err(|e| driver_err("upload", e))?;
        let (n, ch, nb) = (x.len() as u64, chunk as u64, blocks as u64);
        let shared = threads * std::mem::size_of::<T>();
        let mut sums = Vec::with_capacity(samples);
        for _ in 0..samples {
            let mut acc = s.alloc_zeros::<T>(1).map_err(|e| driver_err("alloc", e))?;
            match variant {
                Variant::TwoPass => {
                    let mut part = s.alloc_zeros::<T>(blocks).map_err(|e| driver_err("alloc", e))?;
                    let mut l = s.launch_builder(self.dev.func("fpna_partials", T::SUFFIX));
                    l.arg(&xd).arg(&n).arg(&ch).arg(&mut part);
                    unsafe { l.launch(config(blocks, threads, shared)) }.map_err(|e| driver_err("fpna_partials", e))?;
                    let mut l = s.launch_builder(self.dev.func("fpna_final", T::SUFFIX));
                    l.arg(&part).arg(&nb).arg(&mut acc);
                    unsafe { l.launch(config(1, threads, shared)) }.map_err(|e| driver_err("fpna_final", e))?;
                }
                Variant::LastAtomic => {
                    let mut counter = s.alloc_zeros::<u32>(1).map_err(|e| driver_err("alloc", e))?;
                    let mut before = s.alloc_zeros::<T>(blocks).map_err(|e| driver_err("alloc", e))?;
                    let mut ticket = s.alloc_zeros::<u32>(blocks).map_err(|e| driver_err("alloc", e))?;
                    let mut l = s.launch_builder(self.dev.func("fpna_order", T::SUFFIX));
                    l.arg(&xd).arg(&n).arg(&ch).arg(&mut acc).arg(&mut counter).arg(&mut before).arg(&mut ticket);
                    unsafe { l.launch(config(blocks, threads, shared)) }.map_err(|e| driver_err("fpna_order", e))?;
                }
                Variant::Atomic => {
                    let mut l = s.launch_builder(self.dev.func("fpna_atomic_all", T::SUFFIX));
                    l.arg(&xd).arg(&n).arg(&mut acc);
                    unsafe { l.launch(config(x.len().div_ceil(threads), threads, 0)) }
                        .map_err(|e| driver_err("fpna_atomic_all", e))?;
                }
            }
            sums.push(s.clone_dtoh(&acc).map_err(|e| driver_err("download", e))?[0]);
        }
        Ok(sums)
    }

    /// One run of `y = W·x + b` for `batch` inputs (`w`: `n_out × n_in`
    /// row-major), each sum split into chunks of `chunk` inputs that end in
    /// atomicAdd (in an order that varies from run to run).
    #[allow(clippy::too_many_arguments)]
    pub fn splitk_dense<T: GpuScalar>(
        &self,
        w: &[T],
        b: &[T],
        x: &[T],
        n_in: usize,
        n_out: usize,
        batch: usize,
        chunk: usize,
    ) -> BResult<Vec<T>> {
        if w.len() != n_in * n_out || b.len() != n_out || x.len() != batch * n_in || chunk == 0 {
            return Err(fail(format!(
                "splitk_dense: shapes {} {} {} for {n_in}→{n_out} ×{batch}",
                w.len(),
                b.len(),
                x.len()
            )));
        }
        let s = &self.dev.stream;
        let bias: Vec<T> = (0..batch).flat_map(|_| b.iter().copied()).collect();
        let (wd, xd) = (
            s.clone_htod(w).map_err(|e| driver_err("upload", e))?,
            s.clone_htod(x).map_err(|e| driver_err("upload", e))?,
        );
        let mut y = s.clone_htod(&bias).map_err(|e| driver_err("upload", e))?;
        let threads = 128usize;
        let (ni, no, ch) = (n_in as u64, n_out as u64, chunk as u64);
        let mut l = s.launch_builder(self.dev.func("fpna_splitk_dense", T::SUFFIX));
        l.arg(&wd).arg(&xd).arg(&mut y).arg(&ni).arg(&no).arg(&ch);
        let cfg = LaunchConfig {
            grid_dim: u32::try_from(n_out * batch * n_in.div_ceil(chunk)).map(|g| (g, 1, 1)).map_err(|_| {
                fail(format!("splitk_dense: {n_out}×{batch} outputs in chunks of {chunk} is too many blocks"))
            })?,
            block_dim: (threads as u32, 1, 1),
            shared_mem_bytes: (threads * std::mem::size_of::<T>()) as u32,
        };
        unsafe { l.launch(cfg) }.map_err(|e| driver_err("fpna_splitk_dense", e))?;
        s.clone_dtoh(&y).map_err(|e| driver_err("download", e))
    }
}
