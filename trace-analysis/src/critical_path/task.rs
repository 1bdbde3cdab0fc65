//! An async task as a target: a `tracing` span polled more than once (a
//! tokio task), one async span from its creation to its close whose polls
//! are durations on whichever threads ran them. Its time is split into its
//! polls, each explained as a stretch of its thread (running, runnable
//! behind whom, blocked in what: a blocking call inside a poll is a
//! classic), and the time it awaited between them.

use std::io::Read;

use foldhash::HashMap;
use serde::Serialize;

use super::Found;
use super::walk::{Share, ThreadTime, walk_range};
use super::window::Window;
use crate::event::{Event, Value};
use crate::reader::{Context, ReadTraceError, Wants, read_trace_wanting};

/// The arguments the layer adds to a task's async span at its close; the
/// others are the span's fields, which each poll carries too.
const CLOSE_ARGS: &[&str] = &[
    "polls",
    "busy_ns",
    "idle_ns",
    "wakes",
    "sched_delay_ns",
    "max_sched_delay_ns",
];

/// One poll of the task: a stretch of a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Poll {
    /// The thread that ran it.
    pub tid: u64,
    /// Start, ns.
    pub ts: u64,
    /// End, ns.
    pub end: u64,
}

/// A task's time: its polls, and what it awaited between them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TaskTime {
    /// Polls found.
    pub polls: usize,
    /// Polls its span says it had (the layer's `polls`), when it says.
    pub polls_recorded: Option<u64>,
    /// Time inside its polls, ns.
    pub polled_ns: u64,
    /// Time between its creation, its polls and its close, ns: awaiting a
    /// wake, or woken and waiting to be polled.
    pub awaiting_ns: u64,
    /// Of that, from each wake to the poll it led to (the layer's
    /// `sched_delay_ns`), ns, when recorded.
    pub sched_delay_ns: Option<u64>,
    /// Wakes it had (the layer's `wakes`), when recorded.
    pub wakes: Option<u64>,
    /// The longest stretch between two polls (or from creation to the
    /// first, or the last to the close), ns.
    pub longest_await_ns: u64,
    /// Time in polls by the thread that ran them, longest first.
    pub threads: Vec<Share>,
    /// Each poll's thread over the poll, its waits followed, in order.
    pub poll_times: Vec<ThreadTime>,
}

/// Whether a duration with `args`, named `name`, is a poll of the task
/// named `task` with `task_args`: its fields are among the task's (a
/// tokio task's carry its `task.id`); a span without fields must also
/// bear the task's name.
fn is_poll(args: &[(&str, &Value)], name: &str, task: &str, task_args: &[(String, Value)]) -> bool {
    if args.is_empty() {
        return name == task;
    }
    args.iter().all(|(n, v)| {
        task_args
            .iter()
            .any(|(tn, tv)| tn == n && tv == *v && !CLOSE_ARGS.contains(&tn.as_str()))
    })
}

/// Reads `input` for the polls of the task `found` whose async span has
/// `task_args`: durations of its process and category inside its time,
/// the outermost where a poll nests in another (a span re-entered inside
/// itself).
pub(super) fn polls(
    input: impl Read,
    found: &Found,
    task_args: &[(String, Value)],
) -> Result<Vec<Poll>, ReadTraceError> {
    let end = found.ts.saturating_add(found.dur);
    let mut polls: Vec<Poll> = Vec::new();
    let mut sink = |e: &Event, cx: &Context| {
        let Event::Slice(s) = e else { return };
        if s.track.pid != found.pid
            || s.ts < found.ts
            || s.ts.saturating_add(s.dur) > end
            || cx.strings.get(s.category) != found.category
        {
            return;
        }
        let args: Vec<(&str, &Value)> = s
            .args
            .iter()
            .map(|(n, v)| (cx.strings.get(*n), v))
            .collect();
        if is_poll(&args, cx.strings.get(s.name), &found.name, task_args) {
            polls.push(Poll {
                tid: s.track.tid,
                ts: s.ts,
                end: s.ts + s.dur,
            });
        }
    };
    let wants = Wants {
        durations: true,
        ..Wants::default()
    };
    read_trace_wanting(input, &mut sink, wants)?;
    polls.sort_by_key(|p| (p.ts, std::cmp::Reverse(p.end)));
    let mut outer: Vec<Poll> = Vec::with_capacity(polls.len());
    for p in polls {
        let inside = outer
            .iter()
            .rev()
            .take_while(|o| o.end > p.ts)
            .any(|o| o.tid == p.tid && o.ts <= p.ts && p.end <= o.end);
        if !inside {
            outer.push(p);
        }
    }
    Ok(outer)
}

/// The task `found`'s time, from its `polls` and its span's closing
/// `task_args`, each poll walked as its thread's time.
pub(super) fn explain(
    w: &Window,
    found: &Found,
    polls: &[Poll],
    task_args: &[(String, Value)],
    min_wait: u64,
    max_depth: usize,
) -> TaskTime {
    let arg = |name: &str| {
        task_args
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.as_i64())
            .and_then(|v| u64::try_from(v).ok())
    };
    let end = found.ts.saturating_add(found.dur);
    let mut polled = 0;
    let mut longest_await = 0;
    let mut last = found.ts;
    let mut by_thread: HashMap<u64, u64> = HashMap::default();
    let mut poll_times = Vec::with_capacity(polls.len());
    for p in polls {
        // Polls on two threads may overlap only by clock slack.
        let from = p.ts.max(last);
        longest_await = longest_await.max(from - last);
        polled += p.end.saturating_sub(from);
        last = last.max(p.end);
        *by_thread.entry(p.tid).or_default() += p.end - p.ts;
        poll_times.push(walk_range(w, p.tid, p.ts, p.end, min_wait, max_depth));
    }
    longest_await = longest_await.max(end.saturating_sub(last));
    let label = |tid: u64| match w.names.get(&tid) {
        Some((_, name)) if !name.is_empty() => format!("{name} ({tid})"),
        _ => format!("thread {tid}"),
    };
    let mut threads: Vec<Share> = by_thread
        .into_iter()
        .map(|(tid, ns)| Share {
            name: label(tid),
            ns,
        })
        .collect();
    threads.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.name.cmp(&b.name)));
    TaskTime {
        polls: polls.len(),
        polls_recorded: arg("polls"),
        polled_ns: polled,
        awaiting_ns: found.dur.saturating_sub(polled),
        sched_delay_ns: arg("sched_delay_ns"),
        wakes: arg("wakes"),
        longest_await_ns: longest_await,
        threads,
        poll_times,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(pairs: &[(&str, Value)]) -> Vec<(String, Value)> {
        pairs
            .iter()
            .map(|(n, v)| ((*n).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn a_poll_carries_the_tasks_fields() {
        let task = args(&[
            ("task.id", Value::Uint(7)),
            ("kind", Value::Str("task".into())),
            ("polls", Value::Uint(3)),
        ]);
        let id7 = Value::Uint(7);
        let id8 = Value::Uint(8);
        let kind = Value::Str("task".into());
        assert!(is_poll(
            &[("task.id", &id7), ("kind", &kind)],
            "runtime.spawn",
            "request",
            &task
        ));
        assert!(!is_poll(
            &[("task.id", &id8), ("kind", &kind)],
            "runtime.spawn",
            "request",
            &task
        ));
        // The closing arguments are the task's, not fields.
        let three = Value::Uint(3);
        assert!(!is_poll(&[("polls", &three)], "request", "request", &task));
        // Without fields, by name.
        assert!(is_poll(&[], "request", "request", &task));
        assert!(!is_poll(&[], "other", "request", &task));
    }
}
