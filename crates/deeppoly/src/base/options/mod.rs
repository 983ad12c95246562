//! Analysis options, one struct per concern: DeepPoly's passes, the α/β
//! search (CROWN), the attack and branch and bound, each with its tuning
//! constants (read by every layer). Every setting is sound; the constants
//! can also be set by dotted key ([`Options::set`], `keys.rs`).

mod attack;
mod crown;
mod keys;
mod search;

pub use attack::AttackOptions;
pub use crown::CrownOptions;
pub use keys::TUNING_KEYS;
pub use search::{GateOptions, PickOptions, SearchOptions, StabilizeOptions};

use crate::base::backend::Arith;
use crate::base::relax::ReluLower;
use polycert_interval::FloatModel;
use std::time::{Duration, Instant};

/// Analysis options.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// DeepPoly's passes (GPUPoly's algorithms).
    pub passes: PassOptions,
    /// α-CROWN's slopes and β-CROWN's split multipliers.
    pub crown: CrownOptions,
    /// PGD and the attacks inside a search.
    pub attack: AttackOptions,
    /// Branch and bound.
    pub search: SearchOptions,
    /// Time limit per property.
    pub timeout: Option<Duration>,
    /// An instant no analysis runs past, whatever its timeout (a test set's
    /// budget).
    pub deadline: Option<Instant>,
    /// Other analyses share the host's cores (the CLI sets it where `--jobs`
    /// runs several properties at once): `RelaxedOn::Auto` then evaluates the
    /// α/β rows on the backend, as it does while search workers share them
    /// (`relaxed::Clock::shared`).
    pub host_shared: bool,
    /// Where branch and bound reports each round (for a progress display).
    pub progress: Option<std::sync::Arc<crate::base::progress::Progress>>,
}

impl Options {
    /// These options changed by `f`:
    /// `Options::default().with(|o| o.attack.steps = 0)`.
    pub fn with(mut self, f: impl FnOnce(&mut Self)) -> Self {
        f(&mut self);
        self
    }

    /// When an analysis begun at `start`, which has spent `spent` of its
    /// timeout already, must end: the earlier of its timeout and
    /// [`Options::deadline`].
    pub fn end(&self, start: Instant, spent: Duration) -> Option<Instant> {
        let own = self.timeout.map(|t| start + t.saturating_sub(spent));
        match (own, self.deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// DeepPoly's passes.
#[derive(Debug, Clone)]
pub struct PassOptions {
    pub relu_lower: ReluLower,
    /// Backsubstitution arithmetic (point coefficients by default).
    pub arith: Arith,
    /// The precision the deployed network runs in; its rounding is enclosed.
    pub network_float: FloatModel,
    /// Drop rows as soon as they are decided (the paper's early termination).
    pub early_termination: bool,
    /// Read each early-termination check one step late, with the next step
    /// queued before the host waits for it (same bounds; default: where the
    /// backend's downloads overlap later work, the GPU, and the rows are few).
    pub late_checks: Option<bool>,
    /// Second pass: tighten every unstable ReLU input by backsubstitution.
    pub refine: bool,
    /// Prove the outputs once before the refinement too, so that what the
    /// forward pass's bounds already prove skips it (default: where the
    /// slopes are optimised, whose rows it picks; search leaves always do).
    pub first_output: Option<bool>,
    /// Bytes for expression matrices (default: the backend's budget).
    pub memory_budget: Option<usize>,
    /// Properties analysed together by [`Analyzer::analyze_batch`]
    /// and leaves a search analyses at once (default: as many as a quarter
    /// of the memory budget holds, at most the backend's `batch_hint`, or
    /// its `batch_neurons` over the network's neurons where that is more;
    /// given, at most [`crate::base::analyzer::MAX_BATCH`]; the interval
    /// arithmetic takes one).
    pub batch: Option<usize>,
}

impl Default for PassOptions {
    fn default() -> Self {
        Self {
            relu_lower: ReluLower::Area,
            arith: Arith::Point,
            network_float: FloatModel::F32,
            early_termination: true,
            late_checks: None,
            refine: true,
            first_output: None,
            memory_budget: None,
            batch: None,
        }
    }
}

/// When a ReLU search stabilises its root (`stabilize.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stabilize {
    Off,
    /// On networks without convolutions, and with a deadline, in two rungs
    /// (`stabilize.rs::quick_rung`): within the first
    /// [`StabilizeOptions::quick_rung`] a plain search on a share of that,
    /// then a short stabilisation and search; where the sub-problem is
    /// still open, a stabilisation from the first rung's bounds on a share
    /// of the time left, and the search to the deadline.
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
    /// bench/results/2026-11-25-relaxed-on-backend.md); else on the host,
    /// as `HostRows`.
    #[default]
    Auto,
    /// Row by row on the host (`relaxed_bound.rs`).
    Host,
    /// Every open row of a batch at once in the backend's GEMMs.
    Backend,
    /// On the host, the open rows of a batch together, one group per
    /// thread, each dense layer read once per group (`hostrows.rs`;
    /// networks of dense layers and ReLUs, others row by row).
    HostRows,
}
