//! The raw record of a classic tracepoint, copied once into this CPU's
//! scratch buffer, and its fields read at the offsets userspace put in the
//! layout.

use core::ffi::c_void;
use core::ptr;

use aya_ebpf::{
    EbpfContext as _,
    bindings::{BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP},
    helpers::{bpf_probe_read_kernel_str_bytes, generated},
    maps::ring_buf::RingBufEntry,
    programs::TracePointContext,
};
use trace_common::kernel::{
    ABSENT_INT, COMM_LEN, FieldLoc, KernelLayout, MAX_RECORD_BYTES, ProcessExitEvent,
    SchedSwitchEvent, SchedWakeupEvent, TaskNewtaskEvent, TaskRenameEvent, WAKEUP_CHECK_INTERVAL,
};

use crate::maps::{SCRATCH, Scratch};
use crate::ring::ring_backlog;

/// Offsets into the scratch copy are masked with this (for the verifier;
/// userspace keeps every field within `MAX_RECORD_BYTES`).
pub(crate) const OFFSET_MASK: usize = MAX_RECORD_BYTES as usize - 1;

const _: () = assert!((MAX_RECORD_BYTES as usize).is_power_of_two());

// Every name field of an event is 8-aligned (see `Record::comm`).
const _: () = {
    use core::mem::offset_of;
    assert!(offset_of!(Scratch, record) % 8 == 0);
    assert!(offset_of!(SchedSwitchEvent, prev_comm) % 8 == 0);
    assert!(offset_of!(SchedSwitchEvent, next_comm) % 8 == 0);
    assert!(offset_of!(SchedWakeupEvent, comm) % 8 == 0);
    assert!(offset_of!(TaskNewtaskEvent, comm) % 8 == 0);
    assert!(offset_of!(ProcessExitEvent, comm) % 8 == 0);
    assert!(offset_of!(TaskRenameEvent, oldcomm) % 8 == 0);
    assert!(offset_of!(TaskRenameEvent, newcomm) % 8 == 0);
};

/// The raw tracepoint record, copied into this CPU's scratch buffer.
pub(crate) struct Record<'a> {
    ctx: &'a TracePointContext,
    scratch: *mut Scratch,
}

impl<'a> Record<'a> {
    /// Copies the first `size` bytes of the record (at most
    /// `MAX_RECORD_BYTES`); `None` if the copy fails.
    #[inline(always)]
    pub(crate) fn copy(ctx: &'a TracePointContext, size: u16) -> Option<Record<'a>> {
        let scratch = SCRATCH.get_ptr_mut(0)?;
        let size = if size > MAX_RECORD_BYTES {
            MAX_RECORD_BYTES
        } else {
            size
        };
        // SAFETY: `scratch` points at this CPU's `Scratch` (the program owns
        // it for this run), whose `record` holds more than MAX_RECORD_BYTES
        // bytes; the helper checks the source address itself, and `size`
        // bytes lie inside the record (userspace computed it from the
        // format file).
        let ret = unsafe {
            generated::bpf_probe_read_kernel(
                ptr::addr_of_mut!((*scratch).record).cast::<c_void>(),
                u32::from(size),
                ctx.as_ptr(),
            )
        };
        (ret == 0).then_some(Record { ctx, scratch })
    }

    /// Pointer to byte `offset` of the copied record (offset masked so the
    /// verifier sees every read stays inside the scratch buffer).
    #[inline(always)]
    pub(crate) fn at(&self, offset: u16) -> *const u8 {
        // SAFETY: the masked offset is below MAX_RECORD_BYTES, and at least
        // 2 * COMM_LEN bytes of `record` follow it; the pointer is derived
        // without a reference, so nothing is asserted about the contents.
        unsafe {
            ptr::addr_of!((*self.scratch).record)
                .cast::<u8>()
                .add(offset as usize & OFFSET_MASK)
        }
    }

    /// The integer field `field`, sign- or zero-extended; `ABSENT_INT` when
    /// this kernel lacks it.
    #[inline(always)]
    pub(crate) fn int(&self, field: &FieldLoc) -> i64 {
        if !field.is_present() {
            return ABSENT_INT as i64;
        }
        let p = self.at(field.offset);
        let signed = field.flags & FieldLoc::SIGNED != 0;
        // SAFETY: `p` points into the scratch copy with at least 8 readable
        // bytes after it. It is aligned for the read: the scratch record is
        // 8-aligned and userspace accepts an integer field only at an offset
        // that is a multiple of its size (as C lays out the record).
        unsafe {
            match field.size {
                1 => {
                    let v = p.read();
                    if signed { v as i8 as i64 } else { v as i64 }
                }
                2 => {
                    let v = p.cast::<u16>().read();
                    if signed { v as i16 as i64 } else { v as i64 }
                }
                4 => {
                    let v = p.cast::<u32>().read();
                    if signed { v as i32 as i64 } else { v as i64 }
                }
                8 => p.cast::<i64>().read(),
                _ => ABSENT_INT as i64,
            }
        }
    }

    /// A signed integer field at most 32 bits wide.
    #[inline(always)]
    pub(crate) fn i32(&self, field: &FieldLoc) -> i32 {
        self.int(field) as i32
    }

    /// A thread or process id field (`pid_t`); `ABSENT_ID` when absent.
    #[inline(always)]
    pub(crate) fn id(&self, field: &FieldLoc) -> u32 {
        self.int(field) as u32
    }

    /// Writes the name field `field` to `dst`, NUL-padded: an inline
    /// `char[N]` is copied from the scratch copy, a `__data_loc` or
    /// `__rel_loc` string is read from the record.
    ///
    /// # Safety
    ///
    /// `dst` must be valid for writes of `COMM_LEN` bytes and 8-aligned (every
    /// name field of the event structs is).
    #[inline(always)]
    pub(crate) unsafe fn comm(&self, field: &FieldLoc, dst: *mut [u8; COMM_LEN]) {
        let words = dst.cast::<[u64; 2]>();
        let inline = field.flags & (FieldLoc::DATA_LOC | FieldLoc::REL_LOC) == 0;
        if field.is_present() && inline && field.size as usize >= COMM_LEN {
            // The common case: a whole `char[16]` (the kernel NUL-terminates
            // a task name within it), copied with the widest aligned loads
            // the field's offset allows.
            let src = self.at(field.offset);
            // SAFETY: 16 readable bytes follow `src` in the scratch copy (an
            // 8-aligned buffer), each load is aligned as its branch checks,
            // and `dst` is writable and 8-aligned (the caller's contract).
            unsafe {
                if field.offset.is_multiple_of(8) {
                    let src = src.cast::<u64>();
                    write_words(words, src.read(), src.add(1).read());
                } else if field.offset.is_multiple_of(4) {
                    let src = src.cast::<u32>();
                    write_words(
                        words,
                        u64::from(src.read()) | u64::from(src.add(1).read()) << 32,
                        u64::from(src.add(2).read()) | u64::from(src.add(3).read()) << 32,
                    );
                } else {
                    write_words(words, 0, 0);
                    for i in 0..COMM_LEN {
                        *dst.cast::<u8>().add(i) = *src.add(i);
                    }
                }
            }
            return;
        }
        // SAFETY: `dst` is writable and 8-aligned (the caller's contract).
        unsafe { write_words(words, 0, 0) };
        if !field.is_present() {
            return;
        }
        if !inline {
            // SAFETY: `dst` was just initialised, so a reference is sound.
            let dst = unsafe { &mut *dst };
            self.dynamic_str(field, dst);
            return;
        }
        // A shorter array: copy what there is, keep the rest NUL.
        let src = self.at(field.offset);
        let len = field.size as usize;
        for i in 0..COMM_LEN - 1 {
            if i < len {
                // SAFETY: `i` < 16: inside the scratch copy after `src`, and
                // inside `dst`.
                unsafe { *dst.cast::<u8>().add(i) = *src.add(i) };
            }
        }
    }

    /// Reads the `__data_loc` / `__rel_loc` string `field` from the record
    /// into `dst` (NUL-terminated, truncated to fit); returns its length
    /// without the terminator, 0 when unreadable.
    #[inline(always)]
    pub(crate) fn dynamic_str(&self, field: &FieldLoc, dst: &mut [u8]) -> usize {
        if !field.is_present() {
            return 0;
        }
        // SAFETY: 4 readable bytes follow the masked offset in the scratch
        // copy, 4-aligned: userspace accepts a location word only at a
        // multiple of 4 in the 8-aligned copy.
        let loc = unsafe { self.at(field.offset).cast::<u32>().read() };
        let rel = (loc & 0xffff) as usize;
        let start = if field.flags & FieldLoc::REL_LOC != 0 {
            field.offset as usize + 4 + rel
        } else {
            rel
        };
        let src = (self.ctx.as_ptr() as *const u8).wrapping_add(start);
        // SAFETY: the source is inside the tracepoint record (the record's
        // own location word says so); the helper checks the address, copies
        // at most `dst.len()` bytes and NUL-terminates.
        match unsafe { bpf_probe_read_kernel_str_bytes(src, dst) } {
            Ok(bytes) => bytes.len(),
            Err(_) => 0,
        }
    }

    /// Whether the reader should be woken now: every
    /// `WAKEUP_CHECK_INTERVAL` events on this CPU, when at least
    /// `wakeup_bytes` wait in the ring buffer.
    #[inline(always)]
    pub(crate) fn submit_flags(&self, layout: &KernelLayout) -> u64 {
        // SAFETY: the program owns this CPU's scratch for this run.
        let events = unsafe {
            let count = ptr::addr_of_mut!((*self.scratch).events);
            let n = count.read().wrapping_add(1);
            count.write(n);
            n
        };
        if layout.wakeup_bytes == 0 {
            return 0;
        }
        if events & (WAKEUP_CHECK_INTERVAL - 1) == 0
            && ring_backlog() >= u64::from(layout.wakeup_bytes)
        {
            BPF_RB_FORCE_WAKEUP.into()
        } else {
            BPF_RB_NO_WAKEUP.into()
        }
    }

    /// Submits `entry`, waking the reader if [`Record::submit_flags`] says so.
    #[inline(always)]
    pub(crate) fn submit<T>(&self, layout: &KernelLayout, entry: RingBufEntry<T>) {
        entry.submit(self.submit_flags(layout));
    }
}

/// Stores a 16-byte name as two words. Volatile stores keep LLVM from
/// turning them into a `memset`/`memcpy` call (a BPF-to-BPF call here).
///
/// # Safety
///
/// `dst` must be valid for writes of 16 bytes and 8-aligned.
#[inline(always)]
pub(crate) unsafe fn write_words(dst: *mut [u64; 2], first: u64, second: u64) {
    let dst = dst.cast::<u64>();
    // SAFETY: both words are inside `dst` and aligned (the caller's contract).
    unsafe {
        ptr::write_volatile(dst, first);
        ptr::write_volatile(dst.add(1), second);
    }
}
