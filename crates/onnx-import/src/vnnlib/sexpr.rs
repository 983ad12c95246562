//! S-expressions with positions.

/// 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

/// An S-expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Sx {
    Atom(String, Pos),
    List(Vec<Sx>, Pos),
}

impl Sx {
    pub fn pos(&self) -> Pos {
        match self {
            Sx::Atom(_, p) | Sx::List(_, p) => *p,
        }
    }
}

/// Parses a whole file into its top-level expressions. Comments run from
/// `;` to the end of the line. No recursion, so deep nesting cannot
/// overflow the stack.
pub fn parse(text: &str) -> Result<Vec<Sx>, (Pos, String)> {
    let mut stack: Vec<(Vec<Sx>, Pos)> = vec![(Vec::new(), Pos { line: 1, col: 1 })];
    let (mut line, mut col) = (1, 1);
    let mut chars = text.chars().peekable();
    while let Some(ch) = chars.next() {
        let pos = Pos { line, col };
        let mut advance = |c: char| {
            if c == '\n' {
                line += 1;
                col = 1;
            } else {
                col += 1;
            }
        };
        advance(ch);
        match ch {
            ';' => {
                while let Some(&c) = chars.peek() {
                    if c == '\n' {
                        break;
                    }
                    advance(c);
                    chars.next();
                }
            }
            '(' => stack.push((Vec::new(), pos)),
            ')' => {
                if stack.len() == 1 {
                    return Err((pos, "unbalanced ')'".into()));
                }
                if let Some((items, start)) = stack.pop()
                    && let Some(top) = stack.last_mut()
                {
                    top.0.push(Sx::List(items, start));
                }
            }
            c if c.is_whitespace() => {}
            '"' => {
                // A string literal (VNNLIB 2.0 names a hidden tensor with
                // one): one atom, its quotes kept.
                let mut s = String::from('"');
                loop {
                    let Some(n) = chars.next() else { return Err((pos, "unclosed string literal".into())) };
                    advance(n);
                    s.push(n);
                    if n == '"' {
                        break;
                    }
                }
                if let Some(top) = stack.last_mut() {
                    top.0.push(Sx::Atom(s, pos));
                }
            }
            c => {
                // VNNLIB 2.0 indices (`X[0, 1]`) stay in one atom, spaces dropped.
                let mut s = String::from(c);
                let mut bracket = c == '[';
                while let Some(&n) = chars.peek() {
                    if !bracket && (n.is_whitespace() || n == '(' || n == ')' || n == ';') || n == '\n' && bracket {
                        break;
                    }
                    advance(n);
                    chars.next();
                    bracket = (bracket || n == '[') && n != ']';
                    if !n.is_whitespace() {
                        s.push(n);
                    }
                }
                if let Some(top) = stack.last_mut() {
                    top.0.push(Sx::Atom(s, pos));
                }
            }
        }
    }
    if stack.len() > 1 {
        let open = stack.last().map_or(Pos { line, col }, |s| s.1);
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
