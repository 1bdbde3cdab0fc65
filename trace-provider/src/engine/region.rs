//! Where records go: regions of the rolling buffers, the durable buffer, and
//! the buffer's header.
//!
//! Writers take regions of the current rolling buffer with one `fetch_add`
//! on [`ALLOC`] (a lock only when the buffer is full and must be switched or
//! marked full). A thread's regions start at one [`CHUNK_BYTES`] chunk and
//! double up to [`REGION_MAX`]; records never cross a chunk boundary unless
//! they are larger than a chunk.

use std::ptr;
use std::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, compiler_fence,
};

use trace_common::provider::BufferingMode;
use trace_common::provider::buffer::{CHUNK_BYTES, HEADER_BYTES, Layout, offset};
use trace_common::provider::fifo::FromProvider;

use super::slot::{GENERATION, NOT_READY, ThreadSlot, WRITE_EPOCH, quiesce};
use super::state::{State, notify, state};

/// Start of the shared mapping.
pub(super) static BASE: AtomicPtr<u8> = AtomicPtr::new(ptr::null_mut());
/// The next free offset in the durable buffer.
pub(super) static DURABLE_NEXT: AtomicU64 = AtomicU64::new(0);
/// Size of the durable buffer.
pub(super) static DURABLE_SIZE: AtomicU64 = AtomicU64::new(0);
/// Records dropped since the buffer was last cleared.
pub(super) static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Where writers take regions: `wrapped << ALLOC_SHIFT | offset`, the
/// rolling buffer `wrapped & 1` and the next free offset in it. Offsets only
/// grow until the buffers are switched, so once an allocation runs past the
/// end every later one does too.
pub(super) static ALLOC: AtomicU64 = AtomicU64::new(0);
const ALLOC_SHIFT: u32 = 40;
const ALLOC_OFFSET_MASK: u64 = (1 << ALLOC_SHIFT) - 1;
const ALLOC_WRAPPED_MASK: u64 = (1 << (64 - ALLOC_SHIFT)) - 1;
/// Addresses and sizes of the rolling buffers (size 0: none).
static ROLLING_AT: [AtomicUsize; 2] = [const { AtomicUsize::new(0) }; 2];
static ROLLING_SIZE: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
/// The largest region one thread takes at once.
static REGION_MAX: AtomicUsize = AtomicUsize::new(CHUNK_BYTES);
/// Upper bound of [`REGION_MAX`].
const MAX_REGION_BYTES: usize = 32 << 10;
/// Set while the rolling buffers take no records: oneshot full, or
/// streaming with both buffers waiting for the manager.
pub(super) static BLOCKED: AtomicBool = AtomicBool::new(false);

/// The header's u64 field at `off`, while a buffer is attached.
fn header_field(off: usize) -> Option<&'static AtomicU64> {
    let base = BASE.load(Ordering::Acquire);
    if base.is_null() {
        return None;
    }
    // SAFETY: the mapping is at least HEADER_BYTES long and 8-aligned while
    // BASE is set; the header's u64 fields are 8-aligned.
    Some(unsafe { &*(base.add(off) as *const AtomicU64) })
}

/// Sets the header's u64 field at `off`.
pub(super) fn set_header(off: usize, v: u64) {
    if let Some(f) = header_field(off) {
        f.store(v, Ordering::Release);
    }
}

/// Sets the header's wrapped count.
pub(super) fn set_wrapped(v: u32) {
    let base = BASE.load(Ordering::Acquire);
    if !base.is_null() {
        // SAFETY: as in header_field; the u32 field is 4-aligned.
        unsafe { &*(base.add(offset::WRAPPED_COUNT) as *const AtomicU32) }
            .store(v, Ordering::Release);
    }
}

/// Points the rolling buffers at their places in the mapping at `base`.
pub(super) fn attach(base: *mut u8, layout: &Layout) {
    BASE.store(base, Ordering::Release);
    for (i, (at, size)) in ROLLING_AT.iter().zip(&ROLLING_SIZE).enumerate() {
        let present = i < layout.rolling_count();
        // Rolling offsets lie inside the `len`-byte mapping (Layout::new).
        at.store(
            base as usize + layout.rolling_offset(i) as usize,
            Ordering::Relaxed,
        );
        size.store(
            if present { layout.rolling[i] } else { 0 },
            Ordering::Relaxed,
        );
    }
    REGION_MAX.store(region_max(layout), Ordering::Relaxed);
}

/// The largest region for `layout`: 1/64 of the smaller rolling buffer,
/// between one chunk and [`MAX_REGION_BYTES`].
fn region_max(layout: &Layout) -> usize {
    let smallest = layout.rolling[..layout.rolling_count()]
        .iter()
        .copied()
        .min()
        .unwrap_or(0) as usize;
    (smallest / 64 / CHUNK_BYTES * CHUNK_BYTES).clamp(CHUNK_BYTES, MAX_REGION_BYTES)
}

/// Brings the header's durable end, wrapped count and dropped count up to
/// date.
pub(super) fn finish_header(st: &State) {
    let Some(layout) = st.layout else { return };
    let durable = DURABLE_NEXT.load(Ordering::Relaxed).min(layout.durable) & !7;
    set_header(offset::DURABLE_DATA_END, durable);
    // The rolling data ends are kept by the writers (`refill`).
    set_wrapped(st.wrapped);
    set_header(offset::NUM_RECORDS_DROPPED, DROPPED.load(Ordering::Relaxed));
}

/// Appends a whole record to the durable buffer. Returns false when full.
pub(super) fn durable_write(record: &[u8]) -> bool {
    let len = record.len() as u64;
    let size = DURABLE_SIZE.load(Ordering::Relaxed);
    let off = DURABLE_NEXT.fetch_add(len, Ordering::AcqRel);
    if off + len > size {
        return false;
    }
    let base = BASE.load(Ordering::Acquire);
    if base.is_null() {
        return false;
    }
    // SAFETY: [off, off+len) lies in the durable buffer, reserved by the
    // fetch_add above for this writer alone.
    unsafe {
        let dst = base.add(HEADER_BYTES + off as usize);
        ptr::copy_nonoverlapping(record.as_ptr().add(8), dst.add(8), record.len() - 8);
        let mut h = [0u8; 8];
        h.copy_from_slice(&record[..8]);
        (*(dst as *const AtomicU64)).store(u64::from_le_bytes(h), Ordering::Release);
    }
    if let Some(f) = header_field(offset::DURABLE_DATA_END) {
        f.fetch_max(off + len, Ordering::AcqRel);
    }
    true
}

/// Takes a fresh region for a `bytes`-byte record. Called with `busy` set
/// and `epoch` read after setting it; returns with `busy` set and the region
/// valid for the returned epoch, or `None` (with `busy` clear) when the
/// record must be dropped.
///
/// Regions come from [`ALLOC`] with one `fetch_add`: no lock unless the
/// rolling buffer is full. A thread's regions double from one chunk up to
/// [`REGION_MAX`], so threads that write little waste little.
#[cold]
#[inline(never)]
fn refill(slot: &ThreadSlot, mut epoch: u64, bytes: usize) -> Option<u64> {
    // Room for the record and the zero word after it.
    let min = (bytes + 8).div_ceil(CHUNK_BYTES) * CHUNK_BYTES;
    for _ in 0..4 {
        if BLOCKED.load(Ordering::Relaxed) {
            slot.busy.store(0, Ordering::Release);
            DROPPED.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let want = if slot.chunk_epoch.load(Ordering::Relaxed) == epoch {
            (slot.region.load(Ordering::Relaxed) * 2).min(REGION_MAX.load(Ordering::Relaxed))
        } else {
            CHUNK_BYTES
        };
        let need = want.max(min);
        let v = ALLOC.fetch_add(need as u64, Ordering::Relaxed);
        let wrapped = v >> ALLOC_SHIFT;
        let off = v & ALLOC_OFFSET_MASK;
        let cur = (wrapped & 1) as usize;
        let end = off + need as u64;
        if end <= ROLLING_SIZE[cur].load(Ordering::Relaxed) {
            let start = ROLLING_AT[cur].load(Ordering::Relaxed) + off as usize;
            // Older data in the region (circular mode) must not be read as
            // records: each chunk starts with a zero word until a record
            // replaces it, and every record is followed by a zero word
            // within its chunk (`commit`).
            for chunk in (start..start + need).step_by(CHUNK_BYTES) {
                // SAFETY: [start, start + need) lies in rolling buffer
                // `cur`, which stays mapped while a writer is busy, and the
                // fetch_add above gave it to this thread alone.
                unsafe { (chunk as *mut u64).write(0) };
            }
            if let Some(f) = header_field(offset::ROLLING_DATA_END + 8 * cur) {
                f.fetch_max(end, Ordering::AcqRel);
            }
            let chunk_end = if bytes + 8 > CHUNK_BYTES {
                start + need
            } else {
                start + CHUNK_BYTES
            };
            slot.chunk_pos.store(start, Ordering::Relaxed);
            slot.chunk_end.store(chunk_end, Ordering::Relaxed);
            slot.region_end.store(start + need, Ordering::Relaxed);
            slot.region.store(need, Ordering::Relaxed);
            let generation = GENERATION.load(Ordering::Relaxed);
            let t = slot.thread_ref.load(Ordering::Relaxed);
            slot.generation.store(
                if (t >> 8) as u32 == generation && t as u8 != 0 {
                    generation
                } else {
                    NOT_READY
                },
                Ordering::Relaxed,
            );
            slot.chunk_epoch.store(epoch, Ordering::Relaxed);
            return Some(epoch);
        }
        // The buffer is full. Not busy while waiting for the lock: whoever
        // holds it may be waiting for this thread to leave its record.
        slot.busy.store(0, Ordering::Release);
        match buffer_full(wrapped, need) {
            Full::Retry => {}
            Full::Drop => {
                DROPPED.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            Full::Stopped => return None,
        }
        slot.busy.store(1, Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
        epoch = WRITE_EPOCH.load(Ordering::Acquire);
        if epoch == 0 {
            slot.busy.store(0, Ordering::Release);
            return None;
        }
    }
    slot.busy.store(0, Ordering::Release);
    DROPPED.fetch_add(1, Ordering::Relaxed);
    None
}

/// What a writer that found the rolling buffer full does next.
enum Full {
    /// Take a region again (the buffers were switched).
    Retry,
    /// Drop the record (oneshot full, streaming waiting for the manager).
    Drop,
    /// Drop the record silently: the trace is stopping.
    Stopped,
}

/// Handles a full rolling buffer `wrapped & 1` for a writer that needs
/// `need` bytes: switches rolling buffers (circular, streaming) or marks the
/// buffer full (oneshot). Called with `busy` clear.
#[cold]
fn buffer_full(wrapped: u64, need: usize) -> Full {
    let mut st = state();
    if ALLOC.load(Ordering::Acquire) >> ALLOC_SHIFT != wrapped {
        // Another writer switched buffers already.
        return Full::Retry;
    }
    let Some(layout) = st.layout else {
        return Full::Stopped;
    };
    if !st.started || WRITE_EPOCH.load(Ordering::Acquire) == 0 {
        return Full::Stopped;
    }
    match layout.mode {
        BufferingMode::Oneshot => {
            if !st.full {
                st.full = true;
                BLOCKED.store(true, Ordering::Relaxed);
                finish_header(&st);
            }
            Full::Drop
        }
        BufferingMode::Circular | BufferingMode::Streaming => {
            let next = st.wrapped.wrapping_add(1);
            let next_cur = (next & 1) as usize;
            if need as u64 > layout.rolling[next_cur] {
                return Full::Drop;
            }
            if st.save_pending {
                BLOCKED.store(true, Ordering::Relaxed);
                return Full::Drop;
            }
            let e = st.next_epoch;
            st.next_epoch += 1;
            quiesce(e);
            // Buffer `wrapped` is quiescent: finish it, open the other.
            finish_header(&st);
            let before = st.wrapped;
            st.wrapped = next;
            set_header(offset::ROLLING_DATA_END + 8 * next_cur, 0);
            set_wrapped(next);
            ALLOC.store(
                (u64::from(next) & ALLOC_WRAPPED_MASK) << ALLOC_SHIFT,
                Ordering::Release,
            );
            if layout.mode == BufferingMode::Streaming {
                st.save_pending = true;
                let durable = DURABLE_NEXT.load(Ordering::Relaxed).min(layout.durable);
                notify(FromProvider::SaveBuffer {
                    wrapped_count: before,
                    durable_data_end: durable,
                });
            }
            Full::Retry
        }
    }
}

/// Moves to the next chunk of this thread's region, or takes a new region
/// (`refill`). Same contract as `refill`.
#[cold]
#[inline(never)]
pub(super) fn next_chunk(slot: &ThreadSlot, epoch: u64, bytes: usize) -> Option<u64> {
    let end = slot.chunk_end.load(Ordering::Relaxed);
    if slot.chunk_epoch.load(Ordering::Relaxed) == epoch
        && bytes < CHUNK_BYTES
        && end + CHUNK_BYTES <= slot.region_end.load(Ordering::Relaxed)
    {
        // The chunk left behind ends in a zero word (`commit`).
        slot.chunk_pos.store(end, Ordering::Relaxed);
        slot.chunk_end.store(end + CHUNK_BYTES, Ordering::Relaxed);
        return Some(epoch);
    }
    refill(slot, epoch, bytes)
}
