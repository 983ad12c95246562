//! The progress line on stderr (terminals only: indicatif hides it
//! elsewhere): properties done and, while branch and bound runs, its
//! leaves and the bound it has proved so far (it only rises; above 0 is a
//! proof), read from the analyzers' shared
//! [`Progress`] a few times a second.

use indicatif::{ProgressBar, ProgressStyle};
use polycert_deeppoly::base::progress::{Progress, Snapshot};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

/// A bar over `jobs` properties, or a spinner (ticking by itself) for one.
pub fn bar(jobs: usize) -> ProgressBar {
    let (b, template) = if jobs > 1 {
        (ProgressBar::new(jobs as u64), "{bar:40} {pos}/{len} {elapsed_precise} {prefix} {msg}")
    } else {
        (ProgressBar::new_spinner(), "{spinner} {elapsed_precise} {msg}")
    };
    b.set_style(ProgressStyle::with_template(template).expect("valid template"));
    if jobs <= 1 {
        b.enable_steady_tick(Duration::from_millis(200));
    }
    b
}

/// A test set's part of the line: images certified so far, and the
/// budget left where there is one.
pub fn certified(n: usize, deadline: Option<std::time::Instant>) -> String {
    match deadline {
        Some(d) => {
            let left = d.saturating_duration_since(std::time::Instant::now()).as_secs_f64();
            format!("certified {n}, budget left {left:.1} s")
        }
        None => format!("certified {n}"),
    }
}

/// The search's part of the line, while one runs.
pub fn search_message(s: &Snapshot) -> Option<String> {
    if let Some(t) = s.stabilizing {
        return Some(format!(
            "stabilising: node {} ({} unstable inputs); {} made stable so far",
            t.node, t.unstable, t.made_stable
        ));
    }
    s.searching.then(|| {
        format!(
            "search: {} leaves proved, {} open, bound {:.3e} (proved above 0)",
            s.leaves_proved, s.leaves_open, s.weakest
        )
    })
}

/// Runs `f` while a thread copies the search's progress into `bar`, a few
/// times a second; the thread ends as soon as `f` returns (a process that
/// answers in milliseconds does not wait for its next tick).
pub fn while_running<R>(bar: &ProgressBar, progress: &Progress, f: impl FnOnce() -> R) -> R {
    let (done, ticks) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        s.spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = ticks.recv_timeout(Duration::from_millis(250)) {
                bar.set_message(search_message(&progress.snapshot()).unwrap_or_default());
            }
        });
        let r = f();
        drop(done);
        r
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The progress thread ends with `f`, not at its next tick (250 ms):
    /// every command used to wait for it before exiting.
    #[test]
    fn the_progress_thread_ends_with_the_work() {
        let (bar, progress) = (ProgressBar::hidden(), Progress::default());
        let start = std::time::Instant::now();
        assert_eq!(while_running(&bar, &progress, || 7), 7);
        assert!(start.elapsed() < Duration::from_millis(200), "{:?}", start.elapsed());
    }

    #[test]
    fn the_line_shows_a_running_search_or_stabilisation() {
        let s = Snapshot {
            searching: true,
            rounds: 7,
            leaves_proved: 1234,
            leaves_open: 56,
            weakest: -0.0125,
            stabilizing: None,
        };
        assert_eq!(
            search_message(&s).as_deref(),
            Some("search: 1234 leaves proved, 56 open, bound -1.250e-2 (proved above 0)")
        );
        assert_eq!(search_message(&Snapshot { searching: false, ..s }), None);
        let t = polycert_deeppoly::base::progress::Stabilizing { node: 7, unstable: 217, made_stable: 248 };
        let stab = Snapshot { searching: false, stabilizing: Some(t), ..s };
        assert_eq!(
            search_message(&stab).as_deref(),
            Some("stabilising: node 7 (217 unstable inputs); 248 made stable so far")
        );
    }
}
