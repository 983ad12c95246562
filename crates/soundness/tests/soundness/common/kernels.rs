//! Shared pieces of the backend kernel suites (`backend_kernels.rs` for the
//! interval arithmetic, `point_kernels.rs` for the point arithmetic): data
//! drawn from deeppoly's `SplitMix`, random conv layers and the exact
//! scatter of a windowed row through a conv.

use polycert_deeppoly::base::rng::SplitMix;
use polycert_deeppoly::{Conv2d, Geom, Shape};
use polycert_interval::Fp;
use rug::Rational;

/// The exact value of a finite float.
pub fn q<T: Fp>(x: T) -> Rational {
    Rational::from_f64(x.to_f64_exact()).expect("finite")
}

/// Values with mixed magnitudes, exact in f32; a quarter are zero.
pub fn vals<T: Fp>(rng: &mut SplitMix, n: usize) -> Vec<T> {
    (0..n)
        .map(|_| match rng.below(8) {
            0 | 1 => T::zero(),
            2 => T::from_f64_nearest(rng.weight(1e-3)),
            3 => T::from_f64_nearest(rng.weight(50.0)),
            _ => T::from_f64_nearest(rng.weight(1.0)),
        })
        .collect()
}

/// An interval plane pair `lo ≤ hi`.
pub fn planes<T: Fp>(rng: &mut SplitMix, n: usize) -> (Vec<T>, Vec<T>) {
    let a: Vec<T> = vals(rng, n);
    let w: Vec<T> = vals(rng, n);
    let lo = a.iter().zip(&w).map(|(&x, &d)| x - d.abs()).collect();
    let hi = a.iter().zip(&w).map(|(&x, &d)| x + d.abs()).collect();
    (lo, hi)
}

/// Exact `[min, max]` of `[al, ah]·[bl, bh]`.
pub fn prod(al: &Rational, ah: &Rational, bl: &Rational, bh: &Rational) -> (Rational, Rational) {
    let p = [al.clone() * bl, al.clone() * bh, ah.clone() * bl, ah.clone() * bh];
    let mn = p.iter().min().expect("4").clone();
    let mx = p.iter().max().expect("4").clone();
    (mn, mx)
}

/// A random conv layer over a square input: `ci, co ∈ 1..=3`, side in
/// `sides`, kernel 1 or 3, stride 1 or 2, padding 0 or 1, weights from
/// `weights` (zero bias). Returns the layer, its input and output shapes.
pub fn conv_layer(
    rng: &mut SplitMix,
    sides: std::ops::RangeInclusive<usize>,
    weights: impl FnOnce(&mut SplitMix, usize) -> Vec<f64>,
) -> (Conv2d, Shape, Shape) {
    let (ci, co) = (1 + rng.below(3), 1 + rng.below(3));
    let h = sides.start() + rng.below(sides.end() - sides.start() + 1);
    let (k, s, p) = ([1, 3][rng.below(2)], 1 + rng.below(2), rng.below(2));
    let conv = Conv2d {
        weight: weights(rng, co * ci * k * k),
        bias: vec![0.0; co],
        c_out: co,
        kernel: (k, k),
        stride: (s, s),
        pad: (p, p, p, p),
    };
    let ho = (h + 2 * p - k) / s + 1;
    (conv, Shape::new(ci, h, h), Shape::new(co, ho, ho))
}

/// Scatters row `r` of a matrix over the conv output (`g`) through `conv`
/// into the conv input (`out`, `out = g.through_conv(conv, ..)`): calls
/// `f(i, o, None)` for every in-range window column `i` (output neuron
/// `o`), then `f(i, o, Some((t, w)))` for each of its taps, `t` the column
/// of `out` and `w` the weight index.
pub fn conv_scatter(
    conv: &Conv2d,
    g: &Geom,
    out: &Geom,
    r: usize,
    mut f: impl FnMut(usize, usize, Option<(usize, usize)>),
) {
    let (so, si) = (g.shape, out.shape);
    let ((oy, ox), (qy, qx)) = (g.offsets[r], out.offsets[r]);
    for o in 0..so.c {
        for wy in 0..g.win.0 {
            for wx in 0..g.win.1 {
                let (gy, gx) = (oy + wy as i32, ox + wx as i32);
                if gy < 0 || gx < 0 || gy >= so.h as i32 || gx >= so.w as i32 {
                    continue;
                }
                let i = (o * g.win.0 + wy) * g.win.1 + wx;
                let nrn = (o * so.h + gy as usize) * so.w + gx as usize;
                f(i, nrn, None);
                for (w, inp) in conv.taps(si, o, gy as usize, gx as usize) {
                    let (c, hw) = (inp / (si.h * si.w), inp % (si.h * si.w));
                    let (ty, tx) = ((hw / si.w) as i32 - qy, (hw % si.w) as i32 - qx);
                    assert!(
                        ty >= 0 && tx >= 0 && (ty as usize) < out.win.0 && (tx as usize) < out.win.1,
                        "tap outside"
                    );
                    f(i, nrn, Some(((c * out.win.0 + ty as usize) * out.win.1 + tx as usize, w)));
                }
            }
        }
    }
}

/// Column `j` of row `r` to its neuron, `None` for padding.
pub fn placed(g: &Geom, r: usize) -> Vec<Option<usize>> {
    let (s, (wh, ww), (oy, ox)) = (g.shape, g.win, g.offsets[r]);
    let mut v = Vec::with_capacity(g.cols());
    for c in 0..s.c {
        for wy in 0..wh as i32 {
            for wx in 0..ww as i32 {
                let (y, x) = (oy + wy, ox + wx);
                let inside = y >= 0 && x >= 0 && (y as usize) < s.h && (x as usize) < s.w;
                v.push(inside.then(|| (c * s.h + y as usize) * s.w + x as usize));
            }
        }
    }
    v
}

/// A random geometry over `shape`: full, or windows (up to the node's
/// size) at offsets that may reach into padding.
pub fn rand_geom(rng: &mut SplitMix, shape: Shape, rows: usize) -> Geom {
    if rng.below(3) == 0 {
        return Geom::full(shape, rows);
    }
    let win = (1 + rng.below(shape.h), 1 + rng.below(shape.w));
    let off = |rng: &mut SplitMix, n: usize| rng.below(n + 1) as i32 - 1;
    Geom::windowed(shape, win, (0..rows).map(|_| (off(rng, shape.h), off(rng, shape.w))).collect())
}

/// A random shape of up to `max_c` channels and `max_hw` rows and columns.
pub fn rand_shape(rng: &mut SplitMix, max_c: usize, max_hw: usize) -> Shape {
    Shape::new(1 + rng.below(max_c), 1 + rng.below(max_hw), 1 + rng.below(max_hw))
}
