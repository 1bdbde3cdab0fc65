//! The contract between a userspace trace provider and the trace manager.
//!
//! - [`buffer`]: the shared trace buffer (a sealed memfd): its header, how it
//!   is split into a durable and two rolling buffers, and the walk the manager
//!   uses to copy whole records out of it without trusting anything in it.
//! - [`fifo`]: the 16-byte packets both sides exchange while tracing
//!   (STARTED, STOPPED, SAVE_BUFFER, BUFFER_SAVED, ALERT).
//! - [`control`]: the messages on the registration socket (register,
//!   initialize, start, stop, terminate).
//! - [`clock`]: how a provider's timestamps are put on the kernel's
//!   CLOCK_BOOTTIME timeline.

pub mod buffer;
pub mod clock;
pub mod control;
pub mod fifo;

/// Environment variable naming the manager's registration socket.
pub const SOCKET_ENV: &str = "TRACE_MANAGER_SOCKET";

/// The registration socket used when [`SOCKET_ENV`] is not set.
pub const DEFAULT_SOCKET_PATH: &str = "/run/trace-manager/provider.sock";

/// The manager's socket, which providers and clients connect to and the
/// manager listens on: [`SOCKET_ENV`], else [`DEFAULT_SOCKET_PATH`].
#[cfg(feature = "std")]
pub fn socket_path() -> std::path::PathBuf {
    std::env::var_os(SOCKET_ENV)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(DEFAULT_SOCKET_PATH))
}

/// The longest provider name, in bytes (fuchsia.tracing.provider).
pub const MAX_PROVIDER_NAME_LEN: usize = 100;

/// The most categories in one list (fuchsia.tracing.provider).
pub const MAX_CATEGORIES: usize = 100;

/// The longest category name, in bytes (fuchsia.tracing.provider).
pub const MAX_CATEGORY_NAME_LEN: usize = 100;

/// What a provider does when its buffer fills (fuchsia.tracing.provider).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BufferingMode {
    /// One buffer; when it is full further records are dropped and counted.
    Oneshot,
    /// Two rolling buffers that alternate; the oldest records are overwritten.
    Circular,
    /// Two rolling buffers; a full one is saved by the manager while the
    /// other fills; records are dropped while neither is free.
    Streaming,
}

impl BufferingMode {
    /// The value in the buffer header (§7.1: 0 oneshot, 1 circular, 2 streaming).
    pub const fn header_value(self) -> u8 {
        match self {
            BufferingMode::Oneshot => 0,
            BufferingMode::Circular => 1,
            BufferingMode::Streaming => 2,
        }
    }

    /// The mode of a buffer header value.
    pub const fn from_header_value(v: u8) -> Option<Self> {
        match v {
            0 => Some(BufferingMode::Oneshot),
            1 => Some(BufferingMode::Circular),
            2 => Some(BufferingMode::Streaming),
            _ => None,
        }
    }

    /// The lower-case name used on command lines.
    pub const fn name(self) -> &'static str {
        match self {
            BufferingMode::Oneshot => "oneshot",
            BufferingMode::Circular => "circular",
            BufferingMode::Streaming => "streaming",
        }
    }

    /// The mode named `name` (`oneshot`, `circular`, `streaming`).
    pub fn from_name(name: &str) -> Option<Self> {
        [
            BufferingMode::Oneshot,
            BufferingMode::Circular,
            BufferingMode::Streaming,
        ]
        .into_iter()
        .find(|m| m.name() == name)
    }
}

/// How the buffer is cleared when tracing starts (fuchsia.tracing.provider).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BufferDisposition {
    /// Clear everything, durable records included; earlier string and
    /// thread references become invalid.
    ClearEntire,
    /// Clear the rolling buffers and keep the durable records.
    ClearNondurable,
    /// Keep everything and go on where the last run stopped.
    Retain,
}

impl BufferDisposition {
    /// The protocol value (1, 2, 3 as in fuchsia.tracing.provider).
    pub const fn value(self) -> u8 {
        match self {
            BufferDisposition::ClearEntire => 1,
            BufferDisposition::ClearNondurable => 2,
            BufferDisposition::Retain => 3,
        }
    }

    /// The disposition of a protocol value.
    pub const fn from_value(v: u8) -> Option<Self> {
        match v {
            1 => Some(BufferDisposition::ClearEntire),
            2 => Some(BufferDisposition::ClearNondurable),
            3 => Some(BufferDisposition::Retain),
            _ => None,
        }
    }
}
