//! The analysis flags shared by `verify` and `vnncomp`, their checks, and
//! how they become the engine's [`Options`]. Everyday flags come first in
//! `--help`; the rest sit under "Resources" and "Tuning".

use anyhow::{Context, Result};
use clap::Args;
use polycert_deeppoly::{Arith, Options, RelaxedOn, ReluLower, Stabilize};
use std::time::Duration;

use crate::engine::{BackendChoice, PrecisionChoice};

const RESOURCES: &str = "Resources";
const TUNING: &str = "Tuning (also from --config FILE.toml or --set key=value)";

/// Options shared by every command that analyses.
#[derive(Args, Clone)]
pub struct AnalysisArgs {
    /// Where the analysis runs: CUDA when a GPU is there, else the CPU.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendChoice,
    /// Float type of the analysis (bounds hold for the float32 network either
    /// way): `auto` is f32 on the CPU and f64 on CUDA.
    #[arg(long, value_enum, default_value = "auto")]
    pub precision: PrecisionChoice,
    /// Seed of the attack's random starts (the same seed, the same points).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// A TOML file of flags, keys as the long flag names (`attack-steps = 50`,
    /// `stabilize = "off"`, `no-alpha = true`); flags given after it win.
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// One flag as `key=value` (`--set attack-steps=50`), as in `--config`.
    #[arg(long, value_name = "KEY=VALUE")]
    pub set: Vec<String>,

    /// Memory for expression matrices, in MiB [default: the backend's].
    #[arg(long, help_heading = RESOURCES, value_parser = positive::<usize>)]
    pub memory_mb: Option<usize>,
    /// GPUs a CUDA run uses: `all`, the first N, or a list (`0,2`; one GPU: `3,`); analysis
    /// workers and a search's workers go to them in turn. CUDA_VISIBLE_DEVICES is respected.
    #[arg(long, help_heading = RESOURCES, default_value = "all", value_name = "all|N|LIST")]
    pub gpus: crate::engine::Gpus,
    /// Worker threads, each analysing its own batches (on CUDA each with its
    /// own stream); results stay in order [default: up to 3 a GPU on CUDA, 1 on the CPU].
    #[arg(long, help_heading = RESOURCES, value_parser = positive::<usize>)]
    pub jobs: Option<usize>,
    /// Threads that run one branch and bound's rounds, sharing one open list
    /// [default: 4 a GPU on CUDA, 1 on the CPU or with several --jobs].
    #[arg(long, help_heading = RESOURCES, value_parser = positive::<usize>)]
    pub search_workers: Option<usize>,
    /// Properties whose rows share one backsubstitution, also the leaves a
    /// search analyses at once [default: what a quarter of the memory holds, at most 256].
    #[arg(long, help_heading = RESOURCES, value_parser = positive::<usize>)]
    pub batch: Option<usize>,
    /// Host threads for the parallel loops [default: RAYON_NUM_THREADS, else every core].
    #[arg(long, help_heading = RESOURCES, value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
    /// Host MiB that a search's open leaves may hold in inherited bounds;
    /// past it, new leaves keep their root's (sound, looser) [default: half of MemAvailable].
    #[arg(long, help_heading = RESOURCES, value_parser = positive::<usize>)]
    pub search_memory_mb: Option<usize>,

    /// No branch and bound: answer from one analysis and the attack.
    #[arg(long, help_heading = TUNING)]
    pub no_bab: bool,
    /// Lower ReLU line for unstable neurons.
    #[arg(long, help_heading = TUNING, value_enum, default_value = "area")]
    relu_lower: ReluLowerArg,
    /// Backsubstitution arithmetic: point coefficients on plain GEMMs with the
    /// rounding folded into the constants, or GPUPoly's interval coefficients.
    #[arg(long, help_heading = TUNING, value_enum, default_value = "point")]
    arith: ArithArg,
    /// Skip the second pass that tightens ReLU inputs.
    #[arg(long, help_heading = TUNING)]
    no_refine: bool,
    /// PGD steps of the attack (0: no attack).
    #[arg(long, help_heading = TUNING, default_value_t = 20)]
    attack_steps: usize,
    /// Random restarts of the attack after the analysis.
    #[arg(long, help_heading = TUNING, default_value_t = 0)]
    attack_restarts: usize,
    /// Attack every disjunct before the analysis instead of the weakest after it.
    #[arg(long, help_heading = TUNING)]
    attack_first: bool,
    /// Keep DeepPoly's lower ReLU slopes (no α optimisation for the output rows).
    #[arg(long, help_heading = TUNING)]
    no_alpha: bool,
    /// Optimise the slopes of a search's intermediate bounds at its root too.
    #[arg(long, help_heading = TUNING)]
    intermediate_alpha: bool,
    /// Prove unstable ReLU inputs stable layer by layer at a search's root:
    /// `auto` on networks without convolutions when there is a timeout.
    #[arg(long, help_heading = TUNING, value_enum, default_value = "auto", num_args = 0..=1, default_missing_value = "on")]
    stabilize: StabilizeArg,
    /// Refine every layer after each split, even where that gains little.
    #[arg(long, help_heading = TUNING)]
    refine_every_leaf: bool,
    /// Where the α/β search evaluates its relaxed bounds (`auto`: the faster).
    #[arg(long, help_heading = TUNING, value_enum, default_value = "auto")]
    relaxed_on: RelaxedOnArg,
    /// A tuning constant as `key=value` with a dotted key (`crown.lr_alpha=0.2`):
    /// what `--set` and `--config` give for those keys, in order.
    #[arg(long, hide = true, value_name = "KEY=VALUE", value_parser = tuning)]
    tune: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ArithArg {
    Point,
    Interval,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum RelaxedOnArg {
    Auto,
    Host,
    Backend,
    HostRows,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum StabilizeArg {
    Auto,
    On,
    Off,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ReluLowerArg {
    Area,
    Zero,
    One,
}

/// A whole number of at least 1.
pub fn positive<T: std::str::FromStr + PartialOrd + From<u8>>(s: &str) -> Result<T, String> {
    match s.parse::<T>() {
        Ok(v) if v >= T::from(1) => Ok(v),
        _ => Err("expected a whole number of at least 1".into()),
    }
}

/// Seconds: a finite number above 0.
pub fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err("expected a number of seconds above 0".into()),
    }
}

/// A number in [0, 1].
pub fn unit(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err("expected a number in [0, 1]".into()),
    }
}

/// A dotted tuning key and its value, checked (`Options::set`).
pub fn tuning(kv: &str) -> Result<(String, String), String> {
    let (k, v) = kv.split_once('=').ok_or("expected key=value")?;
    let (k, v) = (k.trim(), v.trim());
    Options::default().set(k, v).map_err(|e| if e.starts_with("unknown key") { e } else { format!("{k}: {e}") })?;
    Ok((k.to_string(), v.to_string()))
}

impl AnalysisArgs {
    /// The options these flags give (less what [`crate::resources`] decides).
    pub(crate) fn options(&self, timeout: Option<f64>) -> Options {
        let mut o = Options::default();
        let p = &mut o.passes;
        p.relu_lower = match self.relu_lower {
            ReluLowerArg::Area => ReluLower::Area,
            ReluLowerArg::Zero => ReluLower::Zero,
            ReluLowerArg::One => ReluLower::One,
        };
        p.arith = match self.arith {
            ArithArg::Point => Arith::Point,
            ArithArg::Interval => Arith::Interval,
        };
        p.refine = !self.no_refine;
        p.batch = self.batch;
        let a = &mut o.attack;
        a.steps = self.attack_steps;
        a.first = self.attack_first;
        a.restarts = self.attack_restarts;
        a.seed = self.seed;
        o.crown.optimize_slopes = !self.no_alpha;
        o.crown.relaxed_on = match self.relaxed_on {
            RelaxedOnArg::Auto => RelaxedOn::Auto,
            RelaxedOnArg::Host => RelaxedOn::Host,
            RelaxedOnArg::Backend => RelaxedOn::Backend,
            RelaxedOnArg::HostRows => RelaxedOn::HostRows,
        };
        let s = &mut o.search;
        if self.no_bab {
            s.split_inputs = 0;
            s.split_relus = false;
        }
        s.optimize_intermediate = self.intermediate_alpha;
        s.workers = self.search_workers;
        s.stabilize.when = match self.stabilize {
            StabilizeArg::Auto => Stabilize::Auto,
            StabilizeArg::On => Stabilize::On,
            StabilizeArg::Off => Stabilize::Off,
        };
        s.gate.on = !self.refine_every_leaf;
        o.timeout = timeout.map(Duration::from_secs_f64);
        for (key, value) in &self.tune {
            o.set(key, value).expect("checked when parsed");
        }
        o
    }

    pub fn memory_budget(&self) -> Option<usize> {
        self.memory_mb.map(|m| m << 20)
    }

    /// Sizes the host's thread pool (`--threads`); before any parallel loop.
    pub fn start_threads(&self) -> Result<()> {
        let Some(n) = self.threads else { return Ok(()) };
        rayon::ThreadPoolBuilder::new()
            .num_threads(n.into())
            .build_global()
            .with_context(|| format!("--threads {n}: cannot start the thread pool"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_checked() {
        assert_eq!(positive::<usize>("3"), Ok(3));
        assert!(positive::<usize>("0").is_err() && positive::<usize>("-5").is_err());
        assert_eq!(seconds("0.5"), Ok(0.5));
        assert!(seconds("-1").is_err() && seconds("0").is_err() && seconds("inf").is_err());
        assert_eq!(unit("0"), Ok(0.0));
        assert!(unit("2").is_err() && unit("-0.1").is_err() && unit("nan").is_err());
    }

    /// `--set` and `--config`'s dotted keys reach the options, in order.
    #[test]
    fn tuning_keys_reach_the_options() {
        use clap::FromArgMatches;
        let args = ["polycert", "verify", "--set", "crown.lr_alpha=0.2", "--set", "search.gate.warmup=7"];
        let args = crate::config::expand(&crate::command(), args.iter().map(Into::into).collect()).unwrap();
        let cli = crate::Cli::from_arg_matches(&crate::command().try_get_matches_from(args).unwrap()).unwrap();
        let crate::Cmd::Verify(v) = cli.cmd else { panic!("verify") };
        let o = v.analysis.options(None);
        assert_eq!((o.crown.lr_alpha, o.search.gate.warmup), (0.2, 7));
        assert_eq!(o.crown.steps, Options::default().crown.steps);
        assert!(tuning("crown.lr_alpha=0").unwrap_err().starts_with("crown.lr_alpha: expected a number above 0"));
    }
}
