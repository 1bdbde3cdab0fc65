//! Reads an FXT stream into [`Event`]s, record by record, holding only the
//! providers' tables, the names of processes and threads, and open spans.

use std::io::Read;

use foldhash::HashMap;
use trace_common::fxt::read::{TraceState, decode, instant_scope};
use trace_common::fxt::stream::{RecordStream, StreamError, StreamErrorKind};
use trace_common::fxt::{
    Arg, ArgValue, EventKind, LargeBlob, Record, StringRef, ThreadRef, obj_type, provider_event,
    wire,
};
use trace_perfetto::{BLOB_TYPE_PERFETTO, SampleReader};

pub use crate::context::{Context, ProcessLabels, ReadStats};
use crate::event::{
    Args, AsyncSpan, Counter, Dropped, Event, Flow, FlowPhase, Frame, Instant, Loss, OutState,
    Sample, Scope, Slice, Switch, Track, Value, Wakeup, unnamed_frame,
};
use crate::nesting::Nesting;
use crate::strings::Sym;
pub use crate::wants::Wants;

/// A record larger than this is skipped rather than buffered.
const MAX_RECORD: usize = 64 << 20;
/// Open async spans kept; the oldest are dropped past it.
const MAX_OPEN_ASYNC: usize = 65_536;
/// Messages of malformed records kept.
const MAX_ERRORS_KEPT: usize = 10;

/// Reading a trace failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadTraceError {
    /// The input could not be read.
    #[error("cannot read the trace")]
    Io(#[from] std::io::Error),
    /// The data does not start with FXT's magic number record.
    #[error("not a Fuchsia Trace Format file (no magic number record at the start)")]
    NotFxt,
}

/// Receives the events of a trace.
pub trait Sink {
    /// One event, with what is known so far.
    fn event(&mut self, event: &Event, cx: &Context);
}

impl<F: FnMut(&Event, &Context)> Sink for F {
    fn event(&mut self, event: &Event, cx: &Context) {
        self(event, cx)
    }
}

/// Reads a whole trace from `input`, handing every event to `sink`; returns
/// what it saw and the final context. Memory stays bounded by the threads,
/// strings and open spans of the trace, not its length.
pub fn read_trace(
    input: impl Read,
    sink: &mut impl Sink,
) -> Result<(ReadStats, Context), ReadTraceError> {
    read_trace_wanting(input, sink, Wants::ALL)
}

/// [`read_trace`] for a sink that needs only the events `wants` names:
/// records of other kinds are skipped by their header, without decoding
/// them (nor counting them in [`ReadStats`]: `records`, `errors` and
/// `skipped` count what was read). The events handed on are those
/// [`read_trace`] hands on of the kinds wanted, with the same values.
pub fn read_trace_wanting(
    input: impl Read,
    sink: &mut impl Sink,
    wants: Wants,
) -> Result<(ReadStats, Context), ReadTraceError> {
    let mut r = TraceReader {
        wants,
        ..TraceReader::default()
    };
    r.run(input, sink)?;
    Ok((r.stats, r.cx))
}

#[derive(Default)]
struct Syms {
    kernel_cat: Sym,
    dropped_events: Sym,
    inferred: Sym,
    untraced: Sym,
    incoming_weight: Sym,
    outgoing_weight: Sym,
    waker: Sym,
}

/// Async spans are paired by provider, category, name and id.
type AsyncKey = (u32, Sym, Sym, u64);
/// An open async span: begin time, track, arguments, order of arrival.
type OpenAsync = (u64, Track, Args, u64);

#[derive(Default)]
struct TraceReader {
    wants: Wants,
    state: TraceState,
    cx: Context,
    stats: ReadStats,
    nesting: Nesting,
    open_async: HashMap<AsyncKey, OpenAsync>,
    async_seq: u64,
    perfetto: SampleReader,
    syms: Syms,
    /// The last value of each series of each provider's `dropped_events`
    /// counter.
    dropped_totals: HashMap<(u32, Option<u32>), u64>,
    /// Per provider not current, the symbol of each string table index.
    table_syms: HashMap<u32, Vec<Sym>>,
    /// The current provider and its string table's symbols.
    cur_provider: u32,
    cur_syms: Vec<Sym>,
}

impl TraceReader {
    fn run(&mut self, input: impl Read, sink: &mut impl Sink) -> Result<(), ReadTraceError> {
        self.syms = Syms {
            kernel_cat: self.cx.strings.intern("kernel"),
            dropped_events: self.cx.strings.intern("dropped_events"),
            inferred: self.cx.strings.intern("inferred"),
            untraced: self.cx.strings.intern("untraced"),
            incoming_weight: self.cx.strings.intern("incoming_weight"),
            outgoing_weight: self.cx.strings.intern("outgoing_weight"),
            waker: self.cx.strings.intern("waker"),
        };
        let mut records = RecordStream::new(input).with_max_record(MAX_RECORD);
        let mut first = true;
        while let Some(next) = records.next_record() {
            let (at, raw) = match next {
                Ok(found) => found,
                Err(StreamError {
                    kind: StreamErrorKind::Read(e),
                    ..
                }) => return Err(e.into()),
                Err(_) if first => return Err(ReadTraceError::NotFxt),
                Err(e) => {
                    self.error(e.to_string());
                    continue;
                }
            };
            if first {
                if at != 0 || !trace_common::fxt::read::starts_with_magic(raw) {
                    return Err(ReadTraceError::NotFxt);
                }
                first = false;
            }
            let header = u64::from_le_bytes(raw[..8].try_into().unwrap_or_default());
            if !self.wanted(header, raw) {
                continue;
            }
            match decode(raw) {
                Ok((record, _)) => {
                    self.stats.records += 1;
                    let scope = instant_scope(&record, raw);
                    self.record(record, scope, sink);
                }
                Err(e) => self.error(format!("{e}")),
            }
        }
        self.stats.bytes = records.offset();
        if first {
            return Err(ReadTraceError::NotFxt);
        }
        // Close what is still open.
        let last = self.stats.last_ts.unwrap_or(0);
        let mut pending = Vec::new();
        self.nesting
            .finish_all(last, &mut |s: Slice| pending.push(Event::Slice(s)));
        let open: Vec<_> = self.open_async.drain().collect();
        let mut open: Vec<_> = open.into_iter().collect();
        open.sort_by_key(|(_, (_, _, _, seq))| *seq);
        for ((_, category, name, id), (ts, track, args, _)) in open {
            pending.push(Event::Async(AsyncSpan {
                ts,
                dur: last.saturating_sub(ts),
                track,
                category,
                name,
                id,
                args,
                unfinished: true,
            }));
        }
        for e in &pending {
            sink.event(e, &self.cx);
        }
        self.stats.unmatched_ends = self.nesting.unmatched_ends;
        self.stats.names_refused = self.cx.strings.refused();
        Ok(())
    }

    /// Whether the record `raw` (with `header`) is decoded; a record that
    /// is not still gives its times to the trace's end when that is wanted.
    fn wanted(&mut self, header: u64, raw: &[u8]) -> bool {
        if self.wants == Wants::ALL {
            return true;
        }
        let field = |lo: u32, hi: u32| (header >> lo) & ((1u64 << (hi - lo + 1)) - 1);
        let word = |i: usize| {
            raw.get(i * 8..i * 8 + 8)
                .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
        };
        let rtype = field(0, 3) as u8;
        match rtype {
            wire::record_type::EVENT => {
                let ty = field(16, 19) as u8;
                if self.wants.event(ty) {
                    return true;
                }
                if self.wants.end_time
                    && ty <= wire::event_type::FLOW_END
                    && let Some(ts) = word(1)
                {
                    let ts = self.state.ticks_to_ns(ts);
                    self.seen(ts);
                    if ty == wire::event_type::DURATION_COMPLETE
                        && let Some(end) = word(raw.len() / 8 - 1)
                    {
                        let end = self.state.ticks_to_ns(end).max(ts);
                        let s = &mut self.stats;
                        s.last_ts = Some(s.last_ts.map_or(end, |l| l.max(end)));
                    }
                }
                false
            }
            wire::record_type::SCHEDULING => {
                let wanted = match field(60, 63) as u8 {
                    wire::sched_type::THREAD_WAKEUP => self.wants.wakeups,
                    wire::sched_type::LEGACY_CONTEXT_SWITCH | wire::sched_type::CONTEXT_SWITCH => {
                        self.wants.switches
                    }
                    _ => return false,
                };
                if !wanted
                    && self.wants.end_time
                    && let Some(ts) = word(1)
                {
                    let ts = self.state.ticks_to_ns(ts);
                    self.seen(ts);
                }
                wanted
            }
            // Samples' times count for the end: their blobs are then read.
            wire::record_type::BLOB => self.wants.samples || self.wants.end_time,
            wire::record_type::LOG
            | wire::record_type::LARGE
            | wire::record_type::USERSPACE_OBJECT => false,
            _ => true,
        }
    }

    fn error(&mut self, msg: String) {
        self.stats.errors += 1;
        if self.stats.error_messages.len() < MAX_ERRORS_KEPT {
            self.stats.error_messages.push(msg);
        }
    }

    /// A record at `ts` that says something happened then.
    fn seen(&mut self, ts: u64) {
        self.spans(ts);
        self.observed(ts);
    }

    /// A record stamped `ts`.
    fn spans(&mut self, ts: u64) {
        let s = &mut self.stats;
        s.first_ts = Some(s.first_ts.map_or(ts, |f| f.min(ts)));
        s.last_ts = Some(s.last_ts.map_or(ts, |l| l.max(ts)));
    }

    /// Something happened at `ts` (see [`ReadStats::observed_from`]).
    fn observed(&mut self, ts: u64) {
        let s = &mut self.stats;
        s.observed_from = Some(s.observed_from.map_or(ts, |f| f.min(ts)));
    }

    /// The labels among a process record's arguments, if it has any (a
    /// record without them leaves the process's labels as they were).
    fn labels(&mut self, args: &[Arg<'_>]) -> Option<ProcessLabels> {
        let text = |this: &mut Self, name: &str| match this.state.arg(args, name) {
            Some(ArgValue::String(s)) => {
                let s = s.clone();
                Some(this.sym(&s))
            }
            _ => None,
        };
        let cgroup = text(self, "cgroup")?;
        Some(ProcessLabels {
            cgroup: Some(cgroup),
            container_runtime: text(self, "container_runtime"),
            container_id: text(self, "container_id"),
            container_name: text(self, "container_name"),
            ns_pid: match self.state.arg(args, "ns_pid") {
                Some(ArgValue::Uint64(n)) => Some(*n),
                _ => None,
            },
        })
    }

    fn sym(&mut self, r: &StringRef<'_>) -> Sym {
        match r {
            StringRef::Empty => Sym::EMPTY,
            StringRef::Inline(s) => self.cx.strings.intern(s),
            StringRef::Index(i) => self
                .cur_syms
                .get(usize::from(*i))
                .copied()
                .unwrap_or(Sym::EMPTY),
        }
    }

    /// Keeps the symbols of the current provider's string table in step
    /// with the records that define it.
    fn track_tables(&mut self, record: &Record<'_>) {
        match record {
            Record::ProviderInfo { id, .. } => {
                self.switch_provider(*id);
                self.cur_syms.clear();
            }
            Record::ProviderSection { id } => self.switch_provider(*id),
            Record::String { index, value } if *index != 0 => {
                let sym = self.cx.strings.intern(value);
                let i = usize::from(*index);
                if self.cur_syms.len() <= i {
                    self.cur_syms.resize(i + 1, Sym::EMPTY);
                }
                self.cur_syms[i] = sym;
            }
            _ => {}
        }
    }

    /// Makes `id`'s string symbols current, keeping the others'.
    fn switch_provider(&mut self, id: u32) {
        if id == self.cur_provider {
            return;
        }
        let old = std::mem::take(&mut self.cur_syms);
        self.table_syms.insert(self.cur_provider, old);
        self.cur_syms = self.table_syms.remove(&id).unwrap_or_default();
        self.cur_provider = id;
    }

    fn args(&mut self, args: &[Arg<'_>]) -> Args {
        let mut out = Vec::with_capacity(args.len());
        for a in args {
            let name = self.sym(&a.name);
            let value = match &a.value {
                ArgValue::Null => Value::Null,
                ArgValue::Int32(v) => Value::Int(i64::from(*v)),
                ArgValue::Uint32(v) => Value::Uint(u64::from(*v)),
                ArgValue::Int64(v) => Value::Int(*v),
                ArgValue::Uint64(v) => Value::Uint(*v),
                ArgValue::Double(v) => Value::Double(*v),
                ArgValue::String(s) => Value::Str(self.state.string(s).unwrap_or("").into()),
                ArgValue::Pointer(v) => Value::Pointer(*v),
                ArgValue::Koid(v) => Value::Koid(*v),
                ArgValue::Bool(v) => Value::Bool(*v),
                _ => Value::Null,
            };
            out.push((name, value));
        }
        out
    }

    fn thread(&self, r: ThreadRef) -> (u64, u64) {
        self.state.thread(r).unwrap_or((0, 0))
    }

    /// The process of a thread named by koid alone (scheduling records).
    fn pid_of(&self, tid: u64) -> u64 {
        if tid == 0 {
            return 0;
        }
        self.cx.process_of(tid).unwrap_or(0)
    }

    fn record(
        &mut self,
        record: Record<'_>,
        scope: Option<trace_common::fxt::read::InstantScope>,
        sink: &mut impl Sink,
    ) {
        self.state.apply(&record);
        self.track_tables(&record);
        let provider = self.cur_provider;
        match record {
            Record::ProviderInfo { id, name } => {
                let s = self.cx.strings.intern(&name);
                self.cx.providers.insert(id, s);
            }
            Record::ProviderEvent { id, event } if event == provider_event::BUFFER_OVERFLOW => {
                let name = self.cx.providers.get(&id).copied().unwrap_or_default();
                let e = Event::Loss(Loss {
                    provider: id,
                    provider_name: name,
                    per_cpu: Vec::new(),
                    events: None,
                });
                sink.event(&e, &self.cx);
            }
            Record::KernelObject {
                koid,
                obj_type,
                name,
                args,
            } => {
                let name = self.sym(&name);
                if obj_type == obj_type::PROCESS {
                    self.cx.processes.insert(koid, name);
                    if let Some(labels) = self.labels(&args) {
                        self.cx.labels.insert(koid, labels);
                    }
                    sink.event(&Event::Process { pid: koid, name }, &self.cx);
                } else if obj_type == obj_type::THREAD {
                    let pid = self.state.process_of_thread(&args).unwrap_or(0);
                    self.cx.threads.insert(koid, (pid, name));
                    sink.event(
                        &Event::Thread {
                            pid,
                            tid: koid,
                            name,
                        },
                        &self.cx,
                    );
                }
            }
            Record::Event {
                ts,
                thread,
                category,
                name,
                args,
                kind,
            } => {
                let ts = self.state.ticks_to_ns(ts);
                let (pid, tid) = self.thread(thread);
                let track = Track { provider, pid, tid };
                let category = self.sym(&category);
                let name = self.sym(&name);
                let args = self.args(&args);
                self.spans(ts);
                let begins = matches!(
                    kind,
                    EventKind::DurationBegin
                        | EventKind::DurationComplete { .. }
                        | EventKind::AsyncBegin { .. }
                );
                if !begins {
                    self.observed(ts);
                }
                self.event(ts, track, category, name, args, kind, scope, sink);
            }
            Record::ContextSwitch {
                ts,
                cpu,
                outgoing_state,
                outgoing_tid,
                incoming_tid,
                args,
            } => {
                let ts = self.state.ticks_to_ns(ts);
                self.seen(ts);
                let args = self.args(&args);
                let weight = |s: Sym| {
                    args.iter()
                        .find(|(n, _)| *n == s)
                        .and_then(|(_, v)| v.as_i64())
                        .and_then(|w| i32::try_from(w).ok())
                        .filter(|w| *w != i32::MIN)
                };
                let flag = |s: Sym| args.iter().any(|(n, v)| *n == s && v.is_true());
                let e = Event::Switch(Switch {
                    ts,
                    cpu: u32::from(cpu),
                    prev_pid: self.pid_of(outgoing_tid),
                    prev_tid: outgoing_tid,
                    prev_state: OutState::from_fxt(outgoing_state),
                    next_pid: self.pid_of(incoming_tid),
                    next_tid: incoming_tid,
                    prev_prio: weight(self.syms.outgoing_weight),
                    next_prio: weight(self.syms.incoming_weight),
                    inferred: flag(self.syms.inferred),
                    untraced: flag(self.syms.untraced),
                });
                sink.event(&e, &self.cx);
            }
            Record::LegacyContextSwitch {
                ts,
                cpu,
                outgoing_state,
                outgoing_thread,
                incoming_thread,
                outgoing_priority,
                incoming_priority,
            } => {
                let ts = self.state.ticks_to_ns(ts);
                self.seen(ts);
                let (prev_pid, prev_tid) = self.thread(outgoing_thread);
                let (next_pid, next_tid) = self.thread(incoming_thread);
                let e = Event::Switch(Switch {
                    ts,
                    cpu: u32::from(cpu),
                    prev_pid,
                    prev_tid,
                    prev_state: OutState::from_fxt(outgoing_state),
                    next_pid,
                    next_tid,
                    prev_prio: Some(i32::from(outgoing_priority)),
                    next_prio: Some(i32::from(incoming_priority)),
                    inferred: false,
                    untraced: false,
                });
                sink.event(&e, &self.cx);
            }
            Record::ThreadWakeup { ts, cpu, tid, args } => {
                let ts = self.state.ticks_to_ns(ts);
                self.seen(ts);
                let args = self.args(&args);
                let waker_tid =
                    args.iter()
                        .find(|(n, _)| *n == self.syms.waker)
                        .and_then(|(_, v)| match v {
                            Value::Koid(k) | Value::Uint(k) => Some(*k),
                            _ => None,
                        });
                let e = Event::Wakeup(Wakeup {
                    ts,
                    cpu: u32::from(cpu),
                    pid: self.pid_of(tid),
                    tid,
                    waker_tid,
                });
                sink.event(&e, &self.cx);
            }
            Record::Blob {
                blob_type, payload, ..
            } if blob_type == BLOB_TYPE_PERFETTO => self.perfetto(&payload, sink),
            Record::LargeBlob(LargeBlob::Attachment { .. } | LargeBlob::Event { .. })
            | Record::Blob { .. }
            | Record::Log { .. }
            | Record::Unknown { .. } => self.stats.skipped += 1,
            _ => {}
        }
    }

    fn perfetto(&mut self, payload: &[u8], sink: &mut impl Sink) {
        let (samples, problems) = self.perfetto.feed(payload);
        for p in problems {
            self.error(format!("Perfetto packet: {p}"));
        }
        for s in samples {
            self.seen(s.ts);
            if !self.wants.samples {
                continue;
            }
            let frames = s
                .frames
                .iter()
                .map(|f| Frame {
                    function: match unnamed_frame(&f.function, &f.mapping_path, f.rel_pc) {
                        Some(name) => self.cx.strings.intern(&name),
                        None => self.cx.strings.intern(&f.function),
                    },
                    mapping: self.cx.strings.intern(&f.mapping_path),
                })
                .collect();
            let e = Event::Sample(Sample {
                ts: s.ts,
                pid: u64::from(s.pid),
                tid: u64::from(s.tid),
                cpu: s.cpu,
                timebase: self.cx.strings.intern(&s.timebase),
                weight: s.timebase_count,
                frames,
            });
            sink.event(&e, &self.cx);
        }
    }

    /// A sample of a `dropped_events` counter of running totals: the
    /// increase of each series since its previous sample, as a loss.
    fn dropped(&mut self, provider: u32, args: &Args, sink: &mut impl Sink) {
        let mut per_cpu = Vec::new();
        for (name, value) in args {
            let Some(total) = value.as_i64().and_then(|v| u64::try_from(v).ok()) else {
                continue;
            };
            let cpu = self
                .cx
                .strings
                .get(*name)
                .strip_prefix("cpu")
                .and_then(|n| n.parse::<u32>().ok());
            let last = self.dropped_totals.entry((provider, cpu)).or_default();
            let events = total.saturating_sub(*last);
            *last = total;
            if events == 0 {
                continue;
            }
            match per_cpu.iter_mut().find(|d: &&mut Dropped| d.cpu == cpu) {
                Some(d) => d.events = d.events.saturating_add(events),
                None => per_cpu.push(Dropped { cpu, events }),
            }
        }
        if per_cpu.is_empty() {
            return;
        }
        let loss = Event::Loss(Loss {
            provider,
            provider_name: self
                .cx
                .providers
                .get(&provider)
                .copied()
                .unwrap_or_default(),
            events: Some(per_cpu.iter().fold(0u64, |n, d| n.saturating_add(d.events))),
            per_cpu,
        });
        sink.event(&loss, &self.cx);
    }

    #[expect(clippy::too_many_arguments, reason = "one record's fields, as decoded")]
    fn event(
        &mut self,
        ts: u64,
        track: Track,
        category: Sym,
        name: Sym,
        args: Args,
        kind: EventKind,
        scope: Option<trace_common::fxt::read::InstantScope>,
        sink: &mut impl Sink,
    ) {
        let cx = &self.cx;
        let mut emit = |s: Slice| sink.event(&Event::Slice(s), cx);
        match kind {
            EventKind::Instant => {
                let scope = match scope {
                    Some(trace_common::fxt::read::InstantScope::Process) => Scope::Process,
                    Some(trace_common::fxt::read::InstantScope::Global) => Scope::Global,
                    None => Scope::Thread,
                };
                let e = Event::Instant(Instant {
                    ts,
                    track,
                    category,
                    name,
                    scope,
                    args,
                });
                sink.event(&e, &self.cx);
            }
            EventKind::Counter { id } => {
                if category == self.syms.kernel_cat && name == self.syms.dropped_events {
                    self.dropped(track.provider, &args, sink);
                }
                let e = Event::Counter(Counter {
                    ts,
                    track,
                    category,
                    name,
                    id,
                    args,
                });
                sink.event(&e, &self.cx);
            }
            EventKind::DurationBegin => self
                .nesting
                .begin(track, ts, category, name, args, &mut emit),
            EventKind::DurationEnd => self.nesting.end(track, ts, args, &mut emit),
            EventKind::DurationComplete { end_ts } => {
                let end = self.state.ticks_to_ns(end_ts).max(ts);
                let s = &mut self.stats;
                s.last_ts = Some(s.last_ts.map_or(end, |l| l.max(end)));
                // The recorder marks a span still running at the stop.
                let unfinished = args
                    .iter()
                    .any(|(n, v)| *n == self.cx.kernel.unfinished && v.is_true());
                self.nesting
                    .complete(track, ts, end, category, name, args, unfinished, &mut emit)
            }
            EventKind::AsyncBegin { id } => {
                if self.open_async.len() >= MAX_OPEN_ASYNC {
                    // The oldest begin is given up on.
                    if let Some(k) = self
                        .open_async
                        .iter()
                        .min_by_key(|(_, v)| v.3)
                        .map(|(k, _)| *k)
                    {
                        self.open_async.remove(&k);
                    }
                }
                self.async_seq += 1;
                self.open_async.insert(
                    (track.provider, category, name, id),
                    (ts, track, args, self.async_seq),
                );
            }
            EventKind::AsyncEnd { id } => {
                if let Some((begin, btrack, mut bargs, _)) =
                    self.open_async
                        .remove(&(track.provider, category, name, id))
                {
                    bargs.extend(args);
                    let e = Event::Async(AsyncSpan {
                        ts: begin,
                        dur: ts.saturating_sub(begin),
                        track: btrack,
                        category,
                        name,
                        id,
                        args: bargs,
                        unfinished: false,
                    });
                    sink.event(&e, &self.cx);
                } else {
                    self.stats.unmatched_ends += 1;
                }
            }
            EventKind::FlowBegin { id }
            | EventKind::FlowStep { id }
            | EventKind::FlowEnd { id } => {
                let phase = match kind {
                    EventKind::FlowBegin { .. } => FlowPhase::Begin,
                    EventKind::FlowStep { .. } => FlowPhase::Step,
                    _ => FlowPhase::End,
                };
                let flow = Flow {
                    ts,
                    track,
                    category,
                    name,
                    id,
                    phase,
                };
                sink.event(&Event::Flow(flow), &self.cx);
            }
            EventKind::AsyncInstant { .. } => self.stats.skipped += 1,
        }
    }
}
