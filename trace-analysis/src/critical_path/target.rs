//! What a critical path explains, and finding its instance in a trace.

use std::io::Read;

use super::{CriticalPathError, Found, Options};
use crate::event::{Args, Event, Value};
use crate::reader::{Context, Wants, read_trace_wanting};
use crate::report::Filter;

/// How the target is named.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum TargetKind {
    /// A duration of a userspace provider (any category but `kernel:*`),
    /// by name: a span of the `tracing` layer, a macro's duration.
    #[default]
    Span,
    /// A system call, by name.
    Syscall,
    /// A thread, by tid, over the selection's time range.
    Thread,
    /// An async span of a userspace provider, by name: a `tracing` span
    /// polled more than once, a tokio task; its polls may hop threads.
    Task,
}

/// What to explain: `NAME` or `span:NAME`, `syscall:NAME`, `thread:TID`,
/// `task:NAME`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Target {
    /// How it is named.
    pub kind: TargetKind,
    /// The name (a thread's tid, as text).
    pub name: String,
}

/// A target that does not parse.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error(
    "{0:?} is not a target: give NAME or span:NAME (a userspace duration), syscall:NAME, thread:TID, or task:NAME (an async span)"
)]
pub struct TargetError(String);

impl std::str::FromStr for Target {
    type Err = TargetError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || TargetError(s.to_owned());
        let (kind, name) = match s.split_once(':') {
            Some(("span", n)) => (TargetKind::Span, n),
            Some(("syscall", n)) => (TargetKind::Syscall, n),
            Some(("task", n)) => (TargetKind::Task, n),
            Some(("thread", n)) => {
                n.trim().parse::<u64>().map_err(|_| err())?;
                (TargetKind::Thread, n.trim())
            }
            _ => (TargetKind::Span, s),
        };
        if name.is_empty() {
            return Err(err());
        }
        Ok(Target {
            kind,
            name: name.to_owned(),
        })
    }
}

impl Target {
    fn kind_name(&self) -> &'static str {
        match self.kind {
            TargetKind::Span => "span",
            TargetKind::Syscall => "syscall",
            TargetKind::Thread => "thread",
            TargetKind::Task => "task",
        }
    }
}

/// One instance that matches.
#[derive(Clone, Debug)]
struct Candidate {
    ts: u64,
    dur: u64,
    pid: u64,
    tid: u64,
    category: crate::strings::Sym,
    /// An async span's arguments.
    args: Args,
}

/// The instance to explain, found.
#[derive(Debug)]
pub(super) struct Located {
    /// It.
    pub found: Found,
    /// The time relative bounds count from, ns.
    pub origin: u64,
    /// An async span's arguments (its polls carry its fields), by name.
    pub args: Vec<(String, Value)>,
}

/// Reads `input` for the instance of `options.target` to explain.
pub(super) fn find(input: impl Read, options: &Options) -> Result<Located, CriticalPathError> {
    let target = &options.target;
    let mut filter = Filter::new(options.selection.clone());
    let mut found: Vec<Candidate> = Vec::new();
    let want_name = target.name.as_str();
    let mut name_sym = None;
    let mut sink = |e: &Event, cx: &Context| {
        if target.kind == TargetKind::Thread {
            return;
        }
        let (ts, dur, track, category, name, args) = match e {
            Event::Slice(s) if target.kind != TargetKind::Task => {
                (s.ts, s.dur, s.track, s.category, s.name, None)
            }
            Event::Async(a) if target.kind == TargetKind::Task && !a.unfinished => {
                (a.ts, a.dur, a.track, a.category, a.name, Some(&a.args))
            }
            _ => return,
        };
        let sym = match name_sym {
            Some(sym) => sym,
            None => match cx.strings.lookup(want_name) {
                Some(sym) => *name_sym.insert(sym),
                None => return,
            },
        };
        if name != sym {
            return;
        }
        let syscall = category == cx.kernel.syscall;
        let kernel = cx.strings.get(category).starts_with("kernel:");
        let wanted = match target.kind {
            TargetKind::Syscall => syscall,
            TargetKind::Span | TargetKind::Task => !kernel,
            TargetKind::Thread => false,
        };
        if wanted && filter.thread(track.pid, track.tid, cx) {
            found.push(Candidate {
                ts,
                dur,
                pid: track.pid,
                tid: track.tid,
                category,
                args: args.cloned().unwrap_or_default(),
            });
        }
    };
    let wants = Wants {
        durations: target.kind != TargetKind::Task,
        asyncs: target.kind == TargetKind::Task,
        end_time: true,
        ..Wants::default()
    };
    let (stats, cx) = read_trace_wanting(input, &mut sink, wants)?;
    let first = stats.first_ts.unwrap_or(0);
    let origin = options.origin.unwrap_or(first);
    filter.start_at(origin);
    let (from, to) = filter.window();
    if target.kind == TargetKind::Thread {
        let tid: u64 = target.name.parse().unwrap_or(0);
        let Some(pid) = cx.process_of(tid) else {
            return Err(CriticalPathError::NotFound(format!(
                "the trace names no thread {tid}"
            )));
        };
        let start = from.max(stats.observed_from.unwrap_or(first));
        let end = to.min(stats.last_ts.unwrap_or(0));
        if end <= start {
            return Err(CriticalPathError::NotFound(
                "the time range holds none of the trace".into(),
            ));
        }
        let found = Found {
            kind: target.kind_name(),
            name: cx.thread_name(tid).to_owned(),
            category: String::new(),
            ts: start,
            dur: end - start,
            relative_ts: 0,
            pid,
            tid,
            instances: 1,
            nth: 1,
        };
        return Ok(Located {
            found,
            origin,
            args: Vec::new(),
        });
    }
    found.retain(|c| from <= c.ts && c.ts < to);
    found.sort_by_key(|c| (c.ts, c.tid));
    let what = format!("{} {:?}", target.kind_name(), target.name);
    let index = match options.nth {
        Some(0) => {
            return Err(CriticalPathError::NotFound(
                "--nth counts from 1 (the first instance)".into(),
            ));
        }
        Some(n) if n > found.len() => {
            return Err(CriticalPathError::NotFound(format!(
                "the trace has {} instance(s) of {what} in the selection, not {n}",
                found.len()
            )));
        }
        Some(n) => n - 1,
        None => match found
            .iter()
            .enumerate()
            .max_by_key(|(i, c)| (c.dur, std::cmp::Reverse(*i)))
        {
            Some((i, _)) => i,
            None => {
                return Err(CriticalPathError::NotFound(format!(
                    "the trace has no {what} in the selection{}",
                    match target.kind {
                        TargetKind::Syscall => " (was kernel:syscall recorded?)",
                        TargetKind::Task => {
                            " (a task is an async span: a `tracing` span polled more than once that closed before the trace ended)"
                        }
                        _ => "",
                    }
                )));
            }
        },
    };
    let instances = found.len();
    let c = found.swap_remove(index);
    let args = c
        .args
        .iter()
        .map(|(n, v)| (cx.strings.get(*n).to_owned(), v.clone()))
        .collect();
    let found = Found {
        kind: target.kind_name(),
        name: target.name.clone(),
        category: cx.strings.get(c.category).to_owned(),
        ts: c.ts,
        dur: c.dur,
        relative_ts: 0,
        pid: c.pid,
        tid: c.tid,
        instances,
        nth: index + 1,
    };
    Ok(Located {
        found,
        origin,
        args,
    })
}
