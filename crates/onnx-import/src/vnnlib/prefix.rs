//! The usual head of a VNN-COMP property read without building its
//! S-expressions: `(declare-const X_i Real)` and bounds on single inputs
//! (`(assert (<= X_i c))`), each on one line. It stops at the first other
//! form, and at any form the general path would refuse; the general parse
//! reads on from there, so the property and every error are the same.

use super::sexpr::{Pos, Sx};
use super::{Cls, Parser};
use std::borrow::Cow;

/// Most tokens of a form read here (the assert has 8).
const MAX_TOKENS: usize = 8;

impl Parser<'_> {
    /// Reads the prefix of `text` made of such forms, appending its bounds
    /// to `base`; the byte offset and position where the general parse
    /// starts, and whether any form was read.
    pub(super) fn fast_prefix(&mut self, text: &str, base: &mut Vec<Cls>) -> (usize, Pos, bool) {
        let mut read = false;
        let b = text.as_bytes();
        let (mut i, mut line, mut line_start) = (0, 1, 0);
        loop {
            while let Some(&c) = b.get(i) {
                match c {
                    b'\n' => (i, line, line_start) = (i + 1, line + 1, i + 1),
                    b' ' | b'\t' | b'\r' => i += 1,
                    b';' => i += b[i..].iter().position(|&c| c == b'\n').unwrap_or(b.len() - i),
                    _ => break,
                }
            }
            // Only ASCII whitespace lies between `line_start` and `i`.
            let pos = Pos { line, col: i - line_start + 1 };
            match tokens(&text[i..]).and_then(|(t, n, len)| self.fast_form(&t[..n], pos, base).then_some(len)) {
                Some(len) => (i, read) = (i + len, true),
                None => return (i, pos, read),
            }
        }
    }

    /// Applies one form (declaration or bound) if the general path would
    /// read it the same way without an error.
    fn fast_form(&mut self, t: &[&str], pos: Pos, base: &mut Vec<Cls>) -> bool {
        match t {
            ["(", "declare-const", name, "Real", ")"] => match self.var_name(name, pos) {
                Ok(Some((k, i))) if !self.declared[k][i] => {
                    self.declared[k][i] = true;
                    true
                }
                _ => false,
            },
            ["(", "assert", "(", op, a, b, ")", ")"] => match self.input_bound(op, &atom(a, pos), &atom(b, pos)) {
                Ok(Some(bound)) => {
                    base.push(bound);
                    true
                }
                _ => false,
            },
            _ => false,
        }
    }
}

/// The tokens of one parenthesised form at the start of `line` (ASCII
/// atoms and parentheses on one line, no comment), their number and the
/// form's length in bytes; `None` for anything else or more than
/// [`MAX_TOKENS`].
fn tokens(line: &str) -> Option<([&str; MAX_TOKENS], usize, usize)> {
    let b = line.as_bytes();
    let mut t = [""; MAX_TOKENS];
    let (mut n, mut depth, mut i) = (0, 0usize, 0);
    loop {
        while matches!(b.get(i), Some(b' ' | b'\t' | b'\r')) {
            i += 1;
        }
        let start = i;
        match *b.get(i)? {
            b'(' => depth += 1,
            b')' => depth = depth.checked_sub(1)?,
            c if plain(c) => {
                i += b[i..].iter().take_while(|&&c| plain(c)).count();
                i -= 1;
            }
            _ => return None,
        }
        i += 1;
        *t.get_mut(n)? = &line[start..i];
        n += 1;
        if depth == 0 {
            return (t[0] == "(").then_some((t, n, i));
        }
    }
}

fn atom(s: &str, pos: Pos) -> Sx<'_> {
    Sx::Atom(Cow::Borrowed(s), pos)
}

/// A byte of an atom that the general scanner reads the same way.
fn plain(c: u8) -> bool {
    c.is_ascii_graphic() && !matches!(c, b'(' | b')' | b';' | b'[' | b'"')
}

#[cfg(test)]
mod tests {
    /// Texts whose forms the prefix reads, stops at, or declines (errors
    /// included), each parsed as it is and again behind a leading
    /// `(set-info …)` on its first line that sends every form to the
    /// general path: the same property, or the same error.
    #[test]
    fn the_prefix_reads_as_the_general_path() {
        let head =
            "(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const Y_0 Real)\n(declare-const Y_1 Real)\n";
        let tails = [
            "(assert (<= X_0 0.5))\n(assert (>= X_0 -0.5)) ; c\n(assert (< -.25 X_1))\n(assert (> +1 X_1))\n(assert (<= Y_0 Y_1))\n",
            "(assert (<= X_0 0.5))\r\n(assert (or (and (>= X_0 0.1)) (and (<= X_0 0.2))))\n(assert (>= X_0 -0.5))\n(assert (>= X_1 0))(assert (<= X_1 1))\n(assert (<= Y_0 Y_1))\n",
            "(assert (<= X_0 0.5))\n(assert (>= X_0\n -0.5))\n(assert (>= X_1 0.0000000000000000001))\n(assert (<= X_1 1e-3))\n(assert (<= Y_0 0.5))\n",
            "(assert (<= X_0 0.5))\n(assert (>= X_0 -0.5))\n(assert (<= X_1 X_0))\n(assert (>= X_1 -1))\n(assert (<= Y_0 Y_1))\n",
            "(assert (<= X_0 0.5))\n(assert (>= X_0 0.6))\n(assert (>= X_1 0))(assert (<= X_1 1))\n(assert (<= Y_0 Y_1))\n",
            "(assert (<= X_0 0.5))\n(assert (<= X_2 0.5))\n",
            "(assert (<= X_0 1e500))\n",
            "(declare-const X_0 Real)\n",
            "(assert (<= X_0 0.5)))\n",
            "(assert (<= X_0 0.5)\n",
        ];
        for tail in tails {
            let text = format!("{head}{tail}");
            let fast = super::super::parse_vnnlib(&text, "p.vnnlib", 2, 2);
            let general = super::super::parse_vnnlib(&format!("(set-info :a b) {text}"), "p.vnnlib", 2, 2);
            let show = |r: &Result<_, super::super::VnnlibError>| match r {
                Ok(p) => format!("{p:?}"),
                Err(e) => e.to_string(),
            };
            assert_eq!(show(&fast), show(&general), "{tail}");
        }
    }
}
