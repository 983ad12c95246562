//! Opt-in host sampling (`--features pprof`, `POLYCERT_PPROF=FILE`): samples
//! per thread, and flat and inclusive samples per function, written to FILE
//! at exit. The device machines have no `perf`; this is how a search's host
//! work was found there.

#[cfg(feature = "pprof")]
pub struct Guard(Option<(pprof::ProfilerGuard<'static>, String)>);

#[cfg(feature = "pprof")]
pub fn start() -> Guard {
    let Some(path) = std::env::var_os("POLYCERT_PPROF") else { return Guard(None) };
    let g = pprof::ProfilerGuardBuilder::default().frequency(997).build().ok();
    Guard(g.map(|g| (g, path.to_string_lossy().into_owned())))
}

#[cfg(feature = "pprof")]
impl Drop for Guard {
    fn drop(&mut self) {
        use std::collections::{HashMap, HashSet};
        let Some((g, path)) = self.0.take() else { return };
        let Ok(r) = g.report().build() else { return };
        let (mut flat, mut incl, mut total) = (HashMap::<String, usize>::new(), HashMap::<String, usize>::new(), 0);
        let mut threads = HashMap::<String, usize>::new();
        for (frames, &n) in &r.data {
            let n = n.max(0) as usize;
            total += n;
            *threads.entry(frames.thread_name.clone()).or_default() += n;
            if let Some(top) = frames.frames.first() {
                *flat.entry(top.first().map(|s| s.name()).unwrap_or_default()).or_default() += n;
            }
            let mut seen = HashSet::new();
            for f in &frames.frames {
                for s in f {
                    let name = s.name();
                    if seen.insert(name.clone()) {
                        *incl.entry(name).or_default() += n;
                    }
                }
            }
        }
        let mut out = format!("total samples {total}\n\n## threads\n");
        let sorted = |m: HashMap<String, usize>| {
            let mut v: Vec<_> = m.into_iter().collect();
            v.sort_by_key(|b| std::cmp::Reverse(b.1));
            v
        };
        for (k, n) in sorted(threads).into_iter().take(30) {
            out += &format!("{n:>8} {k}\n");
        }
        for (title, m, most) in [("flat", flat, 120), ("inclusive", incl, 250)] {
            out += &format!("\n## {title}\n");
            for (k, n) in sorted(m).into_iter().take(most) {
                out += &format!("{n:>8} {:>5.1}% {k}\n", 100.0 * n as f64 / total.max(1) as f64);
            }
        }
        let _ = std::fs::write(path, out);
    }
}

#[cfg(not(feature = "pprof"))]
pub struct Guard;

#[cfg(not(feature = "pprof"))]
pub fn start() -> Guard {
    Guard
}
