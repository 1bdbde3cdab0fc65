//! The programs in the eBPF object: the classic tracepoint each attaches
//! to and its category, the BTF tracepoint variants and the marker offsets
//! userspace patches into them, and the probe programs' names.

use crate::category::{
    KERNEL_BLOCK, KERNEL_IRQ, KERNEL_OFFCPU, KERNEL_PROC, KERNEL_SCHED, KERNEL_SIGNAL,
    KERNEL_SYSCALL, KERNEL_VM,
};

#[cfg(doc)]
use super::FILTER_PIDS;

/// One eBPF program and the classic tracepoint it attaches to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracepointSpec {
    /// The kernel category that enables this program.
    pub category: &'static str,
    /// The program's name in the eBPF object (its function name).
    pub program: &'static str,
    /// The tracepoint group (the directory under `events/`), e.g. `sched`.
    pub group: &'static str,
    /// The tracepoint name, e.g. `sched_switch`.
    pub event: &'static str,
    /// Whether a kernel may lack it (architecture- or configuration-
    /// specific): then the program is left out, not the recording.
    pub optional: bool,
}

/// A BTF tracepoint program that stands in for a classic tracepoint
/// program where the kernel has BTF: it skips the kernel's copy of the
/// tracepoint record and reads the fields it needs with direct loads at
/// offsets userspace patches in from the kernel's BTF (the `MARK_*`
/// offsets below), and writes the same event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BtfVariant {
    /// The classic program it replaces ([`TracepointSpec::program`]).
    pub classic: &'static str,
    /// Its own program name.
    pub program: &'static str,
    /// The BTF tracepoint (`btf_trace_<name>`) it attaches to.
    pub tracepoint: &'static str,
}

/// Every BTF tracepoint variant in the eBPF object.
pub const BTF_VARIANTS: &[BtfVariant] = &[
    BtfVariant {
        classic: "sched_switch",
        program: "sched_switch_btf",
        tracepoint: "sched_switch",
    },
    BtfVariant {
        classic: "sched_wakeup",
        program: "sched_wakeup_btf",
        tracepoint: "sched_waking",
    },
    BtfVariant {
        classic: "sched_wakeup_new",
        program: "sched_wakeup_new_btf",
        tracepoint: "sched_wakeup_new",
    },
    BtfVariant {
        classic: "sys_enter",
        program: "sys_enter_btf",
        tracepoint: "sys_enter",
    },
    BtfVariant {
        classic: "sys_exit",
        program: "sys_exit_btf",
        tracepoint: "sys_exit",
    },
    BtfVariant {
        classic: "syscall_switch",
        program: "syscall_switch_btf",
        tracepoint: "sched_switch",
    },
];

/// Marker offset of `task_struct.pid` in the BTF programs' loads (every
/// `MARK_*` is replaced by the real offset before loading; they lie far
/// beyond any real field offset the programs use).
pub const MARK_TASK_PID: i16 = 0x7f00;
/// Marker offset of `task_struct.tgid`.
pub const MARK_TASK_TGID: i16 = 0x7f08;
/// Marker offset of `task_struct.prio`.
pub const MARK_TASK_PRIO: i16 = 0x7f10;
/// Marker offset of `task_struct.comm` (its second word: `+ 8`).
pub const MARK_TASK_COMM: i16 = 0x7f20;
/// Marker offset of the CPU a task is on (`task_struct.cpu`, or
/// `thread_info.cpu` inside it).
pub const MARK_TASK_CPU: i16 = 0x7f30;
/// Marker offset of `task_struct.exit_state`.
pub const MARK_TASK_EXIT_STATE: i16 = 0x7f38;
/// Marker offsets of the six system call argument registers in
/// `struct pt_regs` (x86-64: `di`, `si`, `dx`, `r10`, `r8`, `r9`; arm64:
/// `orig_x0`, `regs[1]`..`regs[5]`).
pub const MARK_REGS_ARGS: [i16; 6] = [0x7f40, 0x7f48, 0x7f50, 0x7f58, 0x7f60, 0x7f68];
/// Marker offset of the system call number in `struct pt_regs` (x86-64
/// `orig_ax`, arm64 `syscallno`), read as a 32-bit integer.
pub const MARK_REGS_NR: i16 = 0x7f70;

/// Every program in the eBPF object, with its category and tracepoint.
/// Userspace loads and attaches only those of the enabled categories, in
/// this order.
pub const TRACEPOINTS: &[TracepointSpec] = &[
    TracepointSpec {
        category: KERNEL_SCHED,
        program: "sched_switch",
        group: "sched",
        event: "sched_switch",
        optional: false,
    },
    TracepointSpec {
        category: KERNEL_SCHED,
        program: "sched_wakeup",
        group: "sched",
        event: "sched_waking",
        optional: false,
    },
    TracepointSpec {
        category: KERNEL_SCHED,
        program: "sched_wakeup_new",
        group: "sched",
        event: "sched_wakeup_new",
        optional: false,
    },
    TracepointSpec {
        category: KERNEL_PROC,
        program: "task_newtask",
        group: "task",
        event: "task_newtask",
        optional: false,
    },
    TracepointSpec {
        category: KERNEL_PROC,
        program: "sched_process_exec",
        group: "sched",
        event: "sched_process_exec",
        optional: false,
    },
    TracepointSpec {
        category: KERNEL_PROC,
        program: "sched_process_exit",
        group: "sched",
        event: "sched_process_exit",
        optional: false,
    },
    TracepointSpec {
        category: KERNEL_PROC,
        program: "task_rename",
        group: "task",
        event: "task_rename",
        optional: false,
    },
    // Writes the entry a task switched out inside a system call left on
    // its CPU (`PAIR_SYSCALLS`). Attached before the two below (programs
    // are attached in this order): the return trusts that an entry waiting
    // on its CPU is the running task's, which holds only while every
    // switch is seen.
    TracepointSpec {
        category: KERNEL_SYSCALL,
        program: "syscall_switch",
        group: "sched",
        event: "sched_switch",
        optional: false,
    },
    TracepointSpec {
        category: KERNEL_SYSCALL,
        program: "sys_enter",
        group: "raw_syscalls",
        event: "sys_enter",
        optional: false,
    },
    TracepointSpec {
        category: KERNEL_SYSCALL,
        program: "sys_exit",
        group: "raw_syscalls",
        event: "sys_exit",
        optional: false,
    },
    TracepointSpec {
        category: KERNEL_IRQ,
        program: "irq_handler_entry",
        group: "irq",
        event: "irq_handler_entry",
        optional: false,
    },
    TracepointSpec {
        category: KERNEL_IRQ,
        program: "irq_handler_exit",
        group: "irq",
        event: "irq_handler_exit",
        optional: false,
    },
    TracepointSpec {
        category: KERNEL_IRQ,
        program: "softirq_entry",
        group: "irq",
        event: "softirq_entry",
        optional: false,
    },
    TracepointSpec {
        category: KERNEL_IRQ,
        program: "softirq_exit",
        group: "irq",
        event: "softirq_exit",
        optional: false,
    },
    TracepointSpec {
        category: KERNEL_BLOCK,
        program: "block_rq_issue",
        group: "block",
        event: "block_rq_issue",
        optional: false,
    },
    TracepointSpec {
        category: KERNEL_BLOCK,
        program: "block_rq_complete",
        group: "block",
        event: "block_rq_complete",
        optional: false,
    },
    TracepointSpec {
        category: KERNEL_BLOCK,
        program: "block_rq_requeue",
        group: "block",
        event: "block_rq_requeue",
        optional: true,
    },
    TracepointSpec {
        category: KERNEL_SCHED,
        program: "cpu_idle",
        group: "power",
        event: "cpu_idle",
        optional: true,
    },
    TracepointSpec {
        category: KERNEL_SCHED,
        program: "cpu_frequency",
        group: "power",
        event: "cpu_frequency",
        optional: true,
    },
    TracepointSpec {
        category: KERNEL_VM,
        program: "page_fault_user",
        group: "exceptions",
        event: "page_fault_user",
        optional: true,
    },
    TracepointSpec {
        category: KERNEL_VM,
        program: "rss_stat",
        group: "kmem",
        event: "rss_stat",
        optional: true,
    },
    TracepointSpec {
        category: KERNEL_SIGNAL,
        program: "signal_generate",
        group: "signal",
        event: "signal_generate",
        optional: true,
    },
    TracepointSpec {
        category: KERNEL_SIGNAL,
        program: "signal_deliver",
        group: "signal",
        event: "signal_deliver",
        optional: true,
    },
    TracepointSpec {
        category: KERNEL_OFFCPU,
        program: super::stack::OFFCPU_SWITCH_PROGRAM,
        group: "sched",
        event: "sched_switch",
        optional: false,
    },
    TracepointSpec {
        category: KERNEL_OFFCPU,
        program: super::stack::OFFCPU_WAKING_PROGRAM,
        group: "sched",
        event: "sched_waking",
        optional: false,
    },
    TracepointSpec {
        category: KERNEL_OFFCPU,
        program: super::stack::OFFCPU_SYS_EXIT_PROGRAM,
        group: "raw_syscalls",
        event: "sys_exit",
        optional: false,
    },
];

/// The category whose programs are attached whatever the categories: new
/// tasks, execs, exits and renames name the processes and threads every
/// other event refers to, and keep a pid filter's ([`FILTER_PIDS`]) followed
/// threads up to date. Their events become instants only when it is
/// recorded.
pub const NAMING_CATEGORY: &str = KERNEL_PROC;

/// Name of the eBPF program attached (once per probe) at the entry of each
/// `--uprobe` function.
pub const UPROBE_ENTRY_PROGRAM: &str = "uprobe_entry";
/// Name of the eBPF program attached (once per probe) at the return of each
/// `--uprobe` function.
pub const UPROBE_RETURN_PROGRAM: &str = "uprobe_return";
/// Name of the eBPF program attached at every `--usdt` probe site.
pub const USDT_PROGRAM: &str = "usdt";
