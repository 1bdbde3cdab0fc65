//! How to trace: the session's configuration and a start's options.

use alloc::string::String;
use alloc::vec::Vec;

use super::FXT_VERSION;
use crate::provider::{BufferDisposition, BufferingMode};

/// A version of the trace format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FxtVersion {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// A per-provider override (`ProviderSpec`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderSpec {
    /// The provider's name.
    pub name: String,
    /// Its buffer size in megabytes; 0 keeps the session's.
    pub buffer_size_megabytes_hint: u32,
    /// Categories for this provider instead of the session's; empty keeps
    /// the session's.
    pub categories: Vec<String>,
}

/// How to trace (`TraceConfig`, with the Linux kernel provider's settings).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceConfig {
    /// Categories to record, or empty for all.
    pub categories: Vec<String>,
    /// Buffer size of each userspace provider, in megabytes.
    pub buffer_size_megabytes_hint: u32,
    /// StartTracing is acknowledged after at most this long.
    pub start_timeout_milliseconds: u64,
    /// The userspace providers' buffering mode.
    pub buffering_mode: BufferingMode,
    /// Per-provider overrides.
    pub provider_specs: Vec<ProviderSpec>,
    /// The newest trace format the client reads.
    pub version: FxtVersion,
    /// Streaming mode: keep the trace in the manager until the session
    /// ends instead of sending it while tracing runs.
    pub defer_transfer: bool,
    /// The kernel provider's buffer size, in bytes.
    pub kernel_buffer_bytes: u64,
    /// The kernel provider's buffering mode.
    pub kernel_buffering_mode: BufferingMode,
    /// Record kernel events of these processes (and what they create)
    /// only; `None` records every process.
    pub pids: Option<Vec<u32>>,
    /// Record only the tasks in these cgroup v2 cgroups or below them
    /// (paths from the hierarchy's root, `/system.slice/x.service`),
    /// kernel events and userspace providers alike; empty: no cgroup
    /// filter. Not with `pids`.
    pub cgroups: Vec<String>,
    /// Functions to probe (`--uprobe` specs).
    pub uprobes: Vec<String>,
    /// USDT probes to record (`--usdt` specs).
    pub usdt: Vec<String>,
    /// Tracepoints to record by name (`-e` specs: `GROUP:EVENT` globs,
    /// `ENTRY..EXIT` pairs, ` if FILTER`).
    pub tracepoints: Vec<String>,
    /// How stacks are recorded.
    pub stacks: StackOptions,
    /// Conditions the kernel sees that raise an alert named by the
    /// condition, marked in the trace where they fired
    /// (`syscall:fsync>50ms`, `signal:SIGSEGV`, `oom`,
    /// `tracepoint:GROUP:EVENT`, `uprobe:NAME`, `usdt:PROVIDER:NAME`).
    pub triggers: Vec<String>,
}

/// How stacks are recorded (`kernel:profile`, `kernel:offcpu`, probes'
/// stacks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackOptions {
    /// Samples per second and CPU of `kernel:profile`.
    pub sample_hz: u32,
    /// `kernel:offcpu` leaves out blocks shorter than this (microseconds).
    pub offcpu_min_us: u64,
    /// Walk user stacks by frame pointers in the kernel instead of copying
    /// their bytes to unwind them from `.eh_frame`.
    pub frame_pointers: bool,
    /// User stack bytes copied per stack (when not walking frame pointers).
    pub stack_bytes: u32,
    /// The probes whose events carry their calling stack: any of
    /// `uprobe`, `usdt`, `syscall`, `tracepoint`.
    pub probe_stacks: Vec<String>,
}

impl StackOptions {
    /// `kernel:profile`'s default rate: 99 Hz, off the 100 Hz and 1000 Hz
    /// of the kernel's own timers so that samples do not fall in step with
    /// periodic work, as `perf record -F 99` does.
    pub const DEFAULT_SAMPLE_HZ: u32 = 99;
    /// The default off-CPU threshold: 1 ms.
    pub const DEFAULT_OFFCPU_MIN_US: u64 = 1000;
    /// The default user stack copy: 8 KiB, as `perf record --call-graph
    /// dwarf`.
    pub const DEFAULT_STACK_BYTES: u32 = 8192;
    /// The probe sources [`StackOptions::probe_stacks`] may name.
    pub const PROBE_SOURCES: &[&str] = &["uprobe", "usdt", "syscall", "tracepoint"];
}

impl Default for StackOptions {
    fn default() -> Self {
        StackOptions {
            sample_hz: Self::DEFAULT_SAMPLE_HZ,
            offcpu_min_us: Self::DEFAULT_OFFCPU_MIN_US,
            frame_pointers: false,
            stack_bytes: Self::DEFAULT_STACK_BYTES,
            probe_stacks: Vec::new(),
        }
    }
}

impl Default for TraceConfig {
    fn default() -> Self {
        TraceConfig {
            categories: Vec::new(),
            buffer_size_megabytes_hint: 4,
            start_timeout_milliseconds: 5000,
            buffering_mode: BufferingMode::Oneshot,
            provider_specs: Vec::new(),
            version: FXT_VERSION,
            defer_transfer: false,
            kernel_buffer_bytes: 64 << 20,
            kernel_buffering_mode: BufferingMode::Streaming,
            pids: None,
            cgroups: Vec::new(),
            uprobes: Vec::new(),
            usdt: Vec::new(),
            tracepoints: Vec::new(),
            stacks: StackOptions::default(),
            triggers: Vec::new(),
        }
    }
}

/// Options of StartTracing (`StartOptions`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartOptions {
    /// How providers clear their buffers first.
    pub buffer_disposition: BufferDisposition,
    /// Categories added to the session's, up to [`MAX_CATEGORIES`](super::MAX_CATEGORIES).
    pub additional_categories: Vec<String>,
}

impl Default for StartOptions {
    fn default() -> Self {
        StartOptions {
            buffer_disposition: BufferDisposition::ClearEntire,
            additional_categories: Vec::new(),
        }
    }
}
