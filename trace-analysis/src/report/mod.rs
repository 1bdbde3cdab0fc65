//! The answers people open a trace for, as tables: where CPU time went,
//! how long threads waited to run, what system calls cost and how they
//! failed, block I/O, memory, interrupts, userspace durations and
//! counters, probes, stack samples, and what the trace lost.
//!
//! [`report`] reads a trace once, feeding every event to the aggregator of
//! each section asked for; what they hold is bounded by the threads,
//! processes, calls, devices and functions of the trace, never by the
//! number of its events. Each section comes out as a [`Section`] of
//! [`Table`]s, which [`diff`] compares between two traces.

pub mod block;
pub mod cpu;
pub mod diff;
pub mod filter;
pub mod groups;
pub mod histogram;
pub mod irq;
pub mod latency;
pub mod loss;
pub mod memory;
pub mod probes;
pub mod samples;
pub mod sched;
pub mod syscalls;
pub mod table;
pub mod units;
pub mod userspace;

#[cfg(test)]
pub(crate) mod testing;

use std::io::Read;

use serde::Serialize;

use crate::event::Event;
use crate::reader::{Context, ReadStats, ReadTraceError, Sink, read_trace};
pub use filter::{Filter, HostSelection, Selection, TimeRange};
pub use table::{Cell, Column, Kind, Section, Table};

/// Declares [`SectionId`] from one line per section, in the order they
/// are printed: its doc and the name `--section` takes.
macro_rules! sections {
    ($($(#[doc = $doc:literal])* $id:ident = $name:literal;)*) => {
        /// The sections of a report, in the order they are printed.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum SectionId {
            $($(#[doc = $doc])* $id,)*
        }

        impl SectionId {
            /// Every section.
            pub const ALL: [SectionId; [$($name),*].len()] = [$(SectionId::$id),*];

            /// Its name, as `--section` takes it.
            pub fn name(self) -> &'static str {
                match self {
                    $(SectionId::$id => $name,)*
                }
            }
        }
    };
}

sections! {
    /// CPU time, waiting and system calls per container or cgroup (with
    /// [`Options::group_by`]).
    Groups = "groups";
    /// CPU time per CPU, process and thread.
    Cpu = "cpu";
    /// Wake-up to running latency.
    Sched = "sched";
    /// System calls.
    Syscalls = "syscalls";
    /// Block I/O.
    Block = "block";
    /// Page faults and resident set sizes.
    Memory = "memory";
    /// Interrupt and softirq time.
    Irq = "irq";
    /// Userspace providers' durations, counters and async spans.
    Userspace = "userspace";
    /// Uprobes, USDT probes and tracepoints.
    Probes = "probes";
    /// Stack samples.
    Samples = "samples";
    /// What the trace lost.
    Loss = "loss";
}

impl SectionId {
    /// The section named `name`.
    pub fn from_name(name: &str) -> Option<SectionId> {
        SectionId::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// What a report shows.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// The sections (empty: all).
    pub sections: Vec<SectionId>,
    /// Which processes, threads and time.
    pub selection: Selection,
    /// Rows per table (the busiest, slowest, ...).
    pub top: usize,
    /// Every row of the tables (`top` still bounds the longest wake-up
    /// latencies kept): what a diff needs to sum rows by name before it
    /// keeps the `top` most changed.
    pub all_rows: bool,
    /// The time relative bounds of the time range count from, ns: the
    /// trace's earliest timestamp ([`first_timestamp`]). `None`: the first
    /// timestamp in the order of the file, which can be later (a recorder
    /// may write its start's records at the end).
    pub origin: Option<u64>,
    /// What the `groups` section groups processes by; without it the
    /// section is not made.
    pub group_by: Option<groups::GroupBy>,
    /// The machines of a trace recorded on several (`record --host`,
    /// [`trace_hosts::read_machines`]), for `--by host`; none for one.
    pub machines: Vec<trace_hosts::Machine>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sections: Vec::new(),
            selection: Selection::default(),
            top: 20,
            all_rows: false,
            origin: None,
            group_by: None,
            machines: Vec::new(),
        }
    }
}

impl Options {
    fn wants(&self, s: SectionId) -> bool {
        if s == SectionId::Groups {
            return self.group_by.is_some()
                && (self.sections.is_empty() || self.sections.contains(&s));
        }
        self.sections.is_empty() || self.sections.contains(&s)
    }
}

/// What the trace is, beside its sections.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TraceInfo {
    /// Bytes read.
    pub bytes: u64,
    /// Records decoded.
    pub records: u64,
    /// Malformed records skipped.
    pub malformed_records: u64,
    /// What was wrong with the first of them.
    pub malformed: Vec<String>,
    /// The earliest timestamp, CLOCK_BOOTTIME ns: the start offsets count
    /// from.
    pub start_ns: Option<u64>,
    /// The latest timestamp.
    pub end_ns: Option<u64>,
    /// Where what the trace saw begins ([`ReadStats::observed_from`]):
    /// later than `start_ns` in a file cut out of a longer recording, whose
    /// open spans are carried over with their first timestamps. The
    /// figures' time span counts from here.
    pub observed_ns: Option<u64>,
    /// The window the figures cover, [from, to) ns, when a time range was
    /// given.
    pub window_ns: Option<(u64, u64)>,
    /// Its providers: id and name.
    pub providers: Vec<(u32, String)>,
    /// What to know about the trace as a whole (a window outside it).
    pub notes: Vec<String>,
    /// Names, categories and argument names read as
    /// [`crate::strings::TOO_MANY_TEXT`] because the trace has more
    /// distinct ones than are kept ([`ReadStats::names_refused`]).
    pub names_refused: u64,
}

impl TraceInfo {
    /// How long the trace (or its window) lasts, ns.
    pub fn span(&self) -> u64 {
        let (from, to) = self.bounds();
        to.saturating_sub(from)
    }

    /// The time the figures cover: the trace's, cut to the window.
    pub fn bounds(&self) -> (u64, u64) {
        let (mut from, mut to) = (
            self.observed_ns.or(self.start_ns).unwrap_or(0),
            self.end_ns.unwrap_or(0),
        );
        if let Some((a, b)) = self.window_ns {
            from = from.max(a);
            to = to.min(b);
        }
        (from, to.max(from))
    }

    /// What is wrong with the window, if it covers none of the trace.
    pub fn window_note(&self) -> Option<String> {
        let (from, to) = self.window_ns?;
        let (start, end) = (self.start_ns?, self.end_ns?);
        let at = |ns: u64| {
            if ns >= start {
                format!("{} s", units::seconds_short(ns - start))
            } else {
                format!("-{} s", units::seconds_short(start - ns))
            }
        };
        let window = format!(
            "the window {}..{}",
            at(from),
            if to == u64::MAX { "end".into() } else { at(to) }
        );
        if from >= to {
            Some(format!(
                "{window} is empty (its start is not before its end): the figures cover nothing."
            ))
        } else if from > end {
            Some(format!(
                "{window} is past the trace's end ({}): the figures cover nothing.",
                at(end)
            ))
        } else if to <= start {
            Some(format!(
                "{window} ends before the trace's start: the figures cover nothing."
            ))
        } else {
            None
        }
    }
}

/// A report of one trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    /// What the trace is.
    pub trace: TraceInfo,
    /// Its sections, in [`SectionId`] order.
    pub sections: Vec<Section>,
}

impl Report {
    /// The section `id`.
    pub fn section(&self, id: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.id == id)
    }
}

/// The name shown for the process of threads the trace gives none.
pub const UNKNOWN_PROCESS: &str = "(unknown process)";

/// What sections see when they finish.
pub struct Finish<'a> {
    /// Names of processes, threads and providers.
    pub cx: &'a Context,
    /// The trace.
    pub info: &'a TraceInfo,
    /// Rows per table.
    pub top: usize,
    /// The selection applied.
    pub selection: &'a Selection,
}

impl Finish<'_> {
    /// The name of process `pid` (empty when the trace does not name it).
    pub fn process(&self, pid: u64) -> String {
        self.cx.process_name(pid).to_owned()
    }

    /// The name of thread `tid` (empty when the trace does not name it).
    pub fn thread(&self, tid: u64) -> String {
        self.cx.thread_name(tid).to_owned()
    }

    /// The process of thread `tid` as a pid cell and a name cell: `pid`,
    /// or the process the trace names for the thread; a thread of no
    /// known process has an empty pid and [`UNKNOWN_PROCESS`] as name.
    pub fn process_of(&self, pid: u64, tid: u64) -> (Cell, Cell) {
        let pid = if pid != 0 {
            Some(pid)
        } else {
            self.cx.process_of(tid).filter(|&p| p != 0)
        };
        match pid {
            Some(pid) => (Cell::Int(pid as i64), self.process(pid).into()),
            None => (Cell::Empty, UNKNOWN_PROCESS.into()),
        }
    }

    /// The time `ts` from the trace's start.
    pub fn offset(&self, ts: u64) -> Cell {
        Cell::Ns(ts.saturating_sub(self.info.start_ns.unwrap_or(0)))
    }
}

/// Reads a trace and aggregates every section asked for.
pub struct Reporter {
    options: Options,
    filter: Filter,
    sched: Option<sched::Sched>,
    syscalls: Option<syscalls::Syscalls>,
    block: Option<block::Block>,
    memory: Option<memory::Memory>,
    irq: Option<irq::Irq>,
    userspace: Option<userspace::Userspace>,
    probes: Option<probes::Probes>,
    samples: Option<samples::Samples>,
    loss: Option<loss::Loss>,
}

impl Reporter {
    /// A reporter for `options`.
    pub fn new(options: Options) -> Self {
        let w = |s| options.wants(s);
        let mut filter = Filter::new(options.selection.clone());
        if let Some(origin) = options.origin {
            filter.start_at(origin);
        }
        Reporter {
            filter,
            sched: (w(SectionId::Cpu) || w(SectionId::Sched) || w(SectionId::Groups))
                .then(|| sched::Sched::new(options.top)),
            syscalls: (w(SectionId::Syscalls) || w(SectionId::Groups))
                .then(syscalls::Syscalls::default),
            block: w(SectionId::Block).then(block::Block::default),
            memory: w(SectionId::Memory).then(memory::Memory::default),
            irq: w(SectionId::Irq).then(irq::Irq::default),
            userspace: w(SectionId::Userspace).then(userspace::Userspace::default),
            probes: w(SectionId::Probes).then(probes::Probes::default),
            samples: w(SectionId::Samples).then(samples::Samples::default),
            loss: w(SectionId::Loss).then(loss::Loss::default),
            options,
        }
    }

    /// The report, once every event was given.
    pub fn finish(mut self, stats: &ReadStats, cx: &Context) -> Report {
        let mut providers: Vec<(u32, String)> = cx
            .providers()
            .map(|(id, name)| (id, name.to_owned()))
            .collect();
        providers.sort();
        let mut info = TraceInfo {
            bytes: stats.bytes,
            records: stats.records,
            malformed_records: stats.errors,
            malformed: stats.error_messages.clone(),
            start_ns: stats.first_ts,
            end_ns: stats.last_ts,
            observed_ns: stats.observed_from,
            window_ns: self.filter.by_time().then(|| self.filter.window()),
            providers,
            notes: Vec::new(),
            names_refused: stats.names_refused,
        };
        info.notes.extend(info.window_note());
        let end = Finish {
            cx,
            info: &info,
            top: if self.options.all_rows {
                usize::MAX
            } else {
                self.options.top
            },
            selection: &self.options.selection,
        };
        if let Some(s) = &mut self.sched {
            let from = stats.observed_from.or(stats.first_ts);
            s.finish(from, stats.last_ts, cx, &mut self.filter);
        }
        let o = &self.options;
        let mut sections = Vec::new();
        if let Some(by) = o.group_by.filter(|_| o.wants(SectionId::Groups)) {
            sections.push(groups::section(
                by,
                self.sched.as_ref(),
                self.syscalls.as_ref(),
                &end,
                &o.machines,
            ));
        }
        if let Some(s) = &self.sched {
            if o.wants(SectionId::Cpu) {
                sections.push(cpu::section(s, &end));
            }
            if o.wants(SectionId::Sched) {
                sections.push(latency::section(s, &end));
            }
        }
        if let Some(s) = self.syscalls.filter(|_| o.wants(SectionId::Syscalls)) {
            sections.push(s.finish(&end));
        }
        if let Some(s) = self.block {
            sections.push(s.finish(&end));
        }
        if let Some(s) = self.memory {
            sections.push(s.finish(&end));
        }
        if let Some(s) = self.irq {
            sections.push(s.finish(&end));
        }
        if let Some(s) = self.userspace {
            sections.push(s.finish(&end));
        }
        if let Some(s) = self.probes {
            sections.push(s.finish(&end));
        }
        if let Some(s) = self.samples {
            sections.push(s.finish(&end));
        }
        if let Some(s) = self.loss {
            sections.push(s.finish(&end, stats));
        }
        Report {
            trace: info,
            sections,
        }
    }
}

/// The time of an event, for those that have one.
fn event_ts(e: &Event) -> Option<u64> {
    match e {
        Event::Slice(s) => Some(s.ts),
        Event::Instant(i) => Some(i.ts),
        Event::Counter(c) => Some(c.ts),
        Event::Async(a) => Some(a.ts),
        Event::Switch(s) => Some(s.ts),
        Event::Wakeup(w) => Some(w.ts),
        Event::Flow(f) => Some(f.ts),
        Event::Sample(s) => Some(s.ts),
        Event::Process { .. } | Event::Thread { .. } | Event::Loss(_) => None,
    }
}

impl Sink for Reporter {
    fn event(&mut self, e: &Event, cx: &Context) {
        match e {
            Event::Process { .. } | Event::Thread { .. } => self.filter.renamed(),
            _ => {
                if let Some(ts) = event_ts(e) {
                    self.filter.start_at(ts);
                }
            }
        }
        let f = &mut self.filter;
        if let Some(s) = &mut self.sched {
            s.event(e, cx, f);
        }
        if let Some(s) = &mut self.syscalls {
            s.event(e, cx, f);
        }
        if let Some(s) = &mut self.block {
            s.event(e, cx, f);
        }
        if let Some(s) = &mut self.memory {
            s.event(e, cx, f);
        }
        if let Some(s) = &mut self.irq {
            s.event(e, cx, f);
        }
        if let Some(s) = &mut self.userspace {
            s.event(e, cx, f);
        }
        if let Some(s) = &mut self.probes {
            s.event(e, cx, f);
        }
        if let Some(s) = &mut self.samples {
            s.event(e, cx, f);
        }
        if let Some(s) = &mut self.loss {
            s.event(e, cx);
        }
    }
}

/// Reads the trace `input` once and reports on it as `options` ask.
pub fn report(input: impl Read, options: Options) -> Result<Report, ReadTraceError> {
    let mut reporter = Reporter::new(options);
    let (stats, cx) = read_trace(input, &mut reporter)?;
    Ok(reporter.finish(&stats, &cx))
}

/// The earliest timestamp of the trace `input` (a whole read of it), the
/// start relative times count from.
pub fn first_timestamp(input: impl Read) -> Result<Option<u64>, ReadTraceError> {
    let (stats, _) = read_trace(input, &mut |_: &Event, _: &Context| {})?;
    Ok(stats.first_ts)
}

/// A symbol looked up by text once it exists in a trace's strings (it may
/// be interned only when its first event arrives).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Name {
    text: &'static str,
    sym: Option<crate::strings::Sym>,
    /// How many strings the trace had when it was last looked up in vain.
    missed_at: usize,
}

impl Name {
    /// The symbol for `text`, not yet looked up.
    pub(crate) const fn new(text: &'static str) -> Self {
        Name {
            text,
            sym: None,
            missed_at: usize::MAX,
        }
    }

    /// Whether `sym` is this name.
    pub(crate) fn is(&mut self, sym: crate::strings::Sym, cx: &Context) -> bool {
        self.get(cx) == Some(sym)
    }

    /// Its symbol, if the trace has the string yet.
    pub(crate) fn get(&mut self, cx: &Context) -> Option<crate::strings::Sym> {
        // Strings are only ever added: look again only when there are new ones.
        if self.sym.is_none() && self.missed_at != cx.strings.len() {
            self.sym = cx.strings.lookup(self.text);
            self.missed_at = cx.strings.len();
        }
        self.sym
    }
}

/// The value of the argument named `name` of `args`.
pub(crate) fn arg<'a>(
    args: &'a crate::event::Args,
    name: &mut Name,
    cx: &Context,
) -> Option<&'a crate::event::Value> {
    let sym = name.get(cx)?;
    crate::event::arg(args, sym)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use trace_common::fxt::{Arg, ArgValue};

    use super::testing::Fxt;
    use super::*;

    /// A trace with something for most sections.
    fn busy_trace() -> Vec<u8> {
        let mut t = Fxt::new();
        t.process(10, "app").thread(10, 11, "main");
        for i in 0..20u64 {
            let at = i * 1_000;
            t.wakeup(at, 0, 11)
                .switch(at + 10, 0, 0, 3, 11)
                .slice(
                    at + 20,
                    at + 80,
                    10,
                    11,
                    "kernel:syscall",
                    "read",
                    vec![Arg::new("ret", ArgValue::Int64(-11))],
                )
                .switch(at + 100, 0, 11, 3, 0);
        }
        t.bytes
    }

    #[test]
    fn every_section_is_reported_in_order() {
        let r = report(&busy_trace()[..], Options::default()).unwrap();
        let ids: Vec<&str> = r.sections.iter().map(|s| s.id.as_str()).collect();
        // `groups` only with a grouping.
        let all: Vec<&str> = SectionId::ALL
            .iter()
            .filter(|s| **s != SectionId::Groups)
            .map(|s| s.name())
            .collect();
        assert_eq!(ids, all);
        let grouped = report(
            &busy_trace()[..],
            Options {
                group_by: Some(groups::GroupBy::Cgroup),
                ..Options::default()
            },
        )
        .unwrap();
        assert_eq!(grouped.sections[0].id, "groups");
        assert_eq!(grouped.sections.len(), SectionId::ALL.len());
        // Nothing in this trace is labelled: one group with every call.
        let rows = &grouped.sections[0].tables[0].rows;
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0][0], Cell::Text(groups::UNLABELLED.into()));
        assert_eq!(r.trace.start_ns, Some(0));
        assert_eq!(r.trace.span(), 19_100);
        let only = report(
            &busy_trace()[..],
            Options {
                sections: vec![SectionId::Syscalls],
                ..Options::default()
            },
        )
        .unwrap();
        assert_eq!(only.sections.len(), 1);
        assert_eq!(SectionId::from_name("irq"), Some(SectionId::Irq));
        assert_eq!(SectionId::from_name("nope"), None);
    }

    #[test]
    fn relative_times_count_from_the_earliest_timestamp() {
        // The earliest timestamp comes last in the file.
        let mut t = Fxt::new();
        t.process(10, "app").thread(10, 11, "main");
        t.slice(2_000, 2_100, 10, 11, "kernel:syscall", "read", vec![])
            .slice(3_000, 3_100, 10, 11, "kernel:syscall", "write", vec![])
            .slice(1_000, 1_100, 10, 11, "kernel:syscall", "close", vec![]);
        let origin = first_timestamp(&t.bytes[..]).unwrap();
        assert_eq!(origin, Some(1_000));
        let r = t.report(Options {
            sections: vec![SectionId::Syscalls],
            selection: Selection {
                time: "0.000001..0.0000015".parse().unwrap(),
                ..Selection::default()
            },
            origin,
            ..Options::default()
        });
        assert_eq!(r.trace.window_ns, Some((2_000, 2_500)));
        let calls = r.section("syscalls").unwrap().table("calls").unwrap();
        assert_eq!(calls.rows.len(), 1);
        assert_eq!(calls.cell(0, "call"), Some(&Cell::Text("read".into())));
    }

    #[test]
    fn a_window_outside_the_trace_is_said() {
        let report = |time: &str| {
            report(
                &busy_trace()[..],
                Options {
                    sections: vec![SectionId::Cpu],
                    selection: Selection {
                        time: time.parse().unwrap(),
                        ..Selection::default()
                    },
                    ..Options::default()
                },
            )
            .unwrap()
        };
        // The trace lasts 19.1 µs.
        let r = report("99..100");
        assert_eq!(
            r.trace.notes,
            vec![
                "the window 99 s..100 s is past the trace's end (0.0000191 s): the figures cover nothing."
            ]
        );
        let r = report("0.5..@5");
        assert!(r.trace.notes[0].contains("is empty"), "{:?}", r.trace.notes);
        let r = report("0.00001..");
        assert!(r.trace.notes.is_empty(), "{:?}", r.trace.notes);
        let r = report("..0.00001");
        assert!(r.trace.notes.is_empty());
    }

    #[test]
    fn not_fxt_is_an_error() {
        assert!(report(&b"hello world, not a trace"[..], Options::default()).is_err());
        assert!(report(&b""[..], Options::default()).is_err());
    }

    #[test]
    fn a_truncated_trace_gives_a_partial_report() {
        let data = busy_trace();
        for cut in (8..data.len()).step_by(7) {
            let r = report(&data[..cut], Options::default()).unwrap();
            assert!(r.trace.bytes == cut as u64);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Garbage after a valid start, or bytes of a valid trace
        /// overwritten, report or fail, never panic.
        #[test]
        fn hostile_input_never_panics(
            garbage in proptest::collection::vec(any::<u8>(), 0..2048),
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..32),
        ) {
            let mut data = busy_trace();
            for (at, v) in flips {
                let n = data.len();
                data[8 + at % (n - 8)] = v;
            }
            let _ = report(&data[..], Options::default());
            let mut data = busy_trace();
            data.extend_from_slice(&garbage);
            let _ = report(&data[..], Options::default());
            let mut only = data[..8].to_vec();
            only.extend_from_slice(&garbage);
            let _ = report(&only[..], Options::default());
        }
    }
}
