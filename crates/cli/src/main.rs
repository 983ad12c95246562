//! The `polycert` binary: `verify`, `vnncomp`, `merge`, `report`, `supports` and `fpna`.

mod args;
mod config;
mod cpuprof;
mod engine;
mod fpna;
mod images;
mod live;
mod merge;
mod model;
mod plot;
mod records;
mod report;
mod resources;
mod results;
mod say;
mod shard;
mod supports;
mod testset;
mod verify;
mod vnncomp;
mod vnnlib2;

use args::AnalysisArgs;
use clap::{Command, CommandFactory, FromArgMatches, Parser, Subcommand};
use say::errln;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "polycert",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("POLYCERT_COMMIT"), ")"),
    about = "Proves neural networks robust, soundly for the float32 network in any summation order"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

// Parsed once per process: the size of a variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Cmd {
    /// Verify a VNNLIB property or the robustness of images (no arguments: a demo on embedded digits).
    Verify(verify::VerifyArgs),
    /// Run a VNN-COMP instances file, one results row per instance.
    Vnncomp(vnncomp::VnncompArgs),
    /// Join the results files of a run's shards (--shard K/N) into one.
    Merge(merge::MergeArgs),
    /// A table per benchmark and a cactus plot from results files.
    Report(report::ReportArgs),
    /// What polycert reads and answers, for VNN-LIB 2.0 tools (one item per line).
    Supports(supports::SupportsArgs),
    /// Instruments for floating-point non-associativity (summation orders).
    #[command(subcommand)]
    Fpna(fpna::FpnaCmd),
}

/// Input or usage errors: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

/// Keeps glibc from returning the analysis's large, short-lived buffers to
/// the kernel after each step (and faulting fresh pages in for the next):
/// buffers up to 32 MiB come from the heap, and the heap is not trimmed.
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only adjusts allocator parameters; called before any threads start.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
}

/// The command line as clap reads it: every value may be negative (so
/// that `--eps -0.1` is refused by its check, not read as a flag), and a
/// flag given twice takes its last value (`--config` and `--set`).
fn command() -> Command {
    fn relaxed(c: Command) -> Command {
        c.args_override_self(true)
            .mut_args(|a| if a.get_action().takes_values() { a.allow_negative_numbers(true) } else { a })
            .mut_subcommands(relaxed)
    }
    relaxed(Cli::command())
}

fn parse() -> Result<Cli, clap::Error> {
    let cmd = command();
    let args = match config::expand(&cmd, std::env::args_os().collect()) {
        Ok(a) => a,
        Err(e) => {
            errln!("polycert: error: {e}");
            std::process::exit(2);
        }
    };
    shard::set_command_line(&args);
    Cli::from_arg_matches(&cmd.try_get_matches_from(args)?)
}

fn main() -> ExitCode {
    tune_allocator();
    let cli = match parse() {
        Ok(c) => c,
        Err(e) => {
            // Help and version go to stdout; a closed pipe is not an error.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let res = {
        let _sampler = cpuprof::start();
        match cli.cmd {
            Cmd::Verify(a) => verify::run(a).map(|ok| if ok { 0 } else { 1 }),
            Cmd::Vnncomp(a) => vnncomp::run(a).map(|ok| if ok { 0 } else { 1 }),
            Cmd::Merge(a) => merge::run(a),
            Cmd::Report(a) => report::run(a),
            Cmd::Supports(a) => supports::run(a),
            Cmd::Fpna(c) => fpna::run(c),
        }
    };
    let phases = polycert_deeppoly::base::profile::report();
    if !phases.is_empty() {
        errln!("polycert phases:\n{phases}");
    }
    match res {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            errln!("polycert: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
