//! `cargo xtask record -- ARGS`: build `trace-cli` and run `trace-cli record ARGS`.

use std::process::Command;

use anyhow::Result;

use crate::ebpf::workspace_root;
use crate::run::{cargo, is_root, run};

/// Builds `trace-cli` in release mode and records with it, through `sudo`
/// when not root.
pub fn record(args: &[String]) -> Result<()> {
    run(cargo().args(["build", "--release", "--package", "trace-cli"]))?;
    let cli = workspace_root().join("target/release/trace-cli");
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
