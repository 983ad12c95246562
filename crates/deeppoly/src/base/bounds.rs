//! One box's bounds of every node, in the analysis's float type.

use polycert_interval::Fp;

/// One node's lower and upper bounds, per value.
#[derive(Debug, Clone, PartialEq)]
pub struct LoHi<T> {
    pub lo: Vec<T>,
    pub hi: Vec<T>,
}

/// One box's bounds of every node.
pub(crate) type NodeBounds<T> = Vec<LoHi<T>>;

/// Node bounds in `f64` (exactly).
pub(crate) fn bounds_f64<T: Fp>(b: NodeBounds<T>) -> NodeBounds<f64> {
    let f64s = |v: Vec<T>| v.into_iter().map(|x| x.to_f64_exact()).collect();
    b.into_iter().map(|LoHi { lo, hi }| LoHi { lo: f64s(lo), hi: f64s(hi) }).collect()
}
