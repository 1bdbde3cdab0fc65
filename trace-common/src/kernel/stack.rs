//! Stacks (`kernel:profile`, `kernel:offcpu`, `--stacks`): the
//! configuration the manager gives the programs, and the variable-length
//! [`StackEvent`] they write.
//!
//! A stack event is a [`StackEvent`] followed by four runs of bytes, in
//! this order and with the lengths it gives:
//!
//! 1. the kernel stack: return addresses (`u64`, innermost first) as
//!    `bpf_get_stack` walks them; empty when the task was in user mode;
//! 2. the user stack walked by frame pointers (`u64`, innermost first):
//!    only under [`CALL_GRAPH_FP`];
//! 3. the thread's Python frames ([`super::python::PythonFrame`], innermost
//!    first): only for a process running an interpreter the manager could
//!    read ([`super::python`]);
//! 4. the user stack's bytes from the stack pointer up: only under
//!    [`CALL_GRAPH_DWARF`]; the manager unwinds them with the binaries'
//!    `.eh_frame` (as `perf record --call-graph dwarf` does), with the
//!    registers in [`StackEvent::ip`], [`StackEvent::sp`] and
//!    [`StackEvent::bp`].
//!
//! The sources:
//!
//! - [`SOURCE_PROFILE`]: a `cpu-clock` sample of the running task.
//! - [`SOURCE_OFFCPU`]: a task that blocked for at least
//!   [`StackConfig::offcpu_min_ns`], written when it next runs in user
//!   space (the end of its system call) or blocks again, whichever comes
//!   first: its kernel stack as it blocked, its user stack then (a blocked
//!   task's user stack does not change until it returns to user space).
//!   [`StackEvent::start_ts`]..[`StackEvent::end_ts`] is the time off CPU,
//!   [`StackEvent::other_tid`] the task that woke it (0: not seen).
//! - [`SOURCE_WAKER`]: the task that woke a task blocked for at least the
//!   threshold, at the wake-up (`sched_waking`), with its own stack;
//!   [`StackEvent::other_tid`] is the woken task and
//!   [`StackEvent::start_ts`] when that task blocked.
//! - [`SOURCE_UPROBE`], [`SOURCE_USDT`], [`SOURCE_SYSCALL`],
//!   [`SOURCE_TRACEPOINT`]: the calling stack of a probe's event (written
//!   just after it, same time and task), [`StackEvent::id`] says which
//!   probe (the probe's index, the site's index, the system call number,
//!   the tracepoint's id).

use core::mem::size_of;

use super::{COMM_LEN, EventHeader, ParseError};

/// The `EventHeader::kind` of a [`StackEvent`].
pub const STACK_KIND: u32 = 21;

/// The per-CPU program that samples every CPU (`kernel:profile`).
pub const PROFILE_PROGRAM: &str = "profile";
/// The off-CPU program at `sched:sched_switch`.
pub const OFFCPU_SWITCH_PROGRAM: &str = "offcpu_switch";
/// The waker program at `sched:sched_waking`.
pub const OFFCPU_WAKING_PROGRAM: &str = "offcpu_waking";
/// The program that writes an off-CPU stack at a system call's return
/// (`raw_syscalls:sys_exit`).
pub const OFFCPU_SYS_EXIT_PROGRAM: &str = "offcpu_sys_exit";

/// The map of tasks off CPU: thread id → [`OffCpuEntry`] (an LRU hash, so
/// tasks that never run again are forgotten once it is full).
pub const MAP_OFFCPU: &str = "OFFCPU";
/// The per-CPU scratch slots a stack event is assembled in
/// ([`STACK_SLOTS`] of [`STACK_EVENT_MAX`] bytes per CPU).
pub const MAP_STACK_SCRATCH: &str = "STACK_SCRATCH";
/// Most tasks [`MAP_OFFCPU`] tracks at once.
pub const OFFCPU_MAX: u32 = 4096;
/// Processes whose first stack was written (an LRU hash of process ids):
/// the first one of a process wakes the reader at once, so that it reads
/// the process's mappings while the process still lives.
pub const MAP_STACK_SEEN: &str = "STACK_SEEN";
/// Most processes [`MAP_STACK_SEEN`] remembers.
pub const STACK_SEEN_MAX: u32 = 8192;

/// Most kernel frames kept (the kernel's `perf_event_max_stack` default).
pub const KERNEL_FRAMES_MAX: usize = 127;
/// Most user frames a frame-pointer walk keeps.
pub const USER_FRAMES_MAX: usize = 127;
/// Most user stack bytes copied per event.
pub const USER_STACK_MAX: usize = 16384;
/// The user stack is copied in pieces of this many bytes; a piece that
/// cannot be read (past the top of the stack) ends the copy.
pub const USER_STACK_CHUNK: usize = 512;
/// Nesting levels of stack-writing programs on one CPU (a sample taken
/// while another program writes a stack uses the next scratch slot).
pub const STACK_SLOTS: u32 = 4;

/// [`StackConfig::call_graph`]: copy the user stack's bytes (unwound in
/// userspace from `.eh_frame`; complete without frame pointers).
pub const CALL_GRAPH_DWARF: u32 = 0;
/// [`StackConfig::call_graph`]: walk the user stack by frame pointers in
/// the kernel (cheap, but stops at the first function built without them).
pub const CALL_GRAPH_FP: u32 = 1;

/// A `cpu-clock` sample.
pub const SOURCE_PROFILE: u32 = 0;
/// Where a task blocked.
pub const SOURCE_OFFCPU: u32 = 1;
/// The task that woke a blocked task.
pub const SOURCE_WAKER: u32 = 2;
/// A `--uprobe` function's entry.
pub const SOURCE_UPROBE: u32 = 3;
/// A `--usdt` site.
pub const SOURCE_USDT: u32 = 4;
/// A system call's entry (`kernel:syscall`).
pub const SOURCE_SYSCALL: u32 = 5;
/// A tracepoint selected by name (`-e`).
pub const SOURCE_TRACEPOINT: u32 = 6;

/// [`StackEvent::flags`]: `ip`, `sp` and `bp` are the task's user
/// registers.
pub const STACK_USER_REGS: u32 = 1;
/// [`StackEvent::flags`]: the sample interrupted the kernel.
pub const STACK_KERNEL_MODE: u32 = 2;
/// [`StackEvent::flags`]: an off-CPU task returned to user space
/// elsewhere than where it entered the kernel (it blocked in a page fault,
/// say), so its user stack is left out.
pub const STACK_USER_STALE: u32 = 4;

/// What the stack programs do, in the layout map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackConfig {
    /// [`CALL_GRAPH_DWARF`] or [`CALL_GRAPH_FP`].
    pub call_graph: u32,
    /// User stack bytes to copy under [`CALL_GRAPH_DWARF`]: a multiple of
    /// [`USER_STACK_CHUNK`], at most [`USER_STACK_MAX`].
    pub user_stack_bytes: u32,
    /// Bit `1 << SOURCE_*` set for each probe source whose events carry
    /// their stack.
    pub probe_sources: u32,
    /// Zero.
    pub reserved: u32,
    /// Off-CPU intervals shorter than this (ns) are not written, nor their
    /// wakers.
    pub offcpu_min_ns: u64,
}

/// The header of a stack event (the three runs of bytes follow).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackEvent {
    /// Common header; `tid`/`tgid` are the task whose stack this is, `ts`
    /// when it was taken.
    pub header: EventHeader,
    /// `SOURCE_*`.
    pub source: u32,
    /// `STACK_*` flags.
    pub flags: u32,
    /// The probe, for the probe sources (see the module doc); else 0.
    pub id: u64,
    /// Bytes of kernel frames that follow.
    pub kernel_len: u32,
    /// Bytes of frame-pointer user frames that follow those.
    pub user_len: u32,
    /// Bytes of user stack that follow the Python frames.
    pub stack_len: u32,
    /// Bytes of Python frames that follow the frame-pointer user frames.
    pub python_len: u32,
    /// User instruction pointer.
    pub ip: u64,
    /// User stack pointer: the address of the first stack byte.
    pub sp: u64,
    /// User frame pointer.
    pub bp: u64,
    /// [`SOURCE_OFFCPU`]: when the task blocked; [`SOURCE_WAKER`]: when the
    /// woken task blocked; else the sample time.
    pub start_ts: u64,
    /// [`SOURCE_OFFCPU`]: when the task ran again; else the sample time.
    pub end_ts: u64,
    /// [`SOURCE_OFFCPU`]: the waker's thread id (0: not seen);
    /// [`SOURCE_WAKER`]: the woken thread's id.
    pub other_tid: u32,
    /// The process of `other_tid` (0: not known).
    pub other_tgid: u32,
    /// The task's name (`bpf_get_current_comm`), NUL-padded.
    pub comm: [u8; COMM_LEN],
}

/// A task off CPU, as the off-CPU programs keep it until they write it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffCpuEntry {
    /// When it blocked.
    pub start_ts: u64,
    /// When it ran again (0: still off CPU).
    pub end_ts: u64,
    /// Its user instruction and stack pointers as it blocked.
    pub ip: u64,
    /// See `ip`.
    pub sp: u64,
    /// The waker's thread id (0: not seen yet).
    pub waker_tid: u32,
    /// The waker's process id.
    pub waker_tgid: u32,
    /// Bytes of `kernel` used.
    pub kernel_len: u32,
    /// Its process id.
    pub tgid: u32,
    /// Its kernel stack as it blocked.
    pub kernel: [u64; KERNEL_FRAMES_MAX],
}

/// Bytes of the largest stack event.
pub const STACK_EVENT_MAX: usize = size_of::<StackEvent>()
    + 8 * KERNEL_FRAMES_MAX
    + 8 * USER_FRAMES_MAX
    + super::python::PYTHON_RUN_MAX
    + USER_STACK_MAX;

const _: () = {
    assert!(size_of::<StackEvent>() == 120);
    assert!(size_of::<StackConfig>() == 24);
    assert!(size_of::<OffCpuEntry>() == 48 + 8 * KERNEL_FRAMES_MAX);
    assert!(USER_STACK_MAX.is_multiple_of(USER_STACK_CHUNK));
    // Per-CPU map values are at most 32 KiB.
    assert!(STACK_EVENT_MAX <= 32 * 1024);
};

impl super::events::PlainData for StackEvent {}

/// A decoded stack event, borrowing its frames and stack bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackRecord<'a> {
    /// The fixed part.
    pub event: StackEvent,
    kernel: &'a [u8],
    user: &'a [u8],
    python: &'a [u8],
    /// The user stack's bytes from [`StackEvent::sp`] up.
    pub stack: &'a [u8],
}

impl<'a> StackRecord<'a> {
    /// Decodes one ring-buffer entry of kind [`STACK_KIND`] without
    /// trusting it: the lengths must fit the entry and be whole frames.
    pub fn parse(bytes: &'a [u8]) -> Result<StackRecord<'a>, ParseError> {
        let event: StackEvent = super::events::read_plain(bytes)?;
        let too_short = |needed: usize| ParseError::TooShort {
            len: bytes.len(),
            needed,
        };
        let (k, u, p, s) = (
            event.kernel_len as usize,
            event.user_len as usize,
            event.python_len as usize,
            event.stack_len as usize,
        );
        let start = size_of::<StackEvent>();
        let needed = start
            .checked_add(k)
            .and_then(|n| n.checked_add(u))
            .and_then(|n| n.checked_add(p))
            .and_then(|n| n.checked_add(s))
            .ok_or(too_short(usize::MAX))?;
        if bytes.len() < needed {
            return Err(too_short(needed));
        }
        let body = &bytes[start..needed];
        let (kernel, rest) = body.split_at(k);
        let (user, rest) = rest.split_at(u);
        let (python, stack) = rest.split_at(p);
        // Partial frames are dropped: each run is read a frame at a time.
        Ok(StackRecord {
            event,
            kernel,
            user,
            python,
            stack,
        })
    }

    /// The kernel frames, innermost first.
    pub fn kernel_frames(&self) -> impl Iterator<Item = u64> + 'a {
        words(self.kernel)
    }

    /// The user frames a frame-pointer walk found, innermost first.
    pub fn user_frames(&self) -> impl Iterator<Item = u64> + 'a {
        words(self.user)
    }

    /// The Python frames, innermost first (a partial one at the end left
    /// out).
    pub fn python_frames(&self) -> impl Iterator<Item = super::python::PythonFrame> + 'a {
        self.python
            .chunks_exact(size_of::<super::python::PythonFrame>())
            .filter_map(|b| super::events::read_plain(b).ok())
    }
}

/// The native-endian `u64`s of `bytes`, a partial one at the end left out;
/// zero entries (the end of a walk) stop it.
fn words(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    bytes
        .chunks_exact(8)
        .map(|w| u64::from_ne_bytes(w.try_into().unwrap_or([0; 8])))
        .take_while(|&w| w != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    fn bytes_of(e: &StackEvent) -> Vec<u8> {
        // SAFETY: StackEvent is plain data without padding.
        unsafe {
            core::slice::from_raw_parts(
                (e as *const StackEvent).cast::<u8>(),
                size_of::<StackEvent>(),
            )
        }
        .to_vec()
    }

    #[test]
    fn parses_the_three_runs() {
        let mut e = StackEvent {
            kernel_len: 16,
            user_len: 8,
            python_len: 24,
            stack_len: 3,
            ..Default::default()
        };
        e.header.kind = STACK_KIND;
        let mut b = bytes_of(&e);
        b.extend(1u64.to_ne_bytes());
        b.extend(2u64.to_ne_bytes());
        b.extend(3u64.to_ne_bytes());
        b.extend(0x1000u64.to_ne_bytes());
        b.extend(0x1010u64.to_ne_bytes());
        b.extend(5u32.to_ne_bytes());
        b.extend(1u32.to_ne_bytes());
        b.extend([7, 8, 9]);
        let r = StackRecord::parse(&b).unwrap();
        assert_eq!(r.kernel_frames().collect::<Vec<_>>(), [1, 2]);
        assert_eq!(r.user_frames().collect::<Vec<_>>(), [3]);
        let py: Vec<_> = r.python_frames().collect();
        assert_eq!(py.len(), 1);
        assert_eq!(
            (py[0].code, py[0].instr, py[0].stamp, py[0].flags),
            (0x1000, 0x1010, 5, 1)
        );
        assert_eq!(r.stack, [7, 8, 9]);
    }

    proptest::proptest! {
        /// Any bytes, the kind set or not: decoding never panics, and what
        /// it gives stays inside the entry.
        #[test]
        fn any_bytes_decode_or_fail_cleanly(
            mut bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..400),
            lens in proptest::array::uniform4(0u32..300),
        ) {
            if bytes.len() >= 4 {
                bytes[..4].copy_from_slice(&STACK_KIND.to_ne_bytes());
            }
            for (i, len) in lens.iter().enumerate() {
                // kernel_len, user_len, stack_len, python_len
                let at = 40 + 4 * i;
                if bytes.len() >= at + 4 {
                    bytes[at..at + 4].copy_from_slice(&len.to_ne_bytes());
                }
            }
            if let Ok(r) = StackRecord::parse(&bytes) {
                let frames = r.kernel_frames().count() + r.user_frames().count();
                let python = r.python_frames().count() * 24;
                proptest::prop_assert!(frames * 8 + python + r.stack.len() <= bytes.len());
            }
            let _ = crate::kernel::parse_entry(&bytes);
        }
    }

    #[test]
    fn refuses_lengths_beyond_the_entry() {
        let e = StackEvent {
            kernel_len: u32::MAX,
            user_len: u32::MAX,
            stack_len: u32::MAX,
            python_len: u32::MAX,
            ..Default::default()
        };
        let b = bytes_of(&e);
        assert!(StackRecord::parse(&b).is_err());
        assert!(StackRecord::parse(&b[..50]).is_err());
    }
}
