//! The one place that decides how a run uses the machine: analysis workers
//! (`--jobs`), search workers, search memory and whether the host is
//! shared. The batch is the analyzer's (`Analyzer::batch_capacity`, from
//! its memory budget), unless `--batch` gives it.

use crate::args::AnalysisArgs;
use crate::engine::Engine;
use polycert_deeppoly::{Options, RuntimeOps};

/// Most analysis workers on CUDA: each has its own stream, and one
/// worker's host work overlaps the others' kernels; more gained nothing
/// (bench/results/2026-11-23-backend-pgd.md).
const MAX_CUDA_WORKERS: usize = 3;

/// How a run of `jobs` properties uses the machine, and the options every
/// analyzer of it gets.
pub struct Plan {
    /// Analysis workers, each with its own analyzer (and CUDA stream).
    pub workers: usize,
    pub opts: Options,
}

impl AnalysisArgs {
    /// The plan for `jobs` properties with `timeout` seconds each.
    pub fn plan(&self, engine: &Engine, jobs: usize, timeout: Option<f64>) -> Plan {
        let workers = self.jobs.unwrap_or_else(|| default_workers(engine, jobs, self.batch)).clamp(1, jobs.max(1));
        let mut opts = self.options(timeout);
        opts.search.memory = self.search_memory_mb.map(|m| m << 20).or_else(|| Some(available_memory()? / 2));
        // Several properties at once already fill the host: their searches
        // share the search workers of the GPUs (one each on one GPU), the
        // α/β rows on the backend where `auto` (the host's evaluation takes
        // every core, the other jobs' too) unless each has a GPU of its own,
        // and an even share of the search memory.
        if workers > 1 {
            opts.search.workers.get_or_insert(shared_search_workers(engine, workers));
            opts.host_shared = workers > gpu_count(engine);
            opts.search.memory = opts.search.memory.map(|m| m / workers);
        }
        Plan { workers, opts }
    }
}

/// Analysis workers when `--jobs` is not given: on CUDA, one per batch up
/// to [`MAX_CUDA_WORKERS`] a GPU (a single batch gains nothing from more, and
/// pays their streams, cuBLAS handles and weights), and at least one per GPU
/// (each property's search then runs on its own GPU); on the CPU one, whose
/// kernels use every core.
fn default_workers(engine: &Engine, jobs: usize, batch: Option<usize>) -> usize {
    match engine {
        Engine::Cpu(_) => 1,
        Engine::Cuda(be, _) => {
            let per = batch.unwrap_or_else(|| RuntimeOps::batch_hint(be.as_ref())).max(1);
            let gpus = be.gpu_count();
            jobs.div_ceil(per).max(gpus).clamp(1, MAX_CUDA_WORKERS * gpus)
        }
    }
}

fn gpu_count(engine: &Engine) -> usize {
    match engine {
        Engine::Cuda(be, _) => be.gpu_count(),
        Engine::Cpu(_) => 1,
    }
}

/// A search's workers while `workers` analysis workers run: one on one
/// GPU or the CPU; with several GPUs, their share of the GPUs' search
/// workers (4 a GPU).
fn shared_search_workers(engine: &Engine, workers: usize) -> usize {
    match engine {
        Engine::Cuda(be, _) if be.gpu_count() > 1 => (RuntimeOps::search_workers(be.as_ref()) / workers).max(1),
        _ => 1,
    }
}

/// The host memory available now (`MemAvailable` of `/proc/meminfo`), in
/// bytes, where it can be read.
fn available_memory() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}
