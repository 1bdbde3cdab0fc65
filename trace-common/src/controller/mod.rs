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
//! message or a [`ControlError`](crate::provider::control::ControlError).

mod codec;
mod config;
mod errors;
mod messages;
mod stats;

pub use codec::{is_controller_message, kind, provider_stats_page};
pub use config::{FxtVersion, ProviderSpec, StackOptions, StartOptions, TraceConfig};
pub use errors::{SessionState, StartError, StopError, fail};
pub use messages::{
    Envelope, ProviderInfo, Reply, Request, SessionInfo, SessionKind, SnapshotResult,
};
pub use stats::{KernelCount, KernelStats, ProviderProgress, ProviderStats, Status, StopResult};

/// First word of every controller message ("TMCC" in memory).
pub const MAGIC: u32 = 0x4343_4D54;

/// The controller protocol version. 2: the stop result says how many
/// providers took part (`providers_total`) and [`Request::GetProviderStats`]
/// pages through those one message did not hold. 3: the kernel's record
/// counts are typed ([`KernelCount`]), not named by strings. 4: the trace
/// configuration says how stacks are recorded ([`StackOptions`]). 5: it
/// carries kernel triggers (`TraceConfig::triggers`), and
/// [`Request::Snapshot`] and [`Request::GetSessions`] exist. 6: it
/// carries a cgroup selection (`TraceConfig::cgroups`).
pub const VERSION: u16 = 6;

/// The oldest version whose [`Reply::Failed`] is laid out as this one's: a
/// manager tells a client of such a version that it does not speak it in a
/// message that client can read ([`Envelope::<Reply>::encode_failed_as`]).
pub const OLDEST_READABLE_FAILED: u16 = 1;

/// The largest message, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// The most providers a list holds (as `vector<ProviderInfo>:100`).
pub const MAX_PROVIDERS: usize = 100;
/// Sessions listed in one reply at most.
pub const MAX_SESSIONS: usize = 64;

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
