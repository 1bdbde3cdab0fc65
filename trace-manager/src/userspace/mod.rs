//! Userspace trace providers: the registration socket, each provider's
//! shared buffer and FIFO, and collecting their records into the output.
//!
//! A provider connects to the registration socket (`SOCK_SEQPACKET`) and
//! registers; its pid comes from `SO_PEERCRED`. For a trace the manager
//! creates a memfd of the configured size, seals it (no shrinking, no
//! growing, no more seals) so the provider cannot make the manager's mapping
//! fault, maps it read-only, and passes it with the provider's end of a
//! `SOCK_SEQPACKET` socket pair that carries the 16-byte FIFO packets.
//!
//! Socket permissions: when a group named `tracing` exists, the socket is
//! `0660 root:tracing` (and a folder the manager creates `0750`), so members
//! of that group can have their programs traced and nobody else can connect;
//! without that group the socket is `0600`, for root's programs only.
//!
//! By role: `socket` is the registration socket, `buffer` a provider's
//! sealed buffer, `provider` a provider and what the manager sends it,
//! `registry` registration and what providers' sockets say, `lifecycle` the
//! session of every provider within the memory budget, `stats` progress and
//! numbers, [`collect`] copying records into the output, [`namespace`] the
//! ids of a provider in another PID namespace mapped to the host's.

mod buffer;
pub mod collect;
mod lifecycle;
pub mod namespace;
mod provider;
mod registry;
mod socket;
mod stats;

use std::os::fd::OwnedFd;
use std::path::PathBuf;

use thiserror::Error;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use trace_common::provider::BufferingMode;
use trace_common::provider::fifo::Packet;

use crate::output::OutputError;
pub use collect::CollectStats;
pub use registry::Registry;
pub use socket::Listener;

/// Registers an owned descriptor with the reactor.
pub(crate) fn async_fd(fd: OwnedFd) -> std::io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: an OwnedFd is an open descriptor that stays open, and its
    // as_raw_fd never changes, for as long as the AsyncFd owns it.
    unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.map_err(|e| e.into_parts().1)
}

/// Why the userspace side failed.
#[derive(Debug, Error)]
pub enum UserspaceError {
    /// The registration socket could not be set up.
    #[error("registration socket {path}: {source}")]
    Socket {
        /// The socket path.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// Another manager listens on the socket.
    #[error("another trace manager is listening on {0}")]
    Busy(PathBuf),
    /// The output could not be written.
    #[error(transparent)]
    Output(#[from] OutputError),
}

pub use trace_common::provider::socket_path;

/// What to trace in userspace providers during a session.
#[derive(Clone, Debug)]
pub struct UserspaceConfig {
    /// Buffering mode of every provider.
    pub mode: BufferingMode,
    /// Buffer size of every provider, in bytes.
    pub buffer_bytes: u64,
    /// Buffer sizes of providers by name.
    pub overrides: Vec<(String, u64)>,
    /// Categories of providers by name, instead of `categories`.
    pub category_overrides: Vec<(String, Vec<String>)>,
    /// Enabled categories (empty: all), as sent to providers.
    pub categories: Vec<String>,
    /// Bytes the providers' buffers may take together in this session (see
    /// [`crate::limits`]). When the providers registered at the start ask
    /// for more together, each gets the same share of what it asked for
    /// (never less than [`MIN_PROVIDER_BUFFER`]); a provider that registers
    /// later gets the same share if it fits, else what is left; when not
    /// even [`MIN_PROVIDER_BUFFER`] is left, a provider is left out of the
    /// session.
    ///
    /// [`MIN_PROVIDER_BUFFER`]: crate::limits::MIN_PROVIDER_BUFFER
    pub budget: u64,
    /// Empty: every provider takes part. Else only providers whose process
    /// is in one of these cgroups (paths from the cgroup v2 hierarchy's
    /// root) or below one, when the session begins or when they register.
    pub cgroups: Vec<String>,
}

/// A registered provider, as listed by `trace-cli providers`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderInfo {
    /// Its id in traces.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// Its process id, from the socket.
    pub pid: i32,
    /// Where it is in the protocol.
    pub state: &'static str,
    /// The categories it declared when it registered.
    pub categories: Vec<String>,
}

/// A provider's numbers in a session.
#[derive(Clone, Debug)]
pub struct ProviderStats {
    /// Its id in traces.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// Its process id.
    pub pid: i32,
    /// What collection did.
    pub collect: CollectStats,
    /// It answered the last start.
    pub started: bool,
    /// It violated the protocol, or went away, and was disconnected.
    pub aborted: bool,
}

impl ProviderStats {
    /// The numbers as the controller protocol carries them.
    pub fn to_controller(&self) -> trace_common::controller::ProviderStats {
        trace_common::controller::ProviderStats {
            id: self.id,
            name: self.name.clone(),
            pid: self.pid,
            records_written: self.collect.records,
            bytes_written: self.collect.bytes,
            records_dropped: self.collect.dropped + self.collect.rejected,
            buffer_wrapped_count: self.collect.wraps,
            percentage_durable_buffer_used: self.collect.usage_percent,
            started: self.started,
            aborted: self.aborted,
        }
    }
}

/// Something a provider's sockets said.
pub struct Note {
    id: u32,
    /// For FIFO packets: the trace they belong to (packets of an ended
    /// trace still queued are ignored).
    trace: u64,
    what: NoteKind,
}

/// The most providers registered at once; more are refused.
pub const MAX_REGISTERED: usize = 1000;

/// The providers that may be registered at once: [`MAX_REGISTERED`] in
/// all, a quarter of them for one user other than root, an eighth kept
/// for root's. A refused provider's connection is closed before it is
/// registered (it tries again later, waiting longer each time).
pub const PROVIDER_QUOTA: crate::limits::Quota = crate::limits::Quota {
    what: "providers registered",
    total: MAX_REGISTERED,
    per_user: MAX_REGISTERED / 4,
};

enum NoteKind {
    Packet(Packet),
    Closed,
}

fn io(e: nix::Error) -> std::io::Error {
    std::io::Error::from_raw_os_error(e as i32)
}
