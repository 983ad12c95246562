//! DeepPoly with the GPU algorithms of GPUPoly, sound under floating point.
//!
//! The crate holds the network IR ([`base::ir`]), properties
//! ([`base::property`]) and the analysis ([`Analyzer`]), which drives a
//! [`Backend`] for the heavy linear algebra. It knows nothing of ONNX, CUDA
//! or the command line.
//!
//! The analysis is built in layers, each a module that uses only the ones
//! before it:
//!
//! - [`base`]: the IR, the backend trait, properties, options, the
//!   single-neuron relaxations and the [`Analyzer`] itself;
//! - [`gpupoly`]: DeepPoly's passes with GPUPoly's algorithms (forward
//!   pass, backsubstitution, refinement, output rows);
//! - [`crown`]: α-CROWN's slopes and β-CROWN's split multipliers;
//! - [`attack`]: PGD and the float32 confirmation of counterexamples;
//! - [`bab`]: branch and bound (input and ReLU splitting, BaBSR);
//! - [`driver`]: [`Analyzer::analyze`] and the batched entry points, which
//!   compose the others.

pub mod attack;
pub mod bab;
pub mod base;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod crown;
pub mod driver;
pub mod gpupoly;
#[cfg(any(test, feature = "testnets"))]
pub mod testnets;

pub use base::analyzer::{AnalysisError, Analyzer};
pub use base::backend::{
    AffineForward, AffineOps, Arith, BResult, Backend, BackendError, ConvParams, InferOps, Magnitudes, MatrixOps,
    MemoryOps, Pointwise, PoolParams, RelaxOps, ReluParams, RuntimeOps, check_repeat_rows, check_unit_rows,
    out_of_range, unit_rows,
};
pub use base::bounds::LoHi;
pub use base::elementwise::{Cmp, Elementwise, Piece, PowerFn};
pub use base::geom::Geom;
pub use base::ir::{Conv2d, IrError, Network, Node, NodeId, Op, Pool, Shape};
pub use base::options::{
    AttackOptions, CrownOptions, GateOptions, Options, PassOptions, PickOptions, RelaxedOn, SearchOptions, Stabilize,
    StabilizeOptions,
};
pub use base::property::{Counterexample, Halfspace, InputBox, Outcome, Property, SubProblem, Verdict};
pub use base::relax::ReluLower;
pub use polycert_interval::FloatModel;
