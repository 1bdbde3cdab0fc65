//! Walking a copied user stack with framehop.
//!
//! framehop finds the caller of each frame from the `.eh_frame` (through `.eh_frame_hdr`) or
//! `.debug_frame` of the file the frame's code is in, and falls back to frame pointers where
//! there is none (anonymous code, a file without unwind information, an address no entry
//! covers). Its rule cache, shared by all processes, makes a frame seen before cost a hash
//! lookup.

use framehop::Unwinder;
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64};

use crate::UserRegs;
use crate::process::Process;

/// Why a walk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The outermost frame, a frame that could not be unwound, or `max_frames`.
    End,
    /// A frame's address is in none of the process's known mappings (the instruction pointer,
    /// then pushed; a return address, not pushed).
    Unmapped,
}

/// Walks `stack` (the bytes from `regs.sp` upward) of `process`, appending the lookup address
/// of every frame to `out`, leaf first: the instruction pointer, then each return address
/// minus 1.
pub(crate) fn unwind(
    process: &Process,
    cache: &mut CacheX86_64,
    regs: UserRegs,
    stack: &[u8],
    max_frames: usize,
    out: &mut Vec<u64>,
) -> Stop {
    if max_frames == 0 {
        return Stop::End;
    }
    let mut read_stack = |addr: u64| -> Result<u64, ()> {
        let at = usize::try_from(addr.checked_sub(regs.sp).ok_or(())?).map_err(|_| ())?;
        let bytes = stack.get(at..at.checked_add(8).ok_or(())?).ok_or(())?;
        Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| ())?))
    };
    let mut frames = process.unwinder.iter_frames(
        regs.ip,
        UnwindRegsX86_64::new(regs.ip, regs.sp, regs.bp),
        cache,
        &mut read_stack,
    );
    for _ in 0..max_frames {
        match frames.next() {
            Ok(Some(frame)) => {
                let addr = frame.address_for_lookup();
                let mapped = process.find(addr).is_some();
                if frame.is_return_address() && !mapped {
                    return Stop::Unmapped;
                }
                out.push(addr);
                if !mapped {
                    return Stop::Unmapped;
                }
            }
            Ok(None) => break,
            Err(e) => {
                log::trace!("unwinding stopped: {e}");
                break;
            }
        }
    }
    Stop::End
}
