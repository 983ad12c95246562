//! The analysis driver: prepares a network on a backend and answers
//! properties with DeepPoly (forward intervals, ReLU refinement by
//! backsubstitution with early termination, then the property).

use crate::backend::{Arith, BResult, Backend, BackendError};
use crate::ir::{Network, Op};
use crate::property::{Counterexample, PropertyError, SubProblem};
use crate::relax::ReluLower;
use polycert_interval::{FloatModel, Fp};
use std::time::{Duration, Instant};

/// Analysis options.
#[derive(Debug, Clone)]
pub struct Options {
    pub relu_lower: ReluLower,
    /// Backsubstitution arithmetic (point coefficients by default).
    pub arith: Arith,
    /// The precision the deployed network runs in; its rounding is enclosed.
    pub network_float: FloatModel,
    /// Drop rows as soon as they are decided (the paper's early termination).
    pub early_termination: bool,
    /// Second pass: tighten every unstable ReLU input by backsubstitution.
    pub refine: bool,
    /// Bytes for expression matrices (default: the backend's budget).
    pub memory_budget: Option<usize>,
    /// Properties analysed together by [`Analyzer::analyze_batch`]
    /// and leaves a search analyses at once (default: as many as a quarter
    /// of the memory budget holds, at most the backend's `batch_hint`, or
    /// its `batch_neurons` over the network's neurons where that is more;
    /// given, at most [`crate::batch::MAX_BATCH`]; the interval arithmetic
    /// takes one).
    pub batch: Option<usize>,
    pub timeout: Option<Duration>,
    /// PGD steps tried when the analysis cannot prove a sub-problem (0: none).
    pub attack_steps: usize,
    /// Random restarts of the attack after the analysis, besides the run from
    /// the box centre (each disjunct attacked from `1 + attack_restarts` points).
    pub attack_restarts: usize,
    /// Attack every disjunct before the analysis (as VNN-COMP tools do)
    /// instead of the weakest ones after it.
    pub attack_first: bool,
    /// Seed of the attack's random starts (`--seed`): the same seed draws
    /// the same points.
    pub attack_seed: u64,
    /// Branch and bound over the input box (`split.rs`) for properties the
    /// analysis leaves open, on networks with at most this many inputs (0: off).
    pub split_inputs: usize,
    /// Most leaves one sub-problem's input splitting analyses when no
    /// timeout bounds it.
    pub max_leaves: usize,
    /// Branch and bound on unstable ReLUs (`branch.rs`) for properties the
    /// analysis leaves open, on networks with more inputs than `split_inputs`.
    pub split_relus: bool,
    /// Most leaves one sub-problem's ReLU splitting analyses when no timeout
    /// bounds it.
    pub max_relu_leaves: usize,
    /// Optimise the unstable ReLUs' lower slopes of a property's output
    /// rows (α-CROWN, `lagrange.rs`) in the second pass.
    pub optimize_slopes: bool,
    /// Optimise lower slopes per layer and end sign for a ReLU search's
    /// intermediate bounds at its root (α-CROWN's α, shared over a layer,
    /// `tighten.rs`); every leaf refines with them too. Off by default: on
    /// the H200 it saved a quarter of the leaves on 256x4 MNIST, and each
    /// round cost as much more.
    pub optimize_intermediate: bool,
    /// When to prove unstable ReLU inputs stable at a ReLU search's root,
    /// layer by layer, each end by a small search of its own on the network
    /// cut at that layer (`stabilize.rs`); the search then starts again from
    /// those bounds.
    pub stabilize: Stabilize,
    /// Let a ReLU search's leaves skip refining a layer while that gains
    /// too little there (`gate.rs`; on; `--refine-every-leaf` turns it
    /// off). Either way is sound.
    pub gate_refinement: bool,
    /// Where the α/β search evaluates its relaxed bounds (`relaxed.rs`).
    pub relaxed_on: RelaxedOn,
    /// Threads that run a branch and bound's rounds at once, each on its
    /// own fork of the backend (`workers.rs`; default: the backend's
    /// `search_workers`, 4 on CUDA, 1 on the CPU).
    pub search_workers: Option<usize>,
    /// Other analyses share the host's cores (the CLI sets it where `--jobs`
    /// runs several properties at once): `RelaxedOn::Auto` then evaluates the
    /// α/β rows on the backend, as it does while search workers share them
    /// (`relaxed::Clock::shared`).
    pub host_shared: bool,
    /// Host bytes that a search's open leaves may hold in bounds inherited
    /// from their parents (`None`: no limit). Past it, new leaves keep only
    /// their root's, with every split clamped in when they are analysed:
    /// sound, looser, and without the 30+ GB that 256x6 MNIST's 580k open
    /// leaves hold after 300 s on an H100.
    pub search_memory: Option<usize>,
    /// Where branch and bound reports each round (for a progress display).
    pub progress: Option<std::sync::Arc<crate::progress::Progress>>,
}

/// When a ReLU search stabilises its root (`stabilize.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stabilize {
    Off,
    /// On networks without convolutions, and with a deadline, in two rungs
    /// (`stabilize.rs::quick_rung`): within the first 25 s a plain search
    /// on a tenth of that, then a short stabilisation and search; where the
    /// sub-problem is still open, a stabilisation from the first rung's
    /// bounds on a quarter of the time left, and the search to the deadline.
    /// On an H100, 256x4 MNIST prop_4_0.05 was proved in 8.7 s (56-63 s
    /// with one rung of 300 s), and timed out plainly.
    #[default]
    Auto,
    /// Before every ReLU search.
    On,
}

/// Where the α/β search evaluates its rows' relaxed bounds: the same
/// search either way, in other summation orders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RelaxedOn {
    /// Where the backend offloads them (`Backend::offload_relaxed`), each
    /// analyzer times both evaluators on its first rounds and keeps the one
    /// faster per row evaluation (on an H200 the backend halved the phase
    /// per round on resnet_4b, and was slower on resnet_2b and the MNIST
    /// MLPs, where its per-step transfers outweigh the host's passes); else
    /// on the host.
    #[default]
    Auto,
    /// Row by row on the host (`relaxed_bound.rs`).
    Host,
    /// Every open row of a batch at once in the backend's GEMMs.
    Backend,
    /// On the host, the open rows of a batch together, each dense layer one
    /// GEMM over them (`hostrows.rs`; networks of dense layers and ReLUs,
    /// others row by row). An experiment: on a 2-core CPU it ran as fast as
    /// `Host`; not yet measured on a many-core GPU host.
    HostRows,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            relu_lower: ReluLower::Area,
            arith: Arith::Point,
            network_float: FloatModel::F32,
            early_termination: true,
            refine: true,
            memory_budget: None,
            batch: None,
            timeout: None,
            attack_steps: 20,
            attack_first: false,
            attack_seed: 0,
            attack_restarts: 0,
            split_inputs: 16,
            max_leaves: 1 << 16,
            split_relus: true,
            max_relu_leaves: 1 << 10,
            optimize_slopes: true,
            optimize_intermediate: false,
            stabilize: Stabilize::Auto,
            gate_refinement: true,
            relaxed_on: RelaxedOn::Auto,
            search_workers: None,
            host_shared: false,
            search_memory: None,
            progress: None,
        }
    }
}

/// Lower and upper bounds of a node's values.
pub type NodeBounds = (Vec<f64>, Vec<f64>);

/// Why an analysis could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnalysisError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Property(#[from] PropertyError),
    #[error("layer '{layer}' ({op}) is not supported by the analysis yet")]
    Unsupported { layer: String, op: &'static str },
    #[error("layer '{layer}': weight {value} is not exactly representable in {precision}; use f64")]
    InexactWeight { layer: String, value: f64, precision: &'static str },
    #[error("timeout")]
    Timeout,
}

/// Parameters of one node, uploaded to the backend.
pub(crate) enum Params<Buf> {
    None,
    Affine {
        w: Buf,
        b: Buf,
        /// `|W|` and a zero bias, for the point arithmetic's error terms.
        abs: Option<(Buf, Buf)>,
    },
    /// Average pooling as a sum (a conv with unit weights) then a division.
    AvgPool {
        conv: Box<crate::ir::Conv2d>,
        w: Buf,
        b: Buf,
    },
}

/// The sum part of an average pooling: a per-channel conv with unit weights.
pub(crate) fn avgpool_sum(c: usize, p: &crate::ir::Pool) -> crate::ir::Conv2d {
    let (kh, kw) = p.kernel;
    let mut weight = vec![0.0; c * c * kh * kw];
    for ch in 0..c {
        for k in 0..kh * kw {
            weight[(ch * c + ch) * kh * kw + k] = 1.0;
        }
    }
    crate::ir::Conv2d { weight, bias: vec![0.0; c], c_out: c, kernel: p.kernel, stride: p.stride, pad: p.pad }
}

/// A network prepared on a backend: weights uploaded once, reused for
/// every property.
pub struct Analyzer<'a, B: Backend<T>, T: Fp> {
    pub(crate) net: &'a Network,
    pub(crate) backend: &'a B,
    pub(crate) params: Vec<Params<B::Buf>>,
    pub(crate) opts: Options,
    /// The attack's recorded step, kept across attacks (see `pgd.rs`).
    pub(crate) step_graph: std::cell::RefCell<crate::pgd::Recorded<B::Graph, B::Buf>>,
    /// `RelaxedOn::Auto`'s timings of the α/β phase (see `relaxed.rs`).
    pub(crate) relaxed_clock: std::cell::RefCell<crate::relaxed::Clock>,
}

pub(crate) fn to_t<T: Fp>(layer: &str, v: &[f64]) -> Result<Vec<T>, AnalysisError> {
    v.iter()
        .map(|&x| {
            let t = T::from_f64_nearest(x);
            if t.to_f64_exact() == x {
                Ok(t)
            } else {
                Err(AnalysisError::InexactWeight { layer: layer.into(), value: x, precision: T::NAME })
            }
        })
        .collect()
}

fn affine_params<B: Backend<T>, T: Fp>(
    be: &B,
    layer: &str,
    weight: &[f64],
    bias: &[f64],
    arith: Arith,
) -> Result<Params<B::Buf>, AnalysisError> {
    let w = to_t::<T>(layer, weight)?;
    let abs = match arith {
        Arith::Interval => None,
        Arith::Point => {
            let wa: Vec<T> = w.iter().map(|v| v.abs()).collect();
            Some((be.upload(&wa)?, be.upload(&vec![T::zero(); bias.len()])?))
        }
    };
    Ok(Params::Affine { w: be.upload(&w)?, b: be.upload(&to_t::<T>(layer, bias)?)?, abs })
}

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// Uploads the weights and checks that every layer is supported.
    pub fn new(net: &'a Network, backend: &'a B, opts: Options) -> Result<Self, AnalysisError> {
        let mut params = Vec::with_capacity(net.nodes().len());
        for node in net.nodes() {
            let p = match &node.op {
                Op::Dense { weight, bias, .. } => affine_params(backend, &node.name, weight, bias, opts.arith)?,
                Op::Conv2d(c) => affine_params(backend, &node.name, &c.weight, &c.bias, opts.arith)?,
                Op::AvgPool2d(p) => {
                    let conv = avgpool_sum(node.shape.c, p);
                    let w = backend.upload(&to_t::<T>(&node.name, &conv.weight)?)?;
                    let b = backend.upload(&to_t::<T>(&node.name, &conv.bias)?)?;
                    Params::AvgPool { conv: Box::new(conv), w, b }
                }
                Op::Input
                | Op::Relu
                | Op::Sigmoid
                | Op::Add
                | Op::Reshape
                | Op::ChannelAffine { .. }
                | Op::Concat
                | Op::MaxPool2d(_) => Params::None,
            };
            params.push(p);
        }
        let mut relaxed_clock = crate::relaxed::Clock::default();
        relaxed_clock.shared = opts.host_shared;
        Ok(Self { net, backend, params, opts, step_graph: Default::default(), relaxed_clock: relaxed_clock.into() })
    }

    pub fn options(&self) -> &Options {
        &self.opts
    }

    pub(crate) fn budget(&self) -> usize {
        self.opts.memory_budget.unwrap_or_else(|| self.backend.memory_budget())
    }

    /// Certified bounds of every node's values over `input`, after the
    /// forward pass and (if enabled) the refinement pass.
    pub fn node_bounds(&self, input: &crate::property::InputBox) -> Result<Vec<NodeBounds>, AnalysisError> {
        let st = self.refined_root(input, None, self.opts.timeout.map(|t| Instant::now() + t))?;
        Ok(crate::batch::bounds_f64(st.into_bounds()))
    }

    pub(crate) fn check_deadline(deadline: Option<Instant>) -> Result<(), AnalysisError> {
        match deadline {
            Some(d) if Instant::now() >= d => Err(AnalysisError::Timeout),
            _ => Ok(()),
        }
    }

    pub(crate) fn upload_pair(&self, lo: &[T], hi: &[T]) -> BResult<(B::Buf, B::Buf)> {
        Ok((self.backend.upload(lo)?, self.backend.upload(hi)?))
    }
}

/// Checks the box centre in float32 inference against the unsafe region.
pub(crate) fn falsify_centre(net: &Network, sp: &SubProblem) -> Option<Counterexample> {
    let x: Vec<f32> = sp.input.centre().iter().map(|&v| v as f32).collect();
    crate::attack::check_f32(net, sp, &x)
}
