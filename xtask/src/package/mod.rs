//! `cargo xtask package`: the Debian packages.
//!
//! - `trace-cli_<version>_<arch>.deb`: `trace-cli` and `trace-manager` (the
//!   eBPF object inside it), stripped; the C provider library
//!   (`libtrace_provider.so` and `.a`) and its header; the manual pages and
//!   shell completions; the daemon's systemd unit and the `tracing` group
//!   (packaging/debian/).
//! - `trace-cli-dbgsym_<version>_<arch>.deb`: the debug information split
//!   out of those binaries, under `/usr/lib/debug/.build-id/`, where gdb,
//!   perf and our own symbolizer find it by build id (as Debian's
//!   `-dbgsym` packages).
//! - `trace-cli-<version>-<arch>-linux-musl.tar.gz`: both programs linked
//!   statically ([`tarball`]).
//!
//! Written with `dpkg-deb` from a staging folder rather than with
//! cargo-deb: the layout, the split debug package and the maintainer
//! scripts are ours to say either way, and `dpkg-deb`, `dpkg-shlibdeps`
//! and `objcopy` come with the C toolchain every build has, so packaging
//! adds no tool to build first. [`install`] checks the result on a clean
//! Debian 12 root.

pub mod install;
pub mod tarball;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::ebpf::{target_dir, workspace_root};
use crate::run::{cargo, run};

/// The package's name.
pub const NAME: &str = "trace-cli";

/// Which build the package holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// The optimized build users install.
    Release,
    /// The test suite's build, already there: for checking the package's
    /// layout and scripts without a second, optimized build of everything.
    Dev,
}

impl Profile {
    fn dir(self) -> &'static str {
        match self {
            Profile::Release => "release",
            Profile::Dev => "debug",
        }
    }
}

/// The two packages built.
#[derive(Clone, Debug)]
pub struct Debs {
    /// The package.
    pub main: PathBuf,
    /// Its debug information.
    pub dbgsym: PathBuf,
    /// The build ids of the binaries, as hex.
    pub build_ids: Vec<String>,
    /// The static tarball.
    pub tarball: PathBuf,
}

/// Builds the binaries (every feature) with `profile` and makes both
/// packages in `target/debian/`.
pub fn package(profile: Profile) -> Result<Debs> {
    let mut build = cargo();
    build.args([
        "build",
        "-p",
        "trace-cli",
        "-p",
        "trace-manager",
        "-p",
        "trace-provider-c",
    ]);
    if profile == Profile::Release {
        build.arg("--release");
    }
    run(&mut build)?;
    let built = target_dir().join(profile.dir());
    let version = version()?;
    let arch = output(Command::new("dpkg").arg("--print-architecture"))?;
    let out_dir = target_dir().join("debian");
    let stage = out_dir.join(format!("{NAME}_{version}_{arch}"));
    let debug_stage = out_dir.join(format!("{NAME}-dbgsym_{version}_{arch}"));
    for dir in [&stage, &debug_stage] {
        if dir.exists() {
            fs::remove_dir_all(dir).with_context(|| format!("cannot remove {}", dir.display()))?;
        }
    }
    let multiarch = output(Command::new("dpkg-architecture").arg("-qDEB_HOST_MULTIARCH"))?;

    // The binaries, stripped, their debug information split out.
    let mut build_ids = Vec::new();
    let mut elves = Vec::new();
    for (from, to, library) in [
        ("trace-cli", "usr/bin/trace-cli", false),
        ("trace-manager", "usr/bin/trace-manager", false),
        (
            "libtrace_provider.so",
            &*format!("usr/lib/{multiarch}/libtrace_provider.so"),
            true,
        ),
    ] {
        let dest = stage.join(to);
        copy(&built.join(from), &dest, 0o755)?;
        let id = split_debug(&dest, &debug_stage, library)?;
        build_ids.push(id);
        elves.push(dest);
    }
    copy(
        &built.join("libtrace_provider.a"),
        &stage.join(format!("usr/lib/{multiarch}/libtrace_provider.a")),
        0o644,
    )?;
    run(Command::new("strip")
        .arg("--strip-debug")
        .arg(stage.join(format!("usr/lib/{multiarch}/libtrace_provider.a"))))?;
    let root = workspace_root();
    copy(
        &root.join("trace-provider/include/trace/event.h"),
        &stage.join("usr/include/trace/event.h"),
        0o644,
    )?;
    let pkgconfig = stage.join(format!("usr/lib/{multiarch}/pkgconfig"));
    fs::create_dir_all(&pkgconfig)?;
    fs::write(
        pkgconfig.join("trace-provider.pc"),
        pkg_config(&multiarch, &version),
    )
    .context("cannot write the pkg-config file")?;

    // Manual pages and completions, from the binary itself.
    let cli = stage.join("usr/bin/trace-cli");
    let man1 = stage.join("usr/share/man/man1");
    fs::create_dir_all(&man1)?;
    run(Command::new(&cli).arg("man").arg("--dir").arg(&man1))?;
    let man8 = stage.join("usr/share/man/man8");
    fs::create_dir_all(&man8)?;
    let help = Command::new(stage.join("usr/bin/trace-manager"))
        .arg("--help")
        .output()
        .context("cannot run trace-manager --help")?;
    fs::write(
        man8.join("trace-manager.8"),
        manager_page(&String::from_utf8_lossy(&help.stdout), &version),
    )?;
    for dir in [&man1, &man8] {
        for entry in fs::read_dir(dir)? {
            run(Command::new("gzip").args(["-9n"]).arg(entry?.path()))?;
        }
    }
    for (shell, path) in [
        ("bash", "usr/share/bash-completion/completions/trace-cli"),
        ("zsh", "usr/share/zsh/vendor-completions/_trace-cli"),
        ("fish", "usr/share/fish/vendor_completions.d/trace-cli.fish"),
    ] {
        let script = Command::new(&cli)
            .args(["completions", shell])
            .output()
            .with_context(|| format!("cannot write the {shell} completions"))?;
        if !script.status.success() {
            bail!("trace-cli completions {shell} failed");
        }
        let dest = stage.join(path);
        fs::create_dir_all(dest.parent().expect("a file in a folder"))?;
        fs::write(&dest, script.stdout)?;
    }

    // The daemon's unit, the group, the documents.
    let packaging = root.join("packaging/debian");
    copy(
        &packaging.join("trace-manager.service"),
        &stage.join("lib/systemd/system/trace-manager.service"),
        0o644,
    )?;
    copy(
        &packaging.join("sysusers.conf"),
        &stage.join(format!("usr/lib/sysusers.d/{NAME}.conf")),
        0o644,
    )?;
    let doc = stage.join(format!("usr/share/doc/{NAME}"));
    copy(&packaging.join("copyright"), &doc.join("copyright"), 0o644)?;
    copy(&root.join("README.md"), &doc.join("README.md"), 0o644)?;
    for page in ["REFERENCE.md", "ARCHITECTURE.md", "FORMATS.md", "SQL.md"] {
        let from = root.join("docs").join(page);
        if from.exists() {
            copy(&from, &doc.join(page), 0o644)?;
        }
    }
    verify_unit(&stage)?;

    // The control files.
    let depends = shlib_depends(&elves, &out_dir)?;
    let control = stage.join("DEBIAN");
    fs::create_dir_all(&control)?;
    for script in ["postinst", "prerm", "postrm"] {
        copy(&packaging.join(script), &control.join(script), 0o755)?;
    }
    fs::write(
        control.join("control"),
        format!(
            "Package: {NAME}\n\
             Version: {version}\n\
             Architecture: {arch}\n\
             Maintainer: trace developers <trace@example.invalid>\n\
             Installed-Size: {}\n\
             Depends: {depends}\n\
             Section: devel\n\
             Priority: optional\n\
             Homepage: https://example.invalid/trace\n\
             Description: record the kernel and instrumented programs into one trace\n \
             trace-cli records what the kernel did (scheduling, processes, system\n \
             calls, interrupts, block I/O, memory, stacks, probes) and what programs\n \
             linked with the trace provider library wrote, on one timeline, into one\n \
             Fuchsia Trace Format file that opens in ui.perfetto.dev; then reports,\n \
             queries and draws it. trace-manager is the daemon that lets the members\n \
             of the tracing group record without root.\n",
            installed_size(&stage)?
        ),
    )?;
    let main = out_dir.join(format!("{NAME}_{version}_{arch}.deb"));
    build_deb(&stage, &main)?;

    let debug_control = debug_stage.join("DEBIAN");
    fs::create_dir_all(&debug_control)?;
    fs::write(
        debug_control.join("control"),
        format!(
            "Package: {NAME}-dbgsym\n\
             Source: {NAME}\n\
             Version: {version}\n\
             Architecture: {arch}\n\
             Maintainer: trace developers <trace@example.invalid>\n\
             Installed-Size: {}\n\
             Depends: {NAME} (= {version})\n\
             Section: debug\n\
             Priority: optional\n\
             Auto-Built-Package: debug-symbols\n\
             Build-Ids: {}\n\
             Description: debug symbols for {NAME}\n",
            installed_size(&debug_stage)?,
            build_ids.join(" ")
        ),
    )?;
    let dbgsym = out_dir.join(format!("{NAME}-dbgsym_{version}_{arch}.deb"));
    build_deb(&debug_stage, &dbgsym)?;
    for deb in [&main, &dbgsym] {
        let size = fs::metadata(deb)?.len();
        eprintln!(
            "xtask: {} ({:.1} MB; installed {} KiB)",
            deb.display(),
            size as f64 / 1e6,
            if deb == &main {
                installed_size(&stage)?
            } else {
                installed_size(&debug_stage)?
            }
        );
    }
    let tarball = tarball::tarball(profile)?;
    Ok(Debs {
        main,
        dbgsym,
        build_ids,
        tarball,
    })
}

/// The package version: the workspace's, with Debian revision 1.
fn version() -> Result<String> {
    let manifest = fs::read_to_string(workspace_root().join("Cargo.toml"))?;
    let version = manifest
        .lines()
        .skip_while(|l| l.trim() != "[workspace.package]")
        .find_map(|l| {
            let value = l.trim().strip_prefix("version")?.trim().strip_prefix('=')?;
            Some(value.trim().trim_matches('"').to_owned())
        })
        .context("no version in [workspace.package]")?;
    Ok(format!("{version}-1"))
}

/// A command's standard output, trimmed; an error when it fails.
fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Copies `from` to `to` (making its folder) with `mode`.
fn copy(from: &Path, to: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    if let Some(dir) = to.parent() {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    fs::copy(from, to)
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
    fs::set_permissions(to, fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// The GNU build id of an ELF file, as hex.
pub fn build_id(elf: &Path) -> Result<String> {
    let notes = output(Command::new("readelf").arg("-n").arg(elf))?;
    notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .map(str::to_owned)
        .with_context(|| format!("{} has no build id", elf.display()))
}

/// Moves the debug information of `elf` to
/// `debug_root/usr/lib/debug/.build-id/xx/rest.debug`, strips `elf` (all
/// symbols from a program; for a `library`, those not needed to link) and
/// links it to that file; returns the build id.
fn split_debug(elf: &Path, debug_root: &Path, library: bool) -> Result<String> {
    let id = build_id(elf)?;
    if id.len() < 3 {
        bail!("build id {id} of {} is too short", elf.display());
    }
    let debug = debug_root
        .join("usr/lib/debug/.build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]));
    fs::create_dir_all(debug.parent().expect("a file in a folder"))?;
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg("--compress-debug-sections")
        .arg(elf)
        .arg(&debug))?;
    run(Command::new("objcopy")
        .arg(if library {
            "--strip-unneeded"
        } else {
            "--strip-all"
        })
        .args(["--remove-section=.comment"])
        .arg(format!("--add-gnu-debuglink={}", debug.display()))
        .arg(elf))?;
    use std::os::unix::fs::PermissionsExt as _;
    fs::set_permissions(&debug, fs::Permissions::from_mode(0o644))?;
    Ok(id)
}

/// The `Depends` of the binaries' shared libraries, from `dpkg-shlibdeps`
/// (which wants a `debian/control` beside it).
fn shlib_depends(elves: &[PathBuf], scratch: &Path) -> Result<String> {
    let dir = scratch.join("shlibdeps");
    fs::create_dir_all(dir.join("debian"))?;
    fs::write(
        dir.join("debian/control"),
        format!("Source: {NAME}\n\nPackage: {NAME}\nArchitecture: any\n"),
    )?;
    let mut cmd = Command::new("dpkg-shlibdeps");
    cmd.current_dir(&dir).arg("-O");
    for elf in elves {
        cmd.arg(format!("-e{}", elf.display()));
    }
    let out = output(&mut cmd)?;
    let depends = out
        .lines()
        .find_map(|l| l.strip_prefix("shlibs:Depends="))
        .with_context(|| format!("dpkg-shlibdeps said no dependencies: {out}"))?;
    Ok(depends.to_owned())
}

/// The size of a staging folder (but `DEBIAN`), in KiB, as dpkg counts it.
fn installed_size(stage: &Path) -> Result<u64> {
    fn walk(dir: &Path, total: &mut u64) -> Result<()> {
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_name() == "DEBIAN" {
                continue;
            }
            let kind = entry.file_type()?;
            if kind.is_dir() {
                walk(&entry.path(), total)?;
            } else {
                *total += entry.metadata()?.len().div_ceil(1024);
            }
        }
        Ok(())
    }
    let mut total = 0;
    walk(stage, &mut total)?;
    Ok(total)
}

/// `dpkg-deb --build` of `stage` into `deb`, every file owned by root.
fn build_deb(stage: &Path, deb: &Path) -> Result<()> {
    run(Command::new("dpkg-deb")
        .args(["--root-owner-group", "-Zxz", "--build"])
        .arg(stage)
        .arg(deb))
}

/// `systemd-analyze verify` of the unit, in a root made of this
/// machine's units and the staged daemon (so that the units it depends on
/// and `ExecStart` are found), when systemd-analyze is there. The manual
/// pages it names are checked by their presence in the package.
fn verify_unit(stage: &Path) -> Result<()> {
    const UNIT: &str = "lib/systemd/system/trace-manager.service";
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("xtask: no systemd-analyze here: the unit is not verified");
        return Ok(());
    }
    for page in [
        "usr/share/man/man8/trace-manager.8.gz",
        "usr/share/man/man1/trace-cli.1.gz",
    ] {
        if !stage.join(page).exists() {
            bail!("the unit names a manual page the package lacks: {page}");
        }
    }
    let root = stage.with_extension("verify");
    if root.exists() {
        fs::remove_dir_all(&root)?;
    }
    fs::create_dir_all(root.join("lib/systemd"))?;
    run(Command::new("cp")
        .arg("-a")
        .arg("/lib/systemd/system")
        .arg(root.join("lib/systemd/")))?;
    copy(&stage.join(UNIT), &root.join(UNIT), 0o644)?;
    copy(
        &stage.join("usr/bin/trace-manager"),
        &root.join("usr/bin/trace-manager"),
        0o755,
    )?;
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(format!("--root={}", root.display()))
        .arg(format!("/{UNIT}"))
        .output()
        .context("cannot run systemd-analyze")?;
    fs::remove_dir_all(&root)?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() || !said.trim().is_empty() {
        bail!("systemd-analyze verify of trace-manager.service is not clean:\n{said}");
    }
    eprintln!("xtask: systemd-analyze verify: the unit is clean");
    Ok(())
}

/// The pkg-config file of the C provider library.
fn pkg_config(multiarch: &str, version: &str) -> String {
    let version = version.split('-').next().unwrap_or(version);
    format!(
        "prefix=/usr\n\
         libdir=${{prefix}}/lib/{multiarch}\n\
         includedir=${{prefix}}/include\n\
         \n\
         Name: trace-provider\n\
         Description: write trace events into the trace manager's buffers (C API)\n\
         Version: {version}\n\
         Libs: -L${{libdir}} -ltrace_provider\n\
         Libs.private: -lpthread -ldl -lm\n\
         Cflags: -I${{includedir}}\n"
    )
}

/// The manual page of `trace-manager`, section 8, from its `--help`.
fn manager_page(help: &str, version: &str) -> String {
    let escaped: String = help
        .lines()
        .map(|l| {
            let l = l.replace('\\', "\\\\");
            if l.starts_with('.') || l.starts_with('\'') {
                format!("\\&{l}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    format!(
        ".TH TRACE-MANAGER 8 \"\" \"trace-manager {version}\" \"System Administration\"\n\
         .SH NAME\n\
         trace-manager \\- the trace manager daemon\n\
         .SH SYNOPSIS\n\
         \\fBtrace-manager\\fR [\\fIOPTIONS\\fR]\n\
         .SH DESCRIPTION\n\
         Runs as root (the trace-manager systemd unit starts it), loads the kernel trace \
         provider's eBPF programs for each recording, and lets root and the members of the \
         \\fBtracing\\fR group record through its socket, /run/trace-manager/provider.sock \
         (0660 root:tracing). See \\fBtrace-cli\\fR(1) and \\fBtrace-cli-doctor\\fR(1).\n\
         .SH OPTIONS\n\
         .nf\n\
         {escaped}\
         .fi\n\
         .SH SEE ALSO\n\
         \\fBtrace-cli\\fR(1), \\fBsystemctl\\fR(1)\n"
    )
}
