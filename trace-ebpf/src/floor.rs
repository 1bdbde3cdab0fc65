//! Programs that do nothing, one per hook the provider's hot paths use:
//! what the kernel charges for running a program there at all, the floor
//! the benchmarks compare the real programs with (`cargo xtask bench`).
//! Never attached while recording.

use aya_ebpf::{macros::btf_tracepoint, programs::BtfTracePointContext};

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

/// `sched_wakeup`, doing nothing.
#[btf_tracepoint(function = "sched_wakeup")]
pub fn floor_sched_wakeup(_ctx: BtfTracePointContext) -> i32 {
    0
}

/// `sched_wakeup_new`, doing nothing.
#[btf_tracepoint(function = "sched_wakeup_new")]
pub fn floor_sched_wakeup_new(_ctx: BtfTracePointContext) -> i32 {
    0
}
