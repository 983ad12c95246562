//! Branch and bound: input splitting and ReLU splitting (BaBSR's scores),
//! the open list and the search workers, root stabilisation, and the
//! refinement gate of the leaves.

pub(crate) mod babsr;
pub(crate) mod branch;
pub(crate) mod children;
pub(crate) mod gate;
pub(crate) mod openlist;
pub(crate) mod picks;
pub(crate) mod search;
pub(crate) mod stabilize;
pub(crate) mod tally;
pub(crate) mod workers;
