//! S-expressions with positions, and decimal literals as enclosing
//! intervals.

use polycert_interval::Interval;

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

/// A decimal literal (`12`, `-0.5`, `1e-3`, `.25`) as the tightest f64
/// interval holding its exact value: a point when the decimal is exactly an
/// f64, else the two neighbours of the nearest f64.
pub fn number(s: &str) -> Option<Result<Interval<f64>, String>> {
    let body = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mant, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    let digits_ok = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() && frac.is_empty() || !digits_ok(int) || !digits_ok(frac) {
        return None;
    }
    let e10: i64 = match exp {
        None => 0,
        Some(e) => {
            let ed = e.strip_prefix(['-', '+']).unwrap_or(e);
            if ed.is_empty() || !digits_ok(ed) {
                return None;
            }
            match e.parse::<i64>() {
                Ok(v) => v,
                Err(_) => return Some(Err(format!("exponent of '{s}' out of range"))),
            }
        }
    };
    let v: f64 = match s.parse() {
        Ok(v) => v,
        Err(_) => return None,
    };
    if !v.is_finite() {
        return Some(Err(format!("number '{s}' is out of the f64 range")));
    }
    let iv = if exact_decimal(&format!("{int}{frac}"), e10.saturating_sub(frac.len() as i64)) {
        Interval::point(v)
    } else {
        Interval::new(v.next_down(), v.next_up())
    };
    Some(iv.map_err(|e| e.to_string()))
}

/// Whether `digits × 10^e10` is exactly representable as an f64
/// (conservative: `false` when undecidable with u128 arithmetic).
fn exact_decimal(digits: &str, e10: i64) -> bool {
    let d = digits.trim_start_matches('0');
    if d.is_empty() {
        return true; // zero
    }
    let trimmed = d.trim_end_matches('0');
    let e10 = e10.saturating_add((d.len() - trimmed.len()) as i64);
    if trimmed.len() > 38 {
        return false;
    }
    let Ok(m) = trimmed.parse::<u128>() else { return false };
    // value = q · 2^e2 with q an integer
    let (q, e2) = if e10 >= 0 {
        let Some(p5) = u32::try_from(e10).ok().and_then(|e| 5u128.checked_pow(e)) else { return false };
        let Some(q) = m.checked_mul(p5) else { return false };
        (q, e10)
    } else {
        let Some(p5) = u32::try_from(-e10).ok().and_then(|e| 5u128.checked_pow(e)) else { return false };
        if m % p5 != 0 {
            return false;
        }
        (m / p5, e10)
    };
    let tz = q.trailing_zeros() as i64;
    let odd = q >> tz;
    let bits = 128 - odd.leading_zeros() as i64;
    // lowest set bit at 2^(e2+tz), highest at 2^(e2+tz+bits-1)
    bits <= 53 && e2 + tz >= -1074
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_inexact_decimals() {
        let p = |s: &str| number(s).unwrap().unwrap();
        assert_eq!(p("0.5"), Interval::point(0.5).unwrap());
        assert_eq!(p("-2"), Interval::point(-2.0).unwrap());
        assert_eq!(p("1e3"), Interval::point(1000.0).unwrap());
        assert_eq!(p("0.0"), Interval::point(0.0).unwrap());
        assert_eq!(p("0.25e1"), Interval::point(2.5).unwrap());
        let t = p("0.1");
        assert!(t.lo() < 0.1 && t.hi() > 0.1 && t.lo().next_up() == 0.1);
        let t = p("0.029999999329447746");
        assert!(t.lo() < t.hi());
        assert!(number("X_0").is_none());
        assert!(number("inf").is_none());
        assert!(number("1e999").unwrap().is_err());
        assert!(exact_decimal("5", -1) && !exact_decimal("3", -1));
        assert!(exact_decimal("9007199254740992", 0) && !exact_decimal("9007199254740993", 0));
    }

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
