//! What the context switches and wake-ups of a trace say, per CPU and per
//! thread: time on CPU, switches out blocked (voluntary) and preempted
//! (involuntary), migrations, time off CPU, and wake-up to running
//! latency. The `cpu` and `sched` sections are made from it.
//!
//! Each CPU's running thread and since when are followed; a thread's
//! intervals are credited as its switches come. Events arrive in the
//! order of the file, which for the kernel provider is time order; an
//! interval that would run backwards is ignored. At the ends of each
//! CPU's timeline the switches still say who ran: the thread the first
//! switch switches out ran from the trace's start, the one the last
//! switches in up to its end ([`Sched::finish`]).
//!
//! A wake-up's latency is measured only when the woken thread's next
//! switch-in is the first sign of it running again. Threads whose switches
//! the trace does not have all of (a recording filtered by process, or
//! lost events: the recorder then infers the missing switches) are marked
//! as not traced continuously, and their latencies are not to be trusted.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use foldhash::HashMap;

use super::Name;
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
    /// Time switched out blocked, until switched in again (or the trace's
    /// end), ns.
    pub blocked: u64,
    /// Time switched out runnable, until switched in again (or the trace's
    /// end), ns.
    pub runnable: u64,
    /// Times it ran again after blocking: each ended by a wake-up, whether
    /// or not the trace has the wake-up's record.
    pub wakeups: u64,
    /// Wake-up to switch-in latency, of the wake-ups the trace has.
    pub latency: Latency,
    /// Switches out the recorder inferred (their state is not known).
    pub inferred: u64,
    /// The trace does not have all of its switches (it ran, or stopped
    /// running, without a recorded switch): its wake-up latencies are not
    /// to be trusted.
    pub incomplete: bool,
    /// It exited (its last switch out may go unrecorded).
    exited: bool,
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
    /// Context switches in the window (of a selected thread, in or out,
    /// when threads are selected).
    pub switches: u64,
    /// The thread running and since when.
    current: Option<(u64, u64, u64)>,
    /// The earliest switch: the thread it switched out (which ran from the
    /// trace's start) and when.
    first: Option<(u64, u64, u64)>,
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
    /// The longest wake-up latencies (a min-heap of at most `capacity`,
    /// those of threads found not traced continuously taken out).
    worst: BinaryHeap<Reverse<Wait>>,
    keep: usize,
    /// The kernel's `exit` instants.
    exit: Option<Name>,
    category: Option<Name>,
}

/// The kernel provider's id.
const KERNEL: u32 = 1;

/// How many more of the longest latencies are kept than shown, so that
/// those of threads later found not traced continuously can be left out.
const SPARE: usize = 4;

impl Sched {
    /// Keeps the `keep` longest wake-up latencies.
    pub fn new(keep: usize) -> Self {
        Sched {
            keep,
            ..Sched::default()
        }
    }

    /// The longest wake-up latencies of threads traced continuously,
    /// longest first.
    pub fn worst(&self) -> Vec<Wait> {
        let mut w: Vec<Wait> = self
            .worst
            .iter()
            .map(|r| r.0)
            .filter(|w| self.threads.get(&w.tid).is_none_or(|t| !t.incomplete))
            .collect();
        w.sort_by(|a, b| b.cmp(a));
        w.truncate(self.keep);
        w
    }

    /// Threads not traced continuously.
    pub fn incomplete(&self) -> usize {
        self.threads.values().filter(|t| t.incomplete).count()
    }

    /// Takes one event.
    pub fn event(&mut self, e: &Event, cx: &Context, f: &mut Filter) {
        match e {
            Event::Switch(s) => self.switch(s, cx, f),
            Event::Wakeup(w) => self.wakeup(w, cx, f),
            Event::Instant(i) if i.track.provider == KERNEL => {
                let exit = self.exit.get_or_insert(Name::new("exit"));
                let category = self.category.get_or_insert(Name::new("kernel:proc"));
                if exit.is(i.name, cx)
                    && category.is(i.category, cx)
                    && let Some(t) = self.threads.get_mut(&i.track.tid)
                {
                    t.exited = true;
                }
            }
            _ => {}
        }
    }

    /// Closes the ends of every CPU's and thread's timeline once every
    /// event was given: the trace ran from `start` to `end` (its earliest
    /// and latest timestamps).
    pub fn finish(&mut self, start: Option<u64>, end: Option<u64>, cx: &Context, f: &mut Filter) {
        let (Some(start), Some(end)) = (start, end) else {
            return;
        };
        let mut cpus: Vec<u32> = self.cpus.keys().copied().collect();
        cpus.sort_unstable();
        for no in cpus {
            let Some(c) = self.cpus.get(&no) else {
                continue;
            };
            // Before the earliest switch, and after the last one.
            let mut ran = Vec::with_capacity(2);
            if let Some((pid, tid, at)) = c.first {
                ran.push((pid, tid, f.overlap(start, at)));
            }
            if let Some((pid, tid, since)) = c.current {
                ran.push((pid, tid, f.overlap(since, end)));
            }
            for (pid, tid, d) in ran {
                if d == 0 {
                    continue;
                }
                if let Some(t) = self.thread(pid, tid, cx, f) {
                    t.on_cpu = t.on_cpu.saturating_add(d);
                    if let Some(c) = self.cpus.get_mut(&no) {
                        c.busy = c.busy.saturating_add(d);
                    }
                }
            }
        }
        // Threads still off CPU at the end; not those that exited.
        for t in self.threads.values_mut() {
            if t.running.is_some() || t.exited {
                continue;
            }
            if let Some((out, state)) = t.out.take() {
                let d = f.overlap(out, end);
                match state {
                    Some(OutState::Runnable) => t.runnable = t.runnable.saturating_add(d),
                    Some(OutState::Blocked) | None => t.blocked = t.blocked.saturating_add(d),
                    Some(_) => {}
                }
            }
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

    /// Marks thread `tid` as not traced continuously.
    fn incomplete_thread(&mut self, pid: u64, tid: u64, cx: &Context, f: &mut Filter) {
        if let Some(t) = self.thread(pid, tid, cx, f)
            && !t.incomplete
        {
            t.incomplete = true;
            t.woken = None;
            self.worst.retain(|w| w.0.tid != tid);
        }
    }

    /// Whether thread `tid` is a selected thread, not idle.
    fn selected(pid: u64, tid: u64, cx: &Context, f: &mut Filter) -> bool {
        tid != 0 && f.thread(pid, tid, cx)
    }

    fn switch(&mut self, s: &Switch, cx: &Context, f: &mut Filter) {
        self.switches += 1;
        if s.inferred {
            self.inferred += 1;
        }
        let ts = s.ts;
        let in_window = f.at(ts);
        let counted = in_window
            && (!f.selection().by_thread()
                || Self::selected(s.prev_pid, s.prev_tid, cx, f)
                || Self::selected(s.next_pid, s.next_tid, cx, f));
        // The interval that ends here, credited to whoever the CPU ran.
        let cpu = self.cpus.entry(s.cpu).or_default();
        if counted {
            cpu.switches += 1;
        }
        if cpu.first.is_none_or(|(_, _, at)| ts < at) {
            cpu.first = Some((s.prev_pid, s.prev_tid, ts));
        }
        let previous = cpu.current.replace((s.next_pid, s.next_tid, ts));
        // A thread that stopped running without a recorded switch out.
        let lost = previous
            .filter(|&(_, tid, _)| tid != s.prev_tid)
            .map(|(pid, tid, _)| (pid, tid));
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
        // The outgoing side of a switch the recorder did not see, and both
        // sides of a gap in a CPU's switches, ran or stopped running
        // unrecorded; but a thread's last switch, after it exited, can go
        // unrecorded in a complete trace. The incoming side of an inferred
        // switch is a thread seen running (its own event made the recorder
        // infer the switch): only its switch in is late, so the latency of
        // that one wake-up is not known, and is left out below.
        if s.inferred || lost.is_some() {
            if let Some((pid, tid)) = lost {
                self.incomplete_thread(pid, tid, cx, f);
            }
            let exited = self.threads.get(&s.prev_tid).is_some_and(|t| t.exited);
            if !exited {
                self.incomplete_thread(s.prev_pid, s.prev_tid, cx, f);
            }
            if lost.is_some() {
                self.incomplete_thread(s.next_pid, s.next_tid, cx, f);
            }
        }
        // The thread switched out.
        if let Some(t) = self.thread(s.prev_pid, s.prev_tid, cx, f) {
            if t.running == Some(s.cpu) {
                t.running = None;
            }
            t.last_cpu = Some(s.cpu);
            // It ran since its wake-up without a recorded switch in: that
            // wake-up's latency is not known.
            t.woken = None;
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
                && !s.inferred
            {
                let latency = ts - woken;
                t.latency.record(latency);
                if !t.incomplete {
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
        }
        if let Some(w) = wait {
            self.keep_worst(w);
        }
    }

    fn keep_worst(&mut self, w: Wait) {
        let capacity = self.keep.saturating_mul(SPARE);
        if capacity == 0 {
            return;
        }
        if self.worst.len() < capacity {
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
        // A thread already running is not woken. One woken again before
        // its switch in ran in between, unrecorded: the later wake-up is
        // the one its switch in ends.
        if t.running.is_none() && !t.incomplete {
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
    use trace_common::fxt::EventKind;

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
        // Woken again before running: the later wake-up is the one it ran
        // after.
        assert_eq!(w.latency.max, 100);
        // Woken once with a record; the sleep at 400 ended by it.
        assert_eq!(w.wakeups, 1);
        assert_eq!(s.cpus[&0].busy, 200);
        assert_eq!(s.cpus[&1].busy, 150);
        let worst = s.worst();
        assert_eq!(worst.len(), 1);
        assert_eq!(
            (worst[0].woken, worst[0].ran, worst[0].cpu),
            (1100, 1200, 1)
        );
    }

    #[test]
    fn the_ends_of_each_cpus_timeline_are_credited() {
        let mut t = Fxt::new();
        t.process(10, "app")
            .thread(10, 11, "first")
            .thread(10, 12, "last");
        // In the order of the file, not of time: the trace starts at 0.
        // CPU 0: 11 runs from the start until 100, then sleeps to the end.
        // CPU 1: 12 runs from 0 to the end without switching out.
        t.wakeup(50, 2, 99)
            .switch(0, 1, 0, 3, 12)
            .switch(100, 0, 11, 3, 0)
            .wakeup(1_000, 2, 99);
        let (s, _) = t.sched();
        assert_eq!(s.threads[&11].on_cpu, 100);
        assert_eq!(s.threads[&11].blocked, 900);
        assert_eq!(s.threads[&12].on_cpu, 1_000);
        assert_eq!(s.cpus[&0].busy, 100);
        assert_eq!(s.cpus[&1].busy, 1_000);
        // Cut to a window.
        let (s, _) = t.sched_with(crate::report::Selection {
            time: "@500..@800".parse().unwrap(),
            ..Default::default()
        });
        assert_eq!(s.threads[&11].on_cpu, 0);
        assert_eq!(s.threads[&11].blocked, 300);
        assert_eq!(s.threads[&12].on_cpu, 300);
        assert_eq!(s.cpus[&1].busy, 300);
    }

    #[test]
    fn a_file_cut_out_of_a_recording_credits_nothing_before_what_it_saw() {
        let mut t = Fxt::new();
        t.process(10, "app").thread(10, 11, "worker");
        // A rotated file: a system call that began before the cut comes
        // first, whole; the file's first switch is at 1 000. Thread 11 ran
        // up to that switch, but since when, the file does not know.
        t.slice(0, 1_200, 10, 11, "kernel:syscall", "read", vec![])
            .switch(1_000, 0, 11, 3, 0)
            .wakeup(1_500, 0, 11)
            .switch(1_600, 0, 0, 3, 11)
            .wakeup(2_000, 1, 99);
        let (s, _) = t.sched();
        assert_eq!(s.threads[&11].on_cpu, 400);
        assert_eq!(s.cpus[&0].busy, 400);
        let r = t.report(crate::report::Options {
            sections: vec![crate::report::SectionId::Cpu],
            ..Default::default()
        });
        assert_eq!(r.trace.start_ns, Some(0));
        assert_eq!(r.trace.observed_ns, Some(1_000));
        assert_eq!(r.trace.span(), 1_000);
    }

    #[test]
    fn latencies_count_only_when_the_switch_in_is_the_next_sign_of_running() {
        let mut t = Fxt::new();
        t.process(10, "app")
            .thread(10, 11, "a")
            .thread(10, 30, "followed");
        t.process(20, "rcu").thread(20, 21, "rcu_preempt");
        // 11 is woken, then seen switching out (it ran unrecorded): no
        // latency from that wake-up.
        t.wakeup(10, 0, 11)
            .switch(20, 1, 11, 3, 0)
            .switch(30, 1, 0, 3, 11)
            .switch(40, 1, 11, 3, 0);
        // A recording that follows 30 only: 21 woken at 1000 runs
        // unrecorded; its one recorded switch in comes much later, and it
        // stops running unrecorded (the recorder infers the switch).
        t.switch(100, 0, 0, 3, 30)
            .wakeup(1_000, 0, 21)
            .switch(1_500, 0, 30, 3, 0)
            .wakeup(300_000, 0, 30)
            .switch(300_200, 0, 0, 3, 30)
            .switch(400_000, 0, 30, 1, 21)
            .inferred_switch(500_000, 0, 21, 0)
            .switch(500_000, 0, 0, 3, 30);
        let (s, _) = t.sched();
        assert_eq!(s.threads[&11].latency.count, 0);
        assert!(!s.threads[&11].incomplete);
        assert!(s.threads[&21].incomplete);
        assert!(!s.threads[&30].incomplete);
        assert_eq!(s.threads[&30].latency.count, 1);
        assert_eq!(s.incomplete(), 1);
        let worst: Vec<(u64, u64)> = s.worst().iter().map(|w| (w.tid, w.latency)).collect();
        assert_eq!(worst, vec![(30, 200)]);
        // A gap in a CPU's switches, without an inferred switch.
        let mut t = Fxt::new();
        t.process(10, "app").thread(10, 11, "a").thread(10, 12, "b");
        t.switch(0, 0, 0, 3, 11)
            .switch(10, 0, 11, 3, 0)
            .wakeup(20, 1, 11)
            .switch(500, 0, 0, 3, 11)
            .switch(600, 0, 12, 3, 0);
        let (s, _) = t.sched();
        assert!(s.threads[&11].incomplete && s.threads[&12].incomplete);
        assert!(s.worst().is_empty());
        // A followed thread's last switch out, after its exit, goes
        // unrecorded: its latencies stand.
        let mut t = Fxt::new();
        t.process(10, "app").thread(10, 11, "a");
        t.switch(0, 0, 0, 3, 11)
            .switch(10, 0, 11, 3, 0)
            .wakeup(20, 1, 11)
            .switch(50, 0, 0, 3, 11)
            .event(
                60,
                10,
                11,
                "kernel:proc",
                "exit",
                EventKind::Instant,
                vec![],
            )
            .inferred_switch(70, 0, 11, 20)
            .switch(80, 0, 20, 3, 0);
        let (s, _) = t.sched();
        assert!(!s.threads[&11].incomplete);
        assert_eq!(s.worst().len(), 1);
        // Nor is it blocked from its exit to the trace's end.
        assert_eq!(s.threads[&11].blocked, 40);
        // A thread no tracepoint fires in (40) runs between two of a
        // followed thread's runs: the recorder infers 40's switch out when
        // 11 is seen running. 11 stays traced; only the latency of that
        // wake-up, whose switch in came late, is left out.
        let mut t = Fxt::new();
        t.process(10, "app").thread(10, 11, "a");
        t.switch(0, 0, 0, 3, 11)
            .switch(10, 0, 11, 3, 40)
            .wakeup(20, 1, 11)
            .inferred_switch(90, 0, 40, 11)
            .switch(100, 0, 11, 3, 0)
            .wakeup(200, 1, 11)
            .switch(230, 0, 0, 3, 11);
        let (s, _) = t.sched();
        assert!(!s.threads[&11].incomplete);
        assert!(s.threads[&40].incomplete);
        assert_eq!(s.threads[&11].latency.count, 1);
        let worst: Vec<(u64, u64)> = s.worst().iter().map(|w| (w.tid, w.latency)).collect();
        assert_eq!(worst, vec![(11, 30)]);
    }

    #[test]
    fn with_a_selection_only_switches_of_selected_threads_count() {
        let mut t = Fxt::new();
        t.process(10, "app").thread(10, 11, "a");
        t.process(20, "other").thread(20, 20, "other");
        t.switch(0, 0, 0, 3, 11)
            .switch(100, 0, 11, 3, 20)
            .switch(200, 0, 20, 3, 0)
            .switch(300, 0, 0, 3, 20)
            .switch(400, 0, 20, 3, 0);
        let (s, _) = t.sched();
        assert_eq!(s.cpus[&0].switches, 5);
        let (s, _) = t.sched_with(crate::report::Selection {
            comm: Some("ap*".into()),
            ..Default::default()
        });
        assert_eq!(s.cpus[&0].switches, 2);
        assert_eq!(s.cpus[&0].busy, 100);
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
