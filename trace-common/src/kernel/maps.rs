//! The eBPF object's maps, by name, and the counters of lost events.

#[cfg(doc)]
use super::{FILTER_CGROUPS, FILTER_PIDS, KernelLayout, UsdtSpec};

/// Name of the BPF ring buffer map every program writes its events into.
pub const MAP_EVENTS: &str = "EVENTS";

/// Name of the ring buffer the benchmarks' floor programs write into (one
/// page in the object, sized up only when the floor is attached).
pub const MAP_FLOOR_RING: &str = "FLOOR_RING";

/// Name of the one-entry array map holding the [`KernelLayout`].
pub const MAP_LAYOUT: &str = "LAYOUT";

/// Name of the per-CPU array map of `u64` counters, indexed by the
/// `COUNTER_*` constants.
pub const MAP_COUNTERS: &str = "COUNTERS";

/// Name of the hash map of followed thread ids (`u32` → `u8`, the value
/// unused) while [`KernelLayout::filter`] has [`FILTER_PIDS`]: userspace puts
/// the threads of the requested processes in it, and the programs add every
/// task a followed task creates and remove tasks that exit.
pub const MAP_FOLLOWED: &str = "FOLLOWED";

/// Most threads [`MAP_FOLLOWED`] holds.
pub const FOLLOWED_MAX: u32 = 65_536;

/// Name of the cgroup array (`BPF_MAP_TYPE_CGROUP_ARRAY`) of the selected
/// cgroup v2 directories while [`KernelLayout::filter`] has
/// [`FILTER_CGROUPS`]: userspace stores each one's file descriptor in the
/// first [`KernelLayout::cgroups`] slots, and the programs ask the kernel
/// whether the current task lies in one of them or below.
pub const MAP_CGROUPS: &str = "CGROUPS";

/// Most cgroups [`MAP_CGROUPS`] holds (how many `--cgroup`, `--unit` and
/// `--container` selections one recording takes).
pub const CGROUPS_MAX: u32 = 8;

/// Counter index: events lost because the ring buffer was full.
pub const COUNTER_RINGBUF_FULL: u32 = 0;

/// Counter index: events lost because the layout map was not filled in.
pub const COUNTER_NO_LAYOUT: u32 = 1;

/// Counter index: new tasks of followed processes that could not be
/// followed because [`MAP_FOLLOWED`] was full (their events are missing).
pub const COUNTER_FOLLOW_FULL: u32 = 2;

/// Number of entries in the [`MAP_COUNTERS`] map. Every counter counts lost
/// events (or, for [`COUNTER_FOLLOW_FULL`], lost threads).
pub const COUNTER_COUNT: u32 = 3;

/// Name of the per-CPU array (one entry) of [`SyscallStage`]s: on each
/// CPU, the whole calls not yet written and the entry of the call the
/// running task is in (with [`PAIR_SYSCALLS`](super::PAIR_SYSCALLS)).
pub const MAP_SYSCALL_STAGE: &str = "SYSCALL_STAGE";

/// Whole system calls a CPU keeps before writing them, in one ring-buffer
/// entry ([`SyscallStage::calls`]).
pub const STAGED_CALLS: usize = 8;

/// What a CPU keeps of system calls before writing them: the value of
/// [`MAP_SYSCALL_STAGE`]. Calls that returned where they were entered are
/// kept until [`STAGED_CALLS`] of them are written together as one
/// ring-buffer entry (the `SyscallEvent`s back to back), or until the
/// running task is switched out; the entry of a call in progress is kept
/// until its return, or is written alone when its task is switched out.
/// The staged calls always precede the entry in time.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyscallStage {
    /// Nonzero while `entry` holds a call not yet written.
    pub live: u32,
    /// How many of `calls` hold whole calls not yet written.
    pub staged: u32,
    /// The entry, as it is written when it goes out on its own.
    pub entry: super::SysEnterEvent,
    /// Whole calls, oldest first.
    pub calls: [super::SyscallEvent; STAGED_CALLS],
}

const _: () = assert!(size_of::<SyscallStage>() == 8 + 80 + 96 * STAGED_CALLS);

/// Name of the array of [`UsdtSpec`]s, indexed by the attach cookie.
pub const MAP_USDT_SPECS: &str = "USDT_SPECS";
