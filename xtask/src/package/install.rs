//! Checking the packages on a clean Debian 12 root: one made with
//! `debootstrap --variant=minbase` from Debian's packages (no Rust, no
//! compiler), kept under `target/package-root/` and copied afresh for each
//! check. In a mount namespace of its own, with `/proc`, `/sys` (cgroups,
//! tracefs and BTF inside it) and `/dev` bound into the copy, the check
//! installs the packages with `dpkg -i`, then, in the copy:
//!
//! 1. `trace-cli --version` and `trace-cli doctor`;
//! 2. `trace-cli record -d 2` as root, with the manager inside it, and
//!    `trace-cli check` of the file;
//! 3. the daemon as the unit starts it, and `trace-cli record -d 2` by a user
//!    in the `tracing` group through it (which that user cannot do any
//!    other way), its socket `0660 root:tracing`;
//! 4. the debug package's files at the binaries' build ids;
//! 5. `dpkg --purge`, which leaves no file of ours;
//! 6. the static tarball unpacked, recording as root.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::{Debs, NAME};
use crate::ebpf::target_dir;
use crate::run::run;

/// The Debian release the check installs into.
const SUITE: &str = "bookworm";

/// Runs the check on `debs`.
pub fn check(debs: &Debs) -> Result<()> {
    let pristine = pristine_root()?;
    let root = target_dir().join("package-root/check");
    if root.exists() {
        fs::remove_dir_all(&root).with_context(|| format!("cannot remove {}", root.display()))?;
    }
    run(Command::new("cp").arg("-a").arg(&pristine).arg(&root))?;
    let tmp = root.join("tmp");
    for deb in [&debs.main, &debs.dbgsym, &debs.tarball] {
        let name = deb.file_name().context("a package file")?;
        fs::copy(deb, tmp.join(name))?;
    }
    let main = debs
        .main
        .file_name()
        .context("a package file")?
        .to_string_lossy()
        .into_owned();
    let dbgsym = debs
        .dbgsym
        .file_name()
        .context("a package file")?
        .to_string_lossy()
        .into_owned();
    let tarball = debs
        .tarball
        .file_name()
        .context("a tarball")?
        .to_string_lossy()
        .into_owned();
    let debug_files: Vec<String> = debs
        .build_ids
        .iter()
        .map(|id| format!("/usr/lib/debug/.build-id/{}/{}.debug", &id[..2], &id[2..]))
        .collect();
    let script = format!(
        r#"
set -eu
R="{root}"
in_root() {{ chroot "$R" "$@"; }}
mount --rbind /proc "$R/proc"
mount --rbind /sys "$R/sys"
mount --rbind /dev "$R/dev"
mount -t tmpfs tmpfs "$R/run"
echo "--- install"
in_root dpkg -i /tmp/{main} /tmp/{dbgsym}
in_root getent group tracing
echo "--- no compiler, no Rust in the root"
if in_root sh -c 'command -v cc || command -v rustc || command -v cargo'; then echo "a compiler is installed"; exit 1; fi
echo "--- version and doctor"
in_root trace-cli --version
in_root env TRACE_MANAGER_SOCKET=/run/none.sock trace-cli doctor
echo "--- record as root, the manager inside trace-cli"
in_root trace-cli record -d 2 -o /tmp/embedded.fxt
in_root trace-cli check /tmp/embedded.fxt
echo "--- the daemon, as its unit starts it"
exec_start=$(sed -n 's/^ExecStart=//p' "$R/lib/systemd/system/trace-manager.service")
# chroot itself, not the in_root function: $! is then the daemon (chroot
# executes it), which the kill below ends.
chroot "$R" $exec_start > "$R/tmp/daemon.log" 2>&1 &
daemon=$!
for i in $(seq 100); do [ -S "$R/run/trace-manager/provider.sock" ] && break; sleep 0.1; done
in_root stat -c '%U:%G %a' /run/trace-manager/provider.sock /run/trace-manager
test "$(in_root stat -c '%U:%G %a' /run/trace-manager/provider.sock)" = "root:tracing 660"
in_root useradd --create-home --groups tracing tracer
in_root useradd --create-home outsider
echo "--- record as a member of the tracing group, through the daemon"
chroot --userspec=tracer:tracer --groups=tracing "$R" sh -c 'cd /tmp && trace-cli record -d 2 -o /tmp/daemon.fxt'
in_root trace-cli check /tmp/daemon.fxt
echo "--- a user outside the group is refused"
if chroot --userspec=outsider:outsider "$R" sh -c 'cd /tmp && trace-cli record -d 1 -o /tmp/refused.fxt' 2> "$R/tmp/refused.err"; then
    echo "a user outside the tracing group recorded"; exit 1
fi
grep -q tracing "$R/tmp/refused.err"
kill $daemon
wait $daemon || true
echo "--- the debug package"
for f in {debug_files}; do test -s "$R$f"; done
echo "--- purge"
in_root dpkg --purge {name}-dbgsym {name}
for f in /usr/bin/trace-cli /usr/bin/trace-manager /lib/systemd/system/trace-manager.service; do
    if [ -e "$R$f" ]; then echo "$f is left after purge"; exit 1; fi
done
echo "--- the static tarball, unpacked and run"
mkdir "$R/tmp/static"
tar -C "$R/tmp/static" --strip-components=1 -xzf "$R/tmp/{tarball}"
in_root /tmp/static/bin/trace-cli --version
in_root /tmp/static/bin/trace-cli record -d 2 -o /tmp/static.fxt
in_root /tmp/static/bin/trace-cli check /tmp/static.fxt
echo "--- the package installs, records and goes"
"#,
        root = root.display(),
        main = main,
        dbgsym = dbgsym,
        debug_files = debug_files.join(" "),
        tarball = tarball,
        name = NAME,
    );
    let status = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "--fork",
            "--",
            "sh",
            "-c",
        ])
        .arg(&script)
        .status()
        .context("cannot run unshare")?;
    if !status.success() {
        let log = fs::read_to_string(root.join("tmp/daemon.log")).unwrap_or_default();
        bail!("the package check failed ({status}); the daemon's log:\n{log}");
    }
    fs::remove_dir_all(&root).with_context(|| format!("cannot remove {}", root.display()))?;
    eprintln!("xtask: the packages install on a clean Debian 12 root, record, and purge");
    Ok(())
}

/// The clean Debian root, made once with debootstrap (installed first when
/// missing) and kept.
fn pristine_root() -> Result<PathBuf> {
    let dir = target_dir().join("package-root");
    let root = dir.join(SUITE);
    let done = dir.join(format!("{SUITE}.complete"));
    if done.exists() && root.join("etc/debian_version").exists() {
        return Ok(root);
    }
    if !Path::new("/usr/sbin/debootstrap").exists() {
        run(Command::new("apt-get").arg("update"))?;
        run(Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends", "debootstrap"])
            .env("DEBIAN_FRONTEND", "noninteractive"))?;
    }
    if root.exists() {
        fs::remove_dir_all(&root)?;
    }
    fs::create_dir_all(&dir)?;
    // Once more when the mirror fails us (a download cut short).
    let debootstrap = || {
        run(Command::new("debootstrap")
            .args(["--variant=minbase", SUITE])
            .arg(&root)
            .arg(mirror()))
    };
    if let Err(e) = debootstrap() {
        eprintln!("xtask: debootstrap failed ({e:#}); trying once more");
        if root.exists() {
            fs::remove_dir_all(&root)?;
        }
        debootstrap()?;
    }
    fs::write(&done, "")?;
    Ok(root)
}

/// The Debian mirror this machine's apt uses, else deb.debian.org.
fn mirror() -> String {
    let sources = fs::read_to_string("/etc/apt/sources.list.d/debian.sources")
        .or_else(|_| fs::read_to_string("/etc/apt/sources.list"))
        .unwrap_or_default();
    sources
        .lines()
        .find_map(|l| {
            let l = l.trim();
            let uri = l
                .strip_prefix("URIs:")
                .map(|u| u.split_whitespace().next().unwrap_or_default())
                .or_else(|| {
                    l.strip_prefix("deb ")
                        .and_then(|rest| rest.split_whitespace().find(|w| w.starts_with("http")))
                })?;
            (uri.starts_with("http") && !uri.contains("security")).then(|| uri.to_owned())
        })
        .unwrap_or_else(|| "http://deb.debian.org/debian".to_owned())
}
