//! The controller's messages: what a client asks ([`Request`]), what the
//! manager answers or announces ([`Reply`]), each in an [`Envelope`] with
//! its transaction id.

use alloc::string::String;
use alloc::vec::Vec;

use super::{
    ProviderStats, SessionState, StartError, StartOptions, Status, StopError, StopResult,
    TraceConfig,
};

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

/// What kind of session [`SessionInfo`] describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionKind {
    /// A recording a client drives (`trace-cli record`).
    Recording,
    /// The daemon's flight recorder: the newest window of events, kept in
    /// memory for snapshots.
    FlightRecorder,
}

impl SessionKind {
    /// The value on the wire.
    pub fn value(self) -> u8 {
        match self {
            SessionKind::Recording => 1,
            SessionKind::FlightRecorder => 2,
        }
    }

    /// The kind of a value on the wire.
    pub fn from_value(v: u8) -> Option<Self> {
        match v {
            1 => Some(SessionKind::Recording),
            2 => Some(SessionKind::FlightRecorder),
            _ => None,
        }
    }
}

/// A session that runs (`GetSessions`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    /// Recording or flight recorder.
    pub kind: SessionKind,
    /// The process of the client that owns it (0: the manager itself).
    pub owner_pid: i32,
    /// Its state (`started`, `stopped`...).
    pub state: String,
    /// The categories it records (empty: all).
    pub categories: Vec<String>,
    /// How long it has been recording, in nanoseconds.
    pub elapsed_ns: u64,
    /// Bytes written (a recording) or held (a flight recorder).
    pub bytes: u64,
    /// Kernel events lost.
    pub dropped: u64,
    /// A flight recorder's window, in nanoseconds (0 for a recording).
    pub window_ns: u64,
}

/// What a snapshot wrote (`Snapshot`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SnapshotResult {
    /// Bytes written.
    pub bytes: u64,
    /// Records written.
    pub records: u64,
}

/// What a client asks.
// A request is decoded once per message a client sends, a few per
// session: its size does not matter, and boxing the configuration would
// only complicate every use.
#[expect(
    clippy::large_enum_variant,
    reason = "one message per session: its size does not matter"
)]
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
    /// Write what the flight recorder holds now, as a whole trace, to the
    /// descriptor that travels beside the request; recording goes on.
    Snapshot,
    /// The sessions that run.
    GetSessions,
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
    /// A snapshot was written.
    Snapshot(SnapshotResult),
    /// The sessions that run.
    Sessions(Vec<SessionInfo>),
    /// The request failed; with `fatal`, the manager closes the connection.
    Failed {
        /// Whether the connection is closed after this.
        fatal: bool,
        /// What kind of failure (one of [`fail`](super::fail)).
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
