//! [`RuntimeOps`]: how the analysis schedules its work on a backend.

use super::BResult;

/// What the analysis asks of a backend before and around its work: its
/// name and memory, batch sizes, search workers and their handles, and
/// recorded call sequences (CUDA graphs). Nothing here computes a bound;
/// a graph replays the calls it recorded, with their outward rounding.
pub trait RuntimeOps: Send + Sync {
    /// A recorded sequence of backend calls (a CUDA graph).
    type Graph;

    fn name(&self) -> String;

    /// Bytes the analysis may use for expression matrices at once.
    fn memory_budget(&self) -> usize;

    /// Properties worth batching together on this backend (an upper bound
    /// on the default batch; the memory budget may lower it).
    fn batch_hint(&self) -> usize {
        crate::base::analyzer::DEFAULT_BATCH
    }

    /// Neurons (summed over a property's nodes) that one batch works on
    /// best, where this allows more properties per batch on small networks
    /// than [`Self::batch_hint`] (up to [`crate::base::analyzer::SMALL_NET_BATCH`]).
    fn batch_neurons(&self) -> Option<usize> {
        None
    }

    /// Whether the α/β search evaluates its relaxed bounds on this backend,
    /// every open row of a batch in the same GEMMs (`relaxed.rs`), rather
    /// than row by row on the host.
    fn offload_relaxed(&self) -> bool {
        true
    }

    /// Search workers a branch and bound runs by default (`workers.rs`):
    /// more than one where a round's host work leaves the backend idle.
    fn search_workers(&self) -> usize {
        1
    }

    /// Another handle on this backend for a search worker thread (on a GPU
    /// its own stream and caches, so that one worker's host work overlaps
    /// another's kernels); `None` where it has none.
    fn fork(&self) -> BResult<Option<Self>>
    where
        Self: Sized,
    {
        Ok(None)
    }

    /// Records the calls `f` makes, without running them, for
    /// [`RuntimeOps::replay`]; `None` where the backend records nothing (or
    /// could not record these calls). Every buffer the calls read or write
    /// must stay alive, in place, while the graph is replayed.
    fn capture(&self, f: &mut dyn FnMut() -> BResult<()>) -> BResult<Option<Self::Graph>> {
        let _ = f;
        Ok(None)
    }

    /// Runs a recorded graph once.
    fn replay(&self, graph: &Self::Graph) -> BResult<()> {
        let _ = graph;
        Err(super::BackendError::Failure("this backend records no graphs".into()))
    }
}
