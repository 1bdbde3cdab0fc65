//! `kernel:block`: block requests issued to a device and completed.

use core::mem::MaybeUninit;

use aya_ebpf::{macros::tracepoint, programs::TracePointContext};
use trace_common::kernel::{
    BlockRqEvent, BlockRqLayout, EventKind, FieldLoc, KernelLayout, RWBS_LEN,
};

use crate::follow::current_wanted;
use crate::record::Record;
use crate::ring::{header, layout, now, reserve};

/// Shared body of the two block request tracepoints.
#[inline(always)]
pub(crate) fn block_rq(
    ctx: &TracePointContext,
    layout: &KernelLayout,
    l: &BlockRqLayout,
    kind: EventKind,
    ts: u64,
) {
    let Some(r) = Record::copy(ctx, l.record_size) else {
        return;
    };
    let Some(mut entry) = reserve::<BlockRqEvent>() else {
        return;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    let inline_rwbs =
        l.rwbs.is_present() && l.rwbs.flags & (FieldLoc::DATA_LOC | FieldLoc::REL_LOC) == 0;
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<BlockRqEvent>() bytes; every field is written before the
    // entry is submitted. The `rwbs` bytes read lie in the scratch copy
    // (at most RWBS_LEN after a masked offset).
    unsafe {
        (*e).header = header(kind, ts);
        (*e).sector = r.int(&l.sector) as u64;
        (*e).dev = r.id(&l.dev);
        (*e).nr_sector = r.id(&l.nr_sector);
        (*e).bytes_or_error = r.i32(&l.bytes_or_error);
        (*e).reserved = 0;
        (*e).rwbs = [0; RWBS_LEN];
        if inline_rwbs {
            let src = r.at(l.rwbs.offset);
            let n = l.rwbs.size as usize;
            for i in 0..RWBS_LEN - 1 {
                if i < n {
                    (*e).rwbs[i] = *src.add(i);
                }
            }
        }
    }
    r.submit(layout, entry);
}

/// `block:block_rq_issue`.
#[tracepoint]
pub fn block_rq_issue(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    if current_wanted(layout) {
        block_rq(
            &ctx,
            layout,
            &layout.block_rq_issue,
            EventKind::BlockIssue,
            ts,
        );
    }
    0
}

/// `block:block_rq_requeue`: kept whatever the filter, as completions are
/// (the request is issued again later, often from a kernel worker).
#[tracepoint]
pub fn block_rq_requeue(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    block_rq(
        &ctx,
        layout,
        &layout.block_rq_requeue,
        EventKind::BlockRequeue,
        ts,
    );
    0
}

/// `block:block_rq_complete`: kept whatever the filter (the manager drops
/// completions of requests it did not see issued).
#[tracepoint]
pub fn block_rq_complete(ctx: TracePointContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    block_rq(
        &ctx,
        layout,
        &layout.block_rq_complete,
        EventKind::BlockComplete,
        ts,
    );
    0
}
