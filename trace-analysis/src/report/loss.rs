//! The `loss` section: every drop the trace records, per provider and per
//! CPU, the other signs of missing events, and what they mean for the
//! figures of the other sections.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::table::{Cell, Column, Kind, Section, Table};
use super::{Finish, Name, arg};
use crate::event::Event;
use crate::kernel::{CallEnd, Syscall};
use crate::reader::{Context, ReadStats};

#[derive(Debug, Default)]
struct Dropped {
    /// Events dropped per CPU; `None`: on no one CPU (the kernel's
    /// `other`: events its programs skipped), or not said.
    per_cpu: BTreeMap<Option<u32>, u64>,
    /// Buffer-overflow notices (which say nothing of how many).
    overflows: u64,
}

/// A thread's runs that ended with a switch out the recorder inferred and
/// marked `untraced`.
#[derive(Debug, Default)]
struct Untraced {
    pid: u64,
    runs: u64,
    ns: u64,
}

/// Losses of a trace.
#[derive(Debug)]
pub struct Loss {
    irq_cat: Name,
    exit_lost: Name,
    providers: BTreeMap<(u32, String), Dropped>,
    syscall_entries_lost: u64,
    syscall_returns_lost: u64,
    irq_exits_lost: u64,
    inferred_switches: u64,
    /// Per CPU, when its thread was switched in.
    since: HashMap<u32, u64>,
    /// Threads a recorded switch switched out at least once.
    seen_out: HashSet<u64>,
    /// Per thread, its runs ended by an `untraced` switch.
    untraced: BTreeMap<u64, Untraced>,
}

impl Default for Loss {
    fn default() -> Self {
        Loss {
            irq_cat: Name::new(trace_common::category::KERNEL_IRQ),
            exit_lost: Name::new("exit_lost"),
            providers: BTreeMap::new(),
            syscall_entries_lost: 0,
            syscall_returns_lost: 0,
            irq_exits_lost: 0,
            inferred_switches: 0,
            since: HashMap::new(),
            seen_out: HashSet::new(),
            untraced: BTreeMap::new(),
        }
    }
}

impl Loss {
    /// Takes one event (losses are not filtered: they concern the whole
    /// trace).
    pub fn event(&mut self, e: &Event, cx: &Context) {
        match e {
            Event::Loss(l) => {
                let name = cx.provider_name(l.provider).to_owned();
                let d = self.providers.entry((l.provider, name)).or_default();
                if l.events.is_none() {
                    d.overflows += 1;
                }
                for drop in &l.per_cpu {
                    let n = d.per_cpu.entry(drop.cpu).or_default();
                    *n = n.saturating_add(drop.events);
                }
            }
            Event::Slice(s) => {
                if let Some(call) = Syscall::from_slice(s, cx) {
                    self.syscall_entries_lost += u64::from(call.entry_lost);
                    self.syscall_returns_lost += u64::from(call.end == CallEnd::ReturnLost);
                } else if self.irq_cat.is(s.category, cx) {
                    self.irq_exits_lost += u64::from(
                        arg(&s.args, &mut self.exit_lost, cx).is_some_and(|v| v.is_true()),
                    );
                }
            }
            Event::Switch(s) => self.switch(s),
            _ => {}
        }
    }

    fn switch(&mut self, s: &crate::event::Switch) {
        let began = self.since.insert(s.cpu, s.ts);
        if !s.inferred {
            self.seen_out.insert(s.prev_tid);
            return;
        }
        self.inferred_switches += 1;
        if s.untraced {
            let u = self.untraced.entry(s.prev_tid).or_default();
            u.pid = s.prev_pid;
            u.runs += 1;
            u.ns =
                u.ns.saturating_add(began.map_or(0, |b| s.ts.saturating_sub(b)));
        }
    }

    /// The threads whose runs ended `untraced` and that no recorded switch
    /// ever switched out (a thread whose one switch out was lost has
    /// others), longest first.
    fn kept_out(&self) -> Vec<(u64, &Untraced)> {
        let mut v: Vec<(u64, &Untraced)> = self
            .untraced
            .iter()
            .filter(|(tid, _)| !self.seen_out.contains(tid))
            .map(|(tid, u)| (*tid, u))
            .collect();
        v.sort_by(|a, b| b.1.ns.cmp(&a.1.ns).then(a.0.cmp(&b.0)));
        v
    }

    /// The section.
    pub fn finish(self, end: &Finish<'_>, stats: &ReadStats) -> Section {
        let mut section = Section::new("loss", "Loss");
        let mut drops = Table::new(
            "drops",
            "Events dropped per provider and CPU",
            vec![
                Column::new("provider", "provider", Kind::Text),
                Column::new("cpu", "CPU", Kind::Text),
                Column::new("events", "events dropped", Kind::Count),
            ],
        )
        .diffed(&["provider", "cpu"], &["events"]);
        let mut kernel_dropped = 0u64;
        let mut providers_overflowed = Vec::new();
        for ((id, name), d) in &self.providers {
            let who = if name.is_empty() {
                format!("provider {id}")
            } else {
                name.clone()
            };
            let mut sum = 0u64;
            // Each CPU in order, then the losses of none.
            let cpus = d.per_cpu.iter().filter(|(c, _)| c.is_some());
            for (cpu, n) in cpus.chain(d.per_cpu.iter().filter(|(c, _)| c.is_none())) {
                if *n > 0 {
                    let cpu = match cpu {
                        Some(c) => c.to_string(),
                        None if name == "kernel" => "none (skipped by the kernel)".into(),
                        None => "all".into(),
                    };
                    drops.push(vec![
                        Cell::Text(who.clone()),
                        Cell::Text(cpu),
                        Cell::Count(*n),
                    ]);
                    sum = sum.saturating_add(*n);
                }
            }
            if d.overflows > 0 && sum == 0 {
                drops.push(vec![
                    Cell::Text(who.clone()),
                    Cell::Text("all".into()),
                    Cell::Empty,
                ]);
                providers_overflowed.push(who.clone());
            }
            if name == "kernel" {
                kernel_dropped = kernel_dropped.saturating_add(sum);
            } else if sum > 0 {
                providers_overflowed.push(who.clone());
            }
        }
        drops.note("Counts are as the recorder counted them when its buffers were full; an empty count means the provider said its buffer overflowed without saying how much.");
        section.tables.push(drops);

        let mut signs = Table::new(
            "signs",
            "Other signs of missing events",
            vec![
                Column::new("what", "what", Kind::Text),
                Column::new("count", "count", Kind::Count),
            ],
        )
        .diffed(&["what"], &["count"]);
        let mut row =
            |what: &str, n: u64| signs.push(vec![Cell::Text(what.into()), Cell::Count(n)]);
        row(
            "system calls whose entry was lost",
            self.syscall_entries_lost,
        );
        row(
            "system calls whose return was lost",
            self.syscall_returns_lost,
        );
        row("interrupts whose exit was lost", self.irq_exits_lost);
        row(
            "context switches inferred by the recorder",
            self.inferred_switches,
        );
        let kept_out = self.kept_out();
        row(
            "threads kept out of tracing by the kernel",
            kept_out.len() as u64,
        );
        row("malformed records skipped", stats.errors);
        row("ends without a begin", stats.unmatched_ends);
        row(
            "names not kept (too many distinct names)",
            stats.names_refused,
        );
        section.tables.push(signs);

        let mut untraced = Table::new(
            "untraced",
            "Threads kept out of tracing by the kernel",
            vec![
                Column::new("tid", "tid", Kind::Int),
                Column::new("thread", "thread", Kind::Text),
                Column::new("pid", "pid", Kind::Int),
                Column::new("process", "process", Kind::Text),
                Column::new("runs", "runs", Kind::Count),
                Column::new("on_cpu", "on CPU (at most)", Kind::Duration),
            ],
        )
        .diffed(&["process", "thread"], &["runs", "on_cpu"])
        .per(&["pid", "tid"], "threads");
        for (tid, u) in &kept_out {
            let (pid, process) = end.process_of(u.pid, *tid);
            untraced.push(vec![
                Cell::Int(*tid as i64),
                end.thread(*tid).into(),
                pid,
                process,
                Cell::Count(u.runs),
                Cell::Ns(u.ns),
            ]);
        }
        untraced.truncate(end.top);
        untraced.note("Switched in by recorded switches, never out: each run ended where another task's event showed the CPU had moved on, with no event of the thread's own before (a recording of every process says so; under -p or --cgroup nothing is listed).");
        section.tables.push(untraced);

        let mut said = Vec::new();
        if kernel_dropped > 0 {
            said.push(format!(
                "The kernel provider dropped {kernel_dropped} events: counts of system calls, switches, wake-ups and block requests may be low, and latencies computed from pairs of events (wake-up to running, calls whose entry or return was lost) may be missing or too long."
            ));
        }
        for p in &providers_overflowed {
            said.push(format!(
                "Provider {p} filled its buffer: some of its events are missing, so its counts are low and durations whose begin or end was lost are missing."
            ));
        }
        if self.inferred_switches > 0 {
            said.push(format!(
                "{} context switches were not seen but inferred from what ran next: those switches' voluntary or involuntary kind is unknown, and the threads they switched out were traced partly (see the CPU section).",
                self.inferred_switches
            ));
        }
        if !kept_out.is_empty() {
            let runs: u64 = kept_out.iter().map(|(_, u)| u.runs).sum();
            let times = match runs {
                1 => "once".to_owned(),
                n => format!("{n} times"),
            };
            let threads = match kept_out.len() {
                1 => "1 thread".to_owned(),
                n => format!("{n} threads"),
            };
            said.push(format!(
                "{threads} ran {times} with none of their events recorded (see untraced): the kernel keeps them out of tracing, as some virtual machines do their agent. What happened in their context is missing: their system calls, and the interrupts their CPU took meanwhile (a block request completed then is left unfinished)."
            ));
        }
        if stats.errors > 0 {
            said.push(format!(
                "{} records could not be decoded and were skipped; what they held is missing from every figure.",
                stats.errors
            ));
        }
        if stats.names_refused > 0 {
            said.push(format!(
                "The trace has more distinct names than are kept ({} strings or {} MiB): {} names, categories or argument names read as \"{}\", so rows that differ only in them are merged.",
                crate::strings::MAX_STRINGS,
                crate::strings::MAX_BYTES >> 20,
                stats.names_refused,
                crate::strings::TOO_MANY_TEXT
            ));
        }
        if said.is_empty() {
            said.push("Nothing was lost: the figures count every event the recorder saw.".into());
        }
        section.notes = said;
        section
    }
}

#[cfg(test)]
mod tests {
    use trace_common::fxt::{Arg, ArgValue, EventKind, Record, provider_event};

    use crate::report::testing::Fxt;
    use crate::report::{Cell, Options, SectionId};

    #[test]
    fn drops_per_cpu_and_what_they_mean() {
        let mut t = Fxt::new();
        let counter = |t: &mut Fxt, ts, a: u64, b: u64, other: u64| {
            t.event(
                ts,
                0x7FFD_0000,
                0x7FFD_0001,
                "kernel",
                "dropped_events",
                EventKind::Counter { id: 0 },
                vec![
                    Arg::new("cpu0", ArgValue::Uint64(a)),
                    Arg::new("cpu1", ArgValue::Uint64(b)),
                    Arg::new("other", ArgValue::Uint64(other)),
                ],
            );
        };
        counter(&mut t, 0, 0, 0, 0);
        counter(&mut t, 100, 5, 7, 2);
        // Running totals: a later sample adds only what grew.
        counter(&mut t, 200, 5, 9, 2);
        t.record(&Record::ProviderEvent {
            id: 1,
            event: provider_event::BUFFER_OVERFLOW,
        });
        t.slice(
            10,
            20,
            3,
            3,
            "kernel:syscall",
            "read",
            vec![Arg::new("return_lost", ArgValue::Bool(true))],
        );
        t.provider(2, "app");
        t.record(&Record::ProviderEvent {
            id: 2,
            event: provider_event::BUFFER_OVERFLOW,
        });
        let r = t.report(Options {
            sections: vec![SectionId::Loss],
            ..Options::default()
        });
        let s = r.section("loss").unwrap();
        let d = s.table("drops").unwrap();
        assert_eq!(d.rows.len(), 4, "{:?}", d.rows);
        assert_eq!(d.cell(0, "cpu"), Some(&Cell::Text("0".into())));
        assert_eq!(d.cell(0, "events"), Some(&Cell::Count(5)));
        assert_eq!(d.cell(1, "events"), Some(&Cell::Count(9)));
        assert_eq!(d.cell(2, "events"), Some(&Cell::Count(2)));
        assert_eq!(
            d.cell(2, "cpu"),
            Some(&Cell::Text("none (skipped by the kernel)".into()))
        );
        assert_eq!(d.cell(3, "provider"), Some(&Cell::Text("app".into())));
        assert_eq!(d.cell(3, "events"), Some(&Cell::Empty));
        let signs = s.table("signs").unwrap();
        assert_eq!(signs.cell(1, "count"), Some(&Cell::Count(1)));
        assert!(
            s.notes[0].starts_with("The kernel provider dropped 16 events"),
            "{:?}",
            s.notes
        );
        assert!(
            s.notes[1].starts_with("Provider app filled its buffer"),
            "{:?}",
            s.notes
        );
    }

    #[test]
    fn threads_never_seen_switching_out_are_listed_as_kept_out_of_tracing() {
        let mut t = Fxt::new();
        t.process(1, "agent").thread(1, 75, "worker");
        t.process(20, "app").thread(20, 21, "main");
        // 75 runs twice on CPU 0, each run ended by an untraced switch.
        t.switch(100, 0, 0, 0, 75)
            .untraced_switch(400, 0, 75, 0)
            .switch(1_000, 0, 0, 0, 75)
            .untraced_switch(1_100, 0, 75, 0);
        // 21 lost one switch out, but others were recorded: not listed.
        t.switch(100, 1, 0, 0, 21)
            .untraced_switch(200, 1, 21, 0)
            .switch(300, 1, 0, 0, 21)
            .switch(500, 1, 21, 1, 0);
        let r = t.report(Options {
            sections: vec![SectionId::Loss],
            ..Options::default()
        });
        let s = r.section("loss").unwrap();
        let u = s.table("untraced").unwrap();
        assert_eq!(u.rows.len(), 1, "{:?}", u.rows);
        assert_eq!(u.cell(0, "tid"), Some(&Cell::Int(75)));
        assert_eq!(u.cell(0, "process"), Some(&Cell::Text("agent".into())));
        assert_eq!(u.cell(0, "runs"), Some(&Cell::Count(2)));
        assert_eq!(u.cell(0, "on_cpu"), Some(&Cell::Ns(400)));
        assert!(
            s.notes
                .iter()
                .any(|n| n.starts_with("1 thread ran 2 times with none of their events")),
            "{:?}",
            s.notes
        );
    }
}
