//! Hand-built traces for the sections' tests: FXT records written with
//! the project's own encoder and read back through [`read_trace`].

use trace_common::fxt::write::encode;
use trace_common::fxt::{Arg, ArgValue, EventKind, Record, StringRef, ThreadRef, obj_type};

use super::filter::{Filter, Selection};
use super::sched::Sched;
use super::{Options, Report, report};
use crate::event::Event;
use crate::reader::{Context, ReadStats, read_trace};

/// A trace being written: the kernel provider (id 1) with ns ticks.
pub struct Fxt {
    /// The bytes so far.
    pub bytes: Vec<u8>,
}

impl Fxt {
    /// The magic record, the kernel provider and its clock.
    pub fn new() -> Self {
        let mut t = Fxt { bytes: Vec::new() };
        t.record(&Record::Magic);
        t.provider(1, "kernel");
        t
    }

    /// Appends `r`.
    pub fn record(&mut self, r: &Record<'_>) -> &mut Self {
        encode(r, &mut self.bytes).expect("encodable record");
        self
    }

    /// Starts provider `id`'s records.
    pub fn provider(&mut self, id: u32, name: &str) -> &mut Self {
        self.record(&Record::ProviderInfo {
            id,
            name: name.into(),
        });
        self.record(&Record::Initialization {
            ticks_per_second: 1_000_000_000,
        })
    }

    /// Names process `pid`.
    pub fn process(&mut self, pid: u64, name: &str) -> &mut Self {
        self.record(&Record::KernelObject {
            koid: pid,
            obj_type: obj_type::PROCESS,
            name: StringRef::inline(name),
            args: vec![].into(),
        })
    }

    /// Names thread `tid` of process `pid`.
    pub fn thread(&mut self, pid: u64, tid: u64, name: &str) -> &mut Self {
        self.record(&Record::KernelObject {
            koid: tid,
            obj_type: obj_type::THREAD,
            name: StringRef::inline(name),
            args: vec![Arg::new("process", ArgValue::Koid(pid))].into(),
        })
    }

    /// A context switch on `cpu`: `prev` out in FXT state `state` (1
    /// runnable, 3 blocked), `next` in.
    pub fn switch(&mut self, ts: u64, cpu: u16, prev: u64, state: u8, next: u64) -> &mut Self {
        self.record(&Record::ContextSwitch {
            ts,
            cpu,
            outgoing_state: state,
            outgoing_tid: prev,
            incoming_tid: next,
            args: vec![].into(),
        })
    }

    /// A context switch the recorder inferred (it did not see it).
    pub fn inferred_switch(&mut self, ts: u64, cpu: u16, prev: u64, next: u64) -> &mut Self {
        self.unseen_switch(ts, cpu, prev, next, &["inferred"])
    }

    /// A switch the recorder inferred and marked `untraced`: `prev` showed
    /// no event of its own since it was switched in.
    pub fn untraced_switch(&mut self, ts: u64, cpu: u16, prev: u64, next: u64) -> &mut Self {
        self.unseen_switch(ts, cpu, prev, next, &["inferred", "untraced"])
    }

    /// A switch the recorder wrote without seeing it, its state unknown,
    /// with each of `flags` true.
    fn unseen_switch(
        &mut self,
        ts: u64,
        cpu: u16,
        prev: u64,
        next: u64,
        flags: &[&str],
    ) -> &mut Self {
        let args: Vec<Arg<'_>> = flags
            .iter()
            .map(|f| Arg::new(*f, ArgValue::Bool(true)))
            .collect();
        self.record(&Record::ContextSwitch {
            ts,
            cpu,
            outgoing_state: 3,
            outgoing_tid: prev,
            incoming_tid: next,
            args: args.into(),
        })
    }

    /// A wake-up of `tid`.
    pub fn wakeup(&mut self, ts: u64, cpu: u16, tid: u64) -> &mut Self {
        self.record(&Record::ThreadWakeup {
            ts,
            cpu,
            tid,
            args: vec![].into(),
        })
    }

    /// An event of the current provider on thread (pid, tid).
    #[expect(
        clippy::too_many_arguments,
        reason = "a test event's fields, spelled out"
    )]
    pub fn event(
        &mut self,
        ts: u64,
        pid: u64,
        tid: u64,
        category: &str,
        name: &str,
        kind: EventKind,
        args: Vec<Arg<'_>>,
    ) -> &mut Self {
        self.record(&Record::Event {
            ts,
            thread: ThreadRef::Inline {
                process: pid,
                thread: tid,
            },
            category: StringRef::inline(category),
            name: StringRef::inline(name),
            args: args.into(),
            kind,
        })
    }

    /// A complete duration from `ts` to `end`.
    #[expect(
        clippy::too_many_arguments,
        reason = "a test event's fields, spelled out"
    )]
    pub fn slice(
        &mut self,
        ts: u64,
        end: u64,
        pid: u64,
        tid: u64,
        category: &str,
        name: &str,
        args: Vec<Arg<'_>>,
    ) -> &mut Self {
        self.event(
            ts,
            pid,
            tid,
            category,
            name,
            EventKind::DurationComplete { end_ts: end },
            args,
        )
    }

    /// Reads the trace, giving every event and the filter to `sink`;
    /// gives back the filter.
    pub fn run(
        &self,
        selection: Selection,
        mut sink: impl FnMut(&Event, &Context, &mut Filter),
    ) -> (ReadStats, Context, Filter) {
        let mut f = Filter::new(selection);
        let (stats, cx) = read_trace(&self.bytes[..], &mut |e: &Event, cx: &Context| {
            if let Some(ts) = super::event_ts(e) {
                f.start_at(ts);
            }
            sink(e, cx, &mut f)
        })
        .expect("a readable trace");
        (stats, cx, f)
    }

    /// The scheduling state of the whole trace.
    pub fn sched(&self) -> (Sched, Context) {
        self.sched_with(Selection::default())
    }

    /// The scheduling state of what `selection` selects.
    pub fn sched_with(&self, selection: Selection) -> (Sched, Context) {
        let mut s = Sched::new(20);
        let (stats, cx, mut f) = self.run(selection, |e, cx, f| s.event(e, cx, f));
        s.finish(
            stats.observed_from.or(stats.first_ts),
            stats.last_ts,
            &cx,
            &mut f,
        );
        (s, cx)
    }

    /// The report of the trace with `options`.
    pub fn report(&self, options: Options) -> Report {
        report(&self.bytes[..], options).expect("a readable trace")
    }
}
