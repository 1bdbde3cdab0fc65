//! `kernel:proc`: new tasks, execs, exits and renames. They are attached
//! whatever the categories, since they name the processes and threads that
//! every other event refers to (userspace writes them as `kernel:proc`
//! instants only when that category is on); `task_newtask` also
//! follows the tasks followed ones create (`sched_switch` forgets them at
//! their last switch out).

use core::mem::MaybeUninit;
use core::ptr;

use aya_ebpf::{
    helpers::{bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid},
    macros::tracepoint,
    programs::TracePointContext,
};
use trace_common::kernel::{
    ABSENT_ID, CLONE_THREAD, COMM_LEN, EventKind, FILENAME_LEN, GROUP_DEAD_UNKNOWN,
    ProcessExecEvent, ProcessExitEvent, TaskNewtaskEvent, TaskRenameEvent,
};

use crate::follow::{current_wanted, follow_child, wanted_current};
use crate::record::Record;
use crate::ring::{header, header_of, layout, now, reserve};
use crate::stack::forget_first_stack;

/// `task:task_newtask`.
#[tracepoint]
pub fn task_newtask(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let l = &layout.task_newtask;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let pid_tgid = bpf_get_current_pid_tgid();
    let pid = r.id(&l.pid);
    follow_child(layout, pid_tgid as u32, pid);
    if !wanted_current(layout, pid_tgid as u32) {
        return 0;
    }
    let Some(mut entry) = reserve::<TaskNewtaskEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    let header = header_of(EventKind::NewTask, ts, pid_tgid);
    let clone_flags = r.int(&l.clone_flags) as u64;
    let child_tgid = if !l.clone_flags.is_present() {
        ABSENT_ID
    } else if clone_flags & CLONE_THREAD != 0 {
        header.tgid
    } else {
        pid
    };
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<TaskNewtaskEvent>() bytes; every field is written before
    // the entry is submitted.
    unsafe {
        (*e).header = header;
        (*e).pid = pid;
        (*e).child_tgid = child_tgid;
        (*e).clone_flags = clone_flags;
        r.comm(&l.comm, ptr::addr_of_mut!((*e).comm));
        (*e).cgroup = bpf_get_current_cgroup_id();
    }
    r.submit(layout, entry);
    0
}

/// `sched:sched_process_exec`.
#[tracepoint]
pub fn sched_process_exec(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    forget_first_stack((bpf_get_current_pid_tgid() >> 32) as u32);
    if !current_wanted(layout) {
        return 0;
    }
    let l = &layout.process_exec;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let Some(mut entry) = reserve::<ProcessExecEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<ProcessExecEvent>() bytes; every field is written before
    // the entry is submitted, and `filename` is zeroed before a reference
    // to it is taken.
    unsafe {
        (*e).header = header(EventKind::Exec, ts);
        (*e).pid = r.id(&l.pid);
        (*e).old_pid = r.id(&l.old_pid);
        (*e).comm = bpf_get_current_comm().unwrap_or([0; COMM_LEN]);
        (*e).reserved = 0;
        (*e).filename = [0; FILENAME_LEN];
        (*e).filename_len = r.dynamic_str(&l.filename, &mut (*e).filename) as u32;
        (*e).cgroup = bpf_get_current_cgroup_id();
    }
    r.submit(layout, entry);
    0
}

/// `sched:sched_process_exit`.
#[tracepoint]
pub fn sched_process_exit(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let tid = bpf_get_current_pid_tgid() as u32;
    // Still followed: its last switch out, recorded, is where its time on
    // CPU ends (`sched_switch` stops following it there).
    if !wanted_current(layout, tid) {
        return 0;
    }
    let l = &layout.process_exit;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let Some(mut entry) = reserve::<ProcessExitEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    let group_dead = if l.group_dead.is_present() {
        (r.int(&l.group_dead) != 0) as u8
    } else {
        GROUP_DEAD_UNKNOWN
    };
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<ProcessExitEvent>() bytes; every field is written before
    // the entry is submitted.
    unsafe {
        (*e).header = header(EventKind::Exit, ts);
        r.comm(&l.comm, ptr::addr_of_mut!((*e).comm));
        (*e).pid = r.id(&l.pid);
        (*e).prio = r.i32(&l.prio);
        (*e).group_dead = group_dead;
        (*e).reserved = [0; 7];
    }
    r.submit(layout, entry);
    0
}

/// `task:task_rename`.
#[tracepoint]
pub fn task_rename(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    if !current_wanted(layout) {
        return 0;
    }
    let l = &layout.task_rename;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let Some(mut entry) = reserve::<TaskRenameEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    let header = header(EventKind::Rename, ts);
    // Kernels without the field rename only the current task.
    let pid = if l.pid.is_present() {
        r.id(&l.pid)
    } else {
        header.tid
    };
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<TaskRenameEvent>() bytes; every field is written before
    // the entry is submitted.
    unsafe {
        (*e).header = header;
        (*e).pid = pid;
        (*e).reserved = 0;
        r.comm(&l.oldcomm, ptr::addr_of_mut!((*e).oldcomm));
        r.comm(&l.newcomm, ptr::addr_of_mut!((*e).newcomm));
    }
    r.submit(layout, entry);
    0
}
