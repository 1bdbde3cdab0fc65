//! Building the kernel provider's eBPF object (crate `trace-ebpf`) with
//! the nightly toolchain for `bpfel-unknown-none`: the one build that
//! `trace-manager/build.rs` runs (to embed the object) and `cargo xtask
//! build-ebpf` runs (to show its output). It needs the nightly toolchain
//! with `rust-src` and `bpf-linker`, which `cargo xtask setup` installs;
//! what is missing is said with that hint.
//!
//! No dependencies: a build script's dependencies are built before it, on
//! every clean build.

#![forbid(unsafe_code)]

pub mod prebuilt;

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// What to run when a tool is missing.
pub const SETUP_HINT: &str = "run `cargo xtask setup` first";

/// The paths whose change makes the object out of date, under the
/// workspace `root`: a build script prints them as `rerun-if-changed`.
pub fn inputs(root: &Path) -> Vec<PathBuf> {
    let ebpf = root.join("trace-ebpf");
    let common = root.join("trace-common");
    vec![
        ebpf.join("src"),
        ebpf.join("Cargo.toml"),
        ebpf.join(".cargo"),
        root.join("Cargo.toml"),
        root.join("Cargo.lock"),
        common.join("src"),
        common.join("Cargo.toml"),
    ]
}

/// Builds `trace-ebpf` of the workspace at `root` and returns the object's
/// path, or why it could not be built. With `show`, the nested build's
/// output goes to this process's terminal; without, it is kept and given
/// in the error.
pub fn build(root: &Path, show: bool) -> Result<PathBuf, String> {
    let tools = Tools::find()?;
    tools.check_prerequisites()?;
    let dir = root.join("trace-ebpf");
    // A target directory of its own: an outer cargo holds the lock on the
    // workspace's. The nested cargo runs in `trace-ebpf/`, so that its
    // `.cargo/config.toml` (rustflags, the object's profile) applies.
    let target_dir = dir.join("target");
    let mut cmd = tools.nightly("cargo");
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
    // The same object from any checkout and any home: the paths of the
    // sources that the object's debug info (its BTF line records) names
    // are written relative to fixed prefixes. Arrays given with --config
    // add to the rustflags of `.cargo/config.toml`.
    let mut remaps = vec![(root.to_path_buf(), "/trace")];
    if let Some(home) = &tools.cargo_home {
        remaps.push((home.clone(), "/cargo"));
    }
    if let Some(sysroot) = tools.nightly_sysroot() {
        remaps.push((sysroot, "/rust"));
    }
    let flags: Vec<String> = remaps
        .iter()
        .map(|(from, to)| format!("\"--remap-path-prefix={}={to}\"", from.display()))
        .collect();
    cmd.arg("--config").arg(format!(
        "target.bpfel-unknown-none.rustflags=[{}]",
        flags.join(", ")
    ));
    let failed = |status: std::process::ExitStatus, output: String| {
        format!(
            "building the eBPF object failed ({status}){output}; if a tool is missing, {SETUP_HINT}"
        )
    };
    if show {
        eprintln!("building the eBPF object: {cmd:?}");
        let status = cmd
            .status()
            .map_err(|e| format!("cannot run {cmd:?}: {e}; {SETUP_HINT}"))?;
        if !status.success() {
            return Err(failed(status, String::new()));
        }
    } else {
        let Output {
            status,
            stdout,
            stderr,
        } = cmd
            .output()
            .map_err(|e| format!("cannot run {cmd:?}: {e}; {SETUP_HINT}"))?;
        if !status.success() {
            let output = format!(
                ":\n{}\n{}\n",
                String::from_utf8_lossy(&stdout),
                String::from_utf8_lossy(&stderr)
            );
            return Err(failed(status, output));
        }
    }
    Ok(target_dir.join("bpfel-unknown-none/release/trace-ebpf"))
}

/// `rustup run nightly <program>`, with an environment free of what an
/// outer (stable) cargo set, and `$CARGO_HOME/bin` on `PATH`.
pub fn nightly(program: &str) -> Result<Command, String> {
    Ok(Tools::find()?.nightly(program))
}

/// Where rustup and cargo-installed tools live.
struct Tools {
    /// `$CARGO_HOME` (default `~/.cargo`), if known.
    cargo_home: Option<PathBuf>,
    /// `$CARGO_HOME/bin` (default `~/.cargo/bin`), if known.
    cargo_bin: Option<PathBuf>,
    /// The `rustup` binary.
    rustup: PathBuf,
}

impl Tools {
    fn find() -> Result<Tools, String> {
        let cargo_home = env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")));
        let cargo_bin = cargo_home.as_ref().map(|h| h.join("bin"));
        let rustup = find_program("rustup", cargo_bin.as_deref())
            .ok_or_else(|| format!("rustup not found; {SETUP_HINT}"))?;
        Ok(Tools {
            cargo_home,
            cargo_bin,
            rustup,
        })
    }

    /// The nightly toolchain's sysroot, if it runs.
    fn nightly_sysroot(&self) -> Option<PathBuf> {
        self.nightly("rustc")
            .args(["--print", "sysroot"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
    }

    /// `rustup run nightly <program>` with an environment free of what the
    /// outer (stable) cargo set for this build script.
    fn nightly(&self, program: &str) -> Command {
        let mut cmd = Command::new(&self.rustup);
        cmd.args(["run", "nightly", program]);
        for (key, _) in env::vars_os() {
            let Some(key) = key.to_str() else { continue };
            if is_build_env(key) {
                cmd.env_remove(key);
            }
        }
        cmd.env("PATH", self.path_with_cargo_bin());
        cmd
    }

    /// `PATH` with `$CARGO_HOME/bin` in front, so rustc finds `bpf-linker`.
    fn path_with_cargo_bin(&self) -> OsString {
        let mut dirs: Vec<PathBuf> = self.cargo_bin.iter().cloned().collect();
        if let Some(path) = env::var_os("PATH") {
            dirs.extend(env::split_paths(&path));
        }
        env::join_paths(dirs).unwrap_or_default()
    }

    /// Fails the build with [`SETUP_HINT`] when the nightly toolchain, its
    /// `rust-src` component or `bpf-linker` is missing.
    fn check_prerequisites(&self) -> Result<(), String> {
        let sysroot = self.nightly_sysroot().ok_or_else(|| {
            format!("the nightly Rust toolchain is needed to build the eBPF object; {SETUP_HINT}")
        })?;
        let core = sysroot.join("lib/rustlib/src/rust/library/core/Cargo.toml");
        if !core.exists() {
            return Err(format!(
                "the nightly toolchain lacks the rust-src component ({} missing); {SETUP_HINT}",
                core.display()
            ));
        }
        let linker = find_program("bpf-linker", self.cargo_bin.as_deref())
            .ok_or_else(|| format!("bpf-linker is not installed; {SETUP_HINT}"))?;
        let works = Command::new(&linker)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !works {
            return Err(format!(
                "{} --version failed (built against another LLVM?); {SETUP_HINT}",
                linker.display()
            ));
        }
        Ok(())
    }
}

/// Variables cargo sets for build scripts, or that steer rustc or cargo,
/// which must not leak into the nested nightly build.
fn is_build_env(key: &str) -> bool {
    const EXACT: &[&str] = &[
        "RUSTC",
        "RUSTDOC",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_LINKER",
        "RUSTUP_TOOLCHAIN",
        "RUSTFLAGS",
        "RUSTDOCFLAGS",
        "CARGO",
        "TARGET",
        "HOST",
        "PROFILE",
        "OUT_DIR",
        "OPT_LEVEL",
        "DEBUG",
        "NUM_JOBS",
        "MAKEFLAGS",
        "MFLAGS",
        "CLIPPY_ARGS",
        "CLIPPY_CONF_DIR",
    ];
    // Kept: where cargo lives and how it reaches the registry.
    const KEEP_PREFIXES: &[&str] = &[
        "CARGO_HOME",
        "CARGO_HTTP_",
        "CARGO_NET_",
        "CARGO_REGISTRY_",
        "CARGO_REGISTRIES_",
        "CARGO_TERM_",
    ];
    if EXACT.contains(&key) {
        return true;
    }
    if key.starts_with("CARGO_") {
        return !KEEP_PREFIXES.iter().any(|p| key.starts_with(p));
    }
    key.starts_with("DEP_") || key.starts_with("__CARGO")
}

/// `name` from `PATH`, or from `extra_dir`.
fn find_program(name: &str, extra_dir: Option<&Path>) -> Option<PathBuf> {
    let path = env::var_os("PATH").unwrap_or_default();
    env::split_paths(&path)
        .chain(extra_dir.map(Path::to_path_buf))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}
