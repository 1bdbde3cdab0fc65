//! Several machines on one timeline.
//!
//! `trace-cli record --host` records the same selection on several
//! machines at once; this crate holds what makes their traces one:
//!
//! - [`clock`]: a remote machine's clock mapped onto the recording
//!   machine's from ping exchanges (the fastest of each burst, points
//!   interpolated so that drift is followed), with an error bound.
//! - [`ids`]: the ids each machine's processes, threads, CPUs, providers
//!   and packet sequences get in the merged trace, so that pid 1234 of two
//!   machines is two processes.
//! - [`remap`]: a machine's trace rewritten into the merged one.
//! - [`declare`]: the machines declared at the merged trace's start, for
//!   ui.perfetto.dev (a track per machine with its clock sync points) and
//!   for readers ([`read_machines`]).
//!
//! Why one FXT stream rather than several files in an archive: Perfetto
//! (v58 and later) reads a ZIP or TAR with a `perfetto_manifest` naming
//! each file's machine and clock offset, and attributes an FXT file's
//! processes and CPUs to its machine; but its FXT parser keeps the
//! timestamps written in the records (`fuchsia_trace_parser.cc` ignores the
//! converted time it is handed), so an offset in the manifest would not
//! move an FXT file's events. One stream with the times already mapped and
//! the ids kept apart opens in any Perfetto, and `trace-cli report`,
//! `query` and `check` read it as they read any trace.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod clock;
pub mod declare;
pub mod ids;
pub mod remap;

pub use clock::{ClockMap, Ping, SyncPoint};
pub use declare::{Machine, machine_of_cpu, machine_of_pid, read_machines, write_declarations};
pub use ids::{MachineIds, PID_STRIDE};
pub use remap::{RemapError, RemapSummary, Remapper};
