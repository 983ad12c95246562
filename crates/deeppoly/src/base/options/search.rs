//! Branch and bound's options (`bab/`): which searches run, their leaf
//! limits and workers, and the steering heuristics' constants.

use super::Stabilize;
use std::time::Duration;

/// Branch and bound's settings.
#[derive(Debug, Clone)]
pub struct SearchOptions {
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
    /// Optimise lower slopes per layer and end sign for a ReLU search's
    /// intermediate bounds at its root (α-CROWN's α, shared over a layer,
    /// `tighten.rs`); every leaf refines with them too. Off by default: fewer
    /// leaves, each dearer (bench/results/2026-11-24-corner-attacks-and-intermediate-alpha.md).
    pub optimize_intermediate: bool,
    /// The most splits of a leaf that refines with its root's slope tables
    /// (`children.rs`); deeper leaves keep what they inherit through their
    /// prior bounds (bench/results/2026-11-25-layer-slopes.md).
    pub table_depth: usize,
    /// Threads that run a branch and bound's rounds at once, each on its
    /// own fork of the backend (`workers.rs`; default: the backend's
    /// `search_workers`, 4 on CUDA, 1 on the CPU).
    pub workers: Option<usize>,
    /// Host bytes that a search's open leaves may hold in bounds inherited
    /// from their parents (`None`: no limit). Past it, new leaves keep only
    /// their root's, with every split clamped in when they are analysed:
    /// sound, looser, and bounded (bench/results/2026-11-27-search-memory.md).
    pub memory: Option<usize>,
    /// The fewest leaves a worker takes while more are open: a round's
    /// fixed costs make small rounds dear
    /// (bench/results/2026-11-26-search-workers.md).
    pub min_round: usize,
    /// Open leaves left at a search's end from which they are freed on a
    /// thread of their own.
    pub free_apart: usize,
    /// Whether BaBSR's scores see each leaf's own α and β (`babsr.rs`);
    /// `None` (auto): on for networks whose max pooling the search rewrote
    /// as ReLUs, where tiny_cnn eps 0.05 went from open after 600 s to 8
    /// leaves; off elsewhere, where one run on the shared nets was mixed
    /// (bench/results/2026-11-28-babsr-duals.md).
    pub babsr_duals: Option<bool>,
    /// Which of a ReLU leaf's two candidate splits are tried (`picks.rs`).
    pub picks: PickOptions,
    /// Whether leaves skip refining a layer that gains little (`gate.rs`).
    pub gate: GateOptions,
    /// Stabilisation of a ReLU search's root (`stabilize.rs`).
    pub stabilize: StabilizeOptions,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            split_inputs: 16,
            max_leaves: 1 << 16,
            split_relus: true,
            max_relu_leaves: 1 << 10,
            optimize_intermediate: false,
            table_depth: 12,
            workers: None,
            memory: None,
            min_round: 64,
            free_apart: 4096,
            babsr_duals: None,
            picks: PickOptions::default(),
            gate: GateOptions::default(),
            stabilize: StabilizeOptions::default(),
        }
    }
}

/// Both of a ReLU leaf's candidate splits (BaBSR's, the first layer's)
/// are tried until one wins under a quarter of the decided parents; then
/// only the other, with both on every `probe`-th parent.
#[derive(Debug, Clone)]
pub struct PickOptions {
    /// Decided parents before one candidate may be dropped.
    pub warmup: usize,
    /// Both candidates are tried again on every this many parents.
    pub probe: usize,
}

impl Default for PickOptions {
    fn default() -> Self {
        Self { warmup: 32, probe: 8 }
    }
}

/// The refinement gate of a ReLU search's leaves (`gate.rs`): a layer
/// whose average gain falls below `min_gain` is skipped, and still
/// refined every `probe_every`th round to measure again. Either way is
/// sound.
#[derive(Debug, Clone)]
pub struct GateOptions {
    /// Let leaves skip refining a layer while that gains too little there
    /// (`--refine-every-leaf` turns it off).
    pub on: bool,
    /// The average gain of a layer's refinement in leaves (the larger of
    /// the share of its unstable ReLUs made stable and the share of their
    /// summed width removed) below which the gate closes the layer.
    pub min_gain: f64,
    /// Refinements of a layer measured before the gate may close it.
    pub warmup: u32,
    /// A closed layer is refined (and measured) again once in this many rounds.
    pub probe_every: u32,
    /// Weight of the newest measurement in a layer's running average.
    pub decay: f64,
}

impl Default for GateOptions {
    fn default() -> Self {
        Self { on: true, min_gain: 0.01, warmup: 4, probe_every: 16, decay: 0.25 }
    }
}

/// Stabilisation: unstable ReLU inputs proved stable at a ReLU search's
/// root, layer by layer, each end by a small search of its own on the
/// network cut at that layer (`stabilize.rs`); the search then starts
/// again from those bounds.
#[derive(Debug, Clone)]
pub struct StabilizeOptions {
    /// When a ReLU search stabilises its root.
    pub when: Stabilize,
    /// The share of a search's time that stabilisation may take.
    pub share: f64,
    /// The share of its first rung that `Stabilize::Auto`'s plain search
    /// has before the root is stabilised and the search starts again.
    pub plain_share: f64,
    /// `Stabilize::Auto`'s first rung: a plain search, a stabilisation and
    /// a search within this much time, before the last stabilisation has
    /// `share` of all the time left (bench/results/2026-11-27-stabilize-rungs.md).
    pub quick_rung: Duration,
    /// The most leaves per unstable input a layer's search analyses when
    /// no deadline bounds it.
    pub end_leaves: usize,
    /// The most leaves per unstable input a layer's search analyses again
    /// within its time share.
    pub max_end_leaves: usize,
    /// Layers with more unstable inputs than this are left as they are.
    pub max_unstable: usize,
    /// How many times an end that really changes sign has its bound halved.
    pub halvings: usize,
}

impl Default for StabilizeOptions {
    fn default() -> Self {
        Self {
            when: Stabilize::Auto,
            share: 0.25,
            plain_share: 0.1,
            quick_rung: Duration::from_secs(25),
            end_leaves: 128,
            max_end_leaves: 8 * 1024,
            max_unstable: 512,
            halvings: 3,
        }
    }
}
