//! DeepPoly with the GPU algorithms of GPUPoly, sound under floating point.
//!
//! The crate holds the network IR ([`ir`]), properties ([`property`]) and
//! the analysis ([`Analyzer`]), which drives a [`Backend`] for the heavy
//! linear algebra. It knows nothing of ONNX, CUDA or the command line.

pub mod analysis;
pub mod attack;
mod babsr;
pub mod backend;
mod backsub;
pub mod batch;
pub(crate) mod branch;
pub mod conformance;
mod duals;
pub mod eval;
mod falsify;
mod forward;
mod gate;
pub mod geom;
mod hostrows;
pub mod infer;
pub mod ir;
pub(crate) mod lagrange;
mod openlist;
pub mod par;
mod passes;
pub mod pgd;
mod picks;
pub mod profile;
pub mod progress;
pub mod property;
pub mod relax;
mod relaxed;
mod relaxed_bound;
mod rows;
pub mod scurve;
pub mod softmax;
pub mod split;
mod stabilize;
mod tally;
pub mod testnets;
mod tighten;
mod workers;

pub use analysis::{AnalysisError, Analyzer, Options, RelaxedOn, Stabilize};
pub use backend::{
    AffineForward, Arith, BResult, Backend, BackendError, ConvParams, Magnitudes, Pointwise, PoolParams, ReluParams,
    check_repeat_rows, check_unit_rows, out_of_range, unit_rows,
};
pub use geom::Geom;
pub use ir::{Conv2d, IrError, Network, Node, NodeId, Op, Pool, Shape};
pub use polycert_interval::FloatModel;
pub use property::{Counterexample, Halfspace, InputBox, Outcome, Property, SubProblem, Verdict};
pub use relax::ReluLower;
