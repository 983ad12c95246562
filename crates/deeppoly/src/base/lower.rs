//! Max pooling rewritten as ReLUs, for the ReLU search: `max(a, b) =
//! relu(a − b) + b`, pairwise over each window. Branch and bound then
//! splits the pooling's choices as ReLUs and its split constraints enter
//! the α/β bound, which the MaxPool relaxation does not take.
//!
//! **Why it is sound.** The rewrite is exact over the reals. The analysis
//! encloses every float evaluation of the new affine layers, and so the
//! exact value, which is what the runtime's max computes (max does not
//! round). A counterexample is confirmed on the original network.

use crate::base::ir::{IrError, Network, NodeId, Op, Pool, Shape};

/// `net` with every max pooling node replaced by ReLU layers (the same
/// function over the reals), or `None` where it has none.
pub fn maxpool_as_relus(net: &Network) -> Result<Option<Network>, IrError> {
    if !net.nodes().iter().any(|n| matches!(n.op, Op::MaxPool2d(_))) {
        return Ok(None);
    }
    let mut out = Network::new(net.input_shape());
    out.set_softmax_output(net.softmax_output());
    let mut map: Vec<NodeId> = vec![0];
    for node in &net.nodes()[1..] {
        let inputs: Vec<NodeId> = node.inputs.iter().map(|&k| map[k]).collect();
        let id = match &node.op {
            Op::MaxPool2d(p) => {
                let si = net.node(node.inputs[0]).shape;
                lower_pool(&mut out, &node.name, inputs[0], (si, node.shape), p)?
            }
            Op::Reshape => out.reshape(node.name.clone(), inputs[0], node.shape)?,
            op => out.push(node.name.clone(), op.clone(), &inputs)?,
        };
        map.push(id);
    }
    Ok(Some(out))
}

/// One pooling node as rounds of pairwise maxima: each round halves every
/// window's candidates (an odd one passes on), until one is left.
fn lower_pool(out: &mut Network, name: &str, x: NodeId, (si, so): (Shape, Shape), p: &Pool) -> Result<NodeId, IrError> {
    let flat = out.reshape(format!("{name}/flat"), x, Shape::flat(si.numel()))?;
    // Per output, its candidates' indices in the current node `cur`.
    let mut cands: Vec<Vec<usize>> = (0..so.numel())
        .map(|o| {
            let (c, oy, ox) = (o / (so.h * so.w), (o / so.w) % so.h, o % so.w);
            p.window(si, c, oy, ox).collect()
        })
        .collect();
    let (mut cur, mut n_cur, mut round) = (flat, si.numel(), 0);
    while cands.iter().enumerate().any(|(o, c)| c.as_slice() != [o]) || n_cur != so.numel() {
        (cur, n_cur) = pair_round(out, &format!("{name}/max{round}"), cur, n_cur, &mut cands)?;
        round += 1;
    }
    out.reshape(format!("{name}/out"), cur, so)
}

/// One round: for every pair `(a, b)` of a window's candidates, `relu(a −
/// b) + b`, then a copy of every odd last candidate (concatenated after
/// them). Returns the new node and its size.
fn pair_round(
    out: &mut Network,
    name: &str,
    cur: NodeId,
    n_cur: usize,
    cands: &mut [Vec<usize>],
) -> Result<(NodeId, usize), IrError> {
    let (mut pairs, mut copies) = (Vec::new(), Vec::new());
    for c in cands.iter() {
        for ch in c.chunks(2) {
            match ch {
                [a, b] => pairs.push((*a, *b)),
                _ => copies.push(ch[0]),
            }
        }
    }
    let (np, nc) = (pairs.len(), copies.len());
    // The new indices: pairs in order, then copies in order.
    let (mut next_pair, mut next_copy) = (0, np);
    for c in cands.iter_mut() {
        *c = c
            .chunks(2)
            .map(|ch| {
                let slot = if ch.len() == 2 { &mut next_pair } else { &mut next_copy };
                *slot += 1;
                *slot - 1
            })
            .collect();
    }
    let select = |rows: &[(usize, f64, Option<usize>)]| {
        let mut w = vec![0.0; rows.len() * n_cur];
        for (k, &(i, s, j)) in rows.iter().enumerate() {
            w[k * n_cur + i] = s;
            if let Some(j) = j {
                w[k * n_cur + j] = -1.0;
            }
        }
        Op::Dense { weight: w, bias: vec![0.0; rows.len()], out: rows.len() }
    };
    let mut parts = Vec::new();
    if np > 0 {
        let diff: Vec<_> = pairs.iter().map(|&(a, b)| (a, 1.0, Some(b))).collect();
        let base: Vec<_> = pairs.iter().map(|&(_, b)| (b, 1.0, None)).collect();
        let d = out.push(format!("{name}/diff"), select(&diff), &[cur])?;
        let r = out.push(format!("{name}/relu"), Op::Relu, &[d])?;
        let b = out.push(format!("{name}/base"), select(&base), &[cur])?;
        parts.push(out.push(format!("{name}/sum"), Op::Add, &[r, b])?);
    }
    if nc > 0 {
        let copy: Vec<_> = copies.iter().map(|&a| (a, 1.0, None)).collect();
        parts.push(out.push(format!("{name}/copy"), select(&copy), &[cur])?);
    }
    let node = if parts.len() == 1 { parts[0] } else { out.push(format!("{name}/cat"), Op::Concat, &parts)? };
    Ok((node, np + nc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::rng::SplitMix;

    #[test]
    fn the_rewrite_computes_the_same_function() {
        let mut rng = SplitMix(5);
        for k in 0..4 {
            let net = crate::testnets::random_maxpool(&mut rng, Shape::new(1, 7, 7), 2, 3);
            let low = maxpool_as_relus(&net).unwrap().expect("it has max pooling");
            assert!(!low.nodes().iter().any(|n| matches!(n.op, Op::MaxPool2d(_))));
            for _ in 0..20 {
                let x: Vec<f64> = (0..49).map(|_| rng.weight(1.0)).collect();
                let (a, b) = (crate::base::eval::eval::<f64>(&net, &x), crate::base::eval::eval::<f64>(&low, &x));
                assert!(a.iter().zip(&b).all(|(a, b)| (a - b).abs() <= 1e-9 * (1.0 + a.abs())), "net {k}: {a:?} {b:?}");
            }
        }
        assert!(maxpool_as_relus(&crate::testnets::two_two()).unwrap().is_none());
    }
}
