//! `kernel:sched`'s CPU power states: idle states and frequency changes
//! (not recorded under a pid filter).

use core::mem::MaybeUninit;

use aya_ebpf::{macros::tracepoint, programs::TracePointContext};
use trace_common::kernel::{
    EventKind, KernelLayout, POWER_FREQUENCY, POWER_IDLE, PowerEvent, PowerLayout,
};

use crate::follow::filtering;
use crate::record::Record;
use crate::ring::{header, layout, now, reserve};

/// Shared body of the two power tracepoints.
#[inline(always)]
pub(crate) fn power(
    ctx: &TracePointContext,
    layout: &KernelLayout,
    l: &PowerLayout,
    what: u32,
    ts: u64,
) {
    if filtering(layout) {
        return;
    }
    let Some(r) = Record::copy(ctx, l.record_size) else {
        return;
    };
    let Some(mut entry) = reserve::<PowerEvent>() else {
        return;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<PowerEvent>() bytes; every field is written before the
    // entry is submitted.
    unsafe {
        (*e).header = header(EventKind::Power, ts);
        (*e).what = what;
        (*e).cpu_id = r.id(&l.cpu_id);
        (*e).state = r.id(&l.state);
        (*e).reserved = 0;
    }
    r.submit(layout, entry);
}

/// `power:cpu_idle`.
#[tracepoint]
pub fn cpu_idle(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    power(&ctx, layout, &layout.cpu_idle, POWER_IDLE, ts);
    0
}

/// `power:cpu_frequency`.
#[tracepoint]
pub fn cpu_frequency(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    power(&ctx, layout, &layout.cpu_frequency, POWER_FREQUENCY, ts);
    0
}
