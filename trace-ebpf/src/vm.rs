//! `kernel:vm`: user page faults and resident-set counter changes.

use core::mem::MaybeUninit;

use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid, macros::tracepoint, programs::TracePointContext,
};
use trace_common::kernel::{EventKind, PageFaultEvent, RssStatEvent};

use crate::follow::wanted_current;
use crate::record::Record;
use crate::ring::{header_of, layout, now, reserve};

/// `exceptions:page_fault_user`.
#[tracepoint]
pub fn page_fault_user(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let pid_tgid = bpf_get_current_pid_tgid();
    if !wanted_current(layout, pid_tgid as u32) {
        return 0;
    }
    let l = &layout.page_fault_user;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let Some(mut entry) = reserve::<PageFaultEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<PageFaultEvent>() bytes; every field is written before the
    // entry is submitted.
    unsafe {
        (*e).header = header_of(EventKind::PageFault, ts, pid_tgid);
        (*e).address = r.int(&l.address) as u64;
        (*e).ip = r.int(&l.ip) as u64;
        (*e).error_code = r.int(&l.error_code) as u64;
    }
    r.submit(layout, entry);
    0
}

/// `kmem:rss_stat`.
#[tracepoint]
pub fn rss_stat(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let pid_tgid = bpf_get_current_pid_tgid();
    if !wanted_current(layout, pid_tgid as u32) {
        return 0;
    }
    let l = &layout.rss_stat;
    let Some(r) = Record::copy(&ctx, l.record_size) else {
        return 0;
    };
    let Some(mut entry) = reserve::<RssStatEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<RssStatEvent>() bytes; every field is written before the
    // entry is submitted.
    unsafe {
        (*e).header = header_of(EventKind::RssStat, ts, pid_tgid);
        (*e).size = r.int(&l.size);
        (*e).mm_id = r.id(&l.mm_id);
        (*e).curr = r.id(&l.curr);
        (*e).member = r.i32(&l.member);
        (*e).reserved = 0;
    }
    r.submit(layout, entry);
    0
}
