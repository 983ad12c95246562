//! `polycert supports`: the capability queries of the VNN-LIB 2.0 command
//! line, one answer item per line, as peer test suites read them.

use crate::say::outln;
use anyhow::{Result, bail};
use clap::Args;

#[derive(Args)]
#[command(after_help = "Example:\n  polycert supports --onnx-operators")]
pub struct SupportsArgs {
    /// The ONNX operator types the importer reads (some only on constants
    /// or in some forms; others are refused with the reason).
    #[arg(long)]
    onnx_operators: bool,
    /// The lowest and highest ONNX opset (default domain).
    #[arg(long)]
    onnx_opset_versions: bool,
    /// The lowest and highest VNN-LIB version.
    #[arg(long)]
    vnnlib_versions: bool,
    /// Network theories: SNET, MNET, MENET and MINET (one network, several
    /// independent, equal or isomorphic ones: each is given its model).
    #[arg(long)]
    multiple_network_theories: bool,
    /// Hidden-node theories: H (constraints on `declare-hidden` tensors).
    #[arg(long)]
    hidden_node_theories: bool,
    /// Input and output theories: SIO and MIO (several input and output tensors).
    #[arg(long)]
    multiple_input_output_theories: bool,
    /// Arithmetic theories: BND, OUTC, LIN (linear constraints; one over
    /// inputs alone must hold everywhere or nowhere on the box); no products
    /// of variables.
    #[arg(long)]
    arithmetic_complexity_theories: bool,
    /// Whether `verify` prints the counterexample's assignment after `sat`: true.
    #[arg(long)]
    serialise_assignments: bool,
}

/// The answer to each query, in the order of the flags.
fn answers(a: &SupportsArgs) -> Vec<(bool, Vec<String>)> {
    let range = polycert_onnx::OPSETS;
    let lines = |items: &[&str]| items.iter().map(|s| s.to_string()).collect();
    vec![
        (a.onnx_operators, lines(polycert_onnx::OPERATORS)),
        (a.onnx_opset_versions, vec![range.start().to_string(), range.end().to_string()]),
        (a.vnnlib_versions, lines(&["1.0", "2.0"])),
        (a.multiple_network_theories, lines(&["SNET", "MNET", "MENET", "MINET"])),
        (a.hidden_node_theories, lines(&["H"])),
        (a.multiple_input_output_theories, lines(&["SIO", "MIO"])),
        (a.arithmetic_complexity_theories, lines(&["BND", "OUTC", "LIN", "POLY (products of two variables)"])),
        (a.serialise_assignments, lines(&["true"])),
    ]
}

pub fn run(a: SupportsArgs) -> Result<u8> {
    let chosen: Vec<Vec<String>> = answers(&a).into_iter().filter(|(on, _)| *on).map(|(_, l)| l).collect();
    let [lines] = &chosen[..] else {
        bail!(crate::InputError("supports: give exactly one query, e.g. --onnx-operators (see --help)".into()));
    };
    for l in lines {
        outln!("{l}");
    }
    Ok(0)
}
