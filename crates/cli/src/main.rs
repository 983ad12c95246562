//! The `polycert` binary.
use clap::Parser;

#[derive(Parser)]
#[command(name = "polycert", version, about = "Sound DeepPoly verification of neural networks")]
struct Cli {}

fn main() {
    let _ = Cli::parse();
    println!("polycert {}", env!("CARGO_PKG_VERSION"));
}
