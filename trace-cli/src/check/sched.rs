//! Scheduling records as Perfetto's FXT parser turns them into CPU slices
//! and thread states (`SwitchFrom`, `SwitchTo`, `Wake` in
//! `fuchsia_trace_parser.cc`), and the continuity they rely on.

use std::collections::HashMap;

use trace_common::fxt::wire::IDLE_WEIGHT;

use super::Names;
use super::findings::{Findings, Kind};

/// What one CPU last switched in.
#[derive(Clone, Copy, Debug)]
struct Incoming {
    tid: u64,
    ts: i64,
    offset: u64,
}

/// Per-CPU and per-thread scheduling state.
#[derive(Debug, Default)]
pub struct Sched {
    cpus: HashMap<u32, Incoming>,
    /// The CPU each thread runs on (an open CPU slice), by koid.
    running: HashMap<u64, (u32, i64)>,
}

/// One context switch, whichever record it came from.
pub struct Switch {
    pub ts: i64,
    pub offset: u64,
    pub cpu: u32,
    pub outgoing: u64,
    pub incoming: u64,
    pub outgoing_idle: bool,
    pub incoming_idle: bool,
}

impl Sched {
    /// A context switch.
    pub fn switch(&mut self, s: Switch, names: &Names<'_>, findings: &mut Findings) {
        if let Some(prev) = self.cpus.get(&s.cpu).copied()
            && prev.tid != s.outgoing
        {
            findings.add(Kind::SwitchContinuity, s.offset, Some(s.ts), || {
                format!(
                    "CPU {} switches out {}, but {} was switched in at {} (offset {:#x})",
                    s.cpu,
                    names.thread(s.outgoing),
                    names.thread(prev.tid),
                    super::fmt_ts(prev.ts),
                    prev.offset
                )
            });
        }
        self.cpus.insert(
            s.cpu,
            Incoming {
                tid: s.incoming,
                ts: s.ts,
                offset: s.offset,
            },
        );
        if !s.outgoing_idle {
            self.running.remove(&s.outgoing);
        }
        if !s.incoming_idle {
            if let Some((cpu, since)) = self.running.get(&s.incoming).copied() {
                findings.add(Kind::SwitchInWhileRunning, s.offset, Some(s.ts), || {
                    format!(
                        "{} switched in on CPU {} while running on CPU {cpu} since {}",
                        names.thread(s.incoming),
                        s.cpu,
                        super::fmt_ts(since)
                    )
                });
            }
            self.running.insert(s.incoming, (s.cpu, s.ts));
        }
    }

    /// A wake-up of `tid` by `waker` (if named); `weight` is the record's.
    #[expect(clippy::too_many_arguments, reason = "a switch's fields, each checked")]
    pub fn wakeup(
        &mut self,
        ts: i64,
        offset: u64,
        tid: u64,
        weight: i32,
        waker: Option<u64>,
        names: &Names<'_>,
        findings: &mut Findings,
    ) {
        if weight == IDLE_WEIGHT {
            return;
        }
        if waker == Some(0) {
            findings.add(Kind::WakerZero, offset, Some(ts), || {
                format!("wake-up of {}", names.thread(tid))
            });
        }
        if let Some((cpu, since)) = self.running.get(&tid).copied() {
            findings.add(Kind::WakeupOfRunning, offset, Some(ts), || {
                format!(
                    "{} is running on CPU {cpu} since {}",
                    names.thread(tid),
                    super::fmt_ts(since)
                )
            });
        }
    }
}
