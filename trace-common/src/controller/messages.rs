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
