//! Which process each thread lands in, as Perfetto's process tracker files
//! it (`common/process_tracker.cc`, called from the FXT tokenizer and
//! parser):
//!
//! - a thread kernel object makes the row (thread, its `"process"`), named;
//!   all of them are applied before any event is parsed;
//! - an instant, duration or flow event makes or reuses the row (thread,
//!   the event's process): a thread already filed under another process
//!   gets a second row;
//! - a scheduling record names only a thread id: its CPU slices and states
//!   go to the row of the process the *last* thread object of that id
//!   names, and to a process with pid 0 where no thread object names it;
//! - a wake-up's waker is looked up by its id alone: without any row for
//!   it, it is a thread of no process;
//! - counters and async events belong to their event's process, which has
//!   a name only where a process object gives one.

use std::collections::{HashMap, HashSet};

use trace_common::fxt::wire::IDLE_WEIGHT;

use super::Names;
use super::findings::{Findings, Kind};
use super::items::{Body, Item, makes_thread_row};
use super::tokenizer::Tokenized;

/// What the thread objects say of one thread id.
#[derive(Debug, Default)]
struct Objects {
    /// The processes they name, first seen first.
    processes: Vec<u64>,
    /// Where the first of them is.
    first_offset: u64,
    /// The process of the last one: where its scheduling data goes.
    last: u64,
}

/// Starts checking where every thread of `tok` lands: the thread objects
/// first, then each item in time order ([`Checker::item`]), then
/// [`Checker::finish`].
pub fn start<'a, 'f>(
    tok: &Tokenized,
    names: &'a Names<'a>,
    findings: &'f mut Findings,
) -> Checker<'a, 'f> {
    let mut objects: HashMap<u64, Objects> = HashMap::new();
    for &(offset, tid, pid) in &tok.thread_objects {
        let pid = pid.unwrap_or(0);
        let o = objects.entry(tid).or_insert_with(|| Objects {
            first_offset: offset,
            ..Objects::default()
        });
        if !o.processes.contains(&pid) {
            o.processes.push(pid);
        }
        o.last = pid;
    }
    let mut c = Checker {
        names,
        objects,
        rows: HashMap::new(),
        unnamed_processes: HashSet::new(),
        unnamed_rows: HashSet::new(),
        named_late: HashSet::new(),
        event_threads: tok.event_threads.clone(),
        findings,
    };
    for &(offset, tid, pid) in &tok.thread_objects {
        // A missing "process" is its own finding (thread_without_process).
        let pid = match pid {
            Some(0) => {
                c.findings.add(Kind::ProcessZero, offset, None, || {
                    format!("{} is named as a thread of process 0", names.thread(tid))
                });
                0
            }
            Some(pid) => {
                c.process(offset, None, pid);
                pid
            }
            None => 0,
        };
        c.row(offset, tid, pid);
        if tok.thread_names.get(&tid).is_some_and(String::is_empty) {
            c.unnamed(offset, None, tid, pid);
        }
    }
    c
}

/// Where threads land, item by item.
pub struct Checker<'a, 'f> {
    names: &'a Names<'a>,
    objects: HashMap<u64, Objects>,
    /// The processes each thread id has a row in, with the offset of the
    /// record that made each.
    rows: HashMap<u64, Vec<(u64, u64)>>,
    unnamed_processes: HashSet<u64>,
    unnamed_rows: HashSet<(u64, u64)>,
    named_late: HashSet<u64>,
    /// Threads some instant, duration or flow event names.
    event_threads: HashSet<u64>,
    findings: &'f mut Findings,
}

impl Checker<'_, '_> {
    /// The next item in time order.
    pub fn item(&mut self, item: &Item) {
        let (ts, offset) = (Some(item.ts), item.offset);
        match &item.body {
            Body::Event { kind, pid, tid, .. } => {
                if *pid == 0 {
                    let what = if makes_thread_row(*kind) {
                        format!("thread {tid}")
                    } else {
                        "a counter or async event".to_owned()
                    };
                    self.findings.add(Kind::ProcessZero, offset, ts, || {
                        format!("{what} in an event record of process 0")
                    });
                } else {
                    self.process(offset, ts, *pid);
                }
                if !makes_thread_row(*kind) || *pid == 0 {
                    return;
                }
                self.row(offset, *tid, *pid);
                self.late(offset, ts, *tid);
                let named = self
                    .objects
                    .get(tid)
                    .is_some_and(|o| o.processes.contains(pid));
                if !named {
                    self.unnamed(offset, ts, *tid, *pid);
                }
            }
            Body::LegacySwitch {
                outgoing,
                incoming,
                outgoing_priority,
                incoming_priority,
                ..
            } => {
                // Idle: priority 0 and no thread object with a process.
                for (tid, prio) in [
                    (outgoing.1, *outgoing_priority),
                    (incoming.1, *incoming_priority),
                ] {
                    let pid = self.objects.get(&tid).map_or(0, |o| o.last);
                    if !(prio == 0 && pid == 0) {
                        self.scheduled(offset, ts, tid);
                    }
                }
            }
            Body::Switch {
                outgoing_tid,
                incoming_tid,
                outgoing_weight,
                incoming_weight,
                ..
            } => {
                for (tid, weight) in [
                    (*outgoing_tid, *outgoing_weight),
                    (*incoming_tid, *incoming_weight),
                ] {
                    if weight != IDLE_WEIGHT {
                        self.scheduled(offset, ts, tid);
                    }
                }
            }
            Body::Wakeup { tid, weight, waker } => {
                if *weight == IDLE_WEIGHT {
                    return;
                }
                self.scheduled(offset, ts, *tid);
                if let Some(w) = *waker
                    && w != 0
                    && !self.objects.contains_key(&w)
                    && !self.event_threads.contains(&w)
                {
                    self.findings
                        .add(Kind::SchedThreadWithoutProcess, offset, ts, || {
                            format!("waker thread {w}: no record ever gives it a process")
                        });
                }
            }
        }
    }

    /// Thread `tid` of a scheduling record (not idle): its slices go to the
    /// process of its last thread object.
    fn scheduled(&mut self, offset: u64, ts: Option<i64>, tid: u64) {
        let Some(pid) = self.objects.get(&tid).map(|o| o.last) else {
            let names = self.names;
            self.findings
                .add(Kind::SchedThreadWithoutProcess, offset, ts, || {
                    format!(
                        "{}: no thread object names its process anywhere in the file",
                        names.thread(tid)
                    )
                });
            return;
        };
        if pid == 0 {
            // Reported with the thread object (thread_without_process or
            // process_zero); its slices land there too.
            return;
        }
        self.row(offset, tid, pid);
        self.late(offset, ts, tid);
    }

    /// Thread `tid` has a row in process `pid`.
    fn row(&mut self, offset: u64, tid: u64, pid: u64) {
        let rows = self.rows.entry(tid).or_default();
        if !rows.iter().any(|&(p, _)| p == pid) {
            rows.push((pid, offset));
        }
    }

    /// Process `pid` is used: it should be named.
    fn process(&mut self, offset: u64, ts: Option<i64>, pid: u64) {
        if self.names.process_names.contains_key(&pid) || !self.unnamed_processes.insert(pid) {
            return;
        }
        self.findings.add(Kind::UnnamedProcess, offset, ts, || {
            format!("process {pid}: no process object names it")
        });
    }

    /// Thread `tid` of `pid` has a row no thread object names.
    fn unnamed(&mut self, offset: u64, ts: Option<i64>, tid: u64, pid: u64) {
        if !self.unnamed_rows.insert((tid, pid)) {
            return;
        }
        let process = self.names.process(pid);
        self.findings.add(Kind::UnnamedThread, offset, ts, || {
            format!("thread {tid} of {process}")
        });
    }

    /// A record of `tid` at `offset`: its thread object should come before.
    fn late(&mut self, offset: u64, ts: Option<i64>, tid: u64) {
        let Some(first) = self.objects.get(&tid).map(|o| o.first_offset) else {
            return;
        };
        if first < offset || !self.named_late.insert(tid) {
            return;
        }
        let names = self.names;
        self.findings.add(Kind::ThreadNamedLate, offset, ts, || {
            format!("{}: first named at offset {first:#x}", names.thread(tid))
        });
    }

    /// After the last item: thread ids with rows in several processes.
    pub fn finish(&mut self) {
        let mut split: Vec<_> = self
            .rows
            .iter()
            .filter(|(tid, rows)| **tid != 0 && rows.len() > 1)
            .collect();
        split.sort_by_key(|(_, rows)| rows[1].1);
        for (&tid, rows) in split {
            let names = self.names;
            let list: Vec<String> = rows.iter().map(|&(p, _)| names.process(p)).collect();
            self.findings.add(Kind::ThreadSplit, rows[1].1, None, || {
                format!("thread {tid} is in {}", list.join(" and in "))
            });
        }
    }
}
