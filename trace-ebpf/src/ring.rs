//! Writing events: the clock and the common header, the layout check every
//! program starts with, reserving an entry in this CPU's ring buffer,
//! deciding when to wake the reader, and counting what is lost.

use core::ptr;

use aya_ebpf::{
    bindings::{BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP},
    helpers::{
        bpf_get_current_pid_tgid, bpf_get_smp_processor_id, bpf_ktime_get_boot_ns, generated,
    },
    maps::ring_buf::RingBufEntry,
};
use trace_common::kernel::{
    COUNTER_NO_LAYOUT, COUNTER_RINGBUF_FULL, EventHeader, EventKind, KernelLayout,
    WAKEUP_CHECK_INTERVAL,
};

use crate::maps::{COUNTERS, CpuRing, EVENTS, LAYOUT, SCRATCH};
#[cfg(doc)]
use crate::record::Record;

/// This CPU's ring buffer, if userspace gave it one.
#[inline(always)]
pub(crate) fn cpu_ring() -> Option<&'static CpuRing> {
    // SAFETY: the helper takes no arguments and only reads the CPU id.
    let cpu = unsafe { bpf_get_smp_processor_id() };
    EVENTS.get(cpu)
}

/// Bytes waiting in this CPU's ring buffer.
#[inline(always)]
pub(crate) fn ring_backlog() -> u64 {
    match cpu_ring() {
        // SAFETY: `ring` is a ring buffer map the kernel looked up; the
        // helper only reads its positions.
        Some(ring) => unsafe {
            generated::bpf_ringbuf_query(
                ptr::from_ref(ring).cast_mut().cast(),
                BPF_RB_AVAIL_DATA.into(),
            )
        },
        None => 0,
    }
}

/// Counts one lost event under `counter`.
#[inline(always)]
pub(crate) fn count_lost(counter: u32) {
    count_lost_n(counter, 1);
}

/// Counts `n` lost events under `counter`.
#[inline(always)]
pub(crate) fn count_lost_n(counter: u32, n: u64) {
    if let Some(slot) = COUNTERS.get_ptr_mut(counter) {
        // SAFETY: `slot` points at this CPU's `u64` in the per-CPU map value.
        // Tracepoint programs do not nest on one CPU (the kernel skips a BPF
        // program that would run while another runs on the same CPU), so a
        // plain read-modify-write cannot race.
        unsafe { *slot += n };
    }
}

/// The layout userspace filled in, or `None` (counted) while it has not;
/// also `None` (not counted) for an event stamped `ts` after the recording
/// stopped.
#[inline(always)]
pub(crate) fn layout(ts: u64) -> Option<&'static KernelLayout> {
    current_layout().filter(|l| ts <= l.stop_ts)
}

/// The layout userspace filled in, or `None` (counted) while it has not,
/// whatever the time: for a program that decides whether to record before
/// it reads the clock (then checked against `stop_ts` by the caller).
#[inline(always)]
pub(crate) fn current_layout() -> Option<&'static KernelLayout> {
    match LAYOUT.get(0) {
        Some(layout) if layout.version == KernelLayout::VERSION => Some(layout),
        _ => {
            count_lost(COUNTER_NO_LAYOUT);
            None
        }
    }
}

/// The current time on CLOCK_BOOTTIME, in nanoseconds: the clock Perfetto
/// takes FXT timestamps on, which keeps counting through a suspend.
/// (`bpf_ktime_get_boot_ns` costs the same as `bpf_ktime_get_ns`.)
#[inline(always)]
pub(crate) fn now() -> u64 {
    // SAFETY: the helper takes no arguments and only reads the clock.
    unsafe { bpf_ktime_get_boot_ns() }
}

/// The common header for an event of `kind` at time `ts`.
#[inline(always)]
pub(crate) fn header(kind: EventKind, ts: u64) -> EventHeader {
    header_of(kind, ts, bpf_get_current_pid_tgid())
}

/// [`header`] with the current task's `bpf_get_current_pid_tgid` value.
#[inline(always)]
pub(crate) fn header_of(kind: EventKind, ts: u64, pid_tgid: u64) -> EventHeader {
    EventHeader {
        kind: kind as u32,
        // SAFETY: the helper takes no arguments and only reads the CPU id.
        cpu: unsafe { bpf_get_smp_processor_id() },
        ts,
        tid: pid_tgid as u32,
        tgid: (pid_tgid >> 32) as u32,
    }
}

/// Reserves a `T` in this CPU's ring buffer, or counts the event as lost
/// when it is full (or the CPU has none). (Straight-line code rather than a
/// closure: an outlined closure can leave a stack pointer in r0, which the
/// verifier rejects.)
#[inline(always)]
pub(crate) fn reserve<T: 'static>() -> Option<RingBufEntry<T>> {
    let entry = match cpu_ring() {
        Some(ring) => ring.reserve_untyped::<T>(0),
        None => None,
    };
    if entry.is_none() {
        count_lost(COUNTER_RINGBUF_FULL);
    }
    entry
}

/// Copies `size` bytes at `data` into this CPU's ring buffer as one entry
/// (for events whose size is known only at run time), or counts the event
/// as lost.
///
/// # Safety
///
/// `data` must be valid for reads of `size` bytes (map memory the verifier
/// can bound).
#[inline(always)]
pub(crate) unsafe fn output(data: *const u8, size: usize, flags: u64) {
    // SAFETY: as the caller promises.
    unsafe { output_events(data, size, flags, 1) }
}

/// [`output`] for an entry holding `events` events: as many are counted
/// lost when it does not fit.
///
/// # Safety
///
/// As for [`output`].
#[inline(always)]
pub(crate) unsafe fn output_events(data: *const u8, size: usize, flags: u64, events: u64) {
    let written = match cpu_ring() {
        // SAFETY: `ring` is this CPU's ring buffer map; the caller vouches
        // for `data` and `size`.
        Some(ring) => unsafe {
            generated::bpf_ringbuf_output(
                ptr::from_ref(ring).cast_mut().cast(),
                data.cast_mut().cast(),
                size as u64,
                flags,
            ) == 0
        },
        None => false,
    };
    if !written {
        count_lost_n(COUNTER_RINGBUF_FULL, events);
    }
}

/// The submit flags [`Record::submit_flags`] computes, for programs that
/// copy no tracepoint record.
#[inline(always)]
pub(crate) fn wakeup_flags(layout: &KernelLayout) -> u64 {
    let Some(scratch) = SCRATCH.get_ptr_mut(0) else {
        return 0;
    };
    // SAFETY: the program owns this CPU's scratch for this run.
    let events = unsafe {
        let count = ptr::addr_of_mut!((*scratch).events);
        let n = count.read().wrapping_add(1);
        count.write(n);
        n
    };
    if layout.wakeup_bytes == 0 {
        return 0;
    }
    if events & (WAKEUP_CHECK_INTERVAL - 1) == 0 && ring_backlog() >= u64::from(layout.wakeup_bytes)
    {
        BPF_RB_FORCE_WAKEUP.into()
    } else {
        BPF_RB_NO_WAKEUP.into()
    }
}
