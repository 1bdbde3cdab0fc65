//! The process filters: whether a thread's events are recorded, and
//! following the tasks a followed task creates.
//!
//! Two filters exist. Under a pid filter (`FILTER_PIDS`) the followed
//! threads are the keys of `FOLLOWED`: userspace puts the requested
//! processes' threads in it, every task a followed task creates is added
//! and tasks that exit are removed. Under a cgroup filter
//! (`FILTER_CGROUPS`) the kernel is asked, at each event, whether the
//! current task lies in one of the selected cgroups (`CGROUPS`) or below
//! them, so a task that moves into one is recorded from its next event on;
//! `FOLLOWED` then remembers the members as of their last switch out (and
//! their children from their creation), for the two events about a task
//! other than the current one: the task a switch brings in and the task a
//! wake-up wakes.

use aya_ebpf::helpers::bpf_get_current_pid_tgid;
use trace_common::kernel::{
    CGROUPS_MAX, COUNTER_FOLLOW_FULL, FILTER_CGROUPS, FILTER_PIDS, KernelLayout,
};

use crate::maps::{CGROUPS, FOLLOWED};
use crate::ring::count_lost;

/// Whether a filter of either kind is set.
#[inline(always)]
pub(crate) fn filtering(layout: &KernelLayout) -> bool {
    layout.filter & (FILTER_PIDS | FILTER_CGROUPS) != 0
}

/// Whether events about thread `tid`, not the current task, are recorded:
/// always without a filter, else when `tid` is followed.
#[inline(always)]
pub(crate) fn wanted(layout: &KernelLayout, tid: u32) -> bool {
    !filtering(layout) || FOLLOWED.get_ptr(tid).is_some()
}

/// Whether events of the current task, whose thread id is `tid`, are
/// recorded.
#[inline(always)]
pub(crate) fn wanted_current(layout: &KernelLayout, tid: u32) -> bool {
    if layout.filter & FILTER_CGROUPS != 0 {
        in_cgroups(layout)
    } else {
        wanted(layout, tid)
    }
}

/// [`wanted_current`], asking the kernel for the current task's id only
/// under a pid filter.
#[inline(always)]
pub(crate) fn current_wanted(layout: &KernelLayout) -> bool {
    if layout.filter & FILTER_CGROUPS != 0 {
        in_cgroups(layout)
    } else {
        layout.filter & FILTER_PIDS == 0
            || FOLLOWED
                .get_ptr(bpf_get_current_pid_tgid() as u32)
                .is_some()
    }
}

/// Whether the current task lies in one of the selected cgroups or below
/// one (cgroup v2).
#[inline(always)]
fn in_cgroups(layout: &KernelLayout) -> bool {
    let count = layout.cgroups;
    let mut i = 0;
    while i < CGROUPS_MAX {
        if i >= count {
            break;
        }
        // An error (an empty slot) counts as outside.
        if let Ok(true) = CGROUPS.current_task_under_cgroup(i) {
            return true;
        }
        i += 1;
    }
    false
}

/// Under a cgroup filter, remembers whether the current task `tid`, being
/// switched out, is a member (`inside`), for the events about it while it
/// is not running. Only a change writes the map.
#[inline(always)]
pub(crate) fn remember_current(layout: &KernelLayout, tid: u32, inside: bool) {
    if layout.filter & FILTER_CGROUPS == 0 || tid == 0 {
        return;
    }
    let known = FOLLOWED.get_ptr(tid).is_some();
    if inside && !known {
        if FOLLOWED.insert(tid, 0u8, 0).is_err() {
            count_lost(COUNTER_FOLLOW_FULL);
        }
    } else if !inside && known {
        // A missing entry is fine.
        let _ = FOLLOWED.remove(tid);
    }
}

/// Follows the new task `tid` when its creator, the current task `parent`,
/// is followed, and only then: an entry left by an earlier task of the same
/// id (reused between that task's exit and its last switch out) is removed.
#[inline(always)]
pub(crate) fn follow_child(layout: &KernelLayout, parent: u32, tid: u32) {
    if !filtering(layout) {
        return;
    }
    if wanted_current(layout, parent) {
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
    if filtering(layout) && exited(prev_state) {
        // A missing entry is fine.
        let _ = FOLLOWED.remove(tid);
    }
}
