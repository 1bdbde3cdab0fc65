//! `kernel:sched`: context switches and wake-ups, from the classic
//! tracepoints and from their BTF variants.

use core::hint::black_box;
use core::mem::MaybeUninit;
use core::ptr;

use aya_ebpf::{
    macros::{btf_tracepoint, tracepoint},
    programs::{BtfTracePointContext, TracePointContext},
};
use trace_common::kernel::{
    ABSENT_ID, COMM_LEN, EventKind, KernelLayout, MARK_TASK_CPU, MARK_TASK_EXIT_STATE,
    MARK_TASK_PID, MARK_TASK_PRIO, MARK_TASK_TGID, SchedSwitchEvent, SchedWakeupEvent,
    SchedWakeupLayout, WAKEUP_NEW,
};

use crate::follow::{current_wanted, forget_exited, remember_current, wanted, wanted_current};
use crate::record::Record;
use crate::ring::{header, layout, now, reserve, wakeup_flags};
use crate::task::{field, task_comm};

/// The kernel priority the idle task reports.
const IDLE_PRIO: i32 = 120;

/// `sched:sched_switch`.
#[tracepoint]
pub fn sched_switch(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let l = &layout.sched_switch;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let Some((prev_wanted, next_wanted)) =
        switch_wanted(layout, r.id(&l.prev_pid), r.id(&l.next_pid))
    else {
        return 0;
    };
    let prev_state = r.int(&l.prev_state) as i32;
    forget_exited(layout, r.id(&l.prev_pid), prev_state);
    let Some(mut entry) = reserve::<SchedSwitchEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SchedSwitchEvent>() bytes; every field is written before
    // the entry is submitted.
    unsafe {
        (*e).header = header(EventKind::Switch, ts);
        r.comm(&l.prev_comm, ptr::addr_of_mut!((*e).prev_comm));
        r.comm(&l.next_comm, ptr::addr_of_mut!((*e).next_comm));
        (*e).prev_pid = r.id(&l.prev_pid);
        (*e).prev_prio = r.i32(&l.prev_prio);
        (*e).next_pid = r.id(&l.next_pid);
        (*e).next_prio = r.i32(&l.next_prio);
        (*e).prev_state = prev_state;
        (*e).next_tgid = ABSENT_ID;
        hide_unfollowed(e, prev_wanted, next_wanted);
    }
    r.submit(layout, entry);
    0
}

/// Whether the task `prev` switched out (the current one) and the task
/// `next` switched in are followed; `None` when neither is (the switch is
/// not recorded). Under a cgroup filter, remembers `prev`'s membership for
/// the events about it while it is off the CPU. Each answer is made a plain
/// boolean before they are combined: the compiler would otherwise OR the
/// two map lookups' pointers, which the verifier refuses.
#[inline(always)]
fn switch_wanted(layout: &KernelLayout, prev: u32, next: u32) -> Option<(bool, bool)> {
    let prev_wanted = black_box(wanted_current(layout, prev));
    remember_current(layout, prev, prev_wanted);
    let next_wanted = black_box(wanted(layout, next));
    (prev_wanted || next_wanted).then_some((prev_wanted, next_wanted))
}

/// Under a pid filter, writes the side of a switch that is not followed as
/// the idle task: the recording does not see what that task does next (its
/// own switch out is not recorded), so it must not look as if it ran until
/// the CPU's next recorded switch.
///
/// # Safety
///
/// `e` points at a reserved, writable `SchedSwitchEvent` whose fields are
/// written.
#[inline(always)]
unsafe fn hide_unfollowed(e: *mut SchedSwitchEvent, prev_wanted: bool, next_wanted: bool) {
    // SAFETY: the caller's contract.
    unsafe {
        if !prev_wanted {
            (*e).header.tid = 0;
            (*e).header.tgid = 0;
            (*e).prev_pid = 0;
            (*e).prev_prio = IDLE_PRIO;
            (*e).prev_state = 0;
            (*e).prev_comm = [0; COMM_LEN];
        }
        if !next_wanted {
            (*e).next_pid = 0;
            (*e).next_prio = IDLE_PRIO;
            (*e).next_tgid = 0;
            (*e).next_comm = [0; COMM_LEN];
        }
    }
}

/// Shared body of the two wake-up tracepoints.
#[inline(always)]
pub(crate) fn wakeup(
    ctx: &TracePointContext,
    layout: &KernelLayout,
    l: &SchedWakeupLayout,
    flags: u16,
    ts: u64,
) {
    let Some(r) = Record::copy(ctx, l.record_size) else {
        return;
    };
    if !wanted(layout, r.id(&l.pid)) && !current_wanted(layout) {
        return;
    }
    let Some(mut entry) = reserve::<SchedWakeupEvent>() else {
        return;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SchedWakeupEvent>() bytes; every field is written before
    // the entry is submitted.
    unsafe {
        (*e).header = header(EventKind::Wakeup, ts);
        r.comm(&l.comm, ptr::addr_of_mut!((*e).comm));
        (*e).pid = r.id(&l.pid);
        (*e).prio = r.i32(&l.prio);
        (*e).tgid = ABSENT_ID;
        (*e).target_cpu = r.i32(&l.target_cpu) as u16;
        (*e).flags = flags;
    }
    r.submit(layout, entry);
}

/// `sched:sched_waking` (the program keeps the name of the event it writes).
#[tracepoint]
pub fn sched_wakeup(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    wakeup(&ctx, layout, &layout.sched_wakeup, 0, ts);
    0
}

/// `sched:sched_wakeup_new`.
#[tracepoint]
pub fn sched_wakeup_new(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    wakeup(&ctx, layout, &layout.sched_wakeup_new, WAKEUP_NEW, ts);
    0
}

/// The `prev_state` the classic `sched_switch` tracepoint reports
/// (`__trace_sched_switch_state`): the TASK_REPORT bit of the state, or
/// TASK_REPORT_MAX (0x100) when the task was preempted.
#[inline(always)]
pub(crate) fn switch_state(preempt: bool, state: u32, exit_state: u32) -> i32 {
    const TASK_REPORT: u32 = 0x7f;
    const TASK_IDLE: u32 = 0x402;
    const TASK_REPORT_IDLE: u32 = 0x80;
    const TASK_RTLOCK_WAIT_OR_FROZEN: u32 = 0x1000 | 0x8000;
    if preempt {
        return 0x100;
    }
    let mut s = (state | exit_state) & TASK_REPORT;
    if state & TASK_IDLE == TASK_IDLE {
        s = TASK_REPORT_IDLE;
    }
    if state & TASK_RTLOCK_WAIT_OR_FROZEN != 0 {
        s = 0x2;
    }
    // The highest bit, as the kernel's fls() picks it.
    let mut bit = 0x80u32;
    while bit != 0 {
        if s & bit != 0 {
            return bit as i32;
        }
        bit >>= 1;
    }
    0
}

/// `sched_switch(bool preempt, struct task_struct *prev, struct task_struct
/// *next, unsigned int prev_state)`.
#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch_btf(ctx: BtfTracePointContext) -> i32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let preempt: u64 = ctx.arg(0);
    let prev: *const u8 = ctx.arg(1);
    let next: *const u8 = ctx.arg(2);
    let prev_state: u64 = ctx.arg(3);
    // SAFETY: `next` is the tracepoint's task argument; the marker is
    // patched to `task_struct.pid`.
    let next_pid: u32 = unsafe { field(next, MARK_TASK_PID) };
    // SAFETY: as above, for `prev`.
    let prev_pid: u32 = unsafe { field(prev, MARK_TASK_PID) };
    let Some((prev_wanted, next_wanted)) = switch_wanted(layout, prev_pid, next_pid) else {
        return 0;
    };
    // SAFETY: `prev` is the tracepoint's task argument; the marker is
    // patched to `task_struct.exit_state`.
    let state = switch_state(preempt & 0xff != 0, prev_state as u32, unsafe {
        field(prev, MARK_TASK_EXIT_STATE)
    });
    forget_exited(layout, prev_pid, state);
    let Some(mut entry) = reserve::<SchedSwitchEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SchedSwitchEvent>() bytes; every field is written before
    // the entry is submitted. `prev` and `next` are the tracepoint's task
    // arguments, read at patched field offsets.
    unsafe {
        (*e).header = header(EventKind::Switch, ts);
        task_comm(prev, ptr::addr_of_mut!((*e).prev_comm));
        task_comm(next, ptr::addr_of_mut!((*e).next_comm));
        (*e).prev_pid = prev_pid;
        (*e).prev_prio = field(prev, MARK_TASK_PRIO);
        (*e).next_pid = next_pid;
        (*e).next_prio = field(next, MARK_TASK_PRIO);
        (*e).prev_state = state;
        (*e).next_tgid = field(next, MARK_TASK_TGID);
        hide_unfollowed(e, prev_wanted, next_wanted);
    }
    entry.submit(wakeup_flags(layout));
    0
}

/// Shared body of the two BTF wake-up tracepoints (`struct task_struct *p`).
#[inline(always)]
pub(crate) fn wakeup_btf(ctx: &BtfTracePointContext, flags: u16) -> i32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let p: *const u8 = ctx.arg(0);
    // SAFETY: `p` is the tracepoint's task argument; the marker is patched
    // to `task_struct.pid`.
    let pid: u32 = unsafe { field(p, MARK_TASK_PID) };
    if !wanted(layout, pid) && !current_wanted(layout) {
        return 0;
    }
    let Some(mut entry) = reserve::<SchedWakeupEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SchedWakeupEvent>() bytes; every field is written before
    // the entry is submitted. `p` is read at patched field offsets.
    unsafe {
        (*e).header = header(EventKind::Wakeup, ts);
        task_comm(p, ptr::addr_of_mut!((*e).comm));
        (*e).pid = pid;
        (*e).prio = field(p, MARK_TASK_PRIO);
        (*e).tgid = field(p, MARK_TASK_TGID);
        (*e).target_cpu = field::<u32>(p, MARK_TASK_CPU) as u16;
        (*e).flags = flags;
    }
    entry.submit(wakeup_flags(layout));
    0
}

/// `sched_waking(struct task_struct *p)`: the waker's context, before a
/// wake-up of a task on another CPU is handed to that CPU (where
/// `sched_wakeup` fires, in its interrupt, with no waker to see).
#[btf_tracepoint(function = "sched_waking")]
pub fn sched_wakeup_btf(ctx: BtfTracePointContext) -> i32 {
    wakeup_btf(&ctx, 0)
}

/// `sched_wakeup_new(struct task_struct *p)`.
#[btf_tracepoint(function = "sched_wakeup_new")]
pub fn sched_wakeup_new_btf(ctx: BtfTracePointContext) -> i32 {
    wakeup_btf(&ctx, WAKEUP_NEW)
}
