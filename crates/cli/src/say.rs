//! Printing that never panics. `println!` panics when its pipe is closed
//! (`polycert verify | head -1`); these drop the text instead, so the run
//! goes on and its result files are still written.

/// `println!` to stdout, ignoring a closed pipe.
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}

/// `print!` to stdout, ignoring a closed pipe.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let mut o = std::io::stdout().lock();
        let _ = write!(o, $($t)*).and_then(|_| o.flush());
    }};
}

/// `eprintln!`, ignoring a closed pipe.
macro_rules! errln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($t)*);
    }};
}

/// `eprint!`, ignoring a closed pipe.
macro_rules! err {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr().lock(), $($t)*);
    }};
}

pub(crate) use {err, errln, out, outln};
