//! Backend and precision selection, and running properties through the analyzer.

use crate::report::Record;
use anyhow::Result;
use polycert_backend_cpu::CpuBackend;
use polycert_backend_cuda::CudaBackend;
use polycert_deeppoly::{Analyzer, Backend, Network, Options, Property};
use polycert_interval::Fp;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    /// CUDA when available, otherwise the CPU.
    Auto,
    Cpu,
    Cuda,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Precision {
    F32,
    F64,
}

/// A ready backend.
pub enum Engine {
    Cpu(CpuBackend),
    Cuda(Box<CudaBackend>),
}

/// Opens the chosen backend: `cuda` fails clearly without a GPU, `auto`
/// falls back to the CPU with a one-line notice.
pub fn open_backend(choice: BackendChoice, budget: Option<usize>) -> Result<Engine> {
    let cpu = || Engine::Cpu(budget.map(CpuBackend::with_budget).unwrap_or_default());
    let cuda = || {
        CudaBackend::new().map(|b| {
            Engine::Cuda(Box::new(match budget {
                Some(x) => b.with_budget(x),
                None => b,
            }))
        })
    };
    match choice {
        BackendChoice::Cpu => Ok(cpu()),
        BackendChoice::Cuda => cuda().map_err(|e| anyhow::anyhow!("--backend cuda: {e}")),
        BackendChoice::Auto => Ok(cuda().unwrap_or_else(|e| {
            eprintln!("polycert: CUDA unavailable ({e}); using the CPU");
            cpu()
        })),
    }
}

/// A named property to check.
pub struct Job {
    pub name: String,
    pub property: Property,
}

/// Runs every job, calling `sink` with each record as soon as it exists.
pub fn run_jobs(
    engine: &Engine,
    net: &Network,
    model_name: &str,
    jobs: &[Job],
    opts: &Options,
    precision: Precision,
    sink: &mut dyn FnMut(Record) -> Result<()>,
) -> Result<()> {
    match (engine, precision) {
        (Engine::Cpu(be), Precision::F32) => run_with::<_, f32>(be, net, model_name, jobs, opts, sink),
        (Engine::Cpu(be), Precision::F64) => run_with::<_, f64>(be, net, model_name, jobs, opts, sink),
        (Engine::Cuda(be), Precision::F32) => run_with::<_, f32>(be.as_ref(), net, model_name, jobs, opts, sink),
        (Engine::Cuda(be), Precision::F64) => run_with::<_, f64>(be.as_ref(), net, model_name, jobs, opts, sink),
    }
}

fn run_with<B: Backend<T>, T: Fp>(
    be: &B,
    net: &Network,
    model_name: &str,
    jobs: &[Job],
    opts: &Options,
    sink: &mut dyn FnMut(Record) -> Result<()>,
) -> Result<()> {
    let analyzer = Analyzer::<B, T>::new(net, be, opts.clone()).map_err(|e| anyhow::anyhow!("{model_name}: {e}"))?;
    for job in jobs {
        let rec = match analyzer.analyze(&job.property) {
            Ok(o) => Record::from_outcome(model_name, &job.name, job.property.label, &o),
            Err(e) => Record::error(model_name, &job.name, e.to_string()),
        };
        sink(rec)?;
    }
    Ok(())
}
