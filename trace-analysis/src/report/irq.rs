//! The `irq` section: time in hard interrupt handlers and softirqs per CPU,
//! and per handler: count, total and latency percentiles.

use foldhash::HashMap;

use super::filter::Filter;
use super::histogram::Latency;
use super::table::{Cell, Column, Kind, Section, Table};
use super::{Finish, Name, arg};
use crate::event::Event;
use crate::reader::Context;
use crate::strings::Sym;

/// The pseudo-thread of CPU 0's interrupts; CPU n's is this plus n.
const CPU0_IRQ_KOID: u64 = 0x7FFF_0001;

#[derive(Debug, Default)]
struct PerCpu {
    hard: u64,
    hard_count: u64,
    soft: u64,
    soft_count: u64,
}

/// Interrupts of a trace.
#[derive(Debug)]
pub struct Irq {
    category: Name,
    vec: Name,
    cpus: HashMap<u64, PerCpu>,
    handlers: HashMap<(Sym, bool), Latency>,
    seen: u64,
}

impl Default for Irq {
    fn default() -> Self {
        Irq {
            category: Name::new(trace_common::category::KERNEL_IRQ),
            vec: Name::new("vec"),
            cpus: HashMap::default(),
            handlers: HashMap::default(),
            seen: 0,
        }
    }
}

impl Irq {
    /// Takes one event.
    pub fn event(&mut self, e: &Event, cx: &Context, f: &mut Filter) {
        let Event::Slice(s) = e else { return };
        if !self.category.is(s.category, cx) {
            return;
        }
        self.seen += 1;
        let d = f.overlap(s.ts, s.ts.saturating_add(s.dur));
        if d == 0 && !f.at(s.ts) {
            return;
        }
        let soft = arg(&s.args, &mut self.vec, cx).is_some()
            || cx.strings.get(s.name).starts_with("softirq");
        let cpu = s.track.tid.saturating_sub(CPU0_IRQ_KOID);
        let c = self.cpus.entry(cpu).or_default();
        if soft {
            c.soft = c.soft.saturating_add(d);
            c.soft_count += 1;
        } else {
            c.hard = c.hard.saturating_add(d);
            c.hard_count += 1;
        }
        self.handlers
            .entry((s.name, soft))
            .or_default()
            .record(s.dur);
    }

    /// The section.
    pub fn finish(self, end: &Finish<'_>) -> Section {
        let mut section = Section::new("irq", "Interrupts");
        if self.seen == 0 {
            section
                .notes
                .push("The trace has no interrupts (record kernel:irq to see them).".into());
            return section;
        }
        let span = end.info.span();
        let pct = |v: u64| {
            if span == 0 {
                Cell::Empty
            } else {
                Cell::Percent(v as f64 * 100.0 / span as f64)
            }
        };
        let mut cpus: Vec<(&u64, &PerCpu)> = self.cpus.iter().collect();
        cpus.sort_by_key(|(c, _)| **c);
        let mut table = Table::new(
            "cpus",
            "Interrupt time per CPU",
            vec![
                Column::new("cpu", "CPU", Kind::Int),
                Column::new("hardirq", "hard IRQ", Kind::Duration),
                Column::new("hardirq_pct", "hard IRQ %", Kind::Percent),
                Column::new("hardirqs", "hard IRQs", Kind::Count),
                Column::new("softirq", "softirq", Kind::Duration),
                Column::new("softirq_pct", "softirq %", Kind::Percent),
                Column::new("softirqs", "softirqs", Kind::Count),
            ],
        )
        .diffed(&["cpu"], &["softirq", "hardirq", "hardirqs", "softirqs"]);
        for (cpu, c) in cpus {
            table.push(vec![
                Cell::Int(*cpu as i64),
                Cell::Ns(c.hard),
                pct(c.hard),
                Cell::Count(c.hard_count),
                Cell::Ns(c.soft),
                pct(c.soft),
                Cell::Count(c.soft_count),
            ]);
        }
        table.note(
            "Percentages are of the time the trace covers. Under a pid filter interrupts are not recorded, and not filtered here.",
        );
        section.tables.push(table);

        let mut handlers: Vec<(String, bool, &Latency)> = self
            .handlers
            .iter()
            .map(|((n, soft), l)| (end.cx.strings.get(*n).to_owned(), *soft, l))
            .collect();
        handlers.sort_by(|a, b| b.2.sum.cmp(&a.2.sum).then_with(|| a.0.cmp(&b.0)));
        let mut table = Table::new(
            "handlers",
            "Interrupt handlers by total time",
            vec![
                Column::new("handler", "handler", Kind::Text),
                Column::new("kind", "kind", Kind::Text),
                Column::new("count", "count", Kind::Count),
                Column::new("total", "total", Kind::Duration),
                Column::new("p50", "p50", Kind::Duration),
                Column::new("p99", "p99", Kind::Duration),
                Column::new("max", "max", Kind::Duration),
            ],
        )
        .diffed(&["handler", "kind"], &["total", "count", "p99"])
        .peaks(&["p99"]);
        for (name, soft, l) in handlers {
            table.push(vec![
                Cell::Text(name),
                Cell::Text(if soft { "softirq" } else { "hard" }.into()),
                Cell::Count(l.count),
                Cell::Ns(l.sum),
                l.cell(0.5),
                l.cell(0.99),
                l.max_cell(),
            ]);
        }
        table.truncate(end.top);
        section.tables.push(table);
        section
    }
}

#[cfg(test)]
mod tests {
    use trace_common::fxt::{Arg, ArgValue};

    use crate::report::testing::Fxt;
    use crate::report::{Cell, Options, SectionId};

    #[test]
    fn hard_and_soft_interrupt_time_per_cpu() {
        let mut t = Fxt::new();
        let cpu1 = 0x7FFF_0002;
        t.slice(
            0,
            100,
            0x7FFF_0000,
            cpu1,
            "kernel:irq",
            "virtio0",
            vec![Arg::new("irq", ArgValue::Int32(11))],
        );
        t.slice(
            200,
            500,
            0x7FFF_0000,
            cpu1,
            "kernel:irq",
            "softirq NET_RX",
            vec![Arg::new("vec", ArgValue::Uint32(3))],
        );
        t.slice(
            600,
            1000,
            0x7FFF_0000,
            cpu1,
            "kernel:irq",
            "softirq NET_RX",
            vec![Arg::new("vec", ArgValue::Uint32(3))],
        );
        let r = t.report(Options {
            sections: vec![SectionId::Irq],
            ..Options::default()
        });
        let s = r.section("irq").unwrap();
        let c = s.table("cpus").unwrap();
        assert_eq!(c.cell(0, "cpu"), Some(&Cell::Int(1)));
        assert_eq!(c.cell(0, "hardirq"), Some(&Cell::Ns(100)));
        assert_eq!(c.cell(0, "softirq"), Some(&Cell::Ns(700)));
        assert_eq!(c.cell(0, "softirq_pct"), Some(&Cell::Percent(70.0)));
        let h = s.table("handlers").unwrap();
        assert_eq!(
            h.cell(0, "handler"),
            Some(&Cell::Text("softirq NET_RX".into()))
        );
        assert_eq!(h.cell(0, "count"), Some(&Cell::Count(2)));
    }
}
