//! The trace manager.
//!
//! - [`kernel`]: the kernel trace provider — where probes go, loading the
//!   eBPF programs for the enabled kernel categories, draining their ring
//!   buffers, and turning their events into FXT records
//!   ([`kernel::translate`]).
//! - [`procfs`]: every read of `/proc`: the processes and threads that
//!   exist, their names, credentials and memory maps.
//! - [`output`]: the merged FXT stream and per-provider string tables.
//! - [`session`]: one session's output and kernel provider, started and
//!   stopped as often as the client asks.
//! - [`service`]: the manager as a service: the socket providers register
//!   on and clients drive sessions through.
//! - [`client`]: the client side of the controller protocol.
//! - [`creds`]: probe files opened with the client's rights.
//! - [`userspace`]: userspace providers: registry, buffers, collection.
pub mod client;
pub mod clock;
pub mod creds;
pub mod kernel;
pub mod limits;
pub mod output;
pub mod procfs;
pub mod service;
pub mod session;
pub mod userspace;
pub mod window;
