//! The command line as a newcomer meets it: each test is one defect that a
//! first-time user hit (closed pipes, negative numbers, silent defaults,
//! repeated results, stale exit codes, unexplained output).

mod util;

use std::process::{Command, Stdio};
use util::{polycert, tmp};

const DIGITS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/digits_mlp.onnx");

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 2 with a message naming `what`, and no panic.
fn refused(args: &[&str], what: &str) {
    let o = polycert(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(what) && !err.contains("panicked"), "{args:?}: {err}");
}

/// `polycert verify | head -1`: the pipe closes, the run goes on and ends
/// normally, and its result file is written.
#[test]
fn a_closed_pipe_is_no_panic() {
    let rf = tmp("pipe-result.txt");
    let mut child = Command::new(env!("CARGO_BIN_EXE_polycert"))
        .args(["verify", DIGITS, "--images", concat!(env!("CARGO_MANIFEST_DIR"), "/assets/digits_test.csv")])
        .args(["--count", "20", "--result-file", rf.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(std::fs::read_to_string(&rf).unwrap().ends_with('\n'));
}

#[test]
fn negative_and_out_of_range_numbers_are_named() {
    refused(&["verify", "--eps", "-0.1"], "'-0.1' for '--eps <EPS>': expected a number in [0, 1]");
    refused(&["verify", "--eps", "2"], "expected a number in [0, 1]");
    refused(&["verify", "--count", "-5"], "'-5' for '--count <COUNT>'");
    refused(&["verify", "--count", "0"], "expected a whole number of at least 1");
    refused(&["verify", "--timeout", "-1"], "'-1' for '--timeout <TIMEOUT>': expected a number of seconds above 0");
}

#[test]
fn no_silent_defaults() {
    let prop = tmp("silent.vnnlib");
    std::fs::write(&prop, "(declare-const X_0 Real)").unwrap();
    let p = prop.to_str().unwrap();
    // A property without its model: not the embedded model.
    refused(&["verify", "--vnnlib", p], "a property needs its model");
    // --eps and --count mean nothing for a property.
    refused(&["verify", DIGITS, p, "--eps", "0.1"], "--eps");
    refused(&["verify", "--model", DIGITS, "--vnnlib", p, "--count", "3"], "--count");
    // A result file that cannot be written fails before any work.
    let t = std::time::Instant::now();
    refused(&["verify", "--result-file", "/nonexistent-folder/r.txt"], "/nonexistent-folder/r.txt: cannot write");
    assert!(t.elapsed().as_secs() < 10);
    let o = polycert(&["verify", "--count", "1000", "--backend", "cpu"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("asks for more than its 300 images"), "{}", stderr(&o));
}

/// The README's first command exits 0 though some images are falsified;
/// `--exit-code` gives scripts the strict answer.
#[test]
fn the_default_run_exits_zero_and_explains_itself() {
    let o = polycert(&["verify", "--backend", "cpu"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let mut lines = out.lines();
    assert!(lines.next().unwrap().starts_with("property "), "no header: {out}");
    // A falsified row names the winning class and the label; an image the
    // network gets wrong by itself says so.
    assert!(out.lines().any(|l| l.contains("falsified") && l.contains(" wins (label ")), "{out}");
    assert!(out.lines().any(|l| l.contains("misclassified: the image itself gives class")), "{out}");
    assert!(out.lines().filter(|l| l.contains(" verified ")).all(|l| l.contains("margin +")), "{out}");
    let o = polycert(&["verify", "--backend", "cpu", "--exit-code"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}

#[test]
fn version_names_the_commit_and_seed_is_taken() {
    let o = polycert(&["--version"]);
    let v = String::from_utf8_lossy(&o.stdout);
    assert!(v.starts_with("polycert ") && v.contains("commit "), "{v}");
    let run = |seed: &str| {
        let o = polycert(&["verify", "--count", "40", "--backend", "cpu", "--attack-restarts", "2", "--seed", seed]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        out.lines().map(|l| l.split_whitespace().nth(2).unwrap_or("").to_string()).collect::<Vec<_>>()
    };
    assert_eq!(run("7"), run("7"));
}

/// `--config` and `--set` give the tuning flags; a later flag wins; an
/// unknown key is named.
#[test]
fn config_file_and_set() {
    let cfg = tmp("tuning.toml");
    std::fs::write(&cfg, "attack-steps = 0\nno-bab = true\nstabilize = \"off\"\n").unwrap();
    let c = cfg.to_str().unwrap();
    let o = polycert(&["verify", "--count", "3", "--backend", "cpu", "--config", c, "--set", "attack-steps=5"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    std::fs::write(&cfg, "attack_steps = 0\n").unwrap();
    refused(&["verify", "--config", c], "unknown key 'attack_steps'");
    refused(&["verify", "--set", "eps=x"], "'x' for '--eps <EPS>'");
}

/// Dotted keys set the tuning constants (`--set crown.lr_alpha=0.2`, a
/// file's `[search.stabilize]` table); a bad value or key is named.
#[test]
fn dotted_tuning_keys() {
    let cfg = tmp("dotted.toml");
    std::fs::write(&cfg, "no-bab = true\n[search.stabilize]\nshare = 0.3\n").unwrap();
    let c = cfg.to_str().unwrap();
    let o = polycert(&["verify", "--count", "3", "--backend", "cpu", "--config", c, "--set", "crown.lr_alpha=0.2"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    refused(
        &["verify", "--set", "crown.lr_alpha=-1"],
        "--set crown.lr_alpha=-1: crown.lr_alpha: expected a number above 0",
    );
    refused(&["verify", "--set", "crown.lr_alhpa=0.2"], "unknown key 'crown.lr_alhpa'");
    std::fs::write(&cfg, "[search.stabilize]\nshare = 2\n").unwrap();
    refused(&["vnncomp", "--config", c], "search.stabilize.share: expected a number in [0, 1], not '2'");
}

/// docs/cli.md lists every dotted tuning key.
#[test]
fn every_tuning_key_is_documented() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cli.md")).unwrap();
    for key in polycert_deeppoly::base::options::TUNING_KEYS {
        assert!(doc.contains(&format!("| `{key}` |")), "docs/cli.md does not list {key}");
    }
}

/// `--resume` on a finished file says what it skipped.
#[test]
fn resume_says_what_it_skipped() {
    let dir = tmp("resume-says");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(DIGITS, dir.join("d.onnx")).unwrap();
    let prop = "(declare-const X_0 Real)\n(assert (>= X_0 0.0))";
    std::fs::write(dir.join("p.vnnlib"), prop).unwrap();
    std::fs::write(dir.join("i.csv"), "d.onnx,p.vnnlib,5\n").unwrap();
    let (i, r) = (dir.join("i.csv"), dir.join("r.csv"));
    let args = ["vnncomp", "--instances", i.to_str().unwrap(), "--results", r.to_str().unwrap(), "--backend", "cpu"];
    let _ = polycert(&args);
    let o = polycert(&[&args[..], &["--resume"]].concat());
    assert!(stderr(&o).contains("1 of 1 instances already have results, skipped; 0 to run"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("(of 0)"), "{}", stderr(&o));
}

/// `polycert report` reads results files and writes the table and a PNG.
#[test]
fn report_writes_a_table_and_a_cactus_plot() {
    let r = tmp("report-results.csv");
    std::fs::write(
        &r,
        "onnx,vnnlib,result,seconds,counterexample,message\nn.onnx,p0.vnnlib,unsat,0.5,,\nn.onnx,p1.vnnlib,sat,2,c,\n",
    )
    .unwrap();
    let (png, md) = (tmp("cactus.png"), tmp("table.md"));
    let o =
        polycert(&["report", r.to_str().unwrap(), "--png", png.to_str().unwrap(), "--markdown", md.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let table = std::fs::read_to_string(&md).unwrap();
    assert!(table.contains("| n | report-results | 2 / 2 | 1 | 1 | 1.25 |"), "{table}");
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 5000, "{} bytes", bytes.len());
    refused(&["report", "/nonexistent.csv"], "/nonexistent.csv: cannot read");
}
