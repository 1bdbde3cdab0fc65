//! Category names and matching.
//!
//! An enabled-category list selects categories by exact name or by a glob:
//! `*` matches any run of characters (so `kernel:*` selects every kernel
//! category). An empty list enables every category, as in Fuchsia.

/// The kernel provider's scheduling category: context switches and wake-ups.
pub const KERNEL_SCHED: &str = "kernel:sched";
/// The kernel provider's process category: fork, exec, exit, rename.
pub const KERNEL_PROC: &str = "kernel:proc";
/// The kernel provider's system call category: every system call as a
/// duration on its thread.
pub const KERNEL_SYSCALL: &str = "kernel:syscall";
/// The kernel provider's interrupt category: hard IRQ handlers and softirqs
/// as durations on one track per CPU.
pub const KERNEL_IRQ: &str = "kernel:irq";
/// The kernel provider's block I/O category: requests from issue to
/// completion as durations on per-device tracks.
pub const KERNEL_BLOCK: &str = "kernel:block";
/// The kernel provider's memory category: user page faults and resident-set
/// counters.
pub const KERNEL_VM: &str = "kernel:vm";
/// The kernel provider's signal category: signals sent and delivered, as
/// instants on the sending and the receiving thread.
pub const KERNEL_SIGNAL: &str = "kernel:signal";

/// The kernel provider's lock category: futex waits that blocked, as
/// durations inside their system calls (with `kernel:syscall` and
/// `kernel:sched`), named by address, with the thread that woke them; and
/// kernel lock contention (`lock:contention_begin..lock:contention_end`),
/// named by the kind of lock and its symbol or address.
pub const KERNEL_LOCK: &str = "kernel:lock";

/// The kernel provider's CPU profile: every CPU sampled on a `cpu-clock`
/// timer, with the running thread's kernel and user stacks.
pub const KERNEL_PROFILE: &str = "kernel:profile";
/// The kernel provider's off-CPU category: where threads block (their
/// stacks, for blocks above a threshold) and the stacks of their wakers.
pub const KERNEL_OFFCPU: &str = "kernel:offcpu";

/// Kernel categories an empty category list leaves out: recording stacks
/// costs more than the other categories, and lock contention can come by
/// the hundred thousand a second, so they are asked for by name (or by a
/// glob such as `kernel:*`).
pub const KERNEL_OPT_IN: &[&str] = &[KERNEL_PROFILE, KERNEL_OFFCPU, KERNEL_LOCK];

/// Every category the kernel provider knows, with a one-line description.
pub const KERNEL_CATEGORIES: &[(&str, &str)] = &[
    (
        KERNEL_SCHED,
        "context switches and wake-ups per CPU, with thread states and weights",
    ),
    (
        KERNEL_PROC,
        "process and thread lifecycle: fork, exec, exit and renames, with names",
    ),
    (
        KERNEL_SYSCALL,
        "every system call as a duration on its thread: name, number, arguments, return value",
    ),
    (
        KERNEL_IRQ,
        "hard IRQ handlers (by handler name) and softirqs (by vector) as durations per CPU",
    ),
    (
        KERNEL_BLOCK,
        "block requests from issue to completion as durations on per-device tracks: sector, bytes, op",
    ),
    (
        KERNEL_VM,
        "user page faults as instants (address, access), resident-set sizes as counters",
    ),
    (
        KERNEL_SIGNAL,
        "signals sent (sender, target, result) and delivered (handler) as instants on their threads",
    ),
    (
        KERNEL_LOCK,
        "lock waits as durations: futex waits by address (with the waker), kernel lock contention by lock",
    ),
    (
        KERNEL_PROFILE,
        "CPU profile: each CPU sampled at --sample-hz with kernel and user stacks (flamegraphs)",
    ),
    (
        KERNEL_OFFCPU,
        "where threads block longer than --offcpu-min-us (stacks, time off CPU) and who woke them",
    ),
];

/// Whether `pattern` (which may contain `*` wildcards) matches `category`.
pub fn glob_matches(pattern: &str, category: &str) -> bool {
    let p = pattern.as_bytes();
    let c = category.as_bytes();
    // Iterative wildcard matching with backtracking to the last `*`.
    let (mut pi, mut ci) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ci < c.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ci));
            pi += 1;
        } else if pi < p.len() && p[pi] == c[ci] {
            pi += 1;
            ci += 1;
        } else if let Some((sp, sc)) = star {
            pi = sp + 1;
            ci = sc + 1;
            star = Some((sp, sc + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

/// Whether kernel category `category` is enabled by the list `enabled`:
/// as [`is_enabled`] says, except that an empty list leaves out the
/// [`KERNEL_OPT_IN`] ones.
pub fn kernel_enabled<S: AsRef<str>>(enabled: &[S], category: &str) -> bool {
    if enabled.is_empty() {
        !KERNEL_OPT_IN.contains(&category)
    } else {
        is_enabled(enabled, category)
    }
}

/// Whether `category` is enabled by the list `enabled` (empty: all are).
pub fn is_enabled<S: AsRef<str>>(enabled: &[S], category: &str) -> bool {
    enabled.is_empty() || enabled.iter().any(|p| glob_matches(p.as_ref(), category))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_matches("kernel:*", "kernel:sched"));
        assert!(glob_matches("*", "anything"));
        assert!(glob_matches("kernel:sched", "kernel:sched"));
        assert!(!glob_matches("kernel:sched", "kernel:schedx"));
        assert!(glob_matches("*:sched", "kernel:sched"));
        assert!(glob_matches("k*l:*d", "kernel:sched"));
        assert!(!glob_matches("k*l:*x", "kernel:sched"));
        assert!(!glob_matches("kernel:*", "app:net"));
        assert!(glob_matches("a*b*c", "aXbYbZc"));
        assert!(!glob_matches("", "a"));
        assert!(glob_matches("", ""));
    }

    #[test]
    fn empty_list_enables_all() {
        let none: [&str; 0] = [];
        assert!(is_enabled(&none, "kernel:sched"));
        assert!(is_enabled(&["kernel:proc", "kernel:s*"], "kernel:sched"));
        assert!(!is_enabled(&["kernel:proc"], "kernel:sched"));
    }

    #[test]
    fn stacks_are_asked_for() {
        let none: [&str; 0] = [];
        assert!(kernel_enabled(&none, KERNEL_SCHED));
        assert!(!kernel_enabled(&none, KERNEL_PROFILE));
        assert!(kernel_enabled(&["kernel:*"], KERNEL_PROFILE));
        assert!(kernel_enabled(&[KERNEL_OFFCPU], KERNEL_OFFCPU));
    }
}
