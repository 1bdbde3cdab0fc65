//! `kernel:profile`: a `cpu-clock` sample of whatever each CPU runs, with
//! its kernel and user stacks (attached once per CPU as a perf event
//! program). The idle task and the recorder itself are not sampled.

use core::ptr;

use aya_ebpf::{
    EbpfContext as _, helpers::bpf_get_current_pid_tgid, macros::perf_event,
    programs::PerfEventContext,
};
use trace_common::kernel::stack::{SOURCE_PROFILE, STACK_KERNEL_MODE};

use crate::follow::wanted_current;
use crate::ring::{layout, now};
use crate::stack::{KernelStack, StackInfo, stack_header, write_stack};

/// One sample.
#[perf_event]
pub fn profile(ctx: PerfEventContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    if tid == 0 || (pid_tgid >> 32) as u32 == layout.self_tgid || !wanted_current(layout, tid) {
        return 0;
    }
    // SAFETY: `ctx.ctx` is the sample's context; its `regs` are the
    // interrupted registers, readable by the program.
    let cs = unsafe { ptr::read_volatile(ptr::addr_of!((*ctx.ctx).regs.cs)) };
    let info = StackInfo {
        header: stack_header(ts, pid_tgid),
        source: SOURCE_PROFILE,
        flags: if cs & 3 == 3 { 0 } else { STACK_KERNEL_MODE },
        id: 0,
        start_ts: ts,
        end_ts: ts,
        other_tid: 0,
        other_tgid: 0,
    };
    write_stack(ctx.as_ptr(), layout, &info, KernelStack::Walk, true);
    0
}
