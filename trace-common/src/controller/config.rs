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
    /// Functions to probe (`--uprobe` specs).
    pub uprobes: Vec<String>,
    /// USDT probes to record (`--usdt` specs).
    pub usdt: Vec<String>,
    /// Tracepoints to record by name (`-e` specs: `GROUP:EVENT` globs,
    /// `ENTRY..EXIT` pairs, ` if FILTER`).
    pub tracepoints: Vec<String>,
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
            uprobes: Vec::new(),
            usdt: Vec::new(),
            tracepoints: Vec::new(),
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
