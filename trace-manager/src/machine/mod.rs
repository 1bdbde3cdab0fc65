//! What this kernel and machine allow a recording: each check in plain
//! words, with what to do when something is missing, and which categories
//! and options therefore work. `trace-cli doctor` prints it.
//!
//! Nothing here changes the machine: tracefs is not mounted, no program is
//! attached (programs are loaded to ask the verifier, then unloaded).

mod access;
mod kernel;

use crate::kernel::verify::ProgramVerdict;

pub use crate::kernel::verify::COMPLEXITY_LIMIT;

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Available.
    Ok,
    /// Available with a limit the detail names.
    Limited,
    /// Not available.
    Missing,
    /// Could not be told (for example, without the rights to try).
    Unknown,
}

impl Status {
    /// A short word for the status.
    pub fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Limited => "limited",
            Status::Missing => "missing",
            Status::Unknown => "unknown",
        }
    }
}

/// One check's result.
#[derive(Clone, Debug)]
pub struct Finding {
    /// What was checked, e.g. `BTF`.
    pub check: &'static str,
    /// How it came out.
    pub status: Status,
    /// What was found, in words.
    pub detail: String,
    /// What to do about it, when something is missing or limited.
    pub fix: Option<String>,
}

/// Whether one category or option works on this machine.
#[derive(Clone, Debug)]
pub struct Ability {
    /// The category or option, e.g. `kernel:profile` or `--cgroup`.
    pub what: String,
    /// Whether it works (`None`: cannot be told).
    pub works: Option<bool>,
    /// Why not, or with what limit.
    pub note: String,
}

/// Everything the checks found.
#[derive(Clone, Debug)]
pub struct Examination {
    /// The kernel's release (`uname -r`).
    pub kernel_release: String,
    /// The checks, in the order they are printed.
    pub findings: Vec<Finding>,
    /// What the verifier said of each program, when they could be loaded.
    pub programs: Vec<ProgramVerdict>,
    /// What therefore works.
    pub abilities: Vec<Ability>,
}

/// Runs every check. Loading the programs needs root (or CAP_BPF and
/// CAP_PERFMON); without, that check and what depends on it say so.
pub fn examine() -> Examination {
    let kernel_release = kernel::release();
    let mut findings = Vec::new();
    findings.push(kernel::version(&kernel_release));
    let rights = access::rights();
    let may_load = rights.status == Status::Ok;
    findings.push(rights);
    findings.push(access::daemon());
    let btf = kernel::btf();
    let have_btf = btf.status == Status::Ok;
    findings.push(btf);
    findings.push(kernel::tracefs());
    findings.push(kernel::ring_buffers(may_load));
    let (programs_finding, programs) = kernel::programs(may_load, have_btf);
    findings.push(programs_finding);
    findings.push(kernel::uprobes());
    findings.push(kernel::perf_events(may_load));
    findings.push(kernel::lockdown());
    findings.push(kernel::kernel_symbols());
    findings.push(kernel::cgroup_v2());
    let abilities = abilities(&findings, &programs);
    Examination {
        kernel_release,
        findings,
        programs,
        abilities,
    }
}

/// The finding of `check`, if there is one.
fn finding<'a>(findings: &'a [Finding], check: &str) -> Option<&'a Finding> {
    findings.iter().find(|f| f.check == check)
}

/// Which categories and options work, from the findings and the
/// programs' verdicts.
fn abilities(findings: &[Finding], programs: &[ProgramVerdict]) -> Vec<Ability> {
    let status = |check: &str| finding(findings, check).map(|f| f.status);
    let usable = |check: &str| {
        matches!(
            status(check),
            Some(Status::Ok) | Some(Status::Limited) | None
        )
    };
    // Recording at all: the rights to run a manager here, or a daemon this
    // user may use; tracefs, mounted or mountable.
    let can_record = usable(access::RIGHTS) || status(access::DAEMON) == Some(Status::Ok);
    let base = if !can_record {
        Some("needs root, CAP_BPF and CAP_PERFMON, or the daemon".to_owned())
    } else if status(kernel::TRACEFS) == Some(Status::Missing) {
        Some("needs tracefs".to_owned())
    } else if status(kernel::LOCKDOWN) == Some(Status::Missing) {
        Some("lockdown forbids eBPF reading kernel memory".to_owned())
    } else {
        None
    };
    let mut out = Vec::new();
    let mut add = |what: &str, works: Option<bool>, note: String| {
        out.push(Ability {
            what: what.to_owned(),
            works,
            note,
        })
    };
    // A category works when every program it needs passed the verifier
    // (the classic tracepoints suffice: the BTF ones are a faster extra).
    let verdict_for = |serves: &str| -> Option<Result<(), String>> {
        let mine: Vec<&ProgramVerdict> = programs
            .iter()
            .filter(|v| serves.split(", ").any(|s| v.serves == s) && v.kind != "tp_btf")
            .collect();
        if mine.is_empty() {
            return None;
        }
        match mine.iter().find(|v| v.refused.is_some()) {
            Some(v) => Some(Err(format!(
                "the kernel refused program {}: {}",
                v.program,
                v.refused.as_deref().unwrap_or_default()
            ))),
            None => Some(Ok(())),
        }
    };
    let judge = |serves: &str, extra: Option<String>| -> (Option<bool>, String) {
        if let Some(why) = &base {
            return (Some(false), why.clone());
        }
        if let Some(why) = extra {
            return (Some(false), why);
        }
        match verdict_for(serves) {
            Some(Ok(())) => (Some(true), String::new()),
            Some(Err(why)) => (Some(false), why),
            None if programs.is_empty() => (None, "programs not checked".to_owned()),
            None => (Some(true), String::new()),
        }
    };
    for &(category, _) in trace_common::category::KERNEL_CATEGORIES {
        let extra = match category {
            trace_common::category::KERNEL_PROFILE
                if status(kernel::PERF_EVENTS) == Some(Status::Missing) =>
            {
                Some("perf events are not available".to_owned())
            }
            _ => None,
        };
        let (works, mut note) = judge(category, extra);
        if works == Some(true)
            && [
                trace_common::category::KERNEL_PROFILE,
                trace_common::category::KERNEL_OFFCPU,
            ]
            .contains(&category)
            && status(kernel::KERNEL_SYMBOLS) == Some(Status::Limited)
        {
            note = "kernel frames unnamed (kernel.kptr_restrict)".to_owned();
        }
        add(category, works, note);
    }
    let (works, note) = judge(
        "--uprobe, --usdt",
        (status(kernel::UPROBES) == Some(Status::Missing))
            .then(|| "the kernel has no uprobes".to_owned()),
    );
    add("--uprobe, --usdt", works, note);
    let (works, note) = judge("-e (tracepoints by name)", None);
    add("-e (tracepoints by name)", works, note);
    let cgroups = status(kernel::CGROUP_V2);
    add(
        "--cgroup, --unit, --container",
        Some(base.is_none() && cgroups == Some(Status::Ok)),
        match (&base, cgroups) {
            (Some(why), _) => why.clone(),
            (None, Some(Status::Ok)) => String::new(),
            _ => "cgroup v2 is not mounted".to_owned(),
        },
    );
    let btf = status(kernel::BTF) == Some(Status::Ok);
    add(
        "BTF tracepoints (cheaper kernel:sched and kernel:syscall)",
        Some(base.is_none() && btf),
        match (&base, btf) {
            (Some(why), _) => why.clone(),
            (None, true) => String::new(),
            (None, false) => "classic tracepoints serve instead".to_owned(),
        },
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(check: &'static str, status: Status) -> Finding {
        Finding {
            check,
            status,
            detail: String::new(),
            fix: None,
        }
    }

    fn works(abilities: &[Ability], what: &str) -> Option<bool> {
        abilities
            .iter()
            .find(|a| a.what == what)
            .unwrap_or_else(|| panic!("no {what}"))
            .works
    }

    #[test]
    fn without_rights_or_daemon_nothing_records() {
        let findings = [
            found(access::RIGHTS, Status::Missing),
            found(access::DAEMON, Status::Missing),
        ];
        let abilities = abilities(&findings, &[]);
        assert_eq!(works(&abilities, "kernel:sched"), Some(false));
        assert_eq!(
            works(&abilities, "--cgroup, --unit, --container"),
            Some(false)
        );
    }

    #[test]
    fn a_refused_program_takes_its_category_only() {
        let findings = [
            found(access::RIGHTS, Status::Ok),
            found(kernel::TRACEFS, Status::Ok),
            found(kernel::CGROUP_V2, Status::Missing),
        ];
        let verdict = |program: &str, serves: &str, refused: bool| ProgramVerdict {
            program: program.to_owned(),
            kind: "tracepoint",
            serves: serves.to_owned(),
            verified_instructions: None,
            refused: refused.then(|| "Invalid argument".to_owned()),
        };
        let programs = [
            verdict("sched_switch", "kernel:sched", false),
            verdict("sys_enter", "kernel:syscall", true),
        ];
        let abilities = abilities(&findings, &programs);
        assert_eq!(works(&abilities, "kernel:sched"), Some(true));
        assert_eq!(works(&abilities, "kernel:syscall"), Some(false));
        assert_eq!(
            works(&abilities, "--cgroup, --unit, --container"),
            Some(false)
        );
    }
}
