//! The `loss` section: every drop the trace records, per provider and per
//! CPU, the other signs of missing events, and what they mean for the
//! figures of the other sections.

use std::collections::BTreeMap;

use super::table::{Cell, Column, Kind, Section, Table};
use super::{Finish, Name, arg};
use crate::event::Event;
use crate::reader::{Context, ReadStats};

#[derive(Debug, Default)]
struct Dropped {
    /// Events dropped per CPU (the largest value of each cumulative
    /// count).
    per_cpu: BTreeMap<u32, u64>,
    /// Dropped with no CPU (the kernel's `other`: events its programs
    /// skipped).
    other: u64,
    /// Total when no per-CPU split was given.
    total: u64,
    /// Buffer-overflow notices (which say nothing of how many).
    overflows: u64,
}

/// Losses of a trace.
#[derive(Debug)]
pub struct Loss {
    kernel_cat: Name,
    dropped_events: Name,
    other: Name,
    syscall_cat: Name,
    irq_cat: Name,
    entry_lost: Name,
    return_lost: Name,
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
            kernel_cat: Name::new("kernel"),
            dropped_events: Name::new("dropped_events"),
            other: Name::new("other"),
            syscall_cat: Name::new(trace_common::category::KERNEL_SYSCALL),
            irq_cat: Name::new(trace_common::category::KERNEL_IRQ),
            entry_lost: Name::new("entry_lost"),
            return_lost: Name::new("return_lost"),
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
                match l.events {
                    None => d.overflows += 1,
                    Some(n) if l.per_cpu.is_empty() => d.total = d.total.max(n),
                    Some(_) => {
                        for &(cpu, n) in &l.per_cpu {
                            let c = d.per_cpu.entry(cpu).or_default();
                            *c = (*c).max(n);
                        }
                    }
                }
            }
            Event::Counter(c)
                if self.kernel_cat.is(c.category, cx) && self.dropped_events.is(c.name, cx) =>
            {
                if let Some(n) = arg(&c.args, &mut self.other, cx)
                    .and_then(|v| v.as_i64())
                    .and_then(|v| u64::try_from(v).ok())
                {
                    let name = cx.provider_name(c.track.provider).to_owned();
                    let d = self.providers.entry((c.track.provider, name)).or_default();
                    d.other = d.other.max(n);
                }
            }
            Event::Slice(s) if self.syscall_cat.is(s.category, cx) => {
                let lost = |n: &mut Name| arg(&s.args, n, cx).is_some_and(|v| v.is_true());
                self.syscall_entries_lost += u64::from(lost(&mut self.entry_lost));
                self.syscall_returns_lost += u64::from(lost(&mut self.return_lost));
            }
            Event::Slice(s) if self.irq_cat.is(s.category, cx) => {
                self.irq_exits_lost +=
                    u64::from(arg(&s.args, &mut self.exit_lost, cx).is_some_and(|v| v.is_true()));
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
            for (cpu, n) in &d.per_cpu {
                if *n > 0 {
                    drops.push(vec![
                        Cell::Text(who.clone()),
                        Cell::Text(cpu.to_string()),
                        Cell::Count(*n),
                    ]);
                    sum = sum.saturating_add(*n);
                }
            }
            if d.other > 0 {
                drops.push(vec![
                    Cell::Text(who.clone()),
                    Cell::Text("none (skipped by the kernel)".into()),
                    Cell::Count(d.other),
                ]);
                sum = sum.saturating_add(d.other);
            }
            if d.total > 0 && d.per_cpu.is_empty() {
                drops.push(vec![
                    Cell::Text(who.clone()),
                    Cell::Text("all".into()),
                    Cell::Count(d.total),
                ]);
                sum = sum.saturating_add(d.total);
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
                "{} context switches were not seen but inferred from what ran next: on-CPU times stay right, but those switches' voluntary or involuntary kind is unknown.",
                self.inferred_switches
            ));
        }
        if stats.errors > 0 {
            said.push(format!(
                "{} records could not be decoded and were skipped; what they held is missing from every figure.",
                stats.errors
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
        assert_eq!(d.cell(1, "events"), Some(&Cell::Count(7)));
        assert_eq!(d.cell(2, "events"), Some(&Cell::Count(2)));
        assert_eq!(d.cell(3, "provider"), Some(&Cell::Text("app".into())));
        assert_eq!(d.cell(3, "events"), Some(&Cell::Empty));
        let signs = s.table("signs").unwrap();
        assert_eq!(signs.cell(1, "count"), Some(&Cell::Count(1)));
        assert!(
            s.notes[0].starts_with("The kernel provider dropped 14 events"),
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
