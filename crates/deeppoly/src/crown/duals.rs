//! The free parameters of a batch's open slots, chosen before their
//! second `prove_output`: per slot its rows (the nearest half-space of each
//! open disjunct), one `lagrange::SlotSearch` each, driven by the host row
//! by row or by the backend for all rows at once (`relaxed.rs`).

use crate::base::analyzer::Analyzer;
use crate::base::backend::Backend;
use crate::base::budget::Budget;
use crate::base::options::RelaxedOn;
use crate::base::property::SubProblem;
use crate::base::relax::Slopes;
use crate::crown::analyse::{Duals, Within};
use crate::crown::hostrows::RowIn;
use crate::crown::lagrange::{Chosen, Objective, SlotBias, SlotBounds, SlotSearch, SplitConstraint};
use crate::crown::relaxed::{RelaxedRows, RowSpec};
use crate::crown::relaxed_bound::Offsets;
use crate::gpupoly::forward::{RunState, Step};
use crate::gpupoly::passes::SlotResult;
use polycert_interval::Fp;
use rayon::prelude::*;
use std::time::Instant;

/// Rows a host step evaluates between two looks at the deadline.
const HOST_ROWS_PART: usize = 256;

/// One open slot's share of the α/β search: its rows, bounds, constant
/// intervals (as rounding offsets) and split constraints.
struct Job<'j, T> {
    s: usize,
    hs: Vec<usize>,
    rows: Vec<Objective<'j>>,
    view: SlotBounds<'j, T>,
    offsets: Offsets,
    splits: &'j [SplitConstraint],
    warm: Option<&'j Slopes>,
}

/// A slot's finished search: its rows' half-spaces `hs`, what it chose,
/// and its evaluations.
struct Finished {
    s: usize,
    hs: Vec<usize>,
    chosen: Option<Chosen>,
    work: usize,
}

impl<'a, B: Backend<T>, T: Fp> Analyzer<'a, B, T> {
    /// Per open slot: lower slopes for its unstable ReLUs (with
    /// `CrownOptions::optimize_slopes`) and, per open disjunct's nearest
    /// half-space, β for the Lagrangian terms `−β_k·s_k` on the split
    /// neurons, optimised over the slot's current bounds from the leaf's
    /// starting values (`lagrange.rs`), on the host or the backend
    /// (`CrownOptions::relaxed_on`).
    pub(crate) fn choose_parameters(
        &self,
        st: &RunState<T, B::Buf>,
        sps: &[&SubProblem],
        open: &[usize],
        within: &[Within<'_, T>],
        res: &[SlotResult],
        budget: Budget,
    ) -> Duals {
        let _p = crate::base::profile::span("lagrange");
        let slopes = self.opts.crown.optimize_slopes;
        let none = Within { prior: None, after: None, splits: &[], betas: &[], slopes: None, inter: None };
        let jobs: Vec<usize> = open
            .iter()
            .copied()
            .filter(|&s| !st.empty[s] && (slopes || within.get(s).is_some_and(|w| !w.splits.is_empty())))
            .collect();
        let (net, lower) = (self.net, self.opts.passes.relu_lower);
        let bias = if jobs.is_empty() { Vec::new() } else { self.affine_biases(st) };
        // Per job: its rows (per open disjunct, its half-space nearest to
        // infeasible), its node bounds and constant intervals.
        let prep = crate::base::profile::span("lagrange.prepare");
        let prepared: Vec<Job<'_, T>> = jobs
            .par_iter()
            .map(|&s| prepare_job(net, st, (sps[s], s, &res[s].lower), within.get(s).unwrap_or(&none), &bias))
            .collect();
        let mut searches = self.slot_searches(&prepared, within);
        drop(prep);
        let auto = self.opts.crown.relaxed_on == RelaxedOn::Auto && self.backend.offload_relaxed();
        let on_backend = match self.opts.crown.relaxed_on {
            RelaxedOn::Host | RelaxedOn::HostRows => false,
            RelaxedOn::Backend => true,
            RelaxedOn::Auto => auto && self.relaxed_clock.borrow().pick_backend(),
        };
        let start = Instant::now();
        // A network the backend path declines is timed as the host's.
        let on_backend = on_backend && self.search_on_backend(&prepared, &mut searches, budget);
        // What the backend did not finish (an exact leaf's long search, a
        // network it does not evaluate) ends on the host.
        let _h = crate::base::profile::span("lagrange.host");
        let host_rows = match self.opts.crown.relaxed_on {
            RelaxedOn::HostRows => true,
            RelaxedOn::Auto => !on_backend,
            RelaxedOn::Host | RelaxedOn::Backend => false,
        };
        if host_rows {
            self.search_on_host_rows(&prepared, &mut searches, budget);
        }
        let chosen: Vec<Finished> = prepared
            .into_par_iter()
            .zip(searches)
            .filter_map(|(j, search)| {
                let (chosen, work) = if search.as_ref()?.done() {
                    let search = search?;
                    let work = search.evaluations();
                    (search.finish(), work)
                } else {
                    crate::crown::lagrange::finish_on_host(
                        search?,
                        net,
                        (&j.view, &j.offsets),
                        &j.rows,
                        j.splits,
                        lower,
                        budget,
                    )
                };
                Some(Finished { s: j.s, hs: j.hs, chosen, work })
            })
            .collect();
        if auto {
            let work = chosen.iter().map(|c| c.work).sum();
            self.relaxed_clock.borrow_mut().record(on_backend, start.elapsed().as_secs_f64(), work);
        }
        duals_of(chosen)
    }

    /// One search per job (`None`: nothing to choose there). With no search
    /// after this analysis, a hopeless slot's search ends early.
    fn slot_searches(&self, jobs: &[Job<'_, T>], within: &[Within<'_, T>]) -> Vec<Option<SlotSearch>> {
        let (lower, tune) = (self.opts.passes.relu_lower, &self.opts.crown);
        let root = within.iter().all(|w| w.prior.is_none()) && self.branching().is_none();
        let hopeless = Some(tune.hopeless_pace).filter(|&f| root && f > 0.0);
        jobs.par_iter()
            .map(|j| {
                let s = SlotSearch::new(
                    self.net,
                    &j.view,
                    &j.rows,
                    j.splits,
                    (lower, tune),
                    (tune.optimize_slopes, j.warm),
                );
                s.map(|s| s.hopeless_after(hopeless))
            })
            .collect()
    }

    /// The affine layers' constant intervals, which the sound bound pays.
    fn affine_biases(&self, st: &RunState<T, B::Buf>) -> Vec<Option<(Vec<T>, Vec<T>)>> {
        st.steps
            .iter()
            .map(|step| match step {
                Step::Bias { lo, hi } => Some((self.backend.download(lo).ok()?, self.backend.download(hi).ok()?)),
                _ => None,
            })
            .collect()
    }

    /// Steps the searches of at most `CrownOptions::steps` steps together
    /// while they have at least `host_batch_rows` open rows, every row's
    /// relaxed bound per step from one batched host evaluation
    /// (`hostrows.rs`), on a network of dense layers and ReLUs; the rest
    /// finish in `finish_on_host`. A search whose bound is not finite ends
    /// without a choice, as there.
    fn search_on_host_rows(&self, jobs: &[Job<'_, T>], searches: &mut [Option<SlotSearch>], budget: Budget) {
        if !crate::crown::hostrows::supported(self.net) {
            return;
        }
        let specs: Vec<Vec<RowSpec<'_, T>>> = jobs
            .iter()
            .map(|j| {
                j.rows
                    .iter()
                    .map(|r| RowSpec { bounds: &j.view, offsets: &j.offsets, c: r.c, splits: j.splits })
                    .collect()
            })
            .collect();
        let hw = self.host_weights.get_or_init(|| crate::crown::hostrows::host_weights(self.net));
        let lower = self.opts.passes.relu_lower;
        let lines: Vec<_> =
            jobs.par_iter().map(|j| crate::crown::hostrows::relu_lines(self.net, &j.view, lower)).collect();
        // An exact leaf's long search finishes row by row, as do the last
        // rows below `host_batch_rows`.
        let (steps, least) = (self.opts.crown.steps, self.opts.crown.host_batch_rows);
        let short = |s: &SlotSearch| s.steps() <= steps && !s.done();
        while !budget.expired() {
            let live: Vec<usize> = (0..jobs.len()).filter(|&k| searches[k].as_ref().is_some_and(short)).collect();
            if live.iter().map(|&k| jobs[k].rows.len()).sum::<usize>() < least {
                return;
            }
            let evals = {
                let mut rows = Vec::new();
                for &k in &live {
                    let s = searches[k].as_ref().expect("live");
                    for (spec, b) in specs[k].iter().zip(s.betas()) {
                        rows.push(RowIn { spec, lines: &lines[k], alpha: s.alpha(), beta: &b[..] });
                    }
                }
                // In parts, so that a step over many rows keeps the deadline.
                let mut evals = Vec::with_capacity(rows.len());
                for part in rows.chunks(HOST_ROWS_PART) {
                    if budget.expired() {
                        return;
                    }
                    evals.extend(crate::crown::hostrows::eval_rows(self.net, hw, part));
                }
                evals
            };
            let mut evals = evals.into_iter();
            for &k in &live {
                let e: Option<Vec<crate::crown::lagrange::Eval>> = evals.by_ref().take(jobs[k].rows.len()).collect();
                match e {
                    Some(e) => searches[k].as_mut().expect("live").update(e),
                    None => searches[k] = None,
                }
            }
        }
    }

    /// Runs the searches of at most `CrownOptions::steps` steps together, every
    /// row's relaxed bound evaluated on the backend per step
    /// (`relaxed.rs`). A search the backend cannot evaluate is left where it
    /// stopped, for the host. Returns whether the backend evaluated any row.
    fn search_on_backend(&self, jobs: &[Job<'_, T>], searches: &mut [Option<SlotSearch>], budget: Budget) -> bool {
        let steps = self.opts.crown.steps;
        let take: Vec<usize> =
            (0..jobs.len()).filter(|&k| searches[k].as_ref().is_some_and(|s| s.steps() <= steps)).collect();
        let specs: Vec<RowSpec<'_, T>> = take
            .iter()
            .flat_map(|&k| {
                let j = &jobs[k];
                j.rows.iter().map(move |r| RowSpec { bounds: &j.view, offsets: &j.offsets, c: r.c, splits: j.splits })
            })
            .collect();
        let tables = crate::base::profile::span("lagrange.tables");
        let Ok(Some(relaxed)) = RelaxedRows::new(self, &specs, self.opts.passes.relu_lower) else { return false };
        drop(tables);
        while !budget.expired() && take.iter().any(|&k| searches[k].as_ref().is_some_and(|s| !s.done())) {
            let evals = {
                let (mut alpha, mut beta) = (Vec::with_capacity(specs.len()), Vec::with_capacity(specs.len()));
                for &k in &take {
                    let s = searches[k].as_ref().expect("taken");
                    for b in s.betas() {
                        alpha.push(s.alpha());
                        beta.push(&b[..]);
                    }
                }
                let _e = crate::base::profile::span("lagrange.eval");
                match relaxed.eval(&alpha, &beta) {
                    Ok(e) => e,
                    Err(_) => return true,
                }
            };
            let _u = crate::base::profile::span("lagrange.update");
            let mut evals = evals.into_iter();
            let mut per: Vec<Option<Vec<crate::crown::lagrange::Eval>>> = (0..jobs.len()).map(|_| None).collect();
            for &k in &take {
                per[k] = Some(evals.by_ref().take(jobs[k].rows.len()).collect());
            }
            let work = searches.iter().flatten().map(SlotSearch::step_work).sum();
            let mut steps: Vec<_> = searches.iter_mut().zip(per).collect();
            crate::base::par::for_each_mut(&mut steps, work, |(s, e)| {
                if let (Some(s), Some(e)) = (s.as_mut(), e.take()) {
                    s.update(e);
                }
            });
        }
        true
    }
}

/// Slot `s`'s job (its sub-problem `sp`, its rows' lower bounds `lower`):
/// per open disjunct its half-space nearest to infeasible, its node bounds
/// and constant intervals.
fn prepare_job<'j, T: Fp, Buf>(
    net: &'j crate::base::ir::Network,
    st: &'j RunState<T, Buf>,
    (sp, s, lower): (&'j SubProblem, usize, &[f64]),
    w: &'j Within<'j, T>,
    bias: &'j [Option<(Vec<T>, Vec<T>)>],
) -> Job<'j, T> {
    let nodes = net.nodes();
    let halfspaces: Vec<&crate::base::property::Halfspace> = sp.unsafe_region.iter().flatten().collect();
    let hs: Vec<usize> = crate::base::property::unproved_disjuncts(&sp.unsafe_region, lower)
        .into_iter()
        .filter_map(|(_, r, _)| r.max_by(|&a, &b| lower[a].total_cmp(&lower[b])))
        .collect();
    let rows: Vec<Objective<'_>> = hs
        .iter()
        .map(|&h| Objective {
            c: &halfspaces[h].c,
            d: halfspaces[h].d,
            beta: w.betas.get(h).and_then(|b| b.as_deref()),
        })
        .collect();
    let view: SlotBounds<'_, T> = st
        .bounds
        .iter()
        .zip(nodes)
        .map(|(b, n)| {
            let k = n.shape.numel();
            (&b.lo[s * k..(s + 1) * k], &b.hi[s * k..(s + 1) * k])
        })
        .collect();
    let slot_bias: SlotBias<'_, T> = bias
        .iter()
        .zip(nodes)
        .map(|(b, n)| {
            let k = n.shape.numel();
            b.as_ref().map(|(lo, hi)| (&lo[s * k..(s + 1) * k], &hi[s * k..(s + 1) * k]))
        })
        .collect();
    let offsets = crate::crown::relaxed_bound::rounding_offsets(net, &slot_bias);
    Job { s, hs, rows, view, offsets, splits: w.splits, warm: w.slopes }
}

/// The parameters the finished searches chose.
fn duals_of(chosen: Vec<Finished>) -> Duals {
    let chosen = chosen.into_iter().filter_map(|f| Some((f.s, f.hs, f.chosen?)));
    let mut duals = Duals::default();
    for (s, hs, c) in chosen {
        for (h, b) in hs.into_iter().zip(c.betas) {
            if let Some(b) = b {
                duals.betas.insert((s, h), b);
            }
        }
        if let Some(a) = c.alpha {
            duals.slopes.insert(s, a);
        }
    }
    duals
}
