//! Which of two evaluators of the α/β rows runs faster (`RelaxedOn::Auto`):
//! plain timing state that the [`Analyzer`] holds; `crown/duals.rs` reads
//! and feeds it, branch and bound marks it shared while its workers run.
//!
//! [`Analyzer`]: crate::base::analyzer::Analyzer

/// [`crate::base::options::RelaxedOn::Auto`]'s measurements on one analyzer: per
/// evaluator (host, backend), the rounds of the α/β phase it ran and its
/// recent seconds per row evaluation (over its run of rounds, the older
/// halved each round; a new run starts afresh). The first
/// rounds alternate; after them the faster keeps the phase, and the other
/// runs again every `RETRY` rounds: a search's first rounds hold a few
/// leaves, where the backend's fixed costs weigh most, and which is faster
/// depends on the batch, the network and the machine
/// (bench/results/2026-11-25-relaxed-on-backend.md).
/// While other search workers or analyses share the host (`shared`), the
/// backend is picked: the host's evaluation is fast in wall time only with
/// every core to itself, and takes them from the others' work.
#[derive(Debug, Default)]
pub(crate) struct Clock {
    pub(crate) shared: bool,
    rounds: [usize; 2],
    per_eval: [f64; 2],
    /// Rounds since the slower evaluator last ran.
    since_slower: usize,
    /// The evaluator of the last round.
    last: Option<usize>,
}

// TRIALS and RETRY are not in `Options`: they steer only when `Auto`
// measures; `CrownOptions::relaxed_on` is the setting.
impl Clock {
    /// Rounds each evaluator is timed on before the choice.
    const TRIALS: usize = 3;
    /// The slower evaluator is timed again after this many rounds.
    const RETRY: usize = 16;

    fn faster(&self) -> usize {
        usize::from(self.per_eval[1] < self.per_eval[0])
    }

    pub(crate) fn pick_backend(&self) -> bool {
        if self.shared {
            return true;
        }
        if self.rounds.iter().any(|&r| r < Self::TRIALS) {
            return self.rounds[1] <= self.rounds[0];
        }
        (self.faster() == 1) != (self.since_slower >= Self::RETRY)
    }

    pub(crate) fn record(&mut self, backend: bool, seconds: f64, work: usize) {
        let k = usize::from(backend);
        if work == 0 {
            return;
        }
        if k == self.faster() {
            self.since_slower += 1;
        } else {
            self.since_slower = 0;
        }
        let per = seconds / work as f64;
        self.per_eval[k] = if self.last == Some(k) { 0.5 * (self.per_eval[k] + per) } else { per };
        self.rounds[k] += 1;
        self.last = Some(k);
    }
}

#[cfg(test)]
mod tests {
    use super::Clock;

    #[test]
    fn clock_alternates_then_keeps_the_faster() {
        let mut c = Clock::default();
        let mut picks = Vec::new();
        for _ in 0..6 {
            let b = c.pick_backend();
            picks.push(b);
            // The backend takes 1 s per 100 evaluations, the host 1 s per 50.
            c.record(b, 1.0, if b { 100 } else { 50 });
        }
        assert_eq!(picks, [true, false, true, false, true, false]);
        assert!(c.pick_backend());
        // Rounds without evaluations are not counted.
        let mut d = Clock::default();
        d.record(true, 5.0, 0);
        assert!(d.pick_backend());
        for _ in 0..3 {
            d.record(true, 1.0, 10);
            d.record(false, 1.0, 100);
        }
        assert!(!d.pick_backend());
        // Other workers on the host: the backend, whatever the timings.
        d.shared = true;
        assert!(d.pick_backend());
    }

    #[test]
    fn clock_times_the_slower_again_and_follows_a_change() {
        let mut c = Clock::default();
        // Small first rounds: the host is faster per evaluation.
        for _ in 0..3 {
            c.record(true, 1.0, 10);
            c.record(false, 1.0, 50);
        }
        let mut picks = Vec::new();
        for _ in 0..Clock::RETRY + 8 {
            let b = c.pick_backend();
            picks.push(b);
            // Larger rounds: now the backend is 4 times faster.
            c.record(b, 1.0, if b { 400 } else { 100 });
        }
        // The host keeps the phase until RETRY rounds after the backend's
        // last (the trials' host round included), then the backend is timed
        // again and takes over.
        let first = picks.iter().position(|&b| b);
        assert_eq!(first, Some(Clock::RETRY - 1));
        assert!(picks[Clock::RETRY - 1..].iter().all(|&b| b));
    }
}
