//! What happened during the target's time, gathered in one read: every
//! thread's switches and wake-ups (and its state as the window opens),
//! each CPU's switches, system calls, userspace durations, block
//! requests, interrupts, lock waits and off-CPU stacks that overlap it.

use std::io::Read;

use foldhash::HashMap;
use trace_common::category::{KERNEL_IRQ, KERNEL_LOCK};

use super::Found;
use crate::event::{Event, OutState, Value};
use crate::kernel::BlockRequest;
use crate::reader::{Context, ReadStats, ReadTraceError, Wants, read_trace_wanting};

/// The pseudo-thread of CPU 0's interrupts (the recorder's per-CPU
/// interrupt tracks, which also name a wake-up from an idle CPU); CPU n's
/// is this plus n.
pub const CPU0_IRQ_KOID: u64 = 0x7FFF_0001;

/// The CPU whose interrupt track `tid` is, if it is one.
pub fn irq_cpu(tid: u64) -> Option<u32> {
    tid.checked_sub(CPU0_IRQ_KOID)
        .filter(|n| *n < 0xFFFF)
        .map(|n| n as u32)
}

/// A change of a thread's scheduling state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Change {
    /// Switched in on `cpu`.
    In {
        /// The CPU.
        cpu: u32,
    },
    /// Switched out of `cpu` in `state`.
    Out {
        /// The CPU.
        cpu: u32,
        /// Its state.
        state: OutState,
    },
    /// Woken by `waker`, to run on `cpu`.
    Wake {
        /// The CPU the record names (the woken thread's).
        cpu: u32,
        /// The thread that woke it, when written.
        waker: Option<u64>,
    },
}

/// A duration on a thread: a system call, a userspace span, a lock wait.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// Start, ns.
    pub ts: u64,
    /// End, ns.
    pub end: u64,
    /// Name.
    pub name: String,
    /// Nesting depth on its thread.
    pub depth: u32,
    /// For a `futex` call, its address; for a lock wait, what it waits on.
    pub detail: Option<String>,
}

/// A block request that overlaps the window.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// Issued, ns.
    pub ts: u64,
    /// Completed, ns.
    pub end: u64,
    /// The thread that issued it.
    pub issuer: Option<u64>,
    /// Its device.
    pub device: String,
    /// Its operation (`write`, `flush`, ...).
    pub op: String,
    /// Bytes.
    pub bytes: u64,
}

/// A stack a thread blocked with (an `off-cpu` sample).
#[derive(Clone, Debug, PartialEq)]
pub struct Blocked {
    /// When it blocked, ns.
    pub ts: u64,
    /// How long, ns.
    pub weight: u64,
    /// Frames, leaf first: name and whether it is the kernel's.
    pub frames: Vec<(String, bool)>,
}

/// One thread's changes.
#[derive(Clone, Debug, Default)]
pub struct ThreadChanges {
    /// The last change before the window, and when.
    pub before: Option<(u64, Change)>,
    /// The changes inside the window, in order of time.
    pub changes: Vec<(u64, Change)>,
}

/// One CPU's switches: the thread switched in before the window (when,
/// which), and those switched in during it, in order of time.
pub type CpuSwitches = (Option<(u64, u64)>, Vec<(u64, u64)>);

/// Which kinds of events the whole trace has, to say what is missing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Seen {
    /// Context switches.
    pub switches: u64,
    /// Wake-ups.
    pub wakeups: u64,
    /// Wake-ups that do not say their waker.
    pub wakeups_without_waker: u64,
    /// System calls.
    pub syscalls: u64,
    /// Block requests.
    pub blocks: u64,
    /// Interrupts.
    pub irqs: u64,
    /// Off-CPU stacks.
    pub offcpu: u64,
    /// Lock waits.
    pub locks: u64,
    /// Events lost.
    pub lost: u64,
    /// Preemptions by the idle task: a recording filtered by process,
    /// which writes the tasks outside it as idle.
    pub hidden_tasks: u64,
}

/// What happened during the window.
#[derive(Debug, Default)]
pub struct Window {
    /// From, ns.
    pub t0: u64,
    /// To, ns.
    pub t1: u64,
    /// Threads' switches and wake-ups.
    pub threads: HashMap<u64, ThreadChanges>,
    /// Each CPU's thread switched in before the window, and the threads
    /// switched in during it, in order of time.
    pub cpus: HashMap<u32, CpuSwitches>,
    /// System calls by thread, in order of start.
    pub syscalls: HashMap<u64, Vec<Span>>,
    /// Userspace durations by thread, in order of start.
    pub spans: HashMap<u64, Vec<Span>>,
    /// Lock waits by thread, in order of start.
    pub locks: HashMap<u64, Vec<Span>>,
    /// Interrupts by CPU, in order of start.
    pub irqs: HashMap<u32, Vec<Span>>,
    /// Block requests, in order of issue.
    pub blocks: Vec<Block>,
    /// Off-CPU stacks by thread, in order of time.
    pub offcpu: HashMap<u64, Vec<Blocked>>,
    /// Threads' names and processes at the end of the read.
    pub names: HashMap<u64, (u64, String)>,
    /// Processes' names.
    pub process_names: HashMap<u64, String>,
    /// What the trace has at all.
    pub seen: Seen,
    /// What the read saw.
    pub stats: ReadStats,
}

impl Window {
    fn overlaps(&self, ts: u64, end: u64) -> bool {
        ts <= self.t1 && end >= self.t0
    }

    fn change(&mut self, tid: u64, ts: u64, change: Change) {
        let (t0, t1) = (self.t0, self.t1);
        let t = self.threads.entry(tid).or_default();
        if ts < t0 {
            if t.before.is_none_or(|(b, _)| b <= ts) {
                t.before = Some((ts, change));
            }
        } else if ts <= t1 {
            t.changes.push((ts, change));
        }
    }

    fn switch_on(&mut self, cpu: u32, ts: u64, tid: u64) {
        let (t0, t1) = (self.t0, self.t1);
        let c = self.cpus.entry(cpu).or_default();
        if ts < t0 {
            if c.0.is_none_or(|(b, _)| b <= ts) {
                c.0 = Some((ts, tid));
            }
        } else if ts <= t1 {
            c.1.push((ts, tid));
        }
    }

    fn event(&mut self, e: &Event, cx: &Context, lock_cat: &mut Option<crate::Sym>) {
        match e {
            Event::Switch(s) => {
                self.seen.switches += 1;
                // The idle task never preempts a runnable thread: the
                // recording wrote a task outside its selection as idle.
                if s.next_tid == 0 && s.prev_tid != 0 && s.prev_state == OutState::Runnable {
                    self.seen.hidden_tasks += 1;
                }
                self.change(
                    s.prev_tid,
                    s.ts,
                    Change::Out {
                        cpu: s.cpu,
                        state: s.prev_state,
                    },
                );
                self.change(s.next_tid, s.ts, Change::In { cpu: s.cpu });
                self.switch_on(s.cpu, s.ts, s.next_tid);
            }
            Event::Wakeup(w) => {
                self.seen.wakeups += 1;
                if w.waker_tid.is_none() {
                    self.seen.wakeups_without_waker += 1;
                }
                self.change(
                    w.tid,
                    w.ts,
                    Change::Wake {
                        cpu: w.cpu,
                        waker: w.waker_tid,
                    },
                );
            }
            Event::Slice(s) => {
                let end = s.ts.saturating_add(s.dur);
                let kernel = &cx.kernel;
                if s.category == kernel.syscall {
                    self.seen.syscalls += 1;
                } else if s.category == kernel.block {
                    self.seen.blocks += 1;
                }
                let category = cx.strings.get(s.category);
                if category == KERNEL_IRQ {
                    self.seen.irqs += 1;
                }
                if lock_cat.is_none() && category == KERNEL_LOCK {
                    *lock_cat = Some(s.category);
                }
                if Some(s.category) == *lock_cat {
                    self.seen.locks += 1;
                }
                if !self.overlaps(s.ts, end) {
                    return;
                }
                let span = |detail: Option<String>| Span {
                    ts: s.ts,
                    end,
                    name: cx.strings.get(s.name).to_owned(),
                    depth: s.depth,
                    detail,
                };
                if s.category == kernel.syscall {
                    let name = cx.strings.get(s.name);
                    let detail = (name == "futex")
                        .then(|| arg_u64(&s.args, cx, "uaddr"))
                        .flatten()
                        .map(|a| format!("{a:#x}"));
                    let span = span(detail);
                    self.syscalls.entry(s.track.tid).or_default().push(span);
                } else if let Some(b) = BlockRequest::from_slice(s, cx) {
                    self.blocks.push(Block {
                        ts: s.ts,
                        end,
                        issuer: b.issuer,
                        device: b.device.to_owned(),
                        op: cx.strings.get(s.name).to_owned(),
                        bytes: b.bytes.unwrap_or(0),
                    });
                } else if category == KERNEL_IRQ {
                    if let Some(cpu) = irq_cpu(s.track.tid) {
                        self.irqs.entry(cpu).or_default().push(span(None));
                    }
                } else if Some(s.category) == *lock_cat {
                    let detail = arg_str(&s.args, cx, "lock");
                    self.locks
                        .entry(s.track.tid)
                        .or_default()
                        .push(span(detail));
                } else if !category.starts_with("kernel:") {
                    self.spans.entry(s.track.tid).or_default().push(span(None));
                }
            }
            Event::Sample(s) => {
                if cx.strings.get(s.timebase) != "off-cpu" {
                    return;
                }
                self.seen.offcpu += 1;
                let weight = s.weight.unwrap_or(0);
                if !self.overlaps(s.ts, s.ts.saturating_add(weight)) {
                    return;
                }
                let frames = s
                    .frames
                    .iter()
                    .map(|f| {
                        let mapping = cx.strings.get(f.mapping);
                        (
                            cx.strings.get(f.function).to_owned(),
                            mapping == "[kernel.kallsyms]",
                        )
                    })
                    .collect();
                self.offcpu.entry(s.tid).or_default().push(Blocked {
                    ts: s.ts,
                    weight,
                    frames,
                });
            }
            Event::Loss(l) => self.seen.lost += l.events.unwrap_or(0),
            _ => {}
        }
    }
}

/// The argument `name` of `args` as an unsigned number.
fn arg_u64(args: &crate::event::Args, cx: &Context, name: &str) -> Option<u64> {
    let sym = cx.strings.lookup(name)?;
    match crate::event::arg(args, sym)? {
        Value::Uint(v) | Value::Pointer(v) | Value::Koid(v) => Some(*v),
        Value::Int(v) => Some(*v as u64),
        _ => None,
    }
}

/// The argument `name` of `args` as text.
fn arg_str(args: &crate::event::Args, cx: &Context, name: &str) -> Option<String> {
    let sym = cx.strings.lookup(name)?;
    match crate::event::arg(args, sym)? {
        Value::Str(s) => Some(s.to_string()),
        Value::Uint(v) | Value::Pointer(v) => Some(format!("{v:#x}")),
        _ => None,
    }
}

/// Reads `input` for what happened during `target`.
pub(super) fn gather(input: impl Read, target: &Found) -> Result<Window, ReadTraceError> {
    let mut w = Window {
        t0: target.ts,
        t1: target.ts.saturating_add(target.dur),
        ..Window::default()
    };
    let mut lock_cat = None;
    let (stats, cx) = read_trace_wanting(
        input,
        &mut |e: &Event, cx: &Context| w.event(e, cx, &mut lock_cat),
        Wants::ALL,
    )?;
    for t in w.threads.values_mut() {
        t.changes.sort_by_key(|(ts, _)| *ts);
    }
    for c in w.cpus.values_mut() {
        c.1.sort_by_key(|(ts, _)| *ts);
    }
    for spans in w
        .syscalls
        .values_mut()
        .chain(w.spans.values_mut())
        .chain(w.locks.values_mut())
        .chain(w.irqs.values_mut())
    {
        spans.sort_by_key(|s| (s.ts, s.depth));
    }
    for s in w.offcpu.values_mut() {
        s.sort_by_key(|b| b.ts);
    }
    w.blocks.sort_by_key(|b| b.ts);
    for (tid, pid, name) in cx.threads() {
        w.names.insert(tid, (pid, name.to_owned()));
    }
    for (pid, name) in cx.processes() {
        w.process_names.insert(pid, name.to_owned());
    }
    w.stats = stats;
    Ok(w)
}
