//! Writing a stack event (`trace_common::kernel::stack`): the kernel stack
//! as `bpf_get_stack` walks it, the user stack either walked by frame
//! pointers or copied as bytes for userspace to unwind, and the thread's
//! Python frames (`python`), assembled in a
//! per-CPU scratch slot and written with one `bpf_ringbuf_output` of just
//! the bytes used.

use core::ffi::c_void;
use core::mem::size_of;
use core::ptr;

use aya_ebpf::{
    bindings::{BPF_F_USER_STACK, BPF_RB_FORCE_WAKEUP, pt_regs},
    helpers::generated,
    macros::map,
    maps::{LruHashMap, PerCpuArray},
};
use trace_common::kernel::python::PYTHON_RUN_MAX;
use trace_common::kernel::stack::{
    CALL_GRAPH_DWARF, CALL_GRAPH_FP, KERNEL_FRAMES_MAX, STACK_EVENT_MAX, STACK_KIND,
    STACK_SEEN_MAX, STACK_SLOTS, STACK_USER_REGS, StackEvent, USER_FRAMES_MAX, USER_STACK_CHUNK,
    USER_STACK_MAX,
};
use trace_common::kernel::{COUNTER_RINGBUF_FULL, EventHeader, KernelLayout};

use crate::maps::scratch;
use crate::python::write_python;
use crate::ring::{count_lost, output as output_bytes, wakeup_flags};

/// Processes whose first stack was written (see `MAP_STACK_SEEN`).
#[map(name = "STACK_SEEN")]
static STACK_SEEN: LruHashMap<u32, u8> = LruHashMap::with_max_entries(STACK_SEEN_MAX, 0);

/// Forgets that process `tgid` had its first stack written: it executed a
/// new program, whose mappings the reader must read when its first stack
/// comes (which wakes the reader at once again).
#[inline(always)]
pub(crate) fn forget_first_stack(tgid: u32) {
    // A process that had no stack has no entry: nothing to remove.
    let _ = STACK_SEEN.remove(tgid);
}

/// The nesting level of stack-writing programs on each CPU.
#[map(name = "STACK_DEPTH")]
static STACK_DEPTH: PerCpuArray<u32> = PerCpuArray::with_max_entries(1, 0);

/// Where a stack event's kernel stack comes from.
#[derive(Clone, Copy)]
pub(crate) enum KernelStack<'a> {
    /// None is written.
    Without,
    /// Walked from the program's context.
    Walk,
    /// These frames (the first `len` bytes), kept earlier.
    Kept(&'a [u64; KERNEL_FRAMES_MAX], u32),
}

/// What a stack event says besides its stacks.
#[derive(Clone, Copy)]
pub(crate) struct StackInfo {
    pub(crate) header: EventHeader,
    pub(crate) source: u32,
    pub(crate) flags: u32,
    pub(crate) id: u64,
    pub(crate) start_ts: u64,
    pub(crate) end_ts: u64,
    pub(crate) other_tid: u32,
    pub(crate) other_tgid: u32,
}

/// The current task's user registers as it entered the kernel:
/// `(ip, sp, bp)`, or `None` for a kernel thread (no user context).
#[inline(always)]
pub(crate) fn current_user_regs() -> Option<(u64, u64, u64)> {
    // SAFETY: both helpers take the current task, valid while the program
    // runs; each register is copied with a checked kernel read.
    let (ip, sp, bp) = unsafe {
        let task = generated::bpf_get_current_task_btf();
        let at = generated::bpf_task_pt_regs(task) as *const pt_regs;
        (
            read_u64(ptr::addr_of!((*at).rip))?,
            read_u64(ptr::addr_of!((*at).rsp))?,
            read_u64(ptr::addr_of!((*at).rbp))?,
        )
    };
    // Kernel threads have no user registers (their saved ones are zero);
    // a user address is below the kernel's half.
    (ip != 0 && ip < 1 << 63).then_some((ip, sp, bp))
}

/// The `u64` at kernel address `at`, read with `bpf_probe_read_kernel`.
#[inline(always)]
fn read_u64(at: *const u64) -> Option<u64> {
    let mut v = 0u64;
    // SAFETY: writes 8 bytes into `v`; the helper checks `at` itself.
    let ret = unsafe {
        generated::bpf_probe_read_kernel(ptr::addr_of_mut!(v).cast(), 8, at.cast::<c_void>())
    };
    (ret == 0).then_some(v)
}

/// Writes a stack event of the current task: its kernel stack as `kernel`
/// says (walked from `ctx`, the program's context, where the program was
/// called), and with `user` its user stack as the layout's call-graph mode
/// says, from the registers it entered the kernel with (for a uprobe or a
/// sample that interrupted user mode, those are the context's too).
#[inline(always)]
pub(crate) fn write_stack(
    ctx: *mut c_void,
    layout: &KernelLayout,
    info: &StackInfo,
    kernel: KernelStack<'_>,
    user: bool,
) {
    let Some(depth) = STACK_DEPTH.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: this CPU's counter; programs that nest on a CPU each add one
    // before they use a slot and take it back after.
    let slot = unsafe {
        let d = *depth;
        *depth = d + 1;
        d
    };
    if slot < STACK_SLOTS {
        write_in_slot(slot, ctx, layout, info, kernel, user);
    } else {
        count_lost(COUNTER_RINGBUF_FULL);
    }
    // SAFETY: as above.
    unsafe { *depth = (*depth).saturating_sub(1) };
}

#[inline(always)]
fn write_in_slot(
    slot: u32,
    ctx: *mut c_void,
    layout: &KernelLayout,
    info: &StackInfo,
    kernel: KernelStack<'_>,
    user: bool,
) {
    let Some(base) = scratch(slot) else {
        return;
    };
    const HEAD: usize = size_of::<StackEvent>();
    const KMAX: usize = 8 * KERNEL_FRAMES_MAX;
    const UMAX: usize = 8 * USER_FRAMES_MAX;

    // The kernel stack.
    let mut k: usize = 0;
    if let KernelStack::Kept(frames, len) = kernel {
        let len = (len as usize).min(KMAX) & !7;
        // SAFETY: `len` <= KMAX bytes from the frames array into the
        // scratch slot, which has room for KMAX bytes after the head.
        if unsafe {
            generated::bpf_probe_read_kernel(
                base.add(HEAD).cast(),
                len as u32,
                frames.as_ptr().cast(),
            )
        } == 0
        {
            k = len;
        }
    } else if let KernelStack::Walk = kernel {
        // SAFETY: `ctx` is the program's context; KMAX bytes fit after the
        // head.
        let n = unsafe { generated::bpf_get_stack(ctx, base.add(HEAD).cast(), KMAX as u32, 0) };
        if n > 0 {
            k = (n as usize).min(KMAX);
        }
    }
    k &= 0x7ff;
    if k > KMAX {
        return;
    }

    // The user registers.
    let regs = if user { current_user_regs() } else { None };
    let mut flags = info.flags;
    let (mut u, mut p, mut s) = (0usize, 0usize, 0usize);
    let mut new_python = false;
    if let Some((_, sp, _)) = regs {
        flags |= STACK_USER_REGS;
        if layout.stacks.call_graph == CALL_GRAPH_FP {
            let at = HEAD + k;
            // SAFETY: UMAX bytes at `at` <= HEAD + KMAX stay in the slot.
            // The helper walks the current task's user stack (for a
            // uprobe, from the given registers, which are the context's).
            let n = unsafe {
                generated::bpf_get_stack(
                    ctx,
                    base.add(at).cast(),
                    UMAX as u32,
                    u64::from(BPF_F_USER_STACK),
                )
            };
            if n > 0 {
                u = (n as usize).min(UMAX) & 0x7ff;
            }
        }
        // The Python frames, of the current task only (its memory is the
        // one user reads see).
        let current = aya_ebpf::helpers::bpf_get_current_pid_tgid();
        let at = (HEAD + k + u) & 0xfff;
        if current as u32 == info.header.tid && at + PYTHON_RUN_MAX <= STACK_EVENT_MAX {
            let run = write_python(slot, at, info.header.tgid, info.header.tid);
            new_python = run.new;
            // The length goes through the slot's memory, which the verifier
            // does not follow: the code below is checked once for any
            // length, not once per number of frames.
            let e = base.cast::<StackEvent>();
            // SAFETY: the slot starts with room for the event, 8-aligned.
            p = unsafe {
                let len = ptr::addr_of_mut!((*e).python_len);
                ptr::write_volatile(len, run.len as u32);
                ptr::read_volatile(len) as usize
            };
            if p > PYTHON_RUN_MAX {
                p = 0;
            }
        }
        if layout.stacks.call_graph == CALL_GRAPH_DWARF {
            let at = HEAD + k + p;
            let want = (layout.stacks.user_stack_bytes as usize).min(USER_STACK_MAX);
            let chunks = want / USER_STACK_CHUNK;
            // Most stacks have the whole copy above the stack pointer: one
            // read. Near the top of the stack it fails, and the copy goes a
            // piece at a time.
            let mut i = 0usize;
            if want > 0 && at + want <= STACK_EVENT_MAX {
                // SAFETY: `want` bytes at `at` are inside the slot (checked);
                // the helper checks the user address itself.
                let ret = unsafe {
                    generated::bpf_probe_read_user(
                        base.add(at).cast(),
                        want as u32,
                        sp as *const c_void,
                    )
                };
                if ret == 0 {
                    s = want;
                    i = chunks;
                }
            }
            while i < USER_STACK_MAX / USER_STACK_CHUNK {
                if i >= chunks {
                    break;
                }
                let off = (i * USER_STACK_CHUNK) & (USER_STACK_MAX - 1);
                let dst = (at + off) & 0xffff;
                if dst + USER_STACK_CHUNK > STACK_EVENT_MAX {
                    break;
                }
                // SAFETY: `dst + USER_STACK_CHUNK` is inside the slot
                // (checked); the helper checks the user address itself.
                let ret = unsafe {
                    generated::bpf_probe_read_user(
                        base.add(dst).cast(),
                        USER_STACK_CHUNK as u32,
                        (sp + off as u64) as *const c_void,
                    )
                };
                if ret != 0 {
                    // The stack ends inside this piece, at a page
                    // boundary: take what lies before it.
                    let rest = (4096 - ((sp + off as u64) & 4095)) as usize;
                    if rest < USER_STACK_CHUNK {
                        let rest = rest & (USER_STACK_CHUNK - 1);
                        if rest > 0
                            // SAFETY: `rest` < USER_STACK_CHUNK bytes at `dst`,
                            // inside the slot as above.
                            && unsafe {
                                generated::bpf_probe_read_user(
                                    base.add(dst).cast(),
                                    rest as u32,
                                    (sp + off as u64) as *const c_void,
                                )
                            } == 0
                        {
                            s = off + rest;
                        }
                    }
                    break;
                }
                s = off + USER_STACK_CHUNK;
                i += 1;
            }
        }
    }
    let (ip, sp, bp) = regs.unwrap_or((0, 0, 0));
    let e = base.cast::<StackEvent>();
    // SAFETY: the slot starts with room for the event, 8-aligned.
    unsafe {
        (*e).header = info.header;
        (*e).source = info.source;
        (*e).flags = flags;
        (*e).id = info.id;
        (*e).kernel_len = k as u32;
        (*e).user_len = u as u32;
        (*e).stack_len = s as u32;
        (*e).python_len = p as u32;
        (*e).ip = ip;
        (*e).sp = sp;
        (*e).bp = bp;
        (*e).start_ts = info.start_ts;
        (*e).end_ts = info.end_ts;
        (*e).other_tid = info.other_tid;
        (*e).other_tgid = info.other_tgid;
        (*e).comm = [0; 16];
        generated::bpf_get_current_comm(ptr::addr_of_mut!((*e).comm).cast(), 16);
    }
    // A process's first stack: the reader reads its mappings at once.
    let tgid = info.header.tgid;
    let first = STACK_SEEN.get_ptr(tgid).is_none();
    if first {
        let _ = STACK_SEEN.insert(tgid, 1u8, 0);
    }
    output(base, HEAD + k + u + p + s, layout, first || new_python);
}

/// Hands the `size` bytes of the event assembled at `base` to this CPU's
/// ring buffer, waking the reader at once with `wake`.
#[inline(always)]
fn output(base: *mut u8, size: usize, layout: &KernelLayout, wake: bool) {
    if size > STACK_EVENT_MAX {
        return;
    }
    let flags = if wake {
        u64::from(BPF_RB_FORCE_WAKEUP)
    } else {
        wakeup_flags(layout)
    };
    // SAFETY: `size` bytes from `base` are inside the slot (checked above).
    unsafe { output_bytes(base, size, flags) };
}

/// The header of a stack event of the current task (`pid_tgid`) at `ts`.
#[inline(always)]
pub(crate) fn stack_header(ts: u64, pid_tgid: u64) -> EventHeader {
    EventHeader {
        kind: STACK_KIND,
        // SAFETY: the helper takes no arguments and only reads the CPU id.
        cpu: unsafe { aya_ebpf::helpers::bpf_get_smp_processor_id() },
        ts,
        tid: pid_tgid as u32,
        tgid: (pid_tgid >> 32) as u32,
    }
}

/// Writes the calling stack of a probe's event (source `source`, probe
/// `id`, at `ts`) when the layout asks for that source's stacks; the
/// kernel stack with `kernel` (walked from `ctx`).
#[inline(always)]
pub(crate) fn probe_stack(
    ctx: *mut c_void,
    layout: &KernelLayout,
    source: u32,
    id: u64,
    ts: u64,
    pid_tgid: u64,
    kernel: bool,
) {
    if layout.stacks.probe_sources & (1 << source) == 0 {
        return;
    }
    let info = StackInfo {
        header: stack_header(ts, pid_tgid),
        source,
        flags: 0,
        id,
        start_ts: ts,
        end_ts: ts,
        other_tid: 0,
        other_tgid: 0,
    };
    let kernel = if kernel {
        KernelStack::Walk
    } else {
        KernelStack::Without
    };
    write_stack(ctx, layout, &info, kernel, true);
}
