//! Dependence-set geometry: which neurons of a node a row's expression
//! touches. A row over a spatial node covers a dense `C × wh × ww` cuboid
//! (its dependence set) at a per-row offset; a full window at offset 0 is
//! the dense case.

use crate::base::ir::{Conv2d, Shape};

/// Window shape and per-row offsets of an expression matrix over a node.
#[derive(Debug, Clone, PartialEq)]
pub struct Geom {
    /// Shape of the node the expression is over.
    pub shape: Shape,
    /// Window size `(wh, ww)`; `(shape.h, shape.w)` for a full window.
    pub win: (usize, usize),
    /// Top-left corner of each row's window in node coordinates. May be
    /// negative or reach past the node: such positions are padding and
    /// always hold zero coefficients.
    pub offsets: Vec<(i32, i32)>,
    /// The property (batch slot) each row belongs to: a row is a
    /// (property, neuron) pair. Per-neuron tables of a batch hold
    /// `batch × shape.numel()` values, property-major; row `r` reads slot
    /// `props[r]` ([`Geom::table_base`]).
    pub props: Vec<u32>,
}

impl Geom {
    /// The dense case: every row covers the whole node.
    pub fn full(shape: Shape, rows: usize) -> Self {
        Self { shape, win: (shape.h, shape.w), offsets: vec![(0, 0); rows], props: vec![0; rows] }
    }

    /// A window at per-row offsets, every row in batch slot 0.
    pub fn windowed(shape: Shape, win: (usize, usize), offsets: Vec<(i32, i32)>) -> Self {
        let props = vec![0; offsets.len()];
        Self { shape, win, offsets, props }
    }

    /// The same rows (and batch slots) over the whole of a node of `shape`.
    pub fn full_over(&self, shape: Shape) -> Self {
        Self { shape, win: (shape.h, shape.w), offsets: vec![(0, 0); self.rows()], props: self.props.clone() }
    }

    /// Assigns the rows' batch slots (one per row).
    pub fn with_props(mut self, props: Vec<u32>) -> Self {
        assert_eq!(props.len(), self.rows(), "one batch slot per row");
        self.props = props;
        self
    }

    /// Start of row `r`'s slot in a per-(property, neuron) table.
    #[inline]
    pub fn table_base(&self, r: usize) -> usize {
        self.props[r] as usize * self.shape.numel()
    }

    /// Values a per-(property, neuron) table over this node needs for every
    /// slot the rows name.
    pub fn table_len(&self) -> usize {
        self.props.iter().max().map_or(0, |&p| p as usize + 1) * self.shape.numel()
    }

    /// An error unless every table length in `tables` covers the rows'
    /// slots ([`Geom::table_len`]); `what` names the operation.
    pub fn check_tables(&self, what: &str, tables: &[usize]) -> Result<(), String> {
        let need = self.table_len();
        match tables.iter().find(|&&len| len < need) {
            Some(len) => Err(format!("{what}: table of {len} values, rows need {need}")),
            None => Ok(()),
        }
    }

    /// Whether every row is in batch slot 0 (a single property).
    pub fn single_slot(&self) -> bool {
        self.props.iter().all(|&p| p == 0)
    }

    /// The zeroth dependence set: each row is one neuron of the node.
    pub fn unit(shape: Shape, neurons: &[usize]) -> Self {
        let offsets = neurons
            .iter()
            .map(|&i| {
                let hw = i % (shape.h * shape.w);
                ((hw / shape.w) as i32, (hw % shape.w) as i32)
            })
            .collect();
        Self::windowed(shape, (1, 1), offsets)
    }

    pub fn rows(&self) -> usize {
        self.offsets.len()
    }

    /// Columns per row: `C · wh · ww`.
    pub fn cols(&self) -> usize {
        self.shape.c * self.win.0 * self.win.1
    }

    pub fn is_full(&self) -> bool {
        self.win == (self.shape.h, self.shape.w) && self.offsets.iter().all(|&o| o == (0, 0))
    }

    /// Keeps the rows listed in `keep`.
    pub fn select(&self, keep: &[u32]) -> Self {
        Self {
            shape: self.shape,
            win: self.win,
            offsets: keep.iter().map(|&r| self.offsets[r as usize]).collect(),
            props: keep.iter().map(|&r| self.props[r as usize]).collect(),
        }
    }

    /// Same rows and window over another node of equal layout.
    pub fn relabel(&self, shape: Shape) -> Self {
        Self { shape, win: self.win, offsets: self.offsets.clone(), props: self.props.clone() }
    }

    /// Window through a conv (or pooling) step, eq. (5) and (7)-(8) of the
    /// paper with padding: `W' = (W − 1)·s + f`, `o' = o·s − p`. Switches to
    /// the full window once the window is as large as the input node.
    pub fn through_window(
        &self,
        input: Shape,
        kernel: (usize, usize),
        stride: (usize, usize),
        pad: (usize, usize),
    ) -> Self {
        let wh = (self.win.0 - 1) * stride.0 + kernel.0;
        let ww = (self.win.1 - 1) * stride.1 + kernel.1;
        // A window at least as large as the node holds all of each row's
        // in-range positions when stored as the full node: go dense.
        if wh >= input.h && ww >= input.w {
            return self.full_over(input);
        }
        let offsets = self
            .offsets
            .iter()
            .map(|&(y, x)| (y * stride.0 as i32 - pad.0 as i32, x * stride.1 as i32 - pad.1 as i32))
            .collect();
        Self { shape: input, win: (wh, ww), offsets, props: self.props.clone() }
    }

    /// Geometry after backsubstitution through `conv` into a node of shape `input`.
    pub fn through_conv(&self, conv: &Conv2d, input: Shape) -> Self {
        self.through_window(input, conv.kernel, conv.stride, (conv.pad.0, conv.pad.1))
    }

    /// Smallest common window containing both (for the residual merge), if
    /// the offset difference is the same for every row. Both describe the
    /// same rows (and batch slots).
    pub fn union(&self, other: &Geom) -> Option<Geom> {
        debug_assert_eq!(self.shape, other.shape);
        debug_assert_eq!(self.props, other.props);
        if self.is_full() && other.is_full() {
            return Some(self.clone());
        }
        let d0 = (other.offsets.first()?.0 - self.offsets[0].0, other.offsets[0].1 - self.offsets[0].1);
        let uniform = self.offsets.iter().zip(&other.offsets).all(|(a, b)| (b.0 - a.0, b.1 - a.1) == d0);
        if !uniform {
            return None;
        }
        let top = d0.0.min(0);
        let left = d0.1.min(0);
        let bottom = (self.win.0 as i32).max(d0.0 + other.win.0 as i32);
        let right = (self.win.1 as i32).max(d0.1 + other.win.1 as i32);
        let win = ((bottom - top) as usize, (right - left) as usize);
        if win.0 >= self.shape.h && win.1 >= self.shape.w {
            return Some(self.full_over(self.shape));
        }
        let offsets = self.offsets.iter().map(|&(y, x)| (y + top, x + left)).collect();
        Some(Geom { shape: self.shape, win, offsets, props: self.props.clone() })
    }

    /// Bytes one row takes with `elem` bytes per coefficient (all planes).
    pub fn row_bytes(&self, elem: usize) -> usize {
        elem * self.cols()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_recurrence_matches_the_paper() {
        // Fig. 3: a 3x3 then a 2x2 filter, stride 1, no padding.
        let g = Geom::unit(Shape::new(4, 8, 8), &[8 + 2]); // (h=1, w=2)
        let g1 = g.through_window(Shape::new(4, 10, 10), (3, 3), (1, 1), (0, 0));
        assert_eq!((g1.win, g1.offsets[0]), ((3, 3), (1, 2)));
        let g2 = g1.through_window(Shape::new(4, 11, 11), (2, 2), (1, 1), (0, 0));
        assert_eq!((g2.win, g2.offsets[0]), ((4, 4), (1, 2)));
        // Stride 2 with padding 1: W = (4-1)*2+3 = 9, o = 1*2-1.
        let g3 = g2.through_window(Shape::new(2, 23, 23), (3, 3), (2, 2), (1, 1));
        assert_eq!((g3.win, g3.offsets[0]), ((9, 9), (1, 3)));
        // Covering the whole layer switches to dense.
        let g4 = g3.through_window(Shape::new(2, 9, 9), (3, 3), (1, 1), (1, 1));
        assert!(g4.is_full());
    }

    #[test]
    fn union_of_nested_windows() {
        let s = Shape::new(1, 16, 16);
        let a = Geom::windowed(s, (5, 5), vec![(2, 3), (4, 4)]);
        let b = Geom::windowed(s, (3, 3), vec![(3, 4), (5, 5)]);
        let u = a.union(&b).unwrap();
        assert_eq!((u.win, u.offsets.clone()), ((5, 5), vec![(2, 3), (4, 4)]));
        let c = Geom::windowed(s, (3, 3), vec![(3, 4), (9, 9)]);
        assert!(a.union(&c).is_none());
    }
}
