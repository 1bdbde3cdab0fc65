//! The `probes` section: per uprobe, USDT probe and tracepoint recorded by
//! name (`-e`), its hits and, for those with durations, their total and
//! percentiles.

use foldhash::HashMap;

use super::Finish;
use super::filter::Filter;
use super::histogram::Latency;
use super::table::{Cell, Column, Kind, Section, Table};
use crate::event::{Event, Track};
use crate::reader::Context;
use crate::strings::Sym;

#[derive(Debug, Default)]
struct Probe {
    hits: u64,
    latency: Latency,
}

/// Probe events of a trace.
#[derive(Debug, Default)]
pub struct Probes {
    /// (kind, category, name).
    probes: HashMap<(&'static str, Sym, Sym), Probe>,
    seen: u64,
}

/// What a kernel provider's category says the event is: a uprobe, a USDT
/// probe, a tracepoint by name, or none of them.
fn kind(track: &Track, category: &str, cx: &Context) -> Option<&'static str> {
    if cx.provider_name(track.provider) != "kernel" {
        return None;
    }
    match category {
        "uprobe" => Some("uprobe"),
        "usdt" => Some("usdt"),
        c if c.starts_with("kernel") || c.is_empty() => None,
        _ => Some("tracepoint"),
    }
}

impl Probes {
    /// Takes one event.
    pub fn event(&mut self, e: &Event, cx: &Context, f: &mut Filter) {
        let (track, ts, category, name, dur) = match e {
            Event::Slice(s) => (&s.track, s.ts, s.category, s.name, Some(s.dur)),
            Event::Instant(i) => (&i.track, i.ts, i.category, i.name, None),
            _ => return,
        };
        let Some(kind) = kind(track, cx.strings.get(category), cx) else {
            return;
        };
        self.seen += 1;
        if !f.at(ts) || !f.thread(track.pid, track.tid, cx) {
            return;
        }
        let p = self.probes.entry((kind, category, name)).or_default();
        p.hits += 1;
        if let Some(d) = dur {
            p.latency.record(d);
        }
    }

    /// The section.
    pub fn finish(self, end: &Finish<'_>) -> Section {
        let mut section = Section::new("probes", "Probes");
        if self.seen == 0 {
            section.notes.push(
                "The trace has no probe events (record with --uprobe, --usdt or -e to see them)."
                    .into(),
            );
            return section;
        }
        let s = |sym: Sym| end.cx.strings.get(sym).to_owned();
        let mut rows: Vec<((&str, String, String), Probe)> = self
            .probes
            .into_iter()
            .map(|((k, c, n), p)| ((k, s(c), s(n)), p))
            .collect();
        rows.sort_by(|a, b| b.1.hits.cmp(&a.1.hits).then_with(|| a.0.cmp(&b.0)));
        let mut table = Table::new(
            "probes",
            "Probes by hits",
            vec![
                Column::new("kind", "kind", Kind::Text),
                Column::new("category", "category", Kind::Text),
                Column::new("probe", "probe", Kind::Text),
                Column::new("hits", "hits", Kind::Count),
                Column::new("total", "total", Kind::Duration),
                Column::new("p50", "p50", Kind::Duration),
                Column::new("p99", "p99", Kind::Duration),
                Column::new("max", "max", Kind::Duration),
            ],
        )
        .diffed(&["kind", "category", "probe"], &["hits", "total", "p99"])
        .peaks(&["p99"]);
        for ((k, c, n), p) in rows {
            let l = &p.latency;
            let timed = l.count > 0;
            table.push(vec![
                Cell::Text(k.to_owned()),
                Cell::Text(c),
                Cell::Text(n),
                Cell::Count(p.hits),
                if timed { Cell::Ns(l.sum) } else { Cell::Empty },
                l.cell(0.5),
                l.cell(0.99),
                l.max_cell(),
            ]);
        }
        table.truncate(end.top);
        table.note("A uprobe's duration is its function's call, entry to return; USDT probes and single tracepoints are points in time.");
        section.tables.push(table);
        section
    }
}

#[cfg(test)]
mod tests {
    use trace_common::fxt::EventKind;

    use crate::report::testing::Fxt;
    use crate::report::{Cell, Options, SectionId};

    #[test]
    fn uprobes_usdt_and_tracepoints() {
        let mut t = Fxt::new();
        for i in 0..3u64 {
            t.slice(
                i * 100,
                i * 100 + 10 * (i + 1),
                5,
                5,
                "uprobe",
                "malloc",
                vec![],
            );
        }
        t.event(1, 5, 5, "usdt", "app:start", EventKind::Instant, vec![]);
        t.event(
            2,
            5,
            5,
            "sched",
            "sched_migrate_task",
            EventKind::Instant,
            vec![],
        );
        t.slice(0, 5, 5, 5, "kernel:syscall", "read", vec![]);
        let r = t.report(Options {
            sections: vec![SectionId::Probes],
            ..Options::default()
        });
        let p = r.section("probes").unwrap().table("probes").unwrap();
        assert_eq!(p.rows.len(), 3);
        assert_eq!(p.cell(0, "probe"), Some(&Cell::Text("malloc".into())));
        assert_eq!(p.cell(0, "hits"), Some(&Cell::Count(3)));
        assert_eq!(p.cell(0, "max"), Some(&Cell::Ns(30)));
        assert_eq!(p.cell(2, "kind"), Some(&Cell::Text("usdt".into())));
        assert_eq!(p.cell(2, "total"), Some(&Cell::Empty));
    }
}
