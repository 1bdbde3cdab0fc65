//! `cargo xtask record -- ARGS`: build `trace-cli` and run `trace-cli record ARGS`.
//!
//! The build leaves out the SQL engine (`query` and `export`, the `sql`
//! feature), which is most of a clean build's time: the first recording
//! comes in minutes. `cargo build --release -p trace-cli` builds it all.

use std::process::Command;

use anyhow::Result;

use crate::ebpf::target_dir;
use crate::run::{cargo, is_root, run};

/// Builds `trace-cli` in release mode without the SQL engine and records
/// with it, through `sudo` when not root.
pub fn record(args: &[String]) -> Result<()> {
    let cli = target_dir().join("release/trace-cli");
    let mut build = cargo();
    build.args(["build", "--release", "--package", "trace-cli"]);
    if has_sql(&cli) {
        // Already built whole: keep it so rather than replace it.
    } else {
        eprintln!(
            "xtask: building trace-cli without the SQL engine (`query`, `export`); \
             `cargo build --release -p trace-cli` builds it all"
        );
        build.arg("--no-default-features");
    }
    run(&mut build)?;
    let mut cmd = if is_root() {
        Command::new(&cli)
    } else {
        let mut c = Command::new("sudo");
        c.arg(&cli);
        c
    };
    cmd.arg("record").args(args);
    run(&mut cmd)
}

/// Whether the `trace-cli` at `cli` was built with the SQL engine, as its
/// `--version` says.
fn has_sql(cli: &std::path::Path) -> bool {
    Command::new(cli)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("sql"))
}
