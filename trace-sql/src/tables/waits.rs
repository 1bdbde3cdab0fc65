//! `waits`: each stretch a thread spent off a CPU, from its switch out to
//! its switch back in, split at its wake-up, with the waker: the edges
//! `report --critical-path` follows, as rows.

use std::collections::VecDeque;

use foldhash::HashMap;

use datafusion::arrow::array::{StringBuilder, UInt32Builder, UInt64Builder};
use trace_analysis::critical_path::window::irq_cpu;
use trace_analysis::event::{OutState, Slice, Switch, Wakeup};
use trace_analysis::{Context, Event, Sym, Wants};
use trace_common::category::KERNEL_IRQ;

use super::Table;
use super::declare::table;

/// How long before a thread's blocking switch out a wake-up of it may be
/// read and still be its wake-up (records of two CPUs are not strictly in
/// order of time): the recorder's own window for a waking that finds the
/// sleeper still on its CPU.
const EARLY_WAKE_NS: u64 = 50_000;

table! {
    /// Builds `waits`.
    pub struct Waits as "waits" {
        /// Switched out, ns.
        ts: UInt64Builder,
        /// Until switched back in, ns.
        dur: UInt64Builder,
        /// Process.
        pid: UInt64Builder,
        /// Thread.
        tid: UInt64Builder,
        /// The CPU it left.
        cpu: UInt32Builder,
        /// The CPU it came back on.
        next_cpu: UInt32Builder,
        /// Its state as it left (`R` preempted, `S` blocked, `T`, `Z`, `X` or a number).
        state: StringBuilder,
        /// The thread that took the CPU as it left (0: the CPU went idle).
        next_tid: UInt64Builder,
        /// When it was woken, ns (null when preempted, or when no wake-up was recorded).
        woken_ts: UInt64Builder nullable,
        /// Blocked until woken, ns (0 when preempted, null when no wake-up was recorded).
        blocked_ns: UInt64Builder nullable,
        /// Runnable from its wake-up (or its preemption) until it ran, ns (null when no wake-up was recorded).
        runnable_ns: UInt64Builder nullable,
        /// What woke it: `thread` or `interrupt` (null when not recorded).
        waker_kind: StringBuilder nullable,
        /// Process of the waking thread.
        waker_pid: UInt64Builder nullable,
        /// The waking thread.
        waker_tid: UInt64Builder nullable,
        /// The CPU the waker ran on (an interrupt's CPU), when known.
        waker_cpu: UInt32Builder nullable,
        /// The interrupt handler that woke it (`-c kernel:irq`), when known.
        waker_irq: StringBuilder nullable,
    }
    state {
        /// Each thread's scheduling state so far.
        threads: HashMap<u64, ThreadState>,
        /// Each CPU's latest interrupt handlers: start, end, name.
        irqs: HashMap<u32, VecDeque<(u64, u64, Sym)>>,
    }
}

/// What a table knows of one thread between its records.
#[derive(Debug, Default)]
pub struct ThreadState {
    /// Its switch out, while it is off a CPU.
    out: Option<Out>,
    /// The CPU it last switched in on, and when.
    on: Option<(u32, u64)>,
    /// A wake-up read while it was on a CPU.
    early: Option<Woken>,
}

/// Interrupt handlers kept per CPU, to find the one a wake-up happened
/// in: a wake-up is read before the handler's slice (written as it
/// returns), and the woken thread runs after it returns.
const IRQS_KEPT: usize = 64;

/// A wake-up: when, by whom, and the CPU the waking thread was on.
#[derive(Clone, Copy, Debug)]
struct Woken {
    /// As recorded.
    at: u64,
    /// No earlier than the switch out it ended.
    ts: u64,
    waker: Option<u64>,
    waker_cpu: Option<u32>,
}

/// A switch out, and the wake-up that ended it when seen.
#[derive(Debug)]
struct Out {
    ts: u64,
    cpu: u32,
    pid: u64,
    state: OutState,
    next_tid: u64,
    woken: Option<Woken>,
}

impl Waits {
    fn switch(&mut self, s: &Switch, cx: &Context) {
        if s.prev_tid != 0 {
            let t = self.threads.entry(s.prev_tid).or_default();
            let early = t.early.take().filter(|w| {
                s.prev_state == OutState::Blocked
                    && w.ts.saturating_add(EARLY_WAKE_NS) >= s.ts
                    && t.on.is_none_or(|(_, on)| w.ts >= on)
            });
            t.out = Some(Out {
                ts: s.ts,
                cpu: s.cpu,
                pid: s.prev_pid,
                state: s.prev_state,
                next_tid: s.next_tid,
                woken: early.map(|w| Woken {
                    ts: w.ts.max(s.ts),
                    ..w
                }),
            });
            t.on = None;
        }
        if s.next_tid != 0 {
            let t = self.threads.entry(s.next_tid).or_default();
            t.on = Some((s.cpu, s.ts));
            t.early = None;
            if let Some(out) = t.out.take() {
                self.row(&out, s, cx);
            }
        }
    }

    fn wakeup(&mut self, w: &Wakeup) {
        let waker_cpu = match w.waker_tid {
            Some(t) => irq_cpu(t).or_else(|| self.threads.get(&t)?.on.map(|(cpu, _)| cpu)),
            None => None,
        };
        let woken = Woken {
            at: w.ts,
            ts: w.ts,
            waker: w.waker_tid,
            waker_cpu,
        };
        let t = self.threads.entry(w.tid).or_default();
        match &mut t.out {
            Some(out) if out.woken.is_none() && out.state != OutState::Runnable => {
                out.woken = Some(Woken {
                    ts: w.ts.max(out.ts),
                    ..woken
                });
            }
            Some(_) => {}
            None => t.early = Some(woken),
        }
    }

    /// The row of the wait `out` that the switch `back` ended.
    fn row(&mut self, out: &Out, back: &Switch, cx: &Context) {
        let end = back.ts.max(out.ts);
        self.ts.append_value(out.ts);
        self.dur.append_value(end - out.ts);
        self.pid
            .append_value(if out.pid != 0 { out.pid } else { back.next_pid });
        self.tid.append_value(back.next_tid);
        self.cpu.append_value(out.cpu);
        self.next_cpu.append_value(back.cpu);
        self.state.append_value(out.state.name());
        self.next_tid.append_value(out.next_tid);
        let woken = match out.state {
            OutState::Runnable => None,
            _ => out.woken,
        };
        let (blocked, runnable) = match (out.state, woken) {
            (OutState::Runnable, _) => (Some(0), Some(end - out.ts)),
            (_, Some(w)) => (Some(w.ts.min(end) - out.ts), Some(end - w.ts.min(end))),
            (_, None) => (None, None),
        };
        self.woken_ts.append_option(woken.map(|w| w.ts.min(end)));
        self.blocked_ns.append_option(blocked);
        self.runnable_ns.append_option(runnable);
        let cpu = woken.and_then(|w| w.waker_cpu);
        // A wake-up inside an interrupt handler is the interrupt's, whichever
        // thread it interrupted.
        let irq = woken.zip(cpu).and_then(|(w, cpu)| self.irq_at(cpu, w.at));
        let (kind, tid) = match woken.and_then(|w| w.waker) {
            None => (None, None),
            Some(t) if t == 0 || irq_cpu(t).is_some() || irq.is_some() => (Some("interrupt"), None),
            Some(t) => (Some("thread"), Some(t)),
        };
        self.waker_kind.append_option(kind);
        self.waker_pid
            .append_option(tid.and_then(|t| cx.process_of(t)));
        self.waker_tid.append_option(tid);
        self.waker_cpu.append_option(cpu);
        self.waker_irq
            .append_option(irq.map(|name| cx.strings.get(name)));
        self.rows += 1;
    }

    /// The innermost interrupt handler running on `cpu` at `ts`.
    fn irq_at(&self, cpu: u32, ts: u64) -> Option<Sym> {
        self.irqs
            .get(&cpu)?
            .iter()
            .filter(|(from, to, _)| *from <= ts && ts <= *to)
            .max_by_key(|(from, _, _)| *from)
            .map(|(_, _, name)| *name)
    }

    fn irq(&mut self, s: &Slice, cx: &Context) {
        let Some(cpu) = irq_cpu(s.track.tid) else {
            return;
        };
        if cx.strings.get(s.category) != KERNEL_IRQ {
            return;
        }
        let kept = self.irqs.entry(cpu).or_default();
        if kept.len() == IRQS_KEPT {
            kept.pop_front();
        }
        kept.push_back((s.ts, s.ts.saturating_add(s.dur), s.name));
    }
}

impl Table for Waits {
    fn wants(&self) -> Wants {
        Wants {
            switches: true,
            wakeups: true,
            durations: true,
            ..Wants::default()
        }
    }

    fn event(&mut self, event: &Event, cx: &Context) {
        match event {
            Event::Switch(s) => self.switch(s, cx),
            Event::Wakeup(w) => self.wakeup(w),
            Event::Slice(s) => self.irq(s, cx),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::testing::{build, column, cx};

    fn sw(ts: u64, cpu: u32, prev: u64, state: OutState, next: u64) -> Event {
        Event::Switch(Switch {
            ts,
            cpu,
            prev_pid: if prev == 0 { 0 } else { 10 },
            prev_tid: prev,
            prev_state: state,
            next_pid: if next == 0 { 0 } else { 10 },
            next_tid: next,
            prev_prio: None,
            next_prio: None,
            inferred: false,
            untraced: false,
        })
    }

    fn wake(ts: u64, tid: u64, waker: Option<u64>) -> Event {
        Event::Wakeup(Wakeup {
            ts,
            cpu: 0,
            pid: 10,
            tid,
            waker_tid: waker,
        })
    }

    #[test]
    fn blocked_preempted_and_interrupt_woken_waits() {
        let cx = cx();
        let events = [
            // 11 runs on CPU 0, 12 on CPU 1.
            sw(100, 0, 0, OutState::Runnable, 11),
            sw(100, 1, 0, OutState::Runnable, 12),
            // 11 blocks; 12 wakes it at 300; it runs again at 350 on CPU 1.
            sw(200, 0, 11, OutState::Blocked, 0),
            wake(300, 11, Some(12)),
            sw(350, 1, 12, OutState::Runnable, 11),
            // 12 was preempted by 11 and runs again at 500 on CPU 0.
            sw(500, 0, 0, OutState::Runnable, 12),
            // 11 blocks; an interrupt on CPU 1 wakes it.
            sw(600, 1, 11, OutState::Blocked, 0),
            wake(700, 11, Some(0x7FFF_0002)),
            sw(750, 1, 0, OutState::Runnable, 11),
            // 12 blocks, no wake-up recorded.
            sw(800, 0, 12, OutState::Blocked, 0),
            sw(900, 0, 0, OutState::Runnable, 12),
        ];
        let batch = build(&mut Waits::default(), &cx, &events);
        assert_eq!(column(&batch, "tid"), ["11", "12", "11", "12"]);
        assert_eq!(column(&batch, "ts"), ["200", "350", "600", "800"]);
        assert_eq!(column(&batch, "dur"), ["150", "150", "150", "100"]);
        assert_eq!(column(&batch, "state"), ["S", "R", "S", "S"]);
        assert_eq!(column(&batch, "cpu"), ["0", "1", "1", "0"]);
        assert_eq!(column(&batch, "next_cpu"), ["1", "0", "1", "0"]);
        assert_eq!(column(&batch, "next_tid"), ["0", "11", "0", "0"]);
        assert_eq!(column(&batch, "woken_ts"), ["300", "", "700", ""]);
        assert_eq!(column(&batch, "blocked_ns"), ["100", "0", "100", ""]);
        assert_eq!(column(&batch, "runnable_ns"), ["50", "150", "50", ""]);
        assert_eq!(
            column(&batch, "waker_kind"),
            ["thread", "", "interrupt", ""]
        );
        assert_eq!(column(&batch, "waker_tid"), ["12", "", "", ""]);
        // 12 was on CPU 1 when it woke 11; the interrupt was CPU 1's.
        assert_eq!(column(&batch, "waker_cpu"), ["1", "", "1", ""]);
    }

    #[test]
    fn a_wake_up_inside_an_interrupt_is_the_interrupts() {
        use crate::tables::testing::{sym, track};
        let mut cx = cx();
        let irq = |cx: &mut Context, ts: u64, dur: u64, cpu: u64, name: &str| {
            Event::Slice(Slice {
                id: ts,
                ts,
                dur,
                track: track(0x7FFF_0000, 0x7FFF_0001 + cpu),
                category: sym(cx, KERNEL_IRQ),
                name: sym(cx, name),
                depth: 0,
                parent: None,
                args: Vec::new(),
                unfinished: false,
            })
        };
        let events = [
            sw(100, 0, 0, OutState::Runnable, 11),
            sw(100, 1, 0, OutState::Runnable, 12),
            // 12 is interrupted on CPU 1 by a timer that wakes 11: the
            // wake-up names 12, but it is the timer's.
            sw(200, 0, 11, OutState::Blocked, 0),
            wake(300, 11, Some(12)),
            irq(&mut cx, 290, 20, 1, "timer"),
            sw(350, 0, 0, OutState::Runnable, 11),
            // Then 12 itself wakes it, outside any interrupt.
            sw(400, 0, 11, OutState::Blocked, 0),
            wake(500, 11, Some(12)),
            sw(550, 0, 0, OutState::Runnable, 11),
            // And the idle CPU 0's interrupt track names the handler too.
            sw(600, 0, 11, OutState::Blocked, 0),
            irq(&mut cx, 690, 20, 0, "vda"),
            wake(700, 11, Some(0x7FFF_0001)),
            sw(750, 0, 0, OutState::Runnable, 11),
        ];
        let batch = build(&mut Waits::default(), &cx, &events);
        assert_eq!(
            column(&batch, "waker_kind"),
            ["interrupt", "thread", "interrupt"]
        );
        assert_eq!(column(&batch, "waker_tid"), ["", "12", ""]);
        assert_eq!(column(&batch, "waker_cpu"), ["1", "1", "0"]);
        assert_eq!(column(&batch, "waker_irq"), ["timer", "", "vda"]);
    }

    #[test]
    fn a_wake_up_read_just_before_the_switch_out_is_its_wake_up() {
        let cx = cx();
        let events = [
            sw(100, 0, 0, OutState::Runnable, 11),
            // Woken while still on its CPU (the waking found it there), the
            // switch out read after.
            wake(190, 11, Some(12)),
            sw(200, 0, 11, OutState::Blocked, 0),
            sw(260, 0, 0, OutState::Runnable, 11),
            // A wake-up long before a later block is not its wake-up.
            wake(300, 11, Some(12)),
            sw(900_000, 0, 11, OutState::Blocked, 0),
            sw(900_100, 0, 0, OutState::Runnable, 11),
        ];
        let batch = build(&mut Waits::default(), &cx, &events);
        assert_eq!(column(&batch, "woken_ts"), ["200", ""]);
        assert_eq!(column(&batch, "blocked_ns"), ["0", ""]);
        assert_eq!(column(&batch, "runnable_ns"), ["60", ""]);
        assert_eq!(column(&batch, "waker_tid"), ["12", ""]);
    }
}
