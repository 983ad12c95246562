//! The code's shape: no source file over [`MAX_FILE_LINES`] lines and no
//! function over [`MAX_FN_LINES`], counted from its `fn` line to its closing
//! brace. A longer function needs a reason: a `// long: REASON` line among
//! the comments and attributes right above it, or an entry in [`ALLOWED`].
//!
//! Walks every `.rs` file of the workspace's `crates/*/{src,tests,benches,
//! examples}`, the crates' `build.rs` and `xtask/src`, except generated code
//! (a file marked `@generated` near its top).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 600;
const MAX_FN_LINES: usize = 80;

/// Long functions allowed for now: (file, function, why).
const ALLOWED: &[(&str, &str, &str)] = &[];

/// Long files allowed for now: (file, why).
const ALLOWED_FILES: &[(&str, &str)] = &[];

#[test]
fn files_and_functions_are_short() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut problems = Vec::new();
    let mut used = HashSet::new();
    for path in sources(&root) {
        let rel = path.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
        let src = std::fs::read_to_string(&path).unwrap();
        if generated(&src) {
            continue;
        }
        let lines: Vec<&str> = src.lines().collect();
        if lines.len() > MAX_FILE_LINES && !ALLOWED_FILES.iter().any(|(f, _)| *f == rel) {
            problems.push(format!("{rel}: {} lines (over {MAX_FILE_LINES})", lines.len()));
        }
        for f in functions(&src) {
            if f.lines <= MAX_FN_LINES || marked(&lines, f.line) {
                continue;
            }
            match ALLOWED.iter().position(|(p, n, _)| *p == rel && *n == f.name) {
                Some(k) => _ = used.insert(k),
                None => problems.push(format!(
                    "{rel}:{} fn {}: {} lines (over {MAX_FN_LINES}; split it, or mark it `// long: REASON`)",
                    f.line + 1,
                    f.name,
                    f.lines
                )),
            }
        }
    }
    for (k, (file, name, _)) in ALLOWED.iter().enumerate() {
        if !used.contains(&k) {
            problems.push(format!("{file} fn {name}: allowed as long but is not; remove it from ALLOWED"));
        }
    }
    assert!(problems.is_empty(), "the code's shape:\n{}", problems.join("\n"));
}

/// The `.rs` files this test checks, in a fixed order.
fn sources(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut crates: Vec<PathBuf> =
        std::fs::read_dir(root.join("crates")).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    crates.sort();
    for c in &crates {
        for sub in ["src", "tests", "benches", "examples"] {
            walk(&c.join(sub), &mut out);
        }
        if c.join("build.rs").is_file() {
            out.push(c.join("build.rs"));
        }
    }
    walk(&root.join("xtask/src"), &mut out);
    assert!(out.len() > 100, "found only {} source files under {}", out.len(), root.display());
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut paths: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Generated code says so near its top (prost's output, `onnx_pb.rs`).
fn generated(src: &str) -> bool {
    src.lines().take(5).any(|l| l.trim_start().starts_with("//") && l.contains("@generated"))
}

/// Whether the comments and attributes right above line `fn_line` hold a
/// `// long: REASON` (or `/// long: REASON`) line.
fn marked(lines: &[&str], fn_line: usize) -> bool {
    lines[..fn_line]
        .iter()
        .rev()
        .map(|l| l.trim())
        .take_while(|l| l.starts_with("//") || l.starts_with("#["))
        .any(|l| l.trim_start_matches('/').trim_start().strip_prefix("long:").is_some_and(|r| !r.trim().is_empty()))
}

/// A function with a body: its name, the line of its `fn` (from 0) and its
/// length in lines, that line and the closing brace's included.
#[derive(Debug, PartialEq)]
struct Function {
    name: String,
    line: usize,
    lines: usize,
}

/// The functions with a body in `src`, nested ones included.
fn functions(src: &str) -> Vec<Function> {
    let code = code_only(src);
    let line_of = |at: usize| code[..at].iter().filter(|&&c| c == b'\n').count();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(k) = find_word(&code, b"fn", i) {
        i = k + 2;
        let start = skip_space(&code, i);
        let end = start + code[start..].iter().take_while(|&&c| ident(c)).count();
        if end == start || start == i {
            continue; // a `fn(..)` pointer type
        }
        let Some(open) = body_start(&code, end) else { continue };
        let Some(close) = matching_brace(&code, open) else { continue };
        let name = String::from_utf8_lossy(&code[start..end]).trim_start_matches("r#").to_string();
        let line = line_of(k);
        out.push(Function { name, line, lines: line_of(close) - line + 1 });
    }
    out
}

fn ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'#'
}

/// The next `word` at or after `from` that stands alone.
fn find_word(code: &[u8], word: &[u8], from: usize) -> Option<usize> {
    (from..code.len().saturating_sub(word.len() - 1)).find(|&k| {
        code[k..].starts_with(word)
            && (k == 0 || !ident(code[k - 1]))
            && code.get(k + word.len()).is_none_or(|&c| !ident(c))
    })
}

fn skip_space(code: &[u8], mut i: usize) -> usize {
    while code.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// The `{` that opens the body of the signature from `from`, or `None`
/// where a `;` ends it first (a declaration without body).
fn body_start(code: &[u8], from: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (k, &c) in code.iter().enumerate().skip(from) {
        match c {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            b'{' if depth == 0 => return Some(k),
            b';' if depth == 0 => return None,
            _ => {}
        }
    }
    None
}

fn matching_brace(code: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, &c) in code.iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

/// `src` with its comments, string and character literals blanked out
/// (newlines kept), so that only code's braces and `fn`s remain.
fn code_only(src: &str) -> Vec<u8> {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    while i < b.len() {
        let end = match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |n| i + n),
            b'/' if b.get(i + 1) == Some(&b'*') => block_comment_end(b, i),
            b'"' => string_end(b, i),
            b'r' | b'b' if i == 0 || !ident(b[i - 1]) => raw_string_end(b, i).unwrap_or(i + 1),
            b'\'' => char_end(b, i).unwrap_or(i + 1),
            _ => i + 1,
        };
        if end > i + 1 {
            out[i..end].iter_mut().filter(|c| **c != b'\n').for_each(|c| *c = b' ');
        }
        i = end;
    }
    out
}

fn block_comment_end(b: &[u8], from: usize) -> usize {
    let (mut depth, mut i) = (0usize, from);
    while i + 1 < b.len() {
        if b[i] == b'/' && b[i + 1] == b'*' {
            depth += 1;
            i += 2;
        } else if b[i] == b'*' && b[i + 1] == b'/' {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    b.len()
}

/// The end of the string literal whose `"` is at `from`.
fn string_end(b: &[u8], from: usize) -> usize {
    let mut i = from + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// The end of the raw string (`r"…"`, `br#"…"#`) starting at `from`, if one does.
fn raw_string_end(b: &[u8], from: usize) -> Option<usize> {
    let mut i = from + usize::from(b[from] == b'b');
    if b.get(i) != Some(&b'r') {
        return None;
    }
    i += 1;
    let hashes = b[i..].iter().take_while(|&&c| c == b'#').count();
    i += hashes;
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
    let n = b[i + 1..].windows(close.len()).position(|w| w == close)?;
    Some(i + 1 + n + close.len())
}

/// The end of the character literal whose `'` is at `from`, or `None` for a
/// lifetime or label.
fn char_end(b: &[u8], from: usize) -> Option<usize> {
    let first = *b.get(from + 1)?;
    if first == b'\\' {
        let n = b[from + 3..].iter().position(|&c| c == b'\'')?;
        return Some(from + 3 + n + 1);
    }
    let width = match first {
        0x00..0x80 => 1,
        0xC0..0xE0 => 2,
        0xE0..0xF0 => 3,
        _ => 4,
    };
    (b.get(from + 1 + width) == Some(&b'\'')).then_some(from + 2 + width)
}

#[test]
fn the_scanner_skips_braces_in_literals_and_comments() {
    let src = concat!(
        "/// A { in a doc comment\n",
        "fn a<'x>(s: &'x str) -> char {\n",
        "    let _ = \"}\\\"}\";\n",
        "    let _ = r#\"}\"#;\n",
        "    let _ = ['}', '\\'', '\\u{7d}'];\n",
        "    /* } /* } */ */\n",
        "    'outer: loop { break 'outer; }\n",
        "    '{'\n",
        "}\n",
        "fn b(f: fn(u8) -> u8) -> u8 { f(1) }\n",
        "trait T { fn c(&self); }\n",
    );
    let names = |v: Vec<Function>| v.into_iter().map(|f| (f.name, f.line, f.lines)).collect::<Vec<_>>();
    assert_eq!(names(functions(src)), [("a".to_string(), 1, 8), ("b".to_string(), 9, 1)]);
}

#[test]
fn a_marker_needs_a_reason() {
    let lines = ["// long: one table", "#[inline]", "fn f() {", "/// long:", "fn g() {"];
    assert!(marked(&lines, 2));
    assert!(!marked(&lines, 4));
}
