//! `cargo xtask build-ebpf`: the same nightly build of `trace-ebpf` that
//! `trace-manager/build.rs` runs when the committed object is out of date,
//! with its output shown; it then updates the committed object
//! (`trace-manager/ebpf/`). The test suite's [`check_committed`] builds it
//! too and compares.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use trace_ebpf_build::prebuilt;

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

/// Builds `trace-ebpf` from source and makes the result the committed
/// object, with the digest of its sources; returns the committed path.
pub fn update_committed() -> Result<PathBuf> {
    let root = workspace_root();
    let object = build_ebpf()?;
    prebuilt::store(&root, &object).map_err(anyhow::Error::msg)?;
    Ok(root.join(prebuilt::OBJECT))
}

/// Fails unless the committed object is byte for byte what the sources
/// build now, and its digest names these sources.
pub fn check_committed() -> Result<()> {
    let root = workspace_root();
    let fix = "run `cargo xtask build-ebpf` and commit trace-manager/ebpf/";
    if prebuilt::current(&root)
        .map_err(anyhow::Error::msg)?
        .is_none()
    {
        bail!(
            "the committed eBPF object ({}) was not built from the sources of trace-ebpf and \
             trace-common as they are now: {fix}",
            prebuilt::OBJECT
        );
    }
    let built = build_ebpf()?;
    let committed = root.join(prebuilt::OBJECT);
    let same = std::fs::read(&built).with_context(|| format!("cannot read {}", built.display()))?
        == std::fs::read(&committed)
            .with_context(|| format!("cannot read {}", committed.display()))?;
    if !same {
        bail!(
            "the committed eBPF object ({}) differs from a build of its sources ({}): {fix}",
            committed.display(),
            built.display()
        );
    }
    eprintln!("xtask: the committed eBPF object is what its sources build");
    Ok(())
}
