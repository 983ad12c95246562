//! Opt-in wall-clock accounting of the analysis's phases
//! (`POLYCERT_PROFILE=1`): where one property's time goes, above the
//! backend's own per-call trace. Off, a span costs one relaxed load.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

/// 0: not read yet, 1: off, 2: on.
static STATE: AtomicU8 = AtomicU8::new(0);
static PHASES: Mutex<BTreeMap<&'static str, (u64, f64)>> = Mutex::new(BTreeMap::new());

pub(crate) fn on() -> bool {
    match STATE.load(Ordering::Relaxed) {
        0 => {
            let on = std::env::var_os("POLYCERT_PROFILE").is_some_and(|v| v != "0");
            STATE.store(if on { 2 } else { 1 }, Ordering::Relaxed);
            on
        }
        s => s == 2,
    }
}

/// Times a phase until dropped (phases may nest; each is counted alone).
pub struct Span {
    name: &'static str,
    start: Option<Instant>,
}

pub fn span(name: &'static str) -> Span {
    Span { name, start: on().then(Instant::now) }
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some(t) = self.start
            && let Ok(mut m) = PHASES.lock()
        {
            let e = m.entry(self.name).or_default();
            e.0 += 1;
            e.1 += t.elapsed().as_secs_f64();
        }
    }
}

/// The phases so far, one line each (empty when profiling is off).
pub fn report() -> String {
    let Ok(m) = PHASES.lock() else { return String::new() };
    let mut s = String::new();
    for (name, (n, t)) in m.iter() {
        s += &format!(
            "  {name:>24}: {n:>7} calls, {:>10.3} ms, {:>8.1} us each\n",
            t * 1e3,
            t * 1e6 / (*n).max(1) as f64
        );
    }
    s
}
