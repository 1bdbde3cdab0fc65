//! Fixed-layout data shared by the eBPF kernel provider (`trace-ebpf`) and the
//! manager that loads it: the only definition of every byte layout that
//! crosses the kernel/userspace boundary.
//!
//! Two directions:
//!
//! - Userspace → eBPF: [`KernelLayout`], one value in the [`MAP_LAYOUT`] array
//!   map, says where each tracepoint field lives in the raw tracepoint record.
//!   The manager parses the offsets from
//!   `/sys/kernel/tracing/events/<group>/<name>/format` at load time and fills
//!   the map before attaching any program, so no kernel's offsets are compiled
//!   in. A field this kernel lacks is marked absent ([`FieldLoc::ABSENT`]) and
//!   the programs write all bits set ([`ABSENT_ID`], [`ABSENT_INT`]) or an
//!   empty string for it.
//! - eBPF → userspace: one `#[repr(C)]` event per ring-buffer entry in the
//!   [`MAP_EVENTS`] ring buffer, each starting with an [`EventHeader`].
//!   [`parse`] decodes one entry without trusting it.
//!
//! Every struct here is plain data (integers and byte arrays, no implicit
//! padding), so any bit pattern is a valid value.

pub mod tracepoint;

use core::fmt;
use core::mem::size_of;

use crate::category::{
    KERNEL_BLOCK, KERNEL_IRQ, KERNEL_PROC, KERNEL_SCHED, KERNEL_SYSCALL, KERNEL_VM,
};

/// Length of a kernel task name (`TASK_COMM_LEN`), NUL terminator included.
pub const COMM_LEN: usize = 16;

/// Bytes kept of an exec'd file name (NUL terminator included); longer names
/// are truncated.
pub const FILENAME_LEN: usize = 256;

/// Name of the BPF ring buffer map every program writes its events into.
pub const MAP_EVENTS: &str = "EVENTS";

/// Name of the one-entry array map holding the [`KernelLayout`].
pub const MAP_LAYOUT: &str = "LAYOUT";

/// Name of the per-CPU array map of `u64` counters, indexed by the
/// `COUNTER_*` constants.
pub const MAP_COUNTERS: &str = "COUNTERS";

/// Name of the hash map of followed thread ids (`u32` → `u8`, the value
/// unused) while [`KernelLayout::filter`] has [`FILTER_PIDS`]: userspace puts
/// the threads of the requested processes in it, and the programs add every
/// task a followed task creates and remove tasks that exit.
pub const MAP_FOLLOWED: &str = "FOLLOWED";

/// Most threads [`MAP_FOLLOWED`] holds.
pub const FOLLOWED_MAX: u32 = 65_536;

/// [`KernelLayout::filter`] bit: record only events of followed threads
/// ([`MAP_FOLLOWED`]).
pub const FILTER_PIDS: u32 = 1;

/// [`KernelLayout::filter`] bit: the `kernel:proc` programs write events
/// (without it they are attached only to follow new and exiting tasks).
pub const EMIT_PROC: u32 = 2;

/// Counter index: events lost because the ring buffer was full.
pub const COUNTER_RINGBUF_FULL: u32 = 0;

/// Counter index: events lost because the layout map was not filled in.
pub const COUNTER_NO_LAYOUT: u32 = 1;

/// Counter index: new tasks of followed processes that could not be
/// followed because [`MAP_FOLLOWED`] was full (their events are missing).
pub const COUNTER_FOLLOW_FULL: u32 = 2;

/// Number of entries in the [`MAP_COUNTERS`] map. Every counter counts lost
/// events (or, for [`COUNTER_FOLLOW_FULL`], lost threads).
pub const COUNTER_COUNT: u32 = 3;

/// Bytes kept of an IRQ handler's name (NUL terminator included).
pub const IRQ_NAME_LEN: usize = 32;

/// Bytes kept of a block request's `rwbs` flags (`R`, `WS`, `FF`...).
pub const RWBS_LEN: usize = 8;

/// [`SoftirqEvent::exit`] value of `irq:softirq_exit`.
pub const SOFTIRQ_EXIT: u32 = 1;

/// Arguments a system call passes (registers `raw_syscalls:sys_enter`
/// records).
pub const SYSCALL_ARGS: usize = 6;

/// Value written for a signed integer field the running kernel's tracepoint
/// lacks (all bits set, as for [`ABSENT_ID`]).
pub const ABSENT_INT: i32 = -1;

/// Value written for a thread or process id field the running kernel's
/// tracepoint lacks (all bits set, as for [`ABSENT_INT`]).
pub const ABSENT_ID: u32 = u32::MAX;

/// Most bytes of a raw tracepoint record the programs copy (fields must end
/// within them); userspace treats a field beyond as absent.
pub const MAX_RECORD_BYTES: u16 = 256;

/// The programs check the ring buffer's fill level against
/// [`KernelLayout::wakeup_bytes`] once per this many events on a CPU (a
/// power of two).
pub const WAKEUP_CHECK_INTERVAL: u32 = 32;

/// `clone_flags` bit: the new task is a thread of the caller's process.
pub const CLONE_THREAD: u64 = 0x0001_0000;

/// [`SchedWakeupEvent::flags`] bit: the event came from `sched_wakeup_new`
/// (the first wake-up of a new task) rather than `sched_wakeup`.
pub const WAKEUP_NEW: u32 = 1;

/// [`ProcessExitEvent::group_dead`] value: other threads of the process live on.
pub const GROUP_DEAD_NO: u8 = 0;
/// [`ProcessExitEvent::group_dead`] value: the last thread of the process exited.
pub const GROUP_DEAD_YES: u8 = 1;
/// [`ProcessExitEvent::group_dead`] value: this kernel's tracepoint lacks the field.
pub const GROUP_DEAD_UNKNOWN: u8 = 2;

// ---------------------------------------------------------------------------
// Programs and the tracepoints they attach to.

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
        tracepoint: "sched_wakeup",
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
];

/// Marker offset of `task_struct.pid` in the BTF programs' loads (every
/// `MARK_*` is replaced by the real offset before loading; they lie far
/// beyond any real field offset the programs use).
pub const MARK_TASK_PID: i16 = 0x7f00;
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
/// Userspace loads and attaches only those of the enabled categories.
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
        event: "sched_wakeup",
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
        program: "sched_process_fork",
        group: "sched",
        event: "sched_process_fork",
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
];

/// The programs that follow new and exiting tasks for a pid filter
/// ([`FILTER_PIDS`]): attached whenever a filter is set, whatever the
/// categories.
pub const FOLLOW_PROGRAMS: &[&str] = &["task_newtask", "sched_process_exit"];

// ---------------------------------------------------------------------------
// Userspace → eBPF: where the tracepoint fields are.

/// Where one field lives in a raw tracepoint record, as the tracefs format
/// file of the running kernel describes it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FieldLoc {
    /// Byte offset of the field from the start of the record.
    pub offset: u16,
    /// Size of the field in bytes: 1, 2, 4 or 8 for an integer, the array
    /// length for an inline `char[N]`, 4 for a `__data_loc`/`__rel_loc`.
    pub size: u16,
    /// `FIELD_*` bits; without [`FieldLoc::PRESENT`] the field is absent.
    pub flags: u16,
}

impl FieldLoc {
    /// Flag: the field exists on this kernel.
    pub const PRESENT: u16 = 1;
    /// Flag: an integer field is signed (sign-extended when read).
    pub const SIGNED: u16 = 2;
    /// Flag: a string field is a `__data_loc`: a `u32` whose low 16 bits are
    /// the string's offset from the record start and high 16 bits its length.
    pub const DATA_LOC: u16 = 4;
    /// Flag: a string field is a `__rel_loc`: like [`FieldLoc::DATA_LOC`] but
    /// the offset counts from the end of the 4-byte location field.
    pub const REL_LOC: u16 = 8;

    /// A field the running kernel does not have.
    pub const ABSENT: FieldLoc = FieldLoc {
        offset: 0,
        size: 0,
        flags: 0,
    };

    /// Whether the field exists on this kernel.
    pub const fn is_present(&self) -> bool {
        self.flags & Self::PRESENT != 0
    }
}

/// Field locations of `sched:sched_switch`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedSwitchLayout {
    /// Bytes of the record the program copies before reading the fields:
    /// the end of the last present field, at most [`MAX_RECORD_BYTES`].
    pub record_size: u16,
    /// `char prev_comm[16]`.
    pub prev_comm: FieldLoc,
    /// `pid_t prev_pid`.
    pub prev_pid: FieldLoc,
    /// `int prev_prio`.
    pub prev_prio: FieldLoc,
    /// `long prev_state`.
    pub prev_state: FieldLoc,
    /// `char next_comm[16]`.
    pub next_comm: FieldLoc,
    /// `pid_t next_pid`.
    pub next_pid: FieldLoc,
    /// `int next_prio`.
    pub next_prio: FieldLoc,
}

/// Field locations of `sched:sched_wakeup` and `sched:sched_wakeup_new`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedWakeupLayout {
    /// Bytes of the record the program copies before reading the fields:
    /// the end of the last present field, at most [`MAX_RECORD_BYTES`].
    pub record_size: u16,
    /// `char comm[16]` of the woken task.
    pub comm: FieldLoc,
    /// `pid_t pid` of the woken task.
    pub pid: FieldLoc,
    /// `int prio` of the woken task.
    pub prio: FieldLoc,
    /// `int target_cpu`: the CPU the task will run on.
    pub target_cpu: FieldLoc,
}

/// Field locations of `sched:sched_process_fork`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessForkLayout {
    /// Bytes of the record the program copies before reading the fields:
    /// the end of the last present field, at most [`MAX_RECORD_BYTES`].
    pub record_size: u16,
    /// `pid_t parent_pid`.
    pub parent_pid: FieldLoc,
    /// `pid_t child_pid`.
    pub child_pid: FieldLoc,
    /// `child_comm`: `__data_loc char[]` on recent kernels, `char[16]` before.
    pub child_comm: FieldLoc,
}

/// Field locations of `task:task_newtask`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskNewtaskLayout {
    /// Bytes of the record the program copies before reading the fields:
    /// the end of the last present field, at most [`MAX_RECORD_BYTES`].
    pub record_size: u16,
    /// `pid_t pid` of the new task.
    pub pid: FieldLoc,
    /// `char comm[16]` of the new task.
    pub comm: FieldLoc,
    /// `u64 clone_flags` (`unsigned long` on older kernels).
    pub clone_flags: FieldLoc,
}

/// Field locations of `sched:sched_process_exec`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessExecLayout {
    /// Bytes of the record the program copies before reading the fields:
    /// the end of the last present field, at most [`MAX_RECORD_BYTES`].
    pub record_size: u16,
    /// `__data_loc char[] filename`.
    pub filename: FieldLoc,
    /// `pid_t pid`: the thread id after exec (the process id).
    pub pid: FieldLoc,
    /// `pid_t old_pid`: the thread id that called exec.
    pub old_pid: FieldLoc,
}

/// Field locations of `sched:sched_process_exit`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessExitLayout {
    /// Bytes of the record the program copies before reading the fields:
    /// the end of the last present field, at most [`MAX_RECORD_BYTES`].
    pub record_size: u16,
    /// `char comm[16]`.
    pub comm: FieldLoc,
    /// `pid_t pid`.
    pub pid: FieldLoc,
    /// `int prio`.
    pub prio: FieldLoc,
    /// `bool group_dead` (absent on older kernels).
    pub group_dead: FieldLoc,
}

/// Field locations of `task:task_rename`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskRenameLayout {
    /// Bytes of the record the program copies before reading the fields:
    /// the end of the last present field, at most [`MAX_RECORD_BYTES`].
    pub record_size: u16,
    /// `pid_t pid` (absent on some kernels, where it is always the current task).
    pub pid: FieldLoc,
    /// `char oldcomm[16]`.
    pub oldcomm: FieldLoc,
    /// `char newcomm[16]`.
    pub newcomm: FieldLoc,
}

/// Field locations of `raw_syscalls:sys_enter`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SysEnterLayout {
    /// Bytes of the record the program copies before reading the fields:
    /// the end of the last present field, at most [`MAX_RECORD_BYTES`].
    pub record_size: u16,
    /// `long id`: the system call number.
    pub id: FieldLoc,
    /// `unsigned long args[6]`: an array of 8-byte words (`size` / 8 of
    /// them, at most [`SYSCALL_ARGS`]).
    pub args: FieldLoc,
}

/// Field locations of `raw_syscalls:sys_exit`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SysExitLayout {
    /// Bytes of the record the program copies before reading the fields:
    /// the end of the last present field, at most [`MAX_RECORD_BYTES`].
    pub record_size: u16,
    /// `long id`: the system call number.
    pub id: FieldLoc,
    /// `long ret`: the return value (a negative errno on failure).
    pub ret: FieldLoc,
}

/// Field locations of `irq:irq_handler_entry`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IrqHandlerEntryLayout {
    /// Bytes of the record the program copies before reading the fields:
    /// the end of the last present field, at most [`MAX_RECORD_BYTES`].
    pub record_size: u16,
    /// `int irq`.
    pub irq: FieldLoc,
    /// `__data_loc char[] name`: the handler's name.
    pub name: FieldLoc,
}

/// Field locations of `irq:irq_handler_exit`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IrqHandlerExitLayout {
    /// Bytes of the record the program copies before reading the fields:
    /// the end of the last present field, at most [`MAX_RECORD_BYTES`].
    pub record_size: u16,
    /// `int irq`.
    pub irq: FieldLoc,
    /// `int ret`: non-zero when the handler handled the interrupt.
    pub ret: FieldLoc,
}

/// Field locations of `irq:softirq_entry` and `irq:softirq_exit`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SoftirqLayout {
    /// Bytes of the record the program copies before reading the fields:
    /// the end of the last present field, at most [`MAX_RECORD_BYTES`].
    pub record_size: u16,
    /// `unsigned int vec`: the softirq vector (0 HI .. 9 RCU).
    pub vec: FieldLoc,
}

/// Field locations of `block:block_rq_issue` and `block:block_rq_complete`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockRqLayout {
    /// Bytes of the record the program copies before reading the fields:
    /// the end of the last present field, at most [`MAX_RECORD_BYTES`].
    pub record_size: u16,
    /// `dev_t dev`: the device (major << 20 | minor).
    pub dev: FieldLoc,
    /// `sector_t sector`.
    pub sector: FieldLoc,
    /// `unsigned int nr_sector`.
    pub nr_sector: FieldLoc,
    /// `unsigned int bytes` (issue) or `int error` (completion).
    pub bytes_or_error: FieldLoc,
    /// `char rwbs[N]`: the operation and flags.
    pub rwbs: FieldLoc,
}

/// Field locations of `exceptions:page_fault_user` (x86).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageFaultLayout {
    /// Bytes of the record the program copies before reading the fields:
    /// the end of the last present field, at most [`MAX_RECORD_BYTES`].
    pub record_size: u16,
    /// `unsigned long address`: the faulting address.
    pub address: FieldLoc,
    /// `unsigned long ip`: the instruction that faulted.
    pub ip: FieldLoc,
    /// `unsigned long error_code`: the architecture's fault flags.
    pub error_code: FieldLoc,
}

/// Field locations of `power:cpu_idle` and `power:cpu_frequency`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PowerLayout {
    /// Bytes of the record the program copies before reading the fields:
    /// the end of the last present field, at most [`MAX_RECORD_BYTES`].
    pub record_size: u16,
    /// `u32 state`: the idle state (`u32::MAX` when leaving idle) or the
    /// frequency in kHz.
    pub state: FieldLoc,
    /// `u32 cpu_id`.
    pub cpu_id: FieldLoc,
}

/// Field locations of `kmem:rss_stat`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RssStatLayout {
    /// Bytes of the record the program copies before reading the fields:
    /// the end of the last present field, at most [`MAX_RECORD_BYTES`].
    pub record_size: u16,
    /// `unsigned int mm_id`: a hash of the address space.
    pub mm_id: FieldLoc,
    /// `unsigned int curr`: whether it is the current task's.
    pub curr: FieldLoc,
    /// `int member`: 0 file, 1 anon, 2 swap entries, 3 shmem.
    pub member: FieldLoc,
    /// `long size`: the new value, in bytes.
    pub size: FieldLoc,
}

/// Every tracepoint's field locations, and when to wake the reader: the one
/// value of the [`MAP_LAYOUT`] map. A tracepoint whose category is disabled
/// keeps all fields absent.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelLayout {
    /// [`KernelLayout::VERSION`] once userspace has filled the layout in; the
    /// programs drop events (counting [`COUNTER_NO_LAYOUT`]) while it is 0.
    pub version: u16,
    /// Zero.
    pub reserved: u16,
    /// Wake the reader once this many bytes wait in the ring buffer (checked
    /// every [`WAKEUP_CHECK_INTERVAL`] events per CPU); below that the reader
    /// is not woken and collects on its own timer. 0 wakes it on every event.
    pub wakeup_bytes: u32,
    /// `sched:sched_switch`.
    pub sched_switch: SchedSwitchLayout,
    /// `sched:sched_wakeup`.
    pub sched_wakeup: SchedWakeupLayout,
    /// `sched:sched_wakeup_new`.
    pub sched_wakeup_new: SchedWakeupLayout,
    /// `sched:sched_process_fork`.
    pub process_fork: ProcessForkLayout,
    /// `task:task_newtask`.
    pub task_newtask: TaskNewtaskLayout,
    /// `sched:sched_process_exec`.
    pub process_exec: ProcessExecLayout,
    /// `sched:sched_process_exit`.
    pub process_exit: ProcessExitLayout,
    /// `task:task_rename`.
    pub task_rename: TaskRenameLayout,
    /// `raw_syscalls:sys_enter`.
    pub sys_enter: SysEnterLayout,
    /// `raw_syscalls:sys_exit`.
    pub sys_exit: SysExitLayout,
    /// `irq:irq_handler_entry`.
    pub irq_handler_entry: IrqHandlerEntryLayout,
    /// `irq:irq_handler_exit`.
    pub irq_handler_exit: IrqHandlerExitLayout,
    /// `irq:softirq_entry`.
    pub softirq_entry: SoftirqLayout,
    /// `irq:softirq_exit`.
    pub softirq_exit: SoftirqLayout,
    /// `block:block_rq_issue`.
    pub block_rq_issue: BlockRqLayout,
    /// `block:block_rq_complete`.
    pub block_rq_complete: BlockRqLayout,
    /// `exceptions:page_fault_user`.
    pub page_fault_user: PageFaultLayout,
    /// `kmem:rss_stat`.
    pub rss_stat: RssStatLayout,
    /// `power:cpu_idle`.
    pub cpu_idle: PowerLayout,
    /// `power:cpu_frequency`.
    pub cpu_frequency: PowerLayout,
    /// [`FILTER_PIDS`] and [`EMIT_PROC`] bits.
    pub filter: u32,
    /// Process id of the recorder itself: its system calls are not
    /// recorded (they would record its own reading of the events).
    pub self_tgid: u32,
    /// Padding, so that `stop_ts` is 8-aligned; 0.
    pub reserved_tail: u32,
    /// Events stamped after this time (CLOCK_BOOTTIME ns) are not written:
    /// stopping sets it, so every category ends at the same instant however
    /// long detaching the programs takes. `u64::MAX` while recording.
    pub stop_ts: u64,
}

impl KernelLayout {
    /// The layout version this crate defines; stored in
    /// [`KernelLayout::version`].
    pub const VERSION: u16 = 8;
}

// ---------------------------------------------------------------------------
// eBPF → userspace: events.

/// Kind of a kernel event: the first field of every [`EventHeader`].
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// [`SchedSwitchEvent`].
    Switch = 1,
    /// [`SchedWakeupEvent`].
    Wakeup = 2,
    /// [`ProcessForkEvent`].
    Fork = 3,
    /// [`TaskNewtaskEvent`].
    NewTask = 4,
    /// [`ProcessExecEvent`].
    Exec = 5,
    /// [`ProcessExitEvent`].
    Exit = 6,
    /// [`TaskRenameEvent`].
    Rename = 7,
    /// [`SysEnterEvent`].
    SysEnter = 8,
    /// [`SysExitEvent`].
    SysExit = 9,
    /// [`IrqEntryEvent`].
    IrqEntry = 10,
    /// [`IrqExitEvent`].
    IrqExit = 11,
    /// [`SoftirqEvent`].
    Softirq = 12,
    /// [`BlockRqEvent`], issue.
    BlockIssue = 13,
    /// [`BlockRqEvent`], completion.
    BlockComplete = 14,
    /// [`PageFaultEvent`].
    PageFault = 15,
    /// [`RssStatEvent`].
    RssStat = 16,
    /// [`PowerEvent`].
    Power = 17,
    /// [`UprobeEvent`].
    Uprobe = 18,
    /// [`UsdtEvent`].
    Usdt = 19,
}

impl EventKind {
    /// The kind with wire value `value`, if any.
    pub const fn from_u32(value: u32) -> Option<EventKind> {
        Some(match value {
            1 => EventKind::Switch,
            2 => EventKind::Wakeup,
            3 => EventKind::Fork,
            4 => EventKind::NewTask,
            5 => EventKind::Exec,
            6 => EventKind::Exit,
            7 => EventKind::Rename,
            8 => EventKind::SysEnter,
            9 => EventKind::SysExit,
            10 => EventKind::IrqEntry,
            11 => EventKind::IrqExit,
            12 => EventKind::Softirq,
            13 => EventKind::BlockIssue,
            14 => EventKind::BlockComplete,
            15 => EventKind::PageFault,
            16 => EventKind::RssStat,
            17 => EventKind::Power,
            18 => EventKind::Uprobe,
            19 => EventKind::Usdt,
            _ => return None,
        })
    }

    /// Size in bytes of this kind's event struct.
    pub const fn event_size(self) -> usize {
        match self {
            EventKind::Switch => size_of::<SchedSwitchEvent>(),
            EventKind::Wakeup => size_of::<SchedWakeupEvent>(),
            EventKind::Fork => size_of::<ProcessForkEvent>(),
            EventKind::NewTask => size_of::<TaskNewtaskEvent>(),
            EventKind::Exec => size_of::<ProcessExecEvent>(),
            EventKind::Exit => size_of::<ProcessExitEvent>(),
            EventKind::Rename => size_of::<TaskRenameEvent>(),
            EventKind::SysEnter => size_of::<SysEnterEvent>(),
            EventKind::SysExit => size_of::<SysExitEvent>(),
            EventKind::IrqEntry => size_of::<IrqEntryEvent>(),
            EventKind::IrqExit => size_of::<IrqExitEvent>(),
            EventKind::Softirq => size_of::<SoftirqEvent>(),
            EventKind::BlockIssue | EventKind::BlockComplete => size_of::<BlockRqEvent>(),
            EventKind::PageFault => size_of::<PageFaultEvent>(),
            EventKind::RssStat => size_of::<RssStatEvent>(),
            EventKind::Power => size_of::<PowerEvent>(),
            EventKind::Uprobe => size_of::<UprobeEvent>(),
            EventKind::Usdt => size_of::<UsdtEvent>(),
        }
    }
}

/// The header every event starts with.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventHeader {
    /// [`EventKind`] as its `u32` value.
    pub kind: u32,
    /// CPU the event happened on (`bpf_get_smp_processor_id`).
    pub cpu: u32,
    /// Time of the event in nanoseconds of CLOCK_BOOTTIME (`bpf_ktime_get_boot_ns`).
    pub ts: u64,
    /// Thread id of the current task (the kernel's `pid`).
    pub tid: u32,
    /// Process id of the current task (the kernel's `tgid`).
    pub tgid: u32,
}

/// `sched:sched_switch`: the CPU switched from `prev` (the current task,
/// whose process is [`EventHeader::tgid`]) to `next`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedSwitchEvent {
    /// Common header; `tid`/`tgid` are the previous task's.
    pub header: EventHeader,
    /// Name of the task switched away from, NUL-padded.
    pub prev_comm: [u8; COMM_LEN],
    /// Name of the task switched to, NUL-padded.
    pub next_comm: [u8; COMM_LEN],
    /// Thread id of the task switched away from.
    pub prev_pid: u32,
    /// Kernel priority of the task switched away from.
    pub prev_prio: i32,
    /// Thread id of the task switched to.
    pub next_pid: u32,
    /// Kernel priority of the task switched to.
    pub next_prio: i32,
    /// State the previous task was left in (`TASK_*` bits; 0 = runnable,
    /// so preempted). [`ABSENT_INT`] when the field is absent.
    pub prev_state: i64,
}

/// `sched:sched_wakeup` or `sched:sched_wakeup_new`: the current task
/// (the waker) made a task runnable.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedWakeupEvent {
    /// Common header; `tid`/`tgid` are the waker's.
    pub header: EventHeader,
    /// Name of the woken task, NUL-padded.
    pub comm: [u8; COMM_LEN],
    /// Thread id of the woken task.
    pub pid: u32,
    /// Kernel priority of the woken task.
    pub prio: i32,
    /// CPU the woken task will run on.
    pub target_cpu: i32,
    /// [`WAKEUP_NEW`] for the first wake-up of a new task.
    pub flags: u32,
}

/// `sched:sched_process_fork`: the current task created a task.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessForkEvent {
    /// Common header; `tid`/`tgid` are the parent's.
    pub header: EventHeader,
    /// Thread id of the parent.
    pub parent_pid: u32,
    /// Thread id of the new task.
    pub child_pid: u32,
    /// Name of the new task, NUL-padded.
    pub child_comm: [u8; COMM_LEN],
}

/// `task:task_newtask`: the current task created a task; says whether it is
/// a thread of the caller's process or a new process.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskNewtaskEvent {
    /// Common header; `tid`/`tgid` are the parent's.
    pub header: EventHeader,
    /// Thread id of the new task.
    pub pid: u32,
    /// Process id of the new task: the parent's for a thread
    /// ([`CLONE_THREAD`]), else the new task's own id; [`ABSENT_ID`] when
    /// `clone_flags` is absent.
    pub child_tgid: u32,
    /// `clone_flags` the task was created with.
    pub clone_flags: u64,
    /// Name of the new task, NUL-padded.
    pub comm: [u8; COMM_LEN],
}

/// `sched:sched_process_exec`: the current task executed a new program.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessExecEvent {
    /// Common header; `tid` is the task after exec.
    pub header: EventHeader,
    /// Thread id after exec (the process id).
    pub pid: u32,
    /// Thread id that called exec (differs from `pid` when a non-leader
    /// thread executed).
    pub old_pid: u32,
    /// New name of the task (`bpf_get_current_comm` after exec), NUL-padded.
    pub comm: [u8; COMM_LEN],
    /// Number of bytes of `filename` used, without the NUL terminator.
    pub filename_len: u32,
    /// Zero.
    pub reserved: u32,
    /// Path of the executed file, truncated to [`FILENAME_LEN`] - 1 bytes.
    pub filename: [u8; FILENAME_LEN],
}

/// `sched:sched_process_exit`: the current task exited.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessExitEvent {
    /// Common header; `tid`/`tgid` are the exiting task's.
    pub header: EventHeader,
    /// Name of the exiting task, NUL-padded.
    pub comm: [u8; COMM_LEN],
    /// Thread id of the exiting task.
    pub pid: u32,
    /// Kernel priority of the exiting task.
    pub prio: i32,
    /// [`GROUP_DEAD_YES`] when this was the process's last thread,
    /// [`GROUP_DEAD_NO`] when not, [`GROUP_DEAD_UNKNOWN`] on kernels without
    /// the field.
    pub group_dead: u8,
    /// Zero.
    pub reserved: [u8; 7],
}

/// `task:task_rename`: a task of the current process changed its name.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskRenameEvent {
    /// Common header; `tgid` is the renamed task's process.
    pub header: EventHeader,
    /// Thread id of the renamed task (the current task's on kernels without
    /// the field).
    pub pid: u32,
    /// Zero.
    pub reserved: u32,
    /// Name before, NUL-padded.
    pub oldcomm: [u8; COMM_LEN],
    /// Name after, NUL-padded.
    pub newcomm: [u8; COMM_LEN],
}

/// `raw_syscalls:sys_enter`: the current task entered a system call.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SysEnterEvent {
    /// Common header; `tid`/`tgid` are the caller's.
    pub header: EventHeader,
    /// System call number ([`ABSENT_INT`] when the field is absent).
    pub id: i64,
    /// The argument registers (zero where the record has fewer).
    pub args: [u64; SYSCALL_ARGS],
}

/// `raw_syscalls:sys_exit`: the current task returned from a system call.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SysExitEvent {
    /// Common header; `tid`/`tgid` are the caller's.
    pub header: EventHeader,
    /// System call number ([`ABSENT_INT`] when the field is absent).
    pub id: i64,
    /// Return value: a negative errno on failure.
    pub ret: i64,
}

/// `irq:irq_handler_entry`: a hard IRQ handler started on this CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IrqEntryEvent {
    /// Common header; `cpu` is where it runs (`tid`/`tgid` are whatever
    /// task it interrupted).
    pub header: EventHeader,
    /// IRQ number.
    pub irq: i32,
    /// Zero.
    pub reserved: u32,
    /// The handler's name, NUL-padded, truncated to [`IRQ_NAME_LEN`] - 1.
    pub name: [u8; IRQ_NAME_LEN],
}

/// `irq:irq_handler_exit`: a hard IRQ handler returned on this CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IrqExitEvent {
    /// Common header.
    pub header: EventHeader,
    /// IRQ number.
    pub irq: i32,
    /// Non-zero when the handler handled the interrupt.
    pub ret: i32,
}

/// `irq:softirq_entry` or `irq:softirq_exit` on this CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SoftirqEvent {
    /// Common header.
    pub header: EventHeader,
    /// Softirq vector (0 HI, 1 TIMER, 2 NET_TX, 3 NET_RX, 4 BLOCK,
    /// 5 IRQ_POLL, 6 TASKLET, 7 SCHED, 8 HRTIMER, 9 RCU).
    pub vec: u32,
    /// [`SOFTIRQ_EXIT`] for the exit, 0 for the entry.
    pub exit: u32,
}

/// `block:block_rq_issue` (a request went to the device driver) or
/// `block:block_rq_complete` (the device completed it).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockRqEvent {
    /// Common header; at issue `tid`/`tgid` are the issuing task's.
    pub header: EventHeader,
    /// First sector.
    pub sector: u64,
    /// Device, `major << 20 | minor` as the kernel's `dev_t`.
    pub dev: u32,
    /// Sectors.
    pub nr_sector: u32,
    /// Bytes (issue) or the error (completion, 0 on success).
    pub bytes_or_error: i32,
    /// Zero.
    pub reserved: u32,
    /// `rwbs` flags, NUL-padded: R read, W write, D discard, F flush, ...
    pub rwbs: [u8; RWBS_LEN],
}

/// `exceptions:page_fault_user`: the current task faulted in user mode.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageFaultEvent {
    /// Common header; `tid`/`tgid` are the faulting task's.
    pub header: EventHeader,
    /// The faulting address.
    pub address: u64,
    /// The instruction that faulted.
    pub ip: u64,
    /// The architecture's fault flags (x86: bit 0 protection violation,
    /// 1 write, 2 user, 3 reserved bit, 4 instruction fetch, 5 protection
    /// key).
    pub error_code: u64,
}

/// `kmem:rss_stat`: one resident-set counter of an address space changed.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RssStatEvent {
    /// Common header; when `curr` is 1, `tgid` owns the address space.
    pub header: EventHeader,
    /// The new value, in bytes.
    pub size: i64,
    /// A hash of the address space.
    pub mm_id: u32,
    /// 1 when the address space is the current task's.
    pub curr: u32,
    /// 0 file pages, 1 anonymous pages, 2 swap entries, 3 shared memory.
    pub member: i32,
    /// Zero.
    pub reserved: u32,
}

/// [`PowerEvent::what`]: `power:cpu_idle`.
pub const POWER_IDLE: u32 = 0;
/// [`PowerEvent::what`]: `power:cpu_frequency`.
pub const POWER_FREQUENCY: u32 = 1;
/// [`PowerEvent::state`] of `power:cpu_idle` when the CPU leaves idle.
pub const IDLE_EXIT: u32 = u32::MAX;

/// `power:cpu_idle` or `power:cpu_frequency`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PowerEvent {
    /// Common header.
    pub header: EventHeader,
    /// [`POWER_IDLE`] or [`POWER_FREQUENCY`].
    pub what: u32,
    /// The CPU the state is about.
    pub cpu_id: u32,
    /// Idle state index ([`IDLE_EXIT`] when leaving idle) or kHz.
    pub state: u32,
    /// Zero.
    pub reserved: u32,
}

/// Name of the eBPF program attached (once per probe) at the entry of each
/// `--uprobe` function.
pub const UPROBE_ENTRY_PROGRAM: &str = "uprobe_entry";
/// Name of the eBPF program attached (once per probe) at the return of each
/// `--uprobe` function.
pub const UPROBE_RETURN_PROGRAM: &str = "uprobe_return";
/// [`UprobeEvent::ret`] of a return.
pub const UPROBE_RETURN: u32 = 1;

/// A dynamic probe fired: the current task entered or returned from a
/// probed function.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UprobeEvent {
    /// Common header; `tid`/`tgid` are the calling task's.
    pub header: EventHeader,
    /// The probe: the attach cookie, its index in the recorder's list.
    pub probe: u64,
    /// 0 at entry, [`UPROBE_RETURN`] at return.
    pub ret: u32,
    /// Zero.
    pub reserved: u32,
}

/// Name of the eBPF program attached at every `--usdt` probe site.
pub const USDT_PROGRAM: &str = "usdt";
/// Name of the array of [`UsdtSpec`]s, indexed by the attach cookie.
pub const MAP_USDT_SPECS: &str = "USDT_SPECS";
/// Most arguments a USDT probe has (the `sys/sdt.h` limit).
pub const USDT_MAX_ARGS: usize = 12;
/// Most bytes of the register file (`struct pt_regs`) a USDT program copies:
/// all 168 on x86-64, `x0`..`x30` and `sp` on arm64; a multiple of 8.
pub const USDT_MAX_REGS_BYTES: u16 = 256;

/// [`UsdtArg::kind`]: the argument is not recorded (its location could not
/// be understood).
pub const USDT_ARG_ABSENT: u8 = 0;
/// [`UsdtArg::kind`]: a constant, [`UsdtArg::value`].
pub const USDT_ARG_CONST: u8 = 1;
/// [`UsdtArg::kind`]: the value of the register at [`UsdtArg::reg_offset`].
pub const USDT_ARG_REG: u8 = 2;
/// [`UsdtArg::kind`]: the value in user memory at the register's value plus
/// [`UsdtArg::value`].
pub const USDT_ARG_DEREF: u8 = 3;

/// [`UsdtArg::format`]: a number, signed or not as declared.
pub const USDT_FORMAT_NUMBER: u8 = 0;
/// [`UsdtArg::format`]: a pointer to a NUL-terminated string in the
/// program's memory; the program copies up to [`USDT_STR_LEN`] bytes of it
/// into the event's next string slot (at most [`USDT_MAX_STRS`] per event).
pub const USDT_FORMAT_STRING: u8 = 1;
/// [`UsdtArg::format`]: a pointer, recorded as such.
pub const USDT_FORMAT_POINTER: u8 = 2;
/// Bytes of each string argument a USDT event carries, the NUL included.
pub const USDT_STR_LEN: usize = 64;
/// String arguments a USDT event carries at most.
pub const USDT_MAX_STRS: usize = 2;

/// Where one argument of a USDT probe site is, as the eBPF program reads
/// it (the `sys/sdt.h` argument string, parsed by userspace).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsdtArg {
    /// `USDT_ARG_*`.
    pub kind: u8,
    /// Size in bytes: 1, 2, 4 or 8.
    pub size: u8,
    /// 1 when the value is signed (sign-extended from `size` bytes).
    pub signed: u8,
    /// `USDT_FORMAT_*`: how the value is recorded.
    pub format: u8,
    /// Offset of the register in the copied register file (a multiple of 8,
    /// below [`UsdtSpec::regs_size`]).
    pub reg_offset: u32,
    /// The constant, or the displacement added to the register.
    pub value: i64,
}

/// The arguments of one USDT probe site: the value of `USDT_SPECS[cookie]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UsdtSpec {
    /// How many of `args` are used.
    pub nargs: u32,
    /// Bytes of the register file (`struct pt_regs`) to copy, a multiple of
    /// 8 and at most [`USDT_MAX_REGS_BYTES`]; 0 when no argument is in a
    /// register.
    pub regs_size: u32,
    /// The arguments.
    pub args: [UsdtArg; USDT_MAX_ARGS],
    /// For each string slot of the event, the index of the argument whose
    /// string goes there ([`USDT_NO_STRING`]: none).
    pub strings: [u8; USDT_MAX_STRS],
    /// Zero.
    pub reserved: [u8; 8 - USDT_MAX_STRS],
}

/// [`UsdtSpec::strings`]: the slot is not used.
pub const USDT_NO_STRING: u8 = 0xff;

impl Default for UsdtSpec {
    fn default() -> Self {
        UsdtSpec {
            nargs: 0,
            regs_size: 0,
            args: [UsdtArg::default(); USDT_MAX_ARGS],
            strings: [USDT_NO_STRING; USDT_MAX_STRS],
            reserved: [0; 8 - USDT_MAX_STRS],
        }
    }
}

/// A USDT probe site fired: the current task passed a `DTRACE_PROBE` /
/// `STAP_PROBE` point of a `--usdt` probe.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UsdtEvent {
    /// Common header; `tid`/`tgid` are the task's.
    pub header: EventHeader,
    /// The site: the attach cookie, its index in the recorder's list.
    pub site: u32,
    /// How many of `args` were read ([`UsdtSpec::nargs`]).
    pub nargs: u32,
    /// Bit `i` set when argument `i` could not be read (user memory paged
    /// out, or an argument the recorder could not place).
    pub unreadable: u32,
    /// Zero.
    pub reserved: u32,
    /// The arguments' values, sign- or zero-extended to 64 bits.
    pub args: [u64; USDT_MAX_ARGS],
    /// The strings of the [`USDT_FORMAT_STRING`] arguments, in argument
    /// order, each NUL-terminated (slots not used: unspecified).
    pub strings: [[u8; USDT_STR_LEN]; USDT_MAX_STRS],
}

/// The name of `kmem:rss_stat` member `member` as a counter argument.
pub fn rss_member_name(member: i32) -> Option<&'static str> {
    match member {
        0 => Some("file"),
        1 => Some("anon"),
        2 => Some("swap"),
        3 => Some("shmem"),
        _ => None,
    }
}

/// The kernel's name of softirq vector `vec`.
pub fn softirq_name(vec: u32) -> Option<&'static str> {
    const NAMES: [&str; 10] = [
        "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER",
        "RCU",
    ];
    NAMES.get(vec as usize).copied()
}

const _: () = {
    assert!(size_of::<FieldLoc>() == 6);
    assert!(size_of::<EventHeader>() == 24);
    assert!(size_of::<SchedSwitchEvent>() == 80);
    assert!(size_of::<SchedWakeupEvent>() == 56);
    assert!(size_of::<ProcessForkEvent>() == 48);
    assert!(size_of::<TaskNewtaskEvent>() == 56);
    assert!(size_of::<ProcessExecEvent>() == 312);
    assert!(size_of::<ProcessExitEvent>() == 56);
    assert!(size_of::<TaskRenameEvent>() == 64);
    assert!(size_of::<SysEnterEvent>() == 80);
    assert!(size_of::<SysExitEvent>() == 40);
    assert!(size_of::<IrqEntryEvent>() == 64);
    assert!(size_of::<IrqExitEvent>() == 32);
    assert!(size_of::<SoftirqEvent>() == 32);
    assert!(size_of::<BlockRqEvent>() == 56);
    assert!(size_of::<PageFaultEvent>() == 48);
    assert!(size_of::<RssStatEvent>() == 48);
    assert!(size_of::<PowerEvent>() == 40);
    assert!(size_of::<UprobeEvent>() == 40);
    assert!(size_of::<UsdtArg>() == 16);
    assert!(size_of::<UsdtSpec>() == 8 + 16 * USDT_MAX_ARGS + 8);
    assert!(USDT_MAX_STRS <= 8);
    assert!(size_of::<UsdtEvent>() == 40 + 8 * USDT_MAX_ARGS + USDT_STR_LEN * USDT_MAX_STRS);
    assert!(USDT_MAX_REGS_BYTES.is_multiple_of(8));
    // version, reserved, wakeup_bytes, 20 record sizes, 62 fields, filter,
    // self_tgid, reserved_tail, stop_ts: no implicit padding anywhere (add
    // a `u16` before `filter` when the fields stop ending on a multiple of
    // 4, and resize `reserved_tail` to keep `stop_ts` at a multiple of 8).
    assert!(size_of::<KernelLayout>() == 2 + 2 + 4 + 20 * 2 + 62 * 6 + 4 + 4 + 4 + 8);
    assert!(core::mem::offset_of!(KernelLayout, stop_ts) % 8 == 0);
    assert!(WAKEUP_CHECK_INTERVAL.is_power_of_two());
};

/// One decoded ring-buffer entry.
// No allocator in `no_std` to box the exec event (with its 256-byte path):
// events are plain copies, passed by value.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelEvent {
    /// A context switch.
    Switch(SchedSwitchEvent),
    /// A wake-up (or the first wake-up of a new task).
    Wakeup(SchedWakeupEvent),
    /// A fork or clone, from the scheduler's tracepoint.
    Fork(ProcessForkEvent),
    /// A new task, with its clone flags.
    NewTask(TaskNewtaskEvent),
    /// An exec.
    Exec(ProcessExecEvent),
    /// A task exit.
    Exit(ProcessExitEvent),
    /// A task rename.
    Rename(TaskRenameEvent),
    /// A system call entry.
    SysEnter(SysEnterEvent),
    /// A system call return.
    SysExit(SysExitEvent),
    /// A hard IRQ handler start.
    IrqEntry(IrqEntryEvent),
    /// A hard IRQ handler end.
    IrqExit(IrqExitEvent),
    /// A softirq start or end.
    Softirq(SoftirqEvent),
    /// A block request issued.
    BlockIssue(BlockRqEvent),
    /// A block request completed.
    BlockComplete(BlockRqEvent),
    /// A user page fault.
    PageFault(PageFaultEvent),
    /// A resident-set counter change.
    RssStat(RssStatEvent),
    /// A CPU idle state or frequency change.
    Power(PowerEvent),
    /// A probed function entered or returned.
    Uprobe(UprobeEvent),
    /// A USDT probe site fired.
    Usdt(UsdtEvent),
}

impl KernelEvent {
    /// The event's common header.
    pub fn header(&self) -> &EventHeader {
        match self {
            KernelEvent::Switch(e) => &e.header,
            KernelEvent::Wakeup(e) => &e.header,
            KernelEvent::Fork(e) => &e.header,
            KernelEvent::NewTask(e) => &e.header,
            KernelEvent::Exec(e) => &e.header,
            KernelEvent::Exit(e) => &e.header,
            KernelEvent::Rename(e) => &e.header,
            KernelEvent::SysEnter(e) => &e.header,
            KernelEvent::SysExit(e) => &e.header,
            KernelEvent::IrqEntry(e) => &e.header,
            KernelEvent::IrqExit(e) => &e.header,
            KernelEvent::Softirq(e) => &e.header,
            KernelEvent::BlockIssue(e) | KernelEvent::BlockComplete(e) => &e.header,
            KernelEvent::PageFault(e) => &e.header,
            KernelEvent::RssStat(e) => &e.header,
            KernelEvent::Power(e) => &e.header,
            KernelEvent::Uprobe(e) => &e.header,
            KernelEvent::Usdt(e) => &e.header,
        }
    }

    /// The event's kind.
    pub fn kind(&self) -> EventKind {
        match self {
            KernelEvent::Switch(_) => EventKind::Switch,
            KernelEvent::Wakeup(_) => EventKind::Wakeup,
            KernelEvent::Fork(_) => EventKind::Fork,
            KernelEvent::NewTask(_) => EventKind::NewTask,
            KernelEvent::Exec(_) => EventKind::Exec,
            KernelEvent::Exit(_) => EventKind::Exit,
            KernelEvent::Rename(_) => EventKind::Rename,
            KernelEvent::SysEnter(_) => EventKind::SysEnter,
            KernelEvent::SysExit(_) => EventKind::SysExit,
            KernelEvent::IrqEntry(_) => EventKind::IrqEntry,
            KernelEvent::IrqExit(_) => EventKind::IrqExit,
            KernelEvent::Softirq(_) => EventKind::Softirq,
            KernelEvent::BlockIssue(_) => EventKind::BlockIssue,
            KernelEvent::BlockComplete(_) => EventKind::BlockComplete,
            KernelEvent::PageFault(_) => EventKind::PageFault,
            KernelEvent::RssStat(_) => EventKind::RssStat,
            KernelEvent::Power(_) => EventKind::Power,
            KernelEvent::Uprobe(_) => EventKind::Uprobe,
            KernelEvent::Usdt(_) => EventKind::Usdt,
        }
    }
}

impl ProcessExecEvent {
    /// The executed file's path bytes (no terminator), bounded by the buffer
    /// whatever `filename_len` says.
    pub fn filename(&self) -> &[u8] {
        let len = (self.filename_len as usize).min(FILENAME_LEN);
        c_str_bytes(&self.filename[..len])
    }
}

impl ProcessExitEvent {
    /// Whether the process's last thread exited; `None` on kernels whose
    /// tracepoint lacks the field.
    pub fn group_dead(&self) -> Option<bool> {
        match self.group_dead {
            GROUP_DEAD_NO => Some(false),
            GROUP_DEAD_YES => Some(true),
            _ => None,
        }
    }
}

impl SchedWakeupEvent {
    /// Whether this is the first wake-up of a new task (`sched_wakeup_new`).
    pub fn is_new(&self) -> bool {
        self.flags & WAKEUP_NEW != 0
    }
}

/// The bytes of a NUL-padded name up to its first NUL (all of it if none).
pub fn c_str_bytes(bytes: &[u8]) -> &[u8] {
    match bytes.iter().position(|&b| b == 0) {
        Some(end) => &bytes[..end],
        None => bytes,
    }
}

/// Why a ring-buffer entry could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Shorter than the header or than its kind's struct.
    TooShort {
        /// Bytes in the entry.
        len: usize,
        /// Bytes needed.
        needed: usize,
    },
    /// The header's kind is not an [`EventKind`].
    UnknownKind(u32),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::TooShort { len, needed } => {
                write!(f, "kernel event of {len} bytes, {needed} needed")
            }
            ParseError::UnknownKind(kind) => write!(f, "unknown kernel event kind {kind}"),
        }
    }
}

impl core::error::Error for ParseError {}

/// Plain-data event structs: `#[repr(C)]`, only integers and byte arrays,
/// no padding, so every bit pattern is a valid value.
trait PlainData: Copy {}
impl PlainData for EventHeader {}
impl PlainData for SchedSwitchEvent {}
impl PlainData for SchedWakeupEvent {}
impl PlainData for ProcessForkEvent {}
impl PlainData for TaskNewtaskEvent {}
impl PlainData for ProcessExecEvent {}
impl PlainData for ProcessExitEvent {}
impl PlainData for TaskRenameEvent {}
impl PlainData for SysEnterEvent {}
impl PlainData for SysExitEvent {}
impl PlainData for IrqEntryEvent {}
impl PlainData for IrqExitEvent {}
impl PlainData for SoftirqEvent {}
impl PlainData for BlockRqEvent {}
impl PlainData for PageFaultEvent {}
impl PlainData for RssStatEvent {}
impl PlainData for PowerEvent {}
impl PlainData for UprobeEvent {}
impl PlainData for UsdtEvent {}

/// Copies a `T` out of the start of `bytes`, if long enough.
fn read_plain<T: PlainData>(bytes: &[u8]) -> Result<T, ParseError> {
    let needed = size_of::<T>();
    if bytes.len() < needed {
        return Err(ParseError::TooShort {
            len: bytes.len(),
            needed,
        });
    }
    // SAFETY: `bytes` holds at least `size_of::<T>()` readable bytes (checked
    // above), `read_unaligned` has no alignment requirement, and `T` is plain
    // data (`PlainData`: integers and byte arrays without padding), so any
    // bytes form a valid `T`.
    Ok(unsafe { core::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

/// Decodes one ring-buffer entry.
///
/// Checks the length against the header and the kind's struct and copies the
/// event out; never panics, whatever the bytes. Trailing bytes beyond the
/// kind's struct are ignored.
pub fn parse(bytes: &[u8]) -> Result<KernelEvent, ParseError> {
    let header: EventHeader = read_plain(bytes)?;
    let kind = EventKind::from_u32(header.kind).ok_or(ParseError::UnknownKind(header.kind))?;
    Ok(match kind {
        EventKind::Switch => KernelEvent::Switch(read_plain(bytes)?),
        EventKind::Wakeup => KernelEvent::Wakeup(read_plain(bytes)?),
        EventKind::Fork => KernelEvent::Fork(read_plain(bytes)?),
        EventKind::NewTask => KernelEvent::NewTask(read_plain(bytes)?),
        EventKind::Exec => KernelEvent::Exec(read_plain(bytes)?),
        EventKind::Exit => KernelEvent::Exit(read_plain(bytes)?),
        EventKind::Rename => KernelEvent::Rename(read_plain(bytes)?),
        EventKind::SysEnter => KernelEvent::SysEnter(read_plain(bytes)?),
        EventKind::SysExit => KernelEvent::SysExit(read_plain(bytes)?),
        EventKind::IrqEntry => KernelEvent::IrqEntry(read_plain(bytes)?),
        EventKind::IrqExit => KernelEvent::IrqExit(read_plain(bytes)?),
        EventKind::Softirq => KernelEvent::Softirq(read_plain(bytes)?),
        EventKind::BlockIssue => KernelEvent::BlockIssue(read_plain(bytes)?),
        EventKind::BlockComplete => KernelEvent::BlockComplete(read_plain(bytes)?),
        EventKind::PageFault => KernelEvent::PageFault(read_plain(bytes)?),
        EventKind::RssStat => KernelEvent::RssStat(read_plain(bytes)?),
        EventKind::Power => KernelEvent::Power(read_plain(bytes)?),
        EventKind::Uprobe => KernelEvent::Uprobe(read_plain(bytes)?),
        EventKind::Usdt => KernelEvent::Usdt(read_plain(bytes)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: EventKind) -> EventHeader {
        EventHeader {
            kind: kind as u32,
            cpu: 3,
            ts: 123_456_789,
            tid: 42,
            tgid: 41,
        }
    }

    fn bytes_of<T: PlainData>(value: &T) -> [u8; 512] {
        let mut out = [0u8; 512];
        // SAFETY: `T` is plain data without padding, so all its
        // `size_of::<T>()` bytes are initialised; `out` is large enough for
        // every event struct (the largest is 312 bytes).
        let src = unsafe {
            core::slice::from_raw_parts((value as *const T).cast::<u8>(), size_of::<T>())
        };
        out[..src.len()].copy_from_slice(src);
        out
    }

    #[test]
    fn round_trip_switch() {
        let mut comm = [0u8; COMM_LEN];
        comm[..4].copy_from_slice(b"bash");
        let ev = SchedSwitchEvent {
            header: header(EventKind::Switch),
            prev_comm: comm,
            next_comm: [0; COMM_LEN],
            prev_pid: 42,
            prev_prio: 120,
            next_pid: 0,
            next_prio: 120,
            prev_state: 1,
        };
        let buf = bytes_of(&ev);
        let n = size_of::<SchedSwitchEvent>();
        assert_eq!(parse(&buf[..n]), Ok(KernelEvent::Switch(ev)));
        // Trailing bytes are ignored.
        assert_eq!(parse(&buf[..n + 8]), Ok(KernelEvent::Switch(ev)));
        assert_eq!(
            parse(&buf[..n - 1]),
            Err(ParseError::TooShort {
                len: n - 1,
                needed: n
            })
        );
        let KernelEvent::Switch(back) = parse(&buf[..n]).unwrap() else {
            panic!("wrong kind");
        };
        assert_eq!(c_str_bytes(&back.prev_comm), b"bash");
        assert_eq!(c_str_bytes(&back.next_comm), b"");
    }

    #[test]
    fn exec_filename_is_bounded() {
        let mut ev = ProcessExecEvent {
            header: header(EventKind::Exec),
            pid: 1,
            old_pid: 1,
            comm: [0; COMM_LEN],
            filename_len: 9,
            reserved: 0,
            filename: [b'x'; FILENAME_LEN],
        };
        ev.filename[..9].copy_from_slice(b"/bin/true");
        assert_eq!(ev.filename(), b"/bin/true");
        ev.filename_len = u32::MAX;
        assert_eq!(ev.filename().len(), FILENAME_LEN);
    }

    #[test]
    fn rejects_garbage_without_panicking() {
        assert!(matches!(parse(&[]), Err(ParseError::TooShort { .. })));
        assert_eq!(parse(&[0u8; 64]), Err(ParseError::UnknownKind(0)));
        let mut buf = [0xffu8; 400];
        assert_eq!(parse(&buf), Err(ParseError::UnknownKind(u32::MAX)));
        for kind in 1..=18u32 {
            buf[..4].copy_from_slice(&kind.to_le_bytes());
            let k = EventKind::from_u32(kind).unwrap();
            assert!(parse(&buf[..k.event_size()]).is_ok());
            assert!(parse(&buf[..k.event_size() - 1]).is_err());
            assert_eq!(parse(&buf).unwrap().kind(), k);
        }
        // Every prefix of every length parses or fails cleanly.
        for len in 0..buf.len() {
            let _ = parse(&buf[..len]);
        }
    }

    #[test]
    fn programs_have_known_categories() {
        for tp in TRACEPOINTS {
            assert!(
                crate::category::KERNEL_CATEGORIES
                    .iter()
                    .any(|(name, _)| *name == tp.category)
            );
        }
    }
}
