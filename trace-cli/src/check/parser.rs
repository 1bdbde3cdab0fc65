//! The timestamp-ordered pass, as Perfetto's `FuchsiaTraceParser` makes it:
//! events become slices on thread tracks and global async tracks, counters,
//! and flows; scheduling records go to [`Sched`].

use std::collections::{HashMap, HashSet};
use std::io;

use trace_common::fxt::EventKind;
use trace_common::fxt::wire::IDLE_WEIGHT;

use super::Names;
use super::findings::{Findings, Kind};
use super::sched::{Sched, Switch};
use super::slices::{EndMiss, Slice, Slices, Track};
use super::tokenizer::{Body, Item, Sym, Tokenized, Value};

/// One track of a global async track set (`TrackCompressor`'s cookie
/// tracks): the id it serves and how many slices of it are open.
#[derive(Debug)]
struct CookieTrack {
    cookie: i64,
    nest: u32,
}

/// `TrackCompressor::InternLegacyAsyncTrack` with process-unscoped ids:
/// every id belongs to the set named after the first event seen with it.
#[derive(Debug, Default)]
struct AsyncTracks {
    root_of_id: HashMap<i64, Sym>,
    sets: HashMap<Sym, Vec<CookieTrack>>,
    /// The first process each id was seen in; ids already reported.
    owner: HashMap<i64, u64>,
    collided: HashSet<i64>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum AsyncStep {
    Begin,
    End,
    Instant,
}

impl AsyncTracks {
    fn track(&mut self, name: Sym, id: i64, step: AsyncStep) -> Track {
        let root = *self.root_of_id.entry(id).or_insert(name);
        let set = self.sets.entry(root).or_default();
        let idx = match set.iter().position(|t| t.cookie == id) {
            Some(i) => i,
            None => match set.iter().position(|t| t.nest == 0) {
                Some(i) => {
                    set[i].cookie = id;
                    i
                }
                None => {
                    set.push(CookieTrack {
                        cookie: id,
                        nest: 0,
                    });
                    set.len() - 1
                }
            },
        };
        let t = &mut set[idx];
        match step {
            AsyncStep::Begin => t.nest += 1,
            AsyncStep::End => t.nest = t.nest.saturating_sub(1),
            AsyncStep::Instant => {}
        }
        Track::Async(root, idx)
    }
}

/// `FuchsiaTraceParser::GetGlobalFlowId` and `FlowTracker`.
#[derive(Debug, Default)]
struct Flows {
    active: HashMap<(u32, u64), u64>,
    /// Per correlation id: the process that began it, and whether another
    /// process began it too.
    global: HashMap<u64, (u32, bool)>,
    next: u64,
    /// Global flow id → the slice it is bound to (by offset).
    bound: HashMap<u64, u64>,
    collided: HashSet<u64>,
}

impl Flows {
    /// The global flow id of `(pid, id)`, as the importer resolves it.
    fn resolve(&mut self, pid: u32, id: u64, step_or_end: bool) -> Option<(u64, (u32, u64))> {
        if let Some(&g) = self.active.get(&(pid, id)) {
            return Some((g, (pid, id)));
        }
        if !step_or_end {
            self.next += 1;
            let g = self.next;
            self.active.insert((pid, id), g);
            match self.global.get_mut(&id) {
                Some(info) => {
                    if info.0 != pid {
                        info.1 = true;
                    }
                }
                None => {
                    self.global.insert(id, (pid, false));
                }
            }
            return Some((g, (pid, id)));
        }
        let (owner, ambiguous) = *self.global.get(&id)?;
        if ambiguous {
            return None;
        }
        self.active.get(&(owner, id)).map(|&g| (g, (owner, id)))
    }
}

/// Counter tracks by (process, Perfetto's name): the series first drawn
/// there, as (category, name, argument, id).
type CounterTracks = HashMap<(u32, String), (Sym, Sym, Sym, u64)>;

/// Runs the parser over the items of `tok` in `sorted` (timestamp order,
/// ties in file order), handing each to `also` after it; an error is one
/// of reading the sorted items.
pub fn parse(
    sorted: impl Iterator<Item = io::Result<Item>>,
    tok: &Tokenized,
    names: Names<'_>,
    findings: &mut Findings,
    mut also: impl FnMut(&Item),
) -> io::Result<()> {
    let mut p = Parser {
        names,
        created: &tok.created,
        slices: Slices::default(),
        sched: Sched::default(),
        async_tracks: AsyncTracks::default(),
        flows: Flows::default(),
        counters: CounterTracks::new(),
        counter_collided: HashSet::new(),
        findings,
    };
    for item in sorted {
        let item = item?;
        p.item(&item);
        also(&item);
    }
    p.slices.finish(p.findings, p.names.symbols);
    Ok(())
}

struct Parser<'a, 'f> {
    names: Names<'a>,
    created: &'a HashMap<u64, i64>,
    slices: Slices,
    sched: Sched,
    async_tracks: AsyncTracks,
    flows: Flows,
    counters: CounterTracks,
    counter_collided: HashSet<(u32, String)>,
    findings: &'f mut Findings,
}

impl Parser<'_, '_> {
    fn item(&mut self, item: &Item) {
        match &item.body {
            Body::Event {
                kind,
                pid,
                tid,
                category,
                name,
                args,
                end_ts,
            } => self.event(item, *kind, (*pid, *tid), *category, *name, args, *end_ts),
            Body::LegacySwitch {
                cpu,
                outgoing,
                incoming,
                outgoing_priority,
                incoming_priority,
                ..
            } => {
                // Idle: a thread no kernel object record gave a process,
                // with priority 0.
                let idle = |tid: u64, prio: u8| {
                    prio == 0 && self.names.thread_pid.get(&tid).copied().unwrap_or(0) == 0
                };
                let s = Switch {
                    ts: item.ts,
                    offset: item.offset,
                    cpu: *cpu,
                    outgoing: outgoing.1,
                    incoming: incoming.1,
                    outgoing_idle: idle(outgoing.1, *outgoing_priority),
                    incoming_idle: idle(incoming.1, *incoming_priority),
                };
                self.sched.switch(s, &self.names, self.findings);
            }
            Body::Switch {
                cpu,
                outgoing_tid,
                incoming_tid,
                outgoing_weight,
                incoming_weight,
                ..
            } => {
                let s = Switch {
                    ts: item.ts,
                    offset: item.offset,
                    cpu: *cpu,
                    outgoing: *outgoing_tid,
                    incoming: *incoming_tid,
                    outgoing_idle: *outgoing_weight == IDLE_WEIGHT,
                    incoming_idle: *incoming_weight == IDLE_WEIGHT,
                };
                self.sched.switch(s, &self.names, self.findings);
            }
            Body::Wakeup {
                tid, weight, waker, ..
            } => self.sched.wakeup(
                item.ts,
                item.offset,
                *tid,
                *weight,
                *waker,
                &self.names,
                self.findings,
            ),
        }
    }

    /// A slice on a thread's track must not start before the thread exists.
    fn check_created(&mut self, tid: u64, ts: i64, offset: u64, name: Sym) {
        if let Some(&born) = self.created.get(&tid)
            && ts < born
        {
            let thread = self.names.thread(tid);
            let name = self.names.symbols.get(name).to_owned();
            self.findings
                .add(Kind::SliceBeforeThread, offset, Some(ts), || {
                    format!("{name:?} on {thread}, created at {}", super::fmt_ts(born))
                });
        }
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "an event's fields, as the tokenizer gives them"
    )]
    fn event(
        &mut self,
        item: &Item,
        kind: EventKind,
        (pid, tid): (u64, u64),
        category: Sym,
        name: Sym,
        args: &[(Sym, Value)],
        end_ts: Option<i64>,
    ) {
        let ts = item.ts;
        let offset = item.offset;
        // The importer keeps 32 bits of each koid.
        let pid32 = pid as u32;
        let tid = u64::from(tid as u32);
        let thread = Track::Thread(tid);
        let slice = |dur| Slice {
            ts,
            dur,
            category,
            name,
            offset,
        };
        let sym = self.names.symbols;
        match kind {
            EventKind::Instant => {
                self.check_created(tid, ts, offset, name);
                self.slices
                    .scoped(thread, slice(Some(0)), self.findings, sym);
            }
            EventKind::DurationBegin => {
                self.check_created(tid, ts, offset, name);
                self.slices.begin(thread, slice(None), self.findings, sym);
            }
            EventKind::DurationEnd => {
                if self
                    .slices
                    .end(thread, ts, None, offset, self.findings, sym)
                    .is_err()
                {
                    let thread = self.names.thread(tid);
                    self.findings.add(Kind::UnmatchedEnd, offset, Some(ts), || {
                        format!("duration end on {thread}")
                    });
                }
            }
            EventKind::DurationComplete { .. } => {
                let Some(end) = end_ts else {
                    self.findings
                        .add(Kind::TimestampOverflow, offset, Some(ts), || {
                            "the end timestamp of a complete duration".into()
                        });
                    return;
                };
                let dur = end - ts;
                if dur < 0 {
                    self.findings
                        .add(Kind::NegativeDuration, offset, Some(ts), || {
                            format!("{:?} ends {} ns before it begins", sym.get(name), -dur)
                        });
                    return;
                }
                self.check_created(tid, ts, offset, name);
                self.slices
                    .scoped(thread, slice(Some(dur)), self.findings, sym);
            }
            EventKind::Counter { id } => self.counter(ts, offset, pid32, category, name, id, args),
            EventKind::AsyncBegin { id }
            | EventKind::AsyncInstant { id }
            | EventKind::AsyncEnd { id } => {
                let id = id as i64;
                self.async_owner(id, pid, ts, offset);
                let step = match kind {
                    EventKind::AsyncBegin { .. } => AsyncStep::Begin,
                    EventKind::AsyncEnd { .. } => AsyncStep::End,
                    _ => AsyncStep::Instant,
                };
                let track = self.async_tracks.track(name, id, step);
                match step {
                    AsyncStep::Begin => self.slices.begin(track, slice(None), self.findings, sym),
                    AsyncStep::Instant => {
                        self.slices
                            .scoped(track, slice(Some(0)), self.findings, sym)
                    }
                    AsyncStep::End => {
                        let missed = self.slices.end(
                            track,
                            ts,
                            Some((category, name)),
                            offset,
                            self.findings,
                            sym,
                        );
                        match missed {
                            Ok(()) => {}
                            Err(EndMiss::NoMatch) => {
                                self.findings.add(Kind::AsyncEndMismatch, offset, Some(ts), || {
                                    format!(
                                        "end {:?} ({:?}) of id {id}: no open begin with that category and name",
                                        sym.get(name),
                                        sym.get(category)
                                    )
                                });
                            }
                            Err(EndMiss::NothingOpen) => {
                                self.findings.add(Kind::UnmatchedEnd, offset, Some(ts), || {
                                    format!("async end {:?} of id {id}", sym.get(name))
                                });
                            }
                        }
                    }
                }
            }
            EventKind::FlowBegin { id }
            | EventKind::FlowStep { id }
            | EventKind::FlowEnd { id } => {
                let step_or_end = !matches!(kind, EventKind::FlowBegin { .. });
                self.flow(ts, offset, pid32, thread, id, kind, step_or_end);
            }
        }
    }

    /// Notes which process uses async id `id`; a second process is a
    /// collision (reported once per id).
    fn async_owner(&mut self, id: i64, pid: u64, ts: i64, offset: u64) {
        let pid = u64::from(pid as u32);
        let first = *self.async_tracks.owner.entry(id).or_insert(pid);
        if first != pid && self.async_tracks.collided.insert(id) {
            let a = self.names.process(first);
            let b = self.names.process(pid);
            self.findings
                .add(Kind::AsyncIdCollision, offset, Some(ts), || {
                    format!("id {id} is used by {a} and by {b}")
                });
        }
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "an event's fields, as the tokenizer gives them"
    )]
    fn counter(
        &mut self,
        ts: i64,
        offset: u64,
        pid: u32,
        category: Sym,
        name: Sym,
        id: u64,
        args: &[(Sym, Value)],
    ) {
        let sym = self.names.symbols;
        for &(arg, value) in args {
            match value {
                Value::Number(_) => {}
                Value::Koid(_) | Value::Other => {
                    self.findings
                        .add(Kind::NonNumericCounter, offset, Some(ts), || {
                            format!("{:?} argument {:?}", sym.get(name), sym.get(arg))
                        });
                    continue;
                }
            }
            let key = (pid, format!("{}:{}:{id}", sym.get(name), sym.get(arg)));
            let series = (category, name, arg, id);
            let first = *self.counters.entry(key.clone()).or_insert(series);
            if first != series && self.counter_collided.insert(key.clone()) {
                let process = self.names.process(u64::from(pid));
                self.findings
                    .add(Kind::CounterCollision, offset, Some(ts), || {
                        format!(
                            "{:?} in {process}: {:?} / {:?} / {:?} and {:?} / {:?} / {:?}",
                            key.1,
                            sym.get(first.0),
                            sym.get(first.1),
                            sym.get(first.2),
                            sym.get(category),
                            sym.get(name),
                            sym.get(arg)
                        )
                    });
            }
        }
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "an event's fields, as the tokenizer gives them"
    )]
    fn flow(
        &mut self,
        ts: i64,
        offset: u64,
        pid: u32,
        track: Track,
        id: u64,
        kind: EventKind,
        step_or_end: bool,
    ) {
        let before = self.flows.global.get(&id).is_some_and(|g| g.1);
        let resolved = self.flows.resolve(pid, id, step_or_end);
        let after = self.flows.global.get(&id).is_some_and(|g| g.1);
        if !before && after && self.flows.collided.insert(id) {
            let process = self.names.process(u64::from(pid));
            self.findings
                .add(Kind::FlowIdCollision, offset, Some(ts), || {
                    format!("flow id {id} is begun in more than one process, also {process}")
                });
        }
        let Some((global, scoped)) = resolved else {
            self.findings
                .add(Kind::FlowUnmatched, offset, Some(ts), || {
                    format!("flow id {id}: no begin in this process, none unambiguous elsewhere")
                });
            return;
        };
        if matches!(kind, EventKind::FlowEnd { .. }) {
            // The parser forgets the id whatever the flow tracker does.
            self.flows.active.remove(&scoped);
            self.flows.global.remove(&scoped.1);
        }
        let Some(top) = self.slices.top(track).copied() else {
            self.findings
                .add(Kind::FlowOutsideSlice, offset, Some(ts), || {
                    format!("flow id {id}: no slice open on its thread")
                });
            return;
        };
        if let Some(dur) = top.dur
            && top.ts + dur < ts
        {
            let sym = self.names.symbols;
            self.findings
                .add(Kind::FlowStaleSlice, offset, Some(ts), || {
                    format!(
                        "flow id {id} binds to {:?}, which ended at {}",
                        sym.get(top.name),
                        super::fmt_ts(top.ts + dur)
                    )
                });
        }
        match kind {
            EventKind::FlowBegin { .. } => {
                if self.flows.bound.insert(global, top.offset).is_some() {
                    self.findings
                        .add(Kind::FlowDuplicate, offset, Some(ts), || {
                            format!("flow id {id} begun again before it ended")
                        });
                }
            }
            EventKind::FlowStep { .. } => {
                if self.flows.bound.insert(global, top.offset).is_none() {
                    self.flows.bound.remove(&global);
                    self.findings
                        .add(Kind::FlowUnmatched, offset, Some(ts), || {
                            format!("flow id {id}: step after a begin that was not drawn")
                        });
                }
            }
            _ => {
                if self.flows.bound.remove(&global).is_none() {
                    self.findings
                        .add(Kind::FlowUnmatched, offset, Some(ts), || {
                            format!("flow id {id}: end after a begin that was not drawn")
                        });
                }
            }
        }
    }
}
