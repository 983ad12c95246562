//! The crate's layers: a module may use only its own layer and those
//! below it. Every `crate::` path in `src/` (code and tests, comments
//! aside) is checked against [`LAYERS`]; `lib.rs`, which composes them and
//! re-exports the public API, is exempt. Inside the crate, paths name a
//! layer (`crate::base::ir::Op`), never a top-level re-export (`crate::Op`).

use std::path::Path;

/// The layers, lowest first: a module of rank `r` may use modules of rank
/// `≤ r`. `testnets` (test networks) and `conformance` (the backend
/// conformance suite) are compiled only for tests and sit at the ends.
const LAYERS: &[(&str, usize)] = &[
    ("base", 0),
    ("testnets", 0),
    ("gpupoly", 1),
    ("crown", 2),
    ("attack", 3),
    ("bab", 4),
    ("driver", 5),
    ("conformance", 6),
];

fn rank(module: &str) -> Option<usize> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|&(_, r)| r)
}

/// Every `crate::NAME` in `code` (not `$crate::`), with its line number;
/// `NAME` is `{` for a grouped `crate::{..}` import.
fn crate_paths(code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let line = line.split("//").next().unwrap_or("");
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let before = rest[..at].chars().next_back();
            let after = &rest[at + "crate::".len()..];
            if !before.is_some_and(|c| c == '$' || c == '_' || c.is_alphanumeric()) {
                let name: String = after.chars().take_while(|c| *c == '_' || c.is_alphanumeric()).collect();
                out.push((n + 1, if name.is_empty() { after.chars().take(1).collect() } else { name }));
            }
            rest = after;
        }
    }
    out
}

fn visit(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).expect("src is readable") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            visit(&p, files);
        } else if p.extension().is_some_and(|x| x == "rs") {
            files.push(p);
        }
    }
}

#[test]
fn no_layer_uses_a_higher_one() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    visit(&src, &mut files);
    files.sort();
    let mut bad = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).expect("under src");
        let top =
            rel.components().next().expect("a path").as_os_str().to_string_lossy().trim_end_matches(".rs").to_string();
        if top == "lib" {
            continue;
        }
        let Some(own) = rank(&top) else {
            bad.push(format!("{}: module `{top}` is not in the layer table", rel.display()));
            continue;
        };
        let code = std::fs::read_to_string(f).expect("readable");
        for (line, name) in crate_paths(&code) {
            match rank(&name) {
                Some(r) if r <= own => {}
                Some(_) => bad.push(format!("{}:{line}: `{top}` uses the higher layer `{name}`", rel.display())),
                None => bad.push(format!("{}:{line}: `crate::{name}` names no layer", rel.display())),
            }
        }
    }
    assert!(files.len() > 40, "found only {} source files", files.len());
    assert!(bad.is_empty(), "layer violations:\n{}", bad.join("\n"));
}

#[test]
fn the_scanner_sees_paths() {
    let code = "use crate::base::ir::Op; // crate::bab in a comment\nlet x = $crate::driver; f(crate::crown::x, my_crate::y);\nuse crate::{a, b};";
    let got: Vec<String> = crate_paths(code).into_iter().map(|(_, n)| n).collect();
    assert_eq!(got, ["base", "crown", "{"]);
}
