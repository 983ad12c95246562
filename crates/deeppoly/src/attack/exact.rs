//! Outputs that float32 inference computes exactly, in every summation
//! order and with or without FMA: then the float32 result is one value,
//! with no rounding to enclose, and a counterexample that meets a
//! non-strict bound exactly (`relu(x) ≤ 0` at `x ≤ 0`) is confirmed.
//!
//! A sum is exact in every order when its terms are exact float32 values,
//! multiples of one power of two `2^m`, whose absolute values add up to
//! less than `2^(24+m)`: every partial sum is then such a multiple below
//! `2^(24+m)`, which float32 represents.

use crate::base::eval::conv_runs;
use crate::base::ir::{Network, Op};

/// The outputs of float32 inference at `x` where every operation on the
/// way is exact in any order (`None` where one may round: then the
/// enclosure of [`crate::attack::check`] decides).
pub fn exact_f32_outputs(net: &Network, x: &[f32]) -> Option<Vec<f64>> {
    if net.softmax_output() {
        return None;
    }
    let mut vals: Vec<Vec<f64>> = Vec::with_capacity(net.nodes().len());
    for (id, node) in net.nodes().iter().enumerate() {
        let ins = |k: usize| &vals[node.inputs[k]];
        let v = match &node.op {
            Op::Input => x.iter().map(|&v| v as f64).collect(),
            Op::Dense { weight, bias, out } => {
                let xi = ins(0);
                let n = xi.len();
                (0..*out)
                    .map(|o| exact_sum(weight[o * n..(o + 1) * n].iter().zip(xi).map(|(&w, &x)| (w, x)), bias[o]))
                    .collect::<Option<_>>()?
            }
            Op::Conv2d(c) => {
                let (si, so) = (net.node(node.inputs[0]).shape, node.shape);
                let mut terms: Vec<Vec<(f64, f64)>> = vec![Vec::new(); so.numel()];
                conv_runs(c, si, so, |w, o, i, n| {
                    for t in 0..n {
                        terms[o + t].push((w, ins(0)[i + t * c.stride.1]));
                    }
                });
                let hw = so.h * so.w;
                terms
                    .into_iter()
                    .enumerate()
                    .map(|(o, t)| exact_sum(t.into_iter(), c.bias[o / hw]))
                    .collect::<Option<_>>()?
            }
            Op::Add => ins(0)
                .iter()
                .zip(ins(1))
                .map(|(&a, &b)| exact_sum([(1.0, a), (1.0, b)].into_iter(), 0.0))
                .collect::<Option<_>>()?,
            // A max, a copy: exact in f64 as in float32.
            Op::Relu | Op::Concat | Op::Reshape | Op::MaxPool2d(_) => {
                let inputs: Vec<&[f64]> = node.inputs.iter().map(|&k| &vals[k][..]).collect();
                crate::base::eval::eval_node::<f64>(net, id, &inputs)
            }
            // Its input or a constant: exact where the result is a float32.
            Op::Elementwise(f) if f.is_exact() => {
                ins(0).iter().map(|&v| Some(f.eval(v)).filter(|&y| y as f32 as f64 == y)).collect::<Option<_>>()?
            }
            Op::ChannelAffine { mul, add, float_ops } if *float_ops <= 1 => {
                channel_affine(node.shape, (mul, add), *float_ops, ins(0))?
            }
            // σ and powers have a tolerance, average pooling divides, a normalisation
            // (or a lowering's own affine part) rounds in its own steps: left
            // to the enclosure.
            Op::Sigmoid | Op::Elementwise(_) | Op::AvgPool2d(_) | Op::ChannelAffine { .. } => return None,
        };
        vals.push(v);
    }
    vals.pop()
}

/// A per-channel affine node at the exact values `xs`, where it is exact:
/// one runtime operation with a constant (`x + a` or `x·m`: an Add, Sub,
/// Mul or Div the importer marks with one rounding), or a scaling by ±2^k
/// over the reals (a lowering's, or a property product's quarter); either
/// where its result is a float32.
fn channel_affine(
    shape: crate::base::ir::Shape,
    (mul, add): (&[polycert_interval::Interval<f64>], &[polycert_interval::Interval<f64>]),
    float_ops: u32,
    xs: &[f64],
) -> Option<Vec<f64>> {
    let hw = (shape.h * shape.w).max(1);
    let point = |v: &polycert_interval::Interval<f64>| (v.lo() == v.hi()).then_some(v.lo());
    xs.iter()
        .enumerate()
        .map(|(i, &v)| {
            let (m, a) = (point(&mul[i / hw])?, point(&add[i / hw])?);
            let ok = if float_ops == 1 {
                m == 1.0 || a == 0.0
            } else {
                a == 0.0 && m != 0.0 && m.abs().log2().fract() == 0.0
            };
            ok.then(|| exact_sum([(m, v)].into_iter(), a)).flatten()
        })
        .collect()
}

/// `Σ w·x + b` where each product and every partial sum, in any order, is
/// an exact float32 value (`None` otherwise).
fn exact_sum(terms: impl Iterator<Item = (f64, f64)>, b: f64) -> Option<f64> {
    let as_f32 = |v: f64| ((v as f32) as f64 == v && v.is_finite()).then_some(v);
    let mut ts = vec![as_f32(b)?];
    for (w, x) in terms {
        // A product of two float32 values is exact in f64.
        ts.push(as_f32(as_f32(w)? * as_f32(x)?)?);
    }
    let ts: Vec<f64> = ts.into_iter().filter(|&t| t != 0.0).collect();
    let Some(m) = ts.iter().map(|&t| lowest_bit(t)).min() else { return Some(0.0) };
    // Multiples of 2^m: f64 adds them exactly until far past 2^(24+m).
    let (total, abs): (f64, f64) = ts.iter().fold((0.0, 0.0), |(s, a), &t| (s + t, a + t.abs()));
    (abs < 2f64.powi(24 + m)).then_some(total)
}

/// The exponent of the lowest set bit of a finite nonzero `t`.
fn lowest_bit(t: f64) -> i32 {
    let bits = t.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let mant = bits & ((1u64 << 52) - 1);
    let (m, e) = if exp == 0 { (mant, -1074) } else { (mant | 1 << 52, exp - 1075) };
    e + m.trailing_zeros() as i32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ir::Shape;

    #[test]
    fn exact_sums_are_recognised() {
        assert_eq!(lowest_bit(1.0), 0);
        assert_eq!(lowest_bit(0.75), -2);
        assert_eq!(lowest_bit(6.0), 1);
        assert_eq!(lowest_bit(f64::from_bits(1)), -1074);
        assert_eq!(exact_sum([(1.0, 0.0)].into_iter(), 0.0), Some(0.0));
        assert_eq!(exact_sum([(1.0, 3.0), (2.0, -0.5)].into_iter(), 0.25), Some(2.25));
        // 2^24 + 1 is not a float32: some order rounds.
        assert_eq!(exact_sum([(1.0, 16777216.0), (1.0, 1.0)].into_iter(), 0.0), None);
        // 0.1 is no float32 product of itself.
        assert_eq!(exact_sum([(0.1f32 as f64, 0.1f32 as f64)].into_iter(), 0.0), None);
    }

    #[test]
    fn a_relu_of_a_dense_layer_at_zero_is_exact() {
        let mut net = Network::new(Shape::flat(1));
        let d = net.push("d", Op::Dense { weight: vec![1.0], bias: vec![0.0], out: 1 }, &[0]).unwrap();
        net.push("r", Op::Relu, &[d]).unwrap();
        assert_eq!(exact_f32_outputs(&net, &[0.0]), Some(vec![0.0]));
        assert_eq!(exact_f32_outputs(&net, &[-3.0]), Some(vec![0.0]));
        let mut sig = net.clone();
        sig.push("s", Op::Sigmoid, &[2]).unwrap();
        assert_eq!(exact_f32_outputs(&sig, &[0.0]), None);
    }

    /// `x + a` or `x·m` by a constant is exact where its result is a
    /// float32; two roundings, an interval constant, or a rounded result are
    /// left to the enclosure.
    #[test]
    fn one_operation_with_a_constant_is_exact_where_its_result_is() {
        let p = |v: f64| polycert_interval::Interval::new(v, v).unwrap();
        let affine = |m: f64, a: f64, float_ops: u32| {
            let mut net = Network::new(Shape::flat(1));
            net.push("a", Op::ChannelAffine { mul: vec![p(m)], add: vec![p(a)], float_ops }, &[0]).unwrap();
            net
        };
        assert_eq!(exact_f32_outputs(&affine(1.0, 0.0, 1), &[1.0]), Some(vec![1.0]));
        assert_eq!(exact_f32_outputs(&affine(1.0, 0.5, 1), &[1.0]), Some(vec![1.5]));
        assert_eq!(exact_f32_outputs(&affine(3.0, 0.0, 1), &[0.5]), Some(vec![1.5]));
        assert_eq!(exact_f32_outputs(&affine(1.0, 2f64.powi(-30), 1), &[1.0]), None);
        assert_eq!(exact_f32_outputs(&affine(3.0, 0.5, 1), &[1.0]), None);
        assert_eq!(exact_f32_outputs(&affine(1.0, 0.0, 2), &[1.0]), None);
        let mut wide = Network::new(Shape::flat(1));
        let w = polycert_interval::Interval::new(0.9, 1.1).unwrap();
        wide.push("a", Op::ChannelAffine { mul: vec![w], add: vec![p(0.0)], float_ops: 1 }, &[0]).unwrap();
        assert_eq!(exact_f32_outputs(&wide, &[1.0]), None);
    }
}
