//! What a session did: each provider's numbers, the kernel provider's,
//! the stop result, and the status while it runs.

use alloc::string::String;
use alloc::vec::Vec;

use super::SessionState;

/// What one provider did in a session (`ProviderStats`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderStats {
    /// Its id in traces.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// Its process id (0 for the kernel).
    pub pid: i32,
    /// Records written to the output.
    pub records_written: u64,
    /// Bytes written to the output.
    pub bytes_written: u64,
    /// Records lost: buffer full, or refused by the manager.
    pub records_dropped: u64,
    /// Times its buffer wrapped (rolling buffers switched).
    pub buffer_wrapped_count: u32,
    /// How full its buffer was at the end, in percent.
    pub percentage_durable_buffer_used: u8,
    /// It answered StartTracing before the start timeout.
    pub started: bool,
    /// It broke the protocol or went away during the session.
    pub aborted: bool,
}

/// The kernel provider's numbers in a session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Kernel events received.
    pub events: u64,
    /// Events lost: ring buffers full, runs the kernel skipped, events
    /// beyond the oneshot budget.
    pub dropped: u64,
    /// Of `dropped`, those lost on each CPU, as `(cpu, lost)`.
    pub dropped_per_cpu: Vec<(u32, u64)>,
    /// Events that could not be decoded.
    pub malformed: u64,
    /// Records written per kind, as `(kind, count)`.
    pub counts: Vec<(KernelCount, u64)>,
    /// The kernel categories enabled.
    pub categories: Vec<String>,
}

impl KernelStats {
    /// The count of `kind`, 0 when none was reported.
    pub fn count(&self, kind: &KernelCount) -> u64 {
        self.counts
            .iter()
            .find(|(k, _)| k == kind)
            .map_or(0, |&(_, n)| n)
    }
}

/// Declares [`KernelCount`] from one line per kind of fixed meaning: its
/// doc, its wire value, the label a summary gives it, and whether the
/// closing summary of a recording shows it.
macro_rules! kernel_counts {
    ($($(#[doc = $doc:literal])* $kind:ident = $value:literal, $label:literal, $shown:literal;)*) => {
        /// What one of the kernel provider's record counts counts
        /// ([`KernelStats::counts`]).
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum KernelCount {
            $($(#[doc = $doc])* $kind,)*
            /// Events of a tracepoint selected by name (`group:event`).
            Tracepoint(String),
        }

        impl KernelCount {
            /// The kinds of fixed meaning, in the order they are reported.
            pub const FIXED: [KernelCount; [$($value),*].len()] = [$(KernelCount::$kind),*];

            /// Its value on the wire; a [`KernelCount::Tracepoint`] is
            /// followed by its name.
            pub fn value(&self) -> u16 {
                match self {
                    $(KernelCount::$kind => $value,)*
                    KernelCount::Tracepoint(_) => 0x100,
                }
            }

            /// What it counts, as a summary says it: `switches`, `system
            /// calls`, ..., or the tracepoint's name.
            pub fn label(&self) -> &str {
                match self {
                    $(KernelCount::$kind => $label,)*
                    KernelCount::Tracepoint(name) => name,
                }
            }

            /// Whether a recording's closing summary shows it.
            pub fn in_summary(&self) -> bool {
                match self {
                    $(KernelCount::$kind => $shown,)*
                    KernelCount::Tracepoint(_) => true,
                }
            }
        }
    };
}

kernel_counts! {
    /// Context switch records.
    Switches = 1, "switches", true;
    /// Thread wake-up records.
    Wakeups = 2, "wakeups", true;
    /// fork/clone, exec, exit and rename instants.
    ProcessEvents = 3, "process events", true;
    /// Process and thread name records.
    Names = 4, "names", false;
    /// System call durations.
    SystemCalls = 5, "system calls", true;
    /// Hard IRQ and softirq durations.
    Interrupts = 6, "interrupts", true;
    /// Block request durations.
    BlockRequests = 7, "block requests", true;
    /// Page fault instants and resident-set counter events.
    MemoryEvents = 8, "memory events", true;
    /// CPU idle and frequency counter events.
    CpuCounters = 9, "cpu counters", false;
    /// Probed function durations (`--uprobe`).
    ProbeHits = 10, "probe hits", true;
    /// USDT probe instants (`--usdt`).
    UsdtEvents = 11, "USDT events", true;
    /// Stack samples (`kernel:profile`, `kernel:offcpu`, `--stacks`).
    StackSamples = 12, "stack samples", true;
    /// Signals sent and delivered (`kernel:signal` instants).
    Signals = 13, "signals", true;
    /// Stack samples with Python frames (in a summary when there are any).
    PythonStacks = 14, "stacks with Python frames", false;
    /// Processes running a Python interpreter whose frames cannot be read
    /// (a version without a layout): their stacks show its C functions (in
    /// a summary when there are any).
    PythonUnreadable = 15, "processes running an unreadable Python", false;
}

/// The answer to StopTracing and TerminateTracing (`StopResult`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StopResult {
    /// Each provider's numbers, the kernel's first: on the wire, the first
    /// [`StopResult::providers_total`] that fit in the message
    /// ([`StopResult::paged`]); [`Request::GetProviderStats`](super::Request::GetProviderStats) gives the
    /// rest (`trace_manager::client::Controller` fetches them itself).
    pub provider_stats: Vec<ProviderStats>,
    /// How many providers took part, the kernel included (encoded as at
    /// least `provider_stats.len()`).
    pub providers_total: u32,
    /// The kernel provider's numbers.
    pub kernel: KernelStats,
    /// Records in the output so far.
    pub records: u64,
    /// Bytes in the output so far.
    pub bytes: u64,
    /// Nanoseconds spent tracing, every start-to-stop summed.
    pub traced_ns: u64,
}

/// How a session is going (for a progress display).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// The session's state.
    pub state: Option<SessionState>,
    /// Nanoseconds since tracing started.
    pub elapsed_ns: u64,
    /// Kernel events received.
    pub kernel_events: u64,
    /// Bytes written to the output.
    pub bytes: u64,
    /// Kernel events lost so far.
    pub dropped: u64,
    /// How full the fullest kernel ring buffer is, in thousandths.
    pub kernel_fill_permille: u16,
    /// Userspace providers in the session.
    pub providers: u32,
    /// Of them, those that are tracing.
    pub providers_started: u32,
    /// Each userspace provider in the session.
    pub provider_progress: Vec<ProviderProgress>,
}

/// How one userspace provider's buffer is doing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderProgress {
    /// Its name.
    pub name: String,
    /// How full its buffer is (what the header says), in thousandths.
    pub fill_permille: u16,
    /// Records it dropped (buffer full).
    pub dropped: u64,
    /// Bytes written to the output so far.
    pub bytes_written: u64,
}
