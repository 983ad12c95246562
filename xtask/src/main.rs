//! `cargo xtask`: developer tasks (codegen, benchmarks, GPU runs).
fn main() -> anyhow::Result<()> {
    let task = std::env::args().nth(1);
    match task.as_deref() {
        _ => {
            eprintln!("usage: cargo xtask <task>\n\ntasks:\n  (none yet)");
            Ok(())
        }
    }
}
