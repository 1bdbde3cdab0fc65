//! eBPF → userspace: the events the programs write into the ring buffers,
//! one `#[repr(C)]` struct per kind, each starting with an [`EventHeader`],
//! and [`parse`], which decodes one ring-buffer entry without trusting it.
//!
//! The kinds are declared once, in the `event_kinds!` table below: its
//! number, its name and its struct. [`EventKind`], [`EventKind::from_u32`],
//! [`EventKind::event_size`], the [`KernelEvent`] variants,
//! [`KernelEvent::header`], [`KernelEvent::kind`] and the decoding of every
//! fixed-size kind are generated from it, so a new kind is one table entry
//! plus its struct.

use core::fmt;

#[cfg(doc)]
use super::usdt::{USDT_FORMAT_STRING, UsdtSpec};
use super::usdt::{USDT_MAX_ARGS, USDT_MAX_STRS, USDT_STR_LEN};

/// Length of a kernel task name (`TASK_COMM_LEN`), NUL terminator included.
pub const COMM_LEN: usize = 16;

/// Bytes kept of an exec'd file name (NUL terminator included); longer names
/// are truncated.
pub const FILENAME_LEN: usize = 256;

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

/// `clone_flags` bit: the new task is a thread of the caller's process.
pub const CLONE_THREAD: u64 = 0x0001_0000;

/// [`SchedWakeupEvent::flags`] bit: the event came from `sched_wakeup_new`
/// (the first wake-up of a new task) rather than `sched_wakeup`.
pub const WAKEUP_NEW: u16 = 1;

/// [`ProcessExitEvent::group_dead`] value: other threads of the process live on.
pub const GROUP_DEAD_NO: u8 = 0;
/// [`ProcessExitEvent::group_dead`] value: the last thread of the process exited.
pub const GROUP_DEAD_YES: u8 = 1;
/// [`ProcessExitEvent::group_dead`] value: this kernel's tracepoint lacks the field.
pub const GROUP_DEAD_UNKNOWN: u8 = 2;

/// Generates the kinds of events from one table, an entry per kind:
///
/// ```text
/// /// Doc of the `KernelEvent` variant.
/// Name = number => Struct,
/// ```
///
/// `Name` becomes the [`EventKind`] variant with wire value `number` and the
/// [`KernelEvent`] variant holding a `Struct`, which must be a `#[repr(C)]`
/// plain-data struct whose first field is `header: EventHeader`. Kinds may
/// share a struct: every entry after the first one naming it says
/// `Struct (shared)` (so that its plain-data marker is declared once).
///
/// The table covers the fixed-size kinds, decoded by copying their struct
/// out of the entry. A kind whose body has a variable length is not one of
/// them: the table would grow a second list for such kinds (their
/// [`EventKind`] variants and numbers), and [`parse`] decodes them by hand
/// where a kind is not a fixed one.
macro_rules! event_kinds {
    ($(
        $(#[$doc:meta])*
        $kind:ident = $value:literal => $event:ident $(($shared:ident))?,
    )*) => {
        /// Kind of a kernel event: the first field of every [`EventHeader`].
        #[repr(u32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum EventKind {
            $(
                $(#[$doc])*
                #[doc = ""]
                #[doc = concat!("Its event: [`", stringify!($event), "`].")]
                $kind = $value,
            )*
        }

        impl EventKind {
            /// Every kind, in the order of their numbers.
            pub const ALL: &[EventKind] = &[$(EventKind::$kind),*];

            /// The kind with wire value `value`, if any.
            pub const fn from_u32(value: u32) -> Option<EventKind> {
                match value {
                    $($value => Some(EventKind::$kind),)*
                    _ => None,
                }
            }

            /// Size in bytes of this kind's event struct.
            pub const fn event_size(self) -> usize {
                match self {
                    $(EventKind::$kind => size_of::<$event>(),)*
                }
            }
        }

        /// One decoded ring-buffer entry.
        // No allocator in `no_std` to box the exec event (with its 256-byte
        // path): events are plain copies, passed by value.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum KernelEvent {
            $(
                $(#[$doc])*
                $kind($event),
            )*
        }

        impl KernelEvent {
            /// The event's common header.
            pub fn header(&self) -> &EventHeader {
                match self {
                    $(KernelEvent::$kind(e) => &e.header,)*
                }
            }

            /// The event's kind.
            pub fn kind(&self) -> EventKind {
                match self {
                    $(KernelEvent::$kind(_) => EventKind::$kind,)*
                }
            }

            /// Copies the event of fixed-size kind `kind` out of `bytes`.
            fn read_fixed(kind: EventKind, bytes: &[u8]) -> Result<KernelEvent, ParseError> {
                Ok(match kind {
                    $(EventKind::$kind => KernelEvent::$kind(read_plain(bytes)?),)*
                })
            }

            /// Decodes the event of fixed-size kind `kind` in `bytes` and
            /// lends it to `f`: the event is copied once, at its own size,
            /// never moved as a whole `KernelEvent` (whose size is the
            /// largest kind's).
            #[inline]
            pub(crate) fn with_fixed<R>(
                kind: EventKind,
                bytes: &[u8],
                f: impl FnOnce(&KernelEvent) -> R,
            ) -> Result<R, ParseError> {
                Ok(match kind {
                    $(EventKind::$kind => f(&KernelEvent::$kind(read_plain(bytes)?)),)*
                })
            }
        }

        $(plain_data!($event $(, $shared)?);)*
    };
}

/// Declares `$event` plain data, unless the entry shares an earlier one's
/// struct.
macro_rules! plain_data {
    ($event:ident) => {
        impl PlainData for $event {}
    };
    ($event:ident, shared) => {};
}

event_kinds! {
    /// A context switch.
    Switch = 1 => SchedSwitchEvent,
    /// A wake-up (or the first wake-up of a new task).
    Wakeup = 2 => SchedWakeupEvent,
    // 3 was a fork event, retired: a number is never given to another kind.
    /// A new task, with its clone flags.
    NewTask = 4 => TaskNewtaskEvent,
    /// An exec.
    Exec = 5 => ProcessExecEvent,
    /// A task exit.
    Exit = 6 => ProcessExitEvent,
    /// A task rename.
    Rename = 7 => TaskRenameEvent,
    /// A system call entry.
    SysEnter = 8 => SysEnterEvent,
    /// A system call return.
    SysExit = 9 => SysExitEvent,
    /// A hard IRQ handler start.
    IrqEntry = 10 => IrqEntryEvent,
    /// A hard IRQ handler end.
    IrqExit = 11 => IrqExitEvent,
    /// A softirq start or end.
    Softirq = 12 => SoftirqEvent,
    /// A block request issued.
    BlockIssue = 13 => BlockRqEvent,
    /// A block request completed.
    BlockComplete = 14 => BlockRqEvent (shared),
    /// A user page fault.
    PageFault = 15 => PageFaultEvent,
    /// A resident-set counter change.
    RssStat = 16 => RssStatEvent,
    /// A CPU idle state or frequency change.
    Power = 17 => PowerEvent,
    /// A probed function entered or returned.
    Uprobe = 18 => UprobeEvent,
    /// A USDT probe site fired.
    Usdt = 19 => UsdtEvent,
    /// A block request taken back from the device to be issued again.
    BlockRequeue = 23 => BlockRqEvent (shared),
    /// A signal sent by the current task.
    SignalGenerate = 24 => SignalGenerateEvent,
    /// A signal delivered to the current task.
    SignalDeliver = 25 => SignalDeliverEvent,
    /// A whole system call: entry and return in one event, written at the
    /// return when the call ran on one CPU without being switched out.
    Syscall = 22 => SyscallEvent,
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
    pub prev_state: i32,
    /// Process id of the task switched to, where the program could read it
    /// (the BTF tracepoint); [`ABSENT_ID`] from the classic tracepoint.
    pub next_tgid: u32,
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
    /// Process id of the woken task, where the program could read it (the
    /// BTF tracepoints); [`ABSENT_ID`] from the classic ones.
    pub tgid: u32,
    /// CPU the woken task will run on (`u16::MAX` when the field is absent).
    pub target_cpu: u16,
    /// [`WAKEUP_NEW`] for the first wake-up of a new task.
    pub flags: u16,
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
    /// The cgroup v2 id (directory inode) of the creator, which the new task starts in.
    pub cgroup: u64,
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
    /// The cgroup v2 id (directory inode) of the task; 0 without cgroup v2.
    pub cgroup: u64,
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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

/// A system call from entry to return, in one event: what a
/// [`SysEnterEvent`] at `enter_ts` followed by a [`SysExitEvent`] at
/// `header.ts` would say. The programs keep the entry on its CPU and make
/// this at the return when the caller ran on that CPU throughout; a call
/// whose caller was switched out in between comes as the two events. Such
/// events are written several in one ring-buffer entry ([`events_in`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyscallEvent {
    /// Common header, stamped at the return; `tid`/`tgid` are the caller's.
    pub header: EventHeader,
    /// When the call was entered (CLOCK_BOOTTIME ns).
    pub enter_ts: u64,
    /// System call number ([`ABSENT_INT`] when the field is absent).
    pub id: i64,
    /// Return value: a negative errno on failure.
    pub ret: i64,
    /// The argument registers (zero where the record has fewer).
    pub args: [u64; SYSCALL_ARGS],
}

impl SyscallEvent {
    /// The entry this event stands for.
    pub fn entry(&self) -> SysEnterEvent {
        SysEnterEvent {
            header: EventHeader {
                kind: EventKind::SysEnter as u32,
                ts: self.enter_ts,
                ..self.header
            },
            id: self.id,
            args: self.args,
        }
    }

    /// The return this event stands for.
    pub fn exit(&self) -> SysExitEvent {
        SysExitEvent {
            header: EventHeader {
                kind: EventKind::SysExit as u32,
                ..self.header
            },
            id: self.id,
            ret: self.ret,
        }
    }
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

/// `signal:signal_generate`: the current task sent signal `sig` to thread
/// `target`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignalGenerateEvent {
    /// Common header (the sender).
    pub header: EventHeader,
    /// The signal's number.
    pub sig: i32,
    /// The thread it was sent to (`pid`: a thread id).
    pub target: u32,
    /// Non-zero when sent to the target's whole thread group.
    pub group: i32,
    /// What became of it: 0 delivered, 1 ignored, 2 already pending, 3 the
    /// queue full, 4 delivered without its information
    /// (`TRACE_SIGNAL_*`).
    pub result: i32,
}

/// `signal:signal_deliver`: signal `sig` is being delivered to the current
/// task.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignalDeliverEvent {
    /// Common header (the receiver).
    pub header: EventHeader,
    /// The signal's number.
    pub sig: i32,
    /// Zero.
    pub reserved: u32,
    /// The handler: 0 the default action, 1 ignored, else the handler's
    /// address.
    pub handler: u64,
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

/// Plain-data structs: `#[repr(C)]`, only integers and byte arrays, no
/// padding, so every bit pattern is a valid value. The event table declares
/// its structs so.
pub(super) trait PlainData: Copy {}
impl PlainData for EventHeader {}

/// Copies a `T` out of the start of `bytes`, if long enough.
pub(super) fn read_plain<T: PlainData>(bytes: &[u8]) -> Result<T, ParseError> {
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
#[inline]
pub fn parse(bytes: &[u8]) -> Result<KernelEvent, ParseError> {
    let header: EventHeader = read_plain(bytes)?;
    match EventKind::from_u32(header.kind) {
        Some(kind) => KernelEvent::read_fixed(kind, bytes),
        // A kind with a variable-length body has its own decoder:
        // `tracepoint::TracepointRecord::parse` for `TRACEPOINT_KIND`,
        // `stack::StackRecord::parse` for `STACK_KIND`.
        None => Err(ParseError::UnknownKind(header.kind)),
    }
}

/// The events of one ring-buffer entry: the entry itself, or, for an
/// entry of whole system calls ([`SyscallEvent`]s written together), each
/// of them. An entry that is not a whole number of them is one event (and
/// decoding tells what is wrong with it).
pub fn events_in(entry: &[u8]) -> core::slice::ChunksExact<'_, u8> {
    const CALL: usize = size_of::<SyscallEvent>();
    let kind = entry
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_ne_bytes);
    let size = if kind == Some(EventKind::Syscall as u32)
        && entry.len() > CALL
        && entry.len().is_multiple_of(CALL)
    {
        CALL
    } else {
        entry.len().max(1)
    };
    entry.chunks_exact(size)
}

const _: () = {
    assert!(size_of::<EventHeader>() == 24);
    assert!(size_of::<SchedSwitchEvent>() == 80);
    assert!(size_of::<SchedWakeupEvent>() == 56);
    assert!(size_of::<TaskNewtaskEvent>() == 64);
    assert!(size_of::<ProcessExecEvent>() == 320);
    assert!(size_of::<ProcessExitEvent>() == 56);
    assert!(size_of::<TaskRenameEvent>() == 64);
    assert!(size_of::<SysEnterEvent>() == 80);
    assert!(size_of::<SysExitEvent>() == 40);
    assert!(size_of::<SyscallEvent>() == 96);
    assert!(size_of::<IrqEntryEvent>() == 64);
    assert!(size_of::<IrqExitEvent>() == 32);
    assert!(size_of::<SignalGenerateEvent>() == 40);
    assert!(size_of::<SignalDeliverEvent>() == 40);
    assert!(size_of::<SoftirqEvent>() == 32);
    assert!(size_of::<BlockRqEvent>() == 56);
    assert!(size_of::<PageFaultEvent>() == 48);
    assert!(size_of::<RssStatEvent>() == 48);
    assert!(size_of::<PowerEvent>() == 40);
    assert!(size_of::<UprobeEvent>() == 40);
    assert!(size_of::<UsdtEvent>() == 40 + 8 * USDT_MAX_ARGS + USDT_STR_LEN * USDT_MAX_STRS);
};
