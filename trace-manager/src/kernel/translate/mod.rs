//! Turns the kernel provider's events into FXT records.
//!
//! - Context switches become compact legacy context switch records
//!   (scheduling type 0, 16 bytes): both threads as references into the
//!   provider's thread table ([`ThreadTable`]: 255 entries, each defined by a
//!   thread record when assigned), both kernel priorities (0–139, as ftrace
//!   reports `prio`) in 8 bits, and priority 0 for a CPU's idle task, which
//!   has no thread kernel object record: that is how ui.perfetto.dev tells
//!   idle apart. Where a thread's process is not known yet (or a CPU number
//!   or priority does not fit 8 bits) the switch is written as a context
//!   switch record (scheduling type 1) with `incoming_weight` /
//!   `outgoing_weight` Int32 arguments instead, [`IDLE_WEIGHT`](trace_common::fxt::wire::IDLE_WEIGHT) for idle.
//! - Every event says which task its CPU runs ([`KernelTranslator::current_task`]);
//!   a switch the kernel did not record (a lost event, a task kept out of
//!   tracing) is written where an event first shows it, as a context switch
//!   record with `inferred: true`, so every CPU's switches are continuous.
//! - Wake-ups become thread-wakeup records with `weight` and `waker` (a
//!   CPU's interrupt track when the waker is its idle task); wake-ups of
//!   running threads are left out.
//! - Fork, exec, exit and renames become instants in `kernel:proc` on the
//!   thread that did them, and kernel object records that (re)name the
//!   processes and threads involved.
//!
//! - System calls become complete durations in `kernel:syscall` on the
//!   calling thread, named by the system call, with `nr`, the arguments
//!   (named and typed as the kernel declares them) and `ret`. A call still
//!   running when the recording stops ends there, marked `unfinished`; a
//!   call that began before the recording spans from the recording's start
//!   (from the thread's creation for a thread created since: the child's
//!   side of `clone`), marked `began_before_recording`; a thread that exits
//!   inside one (`exit`, `exit_group`) ends it there; a call whose return
//!   was lost (a full ring buffer) ends where the thread's next call begins,
//!   marked `return_lost`, and one whose entry was lost begins where the
//!   thread's previous call ended, marked `entry_lost`. `rt_sigreturn`
//!   returns with call number -1 and still closes its call.
//!
//! - Hard IRQ handlers and softirqs become complete durations in
//!   `kernel:irq` on one track per CPU: pseudo-threads `CPU n interrupts`
//!   ([`irq_thread_koid`]) of a pseudo-process `kernel interrupts`
//!   ([`IRQ_PROCESS_KOID`]), koids above any Linux pid. A softirq
//!   interrupted by a hard IRQ nests it. A handler still running at the stop
//!   ends there (`unfinished`); an exit without its entry (the recording
//!   started inside the handler) is left out.
//!
//! - Block requests become complete durations in `kernel:block` from issue
//!   to completion, named by the operation (`read`, `write`, `flush`, ...),
//!   on the tracks of their device (`vda`, `vda (2)`, ...: pseudo-threads of
//!   a pseudo-process `kernel block I/O`, [`BLOCK_PROCESS_KOID`]; each track
//!   holds requests that do not overlap), with the device, sector, size,
//!   `rwbs` flags and issuing thread, and the error at completion. A
//!   completion of a request issued before the recording is left out; one
//!   still in flight at the stop ends there (`unfinished`).
//!
//! - User page faults become instants `page_fault` in `kernel:vm` on the
//!   faulting thread (address and instruction as pointers, the raw error
//!   code, and on x86 the access — `read`, `write`, `exec` — and whether
//!   the page was present); resident-set changes become counters `rss` of
//!   the owning process with one argument per kind (`file`, `anon`, `swap`,
//!   `shmem`, bytes). A change made from another process is attributed once
//!   that address space has been seen from its own process.
//!
//! - CPU idle states and frequencies become counters `cpu_idle` (the idle
//!   state index, -1 while running) and `cpu_frequency` (kHz) with one
//!   argument per CPU (`cpu0`, `cpu1`, ...) on a pseudo-process `kernel
//!   CPUs` ([`CPUS_PROCESS_KOID`]).
//!
//! - Probed functions (`--uprobe`) become complete durations in `uprobe`
//!   on the calling thread, named by the function, paired entry to return
//!   per thread as a stack (recursion nests). A return whose entry came
//!   before the recording is left out; a function still running at the stop
//!   ends there (`unfinished`).
//!
//! - USDT probe sites (`--usdt`) become instants in `usdt` on the thread
//!   that passed them, named `PROVIDER:NAME`, with the probe's arguments
//!   `arg0`, `arg1`, ... (Int64 when the note declares them signed, else
//!   Uint64). Arguments that could not be read are left out and flagged in
//!   an `unreadable_args` bit mask.
//!
//! - Stacks (`kernel:profile`, `kernel:offcpu`, probes' stacks) become
//!   Perfetto perf samples in blob records (blob type 3), symbolized, a
//!   sampling stream per source (see `stack`).
//!
//! Every thread that appears in a record is named by a kernel object record
//! (with its `"process"` koid argument) as soon as its thread group is known:
//! from the /proc snapshot taken at start, from the event itself, or from
//! /proc when a thread shows up that nothing has told about.
//!
//! [`KernelTranslator::entry`] takes every ring-buffer entry, whatever its
//! kind; [`KernelTranslator::translate`] routes each fixed event to the
//! translator of its category, one file each, named as the category and
//! its eBPF programs are: `sched`, `proc`, `syscall`, `irq`, `block`, `vm`,
//! `power` (and the drop counter), `signal`, `uprobe` (`--uprobe`), `usdt`
//! (`--usdt`), `tracepoint` (`-e`), `stack` (stacks). Each file declares
//! the state its category keeps (`SyscallState`, `SchedState`,
//! `IrqState`, `BlockState`, `VmState`, `UprobeState`, `UsdtState`,
//! `Tracepoints`, `Triggers`, `Stacks`), one field of the translator
//! each. This file holds what they share: the task each CPU runs, the
//! threads and processes named so far, the string and thread tables, the
//! counts, and the recording's start and stop.

mod block;
mod counts;
mod identity;
mod irq;
mod labels;
mod locks;
mod names;
mod power;
mod proc;
mod sched;
mod signal;
mod stack;
mod syscall;
#[cfg(test)]
mod testing;
mod threads;
mod tracepoint;
mod trigger;
mod uprobe;
mod usdt;
mod vm;
mod wait;
mod wakeup;

use std::collections::HashMap;
use std::io::Write;

use trace_common::fxt::{Arg, ArgValue, EventKind, Record, StringRef, ThreadRef};
use trace_common::kernel::{EntryRef, KernelEvent};

pub use self::block::{BLOCK_PROCESS_KOID, block_device_name, block_op};
pub use self::counts::KernelRecordCounts;
pub use self::irq::{IRQ_PROCESS_KOID, irq_thread_koid};
pub use self::locks::LOCK_CONTENTION_PAIR;
pub use self::names::NameState;
pub use self::power::CPUS_PROCESS_KOID;
pub use self::sched::{thread_state, weight};
pub use self::threads::ThreadTable;
pub use self::trigger::{Condition, Fired, TRIGGER_CATEGORY, Trigger, is_kernel_trigger};
pub use self::usdt::UsdtSiteInfo;

use crate::kernel::syscalls::SyscallTable;
use crate::output::{FxtStream, OutputError, StringTable};
use crate::procfs;

/// The translator's maps, keyed by kernel ids: hashed with foldhash, since
/// every event looks a thread up (the keys come from the kernel, not from
/// an attacker who could pick colliding ones).
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// What is known about one thread.
#[derive(Clone, Debug)]
struct ThreadEntry {
    /// Thread group id; `None` until known.
    tgid: Option<u32>,
    /// Its name as last seen (empty: never seen).
    name: String,
    /// Whether a thread object with this `tgid` and `name` was written.
    written: bool,
}

/// A thread group id that is not known ([`KernelTranslator::know_thread`]
/// then writes nothing).
const UNKNOWN_TGID: u32 = u32::MAX;

/// Slots of [`KernelTranslator::known`].
const KNOWN_CACHE: usize = 256;

/// Translates kernel events into records of one provider in the output.
pub struct KernelTranslator {
    strings: StringTable,
    threads: Map<u32, ThreadEntry>,
    /// Threads recently found written in `threads`, as `tgid << 32 | tid`
    /// by `tid % KNOWN_CACHE` (0: none): a thread's entry is only ever
    /// rewritten, never removed, so a pair found written stays written
    /// until its thread group changes (which changes the key), and the
    /// check every event makes skips the look-up.
    known: Box<[u64; KNOWN_CACHE]>,
    /// Whether `kernel:proc` is recorded: fork, exec, exit and rename
    /// events are then written as instants too; without it they only name
    /// the processes and threads.
    proc_instants: bool,
    /// Whether a pid filter chooses what is recorded: then wake-ups and
    /// block completions, which the kernel records for a followed task
    /// whatever runs, do not say which task their CPU runs.
    followed_only: bool,
    /// Process koids whose name was written, with that name.
    processes: Map<u32, String>,
    counts: KernelRecordCounts,
    /// When the recording started (CLOCK_BOOTTIME ns): where calls that
    /// began before it start.
    start_ts: u64,
    thread_table: ThreadTable,
    /// When the recording stopped: where what is still open ends.
    stop_ts: Option<u64>,
    /// The latest event time seen.
    last_ts: u64,
    /// The task each CPU runs, as the events show it, by CPU.
    cpu_current: Vec<Option<Current>>,
    /// When each CPU's last switch (recorded or inferred) happened.
    cpu_since: Vec<u64>,
    /// Whether each CPU's task was switched in by a recorded switch and
    /// has shown no event of its own since, in a recording of every task:
    /// a switch out of it that must be inferred is then `untraced`.
    cpu_unseen: Vec<bool>,
    /// Threads that existed when the recording started (the snapshot).
    at_start: std::collections::HashSet<u32>,
    /// When threads created during the recording were created.
    created: Map<u32, u64>,
    /// Each category's own state, in its file.
    syscall: syscall::SyscallState,
    sched: sched::SchedState,
    wait: wait::WaitState,
    irq: irq::IrqState,
    blocks: block::BlockState,
    vm: vm::VmState,
    uprobe: uprobe::UprobeState,
    usdt: usdt::UsdtState,
    /// Tracepoints selected by name.
    tracepoints: tracepoint::Tracepoints,
    /// Conditions checked on the events, and those that fired.
    triggers: trigger::Triggers,
    /// Stacks: their resolver and sampling streams.
    stacks: stack::Stacks,
    /// `kernel:profile`'s sampling frequency, for its stream's description.
    sample_hz: u32,
    /// What labels processes with their cgroup, container and namespace id.
    labels: labels::Labels,
}

/// The task a CPU runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Current {
    tid: u32,
    tgid: u32,
}

/// One event record to write: on thread `(tgid, tid)` of `thread`.
struct EventRecord<'a> {
    ts: u64,
    category: &'a str,
    thread: (u32, u32),
    name: &'a str,
    args: &'a [(&'a str, ArgValue<'a>)],
    kind: EventKind,
}

/// A kernel `comm` field as text: up to the first NUL, invalid UTF-8 replaced.
pub fn comm_str(comm: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(comm_bytes(comm))
}

/// A kernel `comm` field's bytes up to the first NUL.
fn comm_bytes(comm: &[u8]) -> &[u8] {
    let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
    &comm[..end]
}

impl Default for KernelTranslator {
    fn default() -> Self {
        Self::new()
    }
}

impl KernelTranslator {
    /// A translator with empty tables.
    pub fn new() -> Self {
        Self::with_syscalls(SyscallTable::new())
    }

    /// A translator naming system calls with `table`.
    pub fn with_syscalls(table: SyscallTable) -> Self {
        KernelTranslator {
            strings: StringTable::new(),
            threads: Map::default(),
            known: Box::new([0; KNOWN_CACHE]),
            proc_instants: true,
            followed_only: false,
            processes: Map::default(),
            counts: KernelRecordCounts::default(),
            start_ts: 0,
            thread_table: ThreadTable::default(),
            stop_ts: None,
            last_ts: 0,
            cpu_current: Vec::new(),
            cpu_since: Vec::new(),
            cpu_unseen: Vec::new(),
            at_start: std::collections::HashSet::new(),
            created: Map::default(),
            syscall: syscall::SyscallState::new(table),
            sched: sched::SchedState::default(),
            wait: wait::WaitState::default(),
            irq: irq::IrqState::default(),
            blocks: block::BlockState::default(),
            vm: vm::VmState::default(),
            uprobe: uprobe::UprobeState::default(),
            usdt: usdt::UsdtState::default(),
            tracepoints: tracepoint::Tracepoints::default(),
            triggers: trigger::Triggers::default(),
            stacks: stack::Stacks::default(),
            sample_hz: 0,
            labels: labels::Labels::default(),
        }
    }

    /// Sets whether processes are labelled with their cgroup, container and
    /// PID-namespace id (read from this machine: on for a live recording,
    /// off for a replay).
    pub fn set_labels(&mut self, on: bool) {
        self.labels.set(on);
    }

    /// Sets whether fork, exec, exit and rename events are written as
    /// `kernel:proc` instants (they name processes and threads either way).
    pub fn set_proc_instants(&mut self, on: bool) {
        self.proc_instants = on;
    }

    /// Sets whether a pid filter chooses the events (`-p`, or a command
    /// without `-a`). The kernel then writes the side of a switch that is
    /// not followed as the idle task, and only events of followed tasks
    /// say which task a CPU runs.
    pub fn set_followed_only(&mut self, on: bool) {
        self.followed_only = on;
    }

    /// Sets `kernel:profile`'s sampling frequency (described with its
    /// samples).
    pub fn set_sample_hz(&mut self, hz: u32) {
        self.sample_hz = hz;
    }

    /// Sets when the recording started (CLOCK_BOOTTIME ns), the start of
    /// system calls that were already running.
    pub fn set_start(&mut self, ts: u64) {
        self.start_ts = ts;
    }

    /// Sets when the recording stopped: events stamped later are not
    /// translated ([`KernelTranslator::wants`]), and what is still running
    /// at the end (system calls, interrupts, probed functions, block
    /// requests) ends there.
    pub fn set_stop(&mut self, ts: u64) {
        self.stop_ts = Some(ts);
    }

    /// Starts recording again at `ts` after a stop: nothing is known of
    /// what the CPUs run, and calls returning without an entry began at
    /// `ts` at the earliest.
    pub fn restart(&mut self, ts: u64) {
        if self.stop_ts.take().is_some() {
            self.start_ts = ts;
            self.cpu_current.clear();
            self.cpu_since.clear();
            self.cpu_unseen.clear();
            for t in self.sched.threads.values_mut() {
                t.running_on = None;
            }
            // Returns seen before the gap say nothing of calls after it.
            self.syscall.calls.clear();
        }
    }

    /// When the recording stopped, once it has.
    pub fn stop_ts(&self) -> Option<u64> {
        self.stop_ts
    }

    /// Whether an event stamped `ts` belongs to the recording (not after
    /// its stop).
    pub fn wants(&self, ts: u64) -> bool {
        self.stop_ts.is_none_or(|stop| ts <= stop)
    }

    /// Where what is still open at the end ends: the stop time, else the
    /// latest event.
    fn end_ts(&self) -> u64 {
        self.stop_ts.unwrap_or(self.last_ts)
    }

    /// What was written so far.
    pub fn counts(&self) -> KernelRecordCounts {
        self.counts
    }

    /// Writes the records of one ring-buffer entry, of whichever kind: the
    /// one way from the rings to the output (a fixed event to
    /// [`KernelTranslator::translate`], a tracepoint's to `tracepoint`, a
    /// stack to `stack`).
    pub fn entry<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        entry: EntryRef<'_>,
    ) -> Result<(), OutputError> {
        match entry {
            EntryRef::Fixed(event) => self.translate(out, event),
            EntryRef::Tracepoint(record) => self.tracepoint(out, &record),
            EntryRef::Stack(record) => self.stack(out, &record),
        }
    }

    /// Writes the records of one kernel event. An event stamped after the
    /// stop is dropped; any other first says which task its CPU runs
    /// ([`KernelTranslator::current_task`]), then goes to the translator
    /// of its kind.
    pub fn translate<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        event: &KernelEvent,
    ) -> Result<(), OutputError> {
        let h = event.header();
        // A whole system call stands for two events at two times: it does
        // its own stop check and current-task update for each.
        if let KernelEvent::Syscall(e) = event {
            return self.syscall(out, e);
        }
        if !self.wants(h.ts) {
            return Ok(());
        }
        let of_any_task = matches!(
            event,
            KernelEvent::Wakeup(_) | KernelEvent::BlockComplete(_) | KernelEvent::BlockRequeue(_)
        );
        if !(self.followed_only && of_any_task) {
            self.current_task(out, h)?;
        }
        match event {
            KernelEvent::Switch(e) => self.switch(out, e),
            KernelEvent::Wakeup(e) => self.wakeup(out, e),
            KernelEvent::NewTask(e) => self.new_task(out, e),
            KernelEvent::Exec(e) => self.exec(out, e),
            KernelEvent::Exit(e) => self.exit(out, e),
            KernelEvent::Rename(e) => self.rename(out, e),
            KernelEvent::SysEnter(e) => self.sys_enter(out, e),
            KernelEvent::SysExit(e) => self.sys_exit(out, e),
            // Handled above.
            KernelEvent::Syscall(e) => self.syscall(out, e),
            KernelEvent::IrqEntry(e) => self.irq_entry(out, e),
            KernelEvent::IrqExit(e) => self.irq_exit(out, e),
            KernelEvent::Softirq(e) => self.softirq(out, e),
            KernelEvent::BlockIssue(e) => {
                self.block_issue(e);
                Ok(())
            }
            KernelEvent::BlockComplete(e) => self.block_complete(out, e),
            KernelEvent::BlockRequeue(e) => {
                self.block_requeue(e);
                Ok(())
            }
            KernelEvent::PageFault(e) => self.page_fault(out, e),
            KernelEvent::RssStat(e) => self.rss_stat(out, e),
            KernelEvent::Power(e) => self.cpu_power(out, e),
            KernelEvent::Uprobe(e) => self.probe(out, e),
            KernelEvent::Usdt(e) => self.usdt(out, e),
            KernelEvent::SignalGenerate(e) => self.signal_generate(out, e),
            KernelEvent::SignalDeliver(e) => self.signal_deliver(out, e),
        }
    }

    /// Writes what is still open — system calls, interrupts, probed
    /// functions, block requests, tracepoint pairs — as ending where the
    /// recording ended, marked `unfinished`; and the stack samples not
    /// written yet.
    pub fn finish_open<W: Write>(&mut self, out: &mut FxtStream<W>) -> Result<(), OutputError> {
        self.finish_syscalls(out)?;
        self.finish_irqs(out)?;
        self.finish_probes(out)?;
        self.finish_block(out)?;
        self.finish_tracepoints(out)?;
        self.finish_stacks(out)
    }

    /// Names every process and thread of a /proc snapshot.
    pub fn write_snapshot<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        snapshot: &[procfs::ProcessInfo],
    ) -> Result<(), OutputError> {
        for p in snapshot {
            self.name_process(out, p.pid, &p.name)?;
            for t in &p.threads {
                self.at_start.insert(t.tid);
                self.name_thread(out, t.tid, p.pid, &t.name)?;
            }
        }
        Ok(())
    }

    /// Writes an event record on its thread (named first if it is not
    /// yet), interning its strings.
    fn event<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: EventRecord<'_>,
    ) -> Result<(), OutputError> {
        self.know_thread(out, e.thread.1, e.thread.0)?;
        let category = self.strings.intern(out, e.category)?;
        let name = self.strings.intern(out, e.name)?;
        // Most events carry a few arguments: those go on the stack.
        const ON_STACK: usize = 8;
        let mut stack: [Arg<'_>; ON_STACK] = std::array::from_fn(|_| Arg {
            name: StringRef::Empty,
            value: ArgValue::Null,
        });
        let on_stack = e.args.len() <= ON_STACK;
        let mut heap = Vec::with_capacity(if on_stack { 0 } else { e.args.len() });
        for (i, (k, v)) in e.args.iter().enumerate() {
            let arg = Arg {
                name: self.strings.intern(out, k)?,
                value: v.clone(),
            };
            if on_stack {
                stack[i] = arg;
            } else {
                heap.push(arg);
            }
        }
        let list: &[Arg<'_>] = if on_stack {
            &stack[..e.args.len()]
        } else {
            &heap
        };
        let (tgid, tid) = e.thread;
        out.write(&Record::Event {
            ts: e.ts,
            thread: ThreadRef::Inline {
                process: u64::from(tgid),
                thread: u64::from(tid),
            },
            category,
            name,
            args: std::borrow::Cow::Borrowed(list),
            kind: e.kind,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::translate::testing::{ev, events_and_names};

    #[test]
    fn comm_stops_at_nul() {
        assert_eq!(comm_str(b"abc\0def\0\0\0\0\0\0\0\0\0"), "abc");
        assert_eq!(comm_str(b"0123456789abcdef"), "0123456789abcdef");
    }

    #[test]
    fn a_thread_is_named_even_when_another_took_its_slot_in_the_known_cache() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        // This process's main thread exists in /proc; a thread id in the
        // same cache slot does not (it is above any pid).
        let real = std::process::id();
        let ghost = real + (KNOWN_CACHE as u32) * 16_384;
        assert_eq!(real as usize % KNOWN_CACHE, ghost as usize % KNOWN_CACHE);
        t.know_thread(&mut out, ghost, ghost).unwrap();
        t.know_thread(&mut out, ghost, ghost).unwrap();
        t.know_thread(&mut out, real, real).unwrap();
        // Known now: asked again, nothing more is written.
        t.know_thread(&mut out, real, real).unwrap();
        let bytes = out.finish().unwrap();
        let (_, names) = events_and_names(&bytes);
        assert!(names.contains_key(&u64::from(real)), "{names:?}");
        // A thread /proc does not know is still named, for its process.
        assert_eq!(names[&u64::from(ghost)], format!("thread {ghost}"));
        assert_eq!(t.counts().names, 4, "each thread and its process, once");
    }

    #[test]
    fn a_stop_cuts_every_category_at_one_instant() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        let read = i64::from(syscalls::Sysno::read.id());
        t.sys_enter(&mut out, &ev::sys_enter(100, 50, 50, read, [0; 6]))
            .unwrap();
        t.irq_entry(&mut out, &ev::irq_entry(150, 0, 5, "eth0"))
            .unwrap();
        t.probe(&mut out, &ev::probe(160, 50, 50, 0, false))
            .unwrap();
        t.block_issue(&ev::block_issue(170, 50, (8 << 20) | 1, 0, 8, 4096, "R"));
        t.set_stop(200);
        assert!(t.wants(200));
        assert!(!t.wants(201));
        t.finish_open(&mut out).unwrap();
        let bytes = out.finish().unwrap();
        let (ev, _) = events_and_names(&bytes);
        assert_eq!(ev.len(), 4, "{ev:?}");
        // Whatever was still running ends at the stop, complete (a begin
        // that never ends is drawn as "did not end").
        for (_, _, _, name, kind) in &ev {
            assert_eq!(*kind, EventKind::DurationComplete { end_ts: 200 }, "{name}");
        }
    }
}
