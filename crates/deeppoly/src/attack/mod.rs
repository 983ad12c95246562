//! Falsification: float32 confirmation of candidate counterexamples, PGD on
//! the backend (batched over properties and restarts), and the corner
//! attacks on search leaves.

pub mod check;
pub mod exact;
pub(crate) mod falsify;
pub mod pgd;
