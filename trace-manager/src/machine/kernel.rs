//! The kernel's side: its version, BTF, tracefs, BPF ring buffers, whether
//! the verifier takes our programs, uprobes, perf events, lockdown, kernel
//! symbols and cgroup v2.

use std::fs;
use std::path::Path;

use super::{Finding, Status};
use crate::kernel::verify::{COMPLEXITY_LIMIT, ProgramVerdict, verify_programs};
use crate::kernel::{btf, tracefs};

pub(super) const KERNEL: &str = "kernel";
pub(super) const BTF: &str = "BTF";
pub(super) const TRACEFS: &str = "tracefs";
pub(super) const RING_BUFFERS: &str = "BPF ring buffers";
pub(super) const PROGRAMS: &str = "eBPF programs";
pub(super) const UPROBES: &str = "uprobes";
pub(super) const PERF_EVENTS: &str = "perf events";
pub(super) const LOCKDOWN: &str = "lockdown";
pub(super) const KERNEL_SYMBOLS: &str = "kernel symbols";
pub(super) const CGROUP_V2: &str = "cgroup v2";

/// The oldest kernel with every helper the programs use (`bpf_loop`, in
/// the program of `-e`): 5.17.
const NEWEST_HELPER: (u32, u32) = (5, 17);
/// The oldest kernel that runs any recording (BPF ring buffers and
/// `bpf_ktime_get_boot_ns`): 5.8.
const OLDEST_CORE: (u32, u32) = (5, 8);

fn finding(check: &'static str, status: Status, detail: String, fix: Option<String>) -> Finding {
    Finding {
        check,
        status,
        detail,
        fix,
    }
}

/// A file's contents without the trailing newline, if readable.
fn read(path: &str) -> Option<String> {
    fs::read_to_string(path)
        .ok()
        .map(|s| s.trim_end().to_owned())
}

/// The running kernel's release, as `uname -r` prints it.
pub(super) fn release() -> String {
    read("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".to_owned())
}

/// The major and minor version in a release such as `6.1.0-18-amd64`.
fn major_minor(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

pub(super) fn version(release: &str) -> Finding {
    let arch = std::env::consts::ARCH;
    match major_minor(release) {
        Some(v) if v >= NEWEST_HELPER => finding(
            KERNEL,
            Status::Ok,
            format!("Linux {release} ({arch})"),
            None,
        ),
        Some(v) if v >= OLDEST_CORE => finding(
            KERNEL,
            Status::Limited,
            format!(
                "Linux {release} ({arch}): older than 5.17, so some programs may be refused \
                 (system calls and stacks need 5.15, -e and Python frames 5.17); distribution kernels often \
                 carry these helpers back, and the program check below says what this one takes"
            ),
            None,
        ),
        Some(_) => finding(
            KERNEL,
            Status::Missing,
            format!("Linux {release} ({arch}): older than 5.8, which has no BPF ring buffers"),
            Some("use a kernel of 5.8 or later (5.17 or later for everything)".to_owned()),
        ),
        None => finding(
            KERNEL,
            Status::Unknown,
            format!("cannot read the kernel's version from {release:?}"),
            None,
        ),
    }
}

pub(super) fn btf() -> Finding {
    match btf::Btf::from_kernel() {
        Ok(Ok(btf)) if btf.has_struct("task_struct") => finding(
            BTF,
            Status::Ok,
            format!(
                "{} ({} KiB): BTF tracepoints and field offsets",
                btf::VMLINUX_BTF,
                fs::metadata(btf::VMLINUX_BTF).map_or(0, |m| m.len() >> 10)
            ),
            None,
        ),
        Ok(Ok(_)) => finding(
            BTF,
            Status::Limited,
            format!(
                "{} has no task_struct: classic tracepoints only",
                btf::VMLINUX_BTF
            ),
            Some("a kernel built with CONFIG_DEBUG_INFO_BTF=y".to_owned()),
        ),
        Ok(Err(e)) => finding(
            BTF,
            Status::Limited,
            format!(
                "{} cannot be read as BTF ({e}): classic tracepoints only",
                btf::VMLINUX_BTF
            ),
            Some("a kernel built with CONFIG_DEBUG_INFO_BTF=y".to_owned()),
        ),
        Err(e) => finding(
            BTF,
            Status::Limited,
            format!(
                "no kernel BTF ({}: {e}): classic tracepoints serve instead, at a higher cost \
                 per event",
                btf::VMLINUX_BTF
            ),
            Some(
                "a kernel built with CONFIG_DEBUG_INFO_BTF=y (most distributions' are)".to_owned(),
            ),
        ),
    }
}

pub(super) fn tracefs() -> Finding {
    if let Some(root) = tracefs::mounted_root() {
        return finding(
            TRACEFS,
            Status::Ok,
            format!("mounted at {}", root.display()),
            None,
        );
    }
    // Mounted, but a folder this user may not enter (tracefs is root's).
    let listed = read("/proc/self/mounts").and_then(|mounts| {
        mounts.lines().find_map(|l| {
            let mut fields = l.split_whitespace();
            let (_, dir, kind) = (fields.next()?, fields.next()?, fields.next()?);
            (kind == "tracefs").then(|| dir.to_owned())
        })
    });
    if let Some(dir) = listed {
        return finding(
            TRACEFS,
            Status::Ok,
            format!("mounted at {dir} (root's: this user may not read it, the manager does)"),
            None,
        );
    }
    let supported = read("/proc/filesystems").is_some_and(|f| {
        f.lines()
            .any(|l| l.split_whitespace().last() == Some("tracefs"))
    });
    if supported {
        finding(
            TRACEFS,
            Status::Limited,
            format!(
                "not mounted; a recording as root mounts it at {}",
                tracefs::TRACEFS
            ),
            Some(format!("mount -t tracefs nodev {}", tracefs::TRACEFS)),
        )
    } else {
        finding(
            TRACEFS,
            Status::Missing,
            "this kernel has no tracefs (CONFIG_TRACING): no tracepoints".to_owned(),
            Some("a kernel built with CONFIG_FTRACE and tracepoints".to_owned()),
        )
    }
}

pub(super) fn ring_buffers(may_load: bool) -> Finding {
    if !may_load {
        return finding(
            RING_BUFFERS,
            Status::Unknown,
            "not tried: creating one needs root, or CAP_BPF".to_owned(),
            Some("run `sudo trace-cli doctor` to check".to_owned()),
        );
    }
    crate::kernel::raise_memlock_limit();
    let definition = aya_obj::Map::new_from_params(
        aya_obj::generated::bpf_map_type::BPF_MAP_TYPE_RINGBUF as u32,
        0,
        0,
        4096,
        0,
    );
    match aya::maps::MapData::create(definition, "doctor_ring", None) {
        Ok(_) => finding(RING_BUFFERS, Status::Ok, "created one".to_owned(), None),
        Err(e) => finding(
            RING_BUFFERS,
            Status::Missing,
            format!("cannot create one: {e}"),
            Some("a kernel of 5.8 or later".to_owned()),
        ),
    }
}

pub(super) fn programs(may_load: bool, with_btf: bool) -> (Finding, Vec<ProgramVerdict>) {
    if !may_load {
        return (
            finding(
                PROGRAMS,
                Status::Unknown,
                "not tried: loading them needs root, or CAP_BPF and CAP_PERFMON".to_owned(),
                Some("run `sudo trace-cli doctor` to check".to_owned()),
            ),
            Vec::new(),
        );
    }
    let verdicts = match verify_programs(with_btf) {
        Ok(v) => v,
        Err(e) => {
            return (
                finding(
                    PROGRAMS,
                    Status::Missing,
                    format!("cannot load the eBPF object: {e}"),
                    None,
                ),
                Vec::new(),
            );
        }
    };
    let refused: Vec<&ProgramVerdict> = verdicts.iter().filter(|v| v.refused.is_some()).collect();
    let mut kinds: Vec<(&str, usize)> = Vec::new();
    for v in &verdicts {
        match kinds.iter_mut().find(|(k, _)| *k == v.kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((v.kind, 1)),
        }
    }
    let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
    let most = verdicts
        .iter()
        .filter_map(|v| Some((v.verified_instructions?, v)))
        .max_by_key(|(n, _)| *n);
    let walked = match most {
        Some((n, v)) => format!(
            "; the most instructions verified: {n} ({}), of {COMPLEXITY_LIMIT} allowed",
            v.program
        ),
        None => String::new(),
    };
    let detail = format!(
        "{} of {} load ({}){walked}{}",
        verdicts.len() - refused.len(),
        verdicts.len(),
        kinds.join(", "),
        if with_btf {
            ""
        } else {
            "; BTF tracepoint programs not tried (no BTF)"
        }
    );
    if refused.is_empty() {
        return (finding(PROGRAMS, Status::Ok, detail, None), verdicts);
    }
    let names: Vec<String> = refused
        .iter()
        .map(|v| {
            format!(
                "{} ({}): {}",
                v.program,
                v.serves,
                v.refused.as_deref().unwrap_or_default()
            )
        })
        .collect();
    (
        finding(
            PROGRAMS,
            Status::Limited,
            format!("{detail}; refused: {}", names.join("; ")),
            Some("a newer kernel; the refused programs' categories are listed below".to_owned()),
        ),
        verdicts,
    )
}

pub(super) fn uprobes() -> Finding {
    let pmu = "/sys/bus/event_source/devices/uprobe/type";
    if Path::new(pmu).exists() {
        finding(
            UPROBES,
            Status::Ok,
            "the uprobe perf event type is there".to_owned(),
            None,
        )
    } else {
        finding(
            UPROBES,
            Status::Missing,
            format!("{pmu} is missing: --uprobe and --usdt cannot attach"),
            Some("a kernel built with CONFIG_UPROBE_EVENTS=y".to_owned()),
        )
    }
}

pub(super) fn perf_events(may_load: bool) -> Finding {
    let Some(paranoid) = read("/proc/sys/kernel/perf_event_paranoid") else {
        return finding(
            PERF_EVENTS,
            Status::Missing,
            "this kernel has no perf events (no /proc/sys/kernel/perf_event_paranoid): no \
             kernel:profile, --uprobe or --usdt"
                .to_owned(),
            Some("a kernel built with CONFIG_PERF_EVENTS=y".to_owned()),
        );
    };
    let level: i32 = paranoid.trim().parse().unwrap_or(2);
    let meaning = match level {
        l if l <= -1 => "no limits",
        0 => "users may sample the kernel, not raw tracepoints",
        1 => "users may sample their own processes, kernel included",
        2 => "users may sample their own processes, user code only",
        _ => "users may not open perf events at all (a distribution's level above 2)",
    };
    let note = format!("perf_event_paranoid {level}: {meaning}");
    if may_load {
        finding(
            PERF_EVENTS,
            Status::Ok,
            format!("{note}; this process has the rights to sample every process"),
            None,
        )
    } else {
        finding(
            PERF_EVENTS,
            Status::Limited,
            format!("{note}; recording the whole system needs root or CAP_PERFMON"),
            Some(
                "record as root or through the daemon; lowering \
                 /proc/sys/kernel/perf_event_paranoid is not needed"
                    .to_owned(),
            ),
        )
    }
}

pub(super) fn lockdown() -> Finding {
    let Some(text) = read("/sys/kernel/security/lockdown") else {
        return finding(
            LOCKDOWN,
            Status::Ok,
            "no lockdown (securityfs does not say one)".to_owned(),
            None,
        );
    };
    let mode = text
        .split_whitespace()
        .find(|w| w.starts_with('['))
        .map(|w| w.trim_matches(['[', ']']))
        .unwrap_or("none");
    match mode {
        "none" => finding(LOCKDOWN, Status::Ok, "none".to_owned(), None),
        "integrity" => finding(
            LOCKDOWN,
            Status::Ok,
            "integrity: eBPF may still read kernel memory, which is all the programs need"
                .to_owned(),
            None,
        ),
        other => finding(
            LOCKDOWN,
            Status::Missing,
            format!(
                "{other}: eBPF programs may not read kernel memory, so the kernel refuses the \
                 tracing programs"
            ),
            Some(
                "boot with lockdown=integrity (or without Secure Boot's lockdown), as the \
                 distribution documents"
                    .to_owned(),
            ),
        ),
    }
}

pub(super) fn kernel_symbols() -> Finding {
    let restrict: i32 = read("/proc/sys/kernel/kptr_restrict")
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    // What this process sees: the addresses in /proc/kallsyms are zeros when
    // it may not see them.
    let visible = fs::read_to_string("/proc/kallsyms").ok().map(|text| {
        text.lines().take(64).any(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|a| !a.trim_start_matches('0').is_empty())
        })
    });
    match visible {
        Some(true) => finding(
            KERNEL_SYMBOLS,
            Status::Ok,
            format!(
                "/proc/kallsyms gives addresses (kptr_restrict {restrict}): kernel frames are named"
            ),
            None,
        ),
        Some(false) => finding(
            KERNEL_SYMBOLS,
            Status::Limited,
            format!(
                "/proc/kallsyms hides addresses from this process (kptr_restrict {restrict}): \
                 kernel frames in stacks stay unnamed"
            ),
            Some(if restrict >= 2 {
                "sysctl kernel.kptr_restrict=1 (root then sees them)".to_owned()
            } else {
                "record as root (CAP_SYSLOG), or through the daemon".to_owned()
            }),
        ),
        None => finding(
            KERNEL_SYMBOLS,
            Status::Limited,
            "/proc/kallsyms cannot be read: kernel frames in stacks stay unnamed".to_owned(),
            Some("a kernel built with CONFIG_KALLSYMS=y".to_owned()),
        ),
    }
}

pub(super) fn cgroup_v2() -> Finding {
    match crate::cgroup::Hierarchy::find() {
        Ok(h) => finding(
            CGROUP_V2,
            Status::Ok,
            format!(
                "mounted at {}{}",
                h.root().display(),
                if h.root() == Path::new("/sys/fs/cgroup") {
                    ""
                } else {
                    " (beside cgroup v1: a hybrid host)"
                }
            ),
            None,
        ),
        Err(e) => finding(
            CGROUP_V2,
            Status::Missing,
            format!("{e}: --cgroup, --unit and --container cannot select, and processes are not labelled with their containers"),
            Some("mount -t cgroup2 none /sys/fs/cgroup/unified (or boot with systemd.unified_cgroup_hierarchy=1)".to_owned()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_distribution_releases() {
        assert_eq!(major_minor("6.1.0-18-amd64"), Some((6, 1)));
        assert_eq!(major_minor("5.15.0-91-generic"), Some((5, 15)));
        assert_eq!(major_minor("5.14.0-362.8.1.el9_3.x86_64"), Some((5, 14)));
        assert_eq!(major_minor("garbage"), None);
        assert_eq!(version("6.18.0").status, Status::Ok);
        assert_eq!(version("5.15.0-91-generic").status, Status::Limited);
        assert_eq!(version("4.19.0").status, Status::Missing);
    }
}
