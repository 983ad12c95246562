//! VNNLIB (the VNN-COMP subset of SMT-LIB, and VNNLIB 2.0: `v2.rs`) to
//! [`Property`].
//!
//! `(declare-const X_i Real)` are the flattened inputs and `Y_j` the
//! outputs (in 2.0, the elements of the declared input and output tensors). The assertions together describe a counterexample, so the
//! property holds when no input of the box satisfies them. They are put in
//! disjunctive normal form; in each disjunct the input constraints must be
//! bounds on single inputs (they give the box) and the output constraints
//! become half-spaces `c·y ≤ d` of the unsafe region. Disjuncts with the same
//! box share one [`SubProblem`].
//!
//! VNNLIB is real arithmetic: decimal constants are read and combined as
//! exact rationals (`exact.rs`) and rounded only at the end. The analysis's
//! box and thresholds are rounded outward (they can only grow, which keeps
//! "verified" sound; a strict comparison is analysed as its closure), and a
//! counterexample is checked against the stated ones: the float32 inputs
//! inside the stated box ([`InputBox::float32`]) and each half-space's
//! [`Halfspace::hit`]. Output coefficients that are not exactly f64 are
//! scaled to integers; a constraint they still do not fit is refused.

mod exact;
mod inputs;
mod num;
mod prefix;
mod sexpr;
mod v2;

pub use v2::{DeclaredNetwork, NetworkDecl, QueryLayout, QueryVar, Role, TensorDecl, network_names, query_layout};

use exact::Q;
use inputs::input_atom;
use num_traits::{One, Signed, Zero};
use polycert_deeppoly::{Halfspace, InputBox, Property, SubProblem};
use sexpr::{Pos, Sx};
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::Path;

/// Most disjuncts the normal form may have.
const MAX_DISJUNCTS: usize = 1 << 20;

/// Why a VNNLIB file could not be read. Every message names the file;
/// syntax errors also give the 1-based line and column.
#[derive(Debug, thiserror::Error)]
pub enum VnnlibError {
    #[error("{file}: cannot read the file: {source}")]
    Io { file: String, source: std::io::Error },
    #[error("{file}:{line}:{col}: {msg}")]
    Syntax { file: String, line: usize, col: usize, msg: String },
    /// A well-formed file that does not describe a supported property.
    #[error("{file}: {msg}")]
    Property { file: String, msg: String },
}

/// Reads a `.vnnlib` or gzip-compressed `.vnnlib.gz` file (detected by its
/// magic bytes) for a model with `n_inputs` inputs and `n_outputs` outputs.
pub fn load_vnnlib(path: impl AsRef<Path>, n_inputs: usize, n_outputs: usize) -> Result<Property, VnnlibError> {
    let path = path.as_ref();
    let file = path.display().to_string();
    let io = |source| VnnlibError::Io { file: file.clone(), source };
    let bytes = std::fs::read(path).map_err(io)?;
    let text = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut s = String::new();
        flate2::read::GzDecoder::new(&bytes[..]).read_to_string(&mut s).map_err(io)?;
        s
    } else {
        String::from_utf8(bytes)
            .map_err(|e| io(std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error())))?
    };
    parse_vnnlib(&text, &file, n_inputs, n_outputs)
}

/// Parses VNNLIB text; `file_name` is used in messages and for the
/// property's name.
pub fn parse_vnnlib(text: &str, file_name: &str, n_inputs: usize, n_outputs: usize) -> Result<Property, VnnlibError> {
    let mut p = Parser::new(file_name, n_inputs, n_outputs);
    let mut base: Vec<Cls> = Vec::new();
    let (start, pos, read) = p.fast_prefix(text, &mut base);
    let forms = sexpr::parse_from(text, start, pos).map_err(|(pos, msg)| p.err(pos, msg))?;
    let mut multi: Vec<Vec<Vec<Cls>>> = Vec::new();
    // The version must come first: after a fast prefix it does not.
    if let Some(v) = forms.first().filter(|_| !read).and_then(|f| v2::version(&p, f)) {
        v?;
        p.v2 = true;
        v2::layout(&mut p, &forms)?;
        p.check_layout()?;
        p.declared.iter_mut().flatten().for_each(|d| *d = true);
    }
    for (k, form) in forms.iter().enumerate() {
        let Sx::List(items, pos) = form else { return Err(p.err(form.pos(), "expected a command in parentheses")) };
        match head(items) {
            Some("vnnlib-version") if p.v2 && k == 0 => {}
            Some("vnnlib-version") => return Err(p.err(*pos, "the version must be the first statement")),
            Some("declare-network") if p.v2 => {} // read by `v2::layout`
            Some("declare-const") if !p.v2 => p.declare(items, *pos)?,
            Some("assert") => {
                let [_, f] = &items[..] else { return Err(p.err(*pos, "assert takes one formula")) };
                let mut dnf = p.formula(f)?;
                match dnf.len() {
                    0 => return Err(p.semantic(format!("the assertion at line {} is unsatisfiable", pos.line))),
                    1 => base.append(&mut dnf[0]),
                    _ => multi.push(dnf),
                }
            }
            Some("set-logic" | "set-info" | "set-option" | "check-sat" | "get-model" | "exit") if !p.v2 => {}
            Some(other) => return Err(p.err(*pos, format!("unsupported command '{other}'"))),
            None => return Err(p.err(*pos, "expected a command name")),
        }
    }
    for (k, kind) in ["X", "Y"].iter().enumerate() {
        if let Some(i) = p.declared[k].iter().position(|d| !d) {
            let what = if k == 0 { "inputs" } else { "outputs" };
            return Err(p.semantic(format!("{kind}_{i} is not declared: the model has {} {what}", p.n[k])));
        }
    }
    let name = Path::new(file_name).file_name().and_then(|s| s.to_str()).unwrap_or(file_name);
    let name = name.trim_end_matches(".gz").trim_end_matches(".vnnlib").to_string();
    let subproblems = p.subproblems(&base, &multi)?;
    let label = robustness_label(&subproblems, n_outputs);
    Ok(Property { name, subproblems, label })
}

/// A variable: input `X_i` (kind 0) or output `Y_j` (kind 1).
type Var = (usize, usize);

/// A linear expression `Σ c·v + k` with exact coefficients.
#[derive(Debug, Clone)]
struct Lin {
    terms: BTreeMap<Var, Q>,
    k: Q,
}

impl Lin {
    fn constant(k: Q) -> Self {
        Self { terms: BTreeMap::new(), k }
    }
    // Sums with a zero and products with ±1 skip the rationals' gcds
    // (exact either way): a box of 3,072 bounds is parsed several times faster.
    fn add(mut self, o: Lin) -> Self {
        for (v, c) in o.terms {
            match self.terms.entry(v) {
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(c);
                }
                std::collections::btree_map::Entry::Occupied(mut e) => *e.get_mut() += c,
            }
        }
        if self.k.is_zero() {
            self.k = o.k;
        } else if !o.k.is_zero() {
            self.k += o.k;
        }
        self.terms.retain(|_, c| !c.is_zero());
        self
    }
    fn scale(mut self, s: &Q) -> Self {
        self.terms.values_mut().for_each(|c| *c *= s);
        self.k *= s;
        self.terms.retain(|_, c| !c.is_zero());
        self
    }
    fn neg(mut self) -> Self {
        self.terms.values_mut().for_each(|c| *c = -std::mem::take(c));
        self.k = -std::mem::take(&mut self.k);
        self
    }
}

/// A bound on one input: its exact value and whether it is strict.
#[derive(Debug, Clone)]
struct Bound {
    v: num::Num,
    strict: bool,
}

/// An atom `lin ≤ 0` (or `< 0`), classified.
#[derive(Debug, Clone)]
enum Cls {
    True,
    False,
    /// Input `i` with a lower (`false`) or upper (`true`) bound.
    Bound(usize, bool, Bound),
    /// `Σ c·x ≤ rhs` (`<` when strict) over several inputs: decided on each
    /// sub-problem's box where it holds everywhere or nowhere there.
    InLin(Vec<(usize, Q)>, Bound),
    Out(Halfspace),
}

struct Parser<'a> {
    file: &'a str,
    n: [usize; 2],
    declared: [Vec<bool>; 2],
    /// VNNLIB 2.0 (`(vnnlib-version <2.x>)` first), with its declared tensors.
    v2: bool,
    layout: Option<v2::QueryLayout>,
    /// 2.0: input elements compared with outputs, to their copies' outputs.
    mirror: HashMap<usize, usize>,
    /// 2.0: products of two variables, to the outputs that hold them.
    product: HashMap<(Var, Var), usize>,
}

impl<'a> Parser<'a> {
    fn new(file: &'a str, n_inputs: usize, n_outputs: usize) -> Self {
        Parser {
            file,
            n: [n_inputs, n_outputs],
            declared: [vec![false; n_inputs], vec![false; n_outputs]],
            v2: false,
            layout: None,
            mirror: HashMap::new(),
            product: HashMap::new(),
        }
    }
}

fn head<'s>(items: &'s [Sx<'_>]) -> Option<&'s str> {
    match items.first() {
        Some(Sx::Atom(s, _)) => Some(s),
        _ => None,
    }
}

impl Parser<'_> {
    fn err(&self, pos: Pos, msg: impl Into<String>) -> VnnlibError {
        VnnlibError::Syntax { file: self.file.to_string(), line: pos.line, col: pos.col, msg: msg.into() }
    }

    fn semantic(&self, msg: String) -> VnnlibError {
        VnnlibError::Property { file: self.file.to_string(), msg }
    }

    /// `X_i` / `Y_j` (2.0: a declared tensor's element) to a variable,
    /// checking the index range.
    fn var_name(&self, s: &str, pos: Pos) -> Result<Option<Var>, VnnlibError> {
        if self.v2 {
            return self.tensor_element(s, pos);
        }
        let (kind, idx) = match (s.strip_prefix("X_"), s.strip_prefix("Y_")) {
            (Some(i), _) => (0, i),
            (_, Some(i)) => (1, i),
            _ => return Ok(None),
        };
        let i: usize = idx.parse().map_err(|_| self.err(pos, format!("bad variable index in '{s}'")))?;
        if i >= self.n[kind] {
            let what = if kind == 0 { "inputs" } else { "outputs" };
            return Err(self.err(pos, format!("{s} is out of range: the model has {} {what}", self.n[kind])));
        }
        Ok(Some((kind, i)))
    }

    fn declare(&mut self, items: &[Sx], pos: Pos) -> Result<(), VnnlibError> {
        let [_, Sx::Atom(name, npos), Sx::Atom(ty, tpos)] = items else {
            return Err(self.err(pos, "expected (declare-const NAME Real)"));
        };
        if ty != "Real" {
            return Err(self.err(*tpos, format!("unsupported sort '{ty}' (only Real)")));
        }
        let Some((k, i)) = self.var_name(name, *npos)? else {
            return Err(self.err(*npos, format!("unsupported constant '{name}' (expected X_i or Y_j)")));
        };
        if std::mem::replace(&mut self.declared[k][i], true) {
            return Err(self.err(*npos, format!("{name} is declared twice")));
        }
        Ok(())
    }

    fn term(&self, sx: &Sx) -> Result<Lin, VnnlibError> {
        match sx {
            Sx::Atom(s, pos) => {
                if let Some(n) = exact::decimal(s) {
                    return Ok(Lin::constant(n.map_err(|m| self.err(*pos, m))?));
                }
                match self.var_name(s, *pos)? {
                    Some(v) if self.declared[v.0][v.1] => {
                        Ok(Lin { terms: BTreeMap::from([(v, Q::one())]), k: Q::zero() })
                    }
                    Some(_) => Err(self.err(*pos, format!("{s} is used before its declaration"))),
                    None => Err(self.err(*pos, format!("unknown symbol '{s}'"))),
                }
            }
            Sx::List(items, pos) => {
                let args = items.get(1..).unwrap_or_default();
                let terms = args.iter().map(|a| self.term(a)).collect::<Result<Vec<_>, _>>()?;
                match (head(items), terms.len()) {
                    (_, 0) => Err(self.err(*pos, "expected an operator with arguments")),
                    (Some("+"), _) => Ok(terms.into_iter().reduce(Lin::add).unwrap_or(Lin::constant(Q::zero()))),
                    (Some("-"), 1) => Ok(terms.into_iter().map(Lin::neg).fold(Lin::constant(Q::zero()), Lin::add)),
                    (Some("-"), _) => {
                        let mut it = terms.into_iter();
                        let first = it.next().unwrap_or(Lin::constant(Q::zero()));
                        Ok(it.fold(first, |acc, t| acc.add(t.neg())))
                    }
                    (Some("*"), _) => {
                        let (consts, vars): (Vec<Lin>, Vec<Lin>) = terms.into_iter().partition(|t| t.terms.is_empty());
                        let s = consts.iter().fold(Q::one(), |a, c| a * &c.k);
                        if vars.len() > 1 {
                            return self.product_term(&vars, s, *pos);
                        }
                        Ok(vars.into_iter().next().unwrap_or(Lin::constant(Q::one())).scale(&s))
                    }
                    (Some("/"), 2) => {
                        let mut it = terms.into_iter();
                        let (a, b) = (it.next(), it.next());
                        let (Some(a), Some(b)) = (a, b) else {
                            return Err(self.err(*pos, "(/ a b) needs two arguments"));
                        };
                        if !b.terms.is_empty() || b.k.is_zero() {
                            return Err(self.err(*pos, "division must be by a nonzero constant"));
                        }
                        Ok(a.scale(&b.k.recip()))
                    }
                    (Some(op), _) => Err(self.err(*pos, format!("unsupported operator '{op}' in a term"))),
                    (None, _) => Err(self.err(*pos, "expected an operator")),
                }
            }
        }
    }

    /// A formula in disjunctive normal form.
    fn formula(&self, sx: &Sx) -> Result<Vec<Vec<Cls>>, VnnlibError> {
        let (items, pos) = match sx {
            Sx::Atom(s, _) if s == "true" => return Ok(vec![vec![]]),
            Sx::Atom(s, _) if s == "false" => return Ok(vec![]),
            Sx::Atom(s, pos) => return Err(self.err(*pos, format!("expected a formula, found '{s}'"))),
            Sx::List(items, pos) => (items, *pos),
        };
        let args = items.get(1..).unwrap_or_default();
        match head(items) {
            Some("and") => {
                let mut acc: Vec<Vec<Cls>> = vec![vec![]];
                for a in args {
                    let d = self.formula(a)?;
                    if acc.len().saturating_mul(d.len()) > MAX_DISJUNCTS {
                        return Err(self.err(pos, format!("the normal form has more than {MAX_DISJUNCTS} disjuncts")));
                    }
                    acc = acc.iter().flat_map(|c| d.iter().map(move |e| [c.clone(), e.clone()].concat())).collect();
                }
                Ok(acc)
            }
            Some("or") => {
                let mut acc = Vec::new();
                for a in args {
                    acc.extend(self.formula(a)?);
                    if acc.len() > MAX_DISJUNCTS {
                        return Err(self.err(pos, format!("the normal form has more than {MAX_DISJUNCTS} disjuncts")));
                    }
                }
                Ok(acc)
            }
            Some(op @ ("<=" | ">=" | "<" | ">" | "=" | "==")) => {
                if args.len() < 2 {
                    return Err(self.err(pos, format!("'{op}' needs at least two arguments")));
                }
                if let [a, b] = args
                    && let Some(bound) = self.input_bound(op, a, b)?
                {
                    return Ok(vec![vec![bound]]);
                }
                let terms = args.iter().map(|a| self.term(a)).collect::<Result<Vec<_>, _>>()?;
                let mut conj = Vec::new();
                let strict = matches!(op, "<" | ">");
                for w in terms.windows(2) {
                    let (a, b) = (w[0].clone(), w[1].clone());
                    let le = a.clone().add(b.clone().neg()); // a - b ≤ 0
                    let ge = b.add(a.neg()); // b - a ≤ 0
                    match op {
                        "<=" | "<" => conj.push(self.classify(le, strict, pos)?),
                        ">=" | ">" => conj.push(self.classify(ge, strict, pos)?),
                        _ => {
                            conj.push(self.classify(le, false, pos)?);
                            conj.push(self.classify(ge, false, pos)?);
                        }
                    }
                }
                Ok(vec![conj])
            }
            Some("!=") => Err(self.err(pos, "'!=' is not supported (its set is not closed)")),
            Some(op) => Err(self.err(pos, format!("unsupported connective '{op}'"))),
            None => Err(self.err(pos, "expected a formula")),
        }
    }

    /// Classifies `lin ≤ 0` (`strict`: `lin < 0`).
    fn classify(&self, mut lin: Lin, strict: bool, pos: Pos) -> Result<Cls, VnnlibError> {
        let rhs = -lin.k.clone(); // the atom is Σ c·v ≤ rhs
        let kinds: Vec<usize> = lin.terms.keys().map(|v| v.0).collect();
        if kinds.is_empty() {
            let holds = if strict { rhs.is_positive() } else { !rhs.is_negative() };
            return Ok(if holds { Cls::True } else { Cls::False });
        }
        if kinds.iter().any(|&k| k != kinds[0]) {
            // 2.0: the inputs' copies among the outputs stand in for them.
            let out = |&(k, i): &Var| if k == 0 { self.mirror.get(&i).map(|&j| (1, j)) } else { Some((k, i)) };
            let Some(terms) = lin.terms.into_iter().map(|(v, c)| Some((out(&v)?, c))).collect() else {
                return Err(self.err(pos, "constraints that mix inputs and outputs are not supported"));
            };
            lin = Lin { terms, k: lin.k };
        } else if kinds[0] == 0 {
            return Ok(input_atom(lin, rhs, strict));
        }
        let mut c = vec![Q::zero(); self.n[1]];
        for ((_, j), v) in lin.terms {
            c[j] = v;
        }
        // Coefficients that are not f64s are scaled (by a positive factor) to
        // coprime integers, which keeps the half-space the same set.
        let (c, rhs) = match c.iter().map(exact::exact_f64).collect::<Option<Vec<f64>>>() {
            Some(c) => (c, rhs),
            None => {
                let (ints, k) = exact::integer_scaling(&c);
                let Some(c) = ints.iter().map(exact::exact_f64).collect::<Option<Vec<f64>>>() else {
                    return Err(self.err(
                        pos,
                        "output coefficients that no scaling makes exact f64 numbers (refused rather than rounded)",
                    ));
                };
                (c, rhs * k)
            }
        };
        Ok(Cls::Out(Halfspace { c, d: exact::f64_up(&rhs), hit: exact::f64_below(&rhs, strict) }))
    }

    /// Combines the always-present atoms with one disjunct of each
    /// disjunctive assertion, grouping the results by input box. A box is
    /// built once per choice of the disjuncts that bound inputs (a property
    /// of 10^5 output disjuncts over one box converts its bounds once).
    fn subproblems(&self, base: &[Cls], multi: &[Vec<Vec<Cls>>]) -> Result<Vec<SubProblem>, VnnlibError> {
        let total = multi.iter().try_fold(1usize, |a, d| a.checked_mul(d.len()).filter(|&t| t <= MAX_DISJUNCTS));
        if total.is_none() {
            return Err(self.semantic(format!("the normal form has more than {MAX_DISJUNCTS} disjuncts")));
        }
        let shapes_box = |d: &[Cls]| d.iter().any(|a| matches!(a, Cls::Bound(..)));
        let mut out: Vec<SubProblem> = Vec::new();
        // Per choice of the box-shaping disjuncts: its sub-problem's index
        // (or its box, while only vacuous disjuncts met it); `None`: empty.
        let mut boxes: HashMap<Vec<usize>, Option<Grouped>> = HashMap::new();
        let mut index: HashMap<Vec<u64>, usize> = HashMap::new();
        let mut choice = vec![0usize; multi.len()];
        let mut vacuous: Option<InputBox> = None;
        // The base's part of each combination, read once (it holds an image
        // property's thousands of bounds).
        let is_false = |a: &Cls| matches!(a, Cls::False);
        let is_lin = |a: &Cls| matches!(a, Cls::InLin(..));
        let out_of = |a: &Cls| if let Cls::Out(h) = a { Some(h.clone()) } else { None };
        let (base_false, base_lin) = (base.iter().any(is_false), base.iter().any(is_lin));
        let base_outs: Vec<Halfspace> = base.iter().filter_map(out_of).collect();
        loop {
            let picked = || multi.iter().zip(&choice).flat_map(|(d, &k)| d[k].iter());
            let key: Vec<usize> =
                choice.iter().zip(multi).map(|(&k, d)| if shapes_box(&d[k]) { k } else { usize::MAX }).collect();
            if !boxes.contains_key(&key) {
                let b = self.input_box(base.iter().chain(picked()))?;
                boxes.insert(key.clone(), b.map(Grouped::Box));
            }
            let cuts = if base_false || picked().any(is_false) {
                None
            } else if base_lin || picked().any(is_lin) {
                self.inputs_meet(base.iter().chain(picked()))?
            } else {
                Some(Vec::new())
            };
            if let Some(slot) = boxes.get_mut(&key).expect("just built").as_mut() {
                if let Some(cuts) = cuts {
                    let k = slot.index(&mut out, &mut index);
                    let outs = base_outs.iter().cloned().chain(picked().filter_map(out_of));
                    out[k].unsafe_region.push(outs.chain(cuts).collect());
                } else if vacuous.is_none() {
                    // Outputs that no value meets (`0 ≤ −1`): nothing to reach here.
                    vacuous = Some(slot.input(&out).clone());
                }
            }
            // next combination, the last assertion varying fastest
            let mut d = choice.len();
            while d > 0 {
                choice[d - 1] += 1;
                if choice[d - 1] < multi[d - 1].len() {
                    break;
                }
                choice[d - 1] = 0;
                d -= 1;
            }
            if d == 0 {
                break;
            }
        }
        match (out.is_empty(), vacuous) {
            // Every disjunct's outputs are unsatisfiable: the property holds.
            (true, Some(input)) => Ok(vec![SubProblem { input, unsafe_region: Vec::new() }]),
            (true, None) => Err(self.semantic("the input constraints are unsatisfiable".into())),
            (false, _) => Ok(out),
        }
    }
}

/// A nonempty box of [`Parser::subproblems`]: built, or already the
/// sub-problem at an index.
enum Grouped {
    Box(InputBox),
    At(usize),
}

impl Grouped {
    /// The index of this box's sub-problem, added (or merged with an equal
    /// box's) on first use.
    fn index(&mut self, out: &mut Vec<SubProblem>, index: &mut HashMap<Vec<u64>, usize>) -> usize {
        let input = match std::mem::replace(self, Grouped::At(0)) {
            Grouped::At(k) => {
                *self = Grouped::At(k);
                return k;
            }
            Grouped::Box(input) => input,
        };
        let k = *index.entry(box_key(&input)).or_insert_with(|| {
            out.push(SubProblem { input, unsafe_region: Vec::new() });
            out.len() - 1
        });
        *self = Grouped::At(k);
        k
    }

    fn input<'o>(&'o self, out: &'o [SubProblem]) -> &'o InputBox {
        match self {
            Grouped::Box(b) => b,
            Grouped::At(k) => &out[*k].input,
        }
    }
}

/// A box's identity for grouping disjuncts: its f64 and float32 bounds.
fn box_key(b: &InputBox) -> Vec<u64> {
    let f32s = b.float32.as_deref().into_iter().flat_map(|(l, h)| l.iter().chain(h));
    b.lo.iter().chain(&b.hi).map(|v| v.to_bits()).chain(f32s.map(|v| u64::from(v.to_bits()))).collect()
}

/// The label of a robustness property: one sub-problem whose unsafe region
/// is `∪_{j≠l} {y_l − y_j ≤ 0}`.
fn robustness_label(sps: &[SubProblem], n_out: usize) -> Option<usize> {
    let [sp] = sps else { return None };
    if n_out < 2 || sp.unsafe_region.len() != n_out - 1 {
        return None;
    }
    let mut label = None;
    let mut others = vec![false; n_out];
    for conj in &sp.unsafe_region {
        let [h] = &conj[..] else { return None };
        let nz: Vec<(usize, f64)> = h.c.iter().copied().enumerate().filter(|(_, v)| *v != 0.0).collect();
        let [(a, va), (b, vb)] = nz[..] else { return None };
        let (l, j) = match (va, vb) {
            (1.0, -1.0) => (a, b),
            (-1.0, 1.0) => (b, a),
            _ => return None,
        };
        if h.d != 0.0 || *label.get_or_insert(l) != l {
            return None;
        }
        others[j] = true;
    }
    let l = label?;
    (0..n_out).all(|j| j == l || others[j]).then_some(l)
}
