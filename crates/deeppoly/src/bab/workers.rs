//! Search workers: a branch and bound's rounds run on several threads at
//! once, each with its own analyzer on its own fork of the backend (on a
//! GPU its own stream), taking leaves from one shared open list.
//!
//! A round is mostly host work (bench/results/2026-11-26-search-workers.md),
//! so a second worker's rounds fill the first's gaps. The open list stays depth first: a worker
//! takes the newest leaves and puts its children on top.
//!
//! **Why it is sound.** A worker analyses its leaves exactly as a single
//! search does; the pool only decides who analyses which leaf. The verdict
//! is *proved* only once no leaf is open, none is in flight and none was
//! given up.

use crate::attack::falsify::Share;
use crate::bab::gate::RefineGate;
use crate::bab::openlist::{OpenList, weakest_of};
use crate::bab::picks::Picks;
use crate::bab::search::{Branching, Leaf, RootTally, Search};
use crate::base::analyzer::{AnalysisError, Analyzer};
use crate::base::backend::{Backend, BackendError};
use crate::base::bounds::NodeBounds;
use crate::base::budget::Budget;
use crate::base::property::SearchStats;
use crate::base::property::{Counterexample, SubProblem};
use polycert_interval::Fp;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// What every worker of one search shares, read-only.
pub(crate) struct Plan<'s> {
    /// The sub-problem searched (input restarts attack it).
    pub sp: &'s SubProblem,
    pub how: Branching,
    /// Leaves per round.
    pub cap: usize,
    /// Its deadline and leaf limit.
    pub budget: Budget,
    /// The fewest leaves a worker takes while more are open
    /// (`SearchOptions::min_round`).
    pub min_round: usize,
}

/// A worker's own steering state (heuristics only).
pub(crate) struct WorkerState {
    pub picks: Picks,
    pub gate: Option<RefineGate>,
    pub share: Share,
    pub restarts: Restarts,
}

/// An input search's random restarts: their time share and the seed of
/// the next start.
pub(crate) struct Restarts {
    pub share: Share,
    pub seed: u32,
}

/// What one round did to its leaves.
pub(crate) struct Round<T> {
    /// Per leaf analysed: its root, and whether it is done (proved, or
    /// dropped with its parent's other candidate).
    pub done: Vec<(usize, bool)>,
    pub proved: usize,
    /// The roots of the open leaves, each split or given up.
    pub split: Vec<usize>,
    /// The roots of the leaves that could not be split.
    pub stuck: Vec<usize>,
    pub children: Vec<Leaf<T>>,
    /// The smallest bound of the leaves that could not be split (`∞`: none).
    pub stuck_weakest: f64,
    /// The smallest margin by which a kept leaf closed a disjunct (`∞`: none).
    pub closed: f64,
    pub falsified: Option<Counterexample>,
}

impl<T> Default for Round<T> {
    fn default() -> Self {
        Self {
            done: Vec::new(),
            proved: 0,
            split: Vec::new(),
            stuck: Vec::new(),
            children: Vec::new(),
            stuck_weakest: f64::INFINITY,
            closed: f64::INFINITY,
            falsified: None,
        }
    }
}

/// The shared open list and the search's accounting.
struct Pool<'t, T> {
    open: OpenList<T>,
    /// Leaves that cannot be split, or of a root given up.
    stuck: usize,
    /// Leaves of rounds cut short by the deadline (still open).
    lost: usize,
    /// The smallest bound of the stuck and lost leaves (`openlist.rs`).
    floor: f64,
    /// The smallest bound of each round in flight.
    inflight: Vec<f64>,
    /// The smallest margin by which a leaf closed a disjunct.
    closed: f64,
    analysed: usize,
    /// Rounds in flight.
    busy: usize,
    end: Option<Result<Search, AnalysisError>>,
    stats: &'t mut SearchStats,
    tally: &'t mut RootTally,
    /// Bytes the open leaves hold in inherited bounds (`Leaf::held`), and
    /// the most they may (`SearchOptions::memory`).
    held: usize,
    memory: usize,
    /// Per root, its analysed bounds (its first children's prior), which
    /// a leaf past `memory` keeps instead of its parent's.
    root_bounds: Vec<Option<Arc<NodeBounds<T>>>>,
}

struct Shared<'t, 's, T> {
    pool: Mutex<Pool<'t, T>>,
    wake: Condvar,
    plan: &'s Plan<'s>,
    proofs_only: bool,
    live: crate::base::progress::Live<'s>,
    /// Threads that take from the pool (a helper joins once its analyzer
    /// is prepared).
    workers: AtomicUsize,
}

impl<T> Pool<'_, T> {
    /// The search's weakest bound now (`openlist.rs`): `∞` once no leaf is
    /// left unproved.
    fn weakest(&self) -> f64 {
        self.inflight.iter().fold(self.open.weakest().min(self.floor), |m, &b| m.min(b))
    }
}

impl<'t, T> Shared<'t, '_, T> {
    fn lock(&self) -> MutexGuard<'_, Pool<'t, T>> {
        // A worker that panicked leaves the pool as it was: carry on.
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next round's leaves and their smallest bound, or `None` once
    /// the search is over.
    fn take(&self) -> Option<(Vec<Leaf<T>>, f64)> {
        let plan = self.plan;
        let mut p = self.lock();
        loop {
            if p.end.is_some() {
                return None;
            }
            if p.open.is_empty() {
                if p.busy == 0 {
                    return None;
                }
                p = self.wake.wait(p).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            self.live.round(p.stats.leaves_proved, p.open.len() + p.stuck, p.weakest());
            let late = plan.budget.expired();
            if late || plan.budget.out_of_leaves(p.analysed) {
                if !late {
                    p.stats.leaf_limit = plan.budget.leaves();
                }
                p.end = Some(Ok(Search::Open { timed_out: late }));
                self.wake.notify_all();
                return None;
            }
            // ReLU leaves depth first (the newest), so the open list stays
            // short; input leaves weakest first (a few inputs keep the list
            // small), which is also where counterexamples are.
            if plan.how == Branching::Inputs {
                p.open.sort_weakest_on_top();
            }
            if p.tally.limit < usize::MAX {
                let p = &mut *p;
                let before = p.open.len();
                let tally = &mut *p.tally;
                let dropped = p.open.retain(|l| {
                    let over = tally.analysed[l.root] >= tally.limit;
                    tally.stuck[l.root] |= over;
                    !over
                });
                p.floor = p.floor.min(dropped);
                p.held = p.open.leaves().iter().map(|l| l.held).sum();
                // Leaves of a root given up stay open.
                p.stuck += before - p.open.len();
                if p.open.is_empty() {
                    continue;
                }
            }
            // With several workers, a round takes its share of a short
            // list, but not under `min_round` leaves. A parent's candidate
            // children are analysed together.
            let share = p.open.len().div_ceil(self.workers.load(Ordering::Relaxed)).max(plan.min_round);
            let take = plan.cap.min(share);
            let mut cut = p.open.len().saturating_sub(take);
            let open = p.open.leaves();
            while cut > 0 && open[cut].pick.is_some_and(|a| open[cut - 1].pick.is_some_and(|b| b.0 == a.0)) {
                cut -= 1;
            }
            p.busy += 1;
            let leaves = p.open.split_off(cut);
            p.held = p.held.saturating_sub(leaves.iter().map(|l| l.held).sum());
            let weakest = weakest_of(&leaves);
            p.inflight.push(weakest);
            return Some((leaves, weakest));
        }
    }

    /// Records a round of `n` leaves whose smallest bound was `weakest`.
    fn apply(&self, (n, weakest): (usize, f64), r: Result<Round<T>, AnalysisError>) {
        let mut p = self.lock();
        let p = &mut *p;
        p.busy -= 1;
        if let Some(k) = p.inflight.iter().position(|b| b.to_bits() == weakest.to_bits()) {
            p.inflight.swap_remove(k);
        }
        self.wake.notify_all();
        let r = match r {
            Ok(r) => r,
            Err(AnalysisError::Timeout) => {
                p.lost += n;
                p.floor = p.floor.min(weakest);
                p.end.get_or_insert(Ok(Search::Open { timed_out: true }));
                return;
            }
            Err(e) => {
                p.lost += n;
                p.floor = p.floor.min(weakest);
                if !matches!(p.end, Some(Err(_))) {
                    p.end = Some(Err(e));
                }
                return;
            }
        };
        // The budget counts every leaf analysed, a dropped candidate's too.
        p.analysed += n;
        p.stats.leaves_analysed += n;
        p.stats.leaves_proved += r.proved;
        for (root, done) in r.done {
            p.tally.analysed[root] += 1;
            if done {
                p.tally.outstanding[root] -= 1;
            }
        }
        if let Some(c) = r.falsified {
            // Its leaves are not proved: a counterexample lies in one.
            p.floor = p.floor.min(weakest);
            if !matches!(p.end, Some(Ok(Search::Falsified(_)))) {
                p.end = Some(Ok(Search::Falsified(c)));
            }
            return;
        }
        p.closed = p.closed.min(r.closed);
        p.floor = p.floor.min(r.stuck_weakest);
        p.stuck += r.stuck.len();
        r.stuck.into_iter().for_each(|root| p.tally.stuck[root] = true);
        r.split.into_iter().for_each(|root| p.tally.outstanding[root] -= 1);
        r.children.iter().for_each(|c| p.tally.outstanding[c.root] += 1);
        let mut children = r.children;
        for c in &mut children {
            // A root's first children are its own: no other leaf of it is open yet.
            let root = &mut p.root_bounds[c.root];
            if root.is_none() {
                *root = c.prior.clone();
            }
            if p.held + c.held <= p.memory {
                p.held += c.held;
            } else {
                c.keep_root_bounds(p.root_bounds[c.root].clone());
                p.stats.leaves_from_root += 1;
            }
        }
        p.open.extend(children);
    }
}

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// Search workers asked for: `SearchOptions::workers`, else the
    /// backend's.
    fn worker_count(&self) -> usize {
        self.opts.search.workers.unwrap_or_else(|| self.backend.search_workers()).max(1)
    }

    /// Runs the search of `plan` from the leaves `open` with this analyzer
    /// and, where there are more workers, analyzers on forks of its backend.
    pub(crate) fn run_workers(
        &self,
        plan: &Plan<'_>,
        open: Vec<Leaf<T>>,
        stats: &mut SearchStats,
        tally: &mut RootTally,
    ) -> Result<Search, AnalysisError> {
        let start = std::time::Instant::now();
        let forks = self.forks(self.worker_count() - 1)?;
        let proofs_only = tally.proofs_only;
        let roots = tally.outstanding.len();
        let pool = Pool {
            held: open.iter().map(|l| l.held).sum(),
            memory: self.opts.search.memory.unwrap_or(usize::MAX),
            root_bounds: vec![None; roots],
            open: OpenList::new(open),
            stuck: 0,
            lost: 0,
            floor: f64::INFINITY,
            inflight: Vec::new(),
            closed: f64::INFINITY,
            analysed: 0,
            busy: 0,
            end: None,
            stats,
            tally,
        };
        let shared = Shared {
            pool: Mutex::new(pool),
            wake: Condvar::new(),
            plan,
            proofs_only,
            live: crate::base::progress::Progress::live(self.opts.progress.as_deref()),
            workers: AtomicUsize::new(1),
        };
        let (net, opts) = (self.net, &self.opts);
        // With other workers on the host, the α/β rows go to the backend.
        let several = !forks.is_empty();
        self.relaxed_clock.borrow_mut().shared = several || opts.host_shared;
        std::thread::scope(|s| {
            for (k, be) in forks.iter().enumerate() {
                let shared = &shared;
                // A fork whose analyzer cannot be prepared takes no part.
                s.spawn(move || {
                    if let Ok(a) = Analyzer::new(net, be, opts.clone()) {
                        a.relaxed_clock.borrow_mut().shared = true;
                        shared.workers.fetch_add(1, Ordering::Relaxed);
                        a.work(shared, k + 1);
                    }
                });
            }
            self.work(&shared, 0);
        });
        self.relaxed_clock.borrow_mut().shared = opts.host_shared;
        let live = shared.live;
        let pool = shared.pool.into_inner().unwrap_or_else(|e| e.into_inner());
        pool.stats.seconds += start.elapsed().as_secs_f64();
        self.conclude(pool, &live)
    }

    /// The search's answer from its pool after the last worker stopped.
    fn conclude(&self, pool: Pool<'_, T>, live: &crate::base::progress::Live<'_>) -> Result<Search, AnalysisError> {
        let weakest = pool.weakest();
        let Pool { open, stuck, lost, end, stats, closed, .. } = pool;
        // Unproved leaves left: the weakest of them; else the proof's margin.
        stats.best_bound = stats.best_bound.min(if weakest < f64::INFINITY { weakest } else { closed });
        let left = open.len();
        // Freeing a long open list's bounds takes seconds (580k leaves of
        // 256x6 after 300 s): not on the way to the answer.
        if left >= self.opts.search.free_apart {
            // Where no thread can be started, the list is freed here.
            let _ = std::thread::Builder::new().name("free-open-leaves".into()).spawn(move || drop(open));
        }
        match end {
            Some(Ok(Search::Open { timed_out })) => {
                stats.leaves_open += left + stuck + lost;
                Ok(Search::Open { timed_out })
            }
            Some(end) => end,
            None => {
                live.round(stats.leaves_proved, stuck, stats.best_bound);
                if stuck > 0 {
                    stats.leaves_open += stuck;
                    return Ok(Search::Open { timed_out: false });
                }
                Ok(Search::Proved)
            }
        }
    }

    /// `n` forks of the backend (fewer where it has none).
    fn forks(&self, n: usize) -> Result<Vec<B>, AnalysisError> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            match self.backend.fork()? {
                Some(b) => out.push(b),
                None => break,
            }
        }
        Ok(out)
    }

    /// One worker (`index` 0 is the calling thread's): rounds until the
    /// pool says the search is over. Its random restarts draw from its own
    /// range of seeds, so workers do not repeat each other's starts.
    fn work(&self, shared: &Shared<'_, '_, T>, index: usize) {
        let plan = shared.plan;
        let mut w = WorkerState {
            picks: Picks::new(self.opts.search.picks.clone()),
            gate: (plan.how == Branching::Relus && self.opts.search.gate.on)
                .then(|| RefineGate::new(self.opts.search.gate.clone())),
            share: Share::new(self.opts.attack.corner_share, 0.0),
            restarts: Restarts {
                share: Share::new(self.opts.attack.corner_share, self.opts.attack.restart_grace),
                seed: worker_seed(index),
            },
        };
        while let Some((leaves, weakest)) = shared.take() {
            let n = leaves.len();
            // A panicking round ends the search with an error instead of
            // leaving the other workers waiting for its leaves.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.round(leaves, &mut w, plan, shared.proofs_only)
            }))
            .unwrap_or_else(|_| Err(BackendError::Failure("a search worker's round panicked".into()).into()));
            shared.apply((n, weakest), r);
        }
    }
}

/// The first restart seed of worker `index`: 2^24 seeds apart (a worker
/// would take thousands of rounds to reach the next one's).
fn worker_seed(index: usize) -> u32 {
    (index as u32).wrapping_mul(1 << 24)
}
