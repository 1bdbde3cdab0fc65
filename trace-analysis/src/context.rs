//! What is known while a trace is read: its strings, the names of its
//! processes, threads and providers so far, and the symbols of the names
//! the kernel provider writes ([`KernelSyms`]), interned first; and what
//! reading saw apart from the events ([`ReadStats`]).

use foldhash::HashMap;
use trace_common::category::{KERNEL_BLOCK, KERNEL_SYSCALL};

use crate::strings::{Strings, Sym};

/// Names and strings known while reading, for sinks to look things up.
#[derive(Debug)]
pub struct Context {
    /// Interned strings.
    pub strings: Strings,
    pub(crate) processes: HashMap<u64, Sym>,
    pub(crate) labels: HashMap<u64, ProcessLabels>,
    pub(crate) threads: HashMap<u64, (u64, Sym)>,
    pub(crate) providers: HashMap<u32, Sym>,
    pub(crate) kernel: KernelSyms,
}

impl Default for Context {
    fn default() -> Self {
        let mut strings = Strings::default();
        let kernel = KernelSyms::intern(&mut strings);
        Context {
            strings,
            processes: HashMap::default(),
            labels: HashMap::default(),
            threads: HashMap::default(),
            providers: HashMap::default(),
            kernel,
        }
    }
}

impl Context {
    /// The last name given to process `pid`.
    pub fn process_name(&self, pid: u64) -> &str {
        self.processes
            .get(&pid)
            .map_or("", |s| self.strings.get(*s))
    }

    /// What the trace says of process `pid` besides its name: its cgroup,
    /// container and PID-namespace id (the arguments of its name record).
    pub fn labels(&self, pid: u64) -> Option<&ProcessLabels> {
        self.labels.get(&pid)
    }

    /// The cgroup of process `pid`, as the trace labels it.
    pub fn cgroup_of(&self, pid: u64) -> Option<&str> {
        self.labels(pid)
            .and_then(|l| l.cgroup)
            .map(|s| self.strings.get(s))
    }

    /// The container of process `pid` as `runtime name` (or `runtime
    /// short-id` when it has no name), as the trace labels it.
    pub fn container_of(&self, pid: u64) -> Option<String> {
        let l = self.labels(pid)?;
        let runtime = self.strings.get(l.container_runtime?);
        let id = self.strings.get(l.container_id?);
        Some(match l.container_name {
            Some(n) => format!("{runtime} {}", self.strings.get(n)),
            None => format!("{runtime} {}", id.get(..12).unwrap_or(id)),
        })
    }

    /// The last name given to thread `tid`.
    pub fn thread_name(&self, tid: u64) -> &str {
        self.threads
            .get(&tid)
            .map_or("", |(_, s)| self.strings.get(*s))
    }

    /// The process of thread `tid`, if a thread record said.
    pub fn process_of(&self, tid: u64) -> Option<u64> {
        self.threads.get(&tid).map(|(p, _)| *p)
    }

    /// The name of provider `id`.
    pub fn provider_name(&self, id: u32) -> &str {
        self.providers.get(&id).map_or("", |s| self.strings.get(*s))
    }

    /// Every named process.
    pub fn processes(&self) -> impl Iterator<Item = (u64, &str)> {
        self.processes
            .iter()
            .map(|(p, s)| (*p, self.strings.get(*s)))
    }

    /// Every named thread: (tid, pid, name).
    pub fn threads(&self) -> impl Iterator<Item = (u64, u64, &str)> {
        self.threads
            .iter()
            .map(|(t, (p, s))| (*t, *p, self.strings.get(*s)))
    }

    /// Every provider: (id, name).
    pub fn providers(&self) -> impl Iterator<Item = (u32, &str)> {
        self.providers
            .iter()
            .map(|(p, s)| (*p, self.strings.get(*s)))
    }
}

/// The labels of a process: the arguments of its name record that say
/// where it runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessLabels {
    /// Its cgroup (v2) path.
    pub cgroup: Option<Sym>,
    /// The runtime of its container (`docker`, `podman`, ...).
    pub container_runtime: Option<Sym>,
    /// Its container's id.
    pub container_id: Option<Sym>,
    /// Its container's name.
    pub container_name: Option<Sym>,
    /// Its id in its own PID namespace, when that is not the host's.
    pub ns_pid: Option<u64>,
}

/// The symbols of the names the kernel provider writes, interned before
/// any of a trace's strings (so a full string table never refuses them).
#[derive(Clone, Copy, Debug)]
pub(crate) struct KernelSyms {
    pub(crate) syscall: Sym,
    pub(crate) block: Sym,
    pub(crate) nr: Sym,
    pub(crate) ret: Sym,
    pub(crate) unfinished: Sym,
    pub(crate) began_before_recording: Sym,
    pub(crate) entry_lost: Sym,
    pub(crate) return_lost: Sym,
    pub(crate) device: Sym,
    pub(crate) dev: Sym,
    pub(crate) sector: Sym,
    pub(crate) sectors: Sym,
    pub(crate) bytes: Sym,
    pub(crate) rwbs: Sym,
    pub(crate) issuer: Sym,
    pub(crate) error: Sym,
}

impl KernelSyms {
    /// The symbols, interned in `strings`.
    pub(crate) fn intern(strings: &mut Strings) -> Self {
        let mut s = |t: &str| strings.intern(t);
        KernelSyms {
            syscall: s(KERNEL_SYSCALL),
            block: s(KERNEL_BLOCK),
            nr: s("nr"),
            ret: s("ret"),
            unfinished: s("unfinished"),
            began_before_recording: s("began_before_recording"),
            entry_lost: s("entry_lost"),
            return_lost: s("return_lost"),
            device: s("device"),
            dev: s("dev"),
            sector: s("sector"),
            sectors: s("sectors"),
            bytes: s("bytes"),
            rwbs: s("rwbs"),
            issuer: s("issuer"),
            error: s("error"),
        }
    }
}

/// What reading a trace saw, apart from its events.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReadStats {
    /// Bytes read.
    pub bytes: u64,
    /// Records decoded.
    pub records: u64,
    /// Malformed records skipped.
    pub errors: u64,
    /// The first few of them.
    pub error_messages: Vec<String>,
    /// Earliest event timestamp, ns.
    pub first_ts: Option<u64>,
    /// Latest event timestamp (or end of a span), ns.
    pub last_ts: Option<u64>,
    /// Earliest timestamp at which the trace saw something happen: that of
    /// any record but a span written with its begin (a begin, or a whole
    /// span); `None` when it has only those. A file cut out of a longer
    /// recording (rotated, or the window around a trigger) begins with the
    /// spans still open at the cut, carried over with their first
    /// timestamps, a system call that spans the cut is written whole where
    /// it ends, and one the recorder saw only end is begun where the
    /// recording began: what the CPUs did is known only from the file's
    /// first other record on.
    pub observed_from: Option<u64>,
    /// Events of kinds not read into [`Event`](crate::event::Event)s (flows, logs, unknown
    /// records).
    pub skipped: u64,
    /// Ends without a begin.
    pub unmatched_ends: u64,
    /// Names, categories and argument names not kept because the trace
    /// has more distinct ones than the string table holds
    /// ([`crate::strings::MAX_STRINGS`], [`crate::strings::MAX_BYTES`]):
    /// each reads as [`crate::strings::TOO_MANY_TEXT`].
    pub names_refused: u64,
}
