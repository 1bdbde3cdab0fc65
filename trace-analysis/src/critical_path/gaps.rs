//! What a critical path could not say, and what recording would say it.

use super::walk::{ThreadTime, Wait};
use super::window::Window;

/// What the tree below `t` lacks.
#[derive(Default)]
struct Lacks {
    waits: u64,
    without_stack: u64,
    by_interrupt_unnamed: u64,
    without_wakeup: u64,
    io_calls: u64,
    unknown_ns: u64,
}

const IO_CALLS: &[&str] = &[
    "fsync",
    "fdatasync",
    "sync",
    "syncfs",
    "sync_file_range",
    "read",
    "pread64",
    "readv",
    "preadv",
    "preadv2",
    "write",
    "pwrite64",
    "writev",
    "pwritev",
    "pwritev2",
    "io_uring_enter",
    "io_getevents",
    "openat",
];

fn visit(t: &ThreadTime, l: &mut Lacks) {
    l.unknown_ns += t.unknown_ns;
    for w in &t.waits {
        visit_wait(w, l);
    }
}

fn visit_wait(w: &Wait, l: &mut Lacks) {
    l.waits += 1;
    if w.stack.is_empty() {
        l.without_stack += 1;
    }
    if w.woken_by.starts_with("an interrupt") {
        l.by_interrupt_unnamed += 1;
    }
    if w.woken_by == "no wake-up recorded" || w.woken_by == "not recorded" {
        l.without_wakeup += 1;
    }
    if w.syscall.as_deref().is_some_and(|c| IO_CALLS.contains(&c)) {
        l.io_calls += 1;
    }
    if let Some(k) = &w.waker {
        visit(k, l);
    }
}

/// Sentences naming what the trace lacks for `paths`, each with what
/// would record it.
pub(super) fn gaps(w: &Window, paths: &[&ThreadTime]) -> Vec<String> {
    let mut out = Vec::new();
    let s = &w.seen;
    if s.switches == 0 {
        out.push(
            "The trace has no context switches: record kernel:sched to split the time into running, runnable and blocked.".into(),
        );
        return out;
    }
    if s.wakeups == 0 {
        out.push(
            "The trace has no wake-ups: record kernel:sched to follow waits to their wakers."
                .into(),
        );
    } else if s.wakeups_without_waker > 0 {
        out.push(format!(
            "{} wake-up(s) do not name their waker (a trace of another recorder): those waits end there.",
            s.wakeups_without_waker
        ));
    }
    let mut l = Lacks::default();
    for path in paths {
        visit(path, &mut l);
    }
    if l.waits > 0 && s.syscalls == 0 {
        out.push("The trace has no system calls: record kernel:syscall to name what each wait was in (and a futex's address).".into());
    }
    if l.waits > 0 && s.offcpu == 0 {
        out.push("The trace has no off-CPU stacks: record kernel:offcpu to see the code each wait blocked in.".into());
    } else if l.without_stack > 0 && s.offcpu > 0 {
        out.push(format!(
            "{} wait(s) have no stack: kernel:offcpu keeps blocks of at least --offcpu-min-us (1000 by default).",
            l.without_stack
        ));
    }
    if (l.io_calls > 0 || l.by_interrupt_unnamed > 0) && s.blocks == 0 {
        out.push("The trace has no block requests: record kernel:block to see the I/O the waits waited for.".into());
    }
    if l.by_interrupt_unnamed > 0 && s.irqs == 0 {
        out.push("The trace has no interrupts: record kernel:irq to name the interrupts that woke threads (and to tell a wake-up from an interrupt from one by the thread it interrupted).".into());
    }
    if l.without_wakeup > 0 {
        out.push(format!(
            "{} wait(s) end without a recorded wake-up (lost, or from a context the kernel does not trace).",
            l.without_wakeup
        ));
    }
    if l.unknown_ns > 0 {
        out.push("Some time is unknown: a thread had no switch in or before the window (it ran, or slept, throughout; or the recording began inside it).".into());
    }
    if s.hidden_tasks > 0 {
        out.push("The recording was filtered by process: the tasks outside it are written as the idle task, so waiting for a CPU behind them shows as `tasks outside the recording's selection`; record with -a to name them.".into());
    }
    if s.lost > 0 {
        out.push(format!(
            "The trace lost {} event(s) to full buffers: waits may lack their wake-ups; record with a larger --buffer-size.",
            s.lost
        ));
    }
    out
}
