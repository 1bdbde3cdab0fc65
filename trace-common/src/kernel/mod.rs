//! Fixed-layout data shared by the eBPF kernel provider (`trace-ebpf`) and the
//! manager that loads it: the only definition of every byte layout that
//! crosses the kernel/userspace boundary.
//!
//! Two directions:
//!
//! - Userspace → eBPF: [`KernelLayout`], one value in the [`MAP_LAYOUT`] array
//!   map, says where each tracepoint field lives in the raw tracepoint record.
//!   The manager parses the offsets from
//!   `/sys/kernel/tracing/events/<group>/<name>/format` at load time and fills
//!   the map before attaching any program, so no kernel's offsets are compiled
//!   in. A field this kernel lacks is marked absent ([`FieldLoc::ABSENT`]) and
//!   the programs write all bits set ([`ABSENT_ID`], [`ABSENT_INT`]) or an
//!   empty string for it.
//! - eBPF → userspace: one `#[repr(C)]` event per ring-buffer entry in the
//!   [`MAP_EVENTS`] ring buffer, each starting with an [`EventHeader`].
//!   [`parse`] decodes one entry without trusting it.
//!
//! Every struct here is plain data (integers and byte arrays, no implicit
//! padding), so any bit pattern is a valid value.
//!
//! The parts:
//!
//! - [`layouts`]: [`FieldLoc`], the per-tracepoint `*Layout` structs and
//!   [`KernelLayout`] (userspace → eBPF).
//! - [`programs`]: every program in the object, the tracepoint it attaches
//!   to, its BTF variant and the `MARK_*` offsets those patch.
//! - [`maps`]: the maps' names and the counters.
//! - [`events`]: [`EventHeader`], one struct per event kind, [`EventKind`],
//!   [`KernelEvent`] and [`parse`] (eBPF → userspace), all generated from
//!   one table of kinds.
//! - [`usdt`]: where a USDT probe site's arguments are ([`UsdtSpec`]).
//! - [`tracepoint`]: tracepoints selected by name, their configuration
//!   and variable-length event.
//! - [`stack`]: stacks (profile, off-CPU, wakers, probes), their
//!   configuration and variable-length event.
//! - [`python`]: the interpreters the stack programs read Python frames
//!   of, and those frames.
//!
//! Everything is re-exported here: users name `trace_common::kernel::X`.

pub mod entry;
pub mod events;
pub mod layouts;
pub mod maps;
pub mod programs;
pub mod python;
pub mod stack;
pub mod tracepoint;
pub mod usdt;

pub use self::entry::*;
pub use self::events::*;
pub use self::layouts::*;
pub use self::maps::*;
pub use self::programs::*;
pub use self::usdt::*;

#[cfg(test)]
mod tests;
