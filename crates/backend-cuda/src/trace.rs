//! Opt-in accounting of host time spent in transfers, allocations and
//! syncs (`POLYCERT_CUDA_TRACE=1`), printed to stderr when the backend is
//! dropped: the share of an analysis that is not kernel time.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Instant;

pub const ALLOC: usize = 0;
pub const UPLOAD: usize = 1;
pub const DOWNLOAD: usize = 2;
const NAMES: [&str; 3] = ["alloc", "upload", "download (incl. wait)"];

pub struct Trace {
    on: bool,
    start: Instant,
    acc: Mutex<[(u64, f64); 3]>,
    spans: Mutex<BTreeMap<&'static str, (u64, f64, f64)>>,
}

/// Times one backend call until dropped.
pub struct Span<'a> {
    trace: &'a Trace,
    name: &'static str,
    start: Option<Instant>,
}

impl Drop for Span<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.start
            && let Ok(mut m) = self.trace.spans.lock()
        {
            let e = m.entry(self.name).or_default();
            let dt = t.elapsed().as_secs_f64();
            e.0 += 1;
            e.1 += dt;
            e.2 = e.2.max(dt);
        }
    }
}

impl Trace {
    pub fn from_env() -> Self {
        let on = std::env::var_os("POLYCERT_CUDA_TRACE").is_some_and(|v| v != "0");
        Self { on, start: Instant::now(), acc: Mutex::new([(0, 0.0); 3]), spans: Mutex::default() }
    }

    pub fn span(&self, name: &'static str) -> Span<'_> {
        Span { trace: self, name, start: self.on.then(Instant::now) }
    }

    pub fn time<R>(&self, what: usize, f: impl FnOnce() -> R) -> R {
        if !self.on {
            return f();
        }
        let t = Instant::now();
        let r = f();
        if let Ok(mut a) = self.acc.lock() {
            a[what].0 += 1;
            a[what].1 += t.elapsed().as_secs_f64();
        }
        r
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        if !self.on {
            return;
        }
        let Ok(a) = self.acc.lock() else { return };
        eprintln!("cuda trace over {:.3} s:", self.start.elapsed().as_secs_f64());
        for (name, (n, s)) in NAMES.iter().zip(a.iter()) {
            eprintln!("  {name:>22}: {n:>8} calls, {:>9.3} ms, {:>6.1} us each", s * 1e3, s * 1e6 / (*n).max(1) as f64);
        }
        if let Ok(m) = self.spans.lock() {
            let total: f64 = m.values().map(|v| v.1).sum();
            eprintln!("  backend calls: {:.3} ms in all", total * 1e3);
            for (name, (n, s, mx)) in m.iter() {
                let each = s * 1e6 / (*n).max(1) as f64;
                eprintln!(
                    "  {name:>22}: {n:>8} calls, {:>9.3} ms, {each:>6.1} us each, max {:.1} us",
                    s * 1e3,
                    mx * 1e6
                );
            }
        }
    }
}
