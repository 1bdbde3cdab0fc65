//! The `loss` section: every drop the trace records, per provider and per
//! CPU, the other signs of missing events, and what they mean for the
//! figures of the other sections.

use std::collections::BTreeMap;

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
            Event::Switch(s) if s.inferred => self.inferred_switches += 1,
            _ => {}
        }
    }

    /// The section.
    pub fn finish(self, _end: &Finish<'_>, stats: &ReadStats) -> Section {
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
        row("malformed records skipped", stats.errors);
        row("ends without a begin", stats.unmatched_ends);
        row(
            "names not kept (too many distinct names)",
            stats.names_refused,
        );
        section.tables.push(signs);

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
}
