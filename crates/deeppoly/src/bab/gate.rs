//! Whether refinement still pays in a ReLU search's leaves, per layer.
//!
//! A leaf starts from its parent's final bounds, so refining a layer after
//! its split gains only what the split adds. On the MNIST MLPs that is a
//! few percent of the layer's unstable ReLUs made stable, or of their width
//! removed (and 5 to 20 times fewer leaves than without it); on the CIFAR
//! ResNets about 0.1%, while the refinement took a third of a round. The
//! gate measures each layer's gain in leaves (the larger of the two shares:
//! a 256x6 MLP's deep layers lose 13% of their width with none made stable,
//! and closing them on stability alone left a search with no leaf proved)
//! and closes a layer whose average falls below `GateOptions::min_gain`; a
//! closed layer is still refined every `probe_every`th time, to measure again.
//! Skipping a layer is sound: its bounds stay the parent's, intersected
//! with the forward pass.

use crate::base::options::GateOptions;
use crate::gpupoly::passes::LayerGate;
use std::cell::RefCell;
use std::collections::HashMap;

#[derive(Debug, Default, Clone, Copy)]
struct Gain {
    /// Running average of the gain.
    share: f64,
    /// Refinements measured.
    seen: u32,
    /// Rounds skipped since the last measurement.
    skipped: u32,
}

/// One search's per-layer gate (keyed by the ReLU's input node).
#[derive(Debug, Default)]
pub(crate) struct RefineGate {
    layers: RefCell<HashMap<usize, Gain>>,
    tune: GateOptions,
}

impl RefineGate {
    pub(crate) fn new(tune: GateOptions) -> Self {
        Self { layers: RefCell::default(), tune }
    }
}

impl LayerGate for RefineGate {
    /// Whether leaves refine layer `p` this round (counts a skipped round).
    fn open(&self, p: usize) -> bool {
        let mut layers = self.layers.borrow_mut();
        let g = layers.entry(p).or_default();
        let tune = &self.tune;
        if g.seen < tune.warmup || g.share >= tune.min_gain {
            return true;
        }
        if g.skipped + 1 >= tune.probe_every {
            g.skipped = 0;
            return true;
        }
        g.skipped += 1;
        false
    }

    /// Records a refinement of layer `p` in leaves: `stabilised` of its
    /// `unstable` ReLUs became stable and their summed width went from
    /// `before` to `after`.
    fn record(&self, p: usize, unstable: usize, stabilised: usize, before: f64, after: f64) {
        if unstable == 0 {
            return;
        }
        let narrowed = if before > 0.0 && before.is_finite() { (1.0 - after / before).max(0.0) } else { 0.0 };
        let share = (stabilised as f64 / unstable as f64).max(narrowed);
        let mut layers = self.layers.borrow_mut();
        let g = layers.entry(p).or_default();
        let decay = self.tune.decay;
        g.share = if g.seen == 0 { share } else { (1.0 - decay) * g.share + decay * share };
        g.seen += 1;
        g.skipped = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layer_that_gains_stays_open() {
        let g = RefineGate::default();
        for _ in 0..20 {
            assert!(g.open(3));
            g.record(3, 100, 5, 10.0, 10.0);
        }
    }

    #[test]
    fn a_layer_that_gains_nothing_closes_after_warmup_and_is_probed() {
        let g = RefineGate::default();
        let GateOptions { warmup, probe_every, .. } = GateOptions::default();
        for _ in 0..warmup {
            assert!(g.open(7));
            g.record(7, 500, 1, 10.0, 9.99);
        }
        // Closed: skipped probe_every − 1 rounds, then refined once more.
        let opened: Vec<bool> = (0..probe_every).map(|_| g.open(7)).collect();
        assert_eq!(opened.iter().filter(|&&o| o).count(), 1);
        assert!(opened[probe_every as usize - 1]);
        // A probe that narrows a lot with nothing made stable reopens it
        // (0.75·0.002 + 0.25·0.2 ≥ 1%).
        g.record(7, 100, 0, 10.0, 8.0);
        assert!(g.open(7));
        // Other layers are independent.
        assert!(g.open(9));
    }

    #[test]
    fn nothing_unstable_measures_nothing() {
        let g = RefineGate::default();
        for _ in 0..10 {
            g.record(5, 0, 0, 0.0, 0.0);
        }
        assert!(g.open(5));
    }
}
