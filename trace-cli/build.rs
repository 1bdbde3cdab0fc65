//! Tells `trace-cli --version` the commit it is built from
//! (`TRACE_CLI_COMMIT`: `$TRACE_COMMIT` when set, as a package build from a
//! source tarball sets it; else `git rev-parse`; else `unknown`) and the
//! optional features built in (`TRACE_CLI_FEATURES`).

use std::env;
use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-env-changed=TRACE_COMMIT");
    let commit = env::var("TRACE_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo::rustc-env=TRACE_CLI_COMMIT={commit}");
    let features: Vec<&str> = [("sql", "CARGO_FEATURE_SQL")]
        .into_iter()
        .filter(|(_, var)| env::var_os(var).is_some())
        .map(|(name, _)| name)
        .collect();
    let features = if features.is_empty() {
        "none".to_owned()
    } else {
        features.join(", ")
    };
    println!("cargo::rustc-env=TRACE_CLI_FEATURES={features}");
}

/// The checkout's commit (12 hex digits), asking cargo to run this again
/// when HEAD moves.
fn git_commit() -> Option<String> {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let git_dir = git(&["rev-parse", "--absolute-git-dir"])?;
    let head = Path::new(&git_dir).join("HEAD");
    println!("cargo::rerun-if-changed={}", head.display());
    if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"]) {
        println!(
            "cargo::rerun-if-changed={}",
            Path::new(&git_dir).join(reference).display()
        );
    }
    git(&["rev-parse", "--short=12", "HEAD"])
}
