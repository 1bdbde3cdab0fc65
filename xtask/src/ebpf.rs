//! `cargo xtask build-ebpf`: the same nightly build of `trace-ebpf` that
//! `trace-manager/build.rs` runs, with its output shown.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

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
    let mut cmd = Command::new("rustup");
    cmd.args(["run", "nightly", program]);
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let keep = key == "CARGO_HOME"
            || [
                "CARGO_HTTP_",
                "CARGO_NET_",
                "CARGO_REGISTRY_",
                "CARGO_REGISTRIES_",
                "CARGO_TERM_",
            ]
            .iter()
            .any(|p| key.starts_with(p));
        let drop = (key.starts_with("CARGO") && !keep)
            || key.starts_with("RUSTC")
            || matches!(
                key,
                "RUSTUP_TOOLCHAIN" | "RUSTFLAGS" | "RUSTDOC" | "RUSTDOCFLAGS"
            );
        if drop {
            cmd.env_remove(key);
        }
    }
    // rustc finds bpf-linker on PATH; cargo-installed tools live here.
    let mut dirs = vec![cargo_home()?.join("bin")];
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    cmd.env("PATH", std::env::join_paths(dirs)?);
    Ok(cmd)
}

/// Builds `trace-ebpf` for `bpfel-unknown-none` and returns the object's path.
pub fn build_ebpf() -> Result<PathBuf> {
    let dir = workspace_root().join("trace-ebpf");
    // Run in `trace-ebpf/`, so that its `.cargo/config.toml` (rustflags, the
    // object's profile) applies, with a target directory of its own.
    let target_dir = dir.join("target");
    let mut cmd = nightly("cargo")?;
    cmd.current_dir(&dir)
        .args([
            "build",
            "-Z",
            "build-std=core",
            "--target",
            "bpfel-unknown-none",
            "--release",
            "--manifest-path",
        ])
        .arg(dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    eprintln!("xtask: {cmd:?}");
    let status = cmd
        .status()
        .with_context(|| format!("cannot run {cmd:?} (is rustup installed?)"))?;
    if !status.success() {
        bail!(
            "building the eBPF object failed ({status}); if a tool is missing, run `cargo xtask setup`"
        );
    }
    Ok(target_dir.join("bpfel-unknown-none/release/trace-ebpf"))
}
