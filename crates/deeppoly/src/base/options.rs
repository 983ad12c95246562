//! Analysis options: what the passes, the α/β search, the attack and
//! branch and bound do (read by every layer).

use crate::base::backend::Arith;
use crate::base::relax::ReluLower;
use polycert_interval::FloatModel;
use std::time::Duration;

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
    /// given, at most [`crate::base::analyzer::MAX_BATCH`]; the interval arithmetic
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
    /// Branch and bound over the input box (`bab/search.rs`) for properties the
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
    /// `tighten.rs`); every leaf refines with them too. Off by default: fewer
    /// leaves, each dearer (bench/results/2026-11-24-corner-attacks-and-intermediate-alpha.md).
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
    /// sound, looser, and bounded (bench/results/2026-11-27-search-memory.md).
    pub search_memory: Option<usize>,
    /// Where branch and bound reports each round (for a progress display).
    pub progress: Option<std::sync::Arc<crate::base::progress::Progress>>,
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
    /// Measured: bench/results/2026-11-27-stabilize-rungs.md.
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
    /// faster per row evaluation (which one wins depends on the network:
    /// bench/results/2026-11-25-relaxed-on-backend.md); else on the host.
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
