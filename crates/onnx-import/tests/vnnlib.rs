//! VNNLIB parsing: semantics of the VNN-COMP subset, and error positions.

use polycert_deeppoly::Halfspace;
use polycert_onnx::{Role, VnnlibError, load_vnnlib, parse_vnnlib, query_layout};

fn decls(n_in: usize, n_out: usize) -> String {
    let mut s = String::new();
    for i in 0..n_in {
        s += &format!("(declare-const X_{i} Real)\n");
    }
    for j in 0..n_out {
        s += &format!("(declare-const Y_{j} Real)\n");
    }
    s
}

fn boxed(n_in: usize) -> String {
    (0..n_in).map(|i| format!("(assert (<= X_{i} {}.5))\n(assert (>= X_{i} -{i}))\n", i + 1)).collect()
}

fn syntax(e: VnnlibError) -> (usize, usize, String) {
    match e {
        VnnlibError::Syntax { line, col, msg, .. } => (line, col, msg),
        other => panic!("expected a syntax error, got {other}"),
    }
}

#[test]
fn robustness_property() {
    let text = format!(
        "; Mnist-like property with label: 1.\n{}{}\n; Output constraints:\n(assert (or\n    (and (>= Y_0 Y_1))\n    (and (>= Y_2 Y_1))\n))\n",
        decls(3, 3),
        boxed(3)
    );
    let p = parse_vnnlib(&text, "dir/prop_7.vnnlib", 3, 3).unwrap();
    assert_eq!(p.name, "prop_7");
    assert_eq!(p.label, Some(1));
    let [sp] = &p.subproblems[..] else { panic!() };
    assert_eq!(sp.input.lo, vec![0.0, -1.0, -2.0]);
    assert_eq!(sp.input.hi, vec![1.5, 2.5, 3.5]);
    // Y_0 >= Y_1  <=>  Y_1 - Y_0 <= 0
    assert_eq!(sp.unsafe_region[0], vec![Halfspace::new(vec![-1.0, 1.0, 0.0], 0.0)]);
    assert_eq!(sp.unsafe_region[1], vec![Halfspace::new(vec![0.0, 1.0, -1.0], 0.0)]);
    p.check_dims(3, 3).unwrap();
}

/// A bound on one input is read the same in either order and as the
/// equivalent linear atom (`(<= (* 1 X_0) c)`, the general path), strict
/// or not: the f64 box outward, the float32 box inside.
#[test]
fn input_bounds_in_either_order_match_the_general_path() {
    let d = decls(3, 1);
    let out = "(assert (>= Y_0 0))\n";
    let direct = "(assert (<= 0.1 X_0))(assert (> 0.7 X_0))(assert (>= X_1 -1e-3))(assert (< X_1 1))(assert (<= X_2 0))(assert (>= X_2 -0))";
    let general = "(assert (>= (- 0.1) (- X_0)))(assert (> 0.7 (* 1 X_0)))(assert (>= (+ X_1 0) -1e-3))(assert (< (* 2 X_1) 2))(assert (<= (+ X_2) 0))(assert (>= (- X_2 0) -0))";
    let a = parse_vnnlib(&format!("{d}{direct}{out}"), "a.vnnlib", 3, 1).unwrap();
    let b = parse_vnnlib(&format!("{d}{general}{out}"), "b.vnnlib", 3, 1).unwrap();
    let (a, b) = (&a.subproblems[0].input, &b.subproblems[0].input);
    assert_eq!((&a.lo, &a.hi, &a.float32), (&b.lo, &b.hi, &b.float32));
    assert!(a.lo[0] < 0.1 && a.hi[0] > 0.7 && a.lo[1] <= -1e-3 && a.hi[1] == 1.0);
    let (lo32, hi32) = &**a.float32.as_ref().unwrap();
    assert!(
        lo32[0] == 0.1f32 && hi32[0] == 0.7f32 && hi32[1] == 1.0f32.next_down() && (lo32[2], hi32[2]) == (0.0, 0.0)
    );
}

#[test]
fn linear_terms_constants_and_inexact_decimals() {
    let text = format!(
        "{}(assert (<= X_0 0.1))\n(assert (>= X_0 (- 0.5)))\n(assert (<= (* 2 X_1) 3))\n(assert (>= X_1 (+ 1 -2)))\n\
         (assert (<= (+ (* 2.0 Y_0) Y_1 (- Y_1 Y_0)) 0.25))\n(assert (> Y_1 (/ Y_0 4)))\n",
        decls(2, 2)
    );
    let p = parse_vnnlib(&text, "lin.vnnlib", 2, 2).unwrap();
    assert_eq!(p.label, None);
    let [sp] = &p.subproblems[..] else { panic!() };
    // 0.1 is not an f64: the bound is rounded up to the f64 above it, and
    // the float32 inputs inside the stated box end below it.
    assert_eq!(sp.input.hi[0], 0.1);
    let f32s = sp.input.float32.as_deref().unwrap();
    assert_eq!((f32s.1[0], 0.1f32.next_down()), (0.1f32.next_down(), f32s.1[0]));
    assert!(!sp.input.holds_f32(&[0.1, 0.0]) && sp.input.holds_f32(&[0.1f32.next_down(), 0.0]));
    assert_eq!((sp.input.lo[0], sp.input.lo[1], sp.input.hi[1]), (-0.5, -1.0, 1.5));
    // Top-level output asserts form one conjunction.
    let [conj] = &sp.unsafe_region[..] else { panic!() };
    assert_eq!(conj[0], Halfspace::new(vec![1.0, 2.0], 0.25));
    // `>` is strict: a counterexample must pass the threshold.
    assert_eq!(conj[1], Halfspace { hit: -f64::from_bits(1), ..Halfspace::new(vec![0.25, -1.0], 0.0) });
}

#[test]
fn input_disjunctions_make_sub_problems_and_output_conjunctions_distribute() {
    let text = format!(
        "{}(assert (or (and (>= X_0 0) (<= X_0 1)) (and (>= X_0 2) (<= X_0 3))))\n\
         (assert (or (<= Y_0 0) (<= Y_1 0)))\n(assert (or (>= Y_0 5) (and (>= Y_1 5) (<= Y_0 Y_1))))\n",
        decls(1, 2)
    );
    let p = parse_vnnlib(&text, "dnf.vnnlib", 1, 2).unwrap();
    assert_eq!(p.subproblems.len(), 2);
    assert_eq!((p.subproblems[0].input.lo[0], p.subproblems[0].input.hi[0]), (0.0, 1.0));
    assert_eq!((p.subproblems[1].input.lo[0], p.subproblems[1].input.hi[0]), (2.0, 3.0));
    for sp in &p.subproblems {
        // (A ∨ B) ∧ (C ∨ (D ∧ E)) = AC ∨ ADE ∨ BC ∨ BDE
        assert_eq!(sp.unsafe_region.len(), 4);
        let sizes: Vec<usize> = sp.unsafe_region.iter().map(Vec::len).collect();
        assert_eq!(sizes, [2, 3, 2, 3]);
        assert_eq!(sp.unsafe_region[0][1], Halfspace::new(vec![-1.0, 0.0], -5.0));
    }
}

#[test]
fn equality_and_contradictory_disjuncts() {
    let text = format!(
        "{}(assert (= X_0 0.25))\n(assert (or (and (>= X_1 0) (<= X_1 1)) (and (>= X_1 3) (<= X_1 2))))\n(assert (<= Y_0 1))\n",
        decls(2, 1)
    );
    let p = parse_vnnlib(&text, "eq.vnnlib", 2, 1).unwrap();
    let [sp] = &p.subproblems[..] else { panic!("the empty box is dropped") };
    assert_eq!((sp.input.lo.clone(), sp.input.hi.clone()), (vec![0.25, 0.0], vec![0.25, 1.0]));
}

#[test]
fn gzip_and_plain_files() {
    use std::io::Write;
    let text = format!("{}{}(assert (>= Y_0 Y_1))\n", decls(2, 2), boxed(2));
    let dir = std::env::temp_dir();
    let plain = dir.join(format!("polycert-vnn-{}.vnnlib", std::process::id()));
    let gz = dir.join(format!("polycert-vnn-{}.vnnlib.gz", std::process::id()));
    std::fs::write(&plain, &text).unwrap();
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(text.as_bytes()).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let a = load_vnnlib(&plain, 2, 2).unwrap();
    let b = load_vnnlib(&gz, 2, 2).unwrap();
    std::fs::remove_file(&plain).ok();
    std::fs::remove_file(&gz).ok();
    assert_eq!(a.subproblems, b.subproblems);
    assert_eq!(a.name, b.name);
    assert_eq!(a.label, Some(1));
    let e = load_vnnlib("/nonexistent/p.vnnlib", 1, 1).unwrap_err();
    assert!(matches!(e, VnnlibError::Io { .. }) && e.to_string().contains("/nonexistent/p.vnnlib"));
}

#[test]
fn errors_give_line_and_column() {
    let d = decls(2, 2);
    let n = d.lines().count();
    let parse = |body: &str| parse_vnnlib(&format!("{d}{body}"), "bad.vnnlib", 2, 2).unwrap_err();

    let (l, c, m) = syntax(parse("(assert (<= X_0 1)\n"));
    assert_eq!((l, c), (n + 1, 1), "{m}");
    assert!(m.contains("unclosed"));
    let (l, c, _) = syntax(parse("(assert (<= X_0 1)))\n"));
    assert_eq!((l, c), (n + 1, 20));
    let (l, c, m) = syntax(parse("(assert (<= X_0 1))\n(assert (<= Z_0 1))\n"));
    assert_eq!((l, c), (n + 2, 13));
    assert!(m.contains("unknown symbol 'Z_0'"));
    let (l, c, m) = syntax(parse("\n  (assert (>= X_7 1))\n"));
    assert_eq!((l, c), (n + 2, 15));
    assert!(m.contains("X_7 is out of range") && m.contains("2 inputs"), "{m}");
    let (_, _, m) = syntax(parse("(assert (<= (* X_0 X_1) 1))"));
    assert!(m.contains("not linear"));
    let (_, _, m) = syntax(parse("(assert (<= X_0 Y_1))"));
    assert!(m.contains("mix inputs and outputs"));
    let (_, _, m) = syntax(parse("(assert (not (<= X_0 1)))"));
    assert!(m.contains("'not'"));
    let (_, _, m) = syntax(parse("(assert (<= X_0 1e999))"));
    assert!(m.contains("range"));
    let (_, _, m) = syntax(parse("(declare-const X_0 Real)"));
    assert!(m.contains("declared twice"));

    let e = parse(&format!("{}(assert (<= X_1 1))", boxed(1)));
    let msg = e.to_string();
    assert!(
        matches!(e, VnnlibError::Property { .. })
            && msg.contains("bad.vnnlib")
            && msg.contains("X_1 has no lower bound"),
        "{msg}"
    );
    // The file's variables do not match the model's dimensions.
    let e = parse_vnnlib(&format!("{}{}", decls(2, 2), boxed(2)), "dims.vnnlib", 3, 2).unwrap_err();
    assert!(e.to_string().contains("X_2 is not declared: the model has 3 inputs"), "{e}");
    let e = parse_vnnlib(&format!("{}{}", decls(2, 2), boxed(2)), "dims.vnnlib", 2, 1).unwrap_err();
    assert!(e.to_string().starts_with("dims.vnnlib:") && e.to_string().contains("Y_1 is out of range"), "{e}");
}

#[test]
fn mutated_files_never_panic() {
    let text = format!(
        "; c\n{}{}(assert (or (and (>= Y_0 Y_1) (<= (+ Y_0 (* 2 Y_1)) 1.5)) (and (>= Y_1 (- Y_0 0.1)))))\n",
        decls(2, 2),
        boxed(2)
    );
    let v2 = "(vnnlib-version <2.0>)\n(declare-network n (declare-input X Real [1,2]) (declare-output Y Real [2]))\n\
              (assert (<= X[0,0] 1.0))(assert (>= X[0,0] 0.0))(assert (<= X[0,1] 1.0))(assert (>= X[0,1] 0.0))\n\
              (assert (or (and (>= Y[0] Y[1])) (== Y[1] (- Y[0] 0.5))))\n";
    for text in [text.as_str(), v2] {
        mutate(text);
    }
}

fn mutate(text: &str) {
    let bytes = text.as_bytes();
    let alphabet = b"()[],XY_0123456789.-+*e; \nabdnorst<=>";
    let mut s = 0x2545f4914f6cdd1du64;
    let mut rnd = |n: usize| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % n as u64) as usize
    };
    for _ in 0..3000 {
        let mut b = bytes.to_vec();
        for _ in 0..1 + rnd(3) {
            let i = rnd(b.len());
            match rnd(3) {
                0 => b[i] = alphabet[rnd(alphabet.len())],
                1 => {
                    b.remove(i);
                }
                _ => b.insert(i, alphabet[rnd(alphabet.len())]),
            }
        }
        let t = String::from_utf8(b).unwrap();
        if let Err(e) = parse_vnnlib(&t, "m.vnnlib", 2, 2) {
            assert!(e.to_string().starts_with("m.vnnlib"), "{e}");
        }
    }
}

/// The VNNLIB 2.0 form of a 1.0 property gives the same property.
#[test]
fn vnnlib_2_matches_1() {
    // Input [2,3] (flat X_0..X_5, row-major), output [3].
    let mut v2 = String::from(
        "(vnnlib-version <2.0>)\n; a comment\n(declare-network net\n  (declare-input X Real [2,3])\n  (declare-output Out float32 [3])\n)\n",
    );
    let mut v1 = decls(6, 3);
    for i in 0..6 {
        let (r, c) = (i / 3, i % 3);
        // Spaces inside the brackets are allowed by the grammar.
        v2 += &format!("(assert (<= X[{r}, {c}] {}.5))\n(assert (>= X[{r},{c}] -{i}))\n", i + 1);
    }
    v1 += &boxed(6);
    v2 += "(assert (or (and (>= Out[0] Out[1])) (and (>= (+ Out[2] 0.5) Out[1]) (== Out[0] (* 2.0 Out[2])))))\n";
    v1 += "(assert (or (and (>= Y_0 Y_1)) (and (>= (+ Y_2 0.5) Y_1) (= Y_0 (* 2.0 Y_2)))))\n";
    let a = parse_vnnlib(&v1, "p.vnnlib", 6, 3).unwrap();
    let b = parse_vnnlib(&v2, "p.vnnlib", 6, 3).unwrap();
    assert_eq!(a.subproblems.len(), 1);
    assert_eq!(a.subproblems[0].input.lo, b.subproblems[0].input.lo);
    assert_eq!(a.subproblems[0].input.hi, b.subproblems[0].input.hi);
    assert_eq!(a.subproblems[0].unsafe_region, b.subproblems[0].unsafe_region);
    assert_eq!(b.subproblems[0].unsafe_region[1].len(), 3);

    // A scalar output (shape []) is named without an index.
    let s = "(vnnlib-version <2.1>)\n(declare-network n (declare-input X Real [1]) (declare-output Y Real []))\n\
             (assert (>= X[0] 0.0))\n(assert (<= X[0] 1.0))\n(assert (<= Y -3.0))\n";
    let p = parse_vnnlib(s, "s.vnnlib", 1, 1).unwrap();
    assert_eq!(p.subproblems[0].unsafe_region, vec![vec![Halfspace::new(vec![1.0], -3.0)]]);
}

#[test]
fn vnnlib_2_errors_give_line_and_column() {
    let head = "(vnnlib-version <2.0>)\n(declare-network n\n  (declare-input X Real [2,2])\n  (declare-output Y Real [2])\n)\n";
    let cases: [(String, usize, usize, &str); 8] = [
        ("(vnnlib-version <3.0>)\n".into(), 1, 1, "version 3.0"),
        (format!("{head}(assert (<= X[2,0] 1.0))\n"), 6, 13, "does not index 'X' of shape [2, 2]"),
        (format!("{head}(assert (<= X[0] 1.0))\n"), 6, 13, "does not index"),
        (format!("{head}(assert (<= Z[0] 1.0))\n"), 6, 13, "unknown symbol 'Z[0]'"),
        (format!("{head}(assert (!= Y[0] 1.0))\n"), 6, 9, "'!='"),
        (
            format!("{head}(declare-network m (declare-input A Real [4]) (declare-output B Real [2]))\n"),
            2,
            1,
            "networks take 8 input and give 4 output values (several networks",
        ),
        (
            "(vnnlib-version <2.0>)\n(declare-network n\n  (declare-input X Real [4])\n  (declare-hidden H Real [2] \"h\")\n  (declare-output Y Real [2]))\n".into(),
            2,
            1,
            "give each network as --network NAME=MODEL",
        ),
        (
            "(vnnlib-version <2.0>)\n(declare-network n (declare-input X Real [5]) (declare-output Y Real [2]))\n".into(),
            2,
            1,
            "shape [5] (5 values), the model has 4",
        ),
    ];
    for (text, line, col, want) in cases {
        let e = parse_vnnlib(&text, "bad.vnnlib", 4, 2).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with(&format!("bad.vnnlib:{line}:{col}: ")) && msg.contains(want), "{msg}\nfor\n{text}");
    }
    // Initialized inputs and the 1.0 declarations inside a 2.0 file are refused too.
    let init = "(vnnlib-version <2.1>)\n(declare-network n (declare-input X Real [4] initialized) (declare-output Y Real [2]))\n";
    assert!(parse_vnnlib(init, "i.vnnlib", 4, 2).unwrap_err().to_string().contains("'initialized'"));
    let mixed = format!("{head}(declare-const X_0 Real)\n");
    assert!(parse_vnnlib(&mixed, "m.vnnlib", 4, 2).unwrap_err().to_string().contains("declare-const"));
    // Integer outputs (a folded Shape) are read; integer inputs are refused.
    let int_out = "(vnnlib-version <2.0>)\n(declare-network n (declare-input X float32 [4]) (declare-output Y int64 [2]))\n\
                   (assert (<= X[0] 1))\n(assert (>= X[0] 0))\n(assert (<= X[1] 1))\n(assert (>= X[1] 0))\n\
                   (assert (<= X[2] 1))\n(assert (>= X[2] 0))\n(assert (<= X[3] 1))\n(assert (>= X[3] 0))\n\
                   (assert (>= Y[1] 4))\n";
    parse_vnnlib(int_out, "o.vnnlib", 4, 2).unwrap();
    let int_in = int_out.replace("X float32", "X int64");
    let e = parse_vnnlib(&int_in, "i.vnnlib", 4, 2).unwrap_err().to_string();
    assert!(e.starts_with("i.vnnlib:2:37: element type 'int64' is not supported (Real or a float type)"), "{e}");
}

/// Operand order and strictness (issue 11): `(<= Y_0 Y_1)`, `(>= Y_1 Y_0)`
/// and the strict forms describe the same closed half-space `y_0 − y_1 ≤ 0`
/// for the analysis (strict comparisons are widened to non-strict: the
/// unsafe region only grows, so a tie is never verified); a counterexample
/// to a strict one must pass the threshold (`hit` below 0).
#[test]
fn operand_order_and_strictness_give_one_halfspace() {
    let base = format!("{}{}", decls(1, 2), boxed(1));
    let forms =
        ["(<= Y_0 Y_1)", "(>= Y_1 Y_0)", "(< Y_0 Y_1)", "(> Y_1 Y_0)", "(<= (- Y_0 Y_1) 0)", "(>= 0 (- Y_0 Y_1))"];
    for f in forms {
        let p = parse_vnnlib(&format!("{base}(assert {f})\n"), "o.vnnlib", 1, 2).unwrap();
        let hit = if f.starts_with("(<=") || f.starts_with("(>=") { 0.0 } else { -f64::from_bits(1) };
        let h = Halfspace { hit, ..Halfspace::new(vec![1.0, -1.0], 0.0) };
        assert_eq!(p.subproblems[0].unsafe_region, vec![vec![h]], "{f}");
    }
}

/// VNNLIB is real arithmetic (issue 42): coefficients combine exactly, so
/// `0.3·y − 0.1·y − 0.2·y ≥ 0` is `0 ≥ 0`, which every output meets (an
/// empty conjunction); decimal coefficients are scaled to exact integers;
/// ones no scaling makes exact are refused.
#[test]
fn coefficients_are_exact_rationals() {
    let base = format!("{}{}", decls(1, 2), boxed(1));
    let p =
        parse_vnnlib(&format!("{base}(assert (>= (+ (* 0.3 Y_0) (* -0.1 Y_0) (* -0.2 Y_0)) 0.0))\n"), "z.vnnlib", 1, 2)
            .unwrap();
    assert_eq!(p.subproblems[0].unsafe_region, vec![Vec::<Halfspace>::new()]);
    // `0 ≤ −0.5`: no output meets it, so nothing is unsafe (the property holds).
    let p = parse_vnnlib(
        &format!("{base}(assert (<= (+ (* 0.3 Y_0) (* -0.1 Y_0) (* -0.2 Y_0)) -0.5))\n"),
        "f.vnnlib",
        1,
        2,
    )
    .unwrap();
    assert!(p.subproblems.len() == 1 && p.subproblems[0].unsafe_region.is_empty());
    let p = parse_vnnlib(&format!("{base}(assert (>= (+ (* 0.1 Y_0) (* 0.2 Y_1)) 0.3))\n"), "s.vnnlib", 1, 2).unwrap();
    assert_eq!(p.subproblems[0].unsafe_region, vec![vec![Halfspace::new(vec![-1.0, -2.0], -3.0)]]);
    let e = parse_vnnlib(&format!("{base}(assert (<= (+ Y_0 (* 1e-300 Y_1)) 0))\n"), "r.vnnlib", 1, 2).unwrap_err();
    assert!(e.to_string().contains("refused rather than rounded"), "{e}");
}

/// A bound just below a float32 value (issue 42): the analysis's box holds
/// the f64 above it, but the float32 inputs of the stated box stop below.
#[test]
fn float32_inputs_stay_in_the_stated_box() {
    let text = format!(
        "{}(assert (>= X_0 0))\n(assert (<= X_0 1.000000119209289550781249))\n(assert (<= Y_0 Y_1))\n",
        decls(1, 2)
    );
    let p = parse_vnnlib(&text, "b.vnnlib", 1, 2).unwrap();
    let b = &p.subproblems[0].input;
    let above = 1.0f32.next_up();
    assert_eq!(b.hi[0], above as f64);
    assert!(!b.holds_f32(&[above]) && b.holds_f32(&[1.0]));
    assert_eq!(b.to_f32_inside(&[above as f64]), vec![1.0f32]);
}

/// A linear constraint over several inputs is decided on the box, in exact
/// rationals: where it holds nowhere its disjunct is dropped, where it holds
/// everywhere it is dropped; one that cuts the box (a polytope) is refused.
#[test]
fn linear_constraints_over_inputs_are_decided_on_the_box() {
    // X_0 in [0, 1.5], X_1 in [−1, 2.5]: X_0 + X_1 lies in [−1, 4].
    let base = format!("{}{}", decls(2, 2), boxed(2));
    let parse = |a: &str| parse_vnnlib(&format!("{base}{a}\n"), "l.vnnlib", 2, 2);
    let region = |a: &str| parse(a).unwrap().subproblems[0].unsafe_region.clone();
    let y = |j: usize| Halfspace::new(if j == 0 { vec![1.0, 0.0] } else { vec![0.0, 1.0] }, 0.0);
    assert!(region("(assert (>= (+ X_0 X_1) 5))").is_empty());
    // The corner X_0 + X_1 = 4 is excluded by a strict bound: nowhere.
    assert!(region("(assert (> (+ X_0 X_1) 4))").is_empty());
    assert_eq!(region("(assert (or (and (>= (+ X_0 X_1) 5) (<= Y_0 0)) (<= Y_1 0)))"), vec![vec![y(1)]]);
    assert_eq!(region("(assert (and (<= (+ X_0 X_1) 4) (<= Y_0 0)))"), vec![vec![y(0)]]);
    for cut in ["(assert (<= (+ X_0 X_1) 1))", "(assert (< (+ X_0 X_1) 4))", "(assert (>= (- X_0 X_1) 0))"] {
        let e = parse(cut).unwrap_err().to_string();
        assert!(e.contains("cuts the input box"), "{cut}: {e}");
    }
}

/// A composed query's layout (issue 46): every network's inputs form one
/// input vector, their outputs and hidden tensors one output vector, and
/// the inputs a constraint compares with outputs are copied after them.
#[test]
fn vnnlib_2_queries_lay_out_networks_hidden_tensors_and_mixed_inputs() {
    let text = "(vnnlib-version <2.0>)\n\
        (declare-network A (declare-input X1 float32 [2]) (declare-input X2 float32 [1])\n\
           (declare-hidden H float32 [3] \"hidden out\") (declare-output Y float32 [1]))\n\
        (declare-network B (equal-to A) (declare-input Z float32 [1]) (declare-output W float32 [2]))\n\
        (assert (>= X1[0] 0.0))(assert (<= X1[0] 1.0))(assert (>= X1[1] 0.0))(assert (<= X1[1] 1.0))\n\
        (assert (>= X2[0] 2.0))(assert (<= X2[0] 3.0))(assert (>= Z[0] -1.0))(assert (<= Z[0] 1.0))\n\
        (assert (or (<= H[2] (+ X1[1] 0.5)) (and (>= W[1] Y[0]) (<= Z[0] 0.25))))\n";
    let l = query_layout(text, "q.vnnlib").unwrap().unwrap();
    assert!(!l.is_simple());
    assert_eq!((l.n_inputs, l.n_outputs, l.mirrors.clone()), (4, 7, vec![1]));
    let a = &l.networks[0];
    assert_eq!(a.tensors[2].role, Role::Hidden("hidden out".into()));
    let offsets: Vec<usize> = l.networks.iter().flat_map(|n| n.tensors.iter().map(|t| t.offset)).collect();
    assert_eq!(offsets, vec![0, 2, 0, 3, 3, 4]);
    assert_eq!(l.networks[1].like, Some(("equal-to".into(), "A".into())));
    let p = parse_vnnlib(text, "q.vnnlib", 4, 7).unwrap();
    assert_eq!(p.subproblems.len(), 2, "{:?}", p.subproblems);
    let sp = &p.subproblems[0];
    assert_eq!((sp.input.lo.clone(), sp.input.hi.clone()), (vec![0.0, 0.0, 2.0, -1.0], vec![1.0, 1.0, 3.0, 1.0]));
    // H[2] − X1[1] ≤ 0.5, with X1[1] as output 6 (its copy).
    assert_eq!(sp.unsafe_region, vec![vec![Halfspace::new(vec![0.0, 0.0, 1.0, 0.0, 0.0, 0.0, -1.0], 0.5)]]);
    // The model must match the layout.
    let e = parse_vnnlib(text, "q.vnnlib", 4, 6).unwrap_err().to_string();
    assert!(e.starts_with("q.vnnlib:2:1: the query's networks take 4 input and give 7 output values"), "{e}");
    // A one-network query with one input and one output is simple.
    let one = "(vnnlib-version <2.0>)\n(declare-network n (declare-input X Real [2]) (declare-output Y Real [1]))\n";
    assert!(query_layout(one, "o.vnnlib").unwrap().unwrap().is_simple());
    assert_eq!(query_layout("(declare-const X_0 Real)", "v1.vnnlib").unwrap(), None);
    for (bad, want) in [
        (
            "(declare-network n (equal-to m) (declare-input X Real [2]) (declare-output Y Real [1]))",
            "naming a network declared before",
        ),
        (
            "(declare-network n (declare-input X Real [2]) (declare-hidden H Real [1]) (declare-output Y Real [1]))",
            "\"ONNX-NAME\"",
        ),
        ("(declare-network n (declare-input X Real [2]))", "at least one input and one output"),
        ("(declare-network n (declare-input X Real [2]) (declare-output X Real [1]))", "repeated tensor name 'X'"),
    ] {
        let e = query_layout(&format!("(vnnlib-version <2.0>)\n{bad}\n"), "b.vnnlib").unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
}

/// A linear constraint over several inputs that cuts the box (VNNLIB 2.0)
/// joins the unsafe region through the inputs' copies among the outputs;
/// one decided on the box still drops or keeps its disjunct.
#[test]
fn vnnlib_2_input_constraints_that_cut_the_box_read_the_inputs_copies() {
    let head = "(vnnlib-version <2.0>)\n(declare-network N (declare-input X Real [2]) (declare-output Y Real [1]))\n\
                (assert (>= X[0] 0.0))(assert (<= X[0] 2.0))(assert (>= X[1] 0.0))(assert (<= X[1] 2.0))\n";
    let text = format!("{head}(assert (>= (+ (* 0.5 X[0]) (* 0.75 X[1])) 2.5))\n(assert (<= Y[0] 1.0))\n");
    let l = query_layout(&text, "c.vnnlib").unwrap().unwrap();
    assert_eq!((l.mirrors.clone(), l.n_outputs, l.is_simple()), (vec![0, 1], 3, false));
    let p = parse_vnnlib(&text, "c.vnnlib", 2, 3).unwrap();
    let region = &p.subproblems[0].unsafe_region;
    // −0.5·X[0] − 0.75·X[1] ≤ −2.5, on the copies (outputs 1 and 2).
    assert_eq!(
        region,
        &vec![vec![Halfspace::new(vec![1.0, 0.0, 0.0], 1.0), Halfspace::new(vec![0.0, -0.5, -0.75], -2.5)]]
    );
    // Holding nowhere on the box (≥ 3 needs 0.5·2 + 0.75·2 = 2.5 at most): no disjunct is left.
    let none = text.replace("2.5))\n(assert (<= Y", "3.0))\n(assert (<= Y");
    assert!(parse_vnnlib(&none, "c.vnnlib", 2, 3).unwrap().subproblems.iter().all(|sp| sp.unsafe_region.is_empty()));
}

/// A product counts as an output where a constraint also reads an input:
/// the input gets a copy among the outputs (review finding, 2026-11-29).
#[test]
fn vnnlib_2_a_product_beside_an_input_reads_the_inputs_copy() {
    let text = "(vnnlib-version <2.0>)\n(declare-network N (declare-input X Real [2]) (declare-output Y Real [1]))\n\
                (assert (>= X[0] 0.0))(assert (<= X[0] 2.0))(assert (>= X[1] 0.0))(assert (<= X[1] 2.0))\n\
                (assert (<= (+ (* X[0] Y[0]) X[1]) 3))\n";
    let l = query_layout(text, "p.vnnlib").unwrap().unwrap();
    assert_eq!((l.mirrors.clone(), l.products.clone(), l.n_outputs), (vec![1], vec![((0, 0), (1, 0))], 3));
    let p = parse_vnnlib(text, "p.vnnlib", 2, 3).unwrap();
    assert_eq!(p.subproblems[0].unsafe_region, vec![vec![Halfspace::new(vec![0.0, 1.0, 1.0], 3.0)]]);
}
