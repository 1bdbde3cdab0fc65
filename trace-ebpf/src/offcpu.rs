//! `kernel:offcpu`: where tasks block and who wakes them.
//!
//! At `sched_switch` a task that blocks (not one preempted) is kept in
//! `OFFCPU` with the time and its kernel stack; when it is switched back
//! in after at least the threshold, its entry is marked with that time
//! (shorter ones are forgotten). The entry is written from the task's own
//! context, where its user stack can be read — at the return of its
//! system call (`sys_exit`), or when it blocks again first — with the
//! user stack of that moment, which is the one it blocked with as long as
//! it returns where it entered the kernel (else the user stack is left
//! out). At `sched_waking`, the waker of a task off CPU for at least the
//! threshold writes its own stack.

use core::ffi::c_void;

use aya_ebpf::{
    EbpfContext as _,
    helpers::bpf_get_current_pid_tgid,
    macros::{map, tracepoint},
    maps::{LruHashMap, PerCpuArray},
    programs::TracePointContext,
};
use trace_common::kernel::stack::{
    KERNEL_FRAMES_MAX, OFFCPU_MAX, OffCpuEntry, SOURCE_OFFCPU, SOURCE_WAKER, STACK_USER_STALE,
};
use trace_common::kernel::{ABSENT_INT, KernelLayout};

use crate::follow::wanted_current;
use crate::record::Record;
use crate::ring::{layout, now};
use crate::stack::{KernelStack, StackInfo, current_user_regs, stack_header, write_stack};

/// Tasks off CPU, by thread id.
#[map(name = "OFFCPU")]
static OFFCPU: LruHashMap<u32, OffCpuEntry> = LruHashMap::with_max_entries(OFFCPU_MAX, 0);

/// Where a new entry is assembled (too big for the program's stack).
#[map(name = "OFFCPU_NEW")]
static OFFCPU_NEW: PerCpuArray<OffCpuEntry> = PerCpuArray::with_max_entries(1, 0);

/// `sched:sched_switch`.
#[tracepoint]
pub fn offcpu_switch(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let l = &layout.sched_switch;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let (prev, next) = (r.id(&l.prev_pid), r.id(&l.next_pid));
    let state = r.int(&l.prev_state);
    // The task coming back: long enough off CPU to be written?
    if next != 0
        && let Some(e) = OFFCPU.get_ptr_mut(next)
    {
        // SAFETY: `e` points at the map's value for `next`.
        unsafe {
            if (*e).end_ts == 0 {
                if ts.saturating_sub((*e).start_ts) < layout.stacks.offcpu_min_ns {
                    let _ = OFFCPU.remove(next);
                } else {
                    (*e).end_ts = ts;
                }
            }
        }
    }
    // The task leaving: blocked (not runnable), not the recorder's.
    let pid_tgid = bpf_get_current_pid_tgid();
    // Preempted tasks report TASK_REPORT_MAX (0x100); exiting ones X (0x10)
    // or Z (0x20): they never run again.
    if prev == 0
        || state == i64::from(ABSENT_INT)
        || state & 0xff == 0
        || state & 0x30 != 0
        || (pid_tgid >> 32) as u32 == layout.self_tgid
        || !wanted_current(layout, prev)
    {
        return 0;
    }
    // An interval not written yet (it blocked again without returning to
    // user space) is written first.
    if let Some(e) = OFFCPU.get_ptr(prev) {
        // SAFETY: `e` points at the map's value for `prev`.
        if unsafe { (*e).end_ts } != 0 {
            write_entry(ctx.as_ptr(), layout, pid_tgid, e, ts);
        }
    }
    let Some(new) = OFFCPU_NEW.get_ptr_mut(0) else {
        return 0;
    };
    let (ip, sp) = current_user_regs().map_or((0, 0), |(ip, sp, _)| (ip, sp));
    // SAFETY: `new` is this CPU's scratch entry; the stack is written into
    // its `kernel` array, whose size bounds the helper.
    unsafe {
        (*new).start_ts = ts;
        (*new).end_ts = 0;
        (*new).ip = ip;
        (*new).sp = sp;
        (*new).waker_tid = 0;
        (*new).waker_tgid = 0;
        (*new).tgid = (pid_tgid >> 32) as u32;
        let n = aya_ebpf::helpers::generated::bpf_get_stack(
            ctx.as_ptr(),
            (*new).kernel.as_mut_ptr().cast(),
            (8 * KERNEL_FRAMES_MAX) as u32,
            0,
        );
        (*new).kernel_len = if n > 0 { n as u32 } else { 0 };
        // A reference into the map value: the entry is not copied to the
        // program's stack (it is larger than the stack).
        let value: &OffCpuEntry = &*new;
        let _ = OFFCPU.insert(prev, value, 0);
    }
    0
}

/// `sched:sched_waking`: the current task wakes a task.
#[tracepoint]
pub fn offcpu_waking(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    // `sched_waking` shares `sched_wakeup`'s record layout.
    let l = &layout.sched_wakeup;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let wakee = r.id(&l.pid);
    let Some(e) = OFFCPU.get_ptr_mut(wakee) else {
        return 0;
    };
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: `e` points at the map's value for `wakee`.
    let (start_ts, wakee_tgid) = unsafe {
        if (*e).end_ts != 0
            || (*e).waker_tid != 0
            || ts.saturating_sub((*e).start_ts) < layout.stacks.offcpu_min_ns
        {
            return 0;
        }
        (*e).waker_tid = pid_tgid as u32;
        (*e).waker_tgid = (pid_tgid >> 32) as u32;
        ((*e).start_ts, (*e).tgid)
    };
    let info = StackInfo {
        header: stack_header(ts, pid_tgid),
        source: SOURCE_WAKER,
        flags: 0,
        id: 0,
        start_ts,
        end_ts: ts,
        other_tid: wakee,
        other_tgid: wakee_tgid,
    };
    // An interrupt's wake-up has the idle task or whatever ran as current:
    // the kernel stack says so, and the manager leaves the user part out.
    write_stack(
        ctx.as_ptr(),
        layout,
        &info,
        KernelStack::Walk,
        pid_tgid as u32 != 0,
    );
    0
}

/// `raw_syscalls:sys_exit`: a task back from off CPU writes its stacks.
#[tracepoint]
pub fn offcpu_sys_exit(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(e) = OFFCPU.get_ptr(pid_tgid as u32) else {
        return 0;
    };
    // SAFETY: `e` points at the map's value for the current task.
    if unsafe { (*e).end_ts } == 0 {
        return 0;
    }
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    write_entry(ctx.as_ptr(), layout, pid_tgid, e, ts);
    0
}

/// Writes the current task's off-CPU entry `e` and forgets it.
#[inline(always)]
fn write_entry(
    ctx: *mut c_void,
    layout: &KernelLayout,
    pid_tgid: u64,
    e: *const OffCpuEntry,
    ts: u64,
) {
    // SAFETY: `e` points at the map's value for the current task, memory
    // that stays mapped while the program runs. (When the map is full, an
    // insert on another CPU may take this element over at once: the event
    // could then mix two tasks' entries; 4096 blocked threads of the
    // followed set are needed for that.)
    let entry = unsafe { &*e };
    let same = current_user_regs().is_some_and(|(ip, sp, _)| ip == entry.ip && sp == entry.sp);
    let info = StackInfo {
        header: stack_header(ts, pid_tgid),
        source: SOURCE_OFFCPU,
        flags: if same { 0 } else { STACK_USER_STALE },
        id: 0,
        start_ts: entry.start_ts,
        end_ts: entry.end_ts,
        other_tid: entry.waker_tid,
        other_tgid: entry.waker_tgid,
    };
    write_stack(
        ctx,
        layout,
        &info,
        KernelStack::Kept(&entry.kernel, entry.kernel_len),
        same,
    );
    let _ = OFFCPU.remove(pid_tgid as u32);
}
