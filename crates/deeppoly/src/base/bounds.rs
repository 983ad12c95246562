//! One box's bounds of every node, in the analysis's float type.

use polycert_interval::Fp;

/// One box's bounds of every node, `(lo, hi)` per node.
pub(crate) type NodeBounds<T> = Vec<(Vec<T>, Vec<T>)>;

/// Node bounds in `f64` (exactly).
pub(crate) fn bounds_f64<T: Fp>(b: NodeBounds<T>) -> Vec<crate::base::analyzer::NodeBounds> {
    let f64s = |v: Vec<T>| v.into_iter().map(|x| x.to_f64_exact()).collect();
    b.into_iter().map(|(l, h)| (f64s(l), f64s(h))).collect()
}
