//! The `userspace` section: what instrumented programs wrote, per provider
//! and event name: durations (count, total, p50, p99, max), instants,
//! counters (last and peak values), async spans (latency), and tasks: the
//! async spans of spans polled more than once (the `tracing` layer's, tokio
//! tasks), with their time polled and idle and their scheduling delays.

use foldhash::HashMap;

use super::Finish;
use super::filter::Filter;
use super::histogram::Latency;
use super::table::{Cell, Column, Kind, Section, Table};
use crate::event::{Event, Track};
use crate::reader::Context;
use crate::strings::Sym;

/// Provider, category, name.
type Key = (u32, Sym, Sym);

#[derive(Debug, Default)]
struct Spans {
    latency: Latency,
    unfinished: u64,
}

#[derive(Debug)]
struct Series {
    samples: u64,
    last: f64,
    peak: f64,
    min: f64,
}

/// Async spans of polled tasks: the arguments the `tracing` layer gives
/// them at their end.
#[derive(Debug, Default)]
struct Tasks {
    latency: Latency,
    polls: u64,
    busy: u64,
    idle: u64,
    /// Each task's mean scheduling delay (from a wake to its poll).
    delay: Latency,
    max_delay: u64,
}

/// The arguments a task's async span carries.
const TASK_ARGS: [&str; 5] = ["polls", "busy_ns", "idle_ns", "sched_delay_ns", "wakes"];

/// Userspace events of a trace.
#[derive(Debug, Default)]
pub struct Userspace {
    durations: HashMap<Key, Spans>,
    instants: HashMap<Key, u64>,
    counters: HashMap<(u32, Sym, Sym), Series>,
    asyncs: HashMap<Key, Spans>,
    tasks: HashMap<Key, Tasks>,
    seen: u64,
}

/// The task figures of async span `args`, if it is a task's.
fn task_figures(args: &crate::event::Args, cx: &Context) -> Option<([u64; 5], u64)> {
    let get = |name: &str| {
        cx.strings
            .lookup(name)
            .and_then(|sym| crate::event::arg(args, sym))
            .and_then(|v| v.as_i64())
            .and_then(|v| u64::try_from(v).ok())
    };
    let mut out = [0; 5];
    for (slot, name) in out.iter_mut().zip(TASK_ARGS) {
        *slot = get(name)?;
    }
    Some((out, get("max_sched_delay_ns").unwrap_or(0)))
}

fn is_kernel(track: &Track, cx: &Context) -> bool {
    cx.provider_name(track.provider) == "kernel"
}

impl Userspace {
    /// Takes one event.
    pub fn event(&mut self, e: &Event, cx: &Context, f: &mut Filter) {
        let (track, ts) = match e {
            Event::Slice(s) => (&s.track, s.ts),
            Event::Instant(i) => (&i.track, i.ts),
            Event::Counter(c) => (&c.track, c.ts),
            Event::Async(a) => (&a.track, a.ts),
            _ => return,
        };
        if is_kernel(track, cx) {
            return;
        }
        self.seen += 1;
        if !f.at(ts) || !f.thread(track.pid, track.tid, cx) {
            return;
        }
        match e {
            Event::Slice(s) => {
                let d = self
                    .durations
                    .entry((track.provider, s.category, s.name))
                    .or_default();
                d.latency.record(s.dur);
                d.unfinished += u64::from(s.unfinished);
            }
            Event::Instant(i) => {
                *self
                    .instants
                    .entry((track.provider, i.category, i.name))
                    .or_default() += 1;
            }
            Event::Counter(c) => {
                for (series, v) in &c.args {
                    let Some(v) = v.as_f64() else { continue };
                    let s = self
                        .counters
                        .entry((track.provider, c.name, *series))
                        .or_insert(Series {
                            samples: 0,
                            last: v,
                            peak: v,
                            min: v,
                        });
                    s.samples += 1;
                    s.last = v;
                    s.peak = s.peak.max(v);
                    s.min = s.min.min(v);
                }
            }
            Event::Async(a) => {
                let d = self
                    .asyncs
                    .entry((track.provider, a.category, a.name))
                    .or_default();
                d.latency.record(a.dur);
                d.unfinished += u64::from(a.unfinished);
                if let Some(([polls, busy, idle, delay, wakes], max_delay)) =
                    task_figures(&a.args, cx)
                {
                    let t = self
                        .tasks
                        .entry((track.provider, a.category, a.name))
                        .or_default();
                    t.latency.record(a.dur);
                    t.polls += polls;
                    t.busy += busy;
                    t.idle += idle;
                    if let Some(mean) = delay.checked_div(wakes) {
                        t.delay.record(mean);
                    }
                    t.max_delay = t.max_delay.max(max_delay);
                }
            }
            _ => {}
        }
    }

    /// The section.
    pub fn finish(self, end: &Finish<'_>) -> Section {
        let mut section = Section::new("userspace", "Userspace providers");
        if self.seen == 0 {
            section
                .notes
                .push("The trace has no events of userspace providers.".into());
            return section;
        }
        let s = |sym: Sym| end.cx.strings.get(sym).to_owned();
        let provider = |id: u32| {
            let name = end.cx.provider_name(id);
            if name.is_empty() {
                format!("provider {id}")
            } else {
                name.to_owned()
            }
        };
        let spans_table = |id: &str, title: &str, spans: HashMap<Key, Spans>, what: &str| {
            let mut rows: Vec<(Key, Spans)> = spans.into_iter().collect();
            rows.sort_by(|a, b| {
                b.1.latency.sum.cmp(&a.1.latency.sum).then_with(|| {
                    (provider(a.0.0), s(a.0.1), s(a.0.2)).cmp(&(
                        provider(b.0.0),
                        s(b.0.1),
                        s(b.0.2),
                    ))
                })
            });
            let mut t = Table::new(
                id,
                title,
                vec![
                    Column::new("provider", "provider", Kind::Text),
                    Column::new("category", "category", Kind::Text),
                    Column::new("name", "name", Kind::Text),
                    Column::new("count", "count", Kind::Count),
                    Column::new("total", "total", Kind::Duration),
                    Column::new("p50", "p50", Kind::Duration),
                    Column::new("p99", "p99", Kind::Duration),
                    Column::new("max", "max", Kind::Duration),
                    Column::new("unfinished", "unfinished", Kind::Count),
                ],
            )
            .diffed(
                &["provider", "category", "name"],
                &["total", "count", "p99", "max"],
            )
            .peaks(&["p99", "max"]);
            for ((p, c, n), sp) in rows {
                let l = &sp.latency;
                t.push(vec![
                    Cell::Text(provider(p)),
                    Cell::Text(s(c)),
                    Cell::Text(s(n)),
                    Cell::Count(l.count),
                    Cell::Ns(l.sum),
                    l.cell(0.5),
                    l.cell(0.99),
                    l.max_cell(),
                    Cell::Count(sp.unfinished),
                ]);
            }
            t.truncate(end.top);
            t.note(what.to_owned());
            t
        };
        if !self.durations.is_empty() {
            section.tables.push(spans_table(
                "durations",
                "Durations by total time",
                self.durations,
                "Durations nested in others count in full in each; unfinished ones (no end before the trace ended) count up to its end.",
            ));
        }
        if !self.asyncs.is_empty() {
            section.tables.push(spans_table(
                "async",
                "Async spans by total time",
                self.asyncs,
                "From each async begin to the end with the same category, name and id.",
            ));
        }
        if !self.tasks.is_empty() {
            section.tables.push(tasks_table(self.tasks, end, &provider));
        }
        if !self.instants.is_empty() {
            let mut rows: Vec<(Key, u64)> = self.instants.into_iter().collect();
            rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| s(a.0.2).cmp(&s(b.0.2))));
            let mut t = Table::new(
                "instants",
                "Instants",
                vec![
                    Column::new("provider", "provider", Kind::Text),
                    Column::new("category", "category", Kind::Text),
                    Column::new("name", "name", Kind::Text),
                    Column::new("count", "count", Kind::Count),
                ],
            )
            .diffed(&["provider", "category", "name"], &["count"]);
            for ((p, c, n), count) in rows {
                t.push(vec![
                    Cell::Text(provider(p)),
                    Cell::Text(s(c)),
                    Cell::Text(s(n)),
                    Cell::Count(count),
                ]);
            }
            t.truncate(end.top);
            section.tables.push(t);
        }
        if !self.counters.is_empty() {
            let mut rows: Vec<((u32, Sym, Sym), Series)> = self.counters.into_iter().collect();
            rows.sort_by(|a, b| {
                (provider(a.0.0), s(a.0.1), s(a.0.2)).cmp(&(provider(b.0.0), s(b.0.1), s(b.0.2)))
            });
            let mut t = Table::new(
                "counters",
                "Counters",
                vec![
                    Column::new("provider", "provider", Kind::Text),
                    Column::new("counter", "counter", Kind::Text),
                    Column::new("series", "series", Kind::Text),
                    Column::new("samples", "samples", Kind::Count),
                    Column::new("last", "last", Kind::Float),
                    Column::new("peak", "peak", Kind::Float),
                    Column::new("min", "min", Kind::Float),
                ],
            )
            .diffed(
                &["provider", "counter", "series"],
                &["peak", "last", "samples"],
            )
            .peaks(&["peak", "last"]);
            for ((p, c, series), v) in rows {
                t.push(vec![
                    Cell::Text(provider(p)),
                    Cell::Text(s(c)),
                    Cell::Text(s(series)),
                    Cell::Count(v.samples),
                    Cell::Float(v.last),
                    Cell::Float(v.peak),
                    Cell::Float(v.min),
                ]);
            }
            t.truncate(end.top);
            section.tables.push(t);
        }
        section
    }
}

/// The table of tasks: per name, their latency, time polled and idle, and
/// scheduling delay.
fn tasks_table(
    tasks: HashMap<Key, Tasks>,
    end: &Finish<'_>,
    provider: &dyn Fn(u32) -> String,
) -> Table {
    let s = |sym: Sym| end.cx.strings.get(sym).to_owned();
    let mut rows: Vec<(Key, Tasks)> = tasks.into_iter().collect();
    rows.sort_by(|a, b| {
        b.1.latency
            .sum
            .cmp(&a.1.latency.sum)
            .then_with(|| s(a.0.2).cmp(&s(b.0.2)))
    });
    let mut t = Table::new(
        "tasks",
        "Tasks (spans polled more than once) by total time",
        vec![
            Column::new("provider", "provider", Kind::Text),
            Column::new("category", "category", Kind::Text),
            Column::new("name", "name", Kind::Text),
            Column::new("count", "count", Kind::Count),
            Column::new("p50", "p50", Kind::Duration),
            Column::new("p99", "p99", Kind::Duration),
            Column::new("max", "max", Kind::Duration),
            Column::new("polls", "polls", Kind::Count),
            Column::new("busy", "busy", Kind::Duration),
            Column::new("idle", "idle", Kind::Duration),
            Column::new("delay_p50", "delay p50", Kind::Duration),
            Column::new("delay_p99", "delay p99", Kind::Duration),
            Column::new("delay_max", "delay max", Kind::Duration),
        ],
    )
    .diffed(
        &["provider", "category", "name"],
        &["p99", "count", "busy", "delay_p99"],
    )
    .peaks(&["p99", "max", "delay_p99", "delay_max"]);
    for ((p, c, n), task) in rows {
        let l = &task.latency;
        t.push(vec![
            Cell::Text(provider(p)),
            Cell::Text(s(c)),
            Cell::Text(s(n)),
            Cell::Count(l.count),
            l.cell(0.5),
            l.cell(0.99),
            l.max_cell(),
            Cell::Count(task.polls),
            Cell::Ns(task.busy),
            Cell::Ns(task.idle),
            task.delay.cell(0.5),
            task.delay.cell(0.99),
            Cell::Ns(task.max_delay),
        ]);
    }
    t.truncate(end.top);
    t.note(
        "From each task's creation to its close; busy: in its polls, idle: the rest; delay: from a wake to the poll it led to (each task's mean; max: the longest of any).".to_owned(),
    );
    t
}

#[cfg(test)]
mod tests {
    use trace_common::fxt::{Arg, ArgValue, EventKind};

    use crate::report::testing::Fxt;
    use crate::report::{Cell, Options, SectionId};

    #[test]
    fn durations_counters_instants_and_async_spans() {
        let mut t = Fxt::new();
        // Kernel events are not the userspace section's.
        t.slice(0, 5, 1, 1, "kernel:syscall", "read", vec![]);
        t.provider(2, "app");
        let mut at = 0;
        for i in 1..=100u64 {
            t.slice(at, at + i * 100_000, 5, 5, "app", "work", vec![]);
            at += i * 100_000 + 10;
        }
        t.event(1, 5, 5, "app", "tick", EventKind::Instant, vec![]);
        for (ts, v) in [(1, 5i64), (2, 50), (3, 7)] {
            t.event(
                ts,
                5,
                5,
                "app",
                "queue",
                EventKind::Counter { id: 0 },
                vec![Arg::new("depth", ArgValue::Int64(v))],
            );
        }
        t.event(
            10,
            5,
            5,
            "app",
            "req",
            EventKind::AsyncBegin { id: 9 },
            vec![],
        );
        t.event(
            30,
            5,
            6,
            "app",
            "req",
            EventKind::AsyncEnd { id: 9 },
            vec![],
        );
        let r = t.report(Options {
            sections: vec![SectionId::Userspace],
            ..Options::default()
        });
        let s = r.section("userspace").unwrap();
        let d = s.table("durations").unwrap();
        assert_eq!(d.rows.len(), 1);
        assert_eq!(d.cell(0, "provider"), Some(&Cell::Text("app".into())));
        assert_eq!(d.cell(0, "count"), Some(&Cell::Count(100)));
        assert_eq!(d.cell(0, "max"), Some(&Cell::Ns(10_000_000)));
        let Some(Cell::Ns(p50)) = d.cell(0, "p50") else {
            panic!()
        };
        assert!(p50.abs_diff(5_000_000) <= 50_000, "{p50}");
        let c = s.table("counters").unwrap();
        assert_eq!(c.cell(0, "last"), Some(&Cell::Float(7.0)));
        assert_eq!(c.cell(0, "peak"), Some(&Cell::Float(50.0)));
        let a = s.table("async").unwrap();
        assert_eq!(a.cell(0, "max"), Some(&Cell::Ns(20)));
        assert_eq!(
            s.table("instants").unwrap().cell(0, "count"),
            Some(&Cell::Count(1))
        );
    }
}
