//! State that the attack keeps per analyzer: its recorded PGD step.
//!
//! Declared here, below the attack, because the [`Analyzer`] holds it
//! across attacks; `attack/pgd.rs` alone records and replays it.
//!
//! [`Analyzer`]: crate::base::analyzer::Analyzer

/// The attack's step recorded once per analyzer and point count
/// (inference, gradient of fixed seeds, sign step), with every buffer it
/// reads or writes, in place: an attack loads its points and replays it.
pub(crate) struct StepGraph<G, Buf> {
    pub(crate) points: usize,
    pub(crate) graph: G,
    pub(crate) x: Buf,
    pub(crate) lo: Buf,
    pub(crate) hi: Buf,
    pub(crate) alpha: Buf,
    pub(crate) seeds: Buf,
    /// The outputs at the step's start point, which `x_prev` holds.
    pub(crate) y: Buf,
    pub(crate) x_prev: Buf,
    pub(crate) _tables: Vec<Option<[Buf; 3]>>,
}

/// The recorded steps of an analyzer (a few point counts).
pub(crate) struct Recorded<G, Buf> {
    pub(crate) graphs: Vec<StepGraph<G, Buf>>,
    /// The backend records no graphs, or not this network's step.
    pub(crate) unavailable: bool,
}

impl<G, Buf> Default for Recorded<G, Buf> {
    fn default() -> Self {
        Self { graphs: Vec::new(), unavailable: false }
    }
}
