//! The trace manager.
//!
//! - [`kernel`]: the kernel trace provider — loads the eBPF programs for the
//!   enabled kernel categories and drains their ring buffer.
//! - [`kernel_records`]: turns kernel events into FXT records.
//! - [`procfs`]: the processes and threads that already exist.
//! - [`output`]: the merged FXT stream and per-provider string tables.
//! - [`recording`]: one recording session run in the calling process.
//! - [`syscalls`]: system call names and argument descriptions.
//! - [`uprobes`]: where `--uprobe` probes go.
//! - [`usdt`]: where `--usdt` probes are and how to read their arguments.
//! - [`userspace`]: userspace providers: registry, buffers, collection.
pub mod kernel;
pub mod kernel_records;
pub mod output;
pub mod procfs;
pub mod recording;
pub mod syscalls;
pub mod uprobes;
pub mod usdt;
pub mod userspace;
