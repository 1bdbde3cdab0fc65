//! What a critical path explains, and finding its instance in a trace.

use std::io::Read;

use super::{CriticalPathError, Found, Options};
use crate::event::Event;
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
}

/// What to explain: `NAME` or `span:NAME`, `syscall:NAME`, `thread:TID`.
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
    "{0:?} is not a target: give NAME or span:NAME (a userspace duration), syscall:NAME, or thread:TID"
)]
pub struct TargetError(String);

impl std::str::FromStr for Target {
    type Err = TargetError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || TargetError(s.to_owned());
        let (kind, name) = match s.split_once(':') {
            Some(("span", n)) => (TargetKind::Span, n),
            Some(("syscall", n)) => (TargetKind::Syscall, n),
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
        }
    }
}

/// One instance that matches.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    ts: u64,
    dur: u64,
    pid: u64,
    tid: u64,
    category: crate::strings::Sym,
}

/// Reads `input` for the instance of `options.target` to explain; returns
/// it and the time relative bounds counted from.
pub(super) fn find(input: impl Read, options: &Options) -> Result<(Found, u64), CriticalPathError> {
    let target = &options.target;
    let mut filter = Filter::new(options.selection.clone());
    let mut found: Vec<Candidate> = Vec::new();
    let want_name = target.name.as_str();
    let mut name_sym = None;
    let mut sink = |e: &Event, cx: &Context| {
        let Event::Slice(s) = e else { return };
        if target.kind == TargetKind::Thread {
            return;
        }
        let sym = match name_sym {
            Some(sym) => sym,
            None => match cx.strings.lookup(want_name) {
                Some(sym) => *name_sym.insert(sym),
                None => return,
            },
        };
        if s.name != sym {
            return;
        }
        let syscall = s.category == cx.kernel.syscall;
        let kernel = cx.strings.get(s.category).starts_with("kernel:");
        let wanted = match target.kind {
            TargetKind::Syscall => syscall,
            TargetKind::Span => !kernel,
            TargetKind::Thread => false,
        };
        if wanted && filter.thread(s.track.pid, s.track.tid, cx) {
            found.push(Candidate {
                ts: s.ts,
                dur: s.dur,
                pid: s.track.pid,
                tid: s.track.tid,
                category: s.category,
            });
        }
    };
    let wants = Wants {
        durations: true,
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
        return Ok((found, origin));
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
                        _ => "",
                    }
                )));
            }
        },
    };
    let c = found[index];
    Ok((
        Found {
            kind: target.kind_name(),
            name: target.name.clone(),
            category: cx.strings.get(c.category).to_owned(),
            ts: c.ts,
            dur: c.dur,
            relative_ts: 0,
            pid: c.pid,
            tid: c.tid,
            instances: found.len(),
            nth: index + 1,
        },
        origin,
    ))
}
