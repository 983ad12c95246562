//! DeepPoly with GPUPoly's algorithms: the batched forward pass (interval
//! bounds and relaxations), backsubstitution of rows with early
//! termination, the refinement pass and the property's output rows.

pub(crate) mod backsub;
pub(crate) mod forward;
pub(crate) mod passes;
pub(crate) mod rows;
pub(crate) mod steps;
