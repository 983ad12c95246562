//! VNNLIB 2.0 (the VNNLIB-Standard grammar): `(vnnlib-version <2.x>)`, then
//! `(declare-network N (declare-input X Real [d…]) (declare-output Y Real [d…]))`
//! and assertions over tensor elements `X[i,j,…]` (row-major, so element
//! `X[i,j]` is flat input `i·d₁ + j`, the `X_k` of VNNLIB 1.0). One network
//! with one input and one output tensor is supported; hidden tensors,
//! several networks and initialized inputs are refused by name.

use super::sexpr::{Pos, Sx};
use super::{Parser, Var, VnnlibError, head};

/// A declared tensor: its name, kind (0 input, 1 output) and shape.
#[derive(Debug, Clone)]
pub(super) struct Tensor {
    name: String,
    kind: usize,
    shape: Vec<usize>,
}

/// Element types read as reals.
const FLOAT_TYPES: [&str; 9] = ["Real", "real", "float", "float16", "float32", "float64", "double", "F32", "F64"];
const INT_TYPES: [&str; 8] = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"];

/// A network a VNNLIB 2.0 text declares: its name, and the network it is
/// declared `equal-to` or `isomorphic-to` (the relation and that name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredNetwork {
    pub name: String,
    pub like: Option<(String, String)>,
}

/// The networks `text` declares, in order (none for VNNLIB 1.0, or for text
/// that does not parse: the property's own parse reports that).
pub fn network_names(text: &str) -> Vec<DeclaredNetwork> {
    let Ok(forms) = super::sexpr::parse(text) else { return Vec::new() };
    let mut out = Vec::new();
    for f in &forms {
        let Sx::List(items, _) = f else { continue };
        if head(items) != Some("declare-network") {
            continue;
        }
        let Some((name, _)) = items.get(1).and_then(atom) else { continue };
        let like = items[2..].iter().find_map(|d| match d {
            Sx::List(decl, _) => match (head(decl), decl.get(1).and_then(atom)) {
                (Some(r @ ("equal-to" | "isomorphic-to")), Some((other, _))) => {
                    Some((r.to_string(), other.to_string()))
                }
                _ => None,
            },
            Sx::Atom(..) => None,
        });
        out.push(DeclaredNetwork { name: name.to_string(), like });
    }
    out
}

/// `(vnnlib-version <M.m>)`: `Some` when the form is a version statement.
pub(super) fn version(p: &Parser, form: &Sx) -> Option<Result<(u32, u32), VnnlibError>> {
    let Sx::List(items, pos) = form else { return None };
    if head(items) != Some("vnnlib-version") {
        return None;
    }
    let parsed = match &items[1..] {
        [Sx::Atom(v, _)] => v
            .strip_prefix('<')
            .and_then(|v| v.strip_suffix('>'))
            .and_then(|v| v.split_once('.'))
            .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?))),
        _ => None,
    };
    Some(match parsed {
        Some((2, m)) => Ok((2, m)),
        Some((a, b)) => Err(p.err(*pos, format!("VNNLIB version {a}.{b} is not supported (1.0 and 2.x are)"))),
        None => Err(p.err(*pos, "expected (vnnlib-version <MAJOR.MINOR>)")),
    })
}

fn atom(sx: &Sx) -> Option<(&str, Pos)> {
    match sx {
        Sx::Atom(s, p) => Some((s, *p)),
        Sx::List(..) => None,
    }
}

fn is_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_alphabetic()) && c.all(|x| x.is_alphanumeric() || x == '_')
}

/// `[]`, `[3]`, `[1,28,28]`.
fn shape(p: &Parser, s: &str, pos: Pos) -> Result<Vec<usize>, VnnlibError> {
    let inner = s.strip_prefix('[').and_then(|s| s.strip_suffix(']'));
    let Some(inner) = inner else {
        return Err(p.err(pos, format!("expected a shape like [3] or [1,28,28], found '{s}'")));
    };
    if inner.is_empty() {
        return Ok(vec![]);
    }
    inner
        .split(',')
        .map(|d| d.parse::<usize>().map_err(|_| p.err(pos, format!("bad dimension '{d}' in shape '{s}'"))))
        .collect()
}

impl Parser<'_> {
    /// `(declare-network NAME (declare-input …) (declare-output …))`.
    pub(super) fn declare_network(&mut self, items: &[Sx], pos: Pos) -> Result<(), VnnlibError> {
        if !self.tensors.is_empty() {
            return Err(self.err(pos, "several networks are not supported (one network per query)"));
        }
        let Some((name, npos)) = items.get(1).and_then(atom) else {
            return Err(self.err(pos, "expected (declare-network NAME ...)"));
        };
        if !is_name(name) {
            return Err(self.err(npos, format!("bad network name '{name}'")));
        }
        let mut tensors = Vec::new();
        for d in &items[2..] {
            let Sx::List(decl, dpos) = d else { return Err(self.err(d.pos(), "expected a declaration")) };
            let kind = match head(decl) {
                Some("declare-input") => 0,
                Some("declare-output") => 1,
                Some(k @ ("declare-hidden" | "equal-to" | "isomorphic-to")) => {
                    return Err(
                        self.err(*dpos, format!("'{k}' is not supported (one network, inputs and outputs only)"))
                    );
                }
                Some(k) => return Err(self.err(*dpos, format!("unknown declaration '{k}' in a network"))),
                None => return Err(self.err(*dpos, "expected a declaration")),
            };
            let (Some((t, tpos)), Some((ty, typos)), Some((sh, spos))) =
                (decl.get(1).and_then(atom), decl.get(2).and_then(atom), decl.get(3).and_then(atom))
            else {
                return Err(self.err(*dpos, "expected (declare-input|declare-output NAME TYPE [SHAPE])"));
            };
            if !is_name(t) || self.tensors.iter().chain(&tensors).any(|x: &Tensor| x.name == t) || t == name {
                return Err(self.err(tpos, format!("bad or repeated tensor name '{t}'")));
            }
            // An integer output can only be a constant the importer folded
            // (every op that makes integers of network values is refused),
            // which polycert computes exactly.
            let readable = FLOAT_TYPES.contains(&ty) || (kind == 1 && INT_TYPES.contains(&ty));
            if !readable {
                let allowed = if kind == 1 { "Real, a float or an integer type" } else { "Real or a float type" };
                return Err(self.err(typos, format!("element type '{ty}' is not supported ({allowed})")));
            }
            if let Some(opt) = decl.get(4) {
                let what = atom(opt).map_or("an option", |a| a.0);
                return Err(self.err(opt.pos(), format!("'{what}' is not supported on a tensor declaration")));
            }
            tensors.push(Tensor { name: t.to_string(), kind, shape: shape(self, sh, spos)? });
        }
        for (kind, what) in [(0, "input"), (1, "output")] {
            let of_kind: Vec<&Tensor> = tensors.iter().filter(|t| t.kind == kind).collect();
            let [t] = of_kind[..] else {
                return Err(self.err(pos, format!("expected exactly one {what} tensor, found {}", of_kind.len())));
            };
            let n: usize = t.shape.iter().product();
            if n != self.n[kind] {
                return Err(self.err(
                    pos,
                    format!("{what} '{}' has shape {:?} ({n} values), the model has {}", t.name, t.shape, self.n[kind]),
                ));
            }
            self.declared[kind].iter_mut().for_each(|d| *d = true);
        }
        self.tensors = tensors;
        Ok(())
    }

    /// `NAME` (a scalar) or `NAME[i,j,…]` to a flat variable; `None` when
    /// no tensor has that name.
    pub(super) fn tensor_element(&self, s: &str, pos: Pos) -> Result<Option<Var>, VnnlibError> {
        let (name, idx) = match s.split_once('[') {
            Some((n, rest)) => (n, Some(rest)),
            None => (s, None),
        };
        let Some(t) = self.tensors.iter().find(|t| t.name == name) else { return Ok(None) };
        let idx: Vec<usize> = match idx {
            None => vec![],
            Some(rest) => {
                let inner = rest.strip_suffix(']').ok_or_else(|| self.err(pos, format!("unclosed index in '{s}'")))?;
                inner
                    .split(',')
                    .map(|i| i.parse().map_err(|_| self.err(pos, format!("bad index '{i}' in '{s}'"))))
                    .collect::<Result<_, _>>()?
            }
        };
        if idx.len() != t.shape.len() || idx.iter().zip(&t.shape).any(|(i, d)| i >= d) {
            return Err(self.err(pos, format!("'{s}' does not index '{}' of shape {:?}", t.name, t.shape)));
        }
        let flat = idx.iter().zip(&t.shape).fold(0, |acc, (i, d)| acc * d + i);
        Ok(Some((t.kind, flat)))
    }
}
