//! The analyzer: a network prepared on a backend (weights uploaded once),
//! which every layer of the analysis extends with its own methods.

use crate::base::backend::{Arith, BResult, Backend, BackendError};
use crate::base::options::Options;
use crate::base::ir::{Network, Op};
use crate::base::property::{Counterexample, PropertyError, SubProblem};
use polycert_interval::Fp;
use std::time::Instant;

/// Lower and upper bounds of a node's values.
pub type NodeBounds = (Vec<f64>, Vec<f64>);

/// Why an analysis could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnalysisError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Property(#[from] PropertyError),
    #[error("layer '{layer}' ({op}) is not supported by the analysis yet")]
    Unsupported { layer: String, op: &'static str },
    #[error("layer '{layer}': weight {value} is not exactly representable in {precision}; use f64")]
    InexactWeight { layer: String, value: f64, precision: &'static str },
    #[error("timeout")]
    Timeout,
}

/// Parameters of one node, uploaded to the backend.
pub(crate) enum Params<Buf> {
    None,
    Affine {
        w: Buf,
        b: Buf,
        /// `|W|` and a zero bias, for the point arithmetic's error terms.
        abs: Option<(Buf, Buf)>,
    },
    /// Average pooling as a sum (a conv with unit weights) then a division.
    AvgPool {
        conv: Box<crate::base::ir::Conv2d>,
        w: Buf,
        b: Buf,
    },
}

/// The sum part of an average pooling: a per-channel conv with unit weights.
pub(crate) fn avgpool_sum(c: usize, p: &crate::base::ir::Pool) -> crate::base::ir::Conv2d {
    let (kh, kw) = p.kernel;
    let mut weight = vec![0.0; c * c * kh * kw];
    for ch in 0..c {
        for k in 0..kh * kw {
            weight[(ch * c + ch) * kh * kw + k] = 1.0;
        }
    }
    crate::base::ir::Conv2d { weight, bias: vec![0.0; c], c_out: c, kernel: p.kernel, stride: p.stride, pad: p.pad }
}

/// A network prepared on a backend: weights uploaded once, reused for
/// every property.
pub struct Analyzer<'a, B: Backend<T>, T: Fp> {
    pub(crate) net: &'a Network,
    pub(crate) backend: &'a B,
    pub(crate) params: Vec<Params<B::Buf>>,
    pub(crate) opts: Options,
    /// The attack's recorded step, kept across attacks (see `pgd.rs`).
    pub(crate) step_graph: std::cell::RefCell<crate::attack::pgd::Recorded<B::Graph, B::Buf>>,
    /// `RelaxedOn::Auto`'s timings of the α/β phase (see `relaxed.rs`).
    pub(crate) relaxed_clock: std::cell::RefCell<crate::crown::relaxed::Clock>,
}

pub(crate) fn to_t<T: Fp>(layer: &str, v: &[f64]) -> Result<Vec<T>, AnalysisError> {
    v.iter()
        .map(|&x| {
            let t = T::from_f64_nearest(x);
            if t.to_f64_exact() == x {
                Ok(t)
            } else {
                Err(AnalysisError::InexactWeight { layer: layer.into(), value: x, precision: T::NAME })
            }
        })
        .collect()
}

fn affine_params<B: Backend<T>, T: Fp>(
    be: &B,
    layer: &str,
    weight: &[f64],
    bias: &[f64],
    arith: Arith,
) -> Result<Params<B::Buf>, AnalysisError> {
    let w = to_t::<T>(layer, weight)?;
    let abs = match arith {
        Arith::Interval => None,
        Arith::Point => {
            let wa: Vec<T> = w.iter().map(|v| v.abs()).collect();
            Some((be.upload(&wa)?, be.upload(&vec![T::zero(); bias.len()])?))
        }
    };
    Ok(Params::Affine { w: be.upload(&w)?, b: be.upload(&to_t::<T>(layer, bias)?)?, abs })
}

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// Uploads the weights and checks that every layer is supported.
    pub fn new(net: &'a Network, backend: &'a B, opts: Options) -> Result<Self, AnalysisError> {
        let mut params = Vec::with_capacity(net.nodes().len());
        for node in net.nodes() {
            let p = match &node.op {
                Op::Dense { weight, bias, .. } => affine_params(backend, &node.name, weight, bias, opts.arith)?,
                Op::Conv2d(c) => affine_params(backend, &node.name, &c.weight, &c.bias, opts.arith)?,
                Op::AvgPool2d(p) => {
                    let conv = avgpool_sum(node.shape.c, p);
                    let w = backend.upload(&to_t::<T>(&node.name, &conv.weight)?)?;
                    let b = backend.upload(&to_t::<T>(&node.name, &conv.bias)?)?;
                    Params::AvgPool { conv: Box::new(conv), w, b }
                }
                Op::Input
                | Op::Relu
                | Op::Sigmoid
                | Op::Add
                | Op::Reshape
                | Op::ChannelAffine { .. }
                | Op::Concat
                | Op::MaxPool2d(_) => Params::None,
            };
            params.push(p);
        }
        let mut relaxed_clock = crate::crown::relaxed::Clock::default();
        relaxed_clock.shared = opts.host_shared;
        Ok(Self { net, backend, params, opts, step_graph: Default::default(), relaxed_clock: relaxed_clock.into() })
    }

    pub fn options(&self) -> &Options {
        &self.opts
    }

    pub(crate) fn budget(&self) -> usize {
        self.opts.memory_budget.unwrap_or_else(|| self.backend.memory_budget())
    }

    /// Certified bounds of every node's values over `input`, after the
    /// forward pass and (if enabled) the refinement pass.
    pub fn node_bounds(&self, input: &crate::base::property::InputBox) -> Result<Vec<NodeBounds>, AnalysisError> {
        let st = self.refined_root(input, None, self.opts.timeout.map(|t| Instant::now() + t))?;
        Ok(crate::driver::bounds_f64(st.into_bounds()))
    }

    pub(crate) fn check_deadline(deadline: Option<Instant>) -> Result<(), AnalysisError> {
        match deadline {
            Some(d) if Instant::now() >= d => Err(AnalysisError::Timeout),
            _ => Ok(()),
        }
    }

    pub(crate) fn upload_pair(&self, lo: &[T], hi: &[T]) -> BResult<(B::Buf, B::Buf)> {
        Ok((self.backend.upload(lo)?, self.backend.upload(hi)?))
    }
}

/// Checks the box centre in float32 inference against the unsafe region.
pub(crate) fn falsify_centre(net: &Network, sp: &SubProblem) -> Option<Counterexample> {
    let x: Vec<f32> = sp.input.centre().iter().map(|&v| v as f32).collect();
    crate::attack::check::check_f32(net, sp, &x)
}
