//! The trace manager.
//!
//! - [`kernel`]: the kernel trace provider — loads the eBPF programs for the
//!   enabled kernel categories and drains their ring buffer.
//! - [`kernel_records`]: turns kernel events into FXT records.
//! - [`procfs`]: the processes and threads that already exist.
//! - [`output`]: the merged FXT stream and per-provider string tables.
//! - [`session`]: one session's output and kernel provider, started and
//!   stopped as often as the client asks.
//! - [`service`]: the manager as a service: the socket providers register
//!   on and clients drive sessions through.
//! - [`client`]: the client side of the controller protocol.
//! - [`syscalls`]: system call names and argument descriptions.
//! - [`uprobes`]: where `--uprobe` probes go.
//! - [`creds`]: probe files opened with the client's rights.
//! - [`usdt`]: where `--usdt` probes are and how to read their arguments.
//! - [`userspace`]: userspace providers: registry, buffers, collection.
pub mod client;
pub mod clock;
pub mod creds;
pub mod kernel;
pub mod kernel_records;
pub mod limits;
pub mod output;
pub mod procfs;
pub mod service;
pub mod session;
pub mod syscalls;
pub mod uprobes;
pub mod usdt;
pub mod userspace;
