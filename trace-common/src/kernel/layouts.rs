//! Userspace → eBPF: where each tracepoint field lives in the raw record
//! on the running kernel, and the recording's settings, in the one value of
//! the [`MAP_LAYOUT`] map.

#[cfg(doc)]
use super::{COUNTER_NO_LAYOUT, MAP_CGROUPS, MAP_FOLLOWED, MAP_LAYOUT, SYSCALL_ARGS};

/// [`KernelLayout::filter`] bit: record only events of followed threads
/// ([`MAP_FOLLOWED`]).
pub const FILTER_PIDS: u32 = 1;

/// [`KernelLayout::filter`] bit: record only events of tasks in the
/// selected cgroups ([`MAP_CGROUPS`]) or below them. The current task's
/// membership is asked of the kernel at each event, so a task that enters
/// a selected cgroup is recorded from then on; [`MAP_FOLLOWED`] holds the
/// members as of their last switch out, for the events about a task other
/// than the current one (the task switched in, the task woken).
pub const FILTER_CGROUPS: u32 = 2;

/// [`KernelLayout::filter`] bit: the system call programs keep each entry
/// on its CPU and write a call that returns there without its caller being
/// switched out as one `SyscallEvent` (the entry is written on its own when
/// the caller is switched out, or found in the pending map at the stop);
/// without it they write a `SysEnterEvent` and a `SysExitEvent` for every
/// call.
pub const PAIR_SYSCALLS: u32 = 4;

/// Most bytes of a raw tracepoint record the programs copy (fields must end
/// within them); userspace treats a field beyond as absent.
pub const MAX_RECORD_BYTES: u16 = 256;

/// The programs check the ring buffer's fill level against
/// [`KernelLayout::wakeup_bytes`] once per this many events on a CPU (a
/// power of two).
pub const WAKEUP_CHECK_INTERVAL: u32 = 32;

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

/// Field locations of `signal:signal_generate`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SignalGenerateLayout {
    /// Bytes of the record the program copies before reading the fields:
    /// the end of the last present field, at most [`MAX_RECORD_BYTES`].
    pub record_size: u16,
    /// `int sig`.
    pub sig: FieldLoc,
    /// `pid_t pid`: the target thread.
    pub pid: FieldLoc,
    /// `int group`.
    pub group: FieldLoc,
    /// `int result`.
    pub result: FieldLoc,
}

/// Field locations of `signal:signal_deliver`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SignalDeliverLayout {
    /// Bytes of the record the program copies before reading the fields:
    /// the end of the last present field, at most [`MAX_RECORD_BYTES`].
    pub record_size: u16,
    /// `int sig`.
    pub sig: FieldLoc,
    /// `unsigned long sa_handler`.
    pub sa_handler: FieldLoc,
}

/// Field locations of `block:block_rq_issue`, `block:block_rq_complete` and
/// `block:block_rq_requeue`.
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
    /// `unsigned int bytes` (issue) or `int error` (completion); absent
    /// from a requeue.
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
    /// `block:block_rq_requeue`.
    pub block_rq_requeue: BlockRqLayout,
    /// `exceptions:page_fault_user`.
    pub page_fault_user: PageFaultLayout,
    /// `kmem:rss_stat`.
    pub rss_stat: RssStatLayout,
    /// `power:cpu_idle`.
    pub cpu_idle: PowerLayout,
    /// `power:cpu_frequency`.
    pub cpu_frequency: PowerLayout,
    /// `signal:signal_generate`.
    pub signal_generate: SignalGenerateLayout,
    /// `signal:signal_deliver`.
    pub signal_deliver: SignalDeliverLayout,
    /// [`FILTER_PIDS`], [`FILTER_CGROUPS`] and [`PAIR_SYSCALLS`] bits.
    pub filter: u32,
    /// Process id of the recorder itself: its system calls are not
    /// recorded (they would record its own reading of the events).
    pub self_tgid: u32,
    /// How many slots of [`MAP_CGROUPS`] hold a selected cgroup (under
    /// [`FILTER_CGROUPS`]).
    pub cgroups: u32,
    /// Zero.
    pub reserved_cgroups: u32,
    /// Events stamped after this time (CLOCK_BOOTTIME ns) are not written:
    /// stopping sets it, so every category ends at the same instant however
    /// long detaching the programs takes. `u64::MAX` while recording.
    pub stop_ts: u64,
    /// What the stack programs do.
    pub stacks: super::stack::StackConfig,
}

impl KernelLayout {
    /// The layout version this crate defines; stored in
    /// [`KernelLayout::version`].
    pub const VERSION: u16 = 14;
}

const _: () = {
    assert!(size_of::<FieldLoc>() == 6);
    // version, reserved, wakeup_bytes, 22 record sizes, 70 fields, filter,
    // self_tgid, cgroups, reserved_cgroups, stop_ts, stacks: no implicit
    // padding anywhere (add a `u16` before `filter` when the fields stop
    // ending on a multiple of 4, and keep `stop_ts` at a multiple of 8).
    assert!(size_of::<KernelLayout>() == 2 + 2 + 4 + 22 * 2 + 70 * 6 + 4 + 4 + 4 + 4 + 8 + 24);
    assert!(core::mem::offset_of!(KernelLayout, stop_ts) % 8 == 0);
    assert!(WAKEUP_CHECK_INTERVAL.is_power_of_two());
};
