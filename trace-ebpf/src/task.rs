//! Fields of kernel objects (`task_struct`, `pt_regs`) that BTF tracepoint
//! programs read with direct loads at the `MARK_*` offsets userspace
//! patches in from the running kernel's BTF.

use core::ptr;

use trace_common::kernel::{COMM_LEN, MARK_TASK_COMM};

use crate::record::write_words;

/// The `T` at marker offset `mark` of the kernel object at `base`.
///
/// # Safety
///
/// `base` must be a BTF-typed pointer the kernel passed to a BTF tracepoint
/// program, and userspace must have patched `mark` to the offset of a field
/// of at least `size_of::<T>()` bytes in it (the verifier rejects the
/// program otherwise).
#[inline(always)]
pub(crate) unsafe fn field<T>(base: *const u8, mark: i16) -> T {
    // SAFETY: as the caller promises; volatile, so that every load stays a
    // single instruction with the marker as its offset.
    unsafe { ptr::read_volatile(base.wrapping_offset(mark as isize).cast::<T>()) }
}

/// Copies task `task`'s name to `dst`.
///
/// # Safety
///
/// As for [`field`], and `dst` must be valid for 16 bytes and 8-aligned.
#[inline(always)]
pub(crate) unsafe fn task_comm(task: *const u8, dst: *mut [u8; COMM_LEN]) {
    // SAFETY: `comm` is a 16-byte array (two words); `dst` as promised.
    unsafe {
        write_words(
            dst.cast::<[u64; 2]>(),
            field::<u64>(task, MARK_TASK_COMM),
            field::<u64>(task, MARK_TASK_COMM + 8),
        );
    }
}
