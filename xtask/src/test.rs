//! `cargo xtask test`: the whole test suite.

use std::process::Command;

use anyhow::{Result, bail};

use crate::run::{cargo, is_root, run};

/// Checks formatting, the code's shape and the manager's public items,
/// that the committed eBPF object is what its sources build, lints and doc
/// links, builds every binary, then runs every test, the end-to-end tests
/// with real eBPF included (they need root), the provider library's
/// compile-time off switch, and the Debian packages on a clean root.
pub fn test(extra: &[String]) -> Result<()> {
    if !is_root() {
        bail!(
            "the end-to-end tests load eBPF programs and must run as root: \
             run `sudo -E cargo xtask test` (or as root)"
        );
    }
    run(cargo().args(["fmt", "--all", "--", "--check"]))?;
    // The code's shape, and the manager's public items against their
    // snapshot.
    crate::structure::structure()?;
    crate::public_api::public_api(false)?;
    // The committed eBPF object is what its sources build.
    crate::ebpf::check_committed()?;
    run(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    // Broken links in the API documentation are errors too.
    let mut doc = cargo();
    doc.args(["doc", "--workspace", "--no-deps"])
        .env("RUSTDOCFLAGS", "-D warnings");
    run(&mut doc)?;
    // The end-to-end tests run the built binaries (trace-cli, workloads).
    run(cargo().args(["build", "--workspace", "--bins"]))?;
    let mut cmd: Command = cargo();
    cmd.args(["test", "--workspace"]).args(extra);
    run(&mut cmd)?;
    if extra.is_empty() {
        // The compile-time off switch: every macro must compile to nothing.
        run(cargo().args(["test", "-p", "trace-provider", "--features", "off", "--lib"]))?;
        // The Debian packages, from this build, on a clean Debian 12 root:
        // installed, recording as root and through the installed daemon.
        let debs = crate::package::package(crate::package::Profile::Dev)?;
        crate::package::install::check(&debs)?;
    }
    Ok(())
}
