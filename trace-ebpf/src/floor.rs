//! Programs that do nothing, one per hook the provider's hot paths use:
//! what the kernel charges for running a program there at all, the floor
//! the benchmarks compare the real programs with (`cargo xtask bench`);
//! and programs that do one thing on the system call hooks (read the clock,
//! ask for the task's ids, store a word) and on the scheduling hooks (read
//! the clock; read it and write an event-sized entry into a ring buffer),
//! to tell what each step of the real programs costs. Never attached while
//! recording.

use aya_ebpf::{
    bindings::BPF_RB_NO_WAKEUP,
    helpers::bpf_get_current_pid_tgid,
    macros::{btf_tracepoint, map},
    maps::{PerCpuArray, RingBuf},
    programs::BtfTracePointContext,
};
use trace_common::kernel::SchedSwitchEvent;

use crate::ring::now;

/// `sys_enter`, doing nothing.
#[btf_tracepoint(function = "sys_enter")]
pub fn floor_sys_enter(_ctx: BtfTracePointContext) -> i32 {
    0
}

/// `sys_exit`, doing nothing.
#[btf_tracepoint(function = "sys_exit")]
pub fn floor_sys_exit(_ctx: BtfTracePointContext) -> i32 {
    0
}

/// `sched_switch`, doing nothing.
#[btf_tracepoint(function = "sched_switch")]
pub fn floor_sched_switch(_ctx: BtfTracePointContext) -> i32 {
    0
}

/// `sched_waking`, doing nothing.
#[btf_tracepoint(function = "sched_waking")]
pub fn floor_sched_wakeup(_ctx: BtfTracePointContext) -> i32 {
    0
}

/// `sched_wakeup_new`, doing nothing.
#[btf_tracepoint(function = "sched_wakeup_new")]
pub fn floor_sched_wakeup_new(_ctx: BtfTracePointContext) -> i32 {
    0
}

/// Where the measuring programs below put what they read, so that the
/// reads are kept.
#[map(name = "FLOOR_SINK")]
static FLOOR_SINK: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// Stores `value` in this CPU's sink.
#[inline(always)]
fn keep(value: u64) {
    if let Some(slot) = FLOOR_SINK.get_ptr_mut(0) {
        // SAFETY: `slot` is this CPU's value; a store of a whole `u64`.
        unsafe { *slot = value };
    }
}

/// `sys_enter`, reading the clock (what one clock read costs above the
/// floor and the sink's store).
#[btf_tracepoint(function = "sys_enter")]
pub fn floor_clock_sys_enter(_ctx: BtfTracePointContext) -> i32 {
    keep(now());
    0
}

/// `sys_exit`, reading the clock.
#[btf_tracepoint(function = "sys_exit")]
pub fn floor_clock_sys_exit(_ctx: BtfTracePointContext) -> i32 {
    keep(now());
    0
}

/// `sys_enter`, asking for the current task's ids.
#[btf_tracepoint(function = "sys_enter")]
pub fn floor_ids_sys_enter(_ctx: BtfTracePointContext) -> i32 {
    keep(bpf_get_current_pid_tgid());
    0
}

/// `sys_exit`, asking for the current task's ids.
#[btf_tracepoint(function = "sys_exit")]
pub fn floor_ids_sys_exit(_ctx: BtfTracePointContext) -> i32 {
    keep(bpf_get_current_pid_tgid());
    0
}

/// `sys_enter`, storing a constant in the sink (what the store costs).
#[btf_tracepoint(function = "sys_enter")]
pub fn floor_store_sys_enter(_ctx: BtfTracePointContext) -> i32 {
    keep(1);
    0
}

/// `sys_exit`, storing a constant in the sink.
#[btf_tracepoint(function = "sys_exit")]
pub fn floor_store_sys_exit(_ctx: BtfTracePointContext) -> i32 {
    keep(1);
    0
}

/// `sched_switch`, reading the clock (what the clock read every scheduling
/// event needs costs above the floor).
#[btf_tracepoint(function = "sched_switch")]
pub fn floor_clock_sched_switch(_ctx: BtfTracePointContext) -> i32 {
    keep(now());
    0
}

/// `sched_waking`, reading the clock.
#[btf_tracepoint(function = "sched_waking")]
pub fn floor_clock_sched_wakeup(_ctx: BtfTracePointContext) -> i32 {
    keep(now());
    0
}

/// `sched_wakeup_new`, reading the clock.
#[btf_tracepoint(function = "sched_wakeup_new")]
pub fn floor_clock_sched_wakeup_new(_ctx: BtfTracePointContext) -> i32 {
    keep(now());
    0
}

/// Where the ring-writing programs below write: one page in the object;
/// the floor sizes it to hold a whole benchmark run, and nothing reads it.
#[map(name = "FLOOR_RING")]
static FLOOR_RING: RingBuf = RingBuf::with_byte_size(4096, 0);

/// Reads the clock and writes it in a context switch's worth of ring
/// buffer (reserved, its first word written, submitted without waking a
/// reader): what the real programs' ring-buffer write costs above the
/// clock read.
#[inline(always)]
fn ring_write() {
    let ts = now();
    if let Some(mut entry) = FLOOR_RING.reserve::<SchedSwitchEvent>(0) {
        // SAFETY: the entry is reserved and at least 8-aligned; its first
        // word is written before it is submitted.
        unsafe { entry.as_mut_ptr().cast::<u64>().write(ts) };
        entry.submit(BPF_RB_NO_WAKEUP.into());
    }
}

/// `sched_switch`, reading the clock and writing an entry.
#[btf_tracepoint(function = "sched_switch")]
pub fn floor_ring_sched_switch(_ctx: BtfTracePointContext) -> i32 {
    ring_write();
    0
}

/// `sched_waking`, reading the clock and writing an entry.
#[btf_tracepoint(function = "sched_waking")]
pub fn floor_ring_sched_wakeup(_ctx: BtfTracePointContext) -> i32 {
    ring_write();
    0
}

/// `sched_wakeup_new`, reading the clock and writing an entry.
#[btf_tracepoint(function = "sched_wakeup_new")]
pub fn floor_ring_sched_wakeup_new(_ctx: BtfTracePointContext) -> i32 {
    ring_write();
    0
}
