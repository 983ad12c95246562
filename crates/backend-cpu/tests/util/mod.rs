//! Shared by the test targets that read the shared benchmarks.

use std::path::PathBuf;

/// `$POLYCERT_BENCH`, else `../shared/bench` next to the repository; `None`
/// where it does not exist (the tests then skip).
pub fn bench_dir() -> Option<PathBuf> {
    let d = std::env::var_os("POLYCERT_BENCH")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/bench")));
    d.exists().then_some(d)
}

/// The instances of `dir/set/instances.csv` whose model file name passes
/// `keep`, one network per model file, in the file's order.
#[allow(dead_code)]
pub fn load_instances(
    dir: &std::path::Path,
    set: &str,
    keep: impl Fn(&str) -> bool,
) -> Vec<polycert_deeppoly::conformance::Instance> {
    use std::collections::HashMap;
    use std::sync::Arc;
    let base = dir.join(set);
    let text = std::fs::read_to_string(base.join("instances.csv")).expect("instances.csv");
    let mut models: HashMap<String, (Arc<polycert_deeppoly::Network>, polycert_onnx::Imported, usize)> = HashMap::new();
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if !keep(f[0]) {
            continue;
        }
        let n = models.len();
        let (net, model, order) = models.entry(f[0].to_string()).or_insert_with(|| {
            let m = polycert_onnx::load_onnx(base.join(f[0])).expect("model");
            (Arc::new(m.network.clone()), m, n)
        });
        let prop = polycert_onnx::load_vnnlib(base.join(f[1]), model.n_inputs(), model.n_outputs()).expect("vnnlib");
        let name = format!("{set}/{}/{}", f[0], f[1]);
        out.push((
            *order,
            polycert_deeppoly::conformance::Instance { name, net: net.clone(), prop: model.property_to_ir(&prop) },
        ));
    }
    // One network's instances together, so each is prepared once.
    out.sort_by_key(|c| c.0);
    out.into_iter().map(|c| c.1).collect()
}
