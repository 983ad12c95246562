//! `cargo xtask soundness-hunt [CASES_PER_KIND] [SEED] [STEPS]`: runs the
//! adversarial soundness hunt and prints its report as JSON; failing cases
//! are written to `hunt-failures.json` (reproducible from kind and seed) and
//! the exit code is 1.

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).map(|a| a.parse().expect("numeric arguments")).collect();
    let (per_kind, seed, steps) =
        (*args.first().unwrap_or(&50) as usize, *args.get(1).unwrap_or(&1), *args.get(2).unwrap_or(&200) as usize);
    let t = std::time::Instant::now();
    let rep = polycert_soundness::hunt::hunt(per_kind, seed, steps);
    let summary = serde_json::json!({
        "cases": rep.cases, "evaluations": rep.evaluations, "verified_properties": rep.verified_properties,
        "worst_margin": rep.worst_margin, "failures": rep.failures.len(), "seconds": t.elapsed().as_secs_f64(),
        "per_kind": per_kind, "seed": seed, "steps": steps,
    });
    println!("{summary}");
    if !rep.failures.is_empty() {
        let text = serde_json::to_string_pretty(&rep.failures).expect("json");
        std::fs::write("hunt-failures.json", text).expect("write hunt-failures.json");
        eprintln!("{} failures written to hunt-failures.json", rep.failures.len());
        std::process::exit(1);
    }
}
