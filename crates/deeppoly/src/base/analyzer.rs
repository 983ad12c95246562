//! The analyzer: a network prepared on a backend (weights uploaded once),
//! which every layer of the analysis extends with its own methods.

use crate::base::backend::{Arith, BResult, Backend, BackendError};
use crate::base::ir::{Network, Op};
use crate::base::options::Options;
use crate::base::property::PropertyError;
use polycert_interval::Fp;

/// The most sub-problems analysed together (`PassOptions::batch`).
pub const MAX_BATCH: usize = 1024;

/// The largest default batch a backend's [`RuntimeOps::batch_neurons`](crate::base::backend::RuntimeOps::batch_neurons) gives.
pub const SMALL_NET_BATCH: usize = 128;

/// The default batch of a backend that names none ([`RuntimeOps::batch_hint`](crate::base::backend::RuntimeOps::batch_hint)).
pub const DEFAULT_BATCH: usize = 256;

/// Values per neuron and batch slot that a run state keeps: host and device
/// bounds, relaxation or bias tables, `r` and `|W|·r`.
const VALUES_PER_NEURON: usize = 16;

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
    /// A layer whose function may be undefined (NaN or infinite in
    /// float32) on its input's bounds: no sound relaxation exists.
    #[error("layer '{layer}': {msg}")]
    Undefined { layer: String, msg: String },
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
    /// The attack's recorded step, kept across attacks (see `attack/pgd.rs`).
    pub(crate) step_graph: std::cell::RefCell<crate::base::recorded::Recorded<B::Graph, B::Buf>>,
    /// `RelaxedOn::Auto`'s timings of the α/β phase (see `base/clock.rs`).
    pub(crate) relaxed_clock: std::cell::RefCell<crate::base::clock::Clock>,
    /// The dense layers' weights in f32, as they are and transposed, for
    /// the host's batched rows (`crown/hostrows.rs`), made on first use.
    pub(crate) host_weights: std::cell::OnceCell<HostWeights>,
}

/// Per node, a dense layer's weights in f32 as they are (`n × n_in`) and
/// transposed (`n_in × n`), row-major; empty at other nodes.
pub(crate) type HostWeights = Vec<(Vec<f32>, Vec<f32>)>;

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
        let _p = crate::base::profile::span("analyzer.new");
        let mut params = Vec::with_capacity(net.nodes().len());
        for node in net.nodes() {
            let p = match &node.op {
                Op::Dense { weight, bias, .. } => affine_params(backend, &node.name, weight, bias, opts.passes.arith)?,
                Op::Conv2d(c) => affine_params(backend, &node.name, &c.weight, &c.bias, opts.passes.arith)?,
                Op::AvgPool2d(p) => {
                    let conv = avgpool_sum(node.shape.c, p);
                    let w = backend.upload(&to_t::<T>(&node.name, &conv.weight)?)?;
                    let b = backend.upload(&to_t::<T>(&node.name, &conv.bias)?)?;
                    Params::AvgPool { conv: Box::new(conv), w, b }
                }
                Op::Input
                | Op::Relu
                | Op::Sigmoid
                | Op::Elementwise(_)
                | Op::Add
                | Op::Reshape
                | Op::ChannelAffine { .. }
                | Op::Concat
                | Op::MaxPool2d(_) => Params::None,
            };
            params.push(p);
        }
        let mut relaxed_clock = crate::base::clock::Clock::default();
        relaxed_clock.shared = opts.host_shared;
        Ok(Self {
            net,
            backend,
            params,
            opts,
            step_graph: Default::default(),
            relaxed_clock: relaxed_clock.into(),
            host_weights: Default::default(),
        })
    }

    pub fn options(&self) -> &Options {
        &self.opts
    }

    pub(crate) fn memory_budget(&self) -> usize {
        self.opts.passes.memory_budget.unwrap_or_else(|| self.backend.memory_budget())
    }

    /// How many properties [`Analyzer::analyze_batch`] should take at once:
    /// `PassOptions::batch`, else as many run states as a quarter of the memory
    /// budget holds, at most the backend's [`RuntimeOps::batch_hint`](crate::base::backend::RuntimeOps::batch_hint) (or, on
    /// small networks, what its [`RuntimeOps::batch_neurons`](crate::base::backend::RuntimeOps::batch_neurons) allows). The
    /// interval arithmetic runs one property at a time.
    pub fn batch_capacity(&self) -> usize {
        if self.opts.passes.arith == Arith::Interval {
            return 1;
        }
        if let Some(b) = self.opts.passes.batch {
            return b.clamp(1, MAX_BATCH);
        }
        let neurons: usize = self.net.nodes().iter().map(|n| n.shape.numel()).sum();
        let per_slot = neurons.max(1) * VALUES_PER_NEURON * std::mem::size_of::<T>();
        let mut hint = self.backend.batch_hint();
        if let Some(total) = self.backend.batch_neurons() {
            hint = hint.max((total / neurons.max(1)).min(SMALL_NET_BATCH));
        }
        (self.memory_budget() / 4 / per_slot).clamp(1, hint.clamp(1, MAX_BATCH))
    }

    pub(crate) fn upload_pair(&self, lo: &[T], hi: &[T]) -> BResult<(B::Buf, B::Buf)> {
        Ok((self.backend.upload(lo)?, self.backend.upload(hi)?))
    }
}
