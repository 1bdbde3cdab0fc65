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
use crate::event::{Event, FlowPhase, Value};
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

/// A stretch between two polls of a task (or from its creation to its
/// first), and what ended it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Await {
    /// From, ns.
    pub from: u64,
    /// To (the poll it ended with), ns.
    pub to: u64,
    /// Its length, ns.
    pub ns: u64,
    /// The poll that woke it: a task (by its name and `task.id`) or span,
    /// and the thread it ran on; `None` when no wake from inside a poll
    /// was recorded (a timer or I/O driver, a wake outside any span).
    pub woken_by: Option<String>,
    /// The thread the waking poll ran on.
    pub waker_tid: Option<u64>,
    /// It is the wait from the task's creation to its first poll.
    pub first: bool,
}

/// A wake recorded as a flow into one of the task's polls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wake {
    /// Which poll (an index into the polls) it led to.
    pub poll: usize,
    /// The waking poll: its task's name (and `task.id`) or span name.
    pub by: String,
    /// The thread it ran on.
    pub tid: u64,
}

/// A task's polls and the wakes that led to them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Polled {
    /// Its polls, in order of time.
    pub polls: Vec<Poll>,
    /// The wakes into them from other polls.
    pub wakes: Vec<Wake>,
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
    /// The awaits of at least the threshold, in order of time.
    pub awaits: Vec<Await>,
    /// How many awaits were shorter than the threshold.
    pub short_awaits: u64,
    /// Their time, ns.
    pub short_awaits_ns: u64,
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

/// A duration of the task's process and category near its time: a poll
/// of it, or of what may wake it.
struct Candidate {
    tid: u64,
    ts: u64,
    end: u64,
    ours: bool,
    label: String,
}

/// How a poll is named as a waker: its task's `task.name` and `task.id`
/// when it has them, else its span's name.
fn label(name: &str, args: &[(&str, &Value)]) -> String {
    let arg = |n: &str| args.iter().find(|(a, _)| *a == n).map(|(_, v)| *v);
    let name = match arg("task.name").and_then(Value::as_str) {
        Some(task) => task.to_owned(),
        None => name.to_owned(),
    };
    match arg("task.id").and_then(Value::as_i64) {
        Some(id) => format!("task {name:?} (task.id {id})"),
        None => format!("span {name:?}"),
    }
}

/// Reads `input` for the polls of the task `found` whose async span has
/// `task_args` — durations of its process and category inside its time,
/// the outermost where a poll nests in another (a span re-entered inside
/// itself) — and for the wakes into them: flows ending in one of them that
/// begin in a poll of another span (the layer's wake flows, from tokio's
/// waker events).
pub(super) fn gather(
    input: impl Read,
    found: &Found,
    task_args: &[(String, Value)],
) -> Result<Polled, ReadTraceError> {
    let end = found.ts.saturating_add(found.dur);
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut begins: HashMap<u64, (u64, u64)> = HashMap::default();
    let mut ends: Vec<(u64, u64, u64)> = Vec::new();
    let mut sink = |e: &Event, cx: &Context| match e {
        Event::Slice(s) => {
            let s_end = s.ts.saturating_add(s.dur);
            if s.track.pid != found.pid
                || s_end < found.ts
                || s.ts > end
                || cx.strings.get(s.category) != found.category
            {
                return;
            }
            let args: Vec<(&str, &Value)> = s
                .args
                .iter()
                .map(|(n, v)| (cx.strings.get(*n), v))
                .collect();
            let name = cx.strings.get(s.name);
            let ours =
                s.ts >= found.ts && s_end <= end && is_poll(&args, name, &found.name, task_args);
            candidates.push(Candidate {
                tid: s.track.tid,
                ts: s.ts,
                end: s_end,
                ours,
                label: label(name, &args),
            });
        }
        Event::Flow(f) if f.track.pid == found.pid && f.ts <= end => match f.phase {
            FlowPhase::Begin => {
                begins.insert(f.id, (f.track.tid, f.ts));
            }
            FlowPhase::End if f.ts >= found.ts => ends.push((f.id, f.track.tid, f.ts)),
            _ => {}
        },
        _ => {}
    };
    let wants = Wants {
        durations: true,
        flows: true,
        ..Wants::default()
    };
    read_trace_wanting(input, &mut sink, wants)?;
    candidates.sort_by_key(|c| (c.ts, std::cmp::Reverse(c.end)));
    let mut polls: Vec<Poll> = Vec::new();
    for c in candidates.iter().filter(|c| c.ours) {
        let inside = polls
            .iter()
            .rev()
            .take_while(|o| o.end > c.ts)
            .any(|o| o.tid == c.tid && o.ts <= c.ts && c.end <= o.end);
        if !inside {
            polls.push(Poll {
                tid: c.tid,
                ts: c.ts,
                end: c.end,
            });
        }
    }
    let poll_at = |tid: u64, ts: u64| {
        polls
            .iter()
            .position(|p| p.tid == tid && p.ts <= ts && ts <= p.end)
    };
    let mut wakes = Vec::new();
    for (id, tid, ts) in ends {
        let (Some(poll), Some(&(btid, bts))) = (poll_at(tid, ts), begins.get(&id)) else {
            continue;
        };
        // A flow from one of its own polls chains them; a wake comes from
        // another span's poll, the outermost open there.
        if poll_at(btid, bts).is_some() {
            continue;
        }
        if let Some(by) = candidates
            .iter()
            .find(|c| !c.ours && c.tid == btid && c.ts <= bts && bts <= c.end)
        {
            wakes.push(Wake {
                poll,
                by: by.label.clone(),
                tid: btid,
            });
        }
    }
    Ok(Polled { polls, wakes })
}

/// The task `found`'s time, from its `polls` and its span's closing
/// `task_args`, each poll walked as its thread's time.
pub(super) fn explain(
    w: &Window,
    found: &Found,
    polled: &Polled,
    task_args: &[(String, Value)],
    min_wait: u64,
    max_depth: usize,
) -> TaskTime {
    let polls = &polled.polls;
    let arg = |name: &str| {
        task_args
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.as_i64())
            .and_then(|v| u64::try_from(v).ok())
    };
    let end = found.ts.saturating_add(found.dur);
    let mut polled_ns = 0;
    let mut longest_await = 0;
    let mut last = found.ts;
    let mut by_thread: HashMap<u64, u64> = HashMap::default();
    let label = |tid: u64| match w.names.get(&tid) {
        Some((_, name)) if !name.is_empty() => format!("{name} ({tid})"),
        _ => format!("thread {tid}"),
    };
    let mut poll_times = Vec::with_capacity(polls.len());
    let (mut awaits, mut short_awaits, mut short_awaits_ns) = (Vec::new(), 0, 0);
    for (i, p) in polls.iter().enumerate() {
        // Polls on two threads may overlap only by clock slack.
        let from = p.ts.max(last);
        longest_await = longest_await.max(from - last);
        if from - last >= min_wait {
            let wake = polled.wakes.iter().find(|k| k.poll == i);
            awaits.push(Await {
                from: last,
                to: from,
                ns: from - last,
                woken_by: wake.map(|k| format!("{} on {}", k.by, label(k.tid))),
                waker_tid: wake.map(|k| k.tid),
                first: i == 0,
            });
        } else if from > last {
            short_awaits += 1;
            short_awaits_ns += from - last;
        }
        polled_ns += p.end.saturating_sub(from);
        last = last.max(p.end);
        *by_thread.entry(p.tid).or_default() += p.end - p.ts;
        poll_times.push(walk_range(w, p.tid, p.ts, p.end, min_wait, max_depth));
    }
    longest_await = longest_await.max(end.saturating_sub(last));
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
        polled_ns,
        awaiting_ns: found.dur.saturating_sub(polled_ns),
        sched_delay_ns: arg("sched_delay_ns"),
        wakes: arg("wakes"),
        longest_await_ns: longest_await,
        threads,
        awaits,
        short_awaits,
        short_awaits_ns,
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
