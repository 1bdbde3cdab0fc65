//! Builds the kernel provider's eBPF object (crate `trace-ebpf`) with the
//! nightly toolchain for `bpfel-unknown-none` and copies it to
//! `$OUT_DIR/trace-ebpf`, where `src/kernel/mod.rs` embeds it.
//!
//! Needs the nightly toolchain with `rust-src` and `bpf-linker`; `cargo xtask
//! setup` installs both.

use std::env;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const SETUP_HINT: &str = "run `cargo xtask setup` first";

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest_dir
        .parent()
        .expect("trace-manager is in the workspace");
    let ebpf_dir = root.join("trace-ebpf");
    let common_dir = root.join("trace-common");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));

    for path in [
        ebpf_dir.join("src"),
        ebpf_dir.join("Cargo.toml"),
        ebpf_dir.join(".cargo"),
        root.join("Cargo.toml"),
        root.join("Cargo.lock"),
        common_dir.join("src"),
        common_dir.join("Cargo.toml"),
    ] {
        println!("cargo::rerun-if-changed={}", path.display());
    }

    let tools = Tools::find();
    tools.check_prerequisites();

    // A target directory of its own: the outer cargo holds the lock on the
    // workspace's. The nested cargo runs in `trace-ebpf/`, so that its
    // `.cargo/config.toml` (rustflags, the object's profile) applies.
    let target_dir = ebpf_dir.join("target");
    let mut cmd = tools.nightly("cargo");
    cmd.current_dir(&ebpf_dir).args([
        "build",
        "-Z",
        "build-std=core",
        "--target",
        "bpfel-unknown-none",
        "--release",
        "--manifest-path",
    ]);
    cmd.arg(ebpf_dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}; {SETUP_HINT}"));
    if !output.status.success() {
        panic!(
            "building the eBPF object failed ({}):\n{}\n{}\n(if a tool is missing, {SETUP_HINT})",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let object = target_dir.join("bpfel-unknown-none/release/trace-ebpf");
    let dest = out_dir.join("trace-ebpf");
    fs::copy(&object, &dest).unwrap_or_else(|e| {
        panic!(
            "cannot copy {} to {}: {e}",
            object.display(),
            dest.display()
        )
    });
}

/// Where rustup and cargo-installed tools live.
struct Tools {
    /// `$CARGO_HOME/bin` (default `~/.cargo/bin`), if known.
    cargo_bin: Option<PathBuf>,
    /// The `rustup` binary.
    rustup: PathBuf,
}

impl Tools {
    fn find() -> Tools {
        let cargo_home = env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")));
        let cargo_bin = cargo_home.map(|h| h.join("bin"));
        let rustup = find_program("rustup", cargo_bin.as_deref())
            .unwrap_or_else(|| panic!("rustup not found; {SETUP_HINT}"));
        Tools { cargo_bin, rustup }
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
    fn check_prerequisites(&self) {
        let sysroot = self
            .nightly("rustc")
            .args(["--print", "sysroot"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
            .unwrap_or_else(|| {
                panic!(
                    "the nightly Rust toolchain is needed to build the eBPF object; {SETUP_HINT}"
                )
            });
        let core = sysroot.join("lib/rustlib/src/rust/library/core/Cargo.toml");
        if !core.exists() {
            panic!(
                "the nightly toolchain lacks the rust-src component ({} missing); {SETUP_HINT}",
                core.display()
            );
        }
        let linker = find_program("bpf-linker", self.cargo_bin.as_deref())
            .unwrap_or_else(|| panic!("bpf-linker is not installed; {SETUP_HINT}"));
        let works = Command::new(&linker)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !works {
            panic!(
                "{} --version failed (built against another LLVM?); {SETUP_HINT}",
                linker.display()
            );
        }
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
