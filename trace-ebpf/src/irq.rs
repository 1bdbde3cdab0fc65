//! `kernel:irq`: hard IRQ handlers and softirqs (not recorded under a pid
//! filter: interrupts belong to no process).

use core::mem::MaybeUninit;

use aya_ebpf::{macros::tracepoint, programs::TracePointContext};
use trace_common::kernel::{
    EventKind, FieldLoc, IRQ_NAME_LEN, IrqEntryEvent, IrqExitEvent, KernelLayout, SOFTIRQ_EXIT,
    SoftirqEvent, SoftirqLayout,
};

use crate::follow::filtering;
use crate::record::Record;
use crate::ring::{header, layout, now, reserve};

/// Whether interrupt events are recorded: not under a pid or cgroup
/// filter.
#[inline(always)]
pub(crate) fn irq_wanted(layout: &KernelLayout) -> bool {
    !filtering(layout)
}

/// `irq:irq_handler_entry`.
#[tracepoint]
pub fn irq_handler_entry(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    if !irq_wanted(layout) {
        return 0;
    }
    let l = &layout.irq_handler_entry;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let Some(mut entry) = reserve::<IrqEntryEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<IrqEntryEvent>() bytes; every field is written before the
    // entry is submitted, and `name` is zeroed before a reference to it is
    // taken.
    unsafe {
        (*e).header = header(EventKind::IrqEntry, ts);
        (*e).irq = r.i32(&l.irq);
        (*e).reserved = 0;
        (*e).name = [0; IRQ_NAME_LEN];
        if l.name.flags & (FieldLoc::DATA_LOC | FieldLoc::REL_LOC) != 0 {
            r.dynamic_str(&l.name, &mut (*e).name);
        }
    }
    r.submit(layout, entry);
    0
}

/// `irq:irq_handler_exit`.
#[tracepoint]
pub fn irq_handler_exit(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    if !irq_wanted(layout) {
        return 0;
    }
    let l = &layout.irq_handler_exit;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let Some(mut entry) = reserve::<IrqExitEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<IrqExitEvent>() bytes; every field is written before the
    // entry is submitted.
    unsafe {
        (*e).header = header(EventKind::IrqExit, ts);
        (*e).irq = r.i32(&l.irq);
        (*e).ret = r.i32(&l.ret);
    }
    r.submit(layout, entry);
    0
}

/// Shared body of the two softirq tracepoints.
#[inline(always)]
pub(crate) fn softirq(
    ctx: &TracePointContext,
    layout: &KernelLayout,
    l: &SoftirqLayout,
    exit: u32,
    ts: u64,
) {
    let Some(r) = Record::copy(ctx, l.record_size) else {
        return;
    };
    let Some(mut entry) = reserve::<SoftirqEvent>() else {
        return;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<SoftirqEvent>() bytes; every field is written before the
    // entry is submitted.
    unsafe {
        (*e).header = header(EventKind::Softirq, ts);
        (*e).vec = r.id(&l.vec);
        (*e).exit = exit;
    }
    r.submit(layout, entry);
}

/// `irq:softirq_entry`.
#[tracepoint]
pub fn softirq_entry(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    if irq_wanted(layout) {
        softirq(&ctx, layout, &layout.softirq_entry, 0, ts);
    }
    0
}

/// `irq:softirq_exit`.
#[tracepoint]
pub fn softirq_exit(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    if irq_wanted(layout) {
        softirq(&ctx, layout, &layout.softirq_exit, SOFTIRQ_EXIT, ts);
    }
    0
}
