//! Backend and precision selection, and running properties through the analyzer.

use crate::records::Record;
use crate::resources::Plan;
use crate::say::errln;
use anyhow::Result;
use polycert_backend_cpu::CpuBackend;
use polycert_backend_cuda::CudaBackend;
use polycert_deeppoly::{Analyzer, Backend, Network, Options, Property, RuntimeOps};
use polycert_interval::Fp;
use std::ops::ControlFlow;

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

/// `--precision`: the analysis's float type, or the backend's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PrecisionChoice {
    /// f32 on the CPU (twice f64's SIMD lanes), f64 on CUDA (as fast as
    /// f32 on the GPUs it targets) and for networks with exponentials (a
    /// kept Softmax: values across many orders of magnitude).
    Auto,
    F32,
    F64,
}

impl PrecisionChoice {
    /// The float type on `engine` for `net`.
    pub fn on(self, engine: &Engine, net: &polycert_deeppoly::Network) -> Precision {
        use polycert_deeppoly::{Elementwise, Op, PowerFn};
        let exponential =
            |n: &polycert_deeppoly::Node| matches!(n.op, Op::Elementwise(Elementwise::Power(PowerFn::Exponential(_))));
        match (self, engine) {
            (PrecisionChoice::Auto, Engine::Cpu(_)) if net.nodes().iter().any(exponential) => Precision::F64,
            (PrecisionChoice::F32, _) | (PrecisionChoice::Auto, Engine::Cpu(_)) => Precision::F32,
            (PrecisionChoice::F64, _) | (PrecisionChoice::Auto, Engine::Cuda(..)) => Precision::F64,
        }
    }
}

/// `--gpus`: the GPUs a CUDA run uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gpus {
    /// Every GPU the driver shows (after `CUDA_VISIBLE_DEVICES`).
    All,
    /// The first `n`.
    First(usize),
    /// These ordinals (the first is the main one).
    List(Vec<usize>),
}

impl std::str::FromStr for Gpus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("'{s}': expected all, a count (2) or a list of GPU numbers (0,2 or 3,)");
        if s == "all" {
            return Ok(Gpus::All);
        }
        if !s.contains(',') {
            return s.parse().ok().filter(|&n| n > 0).map(Gpus::First).ok_or_else(bad);
        }
        let list: Vec<usize> = s
            .split(',')
            .filter(|p| !p.is_empty())
            .map(|p| p.trim().parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        let distinct: std::collections::BTreeSet<_> = list.iter().collect();
        if list.is_empty() || distinct.len() != list.len() {
            return Err(bad());
        }
        Ok(Gpus::List(list))
    }
}

impl Gpus {
    /// The CUDA ordinals among `visible` GPUs.
    fn ordinals(&self, visible: usize) -> Result<Vec<usize>, String> {
        let ords = match self {
            Gpus::All => (0..visible).collect(),
            Gpus::First(n) => (0..*n).collect(),
            Gpus::List(l) => l.clone(),
        };
        match ords.iter().find(|&&o| o >= visible) {
            Some(o) => Err(format!("--gpus: GPU {o} asked for, {visible} visible")),
            None if ords.is_empty() => Err("no CUDA GPU visible".into()),
            None => Ok(ords),
        }
    }
}

/// A ready backend.
pub enum Engine {
    Cpu(CpuBackend),
    Cuda(Box<CudaBackend>, CudaWorkers),
}

/// CUDA backends for worker threads (own streams and cuBLAS handles),
/// created on first use and kept for every later run of jobs.
#[derive(Default)]
pub struct CudaWorkers(std::sync::Mutex<Vec<CudaBackend>>);

/// Opens the chosen backend: `cuda` fails clearly without a GPU, `auto`
/// falls back to the CPU with a one-line notice.
pub fn open_backend(choice: BackendChoice, budget: Option<usize>, gpus: &Gpus) -> Result<Engine> {
    let _p = polycert_deeppoly::base::profile::span("cli.open_backend");
    let cpu = || Engine::Cpu(budget.map(CpuBackend::with_budget).unwrap_or_default());
    let cuda = || {
        let visible = CudaBackend::visible_gpus()?;
        let ordinals = gpus.ordinals(visible).map_err(polycert_deeppoly::BackendError::Unavailable)?;
        CudaBackend::on_devices(&ordinals).map(|b| {
            let b = match budget {
                Some(x) => b.with_budget(x),
                None => b,
            };
            Engine::Cuda(Box::new(b), CudaWorkers::default())
        })
    };
    match choice {
        BackendChoice::Cpu => Ok(cpu()),
        BackendChoice::Cuda => cuda().map_err(|e| anyhow::anyhow!("--backend cuda: {e}")),
        BackendChoice::Auto => Ok(cuda().unwrap_or_else(|e| {
            errln!("polycert: CUDA unavailable ({e}); using the CPU");
            cpu()
        })),
    }
}

/// A named property to check.
pub struct Job {
    pub name: String,
    pub property: Property,
}

/// Runs every job with the plan's workers, each with its own analyzer,
/// calling `sink` with each record in job order as soon as it and every
/// earlier one exist.
pub fn run_jobs_parallel(
    engine: &Engine,
    plan: &Plan,
    net: &Network,
    model_name: &str,
    jobs: &[Job],
    precision: Precision,
    sink: &mut dyn FnMut(Record) -> Result<()>,
) -> Result<()> {
    let (n, opts) = (plan.workers, &plan.opts);
    match engine {
        Engine::Cpu(be) => {
            let bes = vec![be; n];
            match precision {
                Precision::F32 => run_with::<_, f32>(&bes, net, model_name, jobs, opts, sink),
                Precision::F64 => run_with::<_, f64>(&bes, net, model_name, jobs, opts, sink),
            }
        }
        Engine::Cuda(be, workers) => {
            // Workers get their own stream (their host work overlaps the
            // others' kernels), the GPUs in turn, and a share of their GPU's
            // memory budget; their searches stay on their GPU.
            let mut own = workers.0.lock().map_err(|_| anyhow::anyhow!("CUDA workers poisoned"))?;
            if n > 1 && own.len() < n {
                let share = RuntimeOps::memory_budget(be.as_ref()) / n.div_ceil(be.gpu_count());
                own.clear();
                for k in 0..n {
                    let w = be.worker_on(k).map_err(|e| anyhow::anyhow!("CUDA worker: {e}"))?;
                    own.push(w.alone().with_budget(share));
                }
            }
            let bes: Vec<&CudaBackend> = if n > 1 { own.iter().take(n).collect() } else { vec![be.as_ref()] };
            match precision {
                Precision::F32 => run_with::<_, f32>(&bes, net, model_name, jobs, opts, sink),
                Precision::F64 => run_with::<_, f64>(&bes, net, model_name, jobs, opts, sink),
            }
        }
    }
}

/// The records of consecutive jobs, analysed as one batch (their rows share
/// the backsubstitution GEMMs), each handed to `each` (its index in `jobs`)
/// as soon as its property is decided; `Break` from it stops the batch.
fn records<B: Backend<T>, T: Fp>(
    analyzer: &Analyzer<B, T>,
    model_name: &str,
    jobs: &[Job],
    each: &mut dyn FnMut(usize, Record) -> ControlFlow<()>,
) {
    let props: Vec<&Property> = jobs.iter().map(|j| &j.property).collect();
    analyzer.analyze_batch_each(&props, &mut |k, r| {
        let job = &jobs[k];
        each(
            k,
            match r {
                Ok(o) => Record::from_outcome(model_name, &job.name, job.property.label, &o),
                Err(e) => Record::error(model_name, &job.name, e.to_string()),
            },
        )
    });
}

/// Jobs per batch: the analyzer's capacity, and no more than an even share
/// per worker.
fn batch_size<B: Backend<T>, T: Fp>(analyzer: &Analyzer<B, T>, jobs: usize, workers: usize) -> usize {
    analyzer.batch_capacity().min(jobs.div_ceil(workers.max(1))).max(1)
}

fn run_with<B: Backend<T>, T: Fp>(
    backends: &[&B],
    net: &Network,
    model_name: &str,
    jobs: &[Job],
    opts: &Options,
    sink: &mut dyn FnMut(Record) -> Result<()>,
) -> Result<()> {
    fn prepare<'a, B: Backend<T>, T: Fp>(
        net: &'a Network,
        be: &'a B,
        opts: &Options,
        name: &str,
    ) -> Result<Analyzer<'a, B, T>> {
        Analyzer::<B, T>::new(net, be, opts.clone()).map_err(|e| anyhow::anyhow!("{name}: {e}"))
    }
    if backends.len() <= 1 {
        let analyzer = prepare(net, backends[0], opts, model_name)?;
        // A failing sink (the results file) stops the run at once: the
        // batch's later properties are not searched.
        let mut failed = None;
        for batch in jobs.chunks(batch_size(&analyzer, jobs.len(), 1)) {
            records(&analyzer, model_name, batch, &mut |_, rec| match sink(rec) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    failed = Some(e);
                    ControlFlow::Break(())
                }
            });
            if let Some(e) = failed {
                return Err(e);
            }
        }
        return Ok(());
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel::<Result<(usize, Record)>>();
    std::thread::scope(|s| {
        for &be in backends {
            let (tx, next) = (tx.clone(), &next);
            s.spawn(move || {
                let analyzer = match prepare(net, be, opts, model_name) {
                    Ok(a) => a,
                    Err(e) => return drop(tx.send(Err(e))),
                };
                let size = batch_size(&analyzer, jobs.len(), backends.len());
                loop {
                    let i = next.fetch_add(size, std::sync::atomic::Ordering::Relaxed);
                    if i >= jobs.len() {
                        break;
                    }
                    let batch = &jobs[i..(i + size).min(jobs.len())];
                    let mut sent = true;
                    records(&analyzer, model_name, batch, &mut |k, r| {
                        sent = tx.send(Ok((i + k, r))).is_ok();
                        if sent { ControlFlow::Continue(()) } else { ControlFlow::Break(()) }
                    });
                    if !sent {
                        break;
                    }
                }
            });
        }
        drop(tx);
        // Emit in job order; an error stops the workers at their next job.
        let mut done = std::collections::BTreeMap::new();
        let mut emit = 0;
        for msg in rx {
            let (i, rec) = msg?;
            done.insert(i, rec);
            while let Some(r) = done.remove(&emit) {
                sink(r)?;
                emit += 1;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::Gpus;

    #[test]
    fn gpus_are_read_and_checked_against_the_visible_ones() {
        assert_eq!("all".parse(), Ok(Gpus::All));
        assert_eq!("2".parse(), Ok(Gpus::First(2)));
        assert_eq!("0,2".parse(), Ok(Gpus::List(vec![0, 2])));
        assert_eq!("3,".parse(), Ok(Gpus::List(vec![3])));
        for bad in ["0", "x", "1,1", ",", "-1", "1,a"] {
            assert!(bad.parse::<Gpus>().is_err(), "{bad}");
        }
        assert_eq!(Gpus::All.ordinals(4), Ok(vec![0, 1, 2, 3]));
        assert_eq!(Gpus::First(2).ordinals(4), Ok(vec![0, 1]));
        assert_eq!(Gpus::List(vec![3, 1]).ordinals(4), Ok(vec![3, 1]));
        assert!(Gpus::First(5).ordinals(4).unwrap_err().contains("GPU 4 asked for, 4 visible"));
        assert!(Gpus::All.ordinals(0).is_err());
    }
}
