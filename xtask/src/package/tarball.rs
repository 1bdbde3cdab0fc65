//! The static tarball: `trace-cli` and `trace-manager` linked statically
//! against musl (`static-pie`), for machines that are not Debian, or where
//! nothing may be installed: unpack and run, as Perfetto's `tracebox`.
//!
//! Built without the `sql` feature (`query` and `export`): DataFusion would
//! double the package's build time; those two commands say so and point at
//! the Debian package. Everything else — recording (the eBPF object is
//! inside), reports, flame graphs, `check`, `doctor`, the daemon — works the
//! same, since the kernel side is system calls only.

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};

use super::{Profile, copy, output, split_debug, version};
use crate::ebpf::target_dir;
use crate::run::{cargo, run};

/// Builds the tarball into `target/debian/` and returns its path.
pub fn tarball(profile: Profile) -> Result<PathBuf> {
    let arch = output(Command::new("uname").arg("-m"))?;
    let target = format!("{arch}-unknown-linux-musl");
    ensure_musl(&target)?;
    let mut build = cargo();
    build
        .args(["build", "-p", "trace-cli", "-p", "trace-manager"])
        .args(["--no-default-features", "--target", &target]);
    if profile == Profile::Release {
        build.arg("--release");
    }
    run(&mut build)?;
    let built = target_dir().join(&target).join(match profile {
        Profile::Release => "release",
        Profile::Dev => "debug",
    });
    let version = version()?;
    let name = format!("trace-cli-{version}-{arch}-linux-musl");
    let out_dir = target_dir().join("debian");
    let stage = out_dir.join(&name);
    let debug = out_dir.join(format!("{name}-debug"));
    for dir in [&stage, &debug] {
        if dir.exists() {
            fs::remove_dir_all(dir).with_context(|| format!("cannot remove {}", dir.display()))?;
        }
    }
    for program in ["trace-cli", "trace-manager"] {
        let dest = stage.join("bin").join(program);
        copy(&built.join(program), &dest, 0o755)?;
        // The debug information is left out of the tarball (kept beside it,
        // under target/, for whoever built it).
        split_debug(&dest, &debug, false)?;
    }
    let root = crate::ebpf::workspace_root();
    copy(&root.join("README.md"), &stage.join("README.md"), 0o644)?;
    copy(
        &root.join("packaging/debian/trace-manager.service"),
        &stage.join("trace-manager.service"),
        0o644,
    )?;
    let tarball = out_dir.join(format!("{name}.tar.gz"));
    run(Command::new("tar")
        .arg("-C")
        .arg(&out_dir)
        .args(["--owner=root", "--group=root", "-czf"])
        .arg(&tarball)
        .arg(&name))?;
    eprintln!(
        "xtask: {} ({:.1} MB)",
        tarball.display(),
        fs::metadata(&tarball)?.len() as f64 / 1e6
    );
    Ok(tarball)
}

/// Adds the musl target to the toolchain and installs `musl-tools` (the C
/// compiler of the C code some crates build), when missing.
fn ensure_musl(target: &str) -> Result<()> {
    let installed = output(Command::new("rustup").args(["target", "list", "--installed"]))?;
    if !installed.lines().any(|l| l.trim() == target) {
        run(Command::new("rustup").args(["target", "add", target]))?;
    }
    if Command::new("musl-gcc").arg("--version").output().is_err() {
        run(Command::new("apt-get").arg("update"))?;
        run(Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends", "musl-tools"])
            .env("DEBIAN_FRONTEND", "noninteractive"))?;
    }
    Ok(())
}
