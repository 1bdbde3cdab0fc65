//! `kernel:syscall`: system call entries and returns, from the classic
//! tracepoints and from their BTF variants; never for the recorder's own
//! process.

use core::mem::MaybeUninit;

use aya_ebpf::{
    EbpfContext as _,
    helpers::bpf_get_current_pid_tgid,
    macros::{btf_tracepoint, tracepoint},
    programs::{BtfTracePointContext, TracePointContext},
};
use trace_common::kernel::stack::SOURCE_SYSCALL;
use trace_common::kernel::{
    EventKind, KernelLayout, MARK_REGS_ARGS, MARK_REGS_NR, SYSCALL_ARGS, SysEnterEvent,
    SysExitEvent,
};

use crate::follow::wanted;
use crate::record::Record;
use crate::ring::{header_of, layout, now, reserve, wakeup_flags};
use crate::stack::probe_stack;
use crate::task::field;

/// Whether a system call event of the current task is recorded: never for
/// the recorder itself, else as [`wanted`] says.
#[inline(always)]
pub(crate) fn syscall_wanted(layout: &KernelLayout, pid_tgid: u64) -> bool {
    (pid_tgid >> 32) as u32 != layout.self_tgid && wanted(layout, pid_tgid as u32)
}

/// The time, the layout and the current task of a system call event, if
/// it is recorded.
#[inline(always)]
pub(crate) fn syscall_start() -> Option<(u64, &'static KernelLayout, u64)> {
    let ts = now();
    let layout = layout(ts)?;
    let pid_tgid = bpf_get_current_pid_tgid();
    syscall_wanted(layout, pid_tgid).then_some((ts, layout, pid_tgid))
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
    let Some(mut entry) = reserve::<SysEnterEvent>() else {
        return 0;
    };
    let id;
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SysEnterEvent>() bytes; every field is written before the
    // entry is submitted. Each argument word read lies inside the `args`
    // field (checked against its size), 8-aligned in the scratch copy
    // (userspace accepts the field only at a multiple of 8).
    unsafe {
        (*e).header = header_of(EventKind::SysEnter, ts, pid_tgid);
        id = r.int(&l.id);
        (*e).id = id;
        let present = l.args.is_present();
        let words = (l.args.size / 8) as usize;
        for i in 0..SYSCALL_ARGS {
            (*e).args[i] = if present && i < words {
                r.at(l.args.offset + (i as u16) * 8).cast::<u64>().read()
            } else {
                0
            };
        }
    }
    r.submit(layout, entry);
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
    let Some((ts, layout, pid_tgid)) = syscall_start() else {
        return 0;
    };
    let l = &layout.sys_exit;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let Some(mut entry) = reserve::<SysExitEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SysExitEvent>() bytes; every field is written before the
    // entry is submitted.
    unsafe {
        (*e).header = header_of(EventKind::SysExit, ts, pid_tgid);
        (*e).id = r.int(&l.id);
        (*e).ret = r.int(&l.ret);
    }
    r.submit(layout, entry);
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
    let Some(mut entry) = reserve::<SysEnterEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SysEnterEvent>() bytes; every field is written before the
    // entry is submitted. `regs` is the tracepoint's register argument,
    // read at the patched offsets of the argument registers.
    unsafe {
        (*e).header = header_of(EventKind::SysEnter, ts, pid_tgid);
        (*e).id = id;
        (*e).args[0] = field(regs, MARK_REGS_ARGS[0]);
        (*e).args[1] = field(regs, MARK_REGS_ARGS[1]);
        (*e).args[2] = field(regs, MARK_REGS_ARGS[2]);
        (*e).args[3] = field(regs, MARK_REGS_ARGS[3]);
        (*e).args[4] = field(regs, MARK_REGS_ARGS[4]);
        (*e).args[5] = field(regs, MARK_REGS_ARGS[5]);
    }
    entry.submit(wakeup_flags(layout));
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
    let Some((ts, layout, pid_tgid)) = syscall_start() else {
        return 0;
    };
    let regs: *const u8 = ctx.arg(0);
    let ret: i64 = ctx.arg(1);
    let Some(mut entry) = reserve::<SysExitEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SysExitEvent>() bytes; every field is written before the
    // entry is submitted. `regs` is read at the patched offset of the
    // system call number.
    unsafe {
        (*e).header = header_of(EventKind::SysExit, ts, pid_tgid);
        (*e).id = i64::from(field::<i32>(regs, MARK_REGS_NR));
        (*e).ret = ret;
    }
    entry.submit(wakeup_flags(layout));
    0
}
