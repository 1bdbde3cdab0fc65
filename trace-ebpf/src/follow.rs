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

/// Follows the new task `tid` when its creator `parent` is followed, and
/// only then: an entry left by an earlier task of the same id (reused
/// between that task's exit and its last switch out) is removed.
#[inline(always)]
pub(crate) fn follow_child(layout: &KernelLayout, parent: u32, tid: u32) {
    if layout.filter & FILTER_PIDS == 0 {
        return;
    }
    if FOLLOWED.get_ptr(parent).is_some() {
        if FOLLOWED.insert(tid, 0u8, 0).is_err() {
            count_lost(COUNTER_FOLLOW_FULL);
        }
    } else {
        // A missing entry is fine.
        let _ = FOLLOWED.remove(tid);
    }
}

/// The `prev_state` bits of a task that has exited (`X` and `Z` of the
/// kernel's TASK_REPORT): its last switch out.
const EXITED_STATE: i32 = 0x10 | 0x20;

/// Whether a `sched_switch` `prev_state` says the task switched out has
/// exited (preemption, TASK_REPORT_MAX, lies above the state bits; an
/// absent field, negative, says nothing).
#[inline(always)]
pub(crate) fn exited(prev_state: i32) -> bool {
    prev_state >= 0 && prev_state & EXITED_STATE != 0
}

/// Stops following `tid` at its last switch out: the task is gone. (It is
/// followed up to here, so that this switch is recorded; its id may be
/// reused right after, which [`follow_child`] takes care of.)
#[inline(always)]
pub(crate) fn forget_exited(layout: &KernelLayout, tid: u32, prev_state: i32) {
    if layout.filter & FILTER_PIDS != 0 && exited(prev_state) {
        // A missing entry is fine.
        let _ = FOLLOWED.remove(tid);
    }
}
