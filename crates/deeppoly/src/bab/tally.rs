//! Per-root accounting of a search (`bab/search.rs`) whose roots are answered
//! one by one (`stabilize.rs`).

/// Per search root: its leaves not yet proved or dropped, its leaves
/// analysed, and whether it was given up (a leaf that could not be split,
/// or `limit` reached). A root is proved once it has no leaf left and was
/// not given up, however the search ends (`stabilize.rs` reads roots one by
/// one).
#[derive(Debug)]
pub(crate) struct RootTally {
    pub(crate) outstanding: Vec<usize>,
    pub(crate) analysed: Vec<usize>,
    pub(crate) stuck: Vec<bool>,
    /// The most leaves a root may analyse before it is given up.
    pub(crate) limit: usize,
    /// Search for proofs only: no counterexample ends the search (no
    /// corner attacks; an exact leaf is given up).
    pub(crate) proofs_only: bool,
}

impl Default for RootTally {
    fn default() -> Self {
        Self { outstanding: Vec::new(), analysed: Vec::new(), stuck: Vec::new(), limit: usize::MAX, proofs_only: false }
    }
}

impl RootTally {
    /// For a search for proofs only, each root giving up after `limit` leaves.
    pub(crate) fn proofs_only(limit: usize) -> Self {
        Self { limit, proofs_only: true, ..Self::default() }
    }

    pub(crate) fn proved(&self) -> Vec<bool> {
        self.outstanding.iter().zip(&self.stuck).map(|(&o, &s)| o == 0 && !s).collect()
    }
}
