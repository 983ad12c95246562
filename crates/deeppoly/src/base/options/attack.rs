//! The attack's options (`attack/`): PGD with sign steps before or after
//! the analysis, and the attacks inside a search. Counterexamples are
//! always confirmed by float32 inference, so none of this is soundness.

/// PGD's settings.
#[derive(Debug, Clone)]
pub struct AttackOptions {
    /// PGD steps tried when the analysis cannot prove a sub-problem (0: none).
    pub steps: usize,
    /// Random restarts of the attack after the analysis, besides the run from
    /// the box centre (each disjunct attacked from `1 + restarts` points).
    pub restarts: usize,
    /// Attack every disjunct before the analysis (as VNN-COMP tools do)
    /// instead of the weakest ones after it.
    pub first: bool,
    /// Seed of the attack's random starts (`--seed`): the same seed draws
    /// the same points.
    pub seed: u64,
    /// Most leaves per round of a ReLU search whose corners start an
    /// attack (the weakest; `falsify.rs`).
    pub corner_leaves: usize,
    /// The share of a search's time its corner attacks may take (and, in
    /// an input search, its random restarts).
    pub corner_share: f64,
    /// Random starts per round of an input search.
    pub search_restarts: usize,
    /// Sign steps of each of those starts (a fine schedule).
    pub search_restart_steps: usize,
    /// Seconds of restarts an input search may spend besides their share:
    /// a quick attack up front, which finds a sliver counterexample before
    /// the share would allow a second batch.
    pub restart_grace: f64,
    /// A fine schedule's last step as a share of its coarse phase's last
    /// (`check.rs::Schedule`).
    pub fine_end: f64,
    /// The margin, relative to the outputs' scale, by which the attack
    /// tries to meet every half-space of a conjunction (`check.rs`).
    pub hinge: f64,
    /// Most points per chunk of an attack (`pgd.rs`).
    pub max_points: usize,
    /// Point counts whose recorded steps are kept, and the most points a
    /// kept one has (a larger one, from a batch of many properties, is
    /// dropped after its attack: its buffers are large).
    pub kept_graphs: usize,
    pub kept_points: usize,
}

impl Default for AttackOptions {
    fn default() -> Self {
        Self {
            steps: 20,
            restarts: 0,
            first: false,
            seed: 0,
            corner_leaves: 32,
            corner_share: 0.05,
            restart_grace: 0.1,
            search_restarts: 256,
            search_restart_steps: 200,
            fine_end: 0.01,
            hinge: 1e-3,
            max_points: 4096,
            kept_graphs: 2,
            kept_points: 64,
        }
    }
}
