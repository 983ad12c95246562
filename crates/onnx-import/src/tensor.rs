//! Constant tensors: decoding `TensorProto`s and the small amount of
//! arithmetic that constant folding needs (shapes, broadcasting,
//! transposes, gathers).
//!
//! Every value is kept as an `f64`. Float weights (f32, f16, bf16, f64) are
//! exact in f64; integers are exact up to 2^53, which covers shape values
//! (the `i64::MAX` of open-ended slices rounds, harmlessly, since it is only
//! ever clamped).

use crate::onnx_pb::{TensorProto, tensor_proto::DataLocation, tensor_proto::DataType};

/// A constant's element type, as far as folding needs it: arithmetic on
/// constants is computed in it, as the runtime does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// float64.
    Float,
    /// float32: each folded operation is rounded to float32.
    Float32,
    /// float16 or bfloat16 (held, not folded).
    Half,
    Int,
}

impl Kind {
    /// The element type of an operation's result on `a` and `b`.
    pub fn of_pair(a: Kind, b: Kind) -> Kind {
        use Kind::*;
        match (a, b) {
            (Int, Int) => Int,
            (Half, _) | (_, Half) => Half,
            (Float32, _) | (_, Float32) => Float32,
            _ => Float,
        }
    }

    /// `v` rounded to this type (integers and float64 unchanged).
    pub fn round(self, v: f64) -> f64 {
        if self == Kind::Float32 { v as f32 as f64 } else { v }
    }
}

/// A decoded constant tensor, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub dims: Vec<usize>,
    pub data: Vec<f64>,
    pub kind: Kind,
}

/// Largest constant that folding may create.
const MAX_FOLD: usize = 1 << 28;

/// Number of elements of a shape (1 for a scalar), saturating: shapes come
/// from untrusted files, and a saturated count never matches real data.
pub fn numel(dims: &[usize]) -> usize {
    dims.iter().fold(1usize, |a, &d| a.saturating_mul(d))
}

/// Row-major strides of a shape.
pub fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// Normalises a possibly negative axis for a tensor of rank `rank`.
pub fn norm_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r {
        return Err(format!("axis {axis} out of range for rank {rank}"));
    }
    Ok(a as usize)
}

impl Tensor {
    pub fn new(dims: Vec<usize>, data: Vec<f64>, kind: Kind) -> Result<Self, String> {
        if numel(&dims) != data.len() {
            return Err(format!("{} values do not fill shape {dims:?}", data.len()));
        }
        Ok(Self { dims, data, kind })
    }

    pub fn scalar(v: f64, kind: Kind) -> Self {
        Self { dims: vec![], data: vec![v], kind }
    }

    pub fn ints(v: &[i64]) -> Self {
        Self { dims: vec![v.len()], data: v.iter().map(|&x| x as f64).collect(), kind: Kind::Int }
    }

    /// The values as integers (shape inputs, indices, axes).
    pub fn as_i64(&self) -> Result<Vec<i64>, String> {
        self.data
            .iter()
            .map(|&v| {
                if v.fract() == 0.0 && v.abs() <= 9.3e18 {
                    Ok(v as i64)
                } else {
                    Err(format!("expected integer values, found {v}"))
                }
            })
            .collect()
    }

    /// Fails on the first NaN or infinite value.
    pub fn check_finite(&self, what: &str) -> Result<(), String> {
        match self.data.iter().position(|v| !v.is_finite()) {
            Some(i) => Err(format!("{what}: value [{i}] is {} (weights must be finite)", self.data[i])),
            None => Ok(()),
        }
    }

    /// Same data under new dims (the element count must match).
    pub fn reshaped(mut self, dims: Vec<usize>) -> Result<Self, String> {
        if numel(&dims) != self.data.len() {
            return Err(format!("cannot reshape {:?} to {dims:?}", self.dims));
        }
        self.dims = dims;
        Ok(self)
    }

    /// Broadcasts to `dims` (numpy rules, `dims` must be the result shape).
    pub fn broadcast_to(&self, dims: &[usize]) -> Result<Vec<f64>, String> {
        if self.dims.len() > dims.len() {
            return Err(format!("cannot broadcast {:?} to {dims:?}", self.dims));
        }
        let off = dims.len() - self.dims.len();
        let mut src_strides = vec![0; dims.len()];
        let own = strides(&self.dims);
        for (i, &d) in self.dims.iter().enumerate() {
            if d == dims[off + i] {
                src_strides[off + i] = own[i];
            } else if d != 1 {
                return Err(format!("cannot broadcast {:?} to {dims:?}", self.dims));
            }
        }
        let n = numel(dims);
        if n > MAX_FOLD {
            return Err(format!("broadcasting {:?} to {dims:?} makes too large a constant", self.dims));
        }
        let out_strides = strides(dims);
        let mut out = Vec::with_capacity(n);
        for flat in 0..n {
            let mut src = 0;
            for (k, (&os, &ss)) in out_strides.iter().zip(&src_strides).enumerate() {
                src += (flat / os % dims[k]) * ss;
            }
            out.push(self.data[src]);
        }
        Ok(out)
    }

    /// Permutes the axes (`perm[i]` is the input axis of output axis `i`).
    pub fn transpose(&self, perm: &[usize]) -> Result<Self, String> {
        check_perm(perm, self.dims.len())?;
        let dims: Vec<usize> = perm.iter().map(|&p| self.dims[p]).collect();
        let in_strides = strides(&self.dims);
        let out_strides = strides(&dims);
        let data = (0..self.data.len())
            .map(|flat| {
                let mut src = 0;
                for (k, &p) in perm.iter().enumerate() {
                    src += (flat / out_strides[k] % dims[k]) * in_strides[p];
                }
                self.data[src]
            })
            .collect();
        Ok(Self { dims, data, kind: self.kind })
    }

    /// Takes `indices` along `axis` (ONNX Gather).
    pub fn gather(&self, indices: &Tensor, axis: usize) -> Result<Self, String> {
        let d = *self.dims.get(axis).ok_or_else(|| format!("axis {axis} out of range for {:?}", self.dims))?;
        let idx: Vec<usize> = indices
            .as_i64()?
            .into_iter()
            .map(|i| {
                let j = if i < 0 { i + d as i64 } else { i };
                if j < 0 || j >= d as i64 {
                    Err(format!("index {i} out of range for axis of size {d}"))
                } else {
                    Ok(j as usize)
                }
            })
            .collect::<Result<_, _>>()?;
        let outer: usize = self.dims[..axis].iter().product();
        let inner: usize = self.dims[axis + 1..].iter().product();
        let mut data = Vec::with_capacity(outer * idx.len() * inner);
        for o in 0..outer {
            for &j in &idx {
                let start = (o * d + j) * inner;
                data.extend_from_slice(&self.data[start..start + inner]);
            }
        }
        let mut dims = self.dims[..axis].to_vec();
        dims.extend_from_slice(&indices.dims);
        dims.extend_from_slice(&self.dims[axis + 1..]);
        Tensor::new(dims, data, self.kind)
    }

    /// Concatenates along `axis`.
    pub fn concat(parts: &[Tensor], axis: usize) -> Result<Self, String> {
        let first = parts.first().ok_or("nothing to concatenate")?;
        let rank = first.dims.len();
        if axis >= rank {
            return Err(format!("axis {axis} out of range for rank {rank}"));
        }
        for p in parts {
            let same = p.dims.len() == rank && (0..rank).all(|k| k == axis || p.dims[k] == first.dims[k]);
            if !same {
                return Err(format!("cannot concatenate {:?} with {:?} on axis {axis}", first.dims, p.dims));
            }
        }
        let outer: usize = first.dims[..axis].iter().product();
        let mut data = Vec::new();
        for o in 0..outer {
            for p in parts {
                let chunk = p.dims[axis..].iter().product::<usize>();
                data.extend_from_slice(&p.data[o * chunk..(o + 1) * chunk]);
            }
        }
        let mut dims = first.dims.clone();
        dims[axis] = parts.iter().map(|p| p.dims[axis]).sum();
        let kind = parts.iter().map(|p| p.kind).reduce(Kind::of_pair).unwrap_or(Kind::Float);
        Tensor::new(dims, data, kind)
    }
}

/// Checks that `perm` is a permutation of `0..rank`.
pub fn check_perm(perm: &[usize], rank: usize) -> Result<(), String> {
    let mut seen = vec![false; rank];
    if perm.len() != rank {
        return Err(format!("perm {perm:?} does not match rank {rank}"));
    }
    for &p in perm {
        if p >= rank || std::mem::replace(&mut seen[p], true) {
            return Err(format!("perm {perm:?} is not a permutation of 0..{rank}"));
        }
    }
    Ok(())
}

/// Numpy broadcast of two shapes.
pub fn broadcast_dims(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let r = a.len().max(b.len());
    let get = |s: &[usize], i: usize| if i + s.len() >= r { s[i + s.len() - r] } else { 1 };
    (0..r)
        .map(|i| match (get(a, i), get(b, i)) {
            (x, y) if x == y => Ok(x),
            (1, y) => Ok(y),
            (x, 1) => Ok(x),
            _ => Err(format!("shapes {a:?} and {b:?} do not broadcast")),
        })
        .collect()
}

/// Decodes an initializer or a Constant's tensor.
pub fn decode(t: &TensorProto) -> Result<Tensor, String> {
    let name = if t.name.is_empty() { "<unnamed>" } else { t.name.as_str() };
    decode_inner(t).map_err(|e| format!("tensor '{name}': {e}"))
}

fn decode_inner(t: &TensorProto) -> Result<Tensor, String> {
    if t.data_location == DataLocation::External as i32 || !t.external_data.is_empty() {
        return Err("stored as external data, which is not supported (embed the weights in the .onnx file)".into());
    }
    if t.segment.is_some() {
        return Err("segmented tensors are not supported".into());
    }
    let dims: Vec<usize> = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}")))
        .collect::<Result<_, _>>()?;
    let n = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or("dimensions overflow")?;
    let dt = DataType::try_from(t.data_type).map_err(|_| format!("unknown data type {}", t.data_type))?;
    let raw = RawData { bytes: &t.raw_data, n, dims: &dims, dt };
    let (data, kind) = decode_values(t, &raw)?;
    if data.len() != n {
        return Err(format!("has {} values, shape {dims:?} needs {n}", data.len()));
    }
    Ok(Tensor { dims, data, kind })
}

/// A tensor's `raw_data`: `n` little-endian values of type `dt`.
struct RawData<'a> {
    bytes: &'a [u8],
    n: usize,
    dims: &'a [usize],
    dt: DataType,
}

impl RawData<'_> {
    /// The values' `width` bytes each, zero-extended to 8; the byte count
    /// must match the shape.
    fn fixed(&self, width: usize) -> Result<Vec<[u8; 8]>, String> {
        let (raw, n, dims) = (self.bytes, self.n, self.dims);
        if Some(raw.len()) != n.checked_mul(width) {
            return Err(format!(
                "raw_data has {} bytes, shape {dims:?} of {} needs {n}x{width}",
                raw.len(),
                self.dt.as_str_name()
            ));
        }
        Ok(raw
            .chunks_exact(width)
            .map(|c| {
                let mut b = [0u8; 8];
                b[..width].copy_from_slice(c);
                b
            })
            .collect())
    }
}

/// The values and their kind, from `raw_data` when present, else from the
/// type's own field.
fn decode_values(t: &TensorProto, raw: &RawData) -> Result<(Vec<f64>, Kind), String> {
    let (dt, use_raw) = (raw.dt, !raw.bytes.is_empty());
    Ok(match dt {
        DataType::Float if use_raw => {
            (raw.fixed(4)?.iter().map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64).collect(), Kind::Float32)
        }
        DataType::Float => (t.float_data.iter().map(|&v| v as f64).collect(), Kind::Float32),
        DataType::Double if use_raw => (raw.fixed(8)?.iter().map(|b| f64::from_le_bytes(*b)).collect(), Kind::Float),
        DataType::Double => (t.double_data.clone(), Kind::Float),
        DataType::Float16 | DataType::Bfloat16 => (half_values(t, raw)?, Kind::Half),
        DataType::Int64 if use_raw => {
            (raw.fixed(8)?.iter().map(|b| i64::from_le_bytes(*b) as f64).collect(), Kind::Int)
        }
        DataType::Int64 => (t.int64_data.iter().map(|&v| v as f64).collect(), Kind::Int),
        DataType::Int32 | DataType::Int16 | DataType::Int8 | DataType::Uint16 | DataType::Uint8 | DataType::Bool
            if use_raw =>
        {
            (raw_small_ints(raw)?, Kind::Int)
        }
        DataType::Int32 | DataType::Int16 | DataType::Int8 | DataType::Uint16 | DataType::Uint8 | DataType::Bool => {
            (t.int32_data.iter().map(|&v| v as f64).collect(), Kind::Int)
        }
        DataType::Uint32 | DataType::Uint64 if use_raw => {
            let w = if dt == DataType::Uint32 { 4 } else { 8 };
            (raw.fixed(w)?.iter().map(|b| u64::from_le_bytes(*b) as f64).collect(), Kind::Int)
        }
        DataType::Uint32 | DataType::Uint64 => (t.uint64_data.iter().map(|&v| v as f64).collect(), Kind::Int),
        other => return Err(format!("data type {} is not supported", other.as_str_name())),
    })
}

/// float16 or bfloat16 values (raw, or one per `int32_data` entry).
fn half_values(t: &TensorProto, raw: &RawData) -> Result<Vec<f64>, String> {
    let bits: Vec<u16> = if !raw.bytes.is_empty() {
        raw.fixed(2)?.iter().map(|b| u16::from_le_bytes([b[0], b[1]])).collect()
    } else {
        t.int32_data.iter().map(|&v| v as u16).collect()
    };
    let f = if raw.dt == DataType::Float16 { f16_to_f64 } else { |b: u16| f32::from_bits((b as u32) << 16) as f64 };
    Ok(bits.into_iter().map(f).collect())
}

/// Raw integers of at most 32 bits (and bools), sign-extended when signed.
fn raw_small_ints(raw: &RawData) -> Result<Vec<f64>, String> {
    let (w, signed) = match raw.dt {
        DataType::Int32 => (4, true),
        DataType::Int16 => (2, true),
        DataType::Int8 => (1, true),
        DataType::Uint16 => (2, false),
        _ => (1, false),
    };
    Ok(raw
        .fixed(w)?
        .iter()
        .map(|b| {
            let u = u64::from_le_bytes(*b);
            if signed {
                let shift = 64 - 8 * w as u32;
                (((u << shift) as i64) >> shift) as f64
            } else {
                u as f64
            }
        })
        .collect())
}

/// IEEE half precision to f64 (exact).
fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let frac = (h & 0x3ff) as f64;
    let mag = match exp {
        0 => frac * 2f64.powi(-24),
        31 if frac == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    };
    sign * mag
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_transpose_gather_concat() {
        let t = Tensor::new(vec![2, 1], vec![1.0, 2.0], Kind::Float).unwrap();
        assert_eq!(t.broadcast_to(&[2, 3]).unwrap(), vec![1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
        assert!(t.broadcast_to(&[3, 3]).is_err());
        let m = Tensor::new(vec![2, 3], (0..6).map(f64::from).collect(), Kind::Float).unwrap();
        let tt = m.transpose(&[1, 0]).unwrap();
        assert_eq!(tt.dims, vec![3, 2]);
        assert_eq!(tt.data, vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
        let g = m.gather(&Tensor::scalar(-1.0, Kind::Int), 1).unwrap();
        assert_eq!((g.dims.clone(), g.data.clone()), (vec![2], vec![2.0, 5.0]));
        let c = Tensor::concat(&[Tensor::ints(&[1]), Tensor::ints(&[-1, 4])], 0).unwrap();
        assert_eq!(c.as_i64().unwrap(), vec![1, -1, 4]);
        assert_eq!(broadcast_dims(&[1, 3, 1, 1], &[3, 4, 5]).unwrap(), vec![1, 3, 4, 5]);
        assert_eq!(f16_to_f64(0x3c00), 1.0);
        assert_eq!(f16_to_f64(0xc000), -2.0);
        assert_eq!(norm_axis(-1, 4).unwrap(), 3);
        assert!(norm_axis(4, 4).is_err());
    }
}
