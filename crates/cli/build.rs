//! Puts the commit into `polycert --version` (POLYCERT_COMMIT, from the
//! environment where set, else from git, else "commit unknown").

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=POLYCERT_COMMIT");
    // A new commit or checkout changes HEAD or the ref it names.
    let refs = ["HEAD".to_string(), "packed-refs".to_string()].into_iter().chain(git(&["symbolic-ref", "-q", "HEAD"]));
    for r in refs {
        if let Some(path) = git(&["rev-parse", "--git-path", &r]) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    let commit = std::env::var("POLYCERT_COMMIT")
        .ok()
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]).map(|c| format!("commit {c}")))
        .unwrap_or_else(|| "commit unknown".into());
    println!("cargo:rustc-env=POLYCERT_COMMIT={commit}");
}
