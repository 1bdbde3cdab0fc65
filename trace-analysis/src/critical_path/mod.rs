//! Why a span, a system call or a stretch of a thread took as long as it
//! did: its wall time split into running, waiting for a CPU (behind whom)
//! and blocked (in what), each wait followed to the thread that ended it
//! and that thread's own time over the wait, as deep as the trace allows.
//!
//! [`critical_path`] reads a trace twice (three times for a task, whose
//! polls are found in between: [`task`]): once to find the [`Target`]
//! ([`target`]), once to gather what happened during it ([`window`]):
//! context switches and wake-ups of every thread, system calls, block
//! requests, interrupts, lock waits and off-CPU stacks. [`walk`] then
//! splits the target thread's time and follows every wake-up that ended
//! one of its waits to the waker's time over that wait. What is held is
//! bounded by the events inside the target's time, not the trace's.

mod gaps;
pub mod target;
pub mod task;
pub mod walk;
pub mod window;

#[cfg(test)]
mod tests;

use std::io::Read;

use serde::Serialize;

use crate::reader::{ReadStats, ReadTraceError};
use crate::report::Selection;
pub use target::{Target, TargetKind};

/// How [`critical_path`] looks.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// What to explain.
    pub target: Target,
    /// Which processes and threads the target may be on, and the time its
    /// instance may lie in (a thread target's time range).
    pub selection: Selection,
    /// The instance: the `nth` in order of start (1 is the first); `None`:
    /// the longest.
    pub nth: Option<usize>,
    /// Waits shorter than this, ns, are summed, not followed; `None`: 1% of
    /// the target's wall time.
    pub min_wait: Option<u64>,
    /// How many wake-ups deep waits are followed.
    pub max_depth: usize,
    /// The time relative bounds count from, ns: the trace's earliest
    /// timestamp; `None`: the first timestamp of the first read.
    pub origin: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            target: Target::default(),
            selection: Selection::default(),
            nth: None,
            min_wait: None,
            max_depth: 8,
            origin: None,
        }
    }
}

/// What the analysis found: the target and its thread's time, as a tree.
#[derive(Clone, Debug, Serialize)]
pub struct CriticalPath {
    /// What was explained.
    pub target: Found,
    /// The target thread's time over the target, with every wait followed
    /// (none for a task: its polls' are in `task`).
    pub path: Option<walk::ThreadTime>,
    /// A task's polls and awaits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<task::TaskTime>,
    /// Waits shorter than this, ns, were summed, not followed.
    pub min_wait_ns: u64,
    /// What the trace lacks for a fuller answer, and what records it.
    pub gaps: Vec<String>,
}

/// The instance of the target that was explained.
#[derive(Clone, Debug, Serialize)]
pub struct Found {
    /// How it was named: `span`, `syscall` or `thread`.
    pub kind: &'static str,
    /// Its name (a thread's: the thread's).
    pub name: String,
    /// Its category (empty for a thread).
    pub category: String,
    /// Start, ns (CLOCK_BOOTTIME, the trace's own timestamps).
    pub ts: u64,
    /// Wall time, ns.
    pub dur: u64,
    /// Start, ns from the trace's earliest timestamp.
    pub relative_ts: u64,
    /// Its process.
    pub pid: u64,
    /// Its thread.
    pub tid: u64,
    /// How many instances matched.
    pub instances: usize,
    /// Which one this is, in order of start (1 is the first).
    pub nth: usize,
}

/// Finding or explaining the target failed.
#[derive(Debug, thiserror::Error)]
pub enum CriticalPathError {
    /// The trace could not be read.
    #[error(transparent)]
    Read(#[from] ReadTraceError),
    /// Nothing in the trace matches the target.
    #[error("{0}")]
    NotFound(String),
}

/// Explains `options.target` in the trace `open` reads, opening it twice.
pub fn critical_path<R: Read>(
    mut open: impl FnMut() -> std::io::Result<R>,
    options: &Options,
) -> Result<(CriticalPath, ReadStats), CriticalPathError> {
    let target::Located {
        found,
        origin,
        args,
    } = target::find(open().map_err(ReadTraceError::Io)?, options)?;
    let polled = match options.target.kind {
        TargetKind::Task => task::gather(open().map_err(ReadTraceError::Io)?, &found, &args)?,
        _ => task::Polled::default(),
    };
    let window = window::gather(open().map_err(ReadTraceError::Io)?, &found)?;
    let min_wait = options.min_wait.unwrap_or(found.dur / 100).max(1);
    let (path, task) = match options.target.kind {
        TargetKind::Task => {
            let t = task::explain(&window, &found, &polled, &args, min_wait, options.max_depth);
            (None, Some(t))
        }
        _ => {
            let path = walk::walk(&window, &found, min_wait, options.max_depth);
            (Some(path), None)
        }
    };
    let explained: Vec<&walk::ThreadTime> = match &task {
        Some(t) => t.poll_times.iter().collect(),
        None => path.iter().collect(),
    };
    let mut gaps = gaps::gaps(&window, &explained);
    if let Some(t) = &task {
        gaps.extend(task_gaps(t));
    }
    let stats = window.stats.clone();
    Ok((
        CriticalPath {
            target: Found {
                relative_ts: found.ts.saturating_sub(origin),
                ..found
            },
            path,
            task,
            min_wait_ns: min_wait,
            gaps,
        },
        stats,
    ))
}

/// What a task's explanation lacks: polls not found, and the wakes its
/// awaits ended with, which are drawn (as flows) but not followed.
fn task_gaps(t: &task::TaskTime) -> Vec<String> {
    let mut out = Vec::new();
    match t.polls_recorded {
        Some(n) if n as usize != t.polls => out.push(format!(
            "The task's span says {n} poll(s) and {} were found by its fields: give its spans a field that tells tasks apart (a tokio task carries its task.id).",
            t.polls
        )),
        _ => {}
    }
    if t.polls == 0 {
        out.push("No poll of the task was found: its polls are the durations its span writes on each entry (the trace-provider `tracing` layer).".into());
    }
    let unknown = t
        .awaits
        .iter()
        .filter(|a| a.woken_by.is_none() && !a.first)
        .count();
    if unknown > 0 {
        out.push(format!("{unknown} await(s) name no waker: woken from outside any poll (tokio's timer or I/O driver), or the program was built without tokio's waker events (`--cfg tokio_unstable`)."));
    }
    out
}
