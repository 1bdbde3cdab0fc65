//! The controller protocol: how a client (`trace-cli`) drives the trace
//! manager. The Linux form of `fuchsia.tracing.controller`'s Provisioner
//! and Session.
//!
//! Clients connect to the same `SOCK_SEQPACKET` socket providers register
//! on; the first message says which one is calling. One message per
//! datagram; every message starts with `u32 magic, u16 version, u16 kind,
//! u32 txid`, little-endian. A reply carries the txid of its request;
//! events ([`Reply::StateChanged`]) carry txid 0. Integers are
//! little-endian; strings a `u16` length and UTF-8 bytes; lists a `u16`
//! count and their items. [`Request::InitializeTracing`] carries one file
//! descriptor as `SCM_RIGHTS`: where the trace is written.
//!
//! Decoding never panics and never trusts a length: any byte string gives a
//! message or a [`ControlError`].

use alloc::string::String;
use alloc::vec::Vec;

use crate::provider::control::ControlError;
use crate::provider::{BufferDisposition, BufferingMode};

/// First word of every controller message ("TMCC" in memory).
pub const MAGIC: u32 = 0x4343_4D54;

/// The controller protocol version. 2: the stop result says how many
/// providers took part (`providers_total`) and [`Request::GetProviderStats`]
/// pages through those one message did not hold. 3: the kernel's record
/// counts are typed ([`KernelCount`]), not named by strings.
pub const VERSION: u16 = 3;

/// The oldest version whose [`Reply::Failed`] is laid out as this one's: a
/// manager tells a client of such a version that it does not speak it in a
/// message that client can read ([`Envelope::<Reply>::encode_failed_as`]).
pub const OLDEST_READABLE_FAILED: u16 = 1;

/// The largest message, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// The most providers a list holds (as `vector<ProviderInfo>:100`).
pub const MAX_PROVIDERS: usize = 100;

/// The most providers a stop result may say took part
/// ([`StopResult::providers_total`]); a client pages through them.
pub const MAX_PROVIDER_STATS: usize = 1 << 16;

/// The most categories a trace enables, `TraceConfig`'s and
/// `StartOptions`' together; extras are discarded.
pub const MAX_CATEGORIES: usize = crate::provider::MAX_CATEGORIES;

/// The longest string in a message.
pub const MAX_STRING_LEN: usize = 4096;

/// The longest list in a message.
pub const MAX_LIST_LEN: usize = 1024;

/// The FXT version this manager writes: 0.1.
pub const FXT_VERSION: FxtVersion = FxtVersion { major: 0, minor: 1 };

/// Message kinds.
pub mod kind {
    /// Client → manager: the registered providers.
    pub const GET_PROVIDERS: u16 = 0x0101;
    /// Client → manager: the known categories.
    pub const GET_KNOWN_CATEGORIES: u16 = 0x0102;
    /// Client → manager: initialize a session (with the output descriptor).
    pub const INITIALIZE_TRACING: u16 = 0x0103;
    /// Client → manager: start tracing.
    pub const START_TRACING: u16 = 0x0104;
    /// Client → manager: stop tracing.
    pub const STOP_TRACING: u16 = 0x0105;
    /// Client → manager: the next alert.
    pub const WATCH_ALERT: u16 = 0x0106;
    /// Client → manager: end the session.
    pub const TERMINATE_TRACING: u16 = 0x0107;
    /// Client → manager: record this process too.
    pub const FOLLOW: u16 = 0x0108;
    /// Client → manager: how the session is going.
    pub const GET_STATUS: u16 = 0x0109;
    /// Client → manager: more of the last stop result's provider stats.
    pub const GET_PROVIDER_STATS: u16 = 0x010A;
    /// Manager → client: the registered providers.
    pub const PROVIDERS: u16 = 0x0181;
    /// Manager → client: the known categories.
    pub const KNOWN_CATEGORIES: u16 = 0x0182;
    /// Manager → client: the session is initialized.
    pub const INITIALIZED: u16 = 0x0183;
    /// Manager → client: the answer to StartTracing.
    pub const START_RESULT: u16 = 0x0184;
    /// Manager → client: the answer to StopTracing.
    pub const STOP_RESULT: u16 = 0x0185;
    /// Manager → client: an alert.
    pub const ALERT: u16 = 0x0186;
    /// Manager → client: the session ended.
    pub const TERMINATED: u16 = 0x0187;
    /// Manager → client: the process is followed.
    pub const FOLLOWED: u16 = 0x0188;
    /// Manager → client: how the session is going.
    pub const STATUS: u16 = 0x0189;
    /// Manager → client: the session's state changed (an event).
    pub const STATE_CHANGED: u16 = 0x018A;
    /// Manager → client: the request failed.
    pub const FAILED: u16 = 0x018B;
    /// Manager → client: a page of the last stop result's provider stats.
    pub const PROVIDER_STATS: u16 = 0x018C;
}

/// Codes of [`Reply::Failed`].
pub mod fail {
    /// Anything else: the message says what.
    pub const OTHER: u32 = 0;
    /// Another client's session is active; one session at a time.
    pub const SESSION_ACTIVE: u32 = 1;
    /// This manager runs inside a `trace-cli record` and serves no other
    /// client.
    pub const EMBEDDED: u32 = 2;
    /// The message could not be decoded.
    pub const MALFORMED: u32 = 3;
    /// The request makes no sense in this state of the connection.
    pub const OUT_OF_ORDER: u32 = 4;
    /// The trace configuration cannot be followed.
    pub const BAD_CONFIG: u32 = 5;
    /// Starting the kernel provider failed.
    pub const START_FAILED: u32 = 6;
    /// The session aborted (its output failed, or the kernel could not be
    /// read): an event (txid 0) to the session's owner the moment it
    /// happens, the message saying why (e.g. `writing the trace to /path:
    /// No space left on device (os error 28)`). Nothing more is recorded;
    /// StopTracing answers ABORTED and TerminateTracing fails with this
    /// code and the same cause, as it does when writing the trace's last
    /// records fails.
    pub const ABORTED: u32 = 7;
    /// Follow named a process that does not exist (or has exited).
    pub const NO_SUCH_PROCESS: u32 = 8;
}

/// The state of the tracing session (`SessionState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionState {
    /// Ready for a new session; there is one session at a time.
    Ready,
    /// A session has been initialized.
    Initialized,
    /// Tracing is starting.
    Starting,
    /// Tracing has started.
    Started,
    /// Tracing is stopping.
    Stopping,
    /// Tracing has stopped.
    Stopped,
    /// The session is ending; then the manager is ready again.
    Terminating,
}

impl SessionState {
    /// The protocol value (1 to 7, as in fuchsia.tracing.controller).
    pub const fn value(self) -> u32 {
        match self {
            SessionState::Ready => 1,
            SessionState::Initialized => 2,
            SessionState::Starting => 3,
            SessionState::Started => 4,
            SessionState::Stopping => 5,
            SessionState::Stopped => 6,
            SessionState::Terminating => 7,
        }
    }

    /// The state of a protocol value.
    pub const fn from_value(v: u32) -> Option<Self> {
        Some(match v {
            1 => SessionState::Ready,
            2 => SessionState::Initialized,
            3 => SessionState::Starting,
            4 => SessionState::Started,
            5 => SessionState::Stopping,
            6 => SessionState::Stopped,
            7 => SessionState::Terminating,
            _ => return None,
        })
    }

    /// The state's name, upper case as in the protocol.
    pub const fn name(self) -> &'static str {
        match self {
            SessionState::Ready => "READY",
            SessionState::Initialized => "INITIALIZED",
            SessionState::Starting => "STARTING",
            SessionState::Started => "STARTED",
            SessionState::Stopping => "STOPPING",
            SessionState::Stopped => "STOPPED",
            SessionState::Terminating => "TERMINATING",
        }
    }
}

/// Why StartTracing was refused (`StartError`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartError {
    /// Tracing hasn't been initialized.
    NotInitialized,
    /// Tracing has already been started.
    AlreadyStarted,
    /// Tracing is being stopped.
    Stopping,
    /// Tracing is being terminated.
    Terminating,
}

impl StartError {
    /// The protocol value (1 to 4).
    pub const fn value(self) -> u32 {
        match self {
            StartError::NotInitialized => 1,
            StartError::AlreadyStarted => 2,
            StartError::Stopping => 3,
            StartError::Terminating => 4,
        }
    }

    /// The error of a protocol value.
    pub const fn from_value(v: u32) -> Option<Self> {
        Some(match v {
            1 => StartError::NotInitialized,
            2 => StartError::AlreadyStarted,
            3 => StartError::Stopping,
            4 => StartError::Terminating,
            _ => return None,
        })
    }
}

impl core::fmt::Display for StartError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            StartError::NotInitialized => "tracing has not been initialized",
            StartError::AlreadyStarted => "tracing has already been started",
            StartError::Stopping => "tracing is being stopped",
            StartError::Terminating => "tracing is being terminated",
        })
    }
}

/// Why StopTracing was refused (`StopError`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopError {
    /// No session: nothing to stop.
    NotInitialized,
    /// Tracing has not started, or has stopped.
    NotStarted,
    /// Tracing aborted because of an error.
    Aborted,
}

impl StopError {
    /// The protocol value (1 to 3).
    pub const fn value(self) -> u32 {
        match self {
            StopError::NotInitialized => 1,
            StopError::NotStarted => 2,
            StopError::Aborted => 3,
        }
    }

    /// The error of a protocol value.
    pub const fn from_value(v: u32) -> Option<Self> {
        Some(match v {
            1 => StopError::NotInitialized,
            2 => StopError::NotStarted,
            3 => StopError::Aborted,
            _ => return None,
        })
    }
}

impl core::fmt::Display for StopError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            StopError::NotInitialized => "no tracing session: nothing to stop",
            StopError::NotStarted => "tracing has not started or has stopped",
            StopError::Aborted => "tracing aborted because of an error",
        })
    }
}

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
        }
    }
}

/// Options of StartTracing (`StartOptions`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartOptions {
    /// How providers clear their buffers first.
    pub buffer_disposition: BufferDisposition,
    /// Categories added to the session's, up to [`MAX_CATEGORIES`].
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

/// A registered provider (`ProviderInfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderInfo {
    /// Its id in traces.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// Its process id.
    pub pid: i32,
    /// Where it is in the provider protocol.
    pub state: String,
    /// The categories it declared.
    pub categories: Vec<String>,
}

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

/// What one of the kernel provider's record counts counts
/// ([`KernelStats::counts`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KernelCount {
    /// Context switch records.
    Switches,
    /// Thread wake-up records.
    Wakeups,
    /// fork/clone, exec, exit and rename instants.
    ProcessEvents,
    /// Process and thread name records.
    Names,
    /// System call durations.
    SystemCalls,
    /// Hard IRQ and softirq durations.
    Interrupts,
    /// Block request durations.
    BlockRequests,
    /// Page fault instants and resident-set counter events.
    MemoryEvents,
    /// CPU idle and frequency counter events.
    CpuCounters,
    /// Probed function durations (`--uprobe`).
    ProbeHits,
    /// USDT probe instants (`--usdt`).
    UsdtEvents,
    /// Events of a tracepoint selected by name (`group:event`).
    Tracepoint(String),
}

impl KernelCount {
    /// The kinds of fixed meaning, in the order they are reported.
    pub const FIXED: [KernelCount; 11] = [
        KernelCount::Switches,
        KernelCount::Wakeups,
        KernelCount::ProcessEvents,
        KernelCount::Names,
        KernelCount::SystemCalls,
        KernelCount::Interrupts,
        KernelCount::BlockRequests,
        KernelCount::MemoryEvents,
        KernelCount::CpuCounters,
        KernelCount::ProbeHits,
        KernelCount::UsdtEvents,
    ];

    /// Its value on the wire; a [`KernelCount::Tracepoint`] is followed by
    /// its name.
    pub fn value(&self) -> u16 {
        match self {
            KernelCount::Switches => 1,
            KernelCount::Wakeups => 2,
            KernelCount::ProcessEvents => 3,
            KernelCount::Names => 4,
            KernelCount::SystemCalls => 5,
            KernelCount::Interrupts => 6,
            KernelCount::BlockRequests => 7,
            KernelCount::MemoryEvents => 8,
            KernelCount::CpuCounters => 9,
            KernelCount::ProbeHits => 10,
            KernelCount::UsdtEvents => 11,
            KernelCount::Tracepoint(_) => 0x100,
        }
    }

    /// What it counts, as a summary says it: `switches`, `system calls`,
    /// ..., or the tracepoint's name.
    pub fn label(&self) -> &str {
        match self {
            KernelCount::Switches => "switches",
            KernelCount::Wakeups => "wakeups",
            KernelCount::ProcessEvents => "process events",
            KernelCount::Names => "names",
            KernelCount::SystemCalls => "system calls",
            KernelCount::Interrupts => "interrupts",
            KernelCount::BlockRequests => "block requests",
            KernelCount::MemoryEvents => "memory events",
            KernelCount::CpuCounters => "cpu counters",
            KernelCount::ProbeHits => "probe hits",
            KernelCount::UsdtEvents => "USDT events",
            KernelCount::Tracepoint(name) => name,
        }
    }

    fn encode(&self, e: &mut Encoder) -> Result<(), ControlError> {
        e.u16(self.value());
        match self {
            KernelCount::Tracepoint(name) => e.str(name),
            _ => Ok(()),
        }
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self, ControlError> {
        let value = d.u16()?;
        if value == 0x100 {
            return Ok(KernelCount::Tracepoint(d.str()?));
        }
        KernelCount::FIXED
            .into_iter()
            .find(|k| k.value() == value)
            .ok_or(ControlError::BadValue("kernel count kind"))
    }
}

/// The answer to StopTracing and TerminateTracing (`StopResult`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StopResult {
    /// Each provider's numbers, the kernel's first: on the wire, the first
    /// [`StopResult::providers_total`] that fit in the message
    /// ([`StopResult::paged`]); [`Request::GetProviderStats`] gives the
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

/// What a client asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// The registered providers.
    GetProviders,
    /// The known categories: the kernel's and those providers declared.
    GetKnownCategories,
    /// Begin a session (the output descriptor travels beside it).
    InitializeTracing(TraceConfig),
    /// Start tracing.
    StartTracing(StartOptions),
    /// Stop tracing; with `write_results`, write what was collected.
    StopTracing {
        /// Write every provider's buffer to the output now.
        write_results: bool,
    },
    /// The next alert, when one comes.
    WatchAlert,
    /// End the session: stop, write what was not written, finish the
    /// output.
    TerminateTracing,
    /// Record this process too (in a session with a pid filter).
    Follow {
        /// The process.
        pid: u32,
    },
    /// How the session is going.
    GetStatus,
    /// The provider stats of the last stop result (StopTracing's or
    /// TerminateTracing's) sent on this connection, from `offset` on: as
    /// many as fit in one [`Reply::ProviderStats`].
    GetProviderStats {
        /// The index of the first one wanted.
        offset: u32,
    },
}

/// What the manager answers or announces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// The registered providers.
    Providers(Vec<ProviderInfo>),
    /// The known categories, as (name, description).
    KnownCategories(Vec<(String, String)>),
    /// The session is initialized.
    Initialized,
    /// StartTracing's answer: acknowledged, or refused.
    StartResult(Result<(), StartError>),
    /// StopTracing's answer.
    StopResult(Result<StopResult, StopError>),
    /// An alert a provider raised.
    Alert {
        /// The alert's name.
        name: String,
        /// The provider that raised it.
        provider: String,
    },
    /// The session ended; the output is complete.
    Terminated(StopResult),
    /// The process is followed.
    Followed,
    /// How the session is going.
    Status(Status),
    /// The session's state changed (an event, txid 0).
    StateChanged(SessionState),
    /// A page of the last stop result's provider stats.
    ProviderStats {
        /// The index of the first one in `stats`.
        offset: u32,
        /// How many there are in all (the stop result's `providers_total`).
        total: u32,
        /// Those from `offset` on that fit in the message (at least one
        /// while `offset` is below `total`).
        stats: Vec<ProviderStats>,
    },
    /// The request failed; with `fatal`, the manager closes the connection.
    Failed {
        /// Whether the connection is closed after this.
        fatal: bool,
        /// What kind of failure (one of [`fail`]).
        code: u32,
        /// What went wrong, one sentence.
        message: String,
    },
}

/// A message and its transaction id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope<T> {
    /// The request's id, echoed by its reply; 0 for events.
    pub txid: u32,
    /// The message.
    pub body: T,
}

struct Encoder(Vec<u8>);

impl Encoder {
    fn new(kind: u16, txid: u32) -> Self {
        let mut e = Encoder(Vec::with_capacity(64));
        e.u32(MAGIC);
        e.u16(VERSION);
        e.u16(kind);
        e.u32(txid);
        e
    }
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn str(&mut self, s: &str) -> Result<(), ControlError> {
        if s.len() > MAX_STRING_LEN {
            return Err(ControlError::TooLong("string"));
        }
        self.u16(s.len() as u16);
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
    fn count(&mut self, n: usize) -> Result<(), ControlError> {
        if n > MAX_LIST_LEN {
            return Err(ControlError::TooLong("list"));
        }
        self.u16(n as u16);
        Ok(())
    }
    fn strs(&mut self, items: &[String]) -> Result<(), ControlError> {
        self.count(items.len())?;
        items.iter().try_for_each(|s| self.str(s))
    }
    fn finish(self) -> Result<Vec<u8>, ControlError> {
        if self.0.len() > MAX_MESSAGE_BYTES {
            return Err(ControlError::TooLong("message"));
        }
        Ok(self.0)
    }
}

struct Decoder<'a>(&'a [u8]);

impl<'a> Decoder<'a> {
    fn head(bytes: &'a [u8]) -> Result<(Self, u16, u32), ControlError> {
        let mut d = Decoder(bytes);
        if d.u32()? != MAGIC {
            return Err(ControlError::BadMagic);
        }
        let version = d.u16()?;
        if version != VERSION {
            return Err(ControlError::UnsupportedVersion(version));
        }
        let kind = d.u16()?;
        let txid = d.u32()?;
        Ok((d, kind, txid))
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], ControlError> {
        if self.0.len() < n {
            return Err(ControlError::Truncated);
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], ControlError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, ControlError> {
        Ok(self.take(1)?[0])
    }
    fn bool(&mut self, what: &'static str) -> Result<bool, ControlError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(ControlError::BadValue(what)),
        }
    }
    fn u16(&mut self) -> Result<u16, ControlError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, ControlError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, ControlError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn str(&mut self) -> Result<String, ControlError> {
        let n = usize::from(self.u16()?);
        if n > MAX_STRING_LEN {
            return Err(ControlError::TooLong("string"));
        }
        core::str::from_utf8(self.take(n)?)
            .map(String::from)
            .map_err(|_| ControlError::NotUtf8)
    }
    /// A list's count, checked against what is left (each item takes at
    /// least `min_item` bytes), so a forged count cannot make us allocate.
    fn count(&mut self, min_item: usize) -> Result<usize, ControlError> {
        let n = usize::from(self.u16()?);
        if n > MAX_LIST_LEN {
            return Err(ControlError::TooLong("list"));
        }
        if n.saturating_mul(min_item) > self.0.len() {
            return Err(ControlError::Truncated);
        }
        Ok(n)
    }
    fn strs(&mut self) -> Result<Vec<String>, ControlError> {
        let n = self.count(2)?;
        (0..n).map(|_| self.str()).collect()
    }
    fn mode(&mut self) -> Result<BufferingMode, ControlError> {
        BufferingMode::from_header_value(self.u8()?).ok_or(ControlError::BadValue("buffering mode"))
    }
    fn end(self) -> Result<(), ControlError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ControlError::TrailingBytes)
        }
    }
}

impl TraceConfig {
    fn encode(&self, e: &mut Encoder) -> Result<(), ControlError> {
        e.strs(&self.categories)?;
        e.u32(self.buffer_size_megabytes_hint);
        e.u64(self.start_timeout_milliseconds);
        e.u8(self.buffering_mode.header_value());
        e.count(self.provider_specs.len())?;
        for s in &self.provider_specs {
            e.str(&s.name)?;
            e.u32(s.buffer_size_megabytes_hint);
            e.strs(&s.categories)?;
        }
        e.u32(self.version.major);
        e.u32(self.version.minor);
        e.bool(self.defer_transfer);
        e.u64(self.kernel_buffer_bytes);
        e.u8(self.kernel_buffering_mode.header_value());
        match &self.pids {
            None => e.bool(false),
            Some(pids) => {
                e.bool(true);
                e.count(pids.len())?;
                pids.iter().for_each(|&p| e.u32(p));
            }
        }
        e.strs(&self.uprobes)?;
        e.strs(&self.usdt)
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self, ControlError> {
        let categories = d.strs()?;
        let buffer_size_megabytes_hint = d.u32()?;
        let start_timeout_milliseconds = d.u64()?;
        let buffering_mode = d.mode()?;
        let n = d.count(8)?;
        let provider_specs = (0..n)
            .map(|_| {
                Ok(ProviderSpec {
                    name: d.str()?,
                    buffer_size_megabytes_hint: d.u32()?,
                    categories: d.strs()?,
                })
            })
            .collect::<Result<_, ControlError>>()?;
        let version = FxtVersion {
            major: d.u32()?,
            minor: d.u32()?,
        };
        let defer_transfer = d.bool("defer_transfer")?;
        let kernel_buffer_bytes = d.u64()?;
        let kernel_buffering_mode = d.mode()?;
        let pids = if d.bool("pid filter flag")? {
            let n = d.count(4)?;
            Some((0..n).map(|_| d.u32()).collect::<Result<_, _>>()?)
        } else {
            None
        };
        Ok(TraceConfig {
            categories,
            buffer_size_megabytes_hint,
            start_timeout_milliseconds,
            buffering_mode,
            provider_specs,
            version,
            defer_transfer,
            kernel_buffer_bytes,
            kernel_buffering_mode,
            pids,
            uprobes: d.strs()?,
            usdt: d.strs()?,
        })
    }
}

impl ProviderStats {
    /// The fewest bytes one takes in a message (an empty name).
    const MIN_ENCODED_LEN: usize = 41;

    /// The bytes it takes in a message.
    pub fn encoded_len(&self) -> usize {
        Self::MIN_ENCODED_LEN + self.name.len()
    }

    fn encode(&self, e: &mut Encoder) -> Result<(), ControlError> {
        e.u32(self.id);
        e.str(&self.name)?;
        e.u32(self.pid as u32);
        e.u64(self.records_written);
        e.u64(self.bytes_written);
        e.u64(self.records_dropped);
        e.u32(self.buffer_wrapped_count);
        e.u8(self.percentage_durable_buffer_used);
        e.bool(self.started);
        e.bool(self.aborted);
        Ok(())
    }

    fn encode_list(list: &[ProviderStats], e: &mut Encoder) -> Result<(), ControlError> {
        e.count(list.len())?;
        list.iter().try_for_each(|s| s.encode(e))
    }

    /// A list of them, its count checked against the bytes left.
    fn decode_list(d: &mut Decoder<'_>) -> Result<Vec<ProviderStats>, ControlError> {
        let n = d.count(Self::MIN_ENCODED_LEN)?;
        (0..n)
            .map(|_| {
                let id = d.u32()?;
                let name = d.str()?;
                Ok(ProviderStats {
                    id,
                    name,
                    pid: d.u32()? as i32,
                    records_written: d.u64()?,
                    bytes_written: d.u64()?,
                    records_dropped: d.u64()?,
                    buffer_wrapped_count: d.u32()?,
                    percentage_durable_buffer_used: match d.u8()? {
                        p @ 0..=100 => p,
                        _ => return Err(ControlError::BadValue("buffer usage")),
                    },
                    started: d.bool("started")?,
                    aborted: d.bool("aborted")?,
                })
            })
            .collect()
    }
}

/// How many of `stats`, from the first, fit in `room` bytes of a message
/// (and in one list).
fn stats_that_fit(stats: &[ProviderStats], mut room: usize) -> usize {
    let mut n = 0;
    for s in stats.iter().take(MAX_LIST_LEN) {
        let len = s.encoded_len();
        if len > room {
            break;
        }
        room -= len;
        n += 1;
    }
    n
}

/// The page of `all` from `offset` that one [`Reply::ProviderStats`]
/// holds; the answer to [`Request::GetProviderStats`]. `None` when
/// `offset` is past the end (at the end: an empty page).
pub fn provider_stats_page(all: &[ProviderStats], offset: u32) -> Option<Reply> {
    let rest = all.get(offset as usize..)?;
    let head = Encoder::new(kind::PROVIDER_STATS, 0).0.len() + 4 + 4 + 2;
    let n = stats_that_fit(rest, MAX_MESSAGE_BYTES.saturating_sub(head));
    Some(Reply::ProviderStats {
        offset,
        total: all.len() as u32,
        stats: rest[..n].to_vec(),
    })
}

impl StopResult {
    /// This result as one message holds it, and every provider's stats:
    /// `providers_total` counts them all, `provider_stats` keeps the first
    /// that fit beside the rest of the result; the caller keeps the list
    /// for [`Request::GetProviderStats`] ([`provider_stats_page`]).
    pub fn paged(mut self) -> (StopResult, Vec<ProviderStats>) {
        let all = core::mem::take(&mut self.provider_stats);
        self.providers_total = all.len().min(MAX_PROVIDER_STATS) as u32;
        let mut e = Encoder::new(kind::STOP_RESULT, 0);
        e.u32(0);
        let rest = match self.encode(&mut e) {
            Ok(()) => e.0.len(),
            Err(_) => MAX_MESSAGE_BYTES,
        };
        let n = stats_that_fit(&all, MAX_MESSAGE_BYTES.saturating_sub(rest));
        self.provider_stats = all[..n].to_vec();
        (self, all)
    }

    fn encode(&self, e: &mut Encoder) -> Result<(), ControlError> {
        let total = (self.providers_total as usize).max(self.provider_stats.len());
        if total > MAX_PROVIDER_STATS {
            return Err(ControlError::TooLong("provider total"));
        }
        e.u32(total as u32);
        ProviderStats::encode_list(&self.provider_stats, e)?;
        let k = &self.kernel;
        e.u64(k.events);
        e.u64(k.dropped);
        e.count(k.dropped_per_cpu.len())?;
        for &(cpu, n) in &k.dropped_per_cpu {
            e.u32(cpu);
            e.u64(n);
        }
        e.u64(k.malformed);
        e.count(k.counts.len())?;
        for (kind, n) in &k.counts {
            kind.encode(e)?;
            e.u64(*n);
        }
        e.strs(&k.categories)?;
        e.u64(self.records);
        e.u64(self.bytes);
        e.u64(self.traced_ns);
        Ok(())
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self, ControlError> {
        let providers_total = d.u32()?;
        if providers_total as usize > MAX_PROVIDER_STATS {
            return Err(ControlError::TooLong("provider total"));
        }
        let provider_stats = ProviderStats::decode_list(d)?;
        if provider_stats.len() > providers_total as usize {
            return Err(ControlError::BadValue("provider total"));
        }
        let events = d.u64()?;
        let dropped = d.u64()?;
        let n = d.count(12)?;
        let dropped_per_cpu = (0..n)
            .map(|_| Ok((d.u32()?, d.u64()?)))
            .collect::<Result<_, ControlError>>()?;
        let malformed = d.u64()?;
        let n = d.count(10)?;
        let counts = (0..n)
            .map(|_| Ok((KernelCount::decode(d)?, d.u64()?)))
            .collect::<Result<_, ControlError>>()?;
        Ok(StopResult {
            provider_stats,
            providers_total,
            kernel: KernelStats {
                events,
                dropped,
                dropped_per_cpu,
                malformed,
                counts,
                categories: d.strs()?,
            },
            records: d.u64()?,
            bytes: d.u64()?,
            traced_ns: d.u64()?,
        })
    }
}

impl Envelope<Request> {
    /// The message's bytes.
    pub fn encode(&self) -> Result<Vec<u8>, ControlError> {
        let t = self.txid;
        let e = match &self.body {
            Request::GetProviders => Encoder::new(kind::GET_PROVIDERS, t),
            Request::GetKnownCategories => Encoder::new(kind::GET_KNOWN_CATEGORIES, t),
            Request::InitializeTracing(config) => {
                let mut e = Encoder::new(kind::INITIALIZE_TRACING, t);
                config.encode(&mut e)?;
                e
            }
            Request::StartTracing(o) => {
                let mut e = Encoder::new(kind::START_TRACING, t);
                e.u8(o.buffer_disposition.value());
                e.strs(&o.additional_categories)?;
                e
            }
            Request::StopTracing { write_results } => {
                let mut e = Encoder::new(kind::STOP_TRACING, t);
                e.bool(*write_results);
                e
            }
            Request::WatchAlert => Encoder::new(kind::WATCH_ALERT, t),
            Request::TerminateTracing => Encoder::new(kind::TERMINATE_TRACING, t),
            Request::Follow { pid } => {
                let mut e = Encoder::new(kind::FOLLOW, t);
                e.u32(*pid);
                e
            }
            Request::GetStatus => Encoder::new(kind::GET_STATUS, t),
            Request::GetProviderStats { offset } => {
                let mut e = Encoder::new(kind::GET_PROVIDER_STATS, t);
                e.u32(*offset);
                e
            }
        };
        e.finish()
    }

    /// The request in `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Self, ControlError> {
        let (mut d, k, txid) = Decoder::head(bytes)?;
        let body = match k {
            kind::GET_PROVIDERS => Request::GetProviders,
            kind::GET_KNOWN_CATEGORIES => Request::GetKnownCategories,
            kind::INITIALIZE_TRACING => Request::InitializeTracing(TraceConfig::decode(&mut d)?),
            kind::START_TRACING => Request::StartTracing(StartOptions {
                buffer_disposition: BufferDisposition::from_value(d.u8()?)
                    .ok_or(ControlError::BadValue("buffer disposition"))?,
                additional_categories: d.strs()?,
            }),
            kind::STOP_TRACING => Request::StopTracing {
                write_results: d.bool("write_results")?,
            },
            kind::WATCH_ALERT => Request::WatchAlert,
            kind::TERMINATE_TRACING => Request::TerminateTracing,
            kind::FOLLOW => Request::Follow { pid: d.u32()? },
            kind::GET_STATUS => Request::GetStatus,
            kind::GET_PROVIDER_STATS => Request::GetProviderStats { offset: d.u32()? },
            other => return Err(ControlError::UnknownKind(other)),
        };
        d.end()?;
        Ok(Envelope { txid, body })
    }
}

impl Envelope<Reply> {
    /// The message's bytes.
    pub fn encode(&self) -> Result<Vec<u8>, ControlError> {
        let t = self.txid;
        let e = match &self.body {
            Reply::Providers(list) => {
                let mut e = Encoder::new(kind::PROVIDERS, t);
                if list.len() > MAX_PROVIDERS {
                    return Err(ControlError::TooLong("provider list"));
                }
                e.count(list.len())?;
                for p in list {
                    e.u32(p.id);
                    e.str(&p.name)?;
                    e.u32(p.pid as u32);
                    e.str(&p.state)?;
                    e.strs(&p.categories)?;
                }
                e
            }
            Reply::KnownCategories(list) => {
                let mut e = Encoder::new(kind::KNOWN_CATEGORIES, t);
                e.count(list.len())?;
                for (name, description) in list {
                    e.str(name)?;
                    e.str(description)?;
                }
                e
            }
            Reply::Initialized => Encoder::new(kind::INITIALIZED, t),
            Reply::StartResult(r) => {
                let mut e = Encoder::new(kind::START_RESULT, t);
                e.u32(r.err().map_or(0, StartError::value));
                e
            }
            Reply::StopResult(r) => {
                let mut e = Encoder::new(kind::STOP_RESULT, t);
                match r {
                    Ok(result) => {
                        e.u32(0);
                        result.encode(&mut e)?;
                    }
                    Err(err) => e.u32(err.value()),
                }
                e
            }
            Reply::Alert { name, provider } => {
                let mut e = Encoder::new(kind::ALERT, t);
                e.str(name)?;
                e.str(provider)?;
                e
            }
            Reply::Terminated(result) => {
                let mut e = Encoder::new(kind::TERMINATED, t);
                result.encode(&mut e)?;
                e
            }
            Reply::Followed => Encoder::new(kind::FOLLOWED, t),
            Reply::Status(s) => {
                let mut e = Encoder::new(kind::STATUS, t);
                e.u32(s.state.map_or(0, SessionState::value));
                e.u64(s.elapsed_ns);
                e.u64(s.kernel_events);
                e.u64(s.bytes);
                e.u64(s.dropped);
                e.u16(s.kernel_fill_permille);
                e.u32(s.providers);
                e.u32(s.providers_started);
                e.count(s.provider_progress.len())?;
                for p in &s.provider_progress {
                    e.str(&p.name)?;
                    e.u16(p.fill_permille);
                    e.u64(p.dropped);
                    e.u64(p.bytes_written);
                }
                e
            }
            Reply::StateChanged(state) => {
                let mut e = Encoder::new(kind::STATE_CHANGED, t);
                e.u32(state.value());
                e
            }
            Reply::ProviderStats {
                offset,
                total,
                stats,
            } => {
                let end = (*offset as usize).checked_add(stats.len());
                if end.is_none_or(|end| end > *total as usize)
                    || *total as usize > MAX_PROVIDER_STATS
                {
                    return Err(ControlError::BadValue("provider stats page"));
                }
                let mut e = Encoder::new(kind::PROVIDER_STATS, t);
                e.u32(*offset);
                e.u32(*total);
                ProviderStats::encode_list(stats, &mut e)?;
                e
            }
            Reply::Failed {
                fatal,
                code,
                message,
            } => {
                let mut e = Encoder::new(kind::FAILED, t);
                e.bool(*fatal);
                e.u32(*code);
                e.str(message)?;
                e
            }
        };
        e.finish()
    }

    /// The reply in `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Self, ControlError> {
        let (mut d, k, txid) = Decoder::head(bytes)?;
        let body = match k {
            kind::PROVIDERS => {
                let n = d.count(14)?;
                if n > MAX_PROVIDERS {
                    return Err(ControlError::TooLong("provider list"));
                }
                Reply::Providers(
                    (0..n)
                        .map(|_| {
                            Ok(ProviderInfo {
                                id: d.u32()?,
                                name: d.str()?,
                                pid: d.u32()? as i32,
                                state: d.str()?,
                                categories: d.strs()?,
                            })
                        })
                        .collect::<Result<_, ControlError>>()?,
                )
            }
            kind::KNOWN_CATEGORIES => {
                let n = d.count(4)?;
                Reply::KnownCategories((0..n).map(|_| Ok((d.str()?, d.str()?))).collect::<Result<
                    _,
                    ControlError,
                >>(
                )?)
            }
            kind::INITIALIZED => Reply::Initialized,
            kind::START_RESULT => Reply::StartResult(match d.u32()? {
                0 => Ok(()),
                v => Err(StartError::from_value(v).ok_or(ControlError::BadValue("start error"))?),
            }),
            kind::STOP_RESULT => Reply::StopResult(match d.u32()? {
                0 => Ok(StopResult::decode(&mut d)?),
                v => Err(StopError::from_value(v).ok_or(ControlError::BadValue("stop error"))?),
            }),
            kind::ALERT => Reply::Alert {
                name: d.str()?,
                provider: d.str()?,
            },
            kind::TERMINATED => Reply::Terminated(StopResult::decode(&mut d)?),
            kind::FOLLOWED => Reply::Followed,
            kind::STATUS => Reply::Status(Status {
                state: match d.u32()? {
                    0 => None,
                    v => Some(SessionState::from_value(v).ok_or(ControlError::BadValue("state"))?),
                },
                elapsed_ns: d.u64()?,
                kernel_events: d.u64()?,
                bytes: d.u64()?,
                dropped: d.u64()?,
                kernel_fill_permille: d.u16()?,
                providers: d.u32()?,
                providers_started: d.u32()?,
                provider_progress: {
                    let n = d.count(20)?;
                    (0..n)
                        .map(|_| {
                            Ok(ProviderProgress {
                                name: d.str()?,
                                fill_permille: d.u16()?,
                                dropped: d.u64()?,
                                bytes_written: d.u64()?,
                            })
                        })
                        .collect::<Result<_, ControlError>>()?
                },
            }),
            kind::STATE_CHANGED => Reply::StateChanged(
                SessionState::from_value(d.u32()?).ok_or(ControlError::BadValue("state"))?,
            ),
            kind::PROVIDER_STATS => {
                let offset = d.u32()?;
                let total = d.u32()?;
                if total as usize > MAX_PROVIDER_STATS || offset > total {
                    return Err(ControlError::BadValue("provider stats page"));
                }
                let stats = ProviderStats::decode_list(&mut d)?;
                if stats.len() > (total - offset) as usize {
                    return Err(ControlError::BadValue("provider stats page"));
                }
                Reply::ProviderStats {
                    offset,
                    total,
                    stats,
                }
            }
            kind::FAILED => Reply::Failed {
                fatal: d.bool("fatal")?,
                code: d.u32()?,
                message: d.str()?,
            },
            other => return Err(ControlError::UnknownKind(other)),
        };
        d.end()?;
        Ok(Envelope { txid, body })
    }
}

impl Envelope<Reply> {
    /// A [`Reply::Failed`] with `version` in its header, for a client that
    /// speaks `version` (from [`OLDEST_READABLE_FAILED`] to [`VERSION`],
    /// whose Failed is laid out as this one's): how a manager tells it that
    /// it does not speak its version. `None` for any other version or
    /// reply.
    pub fn encode_failed_as(&self, version: u16) -> Option<Vec<u8>> {
        if !(OLDEST_READABLE_FAILED..=VERSION).contains(&version)
            || !matches!(self.body, Reply::Failed { .. })
        {
            return None;
        }
        let mut bytes = self.encode().ok()?;
        bytes[4..6].copy_from_slice(&version.to_le_bytes());
        Some(bytes)
    }
}

/// Whether `bytes` starts like a controller message (any version), as
/// opposed to a provider's registration.
pub fn is_controller_message(bytes: &[u8]) -> bool {
    bytes.len() >= 4 && bytes[..4] == MAGIC.to_le_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;
    use proptest::prelude::*;

    fn roundtrip_request(body: Request) {
        let m = Envelope { txid: 7, body };
        let bytes = m.encode().unwrap();
        assert_eq!(Envelope::<Request>::decode(&bytes).unwrap(), m);
        // Every strict prefix is refused, never misread.
        for n in 0..bytes.len() {
            assert!(Envelope::<Request>::decode(&bytes[..n]).is_err(), "{n}");
        }
    }

    fn roundtrip_reply(body: Reply) {
        let m = Envelope { txid: 9, body };
        let bytes = m.encode().unwrap();
        assert_eq!(Envelope::<Reply>::decode(&bytes).unwrap(), m);
        for n in 0..bytes.len() {
            assert!(Envelope::<Reply>::decode(&bytes[..n]).is_err(), "{n}");
        }
    }

    #[test]
    fn every_request_round_trips() {
        roundtrip_request(Request::GetProviders);
        roundtrip_request(Request::GetKnownCategories);
        roundtrip_request(Request::InitializeTracing(TraceConfig::default()));
        roundtrip_request(Request::InitializeTracing(TraceConfig {
            categories: vec!["kernel:sched".to_string(), "app".to_string()],
            provider_specs: vec![ProviderSpec {
                name: "p".to_string(),
                buffer_size_megabytes_hint: 8,
                categories: vec!["x".to_string()],
            }],
            defer_transfer: true,
            pids: Some(vec![1, 2, 3]),
            uprobes: vec!["/bin/ls:main".to_string()],
            usdt: vec!["python:gc__start".to_string()],
            buffering_mode: BufferingMode::Streaming,
            kernel_buffering_mode: BufferingMode::Circular,
            ..TraceConfig::default()
        }));
        roundtrip_request(Request::StartTracing(StartOptions {
            buffer_disposition: BufferDisposition::Retain,
            additional_categories: vec!["a".to_string()],
        }));
        roundtrip_request(Request::StopTracing {
            write_results: true,
        });
        roundtrip_request(Request::WatchAlert);
        roundtrip_request(Request::TerminateTracing);
        roundtrip_request(Request::Follow { pid: 42 });
        roundtrip_request(Request::GetStatus);
        roundtrip_request(Request::GetProviderStats { offset: 120 });
    }

    #[test]
    fn every_reply_round_trips() {
        let result = StopResult {
            provider_stats: vec![ProviderStats {
                id: 2,
                name: "app".to_string(),
                pid: 99,
                records_written: 5,
                bytes_written: 80,
                records_dropped: 1,
                buffer_wrapped_count: 3,
                percentage_durable_buffer_used: 12,
                started: true,
                aborted: false,
            }],
            providers_total: 3,
            kernel: KernelStats {
                events: 10,
                dropped: 2,
                dropped_per_cpu: vec![(0, 1), (1, 1)],
                malformed: 0,
                counts: vec![
                    (KernelCount::Switches, 4),
                    (
                        KernelCount::Tracepoint("sched:sched_migrate_task".into()),
                        2,
                    ),
                ],
                categories: vec!["kernel:sched".to_string()],
            },
            records: 100,
            bytes: 1000,
            traced_ns: 5,
        };
        roundtrip_reply(Reply::Providers(vec![ProviderInfo {
            id: 2,
            name: "app".to_string(),
            pid: 5,
            state: "registered".to_string(),
            categories: vec!["c".to_string()],
        }]));
        roundtrip_reply(Reply::KnownCategories(vec![(
            "kernel:sched".to_string(),
            "switches".to_string(),
        )]));
        roundtrip_reply(Reply::Initialized);
        roundtrip_reply(Reply::StartResult(Ok(())));
        for v in 1..=4 {
            roundtrip_reply(Reply::StartResult(Err(StartError::from_value(v).unwrap())));
        }
        roundtrip_reply(Reply::StopResult(Ok(result.clone())));
        for v in 1..=3 {
            roundtrip_reply(Reply::StopResult(Err(StopError::from_value(v).unwrap())));
        }
        roundtrip_reply(Reply::Alert {
            name: "oops".to_string(),
            provider: "app".to_string(),
        });
        roundtrip_reply(Reply::ProviderStats {
            offset: 1,
            total: 3,
            stats: result.provider_stats.clone(),
        });
        roundtrip_reply(Reply::ProviderStats {
            offset: 3,
            total: 3,
            stats: vec![],
        });
        roundtrip_reply(Reply::Terminated(result));
        roundtrip_reply(Reply::Followed);
        roundtrip_reply(Reply::Status(Status {
            state: Some(SessionState::Started),
            elapsed_ns: 1,
            kernel_events: 2,
            bytes: 3,
            dropped: 4,
            kernel_fill_permille: 500,
            providers: 2,
            providers_started: 1,
            provider_progress: vec![ProviderProgress {
                name: "app".to_string(),
                fill_permille: 250,
                dropped: 3,
                bytes_written: 4096,
            }],
        }));
        for v in 1..=7 {
            roundtrip_reply(Reply::StateChanged(SessionState::from_value(v).unwrap()));
        }
        roundtrip_reply(Reply::Failed {
            fatal: true,
            code: fail::MALFORMED,
            message: "bad".to_string(),
        });
    }

    #[test]
    fn foreign_and_future_messages_are_refused() {
        let mut bytes = Envelope {
            txid: 1,
            body: Request::GetProviders,
        }
        .encode()
        .unwrap();
        assert!(is_controller_message(&bytes));
        for v in [0, VERSION - 1, VERSION + 1] {
            bytes[4..6].copy_from_slice(&v.to_le_bytes());
            assert_eq!(
                Envelope::<Request>::decode(&bytes),
                Err(ControlError::UnsupportedVersion(v))
            );
        }
        bytes[0] ^= 1;
        assert_eq!(
            Envelope::<Request>::decode(&bytes),
            Err(ControlError::BadMagic)
        );
        // A reply is no request.
        let reply = Envelope {
            txid: 1,
            body: Reply::Initialized,
        }
        .encode()
        .unwrap();
        assert_eq!(
            Envelope::<Request>::decode(&reply),
            Err(ControlError::UnknownKind(kind::INITIALIZED))
        );
    }

    #[test]
    fn forged_counts_do_not_allocate() {
        let mut e = Encoder::new(kind::KNOWN_CATEGORIES, 1);
        e.u16(1000);
        let bytes = e.finish().unwrap();
        assert_eq!(
            Envelope::<Reply>::decode(&bytes),
            Err(ControlError::Truncated)
        );
    }

    fn stats(n: usize, name_len: usize) -> Vec<ProviderStats> {
        (0..n)
            .map(|i| ProviderStats {
                id: i as u32 + 1,
                name: alloc::format!("{i:0>width$}", width = name_len),
                pid: i as i32,
                ..ProviderStats::default()
            })
            .collect()
    }

    /// Pages through a stop result as a client does: the result, then
    /// GetProviderStats until every provider is there.
    fn page_through(result: StopResult) -> Vec<ProviderStats> {
        let (first, all) = result.paged();
        let reply = Envelope {
            txid: 1,
            body: Reply::StopResult(Ok(first)),
        };
        let bytes = reply.encode().unwrap();
        assert!(bytes.len() <= MAX_MESSAGE_BYTES);
        let Reply::StopResult(Ok(first)) = Envelope::<Reply>::decode(&bytes).unwrap().body else {
            panic!();
        };
        let total = first.providers_total;
        let mut got = first.provider_stats;
        while got.len() < total as usize {
            let page = provider_stats_page(&all, got.len() as u32).unwrap();
            let bytes = Envelope {
                txid: 2,
                body: page,
            }
            .encode()
            .unwrap();
            assert!(bytes.len() <= MAX_MESSAGE_BYTES);
            match Envelope::<Reply>::decode(&bytes).unwrap().body {
                Reply::ProviderStats {
                    offset,
                    total: t,
                    stats,
                } => {
                    assert_eq!((offset as usize, t), (got.len(), total));
                    assert!(!stats.is_empty());
                    got.extend(stats);
                }
                other => panic!("{other:?}"),
            }
        }
        got
    }

    #[test]
    fn every_provider_is_reported_whatever_their_number() {
        // Few: all in the result itself.
        let few = stats(120, 12);
        let (first, _) = StopResult {
            provider_stats: few.clone(),
            ..StopResult::default()
        }
        .paged();
        assert_eq!(first.providers_total, 120);
        assert_eq!(first.provider_stats, few);
        // A thousand with long names: paged, none lost, in order.
        for (n, len) in [(1001, 100), (2000, 4000), (0, 0)] {
            let all = stats(n, len);
            let got = page_through(StopResult {
                provider_stats: all.clone(),
                kernel: KernelStats {
                    counts: vec![(KernelCount::Switches, 5)],
                    ..KernelStats::default()
                },
                ..StopResult::default()
            });
            assert_eq!(got, all);
        }
        // Past the end: no page.
        assert_eq!(provider_stats_page(&few, 121), None);
        assert!(matches!(
            provider_stats_page(&few, 120),
            Some(Reply::ProviderStats { stats, .. }) if stats.is_empty()
        ));
    }

    #[test]
    fn forged_totals_and_pages_are_refused() {
        let result = StopResult {
            provider_stats: stats(2, 3),
            providers_total: 2,
            ..StopResult::default()
        };
        let mut bytes = Envelope {
            txid: 1,
            body: Reply::Terminated(result),
        }
        .encode()
        .unwrap();
        // A total below the list's length, or past the limit.
        for (total, err) in [
            (1u32, ControlError::BadValue("provider total")),
            (
                MAX_PROVIDER_STATS as u32 + 1,
                ControlError::TooLong("provider total"),
            ),
        ] {
            bytes[12..16].copy_from_slice(&total.to_le_bytes());
            assert_eq!(Envelope::<Reply>::decode(&bytes), Err(err));
        }
        // A page past its total.
        let page = Reply::ProviderStats {
            offset: 2,
            total: 3,
            stats: stats(2, 3),
        };
        assert!(
            Envelope {
                txid: 1,
                body: page
            }
            .encode()
            .is_err()
        );
        let mut e = Encoder::new(kind::PROVIDER_STATS, 1);
        e.u32(2);
        e.u32(3);
        ProviderStats::encode_list(&stats(2, 3), &mut e).unwrap();
        assert_eq!(
            Envelope::<Reply>::decode(&e.finish().unwrap()),
            Err(ControlError::BadValue("provider stats page"))
        );
    }

    #[test]
    fn an_older_client_reads_why_it_is_refused() {
        let failed = Envelope {
            txid: 0,
            body: Reply::Failed {
                fatal: true,
                code: fail::MALFORMED,
                message: "this manager speaks version 2".to_string(),
            },
        };
        for v in OLDEST_READABLE_FAILED..=VERSION {
            let mut bytes = failed.encode_failed_as(v).unwrap();
            assert_eq!(bytes[4..6], v.to_le_bytes());
            bytes[4..6].copy_from_slice(&VERSION.to_le_bytes());
            assert_eq!(Envelope::<Reply>::decode(&bytes).unwrap(), failed);
        }
        assert_eq!(failed.encode_failed_as(VERSION + 1), None);
        assert_eq!(failed.encode_failed_as(0), None);
        let other = Envelope {
            txid: 0,
            body: Reply::Initialized,
        };
        assert_eq!(other.encode_failed_as(1), None);
    }

    proptest! {
        #[test]
        fn any_bytes_decode_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = Envelope::<Request>::decode(&bytes);
            let _ = Envelope::<Reply>::decode(&bytes);
        }

        #[test]
        fn mutated_requests_decode_without_panic(
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in any::<prop::sample::Index>(),
        ) {
            let config = TraceConfig {
                categories: vec!["a".to_string(), "kernel:*".to_string()],
                provider_specs: vec![ProviderSpec {
                    name: "p".to_string(),
                    buffer_size_megabytes_hint: 1,
                    categories: vec![],
                }],
                pids: Some(vec![1]),
                ..TraceConfig::default()
            };
            let mut bytes = Envelope { txid: 3, body: Request::InitializeTracing(config) }
                .encode()
                .unwrap();
            for (at, v) in flips {
                let i = at.index(bytes.len());
                bytes[i] = v;
            }
            let n = cut.index(bytes.len() + 1);
            let _ = Envelope::<Request>::decode(&bytes[..n]);
        }

        #[test]
        fn mutated_replies_decode_without_panic(
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        ) {
            let mut bytes = Envelope {
                txid: 3,
                body: Reply::StopResult(Ok(StopResult {
                    provider_stats: vec![ProviderStats::default()],
                    kernel: KernelStats {
                        counts: vec![(KernelCount::UsdtEvents, 1)],
                        dropped_per_cpu: vec![(0, 1)],
                        ..KernelStats::default()
                    },
                    ..StopResult::default()
                })),
            }
            .encode()
            .unwrap();
            for (at, v) in flips {
                let i = at.index(bytes.len());
                bytes[i] = v;
            }
            let _ = Envelope::<Reply>::decode(&bytes);
        }
    }
}
