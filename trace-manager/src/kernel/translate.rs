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
//!   `outgoing_weight` Int32 arguments instead, [`IDLE_WEIGHT`] for idle.
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
//! Every thread that appears in a record is named by a kernel object record
//! (with its `"process"` koid argument) as soon as its thread group is known:
//! from the /proc snapshot taken at start, from the event itself, or from
//! /proc when a thread shows up that nothing has told about.

use std::collections::HashMap;
use std::io::Write;

/// The translator's maps, keyed by kernel ids: hashed with foldhash, since
/// every event looks a thread up (the keys come from the kernel, not from
/// an attacker who could pick colliding ones).
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

use trace_common::fxt::wire::IDLE_WEIGHT;
use trace_common::fxt::{
    Arg, ArgValue, EventKind, Record, StringRef, ThreadRef, ThreadState, obj_type,
};

use crate::kernel::syscalls::SyscallTable;
use crate::output::{FxtStream, OutputError, StringTable};
use crate::procfs;

/// The kernel provider's thread table: FXT thread records map indexes
/// 1..=255 to (process, thread) koids, so that a record can name a thread in
/// one byte. Entries are replaced by a clock sweep (a used entry gets a
/// second chance), so the threads that switch most keep theirs.
#[derive(Debug)]
pub struct ThreadTable {
    index_of: HashMap<(u32, u32), u8>,
    /// Entry `i` (index 0 unused): its pair and whether it was used since
    /// the sweep last passed.
    slots: Vec<Option<((u32, u32), bool)>>,
    hand: usize,
}

impl Default for ThreadTable {
    fn default() -> Self {
        ThreadTable {
            index_of: HashMap::new(),
            slots: vec![None; 256],
            hand: 1,
        }
    }
}

impl ThreadTable {
    /// The index of thread `tid` of process `tgid`, and whether it is new
    /// (its thread record must be written before it is used). Entry `keep`
    /// is not replaced (another thread of the same record holds it).
    pub fn index(&mut self, tgid: u32, tid: u32, keep: Option<u8>) -> (u8, bool) {
        if let Some(&i) = self.index_of.get(&(tgid, tid)) {
            if let Some((_, used)) = self.slots[usize::from(i)].as_mut() {
                *used = true;
            }
            return (i, false);
        }
        let i = loop {
            let i = self.hand;
            self.hand = if self.hand == 255 { 1 } else { self.hand + 1 };
            if keep == Some(i as u8) {
                continue;
            }
            match self.slots[i].as_mut() {
                Some((_, used)) if *used => *used = false,
                _ => break i,
            }
        };
        if let Some((old, _)) = self.slots[i].take() {
            self.index_of.remove(&old);
        }
        self.slots[i] = Some(((tgid, tid), true));
        self.index_of.insert((tgid, tid), i as u8);
        (i as u8, true)
    }
}

/// What is known about one thread.
#[derive(Clone, Debug)]
struct ThreadEntry {
    /// Thread group id; `None` until known.
    tgid: Option<u32>,
    /// The name last written to the output (empty: never written).
    written_name: String,
}

/// Counts of what the translator wrote, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelRecordCounts {
    /// Context switch records.
    pub context_switches: u64,
    /// Thread wakeup records.
    pub wakeups: u64,
    /// fork/clone, exec, exit and rename instants.
    pub proc_events: u64,
    /// Process and thread name records.
    pub names: u64,
    /// System call durations (complete, or begun and not ended).
    pub syscalls: u64,
    /// Hard IRQ and softirq durations.
    pub interrupts: u64,
    /// Block requests issued (async begins).
    pub block_requests: u64,
    /// Page fault instants and resident-set counter events.
    pub memory_events: u64,
    /// CPU idle and frequency counter events.
    pub cpu_counters: u64,
    /// Probed function durations.
    pub probes: u64,
    /// USDT probe instants.
    pub usdt: u64,
    /// Context switches the kernel did not record, written where the first
    /// event of another thread on that CPU shows them (`inferred`).
    pub inferred_switches: u64,
    /// Wake-ups of threads that were running (not written: nothing changed).
    pub running_wakeups: u64,
}

/// What the translator needs to know of a USDT probe site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsdtSiteInfo {
    /// `PROVIDER:NAME`.
    pub name: String,
    /// Each argument: whether it is signed, and its
    /// `trace_common::kernel::USDT_FORMAT_*`.
    pub args: Vec<(bool, u8)>,
}

/// Koid of the pseudo-process holding the per-CPU interrupt tracks: above
/// any Linux pid (at most 2^22), inside 31 bits.
pub const IRQ_PROCESS_KOID: u32 = 0x7FFF_0000;

/// Koid of CPU `cpu`'s interrupt track.
pub fn irq_thread_koid(cpu: u32) -> u32 {
    IRQ_PROCESS_KOID + 1 + cpu.min(0xFFFE)
}

/// Koid of the pseudo-process holding the per-CPU counters.
pub const CPUS_PROCESS_KOID: u32 = 0x7FFD_0000;

/// Koid of the pseudo-process holding the per-device block tracks.
pub const BLOCK_PROCESS_KOID: u32 = 0x7FFE_0000;

/// A block request issued and not yet completed.
#[derive(Clone, Debug)]
struct PendingBlock {
    ts: u64,
    name: &'static str,
    sector: u64,
    sectors: u32,
    bytes: u32,
    rwbs: String,
    issuer: u32,
}

/// A device's block tracks: requests overlap on a device, so each track
/// (lane) holds requests that do not, the first free lane taking the next.
#[derive(Clone, Debug, Default)]
struct BlockDevice {
    name: String,
    /// Each lane's koid and the end of its last request.
    lanes: Vec<(u32, u64)>,
}

/// The name of block device `dev` (a `dev_t` as the block tracepoints
/// give it: major in the upper 12 bits, minor in the lower 20), from sysfs
/// (`vda`, `nvme0n1p2`), else `major:minor`.
pub fn block_device_name(dev: u32) -> String {
    let number = format!("{}:{}", dev >> 20, dev & 0xF_FFFF);
    std::fs::read_to_string(format!("/sys/dev/block/{number}/uevent"))
        .ok()
        .and_then(|u| {
            u.lines()
                .find_map(|l| l.strip_prefix("DEVNAME=").map(str::to_owned))
        })
        .unwrap_or(number)
}

/// The operation a block request's `rwbs` flags describe.
pub fn block_op(rwbs: &str) -> &'static str {
    let op = rwbs.trim_start_matches('F');
    match op.chars().next() {
        Some('R') => "read",
        Some('W') => "write",
        Some('D') => "discard",
        Some('E') => "secure erase",
        Some('N') => "other",
        _ if rwbs.starts_with('F') => "flush",
        _ => "block I/O",
    }
}

/// A hard IRQ handler or softirq running on a CPU.
#[derive(Clone, Debug)]
struct PendingIrq {
    ts: u64,
    name: String,
    args: Vec<(&'static str, ArgValue<'static>)>,
    /// The IRQ number or softirq vector, to match the exit.
    number: i64,
}

/// The interrupts running on one CPU.
#[derive(Clone, Debug, Default)]
struct CpuIrqs {
    hard: Option<PendingIrq>,
    soft: Option<PendingIrq>,
}

/// How a system call ended, as far as the events tell.
#[derive(Clone, Copy, Debug)]
enum CallEnd {
    /// It returned `ret` at `ts`.
    Returned { ts: u64, ret: i64 },
    /// Its thread exited inside it at `ts` (`exit`, `exit_group`).
    Exited { ts: u64 },
    /// Its return was lost; the thread's next call began at `ts`.
    Lost { ts: u64 },
    /// The recording ended inside it, at `ts`.
    Running { ts: u64 },
}

/// A thread's system calls.
#[derive(Clone, Copy, Debug, Default)]
struct ThreadCalls {
    /// The call in progress.
    call: Option<PendingSyscall>,
    /// When its last call written ended (0: none yet).
    last_end: u64,
}

/// A system call entered and not yet returned.
#[derive(Clone, Copy, Debug)]
struct PendingSyscall {
    ts: u64,
    tgid: u32,
    nr: i64,
    args: [u64; trace_common::kernel::SYSCALL_ARGS],
}

/// Translates kernel events into records of one provider in the output.
pub struct KernelTranslator {
    strings: StringTable,
    threads: Map<u32, ThreadEntry>,
    /// Process koids whose name was written, with that name.
    processes: Map<u32, String>,
    counts: KernelRecordCounts,
    syscall_table: SyscallTable,
    /// System calls by thread: the one in progress, and when the last one
    /// returned.
    calls: Map<u32, ThreadCalls>,
    /// When the recording started (CLOCK_BOOTTIME ns): where calls that
    /// began before it start.
    start_ts: u64,
    /// Interrupts running, by CPU.
    irqs: Map<u32, CpuIrqs>,
    /// Block requests in flight by (device, sector), oldest first.
    block: Map<(u32, u64), std::collections::VecDeque<PendingBlock>>,
    /// Block devices by `dev_t`, with their tracks.
    block_devices: Map<u32, BlockDevice>,
    /// The next block track's koid.
    next_block_koid: u32,
    /// Address spaces (`rss_stat`'s `mm_id`) by owning process.
    mm_owners: Map<u32, u32>,
    /// Names of the probed functions, by probe index.
    probe_names: Vec<String>,
    usdt_sites: Vec<UsdtSiteInfo>,
    thread_table: ThreadTable,
    /// Probed functions entered and not returned, by thread: (probe,
    /// process, entry time), innermost last.
    probe_stacks: Map<u32, Vec<(u64, u32, u64)>>,
    /// When the recording stopped: where what is still open ends.
    stop_ts: Option<u64>,
    /// The latest event time seen.
    last_ts: u64,
    /// The task each CPU runs, as the events show it, by CPU.
    cpu_current: Vec<Option<Current>>,
    /// The CPU each running thread is on (idle tasks left out).
    running_on: Map<u32, u16>,
    /// Each thread's priority, as last seen.
    prio_of: Map<u32, i32>,
    /// Threads that existed when the recording started (the snapshot).
    at_start: std::collections::HashSet<u32>,
    /// When each thread was first seen in an event.
    first_seen: Map<u32, u64>,
    /// When threads created during the recording were created.
    created: Map<u32, u64>,
}

/// The task a CPU runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Current {
    tid: u32,
    tgid: u32,
}

/// The Linux previous-task state of `sched_switch` as an FXT thread state.
///
/// `prev_state` holds the TASK_REPORT bits (S=1, D=2, T=4, t=8, X=16, Z=32,
/// P=64, I=128) and a preemption marker above them; 0 means the task was
/// preempted while runnable.
pub fn thread_state(prev_state: i64) -> ThreadState {
    const REPORT_MASK: i64 = 0xff;
    let s = prev_state & REPORT_MASK;
    // Preemption is reported as TASK_REPORT_MAX, above the mask: no state bit.
    if s == 0 {
        return ThreadState::Running;
    }
    if s & 0x10 != 0 {
        ThreadState::Dead
    } else if s & 0x20 != 0 {
        ThreadState::Dying
    } else if s & (0x04 | 0x08) != 0 {
        ThreadState::Suspended
    } else {
        // S, D, P (parked) and I (idle kernel thread) are all "blocked".
        ThreadState::Blocked
    }
}

/// The weight argument for a thread: its priority, or [`IDLE_WEIGHT`] for
/// the idle task (tid 0).
pub fn weight(tid: u32, prio: i32) -> i32 {
    if tid == 0 { IDLE_WEIGHT } else { prio }
}

/// A kernel `comm` field as text: up to the first NUL, invalid UTF-8 replaced.
pub fn comm_str(comm: &[u8]) -> std::borrow::Cow<'_, str> {
    let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
    String::from_utf8_lossy(&comm[..end])
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
            processes: Map::default(),
            counts: KernelRecordCounts::default(),
            syscall_table: table,
            calls: Map::default(),
            start_ts: 0,
            irqs: Map::default(),
            block: Map::default(),
            block_devices: Map::default(),
            next_block_koid: BLOCK_PROCESS_KOID + 1,
            mm_owners: Map::default(),
            probe_names: Vec::new(),
            usdt_sites: Vec::new(),
            thread_table: ThreadTable::default(),
            probe_stacks: Map::default(),
            stop_ts: None,
            last_ts: 0,
            cpu_current: Vec::new(),
            running_on: Map::default(),
            prio_of: Map::default(),
            at_start: std::collections::HashSet::new(),
            first_seen: Map::default(),
            created: Map::default(),
        }
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
            self.running_on.clear();
            // Returns seen before the gap say nothing of calls after it.
            self.calls.clear();
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

    /// Writes a process name record if `name` is new for `pid`.
    fn name_process<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        pid: u32,
        name: &str,
    ) -> Result<(), OutputError> {
        if pid == 0 || self.processes.get(&pid).is_some_and(|n| n == name) {
            return Ok(());
        }
        let name_ref = self.strings.intern(out, name)?;
        out.write(&Record::KernelObject {
            koid: u64::from(pid),
            obj_type: obj_type::PROCESS,
            name: name_ref,
            args: (&[][..]).into(),
        })?;
        self.counts.names += 1;
        self.processes.insert(pid, name.to_owned());
        Ok(())
    }

    /// Writes a thread name record (with its `"process"` argument) if the
    /// name or the thread group is new.
    fn name_thread<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        tid: u32,
        tgid: u32,
        name: &str,
    ) -> Result<(), OutputError> {
        if tid == 0 {
            return Ok(());
        }
        let entry = self.threads.entry(tid).or_insert(ThreadEntry {
            tgid: None,
            written_name: String::new(),
        });
        if entry.tgid == Some(tgid) && entry.written_name == name {
            return Ok(());
        }
        entry.tgid = Some(tgid);
        entry.written_name = name.to_owned();
        let name_ref = self.strings.intern(out, name)?;
        let process = self.strings.intern(out, "process")?;
        out.write(&Record::KernelObject {
            koid: u64::from(tid),
            obj_type: obj_type::THREAD,
            name: name_ref,
            args: (&[Arg {
                name: process,
                value: ArgValue::Koid(u64::from(tgid)),
            }][..])
                .into(),
        })?;
        self.counts.names += 1;
        if !self.processes.contains_key(&tgid) {
            let pname = if tid == tgid {
                name.to_owned()
            } else {
                procfs::process_name(tgid).unwrap_or_else(|| name.to_owned())
            };
            self.name_process(out, tgid, &pname)?;
        }
        Ok(())
    }

    /// Makes sure a thread seen with `comm` is named, finding its thread group
    /// in /proc if no event has told it yet.
    fn see_thread<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        tid: u32,
        comm: &str,
    ) -> Result<(), OutputError> {
        if tid == 0 {
            return Ok(());
        }
        let tgid = match self.threads.get(&tid) {
            Some(e) if e.written_name == comm => return Ok(()),
            Some(ThreadEntry { tgid: Some(g), .. }) => Some(*g),
            Some(ThreadEntry { tgid: None, .. }) => None,
            None => {
                let found = procfs::thread(tid).map(|(g, _)| g);
                if found.is_none() {
                    // Remember that /proc had nothing, so it is not asked again.
                    self.threads.insert(
                        tid,
                        ThreadEntry {
                            tgid: None,
                            written_name: String::new(),
                        },
                    );
                }
                found
            }
        };
        match tgid {
            Some(g) => self.name_thread(out, tid, g, comm),
            None => Ok(()),
        }
    }

    /// Every event says which task was running on the CPU it was written
    /// on (`tid` of `tgid`, at `ts`). Where that is not the task the CPU's
    /// last context switch switched in, the kernel switched without a
    /// record (a lost event, or a task the kernel keeps out of tracing):
    /// the switch is written here, marked `inferred`, so that every CPU's
    /// switches stay continuous.
    pub fn current_task<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        cpu: u16,
        tid: u32,
        tgid: u32,
    ) -> Result<(), OutputError> {
        self.last_ts = self.last_ts.max(ts);
        let now = Current { tid, tgid };
        match self.cpu_current.get(usize::from(cpu)).copied().flatten() {
            Some(c) if c.tid == tid => Ok(()),
            Some(c) => self.inferred_switch(out, ts, cpu, c, now),
            None => {
                self.set_current(cpu, now);
                Ok(())
            }
        }
    }

    /// Records that `cpu` runs `now`.
    fn set_current(&mut self, cpu: u16, now: Current) {
        let at = usize::from(cpu);
        if self.cpu_current.len() <= at {
            self.cpu_current.resize(at + 1, None);
        }
        if let Some(old) = self.cpu_current[at].replace(now)
            && self.running_on.get(&old.tid) == Some(&cpu)
        {
            self.running_on.remove(&old.tid);
        }
        if now.tid != 0 {
            self.running_on.insert(now.tid, cpu);
        }
    }

    /// Writes a switch on `cpu` from `from` to `to` that no event recorded,
    /// at `ts`: a context switch record (8/1) with the weights and an
    /// `inferred` argument. The outgoing thread's state is unknown; it is
    /// written as blocked.
    fn inferred_switch<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        cpu: u16,
        from: Current,
        to: Current,
    ) -> Result<(), OutputError> {
        if to.tid != 0 {
            // The thread may still look as if it ran on another CPU.
            if let Some(other) = self.running_on.get(&to.tid).copied()
                && other != cpu
            {
                let idle = Current { tid: 0, tgid: 0 };
                self.inferred_switch(out, ts, other, to, idle)?;
            }
            self.know_thread(out, to.tid, to.tgid)?;
        }
        if from.tid != 0 {
            self.know_thread(out, from.tid, from.tgid)?;
        }
        let prio = |t: &Self, tid: u32| {
            if tid == 0 {
                IDLE_WEIGHT
            } else {
                t.prio_of.get(&tid).copied().unwrap_or(120)
            }
        };
        let (in_w, out_w) = (prio(self, to.tid), prio(self, from.tid));
        let incoming = self.strings.intern(out, "incoming_weight")?;
        let outgoing = self.strings.intern(out, "outgoing_weight")?;
        let inferred = self.strings.intern(out, "inferred")?;
        let args = [
            Arg {
                name: incoming,
                value: ArgValue::Int32(in_w),
            },
            Arg {
                name: outgoing,
                value: ArgValue::Int32(out_w),
            },
            Arg {
                name: inferred,
                value: ArgValue::Bool(true),
            },
        ];
        out.write(&Record::ContextSwitch {
            ts,
            cpu,
            outgoing_state: ThreadState::Blocked as u8,
            outgoing_tid: u64::from(from.tid),
            incoming_tid: u64::from(to.tid),
            args: (&args[..]).into(),
        })?;
        self.counts.context_switches += 1;
        self.counts.inferred_switches += 1;
        self.set_current(cpu, to);
        Ok(())
    }

    /// A context switch on `cpu` from `prev` (the current task, in thread
    /// group `prev_tgid`) to `next`.
    #[allow(clippy::too_many_arguments)]
    pub fn context_switch<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        cpu: u16,
        prev_tid: u32,
        prev_tgid: u32,
        prev_prio: i32,
        prev_state: i64,
        prev_comm: &str,
        next_tid: u32,
        next_prio: i32,
        next_comm: &str,
    ) -> Result<(), OutputError> {
        self.current_task(out, ts, cpu, prev_tid, prev_tgid)?;
        self.first_seen.entry(next_tid).or_insert(ts);
        if prev_tid != 0 {
            self.prio_of.insert(prev_tid, prev_prio);
        }
        if next_tid != 0 {
            self.prio_of.insert(next_tid, next_prio);
            // Switched in here while it looks as if it ran elsewhere: that
            // CPU switched away from it without a record.
            if let Some(other) = self.running_on.get(&next_tid).copied()
                && other != cpu
                && let Some(c) = self.cpu_current.get(usize::from(other)).copied().flatten()
            {
                self.inferred_switch(out, ts, other, c, Current { tid: 0, tgid: 0 })?;
            }
        }
        self.name_thread(out, prev_tid, prev_tgid, prev_comm)?;
        self.see_thread(out, next_tid, next_comm)?;
        let next_tgid = if next_tid == 0 {
            Some(0)
        } else {
            self.threads.get(&next_tid).and_then(|e| e.tgid)
        };
        self.set_current(
            cpu,
            Current {
                tid: next_tid,
                tgid: next_tgid.unwrap_or(next_tid),
            },
        );
        let priority = |tid: u32, prio: i32| {
            if tid == 0 {
                Some(0)
            } else {
                u8::try_from(prio).ok()
            }
        };
        if let (Some(next_tgid), Ok(cpu8), Some(out_prio), Some(in_prio)) = (
            next_tgid,
            u8::try_from(cpu),
            priority(prev_tid, prev_prio),
            priority(next_tid, next_prio),
        ) {
            let prev_tgid = if prev_tid == 0 { 0 } else { prev_tgid };
            let outgoing_thread = self.thread_ref(out, prev_tgid, prev_tid, None)?;
            let keep = match outgoing_thread {
                ThreadRef::Index(i) => Some(i),
                ThreadRef::Inline { .. } => None,
            };
            let incoming_thread = self.thread_ref(out, next_tgid, next_tid, keep)?;
            out.write(&Record::LegacyContextSwitch {
                ts,
                cpu: cpu8,
                outgoing_state: thread_state(prev_state) as u8,
                outgoing_thread,
                incoming_thread,
                outgoing_priority: out_prio,
                incoming_priority: in_prio,
            })?;
            self.counts.context_switches += 1;
            return Ok(());
        }
        let incoming = self.strings.intern(out, "incoming_weight")?;
        let outgoing = self.strings.intern(out, "outgoing_weight")?;
        let args = [
            Arg {
                name: incoming,
                value: ArgValue::Int32(weight(next_tid, next_prio)),
            },
            Arg {
                name: outgoing,
                value: ArgValue::Int32(weight(prev_tid, prev_prio)),
            },
        ];
        out.write(&Record::ContextSwitch {
            ts,
            cpu,
            outgoing_state: thread_state(prev_state) as u8,
            outgoing_tid: u64::from(prev_tid),
            incoming_tid: u64::from(next_tid),
            args: (&args[..]).into(),
        })?;
        self.counts.context_switches += 1;
        Ok(())
    }

    /// The thread table reference of `tid` of `tgid`, writing its thread
    /// record first when it gets an entry; entry `keep` is not replaced.
    fn thread_ref<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        tgid: u32,
        tid: u32,
        keep: Option<u8>,
    ) -> Result<ThreadRef, OutputError> {
        let (index, new) = self.thread_table.index(tgid, tid, keep);
        if new {
            out.write(&Record::Thread {
                index,
                process: u64::from(tgid),
                thread: u64::from(tid),
            })?;
        }
        Ok(ThreadRef::Index(index))
    }

    /// `tid` (named `comm`, priority `prio`) was woken by `waker_tid`
    /// (running on `waker_cpu`), to run on `target_cpu`.
    ///
    /// A wake-up from a CPU's idle task (waker 0: an interrupt taken while
    /// idle) names that CPU's interrupt track (`CPU n interrupts`) as the
    /// waker. A wake-up of a thread that is running (it was woken before it
    /// got to sleep) changes nothing and is not written.
    #[allow(clippy::too_many_arguments)]
    pub fn wakeup<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        target_cpu: u16,
        tid: u32,
        prio: i32,
        comm: &str,
        waker_tid: u32,
        waker_cpu: u16,
    ) -> Result<(), OutputError> {
        self.first_seen.entry(tid).or_insert(ts);
        if tid != 0 {
            self.prio_of.insert(tid, prio);
        }
        if self.running_on.contains_key(&tid) {
            self.counts.running_wakeups += 1;
            return Ok(());
        }
        self.see_thread(out, tid, comm)?;
        let waker_koid = if waker_tid == 0 {
            self.irq_track(out, u32::from(waker_cpu))?
        } else {
            waker_tid
        };
        let w = self.strings.intern(out, "weight")?;
        let waker = self.strings.intern(out, "waker")?;
        let args = [
            Arg {
                name: w,
                value: ArgValue::Int32(weight(tid, prio)),
            },
            Arg {
                name: waker,
                value: ArgValue::Koid(u64::from(waker_koid)),
            },
        ];
        out.write(&Record::ThreadWakeup {
            ts,
            cpu: target_cpu,
            tid: u64::from(tid),
            args: (&args[..]).into(),
        })?;
        self.counts.wakeups += 1;
        Ok(())
    }

    /// The koid of `cpu`'s interrupt track, named on first use.
    fn irq_track<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        cpu: u32,
    ) -> Result<u32, OutputError> {
        let tid = irq_thread_koid(cpu);
        if !self.processes.contains_key(&IRQ_PROCESS_KOID) {
            self.name_process(out, IRQ_PROCESS_KOID, "kernel interrupts")?;
        }
        if !self.threads.contains_key(&tid) {
            self.name_thread(out, tid, IRQ_PROCESS_KOID, &format!("CPU {cpu} interrupts"))?;
        }
        Ok(tid)
    }

    /// An instant in `kernel:proc` on thread `tid` of `tgid`.
    fn proc_instant<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        tgid: u32,
        tid: u32,
        name: &str,
        args: &[(&str, ArgValue<'_>)],
    ) -> Result<(), OutputError> {
        self.event(
            out,
            ts,
            trace_common::category::KERNEL_PROC,
            (tgid, tid),
            name,
            args,
            EventKind::Instant,
        )?;
        self.counts.proc_events += 1;
        Ok(())
    }

    /// Thread `parent_tid` of `parent_tgid` created `child_tid`, which belongs
    /// to `child_tgid` (the parent's group for a new thread, its own for a new
    /// process).
    #[allow(clippy::too_many_arguments)]
    pub fn new_task<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        parent_tid: u32,
        parent_tgid: u32,
        child_tid: u32,
        child_tgid: u32,
        child_comm: &str,
        clone_flags: u64,
    ) -> Result<(), OutputError> {
        self.created.insert(child_tid, ts);
        self.first_seen.insert(child_tid, ts);
        let is_thread = child_tgid == parent_tgid && child_tid != child_tgid;
        if !is_thread {
            self.name_process(out, child_tgid, child_comm)?;
        }
        self.name_thread(out, child_tid, child_tgid, child_comm)?;
        let (name, key) = if is_thread {
            ("thread_create", "tid")
        } else {
            ("fork", "child_pid")
        };
        self.proc_instant(
            out,
            ts,
            parent_tgid,
            parent_tid,
            name,
            &[
                (key, ArgValue::Koid(u64::from(child_tid))),
                ("clone_flags", ArgValue::Uint64(clone_flags)),
            ],
        )
    }

    /// Thread `tid` of `tgid` executed `filename` and is now called `comm`.
    #[allow(clippy::too_many_arguments)]
    pub fn exec<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        tid: u32,
        tgid: u32,
        old_tid: u32,
        filename: &str,
        comm: &str,
    ) -> Result<(), OutputError> {
        self.name_process(out, tgid, comm)?;
        self.name_thread(out, tid, tgid, comm)?;
        let mut args = vec![("filename", ArgValue::String(StringRef::inline(filename)))];
        if old_tid != tid {
            args.push(("old_tid", ArgValue::Koid(u64::from(old_tid))));
        }
        self.proc_instant(out, ts, tgid, tid, "exec", &args)
    }

    /// Thread `tid` of `tgid` entered system call `nr` with `args`.
    pub fn sys_enter<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        tid: u32,
        tgid: u32,
        nr: i64,
        args: [u64; trace_common::kernel::SYSCALL_ARGS],
    ) -> Result<(), OutputError> {
        let call = PendingSyscall { ts, tgid, nr, args };
        if let Some(lost) = self.calls.entry(tid).or_default().call.replace(call) {
            // Its return was lost (a full ring buffer).
            self.write_syscall(out, tid, lost, CallEnd::Lost { ts })?;
        }
        Ok(())
    }

    /// Thread `tid` of `tgid` returned `ret` from system call `nr`.
    pub fn sys_exit<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        tid: u32,
        tgid: u32,
        nr: i64,
        ret: i64,
    ) -> Result<(), OutputError> {
        let calls = self.calls.entry(tid).or_default();
        let last_end = std::mem::replace(&mut calls.last_end, ts);
        match calls.call.take() {
            // `rt_sigreturn` restores the registers of the interrupted
            // code, so its return reports call number -1 (the kernel's "no
            // system call" marker): it returns from the call in progress.
            Some(call) if call.nr == nr || nr == -1 => {
                self.write_syscall(out, tid, call, CallEnd::Returned { ts, ret })
            }
            other => {
                if let Some(lost) = other {
                    self.write_syscall(out, tid, lost, CallEnd::Lost { ts })?;
                }
                if nr == -1 {
                    // A return from no known call: nothing to draw.
                    return Ok(());
                }
                // Entered before the recording, or before the thread was
                // seen (the child's side of clone and fork, which returns
                // without having entered): it spans from the recording's
                // start for a thread that existed then, else from when the
                // thread was first seen, never before the thread existed.
                // A thread seen returning from a call before entered this
                // one after that return: its entry was lost.
                if last_end != 0 {
                    let call = PendingSyscall {
                        ts: last_end.min(ts),
                        tgid,
                        nr,
                        args: [0; trace_common::kernel::SYSCALL_ARGS],
                    };
                    return self.write_syscall_without_entry(out, tid, call, ts, ret, "entry_lost");
                }
                let from = if let Some(&born) = self.created.get(&tid) {
                    born.max(self.start_ts)
                } else if self.at_start.contains(&tid) {
                    self.start_ts
                } else {
                    self.first_seen.get(&tid).copied().unwrap_or(ts)
                };
                let call = PendingSyscall {
                    ts: from.min(ts),
                    tgid,
                    nr,
                    args: [0; trace_common::kernel::SYSCALL_ARGS],
                };
                self.write_syscall_without_entry(out, tid, call, ts, ret, "began_before_recording")
            }
        }
    }

    /// Writes the system calls still running as durations that end where
    /// the recording ended, marked `unfinished`.
    pub fn finish_syscalls<W: Write>(&mut self, out: &mut FxtStream<W>) -> Result<(), OutputError> {
        let mut left: Vec<(u32, PendingSyscall)> = self
            .calls
            .iter_mut()
            .filter_map(|(tid, c)| c.call.take().map(|call| (*tid, call)))
            .collect();
        left.sort_by_key(|(_, c)| c.ts);
        let end = self.end_ts();
        for (tid, call) in left {
            self.write_syscall(
                out,
                tid,
                call,
                CallEnd::Running {
                    ts: end.max(call.ts),
                },
            )?;
        }
        Ok(())
    }

    /// Writes one system call: a complete duration, or a begun one when
    /// the recording ended inside it.
    fn write_syscall<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        tid: u32,
        call: PendingSyscall,
        end: CallEnd,
    ) -> Result<(), OutputError> {
        let info = self.syscall_table.get(call.nr);
        let mut args: Vec<(&str, ArgValue<'_>)> = Vec::with_capacity(info.args.len() + 2);
        args.push(("nr", ArgValue::Int64(call.nr)));
        for (spec, raw) in info.args.iter().zip(call.args) {
            args.push((&spec.name, spec.kind.value(raw)));
        }
        let kind = match end {
            CallEnd::Returned { ts, ret } => {
                args.push(("ret", ArgValue::Int64(ret)));
                EventKind::DurationComplete { end_ts: ts }
            }
            CallEnd::Exited { ts } => EventKind::DurationComplete { end_ts: ts },
            CallEnd::Lost { ts } => {
                args.push(("return_lost", ArgValue::Bool(true)));
                EventKind::DurationComplete { end_ts: ts }
            }
            CallEnd::Running { ts } => {
                args.push(("unfinished", ArgValue::Bool(true)));
                EventKind::DurationComplete { end_ts: ts }
            }
        };
        self.syscall_event(out, call.ts, call.tgid, tid, &info.name, &args, kind)
    }

    /// A call that returned `ret` at `end` whose entry was not seen (its
    /// arguments are unknown), marked with the Bool argument `why`.
    fn write_syscall_without_entry<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        tid: u32,
        call: PendingSyscall,
        end: u64,
        ret: i64,
        why: &'static str,
    ) -> Result<(), OutputError> {
        let info = self.syscall_table.get(call.nr);
        let args = [
            ("nr", ArgValue::Int64(call.nr)),
            ("ret", ArgValue::Int64(ret)),
            (why, ArgValue::Bool(true)),
        ];
        let kind = EventKind::DurationComplete { end_ts: end };
        self.syscall_event(out, call.ts, call.tgid, tid, &info.name, &args, kind)
    }

    #[allow(clippy::too_many_arguments)]
    fn syscall_event<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        tgid: u32,
        tid: u32,
        name: &str,
        args: &[(&str, ArgValue<'_>)],
        kind: EventKind,
    ) -> Result<(), OutputError> {
        self.know_thread(out, tid, tgid)?;
        self.event(
            out,
            ts,
            trace_common::category::KERNEL_SYSCALL,
            (tgid, tid),
            name,
            args,
            kind,
        )?;
        self.counts.syscalls += 1;
        Ok(())
    }

    /// Writes an event of `category` named `name` on thread `(tgid, tid)`.
    #[allow(clippy::too_many_arguments)]
    fn event<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        category: &str,
        (tgid, tid): (u32, u32),
        name: &str,
        args: &[(&str, ArgValue<'_>)],
        kind: EventKind,
    ) -> Result<(), OutputError> {
        let category = self.strings.intern(out, category)?;
        let name = self.strings.intern(out, name)?;
        let mut list: Vec<Arg<'_>> = Vec::with_capacity(args.len());
        for (k, v) in args {
            let key = self.strings.intern(out, k)?;
            list.push(Arg {
                name: key,
                value: v.clone(),
            });
        }
        out.write(&Record::Event {
            ts,
            thread: ThreadRef::Inline {
                process: u64::from(tgid),
                thread: u64::from(tid),
            },
            category,
            name,
            args: list.into(),
            kind,
        })
    }

    /// Names thread `tid` of `tgid` from /proc if nothing has named it yet.
    fn know_thread<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        tid: u32,
        tgid: u32,
    ) -> Result<(), OutputError> {
        if tid == 0 || self.threads.contains_key(&tid) {
            return Ok(());
        }
        match procfs::thread(tid) {
            Some((_, name)) => {
                if !self.processes.contains_key(&tgid) {
                    let pname = procfs::process_name(tgid).unwrap_or_default();
                    self.name_process(out, tgid, &pname)?;
                }
                self.name_thread(out, tid, tgid, &name)
            }
            None => {
                self.threads.insert(
                    tid,
                    ThreadEntry {
                        tgid: Some(tgid),
                        written_name: String::new(),
                    },
                );
                Ok(())
            }
        }
    }

    /// Hard IRQ `irq` (handler `name`) started on `cpu`.
    pub fn irq_entry<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        cpu: u32,
        irq: i32,
        name: &str,
    ) -> Result<(), OutputError> {
        let name = if name.is_empty() {
            format!("irq {irq}")
        } else {
            name.to_owned()
        };
        let pending = PendingIrq {
            ts,
            name,
            args: vec![("irq", ArgValue::Int32(irq))],
            number: i64::from(irq),
        };
        if let Some(lost) = self.irqs.entry(cpu).or_default().hard.replace(pending) {
            // Its exit was lost (a full ring buffer).
            self.write_irq(out, cpu, lost, ts, &[("exit_lost", ArgValue::Bool(true))])?;
        }
        Ok(())
    }

    /// Hard IRQ `irq` ended on `cpu`; `ret` non-zero when it was handled.
    pub fn irq_exit<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        cpu: u32,
        irq: i32,
        ret: i32,
    ) -> Result<(), OutputError> {
        let slot = &mut self.irqs.entry(cpu).or_default().hard;
        match slot.take() {
            Some(p) if p.number == i64::from(irq) => {
                self.write_irq(out, cpu, p, ts, &[("handled", ArgValue::Bool(ret != 0))])
            }
            other => {
                *slot = other;
                Ok(())
            }
        }
    }

    /// Softirq vector `vec` started (`exit` false) or ended on `cpu`.
    pub fn softirq<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        cpu: u32,
        vec: u32,
        exit: bool,
    ) -> Result<(), OutputError> {
        let slot = &mut self.irqs.entry(cpu).or_default().soft;
        if !exit {
            let name = match trace_common::kernel::softirq_name(vec) {
                Some(n) => format!("softirq {n}"),
                None => format!("softirq {vec}"),
            };
            let pending = PendingIrq {
                ts,
                name,
                args: vec![("vec", ArgValue::Uint32(vec))],
                number: i64::from(vec),
            };
            if let Some(lost) = slot.replace(pending) {
                self.write_irq(out, cpu, lost, ts, &[("exit_lost", ArgValue::Bool(true))])?;
            }
            return Ok(());
        }
        match slot.take() {
            Some(p) if p.number == i64::from(vec) => self.write_irq(out, cpu, p, ts, &[]),
            other => {
                *slot = other;
                Ok(())
            }
        }
    }

    /// Writes the interrupts still running as durations that end where the
    /// recording ended, marked `unfinished`.
    pub fn finish_irqs<W: Write>(&mut self, out: &mut FxtStream<W>) -> Result<(), OutputError> {
        let mut left: Vec<(u32, PendingIrq)> = Vec::new();
        for (cpu, irqs) in self.irqs.iter_mut() {
            left.extend(irqs.soft.take().map(|p| (*cpu, p)));
            left.extend(irqs.hard.take().map(|p| (*cpu, p)));
        }
        left.sort_by_key(|(_, p)| p.ts);
        let end = self.end_ts();
        for (cpu, p) in left {
            let at = end.max(p.ts);
            self.write_irq(out, cpu, p, at, &[("unfinished", ArgValue::Bool(true))])?;
        }
        Ok(())
    }

    /// Writes one interrupt on `cpu`'s track, from its start to `end_ts`.
    fn write_irq<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        cpu: u32,
        p: PendingIrq,
        end_ts: u64,
        extra: &[(&str, ArgValue<'_>)],
    ) -> Result<(), OutputError> {
        let tid = self.irq_track(out, cpu)?;
        let mut args: Vec<(&str, ArgValue<'_>)> = p.args.clone();
        args.extend(extra.iter().cloned());
        let kind = EventKind::DurationComplete { end_ts };
        self.event(
            out,
            p.ts,
            trace_common::category::KERNEL_IRQ,
            (IRQ_PROCESS_KOID, tid),
            &p.name,
            &args,
            kind,
        )?;
        self.counts.interrupts += 1;
        Ok(())
    }

    /// Thread `tid` of `tgid` faulted at `address` (instruction `ip`) with
    /// the architecture's `error_code`.
    #[allow(clippy::too_many_arguments)]
    pub fn page_fault<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        tid: u32,
        tgid: u32,
        address: u64,
        ip: u64,
        error_code: u64,
    ) -> Result<(), OutputError> {
        let mut args = vec![
            ("address", ArgValue::Pointer(address)),
            ("ip", ArgValue::Pointer(ip)),
            ("error_code", ArgValue::Uint64(error_code)),
        ];
        if cfg!(any(target_arch = "x86_64", target_arch = "x86")) {
            // x86 page fault error code: P, W/R, U/S, RSVD, I/D, PK.
            let access = if error_code & 0x10 != 0 {
                "exec"
            } else if error_code & 0x2 != 0 {
                "write"
            } else {
                "read"
            };
            args.push(("access", ArgValue::String(StringRef::inline(access))));
            args.push(("present", ArgValue::Bool(error_code & 0x1 != 0)));
        }
        self.know_thread(out, tid, tgid)?;
        self.vm_event(out, ts, tgid, tid, "page_fault", &args, EventKind::Instant)
    }

    /// A resident-set counter (`member`: 0 file, 1 anon, 2 swap, 3 shmem)
    /// of address space `mm_id` became `size` bytes; `curr` when it is the
    /// address space of `tgid`, the process that changed it.
    #[allow(clippy::too_many_arguments)]
    pub fn rss_stat<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        tgid: u32,
        curr: bool,
        mm_id: u32,
        member: i32,
        size: i64,
    ) -> Result<(), OutputError> {
        let owner = if curr {
            self.mm_owners.insert(mm_id, tgid);
            tgid
        } else {
            match self.mm_owners.get(&mm_id) {
                Some(&o) => o,
                // Not seen from its own process yet: no owner to show it on.
                None => return Ok(()),
            }
        };
        let Some(kind) = trace_common::kernel::rss_member_name(member) else {
            return Ok(());
        };
        if owner == 0 {
            return Ok(());
        }
        self.know_thread(out, owner, owner)?;
        let args = [(kind, ArgValue::Int64(size))];
        self.vm_event(
            out,
            ts,
            owner,
            owner,
            "rss",
            &args,
            EventKind::Counter { id: 0 },
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn vm_event<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        tgid: u32,
        tid: u32,
        name: &str,
        args: &[(&str, ArgValue<'_>)],
        kind: EventKind,
    ) -> Result<(), OutputError> {
        self.event(
            out,
            ts,
            trace_common::category::KERNEL_VM,
            (tgid, tid),
            name,
            args,
            kind,
        )?;
        self.counts.memory_events += 1;
        Ok(())
    }

    /// Names the probes: `names[i]` is probe `i`'s function.
    pub fn set_probe_names(&mut self, names: Vec<String>) {
        self.probe_names = names;
    }

    /// Describes the USDT sites: `sites[i]` is site `i`.
    pub fn set_usdt_sites(&mut self, sites: Vec<UsdtSiteInfo>) {
        self.usdt_sites = sites;
    }

    /// Thread `tid` of `tgid` passed USDT site `site` with `args` (bit `i`
    /// of `unreadable` set when argument `i` could not be read; `strings`,
    /// the texts of its string arguments in order).
    #[allow(clippy::too_many_arguments)]
    pub fn usdt<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        tid: u32,
        tgid: u32,
        site: u32,
        args: &[u64],
        unreadable: u32,
        strings: &[String],
    ) -> Result<(), OutputError> {
        self.know_thread(out, tid, tgid)?;
        let info = self.usdt_sites.get(site as usize).cloned();
        let name = info
            .as_ref()
            .map_or_else(|| format!("usdt site {site}"), |i| i.name.clone());
        let keys: Vec<String> = (0..args.len()).map(|i| format!("arg{i}")).collect();
        let mut list: Vec<(&str, ArgValue<'_>)> = Vec::with_capacity(args.len() + 1);
        let mut string_slot = 0;
        for (i, &v) in args.iter().enumerate() {
            let (signed, format) = info
                .as_ref()
                .and_then(|info| info.args.get(i).copied())
                .unwrap_or((false, trace_common::kernel::USDT_FORMAT_NUMBER));
            let text = (format == trace_common::kernel::USDT_FORMAT_STRING).then(|| {
                string_slot += 1;
                strings.get(string_slot - 1)
            });
            if unreadable & (1 << i) != 0 {
                continue;
            }
            let value = match (text, format) {
                (Some(Some(text)), _) => ArgValue::String(StringRef::inline(text.clone())),
                (Some(None), _) => continue,
                (None, trace_common::kernel::USDT_FORMAT_POINTER) => ArgValue::Pointer(v),
                (None, _) if signed => ArgValue::Int64(v as i64),
                (None, _) => ArgValue::Uint64(v),
            };
            list.push((&keys[i], value));
        }
        if unreadable != 0 {
            list.push(("unreadable_args", ArgValue::Uint64(u64::from(unreadable))));
        }
        self.event(
            out,
            ts,
            "usdt",
            (tgid, tid),
            &name,
            &list,
            EventKind::Instant,
        )?;
        self.counts.usdt += 1;
        Ok(())
    }

    /// Thread `tid` of `tgid` entered (`ret` false) or returned from probed
    /// function `probe`.
    pub fn probe<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        tid: u32,
        tgid: u32,
        probe: u64,
        ret: bool,
    ) -> Result<(), OutputError> {
        let stack = self.probe_stacks.entry(tid).or_default();
        if !ret {
            stack.push((probe, tgid, ts));
            return Ok(());
        }
        // The innermost call of this function (returns of others in between
        // were lost).
        let Some(at) = stack.iter().rposition(|&(p, _, _)| p == probe) else {
            return Ok(());
        };
        let (_, tgid, start) = stack[at];
        stack.truncate(at);
        self.write_probe(out, tid, tgid, probe, start, Some(ts), ts)
    }

    /// Writes the probed functions still running as durations that end
    /// where the recording ended, marked `unfinished`.
    pub fn finish_probes<W: Write>(&mut self, out: &mut FxtStream<W>) -> Result<(), OutputError> {
        let mut left: Vec<(u32, (u64, u32, u64))> = self
            .probe_stacks
            .drain()
            .flat_map(|(tid, s)| s.into_iter().map(move |c| (tid, c)))
            .collect();
        left.sort_by_key(|&(_, (_, _, ts))| ts);
        let end = self.end_ts();
        for (tid, (probe, tgid, ts)) in left {
            self.write_probe(out, tid, tgid, probe, ts, None, end.max(ts))?;
        }
        Ok(())
    }

    /// One probed function call from `start`: returned at `returned`, or
    /// unfinished at `end`.
    #[allow(clippy::too_many_arguments)]
    fn write_probe<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        tid: u32,
        tgid: u32,
        probe: u64,
        start: u64,
        returned: Option<u64>,
        end: u64,
    ) -> Result<(), OutputError> {
        self.know_thread(out, tid, tgid)?;
        let name = usize::try_from(probe)
            .ok()
            .and_then(|i| self.probe_names.get(i).cloned())
            .unwrap_or_else(|| format!("probe {probe}"));
        let kind = EventKind::DurationComplete {
            end_ts: returned.unwrap_or(end),
        };
        let unfinished = [("unfinished", ArgValue::Bool(true))];
        let args: &[(&str, ArgValue<'_>)] = if returned.is_some() { &[] } else { &unfinished };
        self.event(out, start, "uprobe", (tgid, tid), &name, args, kind)?;
        self.counts.probes += 1;
        Ok(())
    }

    /// CPU `cpu` entered idle state `state` (`IDLE_EXIT`: left idle), or
    /// (with `frequency`) runs at `state` kHz.
    pub fn cpu_power<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        cpu: u32,
        frequency: bool,
        state: u32,
    ) -> Result<(), OutputError> {
        let tid = self.cpu_counter_track(out)?;
        let (name, value) = if frequency {
            ("cpu_frequency", i64::from(state))
        } else if state == trace_common::kernel::IDLE_EXIT {
            ("cpu_idle", -1)
        } else {
            ("cpu_idle", i64::from(state))
        };
        let cpu_name = format!("cpu{cpu}");
        self.event(
            out,
            ts,
            trace_common::category::KERNEL_SCHED,
            (CPUS_PROCESS_KOID, tid),
            name,
            &[(&cpu_name, ArgValue::Int64(value))],
            EventKind::Counter { id: 0 },
        )?;
        self.counts.cpu_counters += 1;
        Ok(())
    }

    /// The track of the per-CPU counters (thread `CPU counters` of the
    /// pseudo-process `kernel CPUs`), named on first use; returns its koid.
    fn cpu_counter_track<W: Write>(&mut self, out: &mut FxtStream<W>) -> Result<u32, OutputError> {
        let tid = CPUS_PROCESS_KOID + 1;
        if !self.processes.contains_key(&CPUS_PROCESS_KOID) {
            self.name_process(out, CPUS_PROCESS_KOID, "kernel CPUs")?;
        }
        if !self.threads.contains_key(&tid) {
            self.name_thread(out, tid, CPUS_PROCESS_KOID, "CPU counters")?;
        }
        Ok(tid)
    }

    /// At `ts`, `per_cpu` events had been lost on each CPU (`(cpu, lost)`),
    /// and `other` more that belong to no CPU (runs the kernel skipped,
    /// events beyond the oneshot budget): a counter `dropped_events` on the
    /// `kernel CPUs` track, an argument per CPU and `other`, from 0 at the
    /// recording's start to these numbers at `ts`.
    pub fn drops<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        per_cpu: &[(u32, u64)],
        other: u64,
    ) -> Result<(), OutputError> {
        let tid = self.cpu_counter_track(out)?;
        let names: Vec<String> = per_cpu.iter().map(|(cpu, _)| format!("cpu{cpu}")).collect();
        let mut args: Vec<(&str, ArgValue<'_>)> = names
            .iter()
            .zip(per_cpu)
            .map(|(name, &(_, n))| (name.as_str(), ArgValue::Uint64(n)))
            .collect();
        args.push(("other", ArgValue::Uint64(other)));
        // A sample of 0 where the recording started, so that Perfetto draws
        // a step rather than one lone point.
        let zeros: Vec<(&str, ArgValue<'_>)> = args
            .iter()
            .map(|(k, _)| (*k, ArgValue::Uint64(0)))
            .collect();
        self.event(
            out,
            self.start_ts.min(ts),
            "kernel",
            (CPUS_PROCESS_KOID, tid),
            "dropped_events",
            &zeros,
            EventKind::Counter { id: 0 },
        )?;
        self.event(
            out,
            ts,
            "kernel",
            (CPUS_PROCESS_KOID, tid),
            "dropped_events",
            &args,
            EventKind::Counter { id: 0 },
        )
    }

    /// Thread `tid` issued a block request to device `dev`.
    #[allow(clippy::too_many_arguments)]
    pub fn block_issue(
        &mut self,
        ts: u64,
        tid: u32,
        dev: u32,
        sector: u64,
        nr_sector: u32,
        bytes: i32,
        rwbs: &str,
    ) {
        self.block
            .entry((dev, sector))
            .or_default()
            .push_back(PendingBlock {
                ts,
                name: block_op(rwbs),
                sector,
                sectors: nr_sector,
                bytes: bytes as u32,
                rwbs: rwbs.to_owned(),
                issuer: tid,
            });
    }

    /// Device `dev` completed the request at `sector`; `error` 0 on success.
    pub fn block_complete<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        dev: u32,
        sector: u64,
        error: i32,
    ) -> Result<(), OutputError> {
        let Some(queue) = self.block.get_mut(&(dev, sector)) else {
            // Issued before the recording (or not followed).
            return Ok(());
        };
        let Some(p) = queue.pop_front() else {
            return Ok(());
        };
        if queue.is_empty() {
            self.block.remove(&(dev, sector));
        }
        self.write_block(out, dev, p, ts, Some(error))
    }

    /// Writes the block requests still in flight as durations that end
    /// where the recording ended, marked `unfinished`.
    pub fn finish_block<W: Write>(&mut self, out: &mut FxtStream<W>) -> Result<(), OutputError> {
        let mut left: Vec<(u32, PendingBlock)> = self
            .block
            .drain()
            .flat_map(|((dev, _), q)| q.into_iter().map(move |p| (dev, p)))
            .collect();
        left.sort_by_key(|(_, p)| p.ts);
        let end = self.end_ts();
        for (dev, p) in left {
            let at = end.max(p.ts);
            self.write_block(out, dev, p, at, None)?;
        }
        Ok(())
    }

    /// Writes one block request, issued at `p.ts` and completed at `end`
    /// (with `error`; `None`: unfinished), as a complete duration on the
    /// first of its device's tracks that is free since it was issued.
    fn write_block<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        dev: u32,
        p: PendingBlock,
        end: u64,
        error: Option<i32>,
    ) -> Result<(), OutputError> {
        if !self.processes.contains_key(&BLOCK_PROCESS_KOID) {
            self.name_process(out, BLOCK_PROCESS_KOID, "kernel block I/O")?;
        }
        let device = self
            .block_devices
            .entry(dev)
            .or_insert_with(|| BlockDevice {
                name: block_device_name(dev),
                lanes: Vec::new(),
            });
        let name = device.name.clone();
        let lane = match device.lanes.iter().position(|&(_, last)| last <= p.ts) {
            Some(i) => {
                device.lanes[i].1 = end;
                device.lanes[i].0
            }
            None => {
                let koid = self.next_block_koid;
                self.next_block_koid = self.next_block_koid.saturating_add(1).min(0x7FFE_FFFF);
                device.lanes.push((koid, end));
                let label = match device.lanes.len() {
                    1 => name.clone(),
                    n => format!("{name} ({n})"),
                };
                self.name_thread(out, koid, BLOCK_PROCESS_KOID, &label)?;
                koid
            }
        };
        let number = format!("{}:{}", dev >> 20, dev & 0xF_FFFF);
        let mut args = vec![
            ("device", ArgValue::String(StringRef::inline(&name))),
            ("dev", ArgValue::String(StringRef::inline(&number))),
            ("sector", ArgValue::Uint64(p.sector)),
            ("sectors", ArgValue::Uint32(p.sectors)),
            ("bytes", ArgValue::Uint32(p.bytes)),
            ("rwbs", ArgValue::String(StringRef::inline(&p.rwbs))),
            ("issuer", ArgValue::Koid(u64::from(p.issuer))),
        ];
        match error {
            Some(e) => args.push(("error", ArgValue::Int32(e))),
            None => args.push(("unfinished", ArgValue::Bool(true))),
        }
        self.counts.block_requests += 1;
        self.event(
            out,
            p.ts,
            trace_common::category::KERNEL_BLOCK,
            (BLOCK_PROCESS_KOID, lane),
            p.name,
            &args,
            EventKind::DurationComplete { end_ts: end },
        )
    }

    /// Thread `tid` of `tgid` exited; `group_dead` when it was the last one.
    #[allow(clippy::too_many_arguments)]
    pub fn exit<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        tid: u32,
        tgid: u32,
        comm: &str,
        group_dead: Option<bool>,
    ) -> Result<(), OutputError> {
        if let Some(call) = self.calls.remove(&tid).and_then(|c| c.call) {
            // `exit` or `exit_group`: the call ends with the thread.
            self.write_syscall(out, tid, call, CallEnd::Exited { ts })?;
        }
        // Its id may be given to a new thread.
        self.at_start.remove(&tid);
        self.created.remove(&tid);
        self.first_seen.remove(&tid);
        self.name_thread(out, tid, tgid, comm)?;
        let mut args = Vec::new();
        if let Some(g) = group_dead {
            args.push(("process_exit", ArgValue::Bool(g)));
        }
        self.proc_instant(out, ts, tgid, tid, "exit", &args)
    }

    /// Thread `tid` of `tgid` renamed itself from `old` to `new`.
    #[allow(clippy::too_many_arguments)]
    pub fn rename<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        tid: u32,
        tgid: u32,
        old: &str,
        new: &str,
    ) -> Result<(), OutputError> {
        if tid == tgid {
            self.name_process(out, tgid, new)?;
        }
        self.name_thread(out, tid, tgid, new)?;
        self.proc_instant(
            out,
            ts,
            tgid,
            tid,
            "rename",
            &[
                ("old_name", ArgValue::String(StringRef::inline(old))),
                ("new_name", ArgValue::String(StringRef::inline(new))),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_common::fxt::read::{Reader, TraceState};

    fn records(bytes: &[u8]) -> (TraceState, Vec<Record<'static>>) {
        let mut st = TraceState::new();
        let mut v = Vec::new();
        for r in Reader::new(bytes) {
            let (_, r) = r.expect("valid record");
            st.apply(&r);
            v.push(r.into_owned());
        }
        (st, v)
    }

    #[test]
    fn state_mapping() {
        assert_eq!(thread_state(0), ThreadState::Running);
        assert_eq!(thread_state(0x100), ThreadState::Running);
        assert_eq!(thread_state(1), ThreadState::Blocked);
        assert_eq!(thread_state(2), ThreadState::Blocked);
        assert_eq!(thread_state(4), ThreadState::Suspended);
        assert_eq!(thread_state(8), ThreadState::Suspended);
        assert_eq!(thread_state(0x10), ThreadState::Dead);
        assert_eq!(thread_state(0x20), ThreadState::Dying);
        assert_eq!(thread_state(0x80), ThreadState::Blocked);
    }

    #[test]
    fn idle_gets_idle_weight() {
        assert_eq!(weight(0, 120), i32::MIN);
        assert_eq!(weight(5, 120), 120);
    }

    #[test]
    fn comm_stops_at_nul() {
        assert_eq!(comm_str(b"abc\0def\0\0\0\0\0\0\0\0\0"), "abc");
        assert_eq!(comm_str(b"0123456789abcdef"), "0123456789abcdef");
    }

    /// A syscall event of a stream: tid, name, kind, (argument, value).
    type SyscallEvent = (u64, String, EventKind, Vec<(String, String)>);

    fn syscall_events(bytes: &[u8]) -> Vec<SyscallEvent> {
        let (_, recs) = records(bytes);
        let mut st = TraceState::new();
        let mut out = Vec::new();
        for r in recs {
            st.apply(&r);
            if let Record::Event {
                thread,
                category,
                name,
                args,
                kind,
                ..
            } = &r
                && st.string(category) == Some("kernel:syscall")
            {
                let (_, tid) = st.thread(*thread).unwrap();
                let args = args
                    .iter()
                    .map(|a| {
                        (
                            st.string(&a.name).unwrap().to_owned(),
                            format!("{:?}", a.value),
                        )
                    })
                    .collect();
                out.push((tid, st.string(name).unwrap().to_owned(), *kind, args));
            }
        }
        out
    }

    #[test]
    fn system_calls_pair_into_durations() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        t.set_start(500);
        let getpid = libc::SYS_getpid;
        let write = libc::SYS_write;
        let read = libc::SYS_read;
        let exit_group = libc::SYS_exit_group;
        // Ids /proc does not know, so nothing is looked up there.
        let (pid, a, b) = (4_000_000_u32, 4_000_001_u32, 4_000_002_u32);
        t.sys_enter(&mut out, 1000, a, pid, getpid, [0; 6]).unwrap();
        t.sys_exit(&mut out, 1100, a, pid, getpid, 4_000_000)
            .unwrap();
        // A read that began before the recording returns.
        t.sys_exit(&mut out, 1200, b, pid, read, 3).unwrap();
        // A write whose return was lost, then another call.
        t.sys_enter(&mut out, 1300, a, pid, write, [1, 0x1000, 5, 0, 0, 0])
            .unwrap();
        t.sys_enter(&mut out, 1400, a, pid, getpid, [0; 6]).unwrap();
        t.sys_exit(&mut out, 1500, a, pid, getpid, 4_000_000)
            .unwrap();
        // exit_group never returns: the thread's exit ends it.
        t.sys_enter(&mut out, 1600, b, pid, exit_group, [0; 6])
            .unwrap();
        t.exit(&mut out, 1700, b, pid, "worker", Some(true))
            .unwrap();
        // Still inside a call when the recording ends.
        t.sys_enter(&mut out, 1800, a, pid, write, [2, 0x2000, 7, 0, 0, 0])
            .unwrap();
        t.set_stop(1_900);
        t.finish_syscalls(&mut out).unwrap();
        assert_eq!(t.counts().syscalls, 6);
        let bytes = out.finish().unwrap();
        let ev = syscall_events(&bytes);
        let summary: Vec<_> = ev
            .iter()
            .map(|(tid, name, kind, _)| (*tid, name.as_str(), *kind))
            .collect();
        let (a, b) = (u64::from(a), u64::from(b));
        assert_eq!(
            summary,
            [
                (a, "getpid", EventKind::DurationComplete { end_ts: 1100 }),
                (b, "read", EventKind::DurationComplete { end_ts: 1200 }),
                (a, "write", EventKind::DurationComplete { end_ts: 1400 }),
                (a, "getpid", EventKind::DurationComplete { end_ts: 1500 }),
                (
                    b,
                    "exit_group",
                    EventKind::DurationComplete { end_ts: 1700 }
                ),
                (a, "write", EventKind::DurationComplete { end_ts: 1_900 }),
            ]
        );
        let arg = |i: usize, k: &str| ev[i].3.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(arg(0, "ret").as_deref(), Some("Int64(4000000)"));
        assert_eq!(arg(0, "nr"), Some(format!("Int64({getpid})")));
        assert_eq!(
            arg(1, "began_before_recording").as_deref(),
            Some("Bool(true)")
        );
        assert_eq!(arg(2, "arg2").as_deref(), Some("Uint64(5)"));
        assert_eq!(arg(2, "ret"), None);
        assert_eq!(arg(2, "return_lost").as_deref(), Some("Bool(true)"));
        assert_eq!(arg(4, "ret"), None);
        assert_eq!(arg(5, "arg0").as_deref(), Some("Uint64(2)"));
    }

    #[test]
    fn interrupts_become_durations_on_per_cpu_tracks() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        // CPU 1: a softirq interrupted by a hard IRQ.
        t.softirq(&mut out, 100, 1, 1, false).unwrap();
        t.irq_entry(&mut out, 110, 1, 36, "virtio1-req.0").unwrap();
        t.irq_exit(&mut out, 120, 1, 36, 1).unwrap();
        t.softirq(&mut out, 150, 1, 1, true).unwrap();
        // CPU 0: an exit without its entry (left out), then a handler
        // still running at the end.
        t.irq_exit(&mut out, 200, 0, 5, 1).unwrap();
        t.softirq(&mut out, 210, 0, 9, true).unwrap();
        t.irq_entry(&mut out, 300, 0, 7, "").unwrap();
        t.set_stop(400);
        t.finish_irqs(&mut out).unwrap();
        assert_eq!(t.counts().interrupts, 3);
        let bytes = out.finish().unwrap();
        let (st, recs) = records(&bytes);
        let mut events = Vec::new();
        let mut names = HashMap::new();
        for r in &recs {
            match r {
                Record::Event {
                    ts,
                    thread,
                    name,
                    kind,
                    ..
                } => {
                    let (p, tid) = st.thread(*thread).unwrap();
                    assert_eq!(p, u64::from(IRQ_PROCESS_KOID));
                    events.push((*ts, tid, st.string(name).unwrap().to_owned(), *kind));
                }
                Record::KernelObject { koid, name, .. } => {
                    names.insert(*koid, st.string(name).unwrap().to_owned());
                }
                _ => {}
            }
        }
        let cpu1 = u64::from(irq_thread_koid(1));
        let cpu0 = u64::from(irq_thread_koid(0));
        assert_eq!(
            events,
            [
                (
                    110,
                    cpu1,
                    "virtio1-req.0".to_owned(),
                    EventKind::DurationComplete { end_ts: 120 }
                ),
                (
                    100,
                    cpu1,
                    "softirq TIMER".to_owned(),
                    EventKind::DurationComplete { end_ts: 150 }
                ),
                (
                    300,
                    cpu0,
                    "irq 7".to_owned(),
                    EventKind::DurationComplete { end_ts: 400 }
                ),
            ]
        );
        assert_eq!(names[&cpu1], "CPU 1 interrupts");
        assert_eq!(names[&cpu0], "CPU 0 interrupts");
        assert_eq!(names[&u64::from(IRQ_PROCESS_KOID)], "kernel interrupts");
        assert!(cpu0 > 4_194_304 && cpu1 < i32::MAX as u64);
    }

    /// An event of a stream: (ts, process, thread, name, kind).
    type Ev = (u64, u64, u64, String, EventKind);

    /// The events of a stream: (ts, process, thread, name, kind), and the
    /// thread names by koid.
    fn events_and_names(bytes: &[u8]) -> (Vec<Ev>, HashMap<u64, String>) {
        let mut st = TraceState::new();
        let mut ev = Vec::new();
        let mut names = HashMap::new();
        for r in Reader::new(bytes) {
            let (_, r) = r.unwrap();
            st.apply(&r);
            match &r {
                Record::Event {
                    ts,
                    name,
                    kind,
                    thread,
                    ..
                } => {
                    let (p, t) = st.thread(*thread).unwrap();
                    ev.push((*ts, p, t, st.string(name).unwrap().to_owned(), *kind));
                }
                Record::KernelObject {
                    koid,
                    obj_type: o,
                    name,
                    ..
                } if *o == obj_type::THREAD => {
                    names.insert(*koid, st.string(name).unwrap().to_owned());
                }
                _ => {}
            }
        }
        (ev, names)
    }

    #[test]
    fn block_requests_pair_by_device_and_sector_on_lanes_per_device() {
        assert_eq!(block_op("R"), "read");
        assert_eq!(block_op("RA"), "read");
        assert_eq!(block_op("WS"), "write");
        assert_eq!(block_op("FWS"), "write");
        assert_eq!(block_op("FF"), "flush");
        assert_eq!(block_op("D"), "discard");
        assert_eq!(block_op(""), "block I/O");
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        // A device number no machine has: named by its numbers.
        let dev = (4000 << 20) | 16;
        // Completed before it was seen issued: left out.
        t.block_complete(&mut out, 50, dev, 8, 0).unwrap();
        // Two requests at the same sector complete in order; they overlap,
        // so they go on two tracks of the device.
        t.block_issue(100, 42, dev, 8, 8, 4096, "W");
        t.block_issue(110, 43, dev, 8, 8, 4096, "R");
        t.block_complete(&mut out, 200, dev, 8, 0).unwrap();
        t.block_complete(&mut out, 210, dev, 8, -5).unwrap();
        // A later one fits on the first track again.
        t.block_issue(300, 42, dev, 16, 8, 4096, "W");
        t.block_complete(&mut out, 320, dev, 16, 0).unwrap();
        // Still in flight when the recording stops: ends there.
        t.block_issue(400, 42, dev, 24, 8, 4096, "FF");
        t.set_stop(500);
        t.finish_block(&mut out).unwrap();
        assert_eq!(t.counts().block_requests, 4);
        let bytes = out.finish().unwrap();
        let (ev, names) = events_and_names(&bytes);
        let p = u64::from(BLOCK_PROCESS_KOID);
        let (a, b) = (p + 1, p + 2);
        assert_eq!(names[&a], "4000:16");
        assert_eq!(names[&b], "4000:16 (2)");
        // Complete durations, never async events (Perfetto keys those by id
        // alone, across every process, and files them at the top level).
        assert_eq!(
            ev,
            [
                (
                    100,
                    p,
                    a,
                    "write".to_owned(),
                    EventKind::DurationComplete { end_ts: 200 }
                ),
                (
                    110,
                    p,
                    b,
                    "read".to_owned(),
                    EventKind::DurationComplete { end_ts: 210 }
                ),
                (
                    300,
                    p,
                    a,
                    "write".to_owned(),
                    EventKind::DurationComplete { end_ts: 320 }
                ),
                (
                    400,
                    p,
                    a,
                    "flush".to_owned(),
                    EventKind::DurationComplete { end_ts: 500 }
                ),
            ]
        );
    }

    #[test]
    fn a_switch_the_kernel_did_not_record_is_inferred_from_the_next_event_on_that_cpu() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        // CPU 0 switches from idle to thread 69, which the kernel keeps out
        // of tracing (or whose switch-out was lost): the next event on CPU
        // 0 comes from the idle task.
        t.current_task(&mut out, 100, 0, 0, 0).unwrap();
        t.context_switch(
            &mut out,
            100,
            0,
            0,
            0,
            120,
            0,
            "swapper/0",
            69,
            110,
            "hidden",
        )
        .unwrap();
        t.current_task(&mut out, 400, 0, 0, 0).unwrap();
        t.cpu_power(&mut out, 400, 0, false, 1).unwrap();
        t.current_task(&mut out, 900, 0, 0, 0).unwrap();
        t.context_switch(
            &mut out,
            900,
            0,
            0,
            0,
            120,
            0,
            "swapper/0",
            11,
            120,
            "worker",
        )
        .unwrap();
        assert_eq!(t.counts().inferred_switches, 1);
        let bytes = out.finish().unwrap();
        let (st, recs) = records(&bytes);
        let _ = st;
        let mut switches = Vec::new();
        let mut st = TraceState::new();
        for r in &recs {
            st.apply(r);
            match r {
                Record::LegacyContextSwitch {
                    ts,
                    outgoing_thread,
                    incoming_thread,
                    ..
                } => switches.push((
                    *ts,
                    st.thread(*outgoing_thread).unwrap().1,
                    st.thread(*incoming_thread).unwrap().1,
                    false,
                )),
                Record::ContextSwitch {
                    ts,
                    outgoing_tid,
                    incoming_tid,
                    args,
                    ..
                } => switches.push((
                    *ts,
                    *outgoing_tid,
                    *incoming_tid,
                    st.arg(args, "inferred") == Some(&ArgValue::Bool(true)),
                )),
                _ => {}
            }
        }
        assert_eq!(
            switches,
            [(100, 0, 69, false), (400, 69, 0, true), (900, 0, 11, false)]
        );
        // Every switch out is of the thread switched in before it.
        for w in switches.windows(2) {
            assert_eq!(w[0].2, w[1].1, "{switches:?}");
        }
    }

    #[test]
    fn a_thread_switched_in_on_another_cpu_leaves_the_first_one() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        t.context_switch(
            &mut out,
            100,
            0,
            0,
            0,
            120,
            0,
            "swapper/0",
            69,
            110,
            "hidden",
        )
        .unwrap();
        t.context_switch(
            &mut out,
            200,
            1,
            0,
            0,
            120,
            0,
            "swapper/1",
            69,
            110,
            "hidden",
        )
        .unwrap();
        assert_eq!(t.counts().inferred_switches, 1);
        assert_eq!(t.running_on.get(&69), Some(&1));
        assert_eq!(t.cpu_current[0].map(|c| c.tid), Some(0));
    }

    #[test]
    fn wakeups_of_running_threads_are_left_out_and_idle_wakers_are_interrupts() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        t.context_switch(
            &mut out,
            100,
            0,
            0,
            0,
            120,
            0,
            "swapper/0",
            42,
            120,
            "runner",
        )
        .unwrap();
        // Woken while still running (before it got to sleep): nothing
        // changes, nothing is written.
        t.wakeup(&mut out, 150, 0, 42, 120, "runner", 7, 1).unwrap();
        // Woken by an interrupt taken while CPU 1 was idle (waker 0).
        t.wakeup(&mut out, 160, 0, 43, 120, "sleeper", 0, 1)
            .unwrap();
        assert_eq!(t.counts().wakeups, 1);
        assert_eq!(t.counts().running_wakeups, 1);
        let bytes = out.finish().unwrap();
        let (st, recs) = records(&bytes);
        let wakers: Vec<u64> = recs
            .iter()
            .filter_map(|r| match r {
                Record::ThreadWakeup { tid, args, .. } => {
                    assert_eq!(*tid, 43);
                    match st.arg(args, "waker") {
                        Some(ArgValue::Koid(k)) => Some(*k),
                        _ => None,
                    }
                }
                _ => None,
            })
            .collect();
        assert_eq!(wakers, [u64::from(irq_thread_koid(1))]);
        let (_, names) = events_and_names(&bytes);
        assert_eq!(names[&u64::from(irq_thread_koid(1))], "CPU 1 interrupts");
    }

    #[test]
    fn sigreturn_returns_from_its_own_call_and_clone_children_start_when_created() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        t.set_start(1_000);
        let sigreturn = i64::from(syscalls::Sysno::rt_sigreturn.id());
        let clone = i64::from(syscalls::Sysno::clone.id());
        // `rt_sigreturn` returns with call number -1.
        t.sys_enter(&mut out, 2_000, 50, 50, sigreturn, [0; 6])
            .unwrap();
        t.sys_exit(&mut out, 2_100, 50, 50, -1, 0).unwrap();
        // A return of nothing known at all: nothing is drawn.
        t.sys_exit(&mut out, 2_200, 50, 50, -1, 0).unwrap();
        // A thread created during the recording returns from clone without
        // having entered it: the call spans from its creation.
        t.new_task(&mut out, 3_000, 50, 50, 51, 50, "child", 0x10000)
            .unwrap();
        t.current_task(&mut out, 3_500, 1, 51, 50).unwrap();
        t.sys_exit(&mut out, 3_500, 51, 50, clone, 0).unwrap();
        // One that existed when the recording started spans from the start.
        t.sys_exit(&mut out, 4_000, 52, 50, clone, 0).unwrap();
        let bytes = out.finish().unwrap();
        let mut calls: Vec<(u64, u64, String, EventKind)> = Vec::new();
        for (ts, _, tid, name, kind) in events_and_names(&bytes).0 {
            if name != "thread_create" {
                calls.push((ts, tid, name, kind));
            }
        }
        assert_eq!(
            calls,
            [
                (
                    2_000,
                    50,
                    "rt_sigreturn".to_owned(),
                    EventKind::DurationComplete { end_ts: 2_100 }
                ),
                (
                    3_000,
                    51,
                    "clone".to_owned(),
                    EventKind::DurationComplete { end_ts: 3_500 }
                ),
                (
                    4_000,
                    52,
                    "clone".to_owned(),
                    EventKind::DurationComplete { end_ts: 4_000 }
                ),
            ]
        );
    }

    #[test]
    fn a_stop_cuts_every_category_at_one_instant() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        let read = i64::from(syscalls::Sysno::read.id());
        t.sys_enter(&mut out, 100, 50, 50, read, [0; 6]).unwrap();
        t.irq_entry(&mut out, 150, 0, 5, "eth0").unwrap();
        t.probe(&mut out, 160, 50, 50, 0, false).unwrap();
        t.block_issue(170, 50, (8 << 20) | 1, 0, 8, 4096, "R");
        t.set_stop(200);
        assert!(t.wants(200));
        assert!(!t.wants(201));
        t.finish_syscalls(&mut out).unwrap();
        t.finish_irqs(&mut out).unwrap();
        t.finish_probes(&mut out).unwrap();
        t.finish_block(&mut out).unwrap();
        let bytes = out.finish().unwrap();
        let (ev, _) = events_and_names(&bytes);
        assert_eq!(ev.len(), 4, "{ev:?}");
        // Whatever was still running ends at the stop, complete (a begin
        // that never ends is drawn as "did not end").
        for (_, _, _, name, kind) in &ev {
            assert_eq!(*kind, EventKind::DurationComplete { end_ts: 200 }, "{name}");
        }
    }

    #[test]
    fn resident_set_changes_go_to_the_owning_process() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        let (a, b) = (4_000_010_u32, 4_000_020_u32);
        // Seen from another process before its own: no owner yet, left out.
        t.rss_stat(&mut out, 10, b, false, 77, 1, 4096).unwrap();
        t.rss_stat(&mut out, 20, a, true, 77, 1, 8192).unwrap();
        // Now known: b's reclaim of a's pages lands on a.
        t.rss_stat(&mut out, 30, b, false, 77, 0, 100).unwrap();
        // Unknown member: left out.
        t.rss_stat(&mut out, 40, a, true, 77, 9, 1).unwrap();
        t.page_fault(&mut out, 50, a + 1, a, 0x1000, 0x2000, 0x6)
            .unwrap();
        assert_eq!(t.counts().memory_events, 3);
        let bytes = out.finish().unwrap();
        let (st, recs) = records(&bytes);
        let mut ev = Vec::new();
        for r in &recs {
            if let Record::Event {
                ts,
                thread,
                name,
                args,
                kind,
                ..
            } = r
            {
                let (p, _) = st.thread(*thread).unwrap();
                let args: Vec<String> = args
                    .iter()
                    .map(|x| format!("{}={:?}", st.string(&x.name).unwrap(), x.value))
                    .collect();
                ev.push((*ts, p, st.string(name).unwrap().to_owned(), *kind, args));
            }
        }
        let a = u64::from(a);
        assert_eq!(ev[0].0, 20);
        assert_eq!(ev[0].1, a);
        assert_eq!(ev[0].3, EventKind::Counter { id: 0 });
        assert_eq!(ev[0].4, ["anon=Int64(8192)"]);
        assert_eq!((ev[1].0, ev[1].1), (30, a));
        assert_eq!(ev[1].4, ["file=Int64(100)"]);
        assert_eq!(
            (ev[2].2.as_str(), ev[2].3),
            ("page_fault", EventKind::Instant)
        );
        assert_eq!(ev[2].4[0], "address=Pointer(4096)");
        if cfg!(target_arch = "x86_64") {
            assert!(
                ev[2]
                    .4
                    .iter()
                    .any(|x| x.starts_with("access=") && x.contains("write"))
            );
            assert!(ev[2].4.contains(&"present=Bool(false)".to_owned()));
        }
    }

    #[test]
    fn cpu_idle_and_frequency_are_counters_per_cpu() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        t.cpu_power(&mut out, 10, 1, false, 2).unwrap();
        t.cpu_power(&mut out, 20, 1, false, trace_common::kernel::IDLE_EXIT)
            .unwrap();
        t.cpu_power(&mut out, 30, 0, true, 2_400_000).unwrap();
        assert_eq!(t.counts().cpu_counters, 3);
        let bytes = out.finish().unwrap();
        let (st, recs) = records(&bytes);
        let ev: Vec<_> = recs
            .iter()
            .filter_map(|r| match r {
                Record::Event {
                    ts,
                    name,
                    args,
                    kind: EventKind::Counter { .. },
                    ..
                } => Some((
                    *ts,
                    st.string(name).unwrap().to_owned(),
                    st.string(&args[0].name).unwrap().to_owned(),
                    args[0].value.clone().into_owned(),
                )),
                _ => None,
            })
            .collect();
        assert_eq!(
            ev,
            [
                (10, "cpu_idle".into(), "cpu1".into(), ArgValue::Int64(2)),
                (20, "cpu_idle".into(), "cpu1".into(), ArgValue::Int64(-1)),
                (
                    30,
                    "cpu_frequency".into(),
                    "cpu0".into(),
                    ArgValue::Int64(2_400_000)
                ),
            ]
        );
    }

    #[test]
    fn probe_hits_pair_as_a_stack_per_thread() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        t.set_probe_names(vec!["f".into(), "g".into()]);
        let (pid, tid) = (4_000_030_u32, 4_000_031_u32);
        // A return whose entry came before the recording: left out.
        t.probe(&mut out, 5, tid, pid, 0, true).unwrap();
        // f → f → g, returns in reverse.
        t.probe(&mut out, 10, tid, pid, 0, false).unwrap();
        t.probe(&mut out, 20, tid, pid, 0, false).unwrap();
        t.probe(&mut out, 30, tid, pid, 1, false).unwrap();
        t.probe(&mut out, 40, tid, pid, 1, true).unwrap();
        t.probe(&mut out, 50, tid, pid, 0, true).unwrap();
        t.probe(&mut out, 60, tid, pid, 0, true).unwrap();
        // Still inside f at the end.
        t.probe(&mut out, 70, tid, pid, 0, false).unwrap();
        t.set_stop(90);
        t.finish_probes(&mut out).unwrap();
        assert_eq!(t.counts().probes, 4);
        let bytes = out.finish().unwrap();
        let (st, recs) = records(&bytes);
        let ev: Vec<_> = recs
            .iter()
            .filter_map(|r| match r {
                Record::Event { ts, name, kind, .. } => {
                    Some((*ts, st.string(name).unwrap().to_owned(), *kind))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            ev,
            [
                (30, "g".into(), EventKind::DurationComplete { end_ts: 40 }),
                (20, "f".into(), EventKind::DurationComplete { end_ts: 50 }),
                (10, "f".into(), EventKind::DurationComplete { end_ts: 60 }),
                (70, "f".into(), EventKind::DurationComplete { end_ts: 90 }),
            ]
        );
    }

    #[test]
    fn switch_names_threads_and_writes_weights() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::new();
        // prev 4242 of group 4240 ("worker"); next is the idle task.
        t.context_switch(
            &mut out,
            1000,
            1,
            4242,
            4240,
            120,
            1,
            "worker",
            0,
            120,
            "swapper/1",
        )
        .unwrap();
        // The same thread again: no second name record.
        t.context_switch(
            &mut out,
            2000,
            1,
            4242,
            4240,
            120,
            0,
            "worker",
            0,
            120,
            "swapper/1",
        )
        .unwrap();
        let bytes = out.finish().unwrap();
        let (st, recs) = records(&bytes);
        let names: Vec<_> = recs
            .iter()
            .filter_map(|r| match r {
                Record::KernelObject {
                    koid,
                    obj_type,
                    name,
                    args,
                } => Some((
                    *koid,
                    *obj_type,
                    st.string(name).map(str::to_owned),
                    args.len(),
                )),
                _ => None,
            })
            .collect();
        assert!(names.contains(&(4242, obj_type::THREAD, Some("worker".into()), 1)));
        assert!(
            names
                .iter()
                .any(|n| n.0 == 4240 && n.1 == obj_type::PROCESS)
        );
        assert_eq!(names.iter().filter(|n| n.0 == 4242).count(), 1);
        // Compact switches: threads by table reference, idle as priority 0.
        let switches: Vec<_> = recs
            .iter()
            .filter_map(|r| match r {
                Record::LegacyContextSwitch {
                    ts,
                    cpu,
                    outgoing_state,
                    outgoing_thread,
                    incoming_thread,
                    outgoing_priority,
                    incoming_priority,
                } => Some((
                    *ts,
                    *cpu,
                    *outgoing_state,
                    *outgoing_thread,
                    *incoming_thread,
                    (*outgoing_priority, *incoming_priority),
                )),
                _ => None,
            })
            .collect();
        assert_eq!(switches.len(), 2);
        assert_eq!((switches[0].0, switches[0].1), (1000, 1));
        assert_eq!(switches[0].2, ThreadState::Blocked as u8);
        assert_eq!(switches[1].2, ThreadState::Running as u8);
        assert_eq!(st.thread(switches[0].3), Some((4240, 4242)));
        assert_eq!(st.thread(switches[0].4), Some((0, 0)));
        assert_eq!(switches[0].5, (120, 0));
        // The second switch reuses both entries: two thread records in all.
        assert_eq!(
            (switches[1].3, switches[1].4),
            (switches[0].3, switches[0].4)
        );
        let thread_records = recs
            .iter()
            .filter(|r| matches!(r, Record::Thread { .. }))
            .count();
        assert_eq!(thread_records, 2);
    }

    #[test]
    fn a_switch_that_does_not_fit_the_compact_form_carries_weights() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::new();
        // The incoming thread's process is unknown (no such thread in
        // /proc: above any pid), and a CPU above 255.
        let ghost = 4_194_305;
        t.context_switch(&mut out, 1000, 1, 4242, 4240, 120, 1, "w", ghost, 100, "x")
            .unwrap();
        t.context_switch(&mut out, 2000, 300, 4242, 4240, 120, 1, "w", 0, 120, "i")
            .unwrap();
        let bytes = out.finish().unwrap();
        let (st, recs) = records(&bytes);
        let switches: Vec<_> = recs
            .iter()
            .filter_map(|r| match r {
                Record::ContextSwitch {
                    cpu,
                    outgoing_tid,
                    incoming_tid,
                    args,
                    ..
                } => Some((*cpu, *outgoing_tid, *incoming_tid, args.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(switches.len(), 2);
        assert_eq!((switches[0].1, switches[0].2), (4242, u64::from(ghost)));
        assert_eq!(switches[1].0, 300);
        let args = &switches[1].3;
        assert_eq!(st.string(&args[0].name), Some("incoming_weight"));
        assert_eq!(args[0].value, ArgValue::Int32(i32::MIN));
        assert_eq!(st.string(&args[1].name), Some("outgoing_weight"));
        assert_eq!(args[1].value, ArgValue::Int32(120));
    }

    #[test]
    fn the_thread_table_never_replaces_the_entry_a_record_holds() {
        let mut table = ThreadTable::default();
        for tid in 1..=255 {
            table.index(1, tid, None);
        }
        // Every entry used since the last sweep, the hand on entry 1: a
        // newcomer would sweep a full lap and take entry 1, which the other
        // thread of the same record holds.
        let (held, _) = table.index(1, 1, None);
        assert_eq!(held, 1);
        let (i, new) = table.index(1, 9999, Some(held));
        assert!(new);
        assert_ne!(i, held);
        assert_eq!(table.index(1, 1, None), (held, false));
    }

    #[test]
    fn the_thread_table_keeps_the_threads_in_use() {
        let mut table = ThreadTable::default();
        // 255 threads fill the table; each gets its own index once.
        let mut seen = std::collections::HashSet::new();
        for tid in 1..=255 {
            let (i, new) = table.index(1, tid, None);
            assert!(new && i >= 1 && seen.insert(i));
        }
        assert!(!table.index(1, 7, None).1, "a known thread keeps its entry");
        // A newcomer evicts an entry; thread 7, used since the sweep, is
        // passed over once and stays.
        for tid in 1000..1100 {
            let (i, new) = table.index(1, tid, None);
            assert!(new && i >= 1);
            let (_, again) = table.index(1, 7, None);
            assert!(!again, "the thread in use lost its entry");
        }
    }

    #[test]
    fn fork_exec_exit_are_instants_on_the_right_threads() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::new();
        t.new_task(&mut out, 10, 100, 100, 200, 200, "sh", 0x11)
            .unwrap();
        t.new_task(&mut out, 11, 200, 200, 201, 200, "sh", 0x10000)
            .unwrap();
        t.exec(&mut out, 20, 200, 200, 200, "/bin/true", "true")
            .unwrap();
        t.rename(&mut out, 25, 201, 200, "sh", "helper").unwrap();
        t.exit(&mut out, 30, 200, 200, "true", Some(true)).unwrap();
        let bytes = out.finish().unwrap();
        let (st, recs) = records(&bytes);
        let instants: Vec<_> = recs
            .iter()
            .filter_map(|r| match r {
                Record::Event {
                    ts, thread, name, ..
                } => Some((
                    *ts,
                    st.thread(*thread).unwrap(),
                    st.string(name).unwrap().to_owned(),
                )),
                _ => None,
            })
            .collect();
        assert_eq!(
            instants,
            vec![
                (10, (100, 100), "fork".to_owned()),
                (11, (200, 200), "thread_create".to_owned()),
                (20, (200, 200), "exec".to_owned()),
                (25, (200, 201), "rename".to_owned()),
                (30, (200, 200), "exit".to_owned()),
            ]
        );
        // The process was renamed by exec, and thread 201 by its rename.
        let last_name = |koid: u64, ty: u8| {
            recs.iter()
                .rev()
                .find_map(|r| match r {
                    Record::KernelObject {
                        koid: k,
                        obj_type: o,
                        name,
                        ..
                    } if *k == koid && *o == ty => st.string(name).map(str::to_owned),
                    _ => None,
                })
                .unwrap()
        };
        assert_eq!(last_name(200, obj_type::PROCESS), "true");
        assert_eq!(last_name(201, obj_type::THREAD), "helper");
    }
}
