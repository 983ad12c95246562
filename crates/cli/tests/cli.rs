//! End-to-end tests of the `polycert` binary: the embedded default, JSON
//! output, the VNN-COMP runner, and every kind of bad input (exit code 2,
//! one line naming the file, no panic, results kept).

#[path = "../../onnx-import/tests/common/mod.rs"]
mod common;

mod util;

use common::{encode, model, node, raw_floats};
use std::path::Path;
use std::process::{Command, Output};
use util::{polycert, result_rows, tmp, vnncomp_cpu};

const DIGITS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/digits_mlp.onnx");

/// A VNNLIB robustness property for the 64-input digits model.
fn digits_vnnlib(path: &Path, n_in: usize, eps: f64) {
    let csv = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/digits_test.csv")).unwrap();
    let first: Vec<f64> = csv.lines().next().unwrap().split(',').map(|v| v.parse().unwrap()).collect();
    let label = first[0] as usize;
    let mut s = String::new();
    for i in 0..n_in {
        s += &format!("(declare-const X_{i} Real)\n");
    }
    for j in 0..10 {
        s += &format!("(declare-const Y_{j} Real)\n");
    }
    for i in 0..n_in {
        let x = first.get(1 + i).copied().unwrap_or(0.0) / 255.0;
        s += &format!("(assert (<= X_{i} {}))\n(assert (>= X_{i} {}))\n", (x + eps).min(1.0), (x - eps).max(0.0));
    }
    s += "(assert (or\n";
    for j in (0..10).filter(|&j| j != label) {
        s += &format!("  (and (>= Y_{j} Y_{label}))\n");
    }
    s += "))\n";
    std::fs::write(path, s).unwrap();
}

fn assert_input_error(o: &Output, file: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let line =
        err.lines().find(|l| l.starts_with("polycert: error:")).unwrap_or_else(|| panic!("no error line: {err}"));
    assert!(line.contains(file), "error does not name {file}: {line}");
}

#[test]
fn embedded_default_runs_and_reports() {
    let o = polycert(&["verify", "--count", "20", "--backend", "cpu"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("verified"), "{out}");
    assert!(out.contains("total              20"), "{out}");
    assert!(matches!(o.status.code(), Some(0 | 1)), "{:?}", o.status);
}

/// A JSON record less its times: the property's `seconds`, and its
/// search's where it has one.
fn untimed(line: &str) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(line).expect("json");
    let o = v.as_object_mut().expect("an object");
    assert!(o.remove("seconds").is_some(), "a time: {line}");
    if let Some(s) = o.get_mut("search").and_then(|s| s.as_object_mut()) {
        s.remove("seconds");
    }
    v
}

/// `--threads N` sizes the host's pool: the same answers with one thread;
/// 0 is refused before any work.
#[test]
fn threads_option_keeps_the_answers() {
    let run = |extra: &[&str]| {
        let mut args = vec!["verify", "--count", "30", "--backend", "cpu", "--json"];
        args.extend_from_slice(extra);
        let o = polycert(&args);
        assert!(matches!(o.status.code(), Some(0 | 1)), "{:?} {}", o.status, String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        out.lines().map(untimed).collect::<Vec<_>>()
    };
    let one = run(&["--threads", "1"]);
    assert_eq!(one.len(), 30);
    assert!(one.iter().all(|v| v["result"].is_string() && v["lower_bounds"].is_array()), "{one:?}");
    assert_eq!(one, run(&[]));
    let o = polycert(&["verify", "--count", "3", "--backend", "cpu", "--threads", "0"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--threads") && !err.contains("panicked"), "{err}");
}

#[test]
fn json_lines_have_the_promised_fields() {
    let o = polycert(&["verify", "--count", "3", "--json", "--backend", "cpu"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).expect("json")).collect();
    assert_eq!(lines.len(), 3);
    for v in &lines {
        for k in ["model", "property", "seconds", "result", "label", "lower_bounds"] {
            assert!(v.get(k).is_some(), "missing {k} in {v}");
        }
        assert_eq!(v["lower_bounds"].as_array().unwrap().len(), 9);
        if v["result"] == "verified" {
            assert!(v["lower_bounds"].as_array().unwrap().iter().all(|b| b.as_f64().unwrap() > 0.0));
        }
    }
}

#[test]
fn parallel_jobs_give_the_same_records_in_order() {
    let run = |jobs: &str| {
        let o = polycert(&["verify", "--count", "40", "--json", "--backend", "cpu", "--jobs", jobs]);
        assert!(matches!(o.status.code(), Some(0 | 1)), "{:?}", o.status);
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        out.lines().map(untimed).collect::<Vec<_>>()
    };
    let (one, four) = (run("1"), run("4"));
    assert_eq!(one.len(), 40);
    assert_eq!(one, four);
}

#[test]
fn vnnlib_property_on_a_model_file() {
    let p = tmp("ok.vnnlib");
    digits_vnnlib(&p, 64, 0.001);
    let o = polycert(&["verify", "--model", DIGITS, "--vnnlib", p.to_str().unwrap(), "--backend", "cpu"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn missing_model_file() {
    assert_input_error(
        &polycert(&["verify", "--model", "/nonexistent/m.onnx", "--images", "x.csv"]),
        "/nonexistent/m.onnx",
    );
}

#[test]
fn truncated_and_garbage_models() {
    let bytes = std::fs::read(DIGITS).unwrap();
    let t = tmp("truncated.onnx");
    std::fs::write(&t, &bytes[..bytes.len() / 2]).unwrap();
    let v = tmp("p.vnnlib");
    digits_vnnlib(&v, 64, 0.01);
    assert_input_error(
        &polycert(&["verify", "--model", t.to_str().unwrap(), "--vnnlib", v.to_str().unwrap()]),
        "truncated.onnx",
    );
    let g = tmp("garbage.onnx");
    std::fs::write(&g, (0..5000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect::<Vec<_>>()).unwrap();
    assert_input_error(
        &polycert(&["verify", "--model", g.to_str().unwrap(), "--vnnlib", v.to_str().unwrap()]),
        "garbage.onnx",
    );
}

fn tiny_model(path: &Path, op: &str, w: &[f32]) {
    let m = model(
        &[1, 2],
        vec![
            node("Gemm", "fc", &["x", "W", "B"], &["h"], vec![common::attr_i("transB", 1)]),
            node(op, "act", &["h"], &["y"], vec![]),
        ],
        vec![raw_floats("W", &[2, 2], w), raw_floats("B", &[2], &[0.0, 0.0])],
        13,
    );
    std::fs::write(path, encode(&m)).unwrap();
}

#[test]
fn nan_weights_and_unsupported_ops() {
    let v = tmp("two.vnnlib");
    std::fs::write(&v, "(declare-const X_0 Real)(declare-const X_1 Real)(declare-const Y_0 Real)(declare-const Y_1 Real)\n(assert (<= X_0 1))(assert (>= X_0 0))(assert (<= X_1 1))(assert (>= X_1 0))\n(assert (>= Y_1 Y_0))\n").unwrap();
    let nan = tmp("nan.onnx");
    tiny_model(&nan, "Relu", &[1.0, f32::NAN, 0.0, 1.0]);
    let o = polycert(&["verify", "--model", nan.to_str().unwrap(), "--vnnlib", v.to_str().unwrap()]);
    assert_input_error(&o, "nan.onnx");
    assert!(String::from_utf8_lossy(&o.stderr).contains("NaN"));
    let sig = tmp("erf.onnx");
    tiny_model(&sig, "Erf", &[1.0, 0.0, 0.0, 1.0]);
    let o = polycert(&["verify", "--model", sig.to_str().unwrap(), "--vnnlib", v.to_str().unwrap()]);
    assert_input_error(&o, "erf.onnx");
    assert!(String::from_utf8_lossy(&o.stderr).contains("Erf"));
}

#[test]
fn vnnlib_dimension_mismatch_and_malformed() {
    let small = tmp("small.vnnlib");
    digits_vnnlib(&small, 3, 0.01);
    assert_input_error(&polycert(&["verify", "--model", DIGITS, "--vnnlib", small.to_str().unwrap()]), "small.vnnlib");
    let bad = tmp("bad.vnnlib");
    std::fs::write(&bad, "(declare-const X_0 Real)\n(assert (<= X_0 ").unwrap();
    assert_input_error(&polycert(&["verify", "--model", DIGITS, "--vnnlib", bad.to_str().unwrap()]), "bad.vnnlib");
}

#[test]
fn vnncomp_keeps_rows_on_error_and_resumes() {
    let dir = tmp("vnn");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(DIGITS, dir.join("digits.onnx")).unwrap();
    digits_vnnlib(&dir.join("good.vnnlib"), 64, 0.001);
    std::fs::write(dir.join("bad.vnnlib"), "(assert").unwrap();
    std::fs::write(dir.join("instances.csv"), "digits.onnx,good.vnnlib,60\ndigits.onnx,bad.vnnlib,60\n").unwrap();
    let res = dir.join("results.csv");
    let inst = dir.join("instances.csv");
    let args =
        ["vnncomp", "--instances", inst.to_str().unwrap(), "--results", res.to_str().unwrap(), "--backend", "cpu"];
    let o = polycert(&args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    // The closing summary: the tally, then the solved instances' median time.
    assert!(err.contains("unsat 1  error 1  (of 2)\nsolved: 1, median "), "{err}");
    let rows = result_rows(&res);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0][..3], ["digits.onnx", "good.vnnlib", "unsat"]);
    assert_eq!(rows[0][4..6], ["", ""]);
    // The property's parse, counted in the row's seconds.
    let (secs, parse): (f64, f64) = (rows[0][3].parse().unwrap(), rows[0][6].parse().unwrap());
    assert!(parse > 0.0 && parse <= secs, "{:?}", rows[0]);
    assert_eq!(rows[1][6], "", "no parse time where the property was refused");
    assert_eq!(rows[1][..3], ["digits.onnx", "bad.vnnlib", "error"]);
    // The message names the file and the place.
    assert!(rows[1][5].contains("bad.vnnlib:1:1"), "{:?}", rows[1]);
    // --resume skips both rows already written.
    let text = std::fs::read_to_string(&res).unwrap();
    let mut resumed = args.to_vec();
    resumed.push("--resume");
    let o = polycert(&resumed);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(&res).unwrap(), text);
    // Appending VNN-COMP rows to a polycert file is refused, leaving it intact.
    let o = polycert(&[&args[..], &["--format", "vnncomp"]].concat());
    assert_input_error(&o, "not in the Vnncomp format");
    assert_eq!(std::fs::read_to_string(&res).unwrap(), text);
}

/// Issue 9's data-loss cases: a second run is refused (the first run's rows
/// stay), `--overwrite` empties, a row cut off by a killed run is dropped
/// and redone on `--resume`, and two networks sharing a property file get
/// one counterexample file each, named in their rows.
#[test]
fn vnncomp_never_loses_rows_or_counterexamples() {
    let dir = tmp("vnn-append");
    let (inst, res) = (two_networks(&dir), dir.join("results.csv"));
    let args =
        ["vnncomp", "--instances", inst.to_str().unwrap(), "--results", res.to_str().unwrap(), "--backend", "cpu"];
    let run = |extra: &[&str]| {
        let mut v = args.to_vec();
        v.extend_from_slice(extra);
        let o = polycert(&v);
        assert!(matches!(o.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&o.stderr));
    };
    run(&[]);
    let first = std::fs::read_to_string(&res).unwrap();
    let rows = result_rows(&res);
    assert_eq!(rows.len(), 3, "{first}");
    assert_eq!(rows[0][..3], ["a.onnx", "safe.vnnlib", "unsat"]);
    assert_eq!(rows[1][..3], ["a.onnx", "wide.vnnlib", "sat"]);
    assert_eq!(rows[2][..3], ["b.onnx", "wide.vnnlib", "sat"]);
    let cex = dir.join("results.csv.cex");
    for (row, net) in rows[1..].iter().zip(["a", "b"]) {
        let f = cex.join(format!("{net}.onnx__wide.vnnlib.counterexample"));
        assert_eq!(row[4], f.display().to_string());
        assert!(std::fs::read_to_string(&f).unwrap().starts_with("sat\n"), "{}", f.display());
    }
    // A second run into the same file is refused, the file untouched.
    let o = polycert(&args);
    assert_input_error(&o, "already holds 3 results; give --resume");
    assert_eq!(std::fs::read_to_string(&res).unwrap(), first);
    run(&["--overwrite"]);
    assert_eq!(std::fs::read_to_string(&res).unwrap().lines().count(), 4);
    // A killed run left half a row: --resume drops it and redoes that instance.
    let lines: Vec<&str> = first.lines().collect();
    std::fs::write(&res, format!("{}\n{}\n{}\nb.onnx,wide.vn", lines[0], lines[1], lines[2])).unwrap();
    run(&["--resume"]);
    let got = result_rows(&res);
    assert_eq!(got.len(), 3);
    assert_eq!(got[..2], rows[..2]);
    assert_eq!(got[2][..3], ["b.onnx", "wide.vnnlib", "sat"]);
}

/// Two networks sharing the safe and the wide property of the digits model.
fn two_networks(dir: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::copy(DIGITS, dir.join("a.onnx")).unwrap();
    std::fs::copy(DIGITS, dir.join("b.onnx")).unwrap();
    digits_vnnlib(&dir.join("safe.vnnlib"), 64, 0.001);
    digits_vnnlib(&dir.join("wide.vnnlib"), 64, 0.5);
    let inst = dir.join("instances.csv");
    std::fs::write(&inst, "a.onnx,safe.vnnlib,60\na.onnx,wide.vnnlib,60\nb.onnx,wide.vnnlib,60\n").unwrap();
    inst
}

/// `--format vnncomp`: exactly run_single_instance.sh's lines, no header.
#[test]
fn vnncomp_format_writes_run_single_instance_lines() {
    let dir = tmp("vnn-format");
    let inst = two_networks(&dir);
    let vnn = dir.join("vnncomp.csv");
    let o = vnncomp_cpu(&inst, &vnn, &["--format", "vnncomp", "--category", "digits", "--exit-code"]);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&vnn).unwrap();
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(lines.len(), 3, "{text}");
    for (l, (net, prop, result)) in
        lines.iter().zip([("a", "safe", "unsat"), ("a", "wide", "sat"), ("b", "wide", "sat")])
    {
        assert_eq!(l.len(), 6, "{text}");
        assert_eq!([l[0], l[1], l[2], l[4]], ["digits", &format!("{net}.onnx"), &format!("{prop}.vnnlib"), result]);
        assert!(l[3].parse::<f64>().unwrap() >= 0.0 && l[5].parse::<f64>().unwrap() > 0.0, "{text}");
    }
    // The network's load time goes to its first row only.
    assert_eq!(lines[1][3], "0.000000");
}

/// Parses a counterexample the way VNN-COMP's checker (`counterexamples.py`)
/// does: the lines after the result, newlines as spaces, one outer pair of
/// parentheses, `(X_i v)` / `(Y_j v)` pairs split at `)`, indices in order,
/// values read as doubles then cast to the input type (float32).
fn parse_like_vnncomp_checker(text: &str) -> (Vec<f64>, Vec<f64>) {
    let (first, rest) = text.split_once('\n').unwrap();
    assert_eq!(first.trim(), "sat");
    let content = rest.replace('\n', " ");
    let content = content.trim();
    assert!(content.starts_with('(') && content.ends_with(')'), "{content}");
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for part in content[1..content.len() - 1].split(')') {
        let mut part = part.trim().to_string();
        if part.is_empty() {
            continue;
        }
        while part.contains("  ") {
            part = part.replace("  ", " ");
        }
        let body = part.strip_prefix('(').unwrap_or_else(|| panic!("part '{part}' does not start with '('"));
        let fields: Vec<&str> = body.split(' ').collect();
        let [name, num] = fields[..] else { panic!("part '{part}' is not 'name value'") };
        let v: f64 = num.parse().unwrap();
        match name.split_at(2) {
            ("X_", i) => {
                assert_eq!(i.parse::<usize>().unwrap(), xs.len());
                xs.push(v);
            }
            ("Y_", j) => {
                assert_eq!(j.parse::<usize>().unwrap(), ys.len());
                ys.push(v);
            }
            _ => panic!("bad name {name}"),
        }
    }
    (xs, ys)
}

#[test]
fn run_instance_result_parses_like_the_vnncomp_checker() {
    let dir = tmp("run-instance");
    std::fs::create_dir_all(&dir).unwrap();
    let (prop, out) = (dir.join("wide.vnnlib"), dir.join("out.txt"));
    digits_vnnlib(&prop, 64, 0.5);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../vnncomp/run_instance.sh");
    let o = Command::new("bash")
        .args([script, "v1", "digits", DIGITS, prop.to_str().unwrap(), out.to_str().unwrap(), "60"])
        .env("POLYCERT_BIN", env!("CARGO_BIN_EXE_polycert"))
        .env("POLYCERT_BACKEND", "cpu")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let (xs, ys) = parse_like_vnncomp_checker(&std::fs::read_to_string(&out).unwrap());
    assert_eq!((xs.len(), ys.len()), (64, 10));
    // Every value is a float32 printed exactly: the checker's cast loses nothing.
    assert!(xs.iter().chain(&ys).all(|&v| (v as f32) as f64 == v));
    // Inside the box with no tolerance, and the property is violated in float32.
    let text = std::fs::read_to_string(&prop).unwrap();
    let csv = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/digits_test.csv")).unwrap();
    let label = csv.split(',').next().unwrap().parse::<usize>().unwrap();
    for (i, &x) in xs.iter().enumerate() {
        let bound = |op: &str| -> f64 {
            let key = format!("(assert ({op} X_{i} ");
            let at = text.find(&key).unwrap() + key.len();
            text[at..].split(')').next().unwrap().parse().unwrap()
        };
        assert!(bound(">=") <= x && x <= bound("<="), "X_{i} = {x} is outside the box");
    }
    let top = (0..10).filter(|&j| j != label).map(|j| ys[j]).fold(f64::MIN, f64::max);
    assert!(top >= ys[label], "the outputs {ys:?} do not violate the property for label {label}");

    // An unsat instance: one word.
    let safe = dir.join("safe.vnnlib");
    digits_vnnlib(&safe, 64, 0.001);
    let o = Command::new("bash")
        .args([script, "v1", "digits", DIGITS, safe.to_str().unwrap(), out.to_str().unwrap(), "60"])
        .env("POLYCERT_BIN", env!("CARGO_BIN_EXE_polycert"))
        .env("POLYCERT_BACKEND", "cpu")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "unsat\n");
}

/// A run killed mid-way (SIGKILL, SIGINT) loses no finished row, and
/// `--resume` completes the rest: every instance once, in order.
#[test]
fn vnncomp_killed_mid_run_loses_no_row() {
    let dir = tmp("vnn-kill");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(DIGITS, dir.join("d.onnx")).unwrap();
    let n = 120;
    let mut list = String::new();
    for k in 0..n {
        // Wide enough to stay unknown: each instance runs its PGD attack.
        digits_vnnlib(&dir.join(format!("p{k}.vnnlib")), 64, 0.1 + 0.0001 * k as f64);
        list += &format!("d.onnx,p{k}.vnnlib,60\n");
    }
    let inst = dir.join("instances.csv");
    std::fs::write(&inst, list).unwrap();
    for signal in ["KILL", "INT"] {
        let res = dir.join(format!("results-{signal}.csv"));
        let args = [
            "vnncomp",
            "--instances",
            inst.to_str().unwrap(),
            "--results",
            res.to_str().unwrap(),
            "--backend",
            "cpu",
            "--batch",
            "1",
            "--attack-steps",
            "2000",
        ];
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_polycert"));
        cmd.args(args).stderr(std::process::Stdio::null());
        // A test run in the background of a script inherits SIGINT ignored:
        // give the child the default action, as in a terminal.
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
        }
        let mut child = cmd.spawn().unwrap();
        let t = std::time::Instant::now();
        while std::fs::read_to_string(&res).map_or(0, |s| s.lines().count()) < 4 && t.elapsed().as_secs() < 60 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        Command::new("kill").args(["-s", signal, &child.id().to_string()]).status().unwrap();
        let status = child.wait().unwrap();
        let before = std::fs::read_to_string(&res).unwrap();
        let complete = before.lines().count() - usize::from(!before.ends_with('\n'));
        assert!(status.code() != Some(0), "{signal}: the run finished before the signal; make the instances slower");
        assert!(complete >= 4 && complete < n + 1, "{signal}: {complete} lines");
        let o = polycert(&[&args[..], &["--resume"]].concat());
        assert!(matches!(o.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&o.stderr));
        let after = std::fs::read_to_string(&res).unwrap();
        // The complete rows written before the signal are still there, unchanged.
        let kept: Vec<&str> = before.lines().take(complete).collect();
        assert_eq!(after.lines().take(complete).collect::<Vec<_>>(), kept, "{signal}");
        let rows = result_rows(&res);
        let props: Vec<String> = rows.iter().map(|r| r[1].clone()).collect();
        let want: Vec<String> = (0..n).map(|k| format!("p{k}.vnnlib")).collect();
        assert_eq!(props, want, "{signal}: every instance once, in order");
    }
}

#[test]
fn cuda_backend_without_gpu_is_a_clear_error() {
    let o = polycert(&["verify", "--count", "1", "--backend", "cuda"]);
    if o.status.code() == Some(2) {
        assert!(String::from_utf8_lossy(&o.stderr).contains("--backend cuda"));
    } else {
        assert!(matches!(o.status.code(), Some(0 | 1)), "a machine with a GPU verifies");
    }
}

/// A model ending in Softmax: comparisons of outputs are checked (on the
/// logits), a bound on one probability is refused with a clear error.
#[test]
fn softmax_models_drop_the_softmax_for_comparisons_and_keep_it_for_bounds() {
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/../onnx-import/tests/fixtures/ops/softmax_last.onnx");
    let dir = tmp("softmax");
    std::fs::create_dir_all(&dir).unwrap();
    let mut s = String::new();
    for i in 0..4 {
        s += &format!("(declare-const X_{i} Real)\n");
    }
    for j in 0..3 {
        s += &format!("(declare-const Y_{j} Real)\n");
    }
    for i in 0..4 {
        s += &format!("(assert (>= X_{i} 0.1))\n(assert (<= X_{i} 0.1001))\n");
    }
    let (cmp, bound) = (dir.join("cmp.vnnlib"), dir.join("bound.vnnlib"));
    std::fs::write(&cmp, format!("{s}(assert (or (>= Y_1 Y_0) (>= Y_2 Y_0)))\n")).unwrap();
    std::fs::write(&bound, format!("{s}(assert (>= Y_0 0.5))\n")).unwrap();
    let o = polycert(&["verify", "--backend", "cpu", "--model", model, "--vnnlib", cmp.to_str().unwrap()]);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("Softmax is dropped"));
    // A bound on one output needs the Softmax's values: the model is read again with it kept.
    let o = polycert(&["verify", "--backend", "cpu", "--model", model, "--vnnlib", bound.to_str().unwrap()]);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("the Softmax is analysed, not dropped"));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(["verified", "falsified", "unknown"].iter().any(|r| out.contains(r)) && !out.contains("error"), "{out}");
}

#[test]
fn fpna_kendall_matrix_json_histogram_and_png() {
    let dir = tmp("kendall");
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b, png) = (dir.join("a.csv"), dir.join("b.csv"), dir.join("h.png"));
    std::fs::write(&a, "0,1,2,3,4\n4,3,2,1,0\n1,0,2,3,4\n").unwrap();
    std::fs::write(&b, "0,1,2,3,4\n").unwrap();
    let o = polycert(&["fpna", "kendall", a.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    // Lower triangle: row 1 against 0; row 2 against 0 and 1.
    assert_eq!(String::from_utf8_lossy(&o.stdout), "\n-1.000000\n0.800000,-0.800000\n");
    let o = polycert(&[
        "fpna",
        "kendall",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
        "--png",
        png.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["pairs"], serde_json::json!([[0, 0, 1.0], [1, 0, -1.0], [2, 0, 0.8]]));
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG\r\n\x1a\n"));
    let o = polycert(&["fpna", "kendall", a.to_str().unwrap(), "--histogram", "4"]);
    // τ = −1, −0.8 (both in [−1, −0.5)) and 0.8.
    assert_eq!(String::from_utf8_lossy(&o.stdout), "-1.0000\t2\n-0.5000\t0\n+0.0000\t0\n+0.5000\t1\n");
    std::fs::write(&b, "0,1,x\n").unwrap();
    assert_input_error(&polycert(&["fpna", "kendall", b.to_str().unwrap()]), "b.csv");
}

#[test]
fn fpna_variability_on_the_embedded_default() {
    let o = polycert(&["fpna", "variability", "--runs", "4", "--count", "50", "--eps", "0.01", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["outside_bounds"], 0);
    assert_eq!(j["runs"], 4);
    assert_eq!(j["images"], 50);
    assert_eq!(j["compared"], 50 * 10 * 3);
    assert_eq!(j["checked"], 2 * 4 * 50);
    let (v_c, v_ermv) = (j["v_c"].as_f64().unwrap(), j["v_ermv"].as_f64().unwrap());
    assert!(v_c > 0.0 && v_c <= 1.0 && v_ermv > 0.0 && v_ermv < 1e-3, "{j}");
    assert!(j["flips"].as_u64().unwrap() <= 50);
}

/// `prepare_instance.sh` stops the runs `run_instance.sh` recorded and
/// nothing else: another user's `polycert verify` keeps running.
#[test]
fn prepare_instance_stops_only_its_own_runs() {
    let dir = tmp("prepare");
    std::fs::create_dir_all(&dir).unwrap();
    let pids = dir.join("pids");
    let start = |name: &str| {
        Command::new("bash").args(["-c", &format!("exec -a 'polycert verify {name}' sleep 60")]).spawn().unwrap()
    };
    let (mut mine, mut stranger) = (start("mine"), start("stranger"));
    std::fs::write(&pids, format!("{}\n", mine.id())).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let prop = dir.join("p.vnnlib");
    digits_vnnlib(&prop, 64, 0.01);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../vnncomp/prepare_instance.sh");
    let o = Command::new("bash")
        .args([script, "v1", "digits", DIGITS, prop.to_str().unwrap()])
        .env("POLYCERT_BIN", env!("CARGO_BIN_EXE_polycert"))
        .env("POLYCERT_PIDFILE", &pids)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    std::thread::sleep(std::time::Duration::from_millis(200));
    let alive = |c: &mut std::process::Child| c.try_wait().unwrap().is_none();
    assert!(!alive(&mut mine), "the recorded run was not stopped");
    assert!(alive(&mut stranger), "another user's run was stopped");
    stranger.kill().ok();
    stranger.wait().ok();
}
