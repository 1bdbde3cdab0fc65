//! Tracepoints selected by name (`-e GROUP:EVENT`): one program, attached to
//! every selected tracepoint, that copies the raw record, filters it and
//! writes it whole (see `trace_common::kernel::tracepoint`).

use core::ffi::c_void;
use core::mem::size_of;
use core::ptr;

use aya_ebpf::{
    EbpfContext as _,
    helpers::{bpf_get_current_pid_tgid, bpf_get_smp_processor_id, generated},
    macros::{map, tracepoint},
    maps::{HashMap, PerCpuArray},
    programs::TracePointContext,
};
use trace_common::kernel::EventHeader;
use trace_common::kernel::stack::SOURCE_TRACEPOINT;
use trace_common::kernel::tracepoint::{
    DATA_MAX, FILTER_MAX_INSNS, FILTER_TEXT_MAX, FLAG_DATA_LOC, FLAG_PREFIX, FLAG_REL_LOC,
    FLAG_SIGNED, FilterInsn, LOC_RELATIVE, LOCS_MAX, OP_AND, OP_BITS, OP_EQ, OP_GE, OP_GT, OP_LE,
    OP_LT, OP_NE, OP_NOT, OP_OR, OP_TEXT, SCRATCH_BYTES, STRING_MAX, STRING_UNREADABLE,
    STRINGS_MAX, TRACEPOINT_KIND, TRACEPOINTS_MAX, TracepointConfig, TracepointEvent,
};

use crate::follow::wanted_current;
use crate::ring::{layout, now, output, wakeup_flags};
use crate::stack::probe_stack;

/// What each selected tracepoint's events go through, by tracepoint id.
#[map(name = "TRACEPOINTS")]
static TRACEPOINTS: HashMap<u32, TracepointConfig> = HashMap::with_max_entries(TRACEPOINTS_MAX, 0);

/// Per-CPU space an event is assembled in before it is copied to the ring.
#[repr(C, align(8))]
struct EventScratch {
    bytes: [u8; SCRATCH_BYTES],
    /// The filter's result stack between steps.
    stack: u64,
    /// The record's length while the location words are read.
    len: u64,
}

/// Stores `value` in map memory and reads it back: the verifier then knows
/// nothing of it but what the caller masks, so the paths that computed it
/// differently become one state (instead of a state per path, which
/// multiplies through the rest of the program).
///
/// # Safety
///
/// `slot` must point into this CPU's scratch map value.
#[inline(always)]
unsafe fn forget(slot: *mut u64, value: u64) -> u64 {
    // SAFETY: the caller's contract.
    unsafe {
        ptr::write_volatile(slot, value);
        ptr::read_volatile(slot)
    }
}

/// One [`EventScratch`] per CPU. Tracepoint programs do not nest on a CPU.
#[map(name = "TP_SCRATCH")]
static TP_SCRATCH: PerCpuArray<EventScratch> = PerCpuArray::with_max_entries(1, 0);

/// Where the record starts in the scratch area.
const HEAD: usize = size_of::<TracepointEvent>();
/// Masks an offset into the record copy (for the verifier).
const DATA_MASK: usize = DATA_MAX - 1;
/// Masks where the next string goes (for the verifier; userspace's limits
/// keep it below this).
const STRINGS_MASK: usize = 2048 - 1;

const _: () = assert!(HEAD + DATA_MAX + 8 <= SCRATCH_BYTES);
// Where the last string starts stays below the mask, so masking changes nothing.
const _: () = assert!(HEAD + DATA_MAX + (STRINGS_MAX - 1) * (2 + STRING_MAX) <= STRINGS_MASK);
const _: () = assert!(STRINGS_MASK + 1 + 2 + STRING_MAX <= SCRATCH_BYTES);

/// Every selected tracepoint.
#[tracepoint]
pub fn tracepoint_any(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let pid_tgid = bpf_get_current_pid_tgid();
    // Never the recorder's own process: reading the rings would record
    // itself (system calls, allocations) without end.
    if (pid_tgid >> 32) as u32 == layout.self_tgid || !wanted_current(layout, pid_tgid as u32) {
        return 0;
    }
    // The record's `common_*` words hold a register pointer for BPF
    // programs, not the tracepoint's id: userspace attached this program
    // with the id as its cookie.
    // SAFETY: `ctx` is the context the kernel passed to this program.
    let id = unsafe { generated::bpf_get_attach_cookie(ctx.as_ptr()) } as u32;
    // SAFETY: the value is plain data userspace wrote; it is only read.
    let Some(config) = (unsafe { TRACEPOINTS.get(id) }) else {
        return 0;
    };
    let Some(scratch) = TP_SCRATCH.get_ptr_mut(0) else {
        return 0;
    };
    let base = scratch.cast::<u8>();
    let data = base.wrapping_add(HEAD);

    // The fixed part, then whatever the location words point at.
    let fixed = (config.fixed_len as usize) & DATA_MASK;
    // SAFETY: `data` has DATA_MAX bytes of room; the source is the record
    // (userspace took `fixed_len` from its format), checked by the helper.
    if unsafe { read_kernel(data, fixed, ctx.as_ptr()) }.is_err() {
        return 0;
    }
    // SAFETY: the field is in this CPU's scratch, which this run owns.
    let len_slot = unsafe { ptr::addr_of_mut!((*scratch).len) };
    let mut len = fixed;
    for i in 0..LOCS_MAX {
        if i >= config.n_locs as usize {
            break;
        }
        let word = config.locs[i];
        let at = (word & !LOC_RELATIVE) as usize;
        if at + 4 > fixed {
            continue;
        }
        // SAFETY: `at + 4 <= fixed`, inside the copy.
        let loc = unsafe { ptr::read_unaligned(data.add(at & DATA_MASK).cast::<u32>()) };
        let mut end = (loc & 0xffff) as usize + (loc >> 16) as usize;
        if word & LOC_RELATIVE != 0 {
            end += at + 4;
        }
        if end > len {
            len = end;
        }
        // SAFETY: `len_slot` is in this CPU's scratch.
        len = unsafe { forget(len_slot, len as u64) } as usize & 0x3_ffff;
    }
    let mut cut = 0;
    if len > DATA_MAX - 1 {
        cut = len - (DATA_MAX - 1);
        len = DATA_MAX - 1;
    }
    if len > fixed {
        // Masked after a trip through memory: the compiler would drop a
        // mask it can prove redundant, which the verifier cannot.
        // SAFETY: `len_slot` is in this CPU's scratch.
        let rest = unsafe { forget(len_slot, (len - fixed) as u64) } as usize & DATA_MASK;
        let src = (ctx.as_ptr() as *const u8).wrapping_add(fixed);
        // SAFETY: `fixed + rest < DATA_MAX`, inside the scratch area; the
        // source is the record's dynamic part, checked by the helper.
        if unsafe { read_kernel(data.wrapping_add(fixed & DATA_MASK), rest, src.cast()) }.is_err() {
            return 0;
        }
    }

    // SAFETY: the field is in this CPU's scratch, which this run owns.
    let stack = unsafe { ptr::addr_of_mut!((*scratch).stack) };
    if config.n_insns != 0 && !keep(config, data, stack) {
        return 0;
    }

    // User strings (a system call's file name) after the record.
    let mut pos = HEAD + len;
    let mut n_strings = 0u32;
    for i in 0..STRINGS_MAX {
        if i >= config.n_strings as usize {
            break;
        }
        let at = config.strings[i] as usize & DATA_MASK;
        // SAFETY: the pointer field lies in the copy (userspace checked it
        // is within the fixed part).
        let user = unsafe { ptr::read_unaligned(data.add(at).cast::<u64>()) };
        let slot = base.wrapping_add(pos & STRINGS_MASK);
        // SAFETY: `slot` plus 2 + STRING_MAX bytes is inside the scratch
        // area (see the assertions above); the helper checks the user
        // address, writes at most STRING_MAX bytes and NUL-terminates.
        let n = unsafe {
            generated::bpf_probe_read_user_str(
                slot.wrapping_add(2).cast::<c_void>(),
                STRING_MAX as u32,
                user as *const c_void,
            )
        };
        let text = if n > 0 {
            ((n - 1) as usize) & (STRING_MAX - 1)
        } else {
            0
        };
        let stored = if n > 0 {
            text as u16
        } else {
            STRING_UNREADABLE
        };
        // SAFETY: two bytes at `slot`, inside the scratch area.
        unsafe { ptr::write_unaligned(slot.cast::<u16>(), stored) };
        pos = (pos & STRINGS_MASK) + 2 + text;
        n_strings += 1;
    }

    let event = TracepointEvent {
        header: EventHeader {
            kind: TRACEPOINT_KIND,
            // SAFETY: the helper takes no arguments and only reads the CPU id.
            cpu: unsafe { bpf_get_smp_processor_id() },
            ts,
            tid: pid_tgid as u32,
            tgid: (pid_tgid >> 32) as u32,
        },
        id,
        data_len: len as u16,
        cut: if cut > usize::from(u16::MAX) {
            u16::MAX
        } else {
            cut as u16
        },
        n_strings,
        reserved: 0,
    };
    // SAFETY: the scratch area starts with room for the event, 8-aligned.
    unsafe { ptr::write(base.cast::<TracepointEvent>(), event) };
    let size = pos & (SCRATCH_BYTES - 1);
    let flags = wakeup_flags(layout);
    // SAFETY: `size` bytes from `base` are inside the scratch area.
    unsafe { output(base, size, flags) };
    probe_stack(
        ctx.as_ptr(),
        layout,
        SOURCE_TRACEPOINT,
        u64::from(id),
        ts,
        pid_tgid,
        true,
    );
    0
}

/// `bpf_probe_read_kernel` of `len` bytes.
///
/// # Safety
///
/// `dst` must be valid for writes of `len` bytes.
#[inline(always)]
unsafe fn read_kernel(dst: *mut u8, len: usize, src: *const c_void) -> Result<(), i64> {
    // SAFETY: the caller's contract; the helper checks `src` itself.
    let ret = unsafe { generated::bpf_probe_read_kernel(dst.cast(), len as u32, src) };
    if ret == 0 { Ok(()) } else { Err(ret) }
}

/// What the filter loop's steps share.
#[repr(C)]
struct FilterRun {
    config: *const TracepointConfig,
    data: *const u8,
    /// A stack of results, one bit each, the top in bit 0 (in map memory,
    /// so that the verifier does not tell its values apart).
    stack: *mut u64,
}

/// Runs the filter program on the record copy at `data`, one instruction
/// per `bpf_loop` step (the verifier checks a step once, not each
/// instruction's every path), with its result stack at `stack` (in this
/// CPU's scratch).
#[inline(always)]
fn keep(config: &TracepointConfig, data: *const u8, stack: *mut u64) -> bool {
    // SAFETY: `stack` is in this CPU's scratch, which this run owns.
    unsafe { ptr::write_volatile(stack, 0) };
    let mut run = FilterRun {
        config: ptr::from_ref(config),
        data,
        stack,
    };
    let n = (config.n_insns as u32).min(FILTER_MAX_INSNS as u32);
    // SAFETY: `filter_step` has the callback signature `bpf_loop` wants and
    // reads `run`, which outlives the call, through the context pointer.
    let ret = unsafe {
        generated::bpf_loop(
            n,
            filter_step as *mut c_void,
            ptr::from_mut(&mut run).cast(),
            0,
        )
    };
    // SAFETY: as above.
    ret >= 0 && unsafe { ptr::read_volatile(stack) } & 1 != 0
}

/// One filter instruction (a `bpf_loop` callback).
extern "C" fn filter_step(index: u64, ctx: *mut c_void) -> i64 {
    // SAFETY: `ctx` is the `FilterRun` `keep` passed, alive for the loop.
    let run = unsafe { &mut *ctx.cast::<FilterRun>() };
    // SAFETY: `config` points at the map value `keep` looked up.
    let config = unsafe { &*run.config };
    let insn = &config.insns[index as usize & (FILTER_MAX_INSNS - 1)];
    // SAFETY: `run.stack` points into this CPU's scratch.
    let stack = unsafe { ptr::read_volatile(run.stack) };
    let next = match insn.op {
        OP_AND => (stack >> 2) << 1 | (stack & (stack >> 1) & 1),
        OP_OR => (stack >> 2) << 1 | ((stack | (stack >> 1)) & 1),
        OP_NOT => stack ^ 1,
        OP_TEXT => stack << 1 | u64::from(text_matches(insn, run.data)),
        op => stack << 1 | u64::from(compare(op, insn, run.data)),
    };
    // SAFETY: as above.
    unsafe { ptr::write_volatile(run.stack, next) };
    0
}

/// An integer comparison.
#[inline(always)]
fn compare(op: u8, insn: &FilterInsn, data: *const u8) -> bool {
    let at = data.wrapping_add(insn.offset as usize & DATA_MASK);
    // SAFETY: at most 8 bytes past a masked offset, inside the scratch area.
    let (raw, bits) = unsafe {
        match insn.size {
            1 => (u64::from(ptr::read_unaligned(at)), 8),
            2 => (u64::from(ptr::read_unaligned(at.cast::<u16>())), 16),
            4 => (u64::from(ptr::read_unaligned(at.cast::<u32>())), 32),
            _ => (ptr::read_unaligned(at.cast::<u64>()), 64),
        }
    };
    if insn.flags & FLAG_SIGNED != 0 {
        let shift = 64 - bits;
        let v = ((raw << shift) as i64) >> shift;
        let c = insn.value as i64;
        match op {
            OP_EQ => v == c,
            OP_NE => v != c,
            OP_LT => v < c,
            OP_LE => v <= c,
            OP_GT => v > c,
            OP_GE => v >= c,
            OP_BITS => raw & insn.value != 0,
            _ => false,
        }
    } else {
        let c = insn.value;
        match op {
            OP_EQ => raw == c,
            OP_NE => raw != c,
            OP_LT => raw < c,
            OP_LE => raw <= c,
            OP_GT => raw > c,
            OP_GE => raw >= c,
            OP_BITS => raw & c != 0,
            _ => false,
        }
    }
}

/// A text comparison: a `char[N]` field, or the string a location word
/// points at.
#[inline(always)]
fn text_matches(insn: &FilterInsn, data: *const u8) -> bool {
    let at = insn.offset as usize & DATA_MASK;
    let mut start = at;
    // Bytes the field holds, its NUL included when it has one.
    let mut room = insn.size as usize;
    if insn.flags & (FLAG_DATA_LOC | FLAG_REL_LOC) != 0 {
        // SAFETY: 4 bytes past a masked offset, inside the scratch area.
        let loc = unsafe { ptr::read_unaligned(data.add(at).cast::<u32>()) };
        start = (loc & 0xffff) as usize;
        if insn.flags & FLAG_REL_LOC != 0 {
            start += at + 4;
        }
        room = (loc >> 16) as usize;
    }
    let len = insn.len as usize;
    if len > room {
        return false;
    }
    let start = start & DATA_MASK;
    for i in 0..FILTER_TEXT_MAX {
        if i >= len {
            break;
        }
        // SAFETY: a masked offset plus at most FILTER_TEXT_MAX bytes,
        // inside the scratch area.
        let byte = unsafe { ptr::read(data.add(start + i)) };
        if byte != insn.text[i] {
            return false;
        }
    }
    if insn.flags & FLAG_PREFIX != 0 || len == room {
        return true;
    }
    // SAFETY: a masked offset plus a `u8` length, inside the scratch area.
    unsafe { ptr::read(data.add(start + len)) == 0 }
}
