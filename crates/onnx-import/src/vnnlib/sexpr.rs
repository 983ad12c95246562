//! S-expressions with positions. Atoms borrow the text where they can.

use std::borrow::Cow;

/// 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

/// An S-expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Sx<'t> {
    Atom(Cow<'t, str>, Pos),
    List(Vec<Sx<'t>>, Pos),
}

impl Sx<'_> {
    pub fn pos(&self) -> Pos {
        match self {
            Sx::Atom(_, p) | Sx::List(_, p) => *p,
        }
    }
}

/// The character at byte `i` of `text` and its length in bytes (ASCII
/// without decoding).
fn char_at(text: &str, i: usize) -> (char, usize) {
    match text.as_bytes()[i] {
        b if b.is_ascii() => (char::from(b), 1),
        _ => text[i..].chars().next().map_or(('\u{fffd}', 1), |c| (c, c.len_utf8())),
    }
}

/// A scan over the text: byte offset, 1-based line and column (characters).
struct Scan<'t> {
    text: &'t str,
    i: usize,
    line: usize,
    col: usize,
}

impl<'t> Scan<'t> {
    fn peek(&self) -> Option<(char, usize)> {
        (self.i < self.text.len()).then(|| char_at(self.text, self.i))
    }
    fn pos(&self) -> Pos {
        Pos { line: self.line, col: self.col }
    }
    /// Moves past `c` (of `len` bytes).
    fn bump(&mut self, c: char, len: usize) {
        self.i += len;
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
    }

    /// An atom from the current character: up to whitespace, a
    /// parenthesis or `;`. VNNLIB 2.0 indices (`X[0, 1]`) stay in one atom,
    /// spaces dropped.
    fn atom(&mut self) -> Cow<'t, str> {
        let start = self.i;
        // ASCII without brackets first, a byte at a time.
        let plain = |b: u8| b.is_ascii_graphic() && !matches!(b, b'(' | b')' | b';' | b'[');
        let run = self.text.as_bytes()[start..].iter().take_while(|&&b| plain(b)).count();
        self.i += run;
        self.col += run;
        let mut bracket = false;
        let mut spaced = false;
        while let Some((n, len)) = self.peek() {
            let stop = if bracket { n == '\n' } else { n.is_whitespace() || n == '(' || n == ')' || n == ';' };
            if stop && self.i > start {
                break;
            }
            self.bump(n, len);
            bracket = (bracket || n == '[') && n != ']';
            spaced |= n.is_whitespace();
        }
        let s = &self.text[start..self.i];
        if spaced { Cow::Owned(s.chars().filter(|c| !c.is_whitespace()).collect()) } else { Cow::Borrowed(s) }
    }

    /// A string literal from its opening quote: one atom, quotes kept.
    fn string(&mut self, pos: Pos) -> Result<Cow<'t, str>, (Pos, String)> {
        let start = self.i;
        let (q, len) = self.peek().expect("at the quote");
        self.bump(q, len);
        loop {
            let Some((n, len)) = self.peek() else { return Err((pos, "unclosed string literal".into())) };
            self.bump(n, len);
            if n == '"' {
                return Ok(Cow::Borrowed(&self.text[start..self.i]));
            }
        }
    }
}

/// Parses a whole file into its top-level expressions. Comments run from
/// `;` to the end of the line. No recursion, so deep nesting cannot
/// overflow the stack.
pub fn parse(text: &str) -> Result<Vec<Sx<'_>>, (Pos, String)> {
    parse_from(text, 0, Pos { line: 1, col: 1 })
}

/// [`parse`] of the text from byte `start`, which is at `pos` (after a
/// prefix read by `prefix.rs`).
pub fn parse_from(text: &str, start: usize, pos: Pos) -> Result<Vec<Sx<'_>>, (Pos, String)> {
    let mut stack: Vec<(Vec<Sx<'_>>, Pos)> = vec![(Vec::new(), pos)];
    let mut sc = Scan { text, i: start, line: pos.line, col: pos.col };
    while let Some((ch, len)) = sc.peek() {
        let pos = sc.pos();
        match ch {
            ';' => {
                while let Some((c, len)) = sc.peek().filter(|&(c, _)| c != '\n') {
                    sc.bump(c, len);
                }
            }
            '(' => {
                sc.bump(ch, len);
                stack.push((Vec::new(), pos));
            }
            ')' => {
                sc.bump(ch, len);
                if stack.len() == 1 {
                    return Err((pos, "unbalanced ')'".into()));
                }
                if let Some((items, start)) = stack.pop()
                    && let Some(top) = stack.last_mut()
                {
                    top.0.push(Sx::List(items, start));
                }
            }
            c if c.is_whitespace() => sc.bump(c, len),
            '"' => {
                let s = sc.string(pos)?;
                if let Some(top) = stack.last_mut() {
                    top.0.push(Sx::Atom(s, pos));
                }
            }
            _ => {
                let s = sc.atom();
                if let Some(top) = stack.last_mut() {
                    top.0.push(Sx::Atom(s, pos));
                }
            }
        }
    }
    if stack.len() > 1 {
        let open = stack.last().map_or(sc.pos(), |s| s.1);
        return Err((open, "unclosed '(' at end of file".into()));
    }
    Ok(stack.pop().map(|s| s.0).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_positions_and_errors() {
        let sx = parse("; c\n(assert (<= X_0 1))\n").unwrap();
        let Sx::List(items, p) = &sx[0] else { panic!() };
        assert_eq!(*p, Pos { line: 2, col: 1 });
        assert_eq!(items[1].pos(), Pos { line: 2, col: 9 });
        assert_eq!(parse("(a\n (b)").unwrap_err().0, Pos { line: 1, col: 1 });
        assert_eq!(parse("(a))").unwrap_err().0, Pos { line: 1, col: 4 });
    }
}
