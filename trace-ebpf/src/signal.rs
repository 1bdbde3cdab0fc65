//! `kernel:signal`: signals sent and delivered. Under a pid filter, a
//! signal is kept when its sender or its target is followed.

use core::mem::MaybeUninit;

use core::hint::black_box;

use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid, macros::tracepoint, programs::TracePointContext,
};
use trace_common::kernel::{EventKind, SignalDeliverEvent, SignalGenerateEvent};

use crate::follow::{wanted, wanted_current};
use crate::record::Record;
use crate::ring::{header_of, layout, now, reserve};

/// `signal:signal_generate`.
#[tracepoint]
pub fn signal_generate(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let pid_tgid = bpf_get_current_pid_tgid();
    let l = &layout.signal_generate;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let target = r.id(&l.pid);
    // Plain booleans before they are combined (see `sched::switch_wanted`).
    let sender = black_box(wanted_current(layout, pid_tgid as u32));
    if !sender && !black_box(wanted(layout, target)) {
        return 0;
    }
    let Some(mut entry) = reserve::<SignalGenerateEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SignalGenerateEvent>() bytes; every field is written before
    // the entry is submitted.
    unsafe {
        (*e).header = header_of(EventKind::SignalGenerate, ts, pid_tgid);
        (*e).sig = r.i32(&l.sig);
        (*e).target = target;
        (*e).group = r.i32(&l.group);
        (*e).result = r.i32(&l.result);
    }
    r.submit(layout, entry);
    0
}

/// `signal:signal_deliver`.
#[tracepoint]
pub fn signal_deliver(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let pid_tgid = bpf_get_current_pid_tgid();
    if !wanted_current(layout, pid_tgid as u32) {
        return 0;
    }
    let l = &layout.signal_deliver;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let Some(mut entry) = reserve::<SignalDeliverEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SignalDeliverEvent>() bytes; every field is written before
    // the entry is submitted.
    unsafe {
        (*e).header = header_of(EventKind::SignalDeliver, ts, pid_tgid);
        (*e).sig = r.i32(&l.sig);
        (*e).reserved = 0;
        (*e).handler = r.int(&l.sa_handler) as u64;
    }
    r.submit(layout, entry);
    0
}
