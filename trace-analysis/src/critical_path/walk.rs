//! A thread's time over an interval, split into running, runnable and
//! blocked; each wait named by what it was in and followed to its waker's
//! own time over it.

use foldhash::HashMap;
use serde::Serialize;

use super::Found;
use super::window::{Block, Change, Span, Window, irq_cpu};
use crate::event::OutState;

/// A share of some time: a thread that held the CPU, a reason to block.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Share {
    /// What it is.
    pub name: String,
    /// How long, ns.
    pub ns: u64,
}

/// The block requests a wait waited for.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Requests {
    /// How many.
    pub count: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Their operations (`write`, `flush`, ...), each once.
    pub ops: Vec<String>,
    /// Their devices, each once.
    pub devices: Vec<String>,
    /// How long at least one of them was in flight during the wait, ns.
    pub busy_ns: u64,
    /// The longest of them, ns.
    pub longest_ns: u64,
}

/// One stretch of a thread off CPU and not runnable.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Wait {
    /// From, ns (the later of the block and the interval's start).
    pub from: u64,
    /// To (the wake-up, or the interval's end), ns.
    pub to: u64,
    /// Its length in the interval, ns.
    pub ns: u64,
    /// When the thread blocked, ns (before `from` when it blocked earlier).
    pub blocked_at: u64,
    /// What it waited in, in a word: a system call (`futex 0x7f…`), a
    /// lock, or `off CPU`.
    pub reason: String,
    /// The system call it blocked in.
    pub syscall: Option<String>,
    /// The futex address or lock it waited on.
    pub on: Option<String>,
    /// The stack it blocked with (the wait's kernel function, then the
    /// first user frames), when `kernel:offcpu` recorded it.
    pub stack: Vec<String>,
    /// The block requests it waited for: its own that completed during
    /// it, or those whose completion woke it.
    pub requests: Option<Requests>,
    /// Who ended it: a thread, an interrupt, or nothing known.
    pub woken_by: String,
    /// The waking thread.
    pub waker_tid: Option<u64>,
    /// What the waker was in when it woke it (a system call or span).
    pub waker_in: Option<String>,
    /// The waker's own time over the wait.
    pub waker: Option<Box<ThreadTime>>,
    /// The waker's time is being explained above this wait (a cycle of
    /// wake-ups), so it is not followed again.
    pub waker_above: bool,
}

/// A thread's time over an interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ThreadTime {
    /// Its process.
    pub pid: u64,
    /// The thread.
    pub tid: u64,
    /// The process's name.
    pub process: String,
    /// The thread's name.
    pub thread: String,
    /// From, ns.
    pub from: u64,
    /// To, ns.
    pub to: u64,
    /// On a CPU, ns.
    pub running_ns: u64,
    /// Runnable and waiting for a CPU, ns.
    pub runnable_ns: u64,
    /// Blocked (sleeping, waiting for I/O, stopped), ns.
    pub blocked_ns: u64,
    /// Not known (the trace has none of its switches), ns.
    pub unknown_ns: u64,
    /// The threads that held its CPU while it was runnable, longest first.
    pub runnable_behind: Vec<Share>,
    /// Blocked time by what it waited in, longest first.
    pub blocked_in: Vec<Share>,
    /// The userspace spans it was in (the outermost of those that
    /// overlap), longest overlap first.
    pub spans: Vec<Share>,
    /// The system calls it was in, by time in the interval, longest first.
    pub syscalls: Vec<Share>,
    /// The waits of at least the threshold, in order of time.
    pub waits: Vec<Wait>,
    /// How many waits were shorter than the threshold.
    pub short_waits: u64,
    /// Their time, ns.
    pub short_waits_ns: u64,
}

/// A thread's state over a stretch of time.
#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Running,
    /// Waiting for a CPU; the CPU it was last on.
    Runnable {
        cpu: Option<u32>,
    },
    /// Blocked since `since`.
    Blocked {
        since: u64,
    },
    Unknown,
}

/// The wake-up that ended a block.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Woken {
    ts: u64,
    waker: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Segment {
    from: u64,
    to: u64,
    state: State,
    /// For a block: the wake-up that ended it.
    woken: Option<Woken>,
}

fn after(state: State, ts: u64, change: Change) -> State {
    match change {
        Change::In { .. } => State::Running,
        Change::Out { cpu, state: out } => match out {
            OutState::Runnable => State::Runnable { cpu: Some(cpu) },
            OutState::Dead | OutState::Dying => State::Unknown,
            _ => State::Blocked { since: ts },
        },
        Change::Wake { .. } => match state {
            State::Running => State::Running,
            State::Runnable { cpu } => State::Runnable { cpu },
            State::Blocked { .. } | State::Unknown => State::Runnable { cpu: None },
        },
    }
}

/// `tid`'s states over [a, b].
fn segments(w: &Window, tid: u64, a: u64, b: u64) -> Vec<Segment> {
    let Some(t) = w.threads.get(&tid) else {
        return vec![Segment {
            from: a,
            to: b,
            state: State::Unknown,
            woken: None,
        }];
    };
    let mut state = t
        .before
        .map_or(State::Unknown, |(ts, c)| after(State::Unknown, ts, c));
    let first = t.changes.partition_point(|(ts, _)| *ts <= a);
    for &(ts, c) in &t.changes[..first] {
        state = after(state, ts, c);
    }
    let mut out = Vec::new();
    let mut from = a;
    for &(ts, c) in &t.changes[first..] {
        if ts > b {
            break;
        }
        let next = after(state, ts, c);
        if next == state {
            continue;
        }
        let woken = match (state, c) {
            (State::Blocked { .. } | State::Unknown, Change::Wake { waker, .. }) => {
                Some(Woken { ts, waker })
            }
            _ => None,
        };
        if ts > from || woken.is_some() {
            out.push(Segment {
                from,
                to: ts,
                state,
                woken,
            });
        }
        from = ts;
        state = next;
    }
    if b > from {
        out.push(Segment {
            from,
            to: b,
            state,
            woken: None,
        });
    }
    // A runnable stretch waited for the CPU it went on to run on.
    for seg in &mut out {
        if let State::Runnable { cpu: last } = &mut seg.state {
            let end = seg.to;
            let cpu = t.changes.iter().find_map(|(ts, c)| match c {
                Change::In { cpu } if *ts >= end => Some(*cpu),
                _ => None,
            });
            if cpu.is_some() {
                *last = cpu;
            }
        }
    }
    out
}

/// The innermost span of `spans` (in order of start) that contains `ts`.
fn innermost(spans: Option<&Vec<Span>>, ts: u64) -> Option<&Span> {
    spans?
        .iter()
        .take_while(|s| s.ts <= ts)
        .filter(|s| ts < s.end || (s.ts == ts && s.end == ts))
        .max_by_key(|s| (s.depth, s.ts))
}

/// Kernel functions of the scheduler itself, above the wait's own.
fn is_scheduler_frame(name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "__schedule",
        "schedule",
        "preempt_schedule",
        "io_schedule",
        "__traceiter",
        "finish_task_switch",
        "bpf_",
        "__bpf",
        "perf_",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The stack `tid` blocked with at `since`, if recorded: the wait's kernel
/// function, then up to four user frames.
fn stack(w: &Window, tid: u64, since: u64) -> Vec<String> {
    const SLACK: u64 = 200_000;
    let Some(samples) = w.offcpu.get(&tid) else {
        return Vec::new();
    };
    let Some(s) = samples
        .iter()
        .filter(|s| s.ts.abs_diff(since) <= SLACK)
        .min_by_key(|s| s.ts.abs_diff(since))
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some((name, _)) = s
        .frames
        .iter()
        .find(|(name, kernel)| *kernel && !is_scheduler_frame(name))
    {
        out.push(name.clone());
    }
    out.extend(
        s.frames
            .iter()
            .filter(|(_, kernel)| !kernel)
            .take(4)
            .map(|(name, _)| name.clone()),
    );
    out
}

/// The block requests a wait of `tid` over [s, e] waited for: those it
/// issued that completed in it, and any whose completion is the wake-up's
/// (within 100 µs before it) when an interrupt woke it.
fn requests(w: &Window, tid: u64, s: u64, e: u64, by_interrupt: bool) -> Option<Requests> {
    const SLACK: u64 = 100_000;
    let mine: Vec<&Block> = w
        .blocks
        .iter()
        .filter(|b| {
            (b.issuer == Some(tid) && b.end > s && b.end <= e)
                || (by_interrupt && b.end <= e && b.end + SLACK >= e)
        })
        .collect();
    if mine.is_empty() {
        return None;
    }
    let mut ops: Vec<String> = Vec::new();
    let mut devices: Vec<String> = Vec::new();
    let mut spans: Vec<(u64, u64)> = Vec::new();
    let mut r = Requests {
        count: 0,
        bytes: 0,
        ops: Vec::new(),
        devices: Vec::new(),
        busy_ns: 0,
        longest_ns: 0,
    };
    for b in &mine {
        r.count += 1;
        r.bytes += b.bytes;
        r.longest_ns = r.longest_ns.max(b.end - b.ts);
        if !ops.contains(&b.op) {
            ops.push(b.op.clone());
        }
        if !b.device.is_empty() && !devices.contains(&b.device) {
            devices.push(b.device.clone());
        }
        spans.push((b.ts.max(s), b.end.min(e)));
    }
    spans.sort_unstable();
    let mut reach = 0;
    for (a, b) in spans {
        let a = a.max(reach);
        if b > a {
            r.busy_ns += b - a;
            reach = b;
        }
    }
    r.ops = ops;
    r.devices = devices;
    Some(r)
}

/// Who is being explained, to stop at cycles.
struct Walker<'a> {
    w: &'a Window,
    min_wait: u64,
    max_depth: usize,
    stack: Vec<u64>,
}

fn push_share(shares: &mut HashMap<String, u64>, name: String, ns: u64) {
    *shares.entry(name).or_default() += ns;
}

fn sorted(shares: HashMap<String, u64>, keep: usize) -> Vec<Share> {
    let mut v: Vec<Share> = shares
        .into_iter()
        .filter(|(_, ns)| *ns > 0)
        .map(|(name, ns)| Share { name, ns })
        .collect();
    v.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.name.cmp(&b.name)));
    v.truncate(keep);
    v
}

impl Walker<'_> {
    fn thread_label(&self, tid: u64) -> String {
        match self.w.names.get(&tid) {
            Some((_, name)) if !name.is_empty() => format!("{name} ({tid})"),
            _ => format!("thread {tid}"),
        }
    }

    /// Which threads ran on `cpu` over [s, e], by time.
    fn occupants(&self, cpu: u32, s: u64, e: u64, shares: &mut HashMap<String, u64>, me: u64) {
        let Some((before, switches)) = self.w.cpus.get(&cpu) else {
            return;
        };
        let first = switches.partition_point(|(ts, _)| *ts <= s);
        let mut current = switches[..first]
            .last()
            .map(|(_, t)| *t)
            .or(before.map(|(_, t)| t));
        let mut at = s;
        for &(ts, tid) in &switches[first..] {
            if ts >= e {
                break;
            }
            if let Some(c) = current.filter(|c| *c != me) {
                push_share(shares, self.occupant(c, cpu), ts - at);
            }
            current = Some(tid);
            at = ts;
        }
        if let Some(c) = current.filter(|c| *c != me) {
            push_share(shares, self.occupant(c, cpu), e.saturating_sub(at));
        }
    }

    /// The CPU `tid` was on at `ts`: where it last went on.
    fn cpu_of(&self, tid: u64, ts: u64) -> Option<u32> {
        let t = self.w.threads.get(&tid)?;
        let n = t.changes.partition_point(|(at, _)| *at <= ts);
        t.changes[..n]
            .iter()
            .rev()
            .chain(t.before.iter())
            .find_map(|(_, c)| match c {
                Change::In { cpu } => Some(*cpu),
                _ => None,
            })
    }

    fn occupant(&self, tid: u64, cpu: u32) -> String {
        if tid == 0 && self.w.seen.hidden_tasks > 0 {
            format!("tasks outside the recording's selection, or CPU {cpu} idle")
        } else if tid == 0 {
            format!("nothing: CPU {cpu} idle (waking it up)")
        } else {
            self.thread_label(tid)
        }
    }

    /// What woke a thread: an interrupt (the waker is a CPU's interrupt
    /// track, or an interrupt was running on the waking CPU), or a thread.
    fn waker(&self, woken: Woken) -> (String, Option<u64>, bool) {
        let irq_at = |cpu: u32| innermost(self.w.irqs.get(&cpu), woken.ts).map(|s| s.name.clone());
        if let Some(cpu) = woken.waker.and_then(irq_cpu) {
            return match irq_at(cpu) {
                Some(name) => (format!("interrupt {name} on CPU {cpu}"), None, true),
                None => (format!("an interrupt on CPU {cpu}"), None, true),
            };
        }
        // The wake-up record names the woken thread's CPU; the waker ran
        // on the CPU it last went on.
        if let Some(cpu) = woken.waker.and_then(|t| self.cpu_of(t, woken.ts))
            && let Some(name) = irq_at(cpu)
        {
            return (format!("interrupt {name} on CPU {cpu}"), None, true);
        }
        match woken.waker {
            Some(0) => ("an interrupt".into(), None, true),
            Some(tid) => (self.thread_label(tid), Some(tid), false),
            None => ("not recorded".into(), None, false),
        }
    }

    fn thread(&mut self, tid: u64, a: u64, b: u64, depth: usize) -> ThreadTime {
        let (pid, thread) = self.w.names.get(&tid).cloned().unwrap_or_default();
        let process = self.w.process_names.get(&pid).cloned().unwrap_or_default();
        let mut t = ThreadTime {
            pid,
            tid,
            process,
            thread,
            from: a,
            to: b,
            running_ns: 0,
            runnable_ns: 0,
            blocked_ns: 0,
            unknown_ns: 0,
            runnable_behind: Vec::new(),
            blocked_in: Vec::new(),
            spans: Vec::new(),
            syscalls: Vec::new(),
            waits: Vec::new(),
            short_waits: 0,
            short_waits_ns: 0,
        };
        let mut behind = HashMap::default();
        let mut blocked_in = HashMap::default();
        self.stack.push(tid);
        for seg in segments(self.w, tid, a, b) {
            let ns = seg.to - seg.from;
            match seg.state {
                State::Running => t.running_ns += ns,
                State::Unknown if seg.woken.is_none() => t.unknown_ns += ns,
                State::Runnable { cpu } => {
                    t.runnable_ns += ns;
                    if let Some(cpu) = cpu {
                        self.occupants(cpu, seg.from, seg.to, &mut behind, tid);
                    }
                }
                State::Blocked { .. } | State::Unknown => {
                    let since = match seg.state {
                        State::Blocked { since } => since,
                        _ => seg.from,
                    };
                    t.blocked_ns += ns;
                    let wait = self.wait(tid, since, seg, b, depth);
                    push_share(&mut blocked_in, wait.reason.clone(), ns);
                    if ns >= self.min_wait {
                        t.waits.push(wait);
                    } else {
                        t.short_waits += 1;
                        t.short_waits_ns += ns;
                    }
                }
            }
        }
        self.stack.pop();
        let mut spans = HashMap::default();
        if let Some(list) = self.w.spans.get(&tid) {
            let top = list
                .iter()
                .filter(|s| s.ts < b && s.end > a)
                .map(|s| s.depth)
                .min();
            for s in list
                .iter()
                .filter(|s| s.ts < b && s.end > a && Some(s.depth) == top)
            {
                push_share(&mut spans, s.name.clone(), s.end.min(b) - s.ts.max(a));
            }
        }
        let mut calls = HashMap::default();
        for c in self.w.syscalls.get(&tid).into_iter().flatten() {
            if c.ts < b && c.end > a {
                push_share(&mut calls, c.name.clone(), c.end.min(b) - c.ts.max(a));
            }
        }
        t.syscalls = sorted(calls, 5);
        t.runnable_behind = sorted(behind, 5);
        t.blocked_in = sorted(blocked_in, 8);
        t.spans = sorted(spans, 3);
        t
    }

    fn wait(&mut self, tid: u64, since: u64, seg: Segment, end: u64, depth: usize) -> Wait {
        let w = self.w;
        let at = since.max(w.t0);
        let call =
            innermost(w.syscalls.get(&tid), at).or(innermost(w.syscalls.get(&tid), seg.from));
        let lock = innermost(w.locks.get(&tid), seg.from);
        let syscall = call.map(|c| c.name.clone());
        let on = lock
            .and_then(|l| l.detail.clone().or(Some(l.name.clone())))
            .or(call.and_then(|c| c.detail.clone()));
        let reason = match (lock, call) {
            (Some(l), _) => match &l.detail {
                Some(d) => format!("{} {d}", l.name),
                None => l.name.clone(),
            },
            (None, Some(c)) => match &c.detail {
                Some(d) => format!("{} {d}", c.name),
                None => c.name.clone(),
            },
            (None, None) => "off CPU (no system call recorded)".into(),
        };
        let (woken_by, waker_tid, by_interrupt) = match seg.woken {
            Some(woken) => self.waker(woken),
            None if seg.to >= end => ("still blocked at the end".into(), None, false),
            None => ("no wake-up recorded".into(), None, false),
        };
        let waker_in = match (waker_tid, seg.woken) {
            (Some(wt), Some(woken)) => innermost(w.syscalls.get(&wt), woken.ts)
                .or(innermost(w.spans.get(&wt), woken.ts))
                .map(|s| s.name.clone()),
            _ => None,
        };
        let ns = seg.to - seg.from;
        let cycle = waker_tid.is_some_and(|wt| self.stack.contains(&wt));
        let waker = match waker_tid {
            Some(wt) if !cycle && ns >= self.min_wait && depth < self.max_depth => {
                Some(Box::new(self.thread(wt, seg.from, seg.to, depth + 1)))
            }
            _ => None,
        };
        Wait {
            from: seg.from,
            to: seg.to,
            ns,
            blocked_at: since,
            reason,
            syscall,
            on,
            stack: stack(w, tid, since),
            requests: requests(w, tid, seg.from, seg.to, by_interrupt),
            woken_by,
            waker_tid,
            waker_in,
            waker,
            waker_above: cycle,
        }
    }
}

/// `target`'s thread over its time, every wait of at least `min_wait` ns
/// followed to its waker, `max_depth` wake-ups deep.
pub(super) fn walk(w: &Window, target: &Found, min_wait: u64, max_depth: usize) -> ThreadTime {
    walk_range(w, target.tid, w.t0, w.t1, min_wait, max_depth)
}

/// Thread `tid`'s time over [a, b] inside the window, each wait of at
/// least `min_wait` ns followed to its waker, `max_depth` wake-ups deep.
pub(super) fn walk_range(
    w: &Window,
    tid: u64,
    a: u64,
    b: u64,
    min_wait: u64,
    max_depth: usize,
) -> ThreadTime {
    let mut walker = Walker {
        w,
        min_wait,
        max_depth,
        stack: Vec::new(),
    };
    walker.thread(tid, a, b, 0)
}
