//! `--uprobe`: entries and returns of probed functions, attached once per
//! function with its index as the attach cookie.

use core::ffi::c_void;
use core::mem::MaybeUninit;

use aya_ebpf::{
    EbpfContext as _,
    helpers::{bpf_get_current_pid_tgid, generated},
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};
use trace_common::kernel::stack::SOURCE_UPROBE;
use trace_common::kernel::{EventKind, UPROBE_RETURN, UprobeEvent};

use crate::follow::wanted_current;
use crate::ring::{header_of, layout, now, reserve, wakeup_flags};
use crate::stack::probe_stack;

/// Writes a probe event of the function with attach cookie of `ctx`.
#[inline(always)]
pub(crate) fn probe_event(ctx: *mut c_void, ret: u32) {
    let ts = now();
    let Some(layout) = layout(ts) else { return };
    let pid_tgid = bpf_get_current_pid_tgid();
    if !wanted_current(layout, pid_tgid as u32) {
        return;
    }
    // SAFETY: `ctx` is the context the kernel passed to this uprobe program.
    let probe = unsafe { generated::bpf_get_attach_cookie(ctx) };
    let Some(mut entry) = reserve::<UprobeEvent>() else {
        return;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<UprobeEvent>() bytes; every field is written before the
    // entry is submitted.
    unsafe {
        (*e).header = header_of(EventKind::Uprobe, ts, pid_tgid);
        (*e).probe = probe;
        (*e).ret = ret;
        (*e).reserved = 0;
    }
    entry.submit(wakeup_flags(layout));
    if ret == 0 {
        probe_stack(ctx, layout, SOURCE_UPROBE, probe, ts, pid_tgid, false);
    }
}

/// Entry of a probed function.
#[uprobe]
pub fn uprobe_entry(ctx: ProbeContext) -> u32 {
    probe_event(ctx.as_ptr(), 0);
    0
}

/// Return of a probed function.
#[uretprobe]
pub fn uprobe_return(ctx: RetProbeContext) -> u32 {
    probe_event(ctx.as_ptr(), UPROBE_RETURN);
    0
}
