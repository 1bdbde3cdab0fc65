//! The pid filter: whether a thread's events are recorded, and following
//! the tasks a followed task creates.

use aya_ebpf::helpers::bpf_get_current_pid_tgid;
use trace_common::kernel::{COUNTER_FOLLOW_FULL, FILTER_PIDS, KernelLayout};

use crate::maps::FOLLOWED;
use crate::ring::count_lost;

/// Whether events about thread `tid` are recorded: always without a pid
/// filter, else when `tid` is followed.
#[inline(always)]
pub(crate) fn wanted(layout: &KernelLayout, tid: u32) -> bool {
    layout.filter & FILTER_PIDS == 0 || FOLLOWED.get_ptr(tid).is_some()
}

/// [`wanted`] for the current task, asking the kernel for its id only
/// under a filter.
#[inline(always)]
pub(crate) fn current_wanted(layout: &KernelLayout) -> bool {
    layout.filter & FILTER_PIDS == 0
        || FOLLOWED
            .get_ptr(bpf_get_current_pid_tgid() as u32)
            .is_some()
}

/// Follows the new task `tid` when its creator `parent` is followed.
#[inline(always)]
pub(crate) fn follow_child(layout: &KernelLayout, parent: u32, tid: u32) {
    if layout.filter & FILTER_PIDS != 0
        && FOLLOWED.get_ptr(parent).is_some()
        && FOLLOWED.insert(tid, 0u8, 0).is_err()
    {
        count_lost(COUNTER_FOLLOW_FULL);
    }
}
