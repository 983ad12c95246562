//! Piecewise-linear activations lowered to ReLU networks: Clip, LeakyRelu,
//! Max and Min. Each lowering equals the op exactly over the reals, so the
//! analysis's relaxation (DeepPoly's ReLU lines, rounded outward) covers it.
//!
//! - `Clip(x, lo, hi) = hi − relu((hi − lo) − relu(x − lo))` (one chain, no
//!   branches to merge);
//! - `LeakyRelu(x) = α·x + (1 − α)·relu(x)`: with DeepPoly's ReLU lines this
//!   gives exactly the LeakyReLU chord above and the α- or 1-slope line below;
//! - `Max(a, b) = a + relu(b − a)`, `Min(a, b) = a − relu(a − b)`.
//!
//! Clip, Max and Min round nothing in float inference, so their affine parts
//! carry no rounding term (`float_ops: 0`); LeakyRelu rounds `α·x`.

use crate::graph::{Dyn, Importer, Node, OpError, OpResult, Value, unsupported};
use crate::tensor::{Tensor, broadcast_dims, numel};
use polycert_deeppoly::Op;
use polycert_interval::{Interval, fp};

fn iv(lo: f64, hi: f64) -> OpResult<Interval<f64>> {
    Interval::new(lo, hi).map_err(|e| OpError::Msg(e.to_string()))
}

/// `x·mul + add` per channel, rounding `float_ops` times in inference.
fn affine(
    imp: &mut Importer,
    node: &Node,
    suffix: &str,
    x: &Dyn,
    mul: Vec<Interval<f64>>,
    add: Vec<Interval<f64>>,
    float_ops: u32,
) -> OpResult<Dyn> {
    let id = imp.push(node, suffix, Op::ChannelAffine { mul, add, float_ops }, &[x.id])?;
    Ok(Dyn::new(id, x.dims.clone()))
}

fn relu(imp: &mut Importer, node: &Node, suffix: &str, x: &Dyn) -> OpResult<Dyn> {
    let id = imp.push(node, suffix, Op::Relu, &[x.id])?;
    Ok(Dyn::new(id, x.dims.clone()))
}

fn channels(imp: &Importer, x: &Dyn) -> usize {
    imp.net.node(x.id).shape.c
}

/// A scalar bound of Clip (input `k` from opset 11, attribute before), `None` when absent.
fn clip_bound(imp: &Importer, node: &Node, k: usize, attr: &str) -> OpResult<Option<f64>> {
    let v = match node.input(k) {
        Some(n) if imp.is_const(n) => {
            let t = imp.constant(n)?;
            let [v] = t.data[..] else {
                return Err(format!("{attr} '{n}' has {} values, expected a scalar", t.data.len()).into());
            };
            Some(v)
        }
        Some(n) => return unsupported(format!("{attr} '{n}' must be a constant")),
        None => node.attr(attr).map(|_| node.float(attr, 0.0)).transpose()?.map(f64::from),
    };
    match v {
        Some(v) if v.is_nan() => Err(format!("{attr} is NaN").into()),
        Some(v) if v.is_infinite() => Ok(None),
        v => Ok(v),
    }
}

pub(super) fn clip(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let xn = node.required(0)?;
    let (lo, hi) = (clip_bound(imp, node, 1, "min")?, clip_bound(imp, node, 2, "max")?);
    if imp.is_const(xn) {
        let mut t = imp.constant(xn)?;
        t.data.iter_mut().for_each(|v| *v = v.max(lo.unwrap_or(f64::NEG_INFINITY)).min(hi.unwrap_or(f64::INFINITY)));
        return Ok(Value::Const(t));
    }
    if let (Some(l), Some(h)) = (lo, hi)
        && l > h
    {
        return Err(format!("min {l} is above max {h}").into());
    }
    let x = imp.dynamic(xn)?;
    let c = channels(imp, &x);
    let (one, neg) = (iv(1.0, 1.0)?, iv(-1.0, -1.0)?);
    // t = relu(x − lo), or x itself without a lower bound.
    let (t, base) = match lo {
        Some(l) => {
            let shifted =
                if l == 0.0 { x } else { affine(imp, node, ".shift", &x, vec![one; c], vec![iv(-l, -l)?; c], 0)? };
            (relu(imp, node, ".lo", &shifted)?, l)
        }
        None => (x, 0.0),
    };
    let Some(h) = hi else {
        // y = lo + t.
        if base == 0.0 {
            return Ok(Value::Dyn(t));
        }
        return Ok(Value::Dyn(affine(imp, node, "", &t, vec![one; c], vec![iv(base, base)?; c], 0)?));
    };
    // y = hi − relu((hi − lo) − t), with hi − lo enclosed outward.
    let gap = if lo.is_some() { iv(fp::sub_down(h, base), fp::sub_up(h, base))? } else { iv(h, h)? };
    let r = affine(imp, node, ".gap", &t, vec![neg; c], vec![gap; c], 0)?;
    let r = relu(imp, node, ".hi", &r)?;
    Ok(Value::Dyn(affine(imp, node, "", &r, vec![neg; c], vec![iv(h, h)?; c], 0)?))
}

pub(super) fn leaky_relu(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let xn = node.required(0)?;
    let alpha = node.float("alpha", 0.01)? as f64;
    if imp.is_const(xn) {
        let mut t = imp.constant(xn)?;
        let kind = t.kind;
        if kind == crate::tensor::Kind::Half {
            return unsupported("LeakyRelu of float16 constants (folded arithmetic is float32 or float64 only)");
        }
        t.data.iter_mut().for_each(|v| *v = if *v < 0.0 { kind.round(*v * alpha) } else { *v });
        return Ok(Value::Const(t));
    }
    if !(0.0..=1.0).contains(&alpha) {
        return unsupported(format!("alpha {alpha} (only 0 ≤ alpha ≤ 1 is supported)"));
    }
    let x = imp.dynamic(xn)?;
    let c = channels(imp, &x);
    let zero = iv(0.0, 0.0)?;
    let scaled = affine(imp, node, ".alpha", &x, vec![iv(alpha, alpha)?; c], vec![zero; c], 1)?;
    let r = relu(imp, node, ".relu", &x)?;
    let rest = iv(fp::sub_down(1.0, alpha), fp::sub_up(1.0, alpha))?;
    let r = affine(imp, node, ".rest", &r, vec![rest; c], vec![zero; c], 0)?;
    let id = imp.push(node, "", Op::Add, &[scaled.id, r.id])?;
    Ok(Value::Dyn(Dyn::new(id, x.dims)))
}

/// Max or Min of two or more inputs (network values, or one network value
/// and per-channel constants), folded pairwise.
pub(super) fn max_min(imp: &mut Importer, node: &Node) -> OpResult<Value> {
    let names = node.inputs();
    let is_max = node.op() == "Max";
    let (consts, dyns): (Vec<&str>, Vec<&str>) = names.iter().partition(|n| imp.is_const(n));
    // Constants first: fold them into one.
    let mut c: Option<Tensor> = None;
    for n in &consts {
        let t = imp.weight(n)?;
        c = Some(match c {
            None => t,
            Some(acc) => {
                let dims = broadcast_dims(&acc.dims, &t.dims)?;
                let (a, b) = (acc.broadcast_to(&dims)?, t.broadcast_to(&dims)?);
                let data = a.iter().zip(&b).map(|(&p, &q)| if is_max { p.max(q) } else { p.min(q) }).collect();
                Tensor::new(dims, data, acc.kind)?
            }
        });
    }
    let Some((first, rest)) = dyns.split_first() else {
        return Ok(Value::Const(c.ok_or("no inputs")?));
    };
    let mut acc = imp.dynamic(first)?;
    for (k, n) in rest.iter().enumerate() {
        let b = imp.dynamic(n)?;
        if b.dims != acc.dims {
            return unsupported(format!("{} of dims {:?} and {:?} (only equal shapes)", node.op(), acc.dims, b.dims));
        }
        acc = pair(imp, node, &format!(".{k}"), &acc, &b, is_max)?;
    }
    if let Some(t) = c {
        acc = with_const(imp, node, &acc, &t, is_max)?;
    }
    Ok(Value::Dyn(acc))
}

/// `max(a, b) = a + relu(b − a)`, `min(a, b) = a − relu(a − b)`.
fn pair(imp: &mut Importer, node: &Node, tag: &str, a: &Dyn, b: &Dyn, is_max: bool) -> OpResult<Dyn> {
    let c = channels(imp, a);
    let (neg, zero) = (iv(-1.0, -1.0)?, iv(0.0, 0.0)?);
    let (pos, minus) = if is_max { (b, a) } else { (a, b) };
    let m = affine(imp, node, &format!("{tag}.neg"), minus, vec![neg; c], vec![zero; c], 0)?;
    let d = imp.push(node, &format!("{tag}.diff"), Op::Add, &[pos.id, m.id])?;
    let r = relu(imp, node, &format!("{tag}.relu"), &Dyn::new(d, a.dims.clone()))?;
    let r = if is_max { r } else { affine(imp, node, &format!("{tag}.negr"), &r, vec![neg; c], vec![zero; c], 0)? };
    let id = imp.push(node, tag, Op::Add, &[a.id, r.id])?;
    Ok(Dyn::new(id, a.dims.clone()))
}

/// `max(x, c) = c + relu(x − c)`, `min(x, c) = c − relu(c − x)` with `c`
/// per channel.
fn with_const(imp: &mut Importer, node: &Node, x: &Dyn, t: &Tensor, is_max: bool) -> OpResult<Dyn> {
    let dims = broadcast_dims(&x.dims, &t.dims)?;
    if numel(&dims) != numel(&x.dims) {
        return unsupported(format!("{} broadcasting the network value {:?} to {dims:?}", node.op(), x.dims));
    }
    let vals = super::affine::per_channel(t, &dims)?;
    let x = &imp.view(node, x, dims)?;
    let (one, neg) = (iv(1.0, 1.0)?, iv(-1.0, -1.0)?);
    let n = vals.len();
    let s = if is_max { one } else { neg };
    // d = ±(x − c) exactly (negation and the subtraction's enclosure are outward).
    let shift: Vec<Interval<f64>> =
        vals.iter().map(|&v| if is_max { iv(-v, -v) } else { iv(v, v) }).collect::<OpResult<_>>()?;
    let d = affine(imp, node, ".shift", x, vec![s; n], shift, 0)?;
    let r = relu(imp, node, ".relu", &d)?;
    let back: Vec<Interval<f64>> = vals.iter().map(|&v| iv(v, v)).collect::<OpResult<_>>()?;
    affine(imp, node, "", &r, vec![s; n], back, 0)
}
