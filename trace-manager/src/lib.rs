//! The trace manager.
//!
//! # The face for clients
//!
//! What a client of the manager needs is re-exported at the crate's root,
//! and `trace-cli` uses nothing else (`cargo xtask test` checks it, and
//! keeps a snapshot of this crate's public items in
//! `xtask/public-api/trace-manager.txt`):
//!
//! - run a manager in the process ([`Manager`]) or talk to the daemon
//!   ([`Controller`] at [`socket_path`]);
//! - what a recording may ask: [`kernel_categories`], [`is_kernel_trigger`],
//!   [`MAX_SAMPLE_HZ`], whether this process may load the kernel provider
//!   ([`missing_privileges`]);
//! - the kernel's tracepoints by name ([`tracefs_root`],
//!   [`tracepoint_catalog`], [`tracepoint_fields`]);
//! - selecting by cgroup: the cgroup v2 hierarchy ([`CgroupHierarchy`]), a
//!   systemd unit's cgroup ([`find_unit`]), containers by their cgroups
//!   ([`list_containers`], [`find_container`]) and what labels a process
//!   ([`ProcessLabels`]);
//! - the trace's clock ([`boottime_ns`]), the kernel provider's id and name
//!   in a trace, and a flight-recorder [`Window`] of a stream.
//!
//! # The parts
//!
//! - [`kernel`]: the kernel trace provider — where probes go, loading the
//!   eBPF programs for the enabled kernel categories, draining their ring
//!   buffers ([`kernel::KernelProvider`]), and what becomes of their events
//!   in a session ([`kernel::recorder`]: the buffering policy, the
//!   translation into FXT records in [`kernel::translate`]).
//! - [`cgroup`]: the cgroup v2 hierarchy, a process's cgroup, and the
//!   containers and services cgroup paths name.
//! - [`procfs`]: every read of `/proc`: the processes and threads that
//!   exist, their names, credentials and memory maps.
//! - [`output`]: the merged FXT stream and per-provider string tables.
//! - [`session`]: one session's output and its kernel recorder, started and
//!   stopped as often as the client asks.
//! - [`service`]: the manager as a service: the socket providers register
//!   on and clients drive sessions through.
//! - [`client`]: the client side of the controller protocol.
//! - [`creds`]: probe files opened with the client's rights.
//! - [`userspace`]: userspace providers: registry, buffers, collection.
//! - [`window`]: the newest stretch of a stream, cut to stand alone.
//! - [`limits`]: what the daemon lets each client and session take.
//! - [`machine`]: what this kernel and machine allow a recording
//!   (`trace-cli doctor`).
//!
//! The parts stay public for the manager's own tools (benchmarks, replay)
//! and end-to-end tests.

#![deny(missing_docs)]

pub mod cgroup;
pub mod client;
pub mod clock;
pub mod creds;
pub mod kernel;
pub mod limits;
pub mod machine;
pub mod output;
pub mod procfs;
pub mod service;
pub mod session;
pub mod userspace;
pub mod window;

pub use cgroup::container::{
    Container, Runtime as ContainerRuntime, containers as list_containers, find_container,
    find_unit,
};
pub use cgroup::{CgroupError, Hierarchy as CgroupHierarchy, ProcessLabels};
pub use client::{ClientError, Controller};
pub use clock::boottime_ns;
pub use kernel::perf_probe::{
    detaching as probes_detaching, wait_detached as wait_probes_detached,
};
pub use kernel::privileges::missing as missing_privileges;
pub use kernel::profile::MAX_SAMPLE_HZ;
pub use kernel::recorder::{KERNEL_PROVIDER_ID, KERNEL_PROVIDER_NAME, kernel_categories};
pub use kernel::tracefs::tracefs_root;
pub use kernel::tracepoints::field::{Field as TracepointField, FieldKind};
pub use kernel::tracepoints::{
    TracepointError, catalog as tracepoint_catalog, fields as tracepoint_fields,
};
pub use kernel::translate::is_kernel_trigger;
pub use kernel::verify::ProgramVerdict;
pub use machine::{
    Ability, Examination, Finding, Status as FindingStatus, examine as examine_machine,
};
pub use procfs::{process_exists, unix_socket_listening};
pub use service::{Manager, ManagerError};
pub use userspace::{UserspaceError, socket_path};
pub use window::{Window, Written};
