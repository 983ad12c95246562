//! What every layer shares: the network IR, the backend trait and its
//! geometry, properties and outcomes, the single-neuron relaxations, host
//! evaluation, the analysis options and the [`Analyzer`](analyzer::Analyzer)
//! itself (a network prepared on a backend), and small utilities
//! (parallelism, profiling, progress).

pub mod analyzer;
pub mod backend;
pub mod bounds;
pub mod budget;
pub(crate) mod clock;
pub mod elementwise;
pub mod eval;
pub mod geom;
pub mod infer;
pub mod ir;
pub mod lower;
pub mod options;
pub mod par;
pub mod power;
pub mod profile;
pub mod progress;
pub mod property;
pub(crate) mod recorded;
pub mod relax;
pub mod rng;
pub mod scurve;
pub mod softmax;
