//! The α/β search's options (`crown/`): α-CROWN's optimised lower slopes
//! and β-CROWN's multipliers of the split constraints, both chosen by
//! projected Adam on the relaxed bound (`lagrange.rs`).

use super::RelaxedOn;

/// α-CROWN's and β-CROWN's settings.
#[derive(Debug, Clone)]
pub struct CrownOptions {
    /// Optimise the unstable ReLUs' lower slopes of a property's output
    /// rows (α-CROWN, `lagrange.rs`) in the second pass.
    pub optimize_slopes: bool,
    /// Where the α/β search evaluates its relaxed bounds (`relaxed.rs`).
    pub relaxed_on: RelaxedOn,
    /// Adam steps of a search from the relaxation's own slopes and β = 0
    /// (also of a layer's shared slopes, `tighten.rs`).
    pub steps: usize,
    /// Adam steps of a search from a parent's slopes or β.
    pub warm_steps: usize,
    /// Adam steps of an exact leaf's search (every ReLU stable: the best β
    /// gives the leaf's exact minimum, and it cannot be split further).
    pub stable_steps: usize,
    /// Adam's step size for the slopes α.
    pub lr_alpha: f64,
    /// Adam's step size for the multipliers β.
    pub lr_beta: f64,
    /// The relaxed bound at which a row stops pulling (the sound
    /// backsubstitution with the same parameters then proves it).
    pub proved_margin: f64,
    /// With no branch and bound after it, an α/β search ends once a row,
    /// gaining this many times its fastest step so far at every step left,
    /// would stay below the margin (`hopeless.rs`; 0: never).
    pub hopeless_pace: f64,
    /// The fewest open rows the host evaluates together (`hostrows.rs`).
    pub host_batch_rows: usize,
    /// Layers with more unstable neurons than this keep DeepPoly's bounds
    /// when a search's intermediate slopes are optimised (`tighten.rs`: the
    /// host search costs a backward pass per end and Adam step).
    pub layer_max_unstable: usize,
    /// The least gain of a layer's slope table that a search's leaves use
    /// too (`tighten.rs`): each costs every leaf a backsubstitution of the
    /// layer's ends.
    pub layer_leaf_gain: f64,
}

impl Default for CrownOptions {
    fn default() -> Self {
        Self {
            optimize_slopes: true,
            relaxed_on: RelaxedOn::Auto,
            steps: 20,
            warm_steps: 6,
            stable_steps: 300,
            lr_alpha: 0.1,
            lr_beta: 0.05,
            proved_margin: 1e-4,
            hopeless_pace: 3.0,
            host_batch_rows: 1,
            layer_max_unstable: 512,
            layer_leaf_gain: 0.08,
        }
    }
}
