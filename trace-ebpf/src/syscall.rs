//! `kernel:syscall`: system calls, from the classic tracepoints and from
//! their BTF variants; never for the recorder's own process.
//!
//! With [`PAIR_SYSCALLS`] (the default) nothing is written at a call's
//! entry: the entry waits in this CPU's [`SYSCALL_STAGE`], and the return
//! makes the whole call one [`SyscallEvent`], kept there too until
//! [`STAGED_CALLS`] of them go out as one ring-buffer entry — one
//! reservation for several calls instead of two per call. The stage holds
//! only calls of the task running on the CPU: when that task is switched
//! out (it blocks inside a call, is preempted, or exits in `exit`),
//! `syscall_switch` writes what is staged and the entry of the call it is
//! in on its own; that call's return, wherever it happens, is then written
//! as a [`SysExitEvent`]. What is still staged when the recording stops is
//! read from the map by userspace.

use core::mem::{MaybeUninit, size_of};
use core::ptr;

use aya_ebpf::{
    EbpfContext as _,
    helpers::bpf_get_current_pid_tgid,
    macros::{btf_tracepoint, tracepoint},
    programs::{BtfTracePointContext, TracePointContext},
};
use trace_common::kernel::stack::SOURCE_SYSCALL;
use trace_common::kernel::{
    EventHeader, EventKind, KernelLayout, MARK_REGS_ARGS, MARK_REGS_NR, PAIR_SYSCALLS,
    STAGED_CALLS, SYSCALL_ARGS, SysEnterEvent, SysExitEvent, SyscallEvent, SyscallStage,
};

use crate::follow::{filtering, wanted_current};
use crate::maps::SYSCALL_STAGE;
use crate::record::Record;
use crate::ring::{current_layout, header_of, now, output, output_events, reserve, wakeup_flags};
use crate::stack::probe_stack;
use crate::task::field;

/// Whether a system call event of the current task is recorded: never for
/// the recorder itself, else as [`wanted_current`] says.
#[inline(always)]
pub(crate) fn syscall_wanted(layout: &KernelLayout, pid_tgid: u64) -> bool {
    (pid_tgid >> 32) as u32 != layout.self_tgid && wanted_current(layout, pid_tgid as u32)
}

/// The time, the layout and the current task of a system call event, if
/// it is recorded. The clock is read once the call is known to be wanted:
/// under a process filter, every call of the tasks left out is turned away
/// for the price of the filter alone.
#[inline(always)]
pub(crate) fn syscall_start() -> Option<(u64, &'static KernelLayout, u64)> {
    let layout = current_layout()?;
    let pid_tgid = bpf_get_current_pid_tgid();
    if !syscall_wanted(layout, pid_tgid) {
        return None;
    }
    let ts = now();
    (ts <= layout.stop_ts).then_some((ts, layout, pid_tgid))
}

/// The layout and time of a system call return that may be recorded: one
/// whose entry waits in this CPU's stage (its caller was asked about at the
/// entry), or one of a task the filter wants. The clock is read only then.
#[inline(always)]
fn exit_start() -> Option<(&'static KernelLayout, u64)> {
    let layout = current_layout()?;
    if filtering(layout) {
        let staged = layout.filter & PAIR_SYSCALLS != 0
            && SYSCALL_STAGE.get_ptr(0).is_some_and(|stage| {
                // SAFETY: `stage` is this CPU's value, mapped while the
                // program runs; `live` is a plain word.
                unsafe { (*stage).live != 0 }
            });
        if !staged && !syscall_wanted(layout, bpf_get_current_pid_tgid()) {
            return None;
        }
    }
    let ts = now();
    (ts <= layout.stop_ts).then_some((layout, ts))
}

/// Writes the whole calls staged in `stage` as one entry, and then the
/// entry of the call in progress on its own, if there is one; empties the
/// stage.
///
/// # Safety
///
/// `stage` must point at this CPU's [`SYSCALL_STAGE`] value.
#[inline(always)]
unsafe fn flush(stage: *mut SyscallStage, layout: &KernelLayout) {
    // SAFETY: the caller vouches for `stage`; the programs that use it
    // (system call entry and return, the switch) never run nested on one
    // CPU: none of them runs in interrupt context.
    unsafe {
        // The size written, in a form the verifier can bound: all the
        // calls, or fewer than STAGED_CALLS (a power of two).
        const _: () = assert!(STAGED_CALLS.is_power_of_two());
        let n = (*stage).staged as usize;
        let size = if n >= STAGED_CALLS {
            STAGED_CALLS * size_of::<SyscallEvent>()
        } else {
            (n & (STAGED_CALLS - 1)) * size_of::<SyscallEvent>()
        };
        if size > 0 {
            output_events(
                ptr::addr_of!((*stage).calls).cast(),
                size,
                wakeup_flags(layout),
                (size / size_of::<SyscallEvent>()) as u64,
            );
        }
        (*stage).staged = 0;
        if (*stage).live != 0 {
            (*stage).live = 0;
            output(
                ptr::addr_of!((*stage).entry).cast(),
                size_of::<SysEnterEvent>(),
                wakeup_flags(layout),
            );
        }
    }
}

/// A system call entry: kept in this CPU's stage with [`PAIR_SYSCALLS`],
/// else written at once.
#[inline(always)]
fn enter(layout: &KernelLayout, ts: u64, pid_tgid: u64, id: i64, args: &[u64; SYSCALL_ARGS]) {
    if layout.filter & PAIR_SYSCALLS != 0
        && let Some(stage) = SYSCALL_STAGE.get_ptr_mut(0)
    {
        // SAFETY: `stage` is this CPU's value; see `flush`.
        unsafe {
            // An entry still waiting belongs to a call whose return was not
            // seen (its program was skipped): it goes out, after the calls
            // before it, before it is replaced.
            if (*stage).live != 0 {
                flush(stage, layout);
            }
            (*stage).entry.header = header_of(EventKind::SysEnter, ts, pid_tgid);
            (*stage).entry.id = id;
            (*stage).entry.args = *args;
            (*stage).live = 1;
        }
        return;
    }
    let Some(mut entry) = reserve::<SysEnterEvent>() else {
        return;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SysEnterEvent>() bytes; every field is written before the
    // entry is submitted.
    unsafe {
        (*e).header = header_of(EventKind::SysEnter, ts, pid_tgid);
        (*e).id = id;
        (*e).args = *args;
    }
    entry.submit(wakeup_flags(layout));
}

/// A system call return at `ts`: the whole call, staged, when its entry
/// waits in this CPU's stage (the caller was checked at the entry then),
/// else the return alone, if the caller is recorded.
///
/// An entry waiting on this CPU is the running task's: `syscall_switch`,
/// attached before the entry and return programs, writes out the entry of
/// any task that is switched out. So the task is not asked for its ids again.
#[inline(always)]
fn exit(layout: &KernelLayout, ts: u64, id: i64, ret: i64) {
    if layout.filter & PAIR_SYSCALLS != 0
        && let Some(stage) = SYSCALL_STAGE.get_ptr_mut(0)
    {
        // SAFETY: `stage` is this CPU's value; see `flush`.
        unsafe {
            // `rt_sigreturn` returns with the number -1 (the registers it
            // restored say "no system call"): its entry and return go out
            // as two events, as they say different things.
            if (*stage).live != 0 && (*stage).entry.id == id {
                (*stage).live = 0;
                let n = (*stage).staged as usize;
                if n < STAGED_CALLS {
                    let call = ptr::addr_of_mut!((*stage).calls[n]);
                    (*call).header = EventHeader {
                        kind: EventKind::Syscall as u32,
                        ts,
                        ..(*stage).entry.header
                    };
                    (*call).enter_ts = (*stage).entry.header.ts;
                    (*call).id = id;
                    (*call).ret = ret;
                    (*call).args = (*stage).entry.args;
                    (*stage).staged = n as u32 + 1;
                }
                if n + 1 >= STAGED_CALLS {
                    flush(stage, layout);
                }
                return;
            }
            // Another call's entry (a return that was not seen): on its own.
            flush(stage, layout);
        }
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    if !syscall_wanted(layout, pid_tgid) {
        return;
    }
    let Some(mut entry) = reserve::<SysExitEvent>() else {
        return;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SysExitEvent>() bytes; every field is written before the
    // entry is submitted.
    unsafe {
        (*e).header = header_of(EventKind::SysExit, ts, pid_tgid);
        (*e).id = id;
        (*e).ret = ret;
    }
    entry.submit(wakeup_flags(layout));
}

/// A task is switched out: what it left staged goes out.
#[inline(always)]
fn switched_out() {
    let Some(stage) = SYSCALL_STAGE.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: `stage` is this CPU's value; see `flush`. What is staged was
    // made while the layout was filled in, so it is there now.
    unsafe {
        if ((*stage).live != 0 || (*stage).staged != 0)
            && let Some(layout) = crate::maps::LAYOUT.get(0)
        {
            flush(stage, layout);
        }
    }
}

/// `raw_syscalls:sys_enter`.
#[tracepoint]
pub fn sys_enter(ctx: TracePointContext) -> u32 {
    let Some((ts, layout, pid_tgid)) = syscall_start() else {
        return 0;
    };
    let l = &layout.sys_enter;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let mut args = [0u64; SYSCALL_ARGS];
    let present = l.args.is_present();
    let words = (l.args.size / 8) as usize;
    for (i, arg) in args.iter_mut().enumerate() {
        if present && i < words {
            // SAFETY: each argument word read lies inside the `args` field
            // (checked against its size), 8-aligned in the scratch copy
            // (userspace accepts the field only at a multiple of 8).
            *arg = unsafe { r.at(l.args.offset + (i as u16) * 8).cast::<u64>().read() };
        }
    }
    let id = r.int(&l.id);
    enter(layout, ts, pid_tgid, id, &args);
    probe_stack(
        ctx.as_ptr(),
        layout,
        SOURCE_SYSCALL,
        id as u64,
        ts,
        pid_tgid,
        false,
    );
    0
}

/// `raw_syscalls:sys_exit`.
#[tracepoint]
pub fn sys_exit(ctx: TracePointContext) -> u32 {
    let Some((layout, ts)) = exit_start() else {
        return 0;
    };
    let l = &layout.sys_exit;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    exit(layout, ts, r.int(&l.id), r.int(&l.ret));
    0
}

/// `sched:sched_switch`, for the system call entries waiting on this CPU.
#[tracepoint]
pub fn syscall_switch(_ctx: TracePointContext) -> u32 {
    switched_out();
    0
}

/// `sys_enter(struct pt_regs *regs, long id)`.
#[btf_tracepoint(function = "sys_enter")]
pub fn sys_enter_btf(ctx: BtfTracePointContext) -> i32 {
    let Some((ts, layout, pid_tgid)) = syscall_start() else {
        return 0;
    };
    let regs: *const u8 = ctx.arg(0);
    let id: i64 = ctx.arg(1);
    // SAFETY: `regs` is the tracepoint's register argument, read at the
    // patched offsets of the argument registers.
    let args = unsafe {
        [
            field(regs, MARK_REGS_ARGS[0]),
            field(regs, MARK_REGS_ARGS[1]),
            field(regs, MARK_REGS_ARGS[2]),
            field(regs, MARK_REGS_ARGS[3]),
            field(regs, MARK_REGS_ARGS[4]),
            field(regs, MARK_REGS_ARGS[5]),
        ]
    };
    enter(layout, ts, pid_tgid, id, &args);
    probe_stack(
        ctx.as_ptr(),
        layout,
        SOURCE_SYSCALL,
        id as u64,
        ts,
        pid_tgid,
        false,
    );
    0
}

/// `sys_exit(struct pt_regs *regs, long ret)`.
#[btf_tracepoint(function = "sys_exit")]
pub fn sys_exit_btf(ctx: BtfTracePointContext) -> i32 {
    let Some((layout, ts)) = exit_start() else {
        return 0;
    };
    let regs: *const u8 = ctx.arg(0);
    let ret: i64 = ctx.arg(1);
    // SAFETY: `regs` is read at the patched offset of the system call number.
    let id = i64::from(unsafe { field::<i32>(regs, MARK_REGS_NR) });
    exit(layout, ts, id, ret);
    0
}

/// `sched_switch(bool preempt, struct task_struct *prev, ...)`, for the
/// system call entries waiting on this CPU.
#[btf_tracepoint(function = "sched_switch")]
pub fn syscall_switch_btf(_ctx: BtfTracePointContext) -> i32 {
    switched_out();
    0
}
