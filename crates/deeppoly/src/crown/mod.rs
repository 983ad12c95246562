//! The free parameters of the bounds, optimised: α-CROWN's lower slopes
//! (per output row, and per layer for intermediate bounds) and β-CROWN's
//! Lagrangian terms of ReLU split constraints, chosen by Adam on relaxed
//! bounds evaluated on the host or the backend.

pub(crate) mod analyse;
pub(crate) mod duals;
pub(crate) mod hopeless;
pub(crate) mod hostrows;
pub(crate) mod lagrange;
pub(crate) mod relaxed;
pub(crate) mod relaxed_bound;
pub(crate) mod rowkernels;
pub(crate) mod tighten;
