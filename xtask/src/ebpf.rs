//! `cargo xtask build-ebpf`: the same nightly build of `trace-ebpf` that
//! `trace-manager/build.rs` runs, with its output shown.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

/// The workspace root (the parent of the xtask crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is inside the workspace")
        .to_path_buf()
}

/// Where cargo writes its output: `$CARGO_TARGET_DIR` (relative to the
/// workspace root, where [`crate::run::cargo`] runs) or the workspace's
/// `target`.
pub fn target_dir() -> PathBuf {
    let root = workspace_root();
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => root.join(dir),
        _ => root.join("target"),
    }
}

/// `$CARGO_HOME` (default `~/.cargo`).
pub fn cargo_home() -> Result<PathBuf> {
    if let Some(home) = std::env::var_os("CARGO_HOME") {
        return Ok(PathBuf::from(home));
    }
    let home = std::env::var_os("HOME").context("neither CARGO_HOME nor HOME is set")?;
    Ok(Path::new(&home).join(".cargo"))
}

/// `rustup run nightly <program>`, without the variables of the cargo that
/// runs xtask (which would make the nested build use the stable toolchain).
pub fn nightly(program: &str) -> Result<Command> {
    trace_ebpf_build::nightly(program).map_err(anyhow::Error::msg)
}

/// Builds `trace-ebpf` for `bpfel-unknown-none` (the build trace-manager's
/// build script runs, its output shown) and returns the object's path.
pub fn build_ebpf() -> Result<PathBuf> {
    trace_ebpf_build::build(&workspace_root(), true).map_err(anyhow::Error::msg)
}
