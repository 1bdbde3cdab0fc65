//! Why the kernel provider could not start or read.

use std::io;
use std::path::PathBuf;

use aya::EbpfError;
use aya::maps::MapError;
use aya::programs::ProgramError;

use super::format::FormatError;

/// Why the kernel provider could not start or read.
///
/// Every message is one sentence a user can act on.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The stack options are out of range.
    #[error("{0}")]
    Stacks(String),
    /// The process may not load eBPF programs or mount tracefs.
    #[error(
        "permission denied: loading kernel tracing programs needs root \
         (or the CAP_BPF and CAP_PERFMON capabilities): {detail} (`trace-cli doctor` says what \
         this machine allows)"
    )]
    Permission {
        /// What was refused.
        detail: String,
    },
    /// tracefs is neither mounted nor mountable.
    #[error(
        "tracefs is not available at {path}: {source} (`trace-cli doctor` says what this \
         machine allows)"
    )]
    Tracefs {
        /// Where it was looked for.
        path: PathBuf,
        /// Why it is not there.
        #[source]
        source: io::Error,
    },
    /// A tracepoint of an enabled category does not exist on this kernel.
    #[error("tracepoint {group}:{event} is not available on this kernel ({path}: {source})")]
    TracepointMissing {
        /// Tracepoint group.
        group: &'static str,
        /// Tracepoint name.
        event: &'static str,
        /// The format file that could not be read.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: io::Error,
    },
    /// A tracepoint's format file could not be understood.
    #[error("cannot understand the format of tracepoint {group}:{event}: {source}")]
    Format {
        /// Tracepoint group.
        group: &'static str,
        /// Tracepoint name.
        event: &'static str,
        /// What is wrong.
        #[source]
        source: FormatError,
    },
    /// A requested category is not a kernel category this provider knows.
    #[error("unknown kernel category `{name}` (known: {known})")]
    UnknownCategory {
        /// The requested name.
        name: String,
        /// The known categories, comma-separated.
        known: String,
    },
    /// A benchmark asked for a floor program on a hook that has none.
    #[error("no floor program for hook `{name}` (known: {known})")]
    UnknownHook {
        /// The requested hook.
        name: String,
        /// The hooks with a floor program, comma-separated.
        known: String,
    },
    /// The eBPF object could not be loaded (maps created).
    #[error("cannot load the kernel tracing eBPF object: {source}")]
    Load {
        /// The loader's error.
        #[source]
        source: Box<EbpfError>,
    },
    /// The object lacks a program or map this crate expects (a build mix-up).
    #[error("the kernel tracing eBPF object has no {what} `{name}`")]
    MissingInObject {
        /// `program` or `map`.
        what: &'static str,
        /// Its name.
        name: &'static str,
    },
    /// The kernel rejected a program (the whole verifier log is logged at
    /// debug level, `RUST_LOG=debug`).
    #[error(
        "this kernel refused eBPF program `{program}`: {reason} (`trace-cli doctor` lists what \
         this kernel allows; `RUST_LOG=debug` logs the verifier's whole answer)"
    )]
    ProgramLoad {
        /// Program name.
        program: &'static str,
        /// The kernel's answer, without the verifier log.
        reason: String,
        /// The loader's error, verifier log included.
        #[source]
        source: Box<ProgramError>,
    },
    /// A program could not be attached to its tracepoint.
    #[error("cannot attach eBPF program `{program}` to tracepoint {tracepoint}: {source}")]
    Attach {
        /// Program name.
        program: &'static str,
        /// `group:event`.
        tracepoint: String,
        /// The loader's error.
        #[source]
        source: Box<ProgramError>,
    },
    /// A probe opened directly (a USDT site) could not be placed.
    #[error("cannot place probe {probe}: {source}")]
    ProbeAttach {
        /// What and where.
        probe: String,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
    /// A map operation failed.
    #[error("eBPF map `{name}`: {source}")]
    Map {
        /// Map name.
        name: &'static str,
        /// The map error.
        #[source]
        source: Box<MapError>,
    },
    /// The CPUs could not be counted.
    #[error("cannot tell which CPUs there are ({path}): {source}")]
    Cpus {
        /// The file read.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// Loading and attaching took longer than the request may take.
    #[error(
        "setting up the kernel provider took longer than one request may: select fewer \
         tracepoints, probes or processes"
    )]
    TooSlow,
    /// A process to follow does not exist.
    #[error("no process with id {pid} (it may have exited)")]
    NoSuchProcess {
        /// The process id asked for.
        pid: u32,
    },
    /// A cgroup to select cannot be.
    #[error(transparent)]
    Cgroup(#[from] crate::cgroup::CgroupError),
    /// Waiting for the ring buffer failed.
    #[error("waiting for kernel events: {0}")]
    Io(#[from] io::Error),
}

/// Whether an error (or one of its sources) is the kernel saying EPERM.
pub(super) fn is_eperm(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<io::Error>()
            && io.raw_os_error() == Some(libc::EPERM)
        {
            return true;
        }
        current = e.source();
    }
    false
}

/// A program load failure as a [`KernelError`].
pub(super) fn program_error(program: &'static str, e: ProgramError) -> KernelError {
    if is_eperm(&e) {
        return KernelError::Permission {
            detail: format!("loading eBPF program `{program}`: {e}"),
        };
    }
    let reason = refusal(&e);
    KernelError::ProgramLoad {
        program,
        reason,
        source: Box::new(e),
    }
}

/// The reason in a load error: the error, and the verifier log's last
/// lines, which say what it refused.
pub(super) fn refusal(e: &ProgramError) -> String {
    match e {
        ProgramError::LoadError {
            io_error,
            verifier_log,
        } => {
            let log = verifier_log.to_string();
            let tail: Vec<&str> = log
                .lines()
                .rev()
                .filter(|l| !l.trim().is_empty())
                .take(2)
                .collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            format!("{io_error}: {}", tail.join(" / "))
        }
        other => other.to_string(),
    }
}

/// Why the object could not be loaded: refused creating its maps
/// ([`KernelError::Permission`]), or anything else.
pub(super) fn load_error(e: aya::EbpfError) -> KernelError {
    if is_eperm(&e) {
        KernelError::Permission {
            detail: format!("creating eBPF maps: {e}"),
        }
    } else {
        KernelError::Load {
            source: Box::new(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eperm_is_found_in_error_chains() {
        let e = ProgramError::SyscallError(aya::sys::SyscallError {
            call: "bpf_prog_load",
            io_error: io::Error::from_raw_os_error(libc::EPERM),
        });
        assert!(is_eperm(&e));
        assert!(matches!(
            program_error("x", e),
            KernelError::Permission { .. }
        ));
        let e = ProgramError::SyscallError(aya::sys::SyscallError {
            call: "bpf_prog_load",
            io_error: io::Error::from_raw_os_error(libc::EINVAL),
        });
        assert!(!is_eperm(&e));
    }
}
