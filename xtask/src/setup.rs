//! `cargo xtask setup`: installs what building the eBPF object needs.
//!
//! Idempotent and fast once done: each step first checks whether its tool is
//! already there.
//!
//! 1. Debian packages (a C toolchain to link `bpf-linker`; `sys/sdt.h` for
//!    the USDT test program), with `apt-get update` first, only when one is
//!    missing.
//! 2. `rust-src` for the nightly toolchain (for `-Z build-std=core`).
//! 3. `bpf-linker` 0.13, built against the nightly's own LLVM: a folder with
//!    `libLLVM.so` symlinks to the nightly's `libLLVM.so.<version>` serves as
//!    `LLVM_PREFIX`. It lives under `$CARGO_HOME` rather than `target/`,
//!    because the installed `bpf-linker` loads LLVM through it at run time
//!    (its RUNPATH) and must survive `cargo clean`.
//!
//! 4. A Python virtual environment with `pyarrow` at `target/pyenv` (under
//!    the cargo target directory, so `cargo clean` removes it), the second
//!    Parquet reader the SQL end-to-end tests check exports with.
//!
//! The nightly toolchain itself is not installed here.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::ebpf::{cargo_home, nightly, target_dir};
use crate::run::{is_root, run};

/// The bpf-linker release the eBPF build is known to work with.
const BPF_LINKER_VERSION: &str = "0.13.0";

/// Debian packages every build needs: a C toolchain, which links Rust
/// programs.
const BUILD_PACKAGES: &[&str] = &["build-essential"];

/// Debian packages needed to build and link `bpf-linker`.
const EBPF_PACKAGES: &[&str] = &["build-essential", "zlib1g-dev"];

/// Debian packages of the tests: the end-to-end tests' C USDT probes
/// (`systemtap-sdt-dev`: `sys/sdt.h`); `strace`, which the tests compare
/// system call counts with, and `xz-utils`, with which they build a
/// stripped program's `.gnu_debugdata`; `debootstrap`, which makes the clean
/// Debian root the packages are checked on; `openssh-server` (and its
/// client), through which the several-machines tests reach the machines
/// they make in network namespaces.
const TEST_PACKAGES: &[&str] = &[
    "systemtap-sdt-dev",
    "strace",
    "xz-utils",
    "debootstrap",
    // Python frames: Debian's interpreter; perf maps: Node; `export --pprof` read back by
    // protoc's Python code.
    "python3.11",
    "nodejs",
    "protobuf-compiler",
    "python3-protobuf",
    "openssh-server",
    "openssh-client",
];

/// Runs every setup step: what the tests need.
pub fn setup() -> Result<()> {
    setup_ebpf()?;
    ensure_debian_packages(TEST_PACKAGES)?;
    ensure_python_env()?;
    eprintln!(
        "xtask setup: done (nightly rust-src, bpf-linker {BPF_LINKER_VERSION}, pyarrow in {})",
        python_env().display()
    );
    Ok(())
}

/// What building the eBPF object from source needs: the nightly's
/// `rust-src`, `bpf-linker` and the packages that build it.
pub fn setup_ebpf() -> Result<()> {
    check_nightly()?;
    ensure_debian_packages(EBPF_PACKAGES)?;
    ensure_rust_src()?;
    ensure_bpf_linker()
}

/// What building `trace-cli` needs: a C toolchain, and the eBPF toolchain
/// only when the committed eBPF object does not match its sources.
pub fn setup_build() -> Result<()> {
    ensure_debian_packages(BUILD_PACKAGES)?;
    let root = crate::ebpf::workspace_root();
    match trace_ebpf_build::prebuilt::current(&root).map_err(anyhow::Error::msg)? {
        Some(_) => Ok(()),
        None => {
            eprintln!(
                "xtask: the committed eBPF object does not match its sources; installing what \
                 building it needs"
            );
            setup_ebpf()
        }
    }
}

/// Fails with instructions when the nightly toolchain is absent.
fn check_nightly() -> Result<()> {
    let ok = nightly("rustc")?
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        bail!(
            "the nightly Rust toolchain is needed to build the eBPF object; install it with \
             `rustup toolchain install nightly --profile minimal` and run `cargo xtask setup` again"
        );
    }
    Ok(())
}

/// Installs those of `packages` that are missing (refreshing the package
/// lists first).
fn ensure_debian_packages(packages: &[&str]) -> Result<()> {
    if !Path::new("/usr/bin/dpkg-query").exists() {
        eprintln!("xtask setup: not a Debian system; make sure a C toolchain is installed");
        return Ok(());
    }
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| !debian_package_installed(p))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() {
        bail!(
            "Debian packages {} are missing; run `sudo apt-get update && sudo apt-get install \
             -y {}` (or `cargo xtask setup` as root)",
            missing.join(" "),
            missing.join(" ")
        );
    }
    run(Command::new("apt-get").arg("update"))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

/// Whether dpkg says `package` is installed.
fn debian_package_installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .is_ok_and(|o| {
            o.status.success()
                && String::from_utf8_lossy(&o.stdout).contains("install ok installed")
        })
}

/// Adds `rust-src` to the nightly toolchain unless it is there.
fn ensure_rust_src() -> Result<()> {
    let out = Command::new("rustup")
        .args(["component", "list", "--toolchain", "nightly", "--installed"])
        .output()
        .context("cannot run rustup")?;
    let installed = String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.trim() == "rust-src" || l.trim().starts_with("rust-src-"));
    if out.status.success() && installed {
        return Ok(());
    }
    run(Command::new("rustup").args(["component", "add", "rust-src", "--toolchain", "nightly"]))
}

/// Installs bpf-linker [`BPF_LINKER_VERSION`] unless `bpf-linker --version`
/// already reports it.
fn ensure_bpf_linker() -> Result<()> {
    let bin = cargo_home()?.join("bin");
    let linker = bin.join("bpf-linker");
    if bpf_linker_version(&linker).is_some_and(|v| v.contains("0.13")) {
        return Ok(());
    }
    let (prefix, major) = llvm_prefix()?;
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.args(["install", "bpf-linker", "--version", BPF_LINKER_VERSION])
        .args(["--no-default-features", "--features"])
        .arg(format!("llvm-{major}"))
        .env("LLVM_PREFIX", &prefix);
    run(&mut cmd)?;
    match bpf_linker_version(&linker) {
        Some(v) if v.contains("0.13") => Ok(()),
        other => bail!(
            "bpf-linker was installed but `{} --version` says {other:?}",
            linker.display()
        ),
    }
}

/// The output of `linker --version`, if it runs.
fn bpf_linker_version(linker: &Path) -> Option<String> {
    let out = Command::new(linker).arg("--version").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Makes `$CARGO_HOME/bpf-linker-llvm/lib` with `libLLVM.so` and
/// `libLLVM.so.<version>` symlinks to the nightly's LLVM; returns the prefix
/// and LLVM's major version.
fn llvm_prefix() -> Result<(PathBuf, u32)> {
    let out = nightly("rustc")?
        .args(["--print", "sysroot"])
        .output()
        .context("cannot run the nightly rustc")?;
    if !out.status.success() {
        bail!("`rustc +nightly --print sysroot` failed");
    }
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let lib_dir = sysroot.join("lib");
    let llvm = std::fs::read_dir(&lib_dir)
        .with_context(|| format!("cannot list {}", lib_dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libLLVM.so."))
        })
        .with_context(|| format!("no libLLVM.so.* in {}", lib_dir.display()))?;
    let name = llvm
        .file_name()
        .and_then(|n| n.to_str())
        .expect("matched as UTF-8 above")
        .to_owned();
    let major: u32 = name["libLLVM.so.".len()..]
        .split('.')
        .next()
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("cannot read the LLVM version in {name}"))?;

    let prefix = cargo_home()?.join("bpf-linker-llvm");
    let prefix_lib = prefix.join("lib");
    std::fs::create_dir_all(&prefix_lib)
        .with_context(|| format!("cannot create {}", prefix_lib.display()))?;
    for link in [prefix_lib.join("libLLVM.so"), prefix_lib.join(&name)] {
        if std::fs::read_link(&link).is_ok_and(|t| t == llvm) {
            continue;
        }
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&llvm, &link)
            .with_context(|| format!("cannot link {} to {}", link.display(), llvm.display()))?;
    }
    Ok((prefix, major))
}

/// The Python packages of the tests' virtual environment.
const PYTHON_PACKAGES: &[&str] = &["pyarrow"];

/// The tests' Python virtual environment (`tests` finds it at the same
/// place: `target/pyenv`).
fn python_env() -> PathBuf {
    target_dir().join("pyenv")
}

/// Whether the environment's Python imports every package.
fn python_env_ready(python: &Path) -> bool {
    let imports = PYTHON_PACKAGES.join(", ");
    Command::new(python)
        .args(["-c", &format!("import {imports}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Makes the virtual environment with [`PYTHON_PACKAGES`] unless it has
/// them already.
fn ensure_python_env() -> Result<()> {
    let env = python_env();
    let python = env.join("bin/python");
    if python_env_ready(&python) {
        return Ok(());
    }
    if !python.exists() {
        run(Command::new("python3").arg("-m").arg("venv").arg(&env)).with_context(|| {
            "cannot make a Python virtual environment: install python3 with its venv module \
             (Debian: python3-venv)"
        })?;
    }
    run(Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(PYTHON_PACKAGES))?;
    if !python_env_ready(&python) {
        bail!(
            "{} cannot import {} after installing them",
            python.display(),
            PYTHON_PACKAGES.join(", ")
        );
    }
    Ok(())
}
