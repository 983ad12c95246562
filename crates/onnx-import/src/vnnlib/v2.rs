//! VNNLIB 2.0 (the VNNLIB-Standard grammar): `(vnnlib-version <2.x>)`, then
//! `(declare-network N (declare-input X Real [d…]) (declare-output Y Real [d…]))`
//! and assertions over tensor elements `X[i,j,…]` (row-major, so element
//! `X[i,j]` is flat input `i·d₁ + j`, the `X_k` of VNNLIB 1.0).
//!
//! A query's variables are laid out as one network's ([`QueryLayout`]): the
//! inputs of every declared network, in declaration order, are one input
//! vector; their outputs and hidden tensors (`declare-hidden`), in
//! declaration order, one output vector, followed by copies of the input
//! elements that a constraint compares with outputs or with each other, and
//! by the products of two variables that terms take (`(* X[0] Y[1])`). The
//! importer composes the networks to match (`compose.rs`). Initialized
//! inputs are refused.

use super::sexpr::{Pos, Sx};
use super::{Lin, Parser, Q, Var, VnnlibError, head};
use num_traits::Zero;
use std::collections::BTreeMap;
use std::collections::BTreeSet;

/// What a declared tensor is to its network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Input,
    Output,
    /// An intermediate tensor, by its name in the ONNX graph.
    Hidden(String),
}

/// A declared tensor: its name, role, shape, and where its first element
/// sits in the query's input vector (inputs) or output vector (the rest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorDecl {
    pub name: String,
    pub role: Role,
    pub shape: Vec<usize>,
    pub offset: usize,
}

impl TensorDecl {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    fn kind(&self) -> usize {
        usize::from(self.role != Role::Input)
    }
}

/// A declared network and its tensors, in declaration order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkDecl {
    pub name: String,
    /// `equal-to` or `isomorphic-to`, and the network named.
    pub like: Option<(String, String)>,
    pub tensors: Vec<TensorDecl>,
    pos: Pos,
}

/// A variable of a query: `(0, i)` input `i`, `(1, j)` output `j` (before
/// the mirrors and products).
pub type QueryVar = (usize, usize);

/// A query's networks and how its variables are laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryLayout {
    pub networks: Vec<NetworkDecl>,
    /// Input elements (flat, in the input vector) copied to the end of the
    /// output vector, in this order: a constraint compares them with outputs.
    pub mirrors: Vec<usize>,
    /// Products of two variables, after the mirrors, in this order.
    pub products: Vec<(QueryVar, QueryVar)>,
    pub n_inputs: usize,
    pub n_outputs: usize,
}

impl QueryLayout {
    /// One network with one input and one output tensor, and no constraint
    /// that mixes them: the model imports as it is.
    pub fn is_simple(&self) -> bool {
        let [n] = &self.networks[..] else { return false };
        let count = |r: &Role| n.tensors.iter().filter(|t| &t.role == r).count();
        self.mirrors.is_empty()
            && self.products.is_empty()
            && n.tensors.len() == 2
            && count(&Role::Input) == 1
            && count(&Role::Output) == 1
    }

    fn tensors(&self) -> impl Iterator<Item = &TensorDecl> {
        self.networks.iter().flat_map(|n| &n.tensors)
    }
}

/// Reads the declarations of a VNNLIB 2.0 text (none for VNNLIB 1.0):
/// the layout its variables take. `file` names it in messages.
pub fn query_layout(text: &str, file: &str) -> Result<Option<QueryLayout>, VnnlibError> {
    let mut p = Parser::new(file, 0, 0);
    let forms = super::sexpr::parse(text).map_err(|(pos, msg)| p.err(pos, msg))?;
    match forms.first().and_then(|f| version(&p, f)) {
        Some(v) => v?,
        None => return Ok(None),
    };
    p.v2 = true;
    layout(&mut p, &forms).map(Some)
}

/// The layout of `forms`' declarations, set as `p`'s tensors.
pub(super) fn layout(p: &mut Parser, forms: &[Sx]) -> Result<QueryLayout, VnnlibError> {
    let mut networks: Vec<NetworkDecl> = Vec::new();
    for f in forms {
        if let Sx::List(items, pos) = f
            && head(items) == Some("declare-network")
        {
            let n = p.declare_network(items, *pos, &networks)?;
            networks.push(n);
        }
    }
    if networks.is_empty() {
        return Err(p.semantic("no (declare-network ...) statement".into()));
    }
    let (mut n_in, mut n_out) = (0usize, 0usize);
    for t in networks.iter_mut().flat_map(|n| &mut n.tensors) {
        let at = if t.role == Role::Input { &mut n_in } else { &mut n_out };
        t.offset = *at;
        *at = at.saturating_add(t.numel());
    }
    p.layout =
        Some(QueryLayout { networks, mirrors: Vec::new(), products: Vec::new(), n_inputs: n_in, n_outputs: n_out });
    let (mut mixed, mut products) = (BTreeSet::new(), BTreeSet::new());
    for f in forms {
        if let Sx::List(items, _) = f
            && head(items) == Some("assert")
        {
            items.iter().skip(1).for_each(|a| p.mixed_inputs(a, &mut mixed));
            items.iter().skip(1).for_each(|a| p.products_in(a, &mut products));
        }
    }
    let mut layout = p.layout.take().expect("set above");
    layout.mirrors = mixed.into_iter().collect();
    layout.products = products.into_iter().collect();
    layout.n_outputs += layout.mirrors.len() + layout.products.len();
    p.mirror = layout.mirrors.iter().enumerate().map(|(k, &i)| (i, n_out + k)).collect();
    let first = n_out + layout.mirrors.len();
    p.product = layout.products.iter().enumerate().map(|(k, &pair)| (pair, first + k)).collect();
    p.layout = Some(layout.clone());
    Ok(layout)
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

fn atom<'s>(sx: &'s Sx<'_>) -> Option<(&'s str, Pos)> {
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
    /// `(declare-network NAME [(equal-to|isomorphic-to M)] (declare-input …)
    /// (declare-hidden …) (declare-output …))`; `before`: the networks
    /// declared earlier.
    fn declare_network(&self, items: &[Sx], pos: Pos, before: &[NetworkDecl]) -> Result<NetworkDecl, VnnlibError> {
        let Some((name, npos)) = items.get(1).and_then(atom) else {
            return Err(self.err(pos, "expected (declare-network NAME ...)"));
        };
        let taken = |s: &str| before.iter().any(|n| n.name == s || n.tensors.iter().any(|t| t.name == s));
        if !is_name(name) || taken(name) {
            return Err(self.err(npos, format!("bad or repeated network name '{name}'")));
        }
        let mut net = NetworkDecl { name: name.to_string(), like: None, tensors: Vec::new(), pos };
        for d in &items[2..] {
            let Sx::List(decl, dpos) = d else { return Err(self.err(d.pos(), "expected a declaration")) };
            let role = match head(decl) {
                Some("declare-input") => Role::Input,
                Some("declare-output") => Role::Output,
                Some("declare-hidden") => Role::Hidden(String::new()),
                Some(k @ ("equal-to" | "isomorphic-to")) => {
                    let target = decl.get(1).and_then(atom).filter(|(t, _)| before.iter().any(|n| n.name == *t));
                    let (Some((t, _)), None, None) = (target, decl.get(2), net.like.as_ref()) else {
                        return Err(self.err(*dpos, format!("expected ({k} NETWORK) naming a network declared before")));
                    };
                    net.like = Some((k.to_string(), t.to_string()));
                    continue;
                }
                Some(k) => return Err(self.err(*dpos, format!("unknown declaration '{k}' in a network"))),
                None => return Err(self.err(*dpos, "expected a declaration")),
            };
            let t = self.tensor_decl(decl, *dpos, role)?;
            if t.name == name || taken(&t.name) || net.tensors.iter().any(|x| x.name == t.name) {
                return Err(self.err(*dpos, format!("bad or repeated tensor name '{}'", t.name)));
            }
            net.tensors.push(t);
        }
        if !net.tensors.iter().any(|t| t.role == Role::Input) || !net.tensors.iter().any(|t| t.role == Role::Output) {
            return Err(self.err(pos, format!("network '{name}' needs at least one input and one output")));
        }
        Ok(net)
    }

    /// `(declare-input|declare-output NAME TYPE [SHAPE])` or
    /// `(declare-hidden NAME TYPE [SHAPE] "ONNX-NAME")`.
    fn tensor_decl(&self, decl: &[Sx], dpos: Pos, role: Role) -> Result<TensorDecl, VnnlibError> {
        let (Some((t, tpos)), Some((ty, typos)), Some((sh, spos))) =
            (decl.get(1).and_then(atom), decl.get(2).and_then(atom), decl.get(3).and_then(atom))
        else {
            return Err(self.err(dpos, "expected (declare-input|declare-output|declare-hidden NAME TYPE [SHAPE] ...)"));
        };
        if !is_name(t) {
            return Err(self.err(tpos, format!("bad tensor name '{t}'")));
        }
        // An integer output can only be a constant the importer folded, or
        // a step (every op that makes integers of network values but steps
        // is refused), which polycert computes exactly.
        let input = role == Role::Input;
        let readable = FLOAT_TYPES.contains(&ty) || (!input && INT_TYPES.contains(&ty));
        if !readable {
            let allowed = if input { "Real or a float type" } else { "Real, a float or an integer type" };
            return Err(self.err(typos, format!("element type '{ty}' is not supported ({allowed})")));
        }
        let role = match (role, decl.get(4)) {
            (Role::Hidden(_), Some(Sx::Atom(s, _))) if s.len() > 2 && s.starts_with('"') && s.ends_with('"') => {
                Role::Hidden(s[1..s.len() - 1].to_string())
            }
            (Role::Hidden(_), _) => {
                return Err(self.err(dpos, "expected (declare-hidden NAME TYPE [SHAPE] \"ONNX-NAME\")"));
            }
            (_, Some(opt)) => {
                let what = atom(opt).map_or("an option", |a| a.0);
                return Err(self.err(opt.pos(), format!("'{what}' is not supported on a tensor declaration")));
            }
            (r, None) => r,
        };
        if let Some(extra) = decl.get(5) {
            return Err(self.err(extra.pos(), "unexpected item in a tensor declaration"));
        }
        Ok(TensorDecl { name: t.to_string(), role, shape: shape(self, sh, spos)?, offset: 0 })
    }

    /// Checks the layout against the model's input and output counts.
    pub(super) fn check_layout(&self) -> Result<(), VnnlibError> {
        let l = self.layout.as_ref().expect("a 2.0 query has a layout");
        if (l.n_inputs, l.n_outputs) == (self.n[0], self.n[1]) {
            return Ok(());
        }
        let pos = l.networks[0].pos;
        if !l.is_simple() {
            return Err(self.err(
                pos,
                format!(
                    "the query's networks take {} input and give {} output values (several networks, inputs or \
                     outputs, hidden tensors, or inputs compared with outputs); the model has {} and {}: give each \
                     network as --network NAME=MODEL",
                    l.n_inputs, l.n_outputs, self.n[0], self.n[1]
                ),
            ));
        }
        for t in l.tensors() {
            let (n, what) = (t.numel(), if t.role == Role::Input { "input" } else { "output" });
            if n != self.n[t.kind()] {
                let m = self.n[t.kind()];
                return Err(self
                    .err(pos, format!("{what} '{}' has shape {:?} ({n} values), the model has {m}", t.name, t.shape)));
            }
        }
        Ok(())
    }

    /// Records in `out` the input elements that a comparison in `sx` sets
    /// against outputs or hidden tensors, or against each other (a linear
    /// constraint over several inputs that may cut the box).
    fn mixed_inputs(&self, sx: &Sx, out: &mut BTreeSet<usize>) {
        let Sx::List(items, _) = sx else { return };
        if matches!(head(items), Some("<=" | ">=" | "<" | ">" | "=" | "==")) {
            let mut vars = Vec::new();
            items[1..].iter().for_each(|a| self.linear_vars(a, &mut vars));
            let inputs: BTreeSet<usize> = vars.iter().filter(|v| v.0 == 0).map(|v| v.1).collect();
            if !inputs.is_empty() && (inputs.len() > 1 || vars.iter().any(|v| v.0 == 1)) {
                out.extend(vars.iter().filter(|v| v.0 == 0).map(|v| v.1));
            }
        } else {
            items[1..].iter().for_each(|a| self.mixed_inputs(a, out));
        }
    }

    /// Records in `out` the products of two variables that terms in `sx`
    /// take: `(* A B)`, with any constant factors besides.
    fn products_in(&self, sx: &Sx, out: &mut BTreeSet<(Var, Var)>) {
        let Sx::List(items, _) = sx else { return };
        if head(items) == Some("*") {
            let mut vars = Vec::new();
            items[1..].iter().for_each(|a| self.element_vars(a, &mut vars));
            if let [a, b] = vars[..] {
                out.insert((a.min(b), a.max(b)));
            }
        }
        items[1..].iter().for_each(|a| self.products_in(a, out));
    }

    /// The variables of `sx` outside products of two variables (those have
    /// outputs of their own).
    fn linear_vars(&self, sx: &Sx, out: &mut Vec<Var>) {
        let mut vars = Vec::new();
        self.element_vars(sx, &mut vars);
        match sx {
            // A product is an output of its own.
            Sx::List(items, _) if head(items) == Some("*") && vars.len() == 2 => out.push((1, usize::MAX)),
            Sx::List(items, _) => items.iter().for_each(|a| self.linear_vars(a, out)),
            Sx::Atom(..) => out.extend(vars),
        }
    }

    fn element_vars(&self, sx: &Sx, out: &mut Vec<Var>) {
        match sx {
            Sx::Atom(s, pos) => out.extend(self.tensor_element(s, *pos).ok().flatten()),
            Sx::List(items, _) => items.iter().for_each(|a| self.element_vars(a, out)),
        }
    }

    /// `s·a·b` for two single variables `a`, `b` (VNNLIB 2.0): the output
    /// that holds their product.
    pub(super) fn product_term(&self, vars: &[Lin], s: Q, pos: Pos) -> Result<Lin, VnnlibError> {
        let single = |l: &Lin| match (l.terms.iter().next(), l.terms.len(), l.k.is_zero()) {
            (Some((&v, c)), 1, true) => Some((v, c.clone())),
            _ => None,
        };
        if let [a, b] = vars
            && let (Some((va, ca)), Some((vb, cb))) = (single(a), single(b))
            && let Some(&j) = self.product.get(&(va.min(vb), va.max(vb)))
        {
            return Ok(Lin { terms: BTreeMap::from([((1, j), s * ca * cb)]), k: Q::zero() });
        }
        let msg = if self.v2 {
            "a product is supported of two variables, each alone (not of sums or of three)"
        } else {
            "product of two variables is not linear (a VNNLIB 2.0 query may take products of two variables)"
        };
        Err(self.err(pos, msg))
    }

    /// `NAME` (a scalar) or `NAME[i,j,…]` to a flat variable; `None` when
    /// no tensor has that name.
    pub(super) fn tensor_element(&self, s: &str, pos: Pos) -> Result<Option<Var>, VnnlibError> {
        let (name, idx) = match s.split_once('[') {
            Some((n, rest)) => (n, Some(rest)),
            None => (s, None),
        };
        let Some(t) = self.layout.as_ref().and_then(|l| l.tensors().find(|t| t.name == name)) else { return Ok(None) };
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
        Ok(Some((t.kind(), t.offset + flat)))
    }
}
