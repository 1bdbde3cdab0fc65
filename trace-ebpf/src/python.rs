//! Python frames of the current thread (`trace_common::kernel::python`):
//! for a process the manager put in `PYTHON_PROCS`, the thread's
//! `PyThreadState` found through the interpreter's thread list (cached per
//! thread), then its frames followed through `previous`, each written as a
//! `PythonFrame` for userspace to name.

use core::ffi::c_void;
use core::ptr;

use aya_ebpf::{
    helpers::generated,
    macros::map,
    maps::{LruHashMap, PerCpuArray},
};
use trace_common::kernel::python::{
    PYTHON_ABSENT, PYTHON_FRAME_ENTRY, PYTHON_FRAME_SHIM, PYTHON_FRAMES_MAX, PYTHON_PROCS_MAX,
    PYTHON_SEEN_MAX, PYTHON_THREAD_SEARCH, PYTHON_THREADS_MAX, PythonFrame, PythonLayout,
    PythonProcess,
};
use trace_common::kernel::stack::{STACK_EVENT_MAX, STACK_SLOTS};

use crate::maps::scratch;

/// Processes running a readable interpreter (filled by the manager).
#[map(name = "PYTHON_PROCS")]
static PYTHON_PROCS: LruHashMap<u32, PythonProcess> =
    LruHashMap::with_max_entries(PYTHON_PROCS_MAX, 0);

/// Thread id → its `PyThreadState`, as last found.
#[map(name = "PYTHON_THREADS")]
static PYTHON_THREADS: LruHashMap<u32, u64> = LruHashMap::with_max_entries(PYTHON_THREADS_MAX, 0);

/// Python stacks written before, by a hash of their code objects.
#[map(name = "PYTHON_SEEN")]
static PYTHON_SEEN: LruHashMap<u64, u8> = LruHashMap::with_max_entries(PYTHON_SEEN_MAX, 0);

/// What [`write_python`] wrote.
pub(crate) struct PythonRun {
    /// Bytes of frames written.
    pub(crate) len: usize,
    /// The stack's code objects were not seen together before: the reader
    /// should read them at once.
    pub(crate) new: bool,
}

/// The `u64` at user address `at` of the current task.
#[inline(always)]
fn user_u64(at: u64) -> Option<u64> {
    let mut v = 0u64;
    // SAFETY: writes 8 bytes into `v`; the helper checks `at` itself.
    let ret = unsafe {
        generated::bpf_probe_read_user(ptr::addr_of_mut!(v).cast(), 8, at as *const c_void)
    };
    (ret == 0).then_some(v)
}

/// The byte at user address `at` of the current task.
#[inline(always)]
fn user_u8(at: u64) -> Option<u8> {
    let mut v = 0u8;
    // SAFETY: writes 1 byte into `v`; the helper checks `at` itself.
    let ret = unsafe {
        generated::bpf_probe_read_user(ptr::addr_of_mut!(v).cast(), 1, at as *const c_void)
    };
    (ret == 0).then_some(v)
}

/// A walk's state, one per stack scratch slot (a sample may interrupt a
/// program walking on the same CPU): `bpf_loop` callbacks may only be
/// handed stack memory, and the stack has no room to spare, so they are
/// handed the slot's number and find the state here.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Walk {
    /// The thread search: the thread state to look at next (0: none left).
    ts: u64,
    /// The thread searched for.
    tid: u64,
    /// The thread state found (0: not yet).
    found: u64,
    /// The frame to read next (0: none left).
    frame: u64,
    /// Frames written.
    n: u64,
    /// A hash of the code objects written.
    hash: u64,
    /// Where in the slot the frames go.
    at: u64,
    layout: PythonLayout,
}

#[map(name = "PYTHON_WALK")]
static PYTHON_WALK: PerCpuArray<Walk> = PerCpuArray::with_max_entries(STACK_SLOTS, 0);

/// The walk state of the slot `*ctx` names.
#[inline(always)]
fn walk_of(ctx: *mut c_void) -> Option<(u32, &'static mut Walk)> {
    // SAFETY: `ctx` is the slot number on the caller's stack that
    // `bpf_loop` hands each step.
    let slot = unsafe { *ctx.cast::<u32>() };
    let w = PYTHON_WALK.get_ptr_mut(slot)?;
    // SAFETY: this CPU's state of that slot, used by one program at a time
    // (the slot's owner).
    Some((slot, unsafe { &mut *w }))
}

/// One step of the thread search (a `bpf_loop` callback: the verifier
/// checks it once, not once per step).
#[inline(never)]
extern "C" fn search_step(_index: u64, ctx: *mut c_void) -> i64 {
    let Some((_, s)) = walk_of(ctx) else {
        return 1;
    };
    if s.ts == 0 {
        return 1;
    }
    if user_u64(s.ts + u64::from(s.layout.thread_native_id)) == Some(s.tid) {
        s.found = s.ts;
        return 1;
    }
    s.ts = user_u64(s.ts + u64::from(s.layout.thread_next)).unwrap_or(0);
    0
}

/// The `PyThreadState` of thread `tid` in process `p`, searched with the
/// walk state `w` of slot `slot`.
#[inline(always)]
fn thread_state(p: &PythonProcess, tid: u32, slot: u32, w: *mut Walk) -> Option<u64> {
    let l = &p.layout;
    let native = u64::from(l.thread_native_id);
    // SAFETY: a lookup in an LRU hash; the value is copied at once.
    if let Some(ts) = unsafe { PYTHON_THREADS.get(tid) }.copied()
        && user_u64(ts + native) == Some(u64::from(tid))
    {
        return Some(ts);
    }
    let interp = user_u64(p.interpreters_head)?;
    let first = user_u64(interp + u64::from(l.interp_threads_head))?;
    // SAFETY: `w` is this CPU's walk state of the slot this program owns.
    // The callbacks change it behind the compiler's back: it is written
    // and read through volatile accesses around `bpf_loop`.
    unsafe {
        ptr::write_volatile(ptr::addr_of_mut!((*w).ts), first);
        ptr::write_volatile(ptr::addr_of_mut!((*w).tid), u64::from(tid));
        ptr::write_volatile(ptr::addr_of_mut!((*w).found), 0);
    }
    let mut ctx = slot;
    // SAFETY: the callback takes the slot number given, which outlives the
    // call.
    unsafe {
        generated::bpf_loop(
            PYTHON_THREAD_SEARCH as u32,
            search_step as *mut c_void,
            ptr::addr_of_mut!(ctx).cast(),
            0,
        )
    };
    // SAFETY: as above.
    let found = unsafe { ptr::read_volatile(ptr::addr_of!((*w).found)) };
    if found == 0 {
        return None;
    }
    let _ = PYTHON_THREADS.insert(tid, found, 0);
    Some(found)
}

/// Reads one frame and writes it (a `bpf_loop` callback).
#[inline(never)]
extern "C" fn walk_step(_index: u64, ctx: *mut c_void) -> i64 {
    let Some((slot, w)) = walk_of(ctx) else {
        return 1;
    };
    let frame = w.frame;
    let n = w.n as usize;
    if frame == 0 || n >= PYTHON_FRAMES_MAX {
        return 1;
    }
    let Some(base) = scratch(slot) else {
        return 1;
    };
    let l = &w.layout;
    let Some(previous) = user_u64(frame + u64::from(l.frame_previous)) else {
        return 1;
    };
    let code = user_u64(frame + u64::from(l.frame_code)).unwrap_or(0);
    let instr = user_u64(frame + u64::from(l.frame_instr)).unwrap_or(0);
    let mut flags = 0;
    if l.frame_is_entry != PYTHON_ABSENT
        && user_u8(frame + u64::from(l.frame_is_entry)).unwrap_or(0) != 0
    {
        flags |= PYTHON_FRAME_ENTRY;
    }
    if l.owner_cstack != PYTHON_ABSENT
        && user_u8(frame + u64::from(l.frame_owner)).map(u32::from) == Some(l.owner_cstack)
    {
        flags |= PYTHON_FRAME_SHIM;
    }
    let stamp = if code != 0 {
        user_u64(code + u64::from(l.code_stamp)).unwrap_or(0)
    } else {
        0
    };
    let stamp = (stamp ^ (stamp >> 32)) as u32;
    let f = PythonFrame {
        code,
        instr,
        stamp,
        flags,
    };
    let at = (w.at as usize & 0xfff) + n * size_of::<PythonFrame>();
    if at + size_of::<PythonFrame>() > STACK_EVENT_MAX {
        return 1;
    }
    // SAFETY: `at` plus a frame is inside the slot (checked).
    unsafe { base.add(at).cast::<PythonFrame>().write_unaligned(f) };
    w.hash = (w.hash ^ code ^ u64::from(stamp)).wrapping_mul(0x100_0000_01b3);
    w.n += 1;
    w.frame = previous;
    0
}

/// Writes the Python frames of the current thread (`tgid`, `tid`) at byte
/// `at` of stack scratch slot `slot`, which has room for `PYTHON_RUN_MAX`
/// bytes there; nothing for a process not in `PYTHON_PROCS` or a thread
/// that runs no Python.
#[inline(always)]
pub(crate) fn write_python(slot: u32, at: usize, tgid: u32, tid: u32) -> PythonRun {
    let none = PythonRun { len: 0, new: false };
    // SAFETY: a lookup in an LRU hash; the value stays valid while the
    // program runs (it is read, never written, here).
    let Some(p) = (unsafe { PYTHON_PROCS.get(tgid) }) else {
        return none;
    };
    let Some(w) = PYTHON_WALK.get_ptr_mut(slot) else {
        return none;
    };
    // SAFETY: this CPU's walk state of the slot this program owns; the
    // callbacks change it behind the compiler's back, so it is written and
    // read through volatile accesses around `bpf_loop`. The layout is
    // copied from map value to map value.
    unsafe { ptr::copy_nonoverlapping(ptr::addr_of!(p.layout), ptr::addr_of_mut!((*w).layout), 1) };
    let l = &p.layout;
    let Some(ts) = thread_state(p, tid, slot, w) else {
        return none;
    };
    let current = if l.thread_cframe != PYTHON_ABSENT {
        match user_u64(ts + u64::from(l.thread_cframe)) {
            Some(cframe) if cframe != 0 => user_u64(cframe + u64::from(l.current_frame)),
            _ => None,
        }
    } else {
        user_u64(ts + u64::from(l.current_frame))
    };
    let Some(frame) = current else {
        return none;
    };
    // SAFETY: as above.
    unsafe {
        ptr::write_volatile(ptr::addr_of_mut!((*w).frame), frame);
        ptr::write_volatile(ptr::addr_of_mut!((*w).n), 0);
        ptr::write_volatile(ptr::addr_of_mut!((*w).hash), u64::from(tgid));
        ptr::write_volatile(ptr::addr_of_mut!((*w).at), at as u64);
    }
    let mut ctx = slot;
    // SAFETY: the callback takes the slot number given, which outlives the
    // call.
    unsafe {
        generated::bpf_loop(
            PYTHON_FRAMES_MAX as u32,
            walk_step as *mut c_void,
            ptr::addr_of_mut!(ctx).cast(),
            0,
        )
    };
    // SAFETY: as above.
    let (n, hash) = unsafe {
        (
            ptr::read_volatile(ptr::addr_of!((*w).n)),
            ptr::read_volatile(ptr::addr_of!((*w).hash)),
        )
    };
    if n == u64::MAX {
        // Never: the callbacks are also called directly, so that they stay
        // the program's functions where the manager took the `bpf_loop`
        // calls out (a kernel without it), which a function only handed to
        // `bpf_loop` would not be.
        search_step(0, ptr::addr_of_mut!(ctx).cast());
        walk_step(0, ptr::addr_of_mut!(ctx).cast());
    }
    let n = (n as usize).min(PYTHON_FRAMES_MAX);
    if n == 0 {
        return none;
    }
    // SAFETY: a lookup in an LRU hash.
    let new = unsafe { PYTHON_SEEN.get(hash) }.is_none();
    if new {
        let _ = PYTHON_SEEN.insert(hash, 1u8, 0);
    }
    PythonRun {
        len: n * size_of::<PythonFrame>(),
        new,
    }
}
