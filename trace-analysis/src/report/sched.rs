//! What the context switches and wake-ups of a trace say, per CPU and per
//! thread: time on CPU, switches out blocked (voluntary) and preempted
//! (involuntary), migrations, time off CPU, and wake-up to running
//! latency. The `cpu` and `sched` sections are made from it.
//!
//! Each CPU's running thread and since when are followed; a thread's
//! intervals are credited as its switches come. Events arrive in the
//! order of the file, which for the kernel provider is time order; an
//! interval that would run backwards is ignored.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use foldhash::HashMap;

use super::filter::Filter;
use super::histogram::Latency;
use crate::event::{Event, OutState, Switch, Wakeup};
use crate::reader::Context;

/// Per-thread figures.
#[derive(Clone, Debug, Default)]
pub struct ThreadStats {
    /// Process.
    pub pid: u64,
    /// Time on a CPU, ns.
    pub on_cpu: u64,
    /// Switched out blocked or sleeping.
    pub voluntary: u64,
    /// Switched out still runnable (preempted).
    pub involuntary: u64,
    /// Switched in on another CPU than the last time.
    pub migrations: u64,
    /// Time switched out blocked, until switched in again, ns.
    pub blocked: u64,
    /// Time switched out runnable, until switched in again, ns.
    pub runnable: u64,
    /// Times it ran again after blocking: each ended by a wake-up, whether
    /// or not the trace has the wake-up's record.
    pub wakeups: u64,
    /// Wake-up to switch-in latency, of the wake-ups the trace has.
    pub latency: Latency,
    /// Switches out the recorder inferred (their state is not known).
    pub inferred: u64,
    /// The CPU it last ran on.
    last_cpu: Option<u32>,
    /// The CPU it runs on now.
    running: Option<u32>,
    /// Switched out at, and in what state (`None`: inferred, not known).
    out: Option<(u64, Option<OutState>)>,
    /// Woken at, waiting to be switched in.
    woken: Option<(u64, u32)>,
}

/// Per-CPU figures.
#[derive(Clone, Debug, Default)]
pub struct CpuStats {
    /// Time a selected, non-idle thread ran, ns.
    pub busy: u64,
    /// Context switches.
    pub switches: u64,
    /// The thread running and since when.
    current: Option<(u64, u64, u64)>,
}

/// One wake-up latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Wait {
    /// Woken to running, ns.
    pub latency: u64,
    /// Woken at, ns.
    pub woken: u64,
    /// Switched in at, ns.
    pub ran: u64,
    /// Thread.
    pub tid: u64,
    /// Its process.
    pub pid: u64,
    /// The CPU it ran on.
    pub cpu: u32,
}

/// Scheduling state and figures of a trace.
#[derive(Debug, Default)]
pub struct Sched {
    /// Per thread (selected ones only).
    pub threads: HashMap<u64, ThreadStats>,
    /// Per CPU.
    pub cpus: HashMap<u32, CpuStats>,
    /// Switches seen.
    pub switches: u64,
    /// Wake-ups seen.
    pub wakeups: u64,
    /// Switches inferred by the recorder.
    pub inferred: u64,
    /// Intervals that ran backwards, ignored.
    pub backwards: u64,
    /// The longest wake-up latencies (a min-heap of at most `keep`).
    worst: BinaryHeap<Reverse<Wait>>,
    keep: usize,
}

impl Sched {
    /// Keeps the `keep` longest wake-up latencies.
    pub fn new(keep: usize) -> Self {
        Sched {
            keep,
            ..Sched::default()
        }
    }

    /// The longest wake-up latencies, longest first.
    pub fn worst(&self) -> Vec<Wait> {
        let mut w: Vec<Wait> = self.worst.iter().map(|r| r.0).collect();
        w.sort_by(|a, b| b.cmp(a));
        w
    }

    /// Takes one event.
    pub fn event(&mut self, e: &Event, cx: &Context, f: &mut Filter) {
        match e {
            Event::Switch(s) => self.switch(s, cx, f),
            Event::Wakeup(w) => self.wakeup(w, cx, f),
            _ => {}
        }
    }

    fn thread(
        &mut self,
        pid: u64,
        tid: u64,
        cx: &Context,
        f: &mut Filter,
    ) -> Option<&mut ThreadStats> {
        if tid == 0 || !f.thread(pid, tid, cx) {
            return None;
        }
        let t = self.threads.entry(tid).or_default();
        if pid != 0 {
            t.pid = pid;
        }
        Some(t)
    }

    fn switch(&mut self, s: &Switch, cx: &Context, f: &mut Filter) {
        self.switches += 1;
        if s.inferred {
            self.inferred += 1;
        }
        let ts = s.ts;
        let in_window = f.at(ts);
        // The interval that ends here, credited to whoever the CPU ran.
        let cpu = self.cpus.entry(s.cpu).or_default();
        if in_window {
            cpu.switches += 1;
        }
        let previous = cpu.current.replace((s.next_pid, s.next_tid, ts));
        let ran = match previous {
            Some((pid, tid, since)) if ts >= since => Some((pid, tid, f.overlap(since, ts))),
            Some(_) => {
                self.backwards += 1;
                None
            }
            None => None,
        };
        if let Some((pid, tid, d)) = ran
            && tid != 0
            && let Some(t) = self.thread(pid, tid, cx, f)
        {
            t.on_cpu = t.on_cpu.saturating_add(d);
            if let Some(c) = self.cpus.get_mut(&s.cpu) {
                c.busy = c.busy.saturating_add(d);
            }
        }
        // The thread switched out.
        if let Some(t) = self.thread(s.prev_pid, s.prev_tid, cx, f) {
            if t.running == Some(s.cpu) {
                t.running = None;
            }
            if s.inferred {
                t.inferred += u64::from(in_window);
                t.out = Some((ts, None));
            } else {
                match s.prev_state {
                    OutState::Runnable => t.involuntary += u64::from(in_window),
                    OutState::Blocked => t.voluntary += u64::from(in_window),
                    _ => {}
                }
                t.out = Some((ts, Some(s.prev_state)));
            }
        }
        // The thread switched in.
        let (next_pid, next_tid, cpu_no) = (s.next_pid, s.next_tid, s.cpu);
        let mut wait = None;
        if let Some(t) = self.thread(next_pid, next_tid, cx, f) {
            if let Some(last) = t.last_cpu
                && last != cpu_no
                && in_window
            {
                t.migrations += 1;
            }
            t.last_cpu = Some(cpu_no);
            t.running = Some(cpu_no);
            let out = t.out.take();
            if t.woken.is_some() || matches!(out, Some((_, Some(OutState::Blocked)))) {
                t.wakeups += u64::from(in_window);
            }
            if let Some((out, state)) = out
                && ts >= out
            {
                let d = f.overlap(out, ts);
                match state {
                    Some(OutState::Runnable) => t.runnable = t.runnable.saturating_add(d),
                    _ => t.blocked = t.blocked.saturating_add(d),
                }
            }
            if let Some((woken, _)) = t.woken.take()
                && ts >= woken
                && in_window
            {
                let latency = ts - woken;
                t.latency.record(latency);
                wait = Some(Wait {
                    latency,
                    woken,
                    ran: ts,
                    tid: next_tid,
                    pid: t.pid,
                    cpu: cpu_no,
                });
            }
        }
        if let Some(w) = wait {
            self.keep_worst(w);
        }
    }

    fn keep_worst(&mut self, w: Wait) {
        if self.keep == 0 {
            return;
        }
        if self.worst.len() < self.keep {
            self.worst.push(Reverse(w));
        } else if self.worst.peek().is_some_and(|least| least.0 < w) {
            self.worst.pop();
            self.worst.push(Reverse(w));
        }
    }

    fn wakeup(&mut self, w: &Wakeup, cx: &Context, f: &mut Filter) {
        self.wakeups += 1;
        let Some(t) = self.thread(w.pid, w.tid, cx, f) else {
            return;
        };
        // A thread already running, or woken and not yet run, is not
        // woken again.
        if t.running.is_none() && t.woken.is_none() {
            t.woken = Some((w.ts, w.cpu));
        }
    }

    /// Each CPU's figures, with the time the trace covers on it, by CPU.
    pub fn cpus(&self) -> Vec<(u32, &CpuStats)> {
        let mut v: Vec<(u32, &CpuStats)> = self.cpus.iter().map(|(c, s)| (*c, s)).collect();
        v.sort_by_key(|(c, _)| *c);
        v
    }
}

#[cfg(test)]
mod tests {
    use crate::report::testing::Fxt;

    #[test]
    fn intervals_switches_migrations_and_latencies_are_followed() {
        let mut t = Fxt::new();
        t.process(10, "app").thread(10, 11, "worker");
        // CPU 0: idle -> 11 at 100; 11 preempted by idle at 300 (R);
        // 11 back on CPU 1 at 350; 11 sleeps at 400 (S); woken at 1000;
        // runs on CPU 1 at 1200; sleeps at 1300.
        t.switch(100, 0, 0, 3, 11)
            .switch(300, 0, 11, 1, 0)
            .switch(350, 1, 0, 3, 11)
            .switch(400, 1, 11, 3, 0)
            .wakeup(1000, 1, 11)
            .wakeup(1100, 1, 11)
            .switch(1200, 1, 0, 3, 11)
            .switch(1300, 1, 11, 3, 0);
        let (s, _) = t.sched();
        let w = &s.threads[&11];
        assert_eq!(w.pid, 10);
        assert_eq!(w.on_cpu, 200 + 50 + 100);
        assert_eq!((w.voluntary, w.involuntary, w.migrations), (2, 1, 1));
        assert_eq!((w.runnable, w.blocked), (50, 800));
        assert_eq!(w.latency.count, 1);
        assert_eq!(w.latency.max, 200);
        // Woken once with a record; the sleep at 400 ended by it.
        assert_eq!(w.wakeups, 1);
        assert_eq!(s.cpus[&0].busy, 200);
        assert_eq!(s.cpus[&1].busy, 150);
        let worst = s.worst();
        assert_eq!(worst.len(), 1);
        assert_eq!(
            (worst[0].woken, worst[0].ran, worst[0].cpu),
            (1000, 1200, 1)
        );
    }

    #[test]
    fn backwards_intervals_are_ignored_and_the_worst_are_kept() {
        let mut t = Fxt::new();
        t.process(10, "app").thread(10, 11, "a").thread(10, 12, "b");
        t.switch(500, 0, 0, 3, 11)
            .switch(400, 0, 11, 3, 12)
            .switch(600, 0, 12, 3, 0);
        for i in 0..30u64 {
            let at = 1_000 + i * 1_000;
            t.wakeup(at, 0, 11)
                .switch(at + i, 0, 0, 3, 11)
                .switch(at + 500, 0, 11, 3, 0);
        }
        let (s, _) = t.sched();
        assert_eq!(s.backwards, 1);
        assert_eq!(s.threads[&11].on_cpu, 30 * 500 - (0..30).sum::<u64>());
        assert_eq!(s.threads[&12].on_cpu, 200);
        assert_eq!(s.threads[&11].latency.count, 30);
        let worst: Vec<u64> = s.worst().iter().map(|w| w.latency).collect();
        assert_eq!(worst, (10..30).rev().collect::<Vec<u64>>());
    }

    #[test]
    fn a_time_window_clips_intervals() {
        let mut t = Fxt::new();
        t.process(10, "app").thread(10, 11, "a");
        // First timestamp 0: the window is [100, 200) ns.
        t.switch(0, 0, 0, 3, 11).switch(1_000, 0, 11, 3, 0);
        let (s, _) = t.sched_with(crate::report::Selection {
            time: "0.0000001..0.0000002".parse().unwrap(),
            ..Default::default()
        });
        assert_eq!(s.threads[&11].on_cpu, 100);
        assert_eq!(s.threads[&11].voluntary, 0);
    }
}
