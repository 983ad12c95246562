//! The α/β search's relaxed bound on the backend (`relaxed.rs`, every row
//! of a batch at once) against the host's row-by-row reference
//! (`relaxed_bound::relaxed_bound`).

use crate::base::analyzer::Analyzer;
use crate::base::backend::Backend;
use crate::base::ir::{Network, Op, Shape};
use crate::base::options::Options;
use crate::base::property::InputBox;
use crate::base::relax::Slopes;
use crate::base::relax::{ReluLower, unstable};
use crate::base::rng::SplitMix;
use crate::crown::lagrange::{Eval, SlotBounds, SplitConstraint, free_slopes};
use crate::crown::relaxed::{RelaxedRows, RowSpec};
use crate::crown::relaxed_bound::{Offsets, relaxed_bound};
use crate::testnets::{random_mlp, random_resnet, random_slopes};
use polycert_interval::Fp;

/// Per row of three slots (two rows each): random objective, split
/// constraints on unstable ReLU inputs with random β, random slopes on some
/// slots and random rounding offsets. The backend's bound and its β and α
/// supergradients equal the host's, on MLPs and residual conv nets.
pub fn relaxed_bound_matches_host<B: Backend<T>, T: Fp>(be: &B) {
    let mut rng = SplitMix(57);
    let mut free_seen = 0;
    for k in 0..6 {
        let net = match k % 2 {
            0 => random_mlp(&mut rng, &[6, 14, 12, 10, 4]),
            _ => random_resnet(&mut rng, Shape::new(2, 5, 5), 3, 4),
        };
        free_seen += rows_match_host::<B, T>(be, &net, k, &mut rng);
    }
    assert!(free_seen > 20, "too few free slopes with a gradient to test: {free_seen}");
}

/// [`relaxed_bound_matches_host`] on net `k`: its six rows compared, and
/// the number of non-zero α supergradients among them.
fn rows_match_host<B: Backend<T>, T: Fp>(be: &B, net: &Network, k: usize, rng: &mut SplitMix) -> usize {
    let a = Analyzer::<B, T>::new(net, be, Options::default()).expect("prepare");
    let boxes = random_boxes(net, rng);
    let st = a.forward_pass(&boxes.iter().collect::<Vec<_>>()).expect("forward");
    let nodes = net.nodes();
    let views: Vec<SlotBounds<'_, T>> = (0..3)
        .map(|s| {
            st.bounds
                .iter()
                .zip(nodes)
                .map(|(b, n)| {
                    (&b.lo[s * n.shape.numel()..][..n.shape.numel()], &b.hi[s * n.shape.numel()..][..n.shape.numel()])
                })
                .collect()
        })
        .collect();
    let offsets = random_offsets(net, rng);
    let splits: Vec<Vec<SplitConstraint>> = views.iter().map(|v| random_splits(net, v, rng)).collect();
    let slopes: Vec<Option<Slopes>> = (0..3).map(|s| (s != 1).then(|| random_slopes(net, rng))).collect();
    let n_out = net.output_shape().numel();
    let cs: Vec<Vec<f64>> = (0..6).map(|_| (0..n_out).map(|_| rng.weight(1.0)).collect()).collect();
    let betas: Vec<Vec<f64>> = (0..6).map(|r| splits[r / 2].iter().map(|_| rng.unit()).collect()).collect();
    let specs: Vec<RowSpec<'_, T>> = (0..6)
        .map(|r| RowSpec { bounds: &views[r / 2], offsets: &offsets[r / 2], c: &cs[r], splits: &splits[r / 2] })
        .collect();
    let rows = RelaxedRows::new(&a, &specs, ReluLower::Area).expect("tables").expect("supported net");
    let alpha: Vec<Option<&Slopes>> = (0..6).map(|r| slopes[r / 2].as_ref()).collect();
    let beta: Vec<&[f64]> = betas.iter().map(|b| &b[..]).collect();
    let got = rows.eval(&alpha, &beta).expect("eval");
    got.iter().enumerate().map(|(r, g)| row_matches_host(net, (k, r), &specs[r], (beta[r], alpha[r]), g)).sum()
}

/// Three random boxes of half-width 0.4 in the network's input.
fn random_boxes(net: &Network, rng: &mut SplitMix) -> Vec<InputBox> {
    let n_in = net.input_shape().numel();
    (0..3)
        .map(|_| {
            let c: Vec<f64> = (0..n_in).map(|_| rng.weight(1.0)).collect();
            InputBox::new(c.iter().map(|v| v - 0.4).collect(), c.iter().map(|v| v + 0.4).collect()).expect("box")
        })
        .collect()
}

/// Per slot of three, random rounding offsets of the affine layers.
fn random_offsets(net: &Network, rng: &mut SplitMix) -> Vec<Offsets> {
    (0..3)
        .map(|_| {
            net.nodes()
                .iter()
                .map(|n| {
                    matches!(n.op, Op::Dense { .. } | Op::Conv2d(_))
                        .then(|| (0..n.shape.numel()).map(|_| (-0.01 * rng.unit(), 0.01 * rng.unit())).collect())
                })
                .collect()
        })
        .collect()
}

/// Split constraints on up to three of a slot's unstable ReLU inputs.
fn random_splits<T: Fp>(net: &Network, v: &SlotBounds<'_, T>, rng: &mut SplitMix) -> Vec<SplitConstraint> {
    let cands: Vec<(usize, usize)> = net
        .nodes()
        .iter()
        .filter(|n| n.op == Op::Relu)
        .flat_map(|n| {
            let x0 = n.inputs[0];
            (0..v[x0].0.len()).filter(move |&j| unstable(v[x0].0[j], v[x0].1[j])).map(move |j| (x0, j))
        })
        .collect();
    (0..3.min(cands.len()))
        .map(|_| {
            let (node, neuron) = cands[rng.below(cands.len())];
            SplitConstraint { node, neuron, active: rng.unit() < 0.5 }
        })
        .collect()
}

/// Row `r` of net `k`: the backend's bound and supergradients `got` equal
/// the host's; the number of non-zero α supergradients.
fn row_matches_host<T: Fp>(
    net: &Network,
    (k, r): (usize, usize),
    spec: &RowSpec<'_, T>,
    (beta, alpha): (&[f64], Option<&Slopes>),
    (l, gb, ga): &Eval,
) -> usize {
    let tol = if std::mem::size_of::<T>() == 4 { 1e-4 } else { 1e-10 };
    let (want, wb, wa) = relaxed_bound(
        net,
        (spec.bounds, spec.offsets),
        (net.output(), spec.c),
        spec.splits,
        beta,
        alpha,
        ReluLower::Area,
    )
    .expect("host bound");
    let close = |x: f64, y: f64| (x - y).abs() <= tol * (1.0 + y.abs());
    assert!(close(*l, want), "net {k} row {r}: {l} vs {want}");
    assert_eq!(gb.len(), wb.len());
    for (x, y) in gb.iter().zip(&wb) {
        assert!(close(*x, *y), "net {k} row {r} β gradient: {gb:?} vs {wb:?}");
    }
    // The backend's supergradients come at the free slopes only.
    let free = free_slopes(net, spec.bounds, net.nodes().len());
    let mut free_seen = 0;
    for (id, w) in wa.iter().enumerate() {
        for (j, &y) in w.iter().enumerate() {
            let x = free.iter().position(|&f| f == (id, j)).map_or(0.0, |k| ga.at(k, (id, j)));
            assert!(close(x, y), "net {k} row {r} α gradient ({id}, {j}): {x} vs {y}");
            free_seen += usize::from(y != 0.0);
        }
    }
    free_seen
}

/// Sparse transfers (`relaxed.rs`'s free slopes) are exact: `gather` reads
/// the indexed values, `scatter` writes into a copy and leaves its base as
/// it was; an index past the end, or values and indices of different
/// lengths, are errors; `gather_many` and `scatter_many` are several at
/// once. `repeat_rows` repeats a per-slot table's rows per output row, and
/// `zeros` is zeros.
pub fn gather_and_scatter<B: Backend<T>, T: Fp>(be: &B) {
    let base: Vec<T> = (0..1000).map(|i| T::from_f64_nearest(i as f64 * 0.5 - 7.0)).collect();
    let buf = be.upload(&base).expect("upload");
    let idx = [999u32, 0, 17, 512];
    let got = be.gather(&buf, &idx).expect("gather");
    assert_eq!(got, idx.iter().map(|&i| base[i as usize]).collect::<Vec<_>>());
    assert!(be.gather(&buf, &[]).expect("empty gather").is_empty());
    let vals: Vec<T> = [1.25, -3.0, 0.0, 1e-3].iter().map(|&v| T::from_f64_nearest(v)).collect();
    let s = be.scatter(&buf, &idx, &vals).expect("scatter");
    let mut want = base.clone();
    for (&i, &v) in idx.iter().zip(&vals) {
        want[i as usize] = v;
    }
    assert_eq!(be.download(&s).expect("download"), want);
    assert_eq!(be.download(&buf).expect("download"), base, "the base is unchanged");
    assert_eq!(be.download(&be.scatter(&buf, &[], &[]).expect("empty scatter")).expect("download"), base);
    assert!(be.gather(&buf, &[1000]).is_err(), "gather past the end");
    assert!(be.scatter(&buf, &[1000], &vals[..1]).is_err(), "scatter past the end");
    assert!(be.scatter(&buf, &[1, 2], &vals[..1]).is_err(), "one value for two indices");
    let rows = [3u32, 3, 0, 99];
    let repeated: Vec<T> = rows.iter().flat_map(|&r| base[r as usize * 10..][..10].to_vec()).collect();
    assert_eq!(be.download(&be.repeat_rows(&buf, 10, &rows).expect("repeat_rows")).expect("download"), repeated);
    assert!(be.download(&be.repeat_rows(&buf, 10, &[]).expect("no rows")).expect("download").is_empty());
    assert!(be.repeat_rows(&buf, 10, &[100]).is_err(), "a row past the end");
    assert_eq!(be.download(&be.zeros(37).expect("zeros")).expect("download"), vec![T::zero(); 37]);
    let other = be.upload(&vals).expect("upload");
    let many = be.gather_many(&[(&buf, &idx[..]), (&other, &[][..]), (&other, &[3, 0][..])]).expect("gather_many");
    assert_eq!(many, vec![got, Vec::new(), vec![vals[3], vals[0]]]);
    assert!(be.gather_many(&[(&buf, &[0][..]), (&other, &[4][..])]).is_err(), "gather_many past the end");
    let two = [T::one(), T::zero()];
    let sm =
        be.scatter_many(&[(&buf, &idx[..], &vals[..]), (&other, &[][..], &[][..]), (&other, &[1, 2][..], &two[..])]);
    let sm: Vec<Vec<T>> = sm.expect("scatter_many").iter().map(|b| be.download(b).expect("download")).collect();
    assert_eq!(sm, vec![want, vals.clone(), vec![vals[0], T::one(), T::zero(), vals[3]]]);
    assert_eq!(be.download(&other).expect("download"), vals, "the bases are unchanged");
    assert!(be.scatter_many(&[(&other, &[4][..], &two[..1])]).is_err(), "scatter_many past the end");
    assert!(be.scatter_many(&[(&other, &[1, 2][..], &two[..1])]).is_err(), "one value for two indices");
}
