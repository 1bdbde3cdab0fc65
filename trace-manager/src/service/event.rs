//! What the manager's loop hears from the tasks and threads working for
//! it: connections, clients' requests, and the results of work done
//! elsewhere (a session's output drained, a snapshot written, a setup
//! resolved or loaded).

use std::os::fd::OwnedFd;

use trace_common::controller::{Reply, TraceConfig};
use trace_common::provider::control::ProviderMessage;

use super::config::KernelMemory;
use crate::limits::Slot;
use crate::session::RecordConfig;

/// What the loop hears from connection tasks.
pub(crate) enum Event {
    /// A provider registered on a new connection.
    Provider {
        fd: OwnedFd,
        pid: i32,
        register: ProviderMessage,
        slot: Slot,
    },
    /// A new client: its id and a descriptor to answer on.
    Client { id: u64, fd: OwnedFd, pid: i32 },
    /// A client's message and the descriptors that came with it.
    Request {
        id: u64,
        bytes: Vec<u8>,
        fds: Vec<OwnedFd>,
    },
    /// A client's connection closed.
    Closed { id: u64 },
    /// A terminated session's output has been written out.
    Drained { id: u64, txid: u32, reply: Reply },
    /// A snapshot was written (or given up) on another thread: the answer
    /// to its request.
    SnapshotWritten { id: u64, txid: u32, reply: Reply },
    /// An InitializeTracing's probes and tracepoints, resolved on a thread.
    Prepared {
        id: u64,
        txid: u32,
        prepared: Box<Prepared>,
    },
    /// A StartTracing's kernel provider, loaded on a thread.
    Loaded {
        id: u64,
        txid: u32,
        kernel: Box<Result<crate::kernel::KernelProvider, crate::kernel::KernelError>>,
    },
}

/// What a thread resolved for an InitializeTracing.
pub(super) struct Prepared {
    pub(super) config: TraceConfig,
    pub(super) output: OwnedFd,
    pub(super) kernel: KernelMemory,
    pub(super) record: Result<RecordConfig, String>,
}
