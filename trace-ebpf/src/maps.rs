//! Every map of the object. Userspace finds them by these names
//! (`trace_common::kernel::MAP_*`); it sizes `EVENTS` and `USDT_SPECS` and
//! fills `LAYOUT`, `FOLLOWED`, `CGROUPS` and `USDT_SPECS` before attaching.

use aya_ebpf::{
    btf_maps::{ArrayOfMaps, RingBuf},
    macros::{btf_map, map},
    maps::{Array, CgroupArray, HashMap, PerCpuArray},
};
use trace_common::kernel::stack::{STACK_EVENT_MAX, STACK_SLOTS};
use trace_common::kernel::{
    CGROUPS_MAX, COMM_LEN, COUNTER_COUNT, FOLLOWED_MAX, KernelLayout, MAX_RECORD_BYTES,
    SyscallStage, UsdtSpec,
};

/// Size of the scratch copy: the largest masked offset plus the widest read
/// (16 bytes), rounded up.
pub(crate) const SCRATCH_LEN: usize = MAX_RECORD_BYTES as usize + 2 * COMM_LEN;

/// A CPU's ring buffer. The size is the template's: userspace creates each
/// CPU's ring with the size it computed from `-b`.
pub(crate) type CpuRing = RingBuf<u8, { 64 * 1024 }>;

/// Events for userspace: the ring buffer of each CPU, by CPU id. The
/// length is a placeholder: userspace sets it to the number of possible
/// CPUs before loading and fills in the online CPUs' rings.
#[btf_map]
pub(crate) static EVENTS: ArrayOfMaps<CpuRing, 4096> = ArrayOfMaps::new();

/// Where the tracepoint fields are, filled in by userspace before attaching.
#[map(name = "LAYOUT")]
pub(crate) static LAYOUT: Array<KernelLayout> = Array::with_max_entries(1, 0);

/// Followed thread ids while a pid or cgroup filter is set (the value is
/// unused).
#[map(name = "FOLLOWED")]
pub(crate) static FOLLOWED: HashMap<u32, u8> = HashMap::with_max_entries(FOLLOWED_MAX, 0);

/// The selected cgroups while a cgroup filter is set, in the first
/// `KernelLayout::cgroups` slots.
#[map(name = "CGROUPS")]
pub(crate) static CGROUPS: CgroupArray = CgroupArray::with_max_entries(CGROUPS_MAX, 0);

/// Lost-event counters, per CPU, indexed by `COUNTER_*`.
#[map(name = "COUNTERS")]
pub(crate) static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(COUNTER_COUNT, 0);

/// On each CPU, the whole system calls not yet written and the entry of
/// the call the running task is in (`PAIR_SYSCALLS`); read by userspace at
/// the stop.
#[map(name = "SYSCALL_STAGE")]
pub(crate) static SYSCALL_STAGE: PerCpuArray<SyscallStage> = PerCpuArray::with_max_entries(1, 0);

/// Where the arguments of each USDT probe site are, indexed by the site's
/// attach cookie. Userspace sizes it (one entry per site) and fills it before
/// attaching.
#[map(name = "USDT_SPECS")]
pub(crate) static USDT_SPECS: Array<UsdtSpec> = Array::with_max_entries(1, 0);

/// Per-CPU working memory of a program run.
#[repr(C, align(8))]
pub(crate) struct Scratch {
    /// Events written on this CPU, to space out the ring fill-level checks.
    pub(crate) events: u32,
    /// Padding.
    pub(crate) reserved: u32,
    /// The raw tracepoint record, copied.
    pub(crate) record: [u8; SCRATCH_LEN],
}

/// One `Scratch` per CPU. Programs do not nest on a CPU, so a run owns it.
#[map(name = "SCRATCH")]
pub(crate) static SCRATCH: PerCpuArray<Scratch> = PerCpuArray::with_max_entries(1, 0);

/// One stack event being assembled.
#[repr(C, align(8))]
pub(crate) struct StackScratch {
    bytes: [u8; STACK_EVENT_MAX],
}

/// Per-CPU scratch slots, one per nesting level ([`STACK_SLOTS`]): a
/// sample interrupting a program that writes a stack takes the next one.
#[map(name = "STACK_SCRATCH")]
static STACK_SCRATCH: PerCpuArray<StackScratch> = PerCpuArray::with_max_entries(STACK_SLOTS, 0);

/// The first byte of this CPU's scratch slot `slot`.
#[inline(always)]
pub(crate) fn scratch(slot: u32) -> Option<*mut u8> {
    STACK_SCRATCH.get_ptr_mut(slot).map(|s| s.cast::<u8>())
}
