//! Live progress of branch and bound, for a user interface to poll (the
//! CLI's progress line): a search writes it once per round, any thread
//! reads it with [`Progress::snapshot`]. It steers nothing.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// The latest round of the latest search of the analyzers that share it.
#[derive(Debug)]
pub struct Progress {
    searching: AtomicBool,
    rounds: AtomicUsize,
    proved: AtomicUsize,
    open: AtomicUsize,
    weakest: AtomicU64,
    /// Stabilisation (`stabilize.rs`): the ReLU input node being searched
    /// plus one (0: none), its unstable inputs, and the inputs made stable
    /// so far at the root.
    stab_node: AtomicUsize,
    stab_unstable: AtomicUsize,
    stab_proved: AtomicUsize,
}

impl Default for Progress {
    fn default() -> Self {
        Self {
            searching: AtomicBool::new(false),
            rounds: AtomicUsize::new(0),
            proved: AtomicUsize::new(0),
            open: AtomicUsize::new(0),
            weakest: AtomicU64::new(f64::NEG_INFINITY.to_bits()),
            stab_node: AtomicUsize::new(0),
            stab_unstable: AtomicUsize::new(0),
            stab_proved: AtomicUsize::new(0),
        }
    }
}

/// What [`Progress`] held when read (fields written one by one: a reader
/// may see one round's count beside the next's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Snapshot {
    /// Whether a search is running.
    pub searching: bool,
    /// Rounds of every search so far.
    pub rounds: usize,
    /// Leaves proved by the current (or last) search of its property.
    pub leaves_proved: usize,
    /// Leaves it has left to analyse.
    pub leaves_open: usize,
    /// Its bound: each round's weakest bound (the smallest among the leaves
    /// not proved, `SearchStats::best_bound`) holds for the whole property,
    /// so this is the best of them so far: it only rises.
    pub weakest: f64,
    /// While a search root is stabilised: the node whose unstable inputs
    /// are searched, how many they are, and how many inputs were made
    /// stable so far.
    pub stabilizing: Option<Stabilizing>,
}

/// See [`Snapshot::stabilizing`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stabilizing {
    pub node: usize,
    pub unstable: usize,
    pub made_stable: usize,
}

impl Progress {
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            searching: self.searching.load(Relaxed),
            rounds: self.rounds.load(Relaxed),
            leaves_proved: self.proved.load(Relaxed),
            leaves_open: self.open.load(Relaxed),
            weakest: f64::from_bits(self.weakest.load(Relaxed)),
            stabilizing: match self.stab_node.load(Relaxed) {
                0 => None,
                n => Some(Stabilizing {
                    node: n - 1,
                    unstable: self.stab_unstable.load(Relaxed),
                    made_stable: self.stab_proved.load(Relaxed),
                }),
            },
        }
    }

    /// Marks a root's stabilisation running until the guard drops.
    pub(crate) fn stabilizing(p: Option<&Progress>) -> Stab<'_> {
        if let Some(p) = p {
            p.stab_proved.store(0, Relaxed);
        }
        Stab(p)
    }

    /// Marks a search running until the guard drops.
    pub(crate) fn live(p: Option<&Progress>) -> Live<'_> {
        if let Some(p) = p {
            p.weakest.store(f64::NEG_INFINITY.to_bits(), Relaxed);
            p.searching.store(true, Relaxed);
        }
        Live(p)
    }
}

/// A running search's handle on its [`Progress`] (none: nothing to write).
pub(crate) struct Live<'p>(Option<&'p Progress>);

impl Live<'_> {
    pub fn round(&self, proved: usize, open: usize, weakest: f64) {
        if let Some(p) = self.0 {
            p.proved.store(proved, Relaxed);
            p.open.store(open, Relaxed);
            let rise = |b: u64| (weakest > f64::from_bits(b)).then_some(weakest.to_bits());
            let _ = p.weakest.fetch_update(Relaxed, Relaxed, rise);
            p.rounds.fetch_add(1, Relaxed);
        }
    }
}

impl Drop for Live<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.0 {
            p.searching.store(false, Relaxed);
        }
    }
}

/// A running stabilisation's handle on its [`Progress`].
pub(crate) struct Stab<'p>(Option<&'p Progress>);

impl Stab<'_> {
    /// Node `node`'s `unstable` inputs are searched next.
    pub fn layer(&self, node: usize, unstable: usize) {
        if let Some(p) = self.0 {
            p.stab_unstable.store(unstable, Relaxed);
            p.stab_node.store(node + 1, Relaxed);
        }
    }

    /// `k` more inputs were made stable.
    pub fn proved(&self, k: usize) {
        if let Some(p) = self.0 {
            p.stab_proved.fetch_add(k, Relaxed);
        }
    }
}

impl Drop for Stab<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.0 {
            p.stab_node.store(0, Relaxed);
        }
    }
}
