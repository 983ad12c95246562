//! `verify --images` as a test set: one cheap pass over every image
//! (DeepPoly and the attack, in large batches), then the images left open
//! refined, the closest margin first, in rounds of rising cost (optimised
//! slopes, then branch and bound), until the budget is spent. A round
//! without a search ends early once a chunk of the closest open images
//! gains nothing: those further away gain less still, and the time goes
//! to the next round or back to the user.

use crate::engine::{self, Engine, Job, Precision};
use crate::records::Record;
use crate::resources::Plan;
use anyhow::Result;
use indicatif::ProgressBar;
use polycert_deeppoly::{Network, Options};
use std::time::{Duration, Instant};

/// Images per refinement chunk: the budget is checked between chunks (and
/// every analysis stops at it anyway: `Options::deadline`).
pub const CHUNK: usize = 256;

/// The share of the budget kept for the run's end, and at most that many
/// seconds.
const END_SHARE: f64 = 0.05;
const END_MOST: f64 = 1.0;

/// The default budget: a second per thousand images, at least ten.
pub fn default_budget(images: usize) -> f64 {
    (images as f64 / 1000.0).max(10.0)
}

/// What a run does with one model's images.
pub struct TestSet<'a> {
    pub engine: &'a Engine,
    pub plan: &'a Plan,
    pub net: &'a Network,
    pub model_name: &'a str,
    pub precision: Precision,
    pub bar: &'a ProgressBar,
    /// Images per refinement chunk, at most ([`CHUNK`]).
    pub chunk: usize,
}

/// One phase of a test set, for the summary.
#[derive(Debug, Default)]
pub struct Phase {
    pub name: &'static str,
    /// Images it analysed.
    pub images: usize,
    pub seconds: f64,
    pub verified: usize,
    pub falsified: usize,
    /// Open images it did not reach before the deadline.
    pub unreached: usize,
    /// Whether it ended at a chunk that gained nothing (not the deadline).
    pub fruitless: bool,
    /// Images and decided images per chunk (`POLYCERT_PROFILE`'s lines).
    pub chunks: Vec<(usize, usize)>,
}

/// Where a test set's phases left it.
pub struct Spent {
    pub phases: Vec<Phase>,
    pub budget: Option<f64>,
}

impl Spent {
    /// The summary's lines on the phases.
    pub fn lines(&self) -> String {
        let mut s = String::new();
        for p in self.phases.iter().filter(|p| p.images > 0) {
            s.push_str(&format!(
                "{:<18} {:>7} images {:>9.2}s  +{} verified, +{} falsified\n",
                p.name, p.images, p.seconds, p.verified, p.falsified
            ));
        }
        // The open images left unrefined: the last phase's.
        if let Some(last) = self.phases.last().filter(|p| p.unreached > 0) {
            let why = match (last.fruitless, self.budget) {
                (true, _) => {
                    let n = last.chunks.last().map_or(0, |c| c.0);
                    format!("{} ended: its last {n} images, the closest, gained nothing", last.name)
                }
                (false, b) => format!(
                    "{} did not reach them{}",
                    last.name,
                    b.map_or(String::new(), |b| format!(", --budget {b} s spent"))
                ),
            };
            s.push_str(&format!("not refined        {:>7} open images ({why})\n", last.unreached));
        }
        s
    }

    /// Each refinement round's chunks, for `POLYCERT_PROFILE`.
    pub fn chunk_lines(&self) -> String {
        let mut s = String::new();
        for p in self.phases.iter().filter(|p| !p.chunks.is_empty()) {
            let c: Vec<String> = p.chunks.iter().map(|(n, d)| format!("{n}:+{d}")).collect();
            s.push_str(&format!("  test set, {} (images:+decided): {}\n", p.name, c.join(" ")));
        }
        s
    }
}

/// An open image: its index among the jobs and its best record so far.
type Open = Vec<(usize, Record)>;

fn decided(r: &Record) -> bool {
    r.result != "unknown" && r.result != "timeout"
}

/// The weakest lower bound of a record (`−∞` without one).
fn margin(r: &Record) -> f64 {
    let m = r.lower_bounds.iter().copied().fold(f64::INFINITY, f64::min);
    if r.lower_bounds.is_empty() || m.is_nan() { f64::NEG_INFINITY } else { m }
}

impl TestSet<'_> {
    /// Runs `jobs` within `budget` seconds from `start` (the command's
    /// start; none: every open image goes through every round), handing
    /// each record to `emit` with its job index once it is final: a decided
    /// one at once, an open one at the end.
    pub fn run(
        &self,
        jobs: &[Job],
        (start, budget): (Instant, Option<f64>),
        emit: &mut dyn FnMut(usize, Record) -> Result<()>,
    ) -> Result<Spent> {
        // The run's end (the open rows, the summary, freeing the backend)
        // is paid from the budget too.
        let deadline = budget.map(|b| start + Duration::from_secs_f64(b - (b * END_SHARE).min(END_MOST)));
        let (mut open, first) = self.first_pass(jobs, emit)?;
        let mut phases = vec![first];
        for (name, opts) in self.rounds() {
            if open.is_empty() {
                break;
            }
            let opts = Options { deadline, ..opts };
            // A round without a search ends at a chunk that gains nothing.
            let early = !searches(&opts);
            let (rest, phase) = self.refine((name, early), jobs, open, &opts, emit)?;
            open = rest;
            phases.push(phase);
        }
        open.sort_by_key(|(i, _)| *i);
        for (i, r) in open {
            emit(i, r)?;
        }
        Ok(Spent { phases, budget })
    }

    /// Every image with DeepPoly and the attack only: the decided ones are
    /// emitted, the open ones returned.
    fn first_pass(&self, jobs: &[Job], emit: &mut dyn FnMut(usize, Record) -> Result<()>) -> Result<(Open, Phase)> {
        let cheap = Plan {
            workers: self.plan.workers,
            opts: no_search(&self.plan.opts).with(|o| {
                o.crown.optimize_slopes = false;
                // The first output pass proves many images without refining.
                o.passes.first_output.get_or_insert(true);
            }),
        };
        let t = Instant::now();
        let mut phase = Phase { name: "first pass", images: jobs.len(), ..Phase::default() };
        let mut open = Vec::new();
        let mut k = 0;
        self.bar.set_length(jobs.len() as u64);
        engine::run_jobs_parallel(self.engine, &cheap, self.net, self.model_name, jobs, self.precision, &mut |r| {
            let i = k;
            k += 1;
            self.bar.inc(1);
            count(&mut phase, &r);
            if decided(&r) {
                return emit(i, r);
            }
            open.push((i, r));
            Ok(())
        })?;
        phase.seconds = t.elapsed().as_secs_f64();
        Ok((open, phase))
    }

    /// The refinement rounds the options allow: optimised slopes without a
    /// search, then the search (with its slopes).
    fn rounds(&self) -> Vec<(&'static str, Options)> {
        let o = &self.plan.opts;
        match (o.crown.optimize_slopes, searches(o)) {
            (true, true) => vec![("optimised slopes", no_search(o)), ("branch and bound", o.clone())],
            (true, false) => vec![("optimised slopes", o.clone())],
            (false, true) => vec![("branch and bound", o.clone())],
            (false, false) => Vec::new(),
        }
    }

    /// One round over the open images, closest margin first, chunk by chunk
    /// until the deadline (or, `early`, a chunk that decides none): decided
    /// images are emitted, the rest returned with their newest record
    /// (their old one where the round did not reach them).
    fn refine(
        &self,
        (name, early): (&'static str, bool),
        jobs: &[Job],
        mut open: Open,
        opts: &Options,
        emit: &mut dyn FnMut(usize, Record) -> Result<()>,
    ) -> Result<(Open, Phase)> {
        open.sort_by(|a, b| margin(&b.1).total_cmp(&margin(&a.1)).then(a.0.cmp(&b.0)));
        let t = Instant::now();
        let mut phase = Phase { name, ..Phase::default() };
        let plan = Plan { workers: self.plan.workers, opts: opts.clone() };
        self.bar.set_length(self.bar.length().unwrap_or(0) + open.len() as u64);
        let mut rest = Vec::with_capacity(open.len());
        let mut left = open.into_iter();
        // Seconds per image of the round's chunks so far.
        let mut pace: Option<f64> = None;
        loop {
            let size = fitting(opts.deadline, pace).min(self.chunk);
            let c0 = Instant::now();
            if left.len() > 0 && (size == 0 || opts.deadline.is_some_and(|d| c0 >= d)) {
                phase.unreached = left.len();
                rest.extend(left.by_ref());
                break;
            }
            let chunk: Vec<(usize, Record)> = left.by_ref().take(size).collect();
            if chunk.is_empty() {
                break;
            }
            let sub: Vec<Job> = chunk
                .iter()
                .map(|(i, _)| Job { name: jobs[*i].name.clone(), property: jobs[*i].property.clone() })
                .collect();
            let mut fresh = Vec::with_capacity(sub.len());
            engine::run_jobs_parallel(self.engine, &plan, self.net, self.model_name, &sub, self.precision, &mut |r| {
                fresh.push(r);
                Ok(())
            })?;
            phase.images += sub.len();
            pace = Some(c0.elapsed().as_secs_f64() / sub.len() as f64);
            let before = phase.verified + phase.falsified;
            for ((i, old), mut new) in chunk.into_iter().zip(fresh) {
                self.bar.inc(1);
                new.seconds += old.seconds;
                if decided(&new) {
                    count(&mut phase, &new);
                    emit(i, new)?;
                } else {
                    // A timeout (the deadline) keeps what the earlier pass found.
                    rest.push((i, if new.result == "unknown" { new } else { old }));
                }
            }
            let gained = phase.verified + phase.falsified - before;
            phase.chunks.push((sub.len(), gained));
            if early && gained == 0 && left.len() > 0 {
                phase.fruitless = true;
                phase.unreached = left.len();
                rest.extend(left.by_ref());
                break;
            }
        }
        phase.seconds = t.elapsed().as_secs_f64();
        Ok((rest, phase))
    }
}

/// Images in the next chunk: [`CHUNK`], or as many as the time left
/// holds at the round's pace so far (a chunk cut by the deadline gains
/// nothing: its images are analysed together).
fn fitting(deadline: Option<Instant>, pace: Option<f64>) -> usize {
    match (deadline, pace) {
        (Some(d), Some(p)) if p > 0.0 => {
            let left = d.saturating_duration_since(Instant::now()).as_secs_f64();
            ((left / p) as usize).min(CHUNK)
        }
        _ => CHUNK,
    }
}

/// Whether `o` runs branch and bound.
fn searches(o: &Options) -> bool {
    o.search.split_inputs > 0 || o.search.split_relus
}

/// `o` without branch and bound (as `--no-bab` sets it).
fn no_search(o: &Options) -> Options {
    o.clone().with(|o| {
        o.search.split_inputs = 0;
        o.search.split_relus = false;
    })
}

fn count(p: &mut Phase, r: &Record) {
    match r.result.as_str() {
        "verified" => p.verified += 1,
        "falsified" => p.falsified += 1,
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{BackendChoice, open_backend};
    use polycert_deeppoly::{InputBox, Property};

    /// Without a search (`--no-bab`), the slopes' round ends at its first
    /// chunk that decides nothing: the images after it are left open and
    /// reported, and every image is still emitted once.
    #[test]
    fn a_round_ends_at_a_chunk_that_gains_nothing() {
        let engine = open_backend(BackendChoice::Cpu, None, &crate::engine::Gpus::All).unwrap();
        let imported = crate::model::embedded().unwrap();
        let net = &imported.network;
        let jobs: Vec<Job> = crate::model::embedded_images()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, img)| {
                let pixels = imported.to_ir_input(&img.pixels);
                let input = InputBox::linf(&pixels, 0.1, (0.0, 1.0), &[], &[]).unwrap();
                let p = Property::robustness(format!("#{i}"), input, img.label, net.output_shape().numel());
                Job { name: format!("#{i}"), property: p.unwrap() }
            })
            .collect();
        let plan = Plan { workers: 1, opts: no_search(&Options::default()) };
        let bar = ProgressBar::hidden();
        let set = TestSet {
            engine: &engine,
            plan: &plan,
            net,
            model_name: "embedded",
            precision: Precision::F64,
            bar: &bar,
            chunk: 4,
        };
        let mut seen = vec![0; jobs.len()];
        let spent = set.run(&jobs, (Instant::now(), None), &mut |i, _| {
            seen[i] += 1;
            Ok(())
        });
        let spent = spent.unwrap();
        assert!(seen.iter().all(|&n| n == 1));
        let [first, slopes] = &spent.phases[..] else { panic!("{:?}", spent.phases) };
        let open = first.images - first.verified - first.falsified;
        assert!(slopes.fruitless, "{slopes:?}");
        assert_eq!(slopes.chunks.last(), Some(&(4, 0)));
        assert!(slopes.chunks[..slopes.chunks.len() - 1].iter().all(|&(n, d)| n == 4 && d > 0));
        assert_eq!((slopes.images + slopes.unreached, slopes.images), (open, 4 * slopes.chunks.len()));
        assert!(spent.lines().contains(&format!(
            "not refined        {:>7} open images (optimised slopes ended: its last 4 images, the closest, gained nothing)",
            slopes.unreached
        )));
    }
}
