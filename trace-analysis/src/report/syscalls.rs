//! The `syscalls` section: per call and per process, how many, how many
//! failed and with which errno, their total time and latency percentiles,
//! and a power-of-two histogram of each call's latency (as `perf trace -s`
//! and bpftrace's `hist()`).

use foldhash::HashMap;

use super::Finish;
use super::filter::Filter;
use super::histogram::{Latency, Log2, bar};
use super::table::{Cell, Column, Kind, Section, Table};
use crate::errno;
use crate::event::{Event, Slice};
use crate::kernel::Syscall;
use crate::reader::Context;
use crate::strings::Sym;

/// Figures of one call (or one call of one process).
#[derive(Debug, Default)]
struct Call {
    /// Latencies of the calls that returned.
    latency: Latency,
    errors: u64,
    /// Calls whose return the trace does not have: the thread exited in
    /// them (`exit`, `exit_group`), their return was lost, or they were
    /// still running when the recording ended.
    unfinished: u64,
}

impl Call {
    fn add(&mut self, dur: u64, call: &Syscall) {
        if call.returned() {
            self.latency.record(dur);
        } else {
            self.unfinished += 1;
        }
        self.errors += u64::from(call.errno().is_some());
    }

    /// Calls, returned or not.
    fn count(&self) -> u64 {
        self.latency.count + self.unfinished
    }
}

/// System calls of a trace.
#[derive(Debug, Default)]
pub struct Syscalls {
    calls: HashMap<Sym, Call>,
    hists: HashMap<Sym, Log2>,
    by_process: HashMap<(u64, Sym), Call>,
    errnos: HashMap<(Sym, i64), u64>,
    seen: u64,
}

impl Syscalls {
    /// Takes one event.
    pub fn event(&mut self, e: &Event, cx: &Context, f: &mut Filter) {
        let Event::Slice(s) = e else { return };
        let Some(call) = Syscall::from_slice(s, cx) else {
            return;
        };
        self.seen += 1;
        if !f.at(s.ts) || !f.thread(s.track.pid, s.track.tid, cx) {
            return;
        }
        self.call(s, &call);
    }

    fn call(&mut self, s: &Slice, call: &Syscall) {
        self.calls.entry(s.name).or_default().add(s.dur, call);
        if call.returned() {
            self.hists.entry(s.name).or_default().record(s.dur);
        }
        self.by_process
            .entry((s.track.pid, s.name))
            .or_default()
            .add(s.dur, call);
        if let Some(e) = call.errno() {
            *self.errnos.entry((s.name, e)).or_default() += 1;
        }
    }

    /// Per process: calls (returned or not), those that failed, and the
    /// time the returned ones took, ns.
    pub fn per_process(&self) -> HashMap<u64, (u64, u64, u64)> {
        let mut out: HashMap<u64, (u64, u64, u64)> = HashMap::default();
        for ((pid, _), c) in &self.by_process {
            let e = out.entry(*pid).or_default();
            e.0 += c.count();
            e.1 += c.errors;
            e.2 = e.2.saturating_add(c.latency.sum);
        }
        out
    }

    /// The section.
    pub fn finish(self, end: &Finish<'_>) -> Section {
        let mut section = Section::new("syscalls", "System calls");
        if self.seen == 0 {
            section
                .notes
                .push("The trace has no system calls (record kernel:syscall to see them).".into());
            return section;
        }
        let name = |s: Sym| end.cx.strings.get(s).to_owned();
        let columns = |first: Vec<Column>| {
            let mut c = first;
            c.extend([
                Column::new("count", "count", Kind::Count),
                Column::new("unfinished", "unfinished", Kind::Count),
                Column::new("errors", "errors", Kind::Count),
                Column::new("total", "total", Kind::Duration),
                Column::new("p50", "p50", Kind::Duration),
                Column::new("p99", "p99", Kind::Duration),
                Column::new("max", "max", Kind::Duration),
            ]);
            c
        };
        let cells = |c: &Call| {
            vec![
                Cell::Count(c.count()),
                Cell::Count(c.unfinished),
                Cell::Count(c.errors),
                Cell::Ns(c.latency.sum),
                c.latency.cell(0.5),
                c.latency.cell(0.99),
                c.latency.max_cell(),
            ]
        };

        let mut calls: Vec<(&Sym, &Call)> = self.calls.iter().collect();
        calls.sort_by(|a, b| {
            b.1.latency
                .sum
                .cmp(&a.1.latency.sum)
                .then_with(|| name(*a.0).cmp(&name(*b.0)))
        });
        let mut table = Table::new(
            "calls",
            "System calls by total time",
            columns(vec![Column::new("call", "call", Kind::Text)]),
        )
        .diffed(&["call"], &["total", "count", "errors", "p99", "max"])
        .peaks(&["p99", "max"]);
        for (sym, c) in &calls {
            let mut row = vec![Cell::Text(name(**sym))];
            row.extend(cells(c));
            table.push(row);
        }
        table.truncate(end.top);
        let unfinished: u64 = self.calls.values().map(|c| c.unfinished).sum();
        if unfinished > 0 {
            table.note(format!(
                "{unfinished} calls have no return in the trace (the thread exited in them, as in exit and exit_group, their return was lost, or they were still running when it ended): they count in count and unfinished only, not in total or the latencies."
            ));
        }
        table.note("total and the latencies are of the calls that returned, including time blocked in them.");
        section.tables.push(table);

        let mut errors: Vec<(&(Sym, i64), &u64)> = self.errnos.iter().collect();
        errors.sort_by(|a, b| {
            b.1.cmp(a.1)
                .then_with(|| name(a.0.0).cmp(&name(b.0.0)))
                .then(a.0.1.cmp(&b.0.1))
        });
        let mut table = Table::new(
            "errors",
            "Failed system calls by errno",
            vec![
                Column::new("call", "call", Kind::Text),
                Column::new("errno", "errno", Kind::Text),
                Column::new("code", "code", Kind::Int),
                Column::new("count", "count", Kind::Count),
            ],
        )
        .diffed(&["call", "errno"], &["count"]);
        for ((sym, e), n) in errors {
            table.push(vec![
                Cell::Text(name(*sym)),
                Cell::Text(errno::label(*e)),
                Cell::Int(*e),
                Cell::Count(*n),
            ]);
        }
        table.truncate(end.top);
        section.tables.push(table);

        let mut procs: Vec<(&(u64, Sym), &Call)> = self.by_process.iter().collect();
        procs.sort_by(|a, b| {
            b.1.latency
                .sum
                .cmp(&a.1.latency.sum)
                .then(a.0.0.cmp(&b.0.0))
                .then_with(|| name(a.0.1).cmp(&name(b.0.1)))
        });
        let mut table = Table::new(
            "by_process",
            "System calls by process",
            columns(vec![
                Column::new("pid", "pid", Kind::Int),
                Column::new("process", "process", Kind::Text),
                Column::new("call", "call", Kind::Text),
            ]),
        )
        .diffed(&["process", "call"], &["total", "count", "errors", "p99"])
        .per(&["pid"], "processes")
        .peaks(&["p99"]);
        for ((pid, sym), c) in procs {
            let mut row = vec![
                Cell::Int(*pid as i64),
                Cell::Text(end.process(*pid)),
                Cell::Text(name(*sym)),
            ];
            row.extend(cells(c));
            table.push(row);
        }
        table.truncate(end.top);
        section.tables.push(table);

        // The histograms of the calls made most often, in one table.
        let mut by_count: Vec<(&Sym, &Call)> = self.calls.iter().collect();
        by_count.sort_by(|a, b| {
            b.1.latency
                .count
                .cmp(&a.1.latency.count)
                .then_with(|| name(*a.0).cmp(&name(*b.0)))
        });
        let mut table = Table::new(
            "syscall_histograms",
            "Latency histograms of the calls made most often",
            vec![
                Column::new("call", "call", Kind::Text),
                Column::new("from", "from", Kind::Duration),
                Column::new("to", "to", Kind::Duration),
                Column::new("count", "count", Kind::Count),
                Column::new("bar", "", Kind::Text),
            ],
        );
        for (sym, _) in by_count.into_iter().take(end.top.min(10)) {
            if let Some(h) = self.hists.get(sym) {
                histogram(&mut table, &name(*sym), h);
            }
        }
        table.note("One row per power of two of ns [from, to) of each call, its bar scaled to the call's largest; calls that returned only.");
        section.tables.push(table);
        section
    }
}

/// Adds the latency histogram of call `call` to `t`, one row per power of
/// two of ns.
fn histogram(t: &mut Table, call: &str, h: &Log2) {
    let buckets = h.buckets();
    let max = buckets.iter().map(|b| b.2).max().unwrap_or(0);
    for (from, to, n) in buckets {
        t.push(vec![
            Cell::Text(call.to_owned()),
            Cell::Ns(from),
            to.map_or(Cell::Empty, Cell::Ns),
            Cell::Count(n),
            Cell::Text(bar(n, max, 40)),
        ]);
    }
}

#[cfg(test)]
mod tests {
    use trace_common::fxt::{Arg, ArgValue};

    use crate::report::testing::Fxt;
    use crate::report::{Cell, Options, SectionId};

    #[test]
    fn calls_count_errors_by_errno_and_histograms() {
        let mut t = Fxt::new();
        t.process(10, "app").thread(10, 11, "main");
        t.process(20, "other").thread(20, 21, "other");
        let mut at = 1_000;
        for i in 0..1000u64 {
            t.slice(
                at,
                at + 100 + i % 3,
                10,
                11,
                "kernel:syscall",
                "getppid",
                vec![Arg::new("ret", ArgValue::Int64(1))],
            );
            at += 1_000;
        }
        for _ in 0..10 {
            t.slice(
                at,
                at + 5_000,
                10,
                11,
                "kernel:syscall",
                "openat",
                vec![Arg::new("ret", ArgValue::Int64(-2))],
            );
            at += 10_000;
        }
        t.slice(
            at,
            at + 50,
            20,
            21,
            "kernel:syscall",
            "mmap",
            vec![Arg::new("ret", ArgValue::Int64(-140_000_000_000_000))],
        );
        t.slice(
            at,
            at + 50,
            20,
            21,
            "kernel:syscall",
            "read",
            vec![Arg::new("return_lost", ArgValue::Bool(true))],
        );
        // Calls that never return: they count, but not in the latencies.
        for call in ["exit_group", "exit"] {
            t.slice(
                at,
                at + 890_000_000,
                20,
                21,
                "kernel:syscall",
                call,
                vec![Arg::new("nr", ArgValue::Int64(231))],
            );
        }
        t.slice(
            at,
            at + 890_000_000,
            10,
            11,
            "kernel:syscall",
            "openat",
            vec![Arg::new("unfinished", ArgValue::Bool(true))],
        );
        let options = |pids: Vec<u64>| Options {
            sections: vec![SectionId::Syscalls],
            selection: crate::report::Selection {
                pids,
                ..Default::default()
            },
            ..Options::default()
        };
        let r = t.report(options(vec![]));
        let s = r.section("syscalls").unwrap();
        let calls = s.table("calls").unwrap();
        assert_eq!(calls.cell(0, "call"), Some(&Cell::Text("getppid".into())));
        assert_eq!(calls.cell(0, "count"), Some(&Cell::Count(1000)));
        assert_eq!(calls.cell(0, "errors"), Some(&Cell::Count(0)));
        assert_eq!(calls.cell(0, "max"), Some(&Cell::Ns(102)));
        assert_eq!(calls.cell(1, "call"), Some(&Cell::Text("openat".into())));
        assert_eq!(calls.cell(1, "count"), Some(&Cell::Count(11)));
        assert_eq!(calls.cell(1, "unfinished"), Some(&Cell::Count(1)));
        assert_eq!(calls.cell(1, "errors"), Some(&Cell::Count(10)));
        assert_eq!(calls.cell(1, "total"), Some(&Cell::Ns(50_000)));
        assert_eq!(calls.cell(1, "max"), Some(&Cell::Ns(5_000)));
        assert_eq!(calls.rows.len(), 6);
        let row = |call: &str| {
            (0..calls.rows.len())
                .find(|&i| calls.cell(i, "call") == Some(&Cell::Text(call.into())))
                .unwrap()
        };
        for call in ["exit", "exit_group", "read"] {
            let i = row(call);
            assert_eq!(calls.cell(i, "count"), Some(&Cell::Count(1)), "{call}");
            assert_eq!(calls.cell(i, "unfinished"), Some(&Cell::Count(1)), "{call}");
            assert_eq!(calls.cell(i, "total"), Some(&Cell::Ns(0)), "{call}");
            assert_eq!(calls.cell(i, "max"), Some(&Cell::Empty), "{call}");
        }
        assert!(calls.notes[0].starts_with("4 calls have no return"));
        let errors = s.table("errors").unwrap();
        assert_eq!(errors.rows.len(), 1, "an mmap address is no error");
        assert_eq!(errors.cell(0, "errno"), Some(&Cell::Text("ENOENT".into())));
        assert_eq!(errors.cell(0, "count"), Some(&Cell::Count(10)));
        let h = s.table("syscall_histograms").unwrap();
        assert_eq!(
            h.columns.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
            ["call", "from", "to", "count", "bar"]
        );
        // getppid, openat (the unfinished call left out), mmap: a bucket
        // each; calls that did not return have none.
        assert_eq!(h.rows.len(), 3, "{:?}", h.rows);
        assert_eq!(h.cell(0, "call"), Some(&Cell::Text("getppid".into())));
        assert_eq!(h.cell(0, "from"), Some(&Cell::Ns(64)));
        assert_eq!(h.cell(0, "to"), Some(&Cell::Ns(128)));
        assert_eq!(h.cell(0, "count"), Some(&Cell::Count(1000)));
        assert_eq!(h.cell(1, "call"), Some(&Cell::Text("openat".into())));
        assert_eq!(h.cell(1, "count"), Some(&Cell::Count(10)));
        let by = s.table("by_process").unwrap();
        assert_eq!(by.cell(0, "process"), Some(&Cell::Text("app".into())));
        // Process 20 only.
        let r = t.report(options(vec![20]));
        let calls = r.section("syscalls").unwrap().table("calls").unwrap();
        assert_eq!(calls.rows.len(), 4);
    }
}
