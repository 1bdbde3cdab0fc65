//! Async tasks drawn as tasks: `tests/tokio_app`, built with tokio's own
//! instrumentation (`--cfg tokio_unstable`) and the `tracing` layer, runs
//! 100 `request` tasks on a multi-thread runtime, each awaiting a timer and
//! then a channel a `sender` task sends on. Recorded with real eBPF:
//! - every request is one async slice (`request`) covering its polls, which
//!   lie inside it on the runtime's worker threads (`app-worker`);
//! - the polls of a task are joined by a flow, and each wake by a sender
//!   is a flow from the sender's poll to the request's next;
//! - `report`'s task table gives 100 requests with the latency the program
//!   measured, their polls, and their scheduling delays;
//! - `trace-cli check` passes (flows included).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use tests::{parse, record_checked, require_root, temp_dir, workload::numbers};
use trace_common::fxt::{ArgValue, EventKind, StringRef};

/// Builds `tests/tokio_app` with `--cfg tokio_unstable` (its own
/// workspace and target directory, beside the tests' binaries); its path.
fn tokio_app() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("tokio_app/Cargo.toml");
    let target = tests::bin_dir()
        .parent()
        .expect("the target directory")
        .join("tokio_app");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args(["build", "--locked", "--manifest-path"])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", &target)
        .env("RUSTFLAGS", "--cfg tokio_unstable")
        .env_remove("CARGO_BUILD_TARGET")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "building tokio_app: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join("debug/tokio_app")
}

/// The text or number of argument `name`.
fn arg(e: &tests::Event, name: &str) -> Option<String> {
    e.args.get(name).map(|v| match v {
        ArgValue::String(StringRef::Inline(s)) => s.to_string(),
        ArgValue::Uint64(v) => v.to_string(),
        v => format!("{v:?}"),
    })
}

#[test]
fn tokio_tasks_are_async_slices_with_their_polls_wakes_and_latencies() {
    require_root();
    let program = tokio_app();
    let dir = temp_dir("tasks-tokio");
    let file = dir.join("trace.fxt");
    let output = record_checked(&file, &["-c", "kernel:sched,tokio::task"], &[&program]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let m = numbers(stdout.lines().last().unwrap_or_default());
    assert_eq!(m["requests"], 100, "{stdout}");

    let t = parse(&file);
    // Each request task: one async slice, its polls inside it on workers.
    let mut spans: HashMap<u64, (u64, u64, String)> = HashMap::new();
    for e in &t.events {
        match e.kind {
            EventKind::AsyncBegin { id } if e.name == "request" => {
                spans.entry(id).or_default().0 = e.ts;
                spans.entry(id).or_default().2 = arg(e, "task.id").unwrap_or_default();
            }
            EventKind::AsyncEnd { id } if e.name == "request" => {
                spans.entry(id).or_default().1 = e.ts;
            }
            _ => {}
        }
    }
    assert_eq!(spans.len(), 100, "request async slices");
    let by_task: HashMap<&str, (u64, u64)> = spans
        .values()
        .map(|(b, e, task)| (task.as_str(), (*b, *e)))
        .collect();
    assert_eq!(by_task.len(), 100, "one slice per task");
    // Polls: (thread, start, end, task name).
    let mut polls: Vec<(u64, u64, u64, String)> = Vec::new();
    let mut per_task: HashMap<String, u32> = HashMap::new();
    for e in t.events.iter().filter(|e| e.name == "runtime.spawn") {
        let EventKind::DurationComplete { end_ts } = e.kind else {
            continue;
        };
        let name = arg(e, "task.name").unwrap_or_default();
        polls.push((e.tid, e.ts, end_ts, name.clone()));
        if name != "request" {
            continue;
        }
        let task = arg(e, "task.id").unwrap_or_default();
        let (b, end) = by_task[task.as_str()];
        assert!(
            b <= e.ts && end_ts <= end,
            "a poll outside its task's slice"
        );
        let worker = t.thread(e.tid).map(|(_, n)| n.as_str()).unwrap_or("");
        assert_eq!(worker, "app-worker", "polled on another thread");
        *per_task.entry(task).or_default() += 1;
    }
    assert_eq!(per_task.len(), 100);
    assert!(per_task.values().all(|&n| n >= 2), "a request polled once");
    // Flows: each task's polls chained; wakes from a sender's poll to a
    // request's.
    let inside = |tid: u64, ts: u64| {
        polls
            .iter()
            .find(|(t, b, e, _)| *t == tid && *b <= ts && ts <= *e)
            .map(|p| p.3.as_str())
    };
    let mut begins: HashMap<u64, Option<&str>> = HashMap::new();
    let (mut steps, mut wakes) = (0, 0);
    for e in t.events.iter().filter(|e| e.name == "poll") {
        match e.kind {
            EventKind::FlowBegin { id } => {
                begins.insert(id, inside(e.tid, e.ts));
            }
            EventKind::FlowStep { .. } => {
                steps += 1;
                assert!(inside(e.tid, e.ts).is_some(), "a step outside a poll");
            }
            EventKind::FlowEnd { id }
                if begins.get(&id) == Some(&Some("sender"))
                    && inside(e.tid, e.ts) == Some("request") =>
            {
                wakes += 1;
            }
            _ => {}
        }
    }
    assert!(steps >= 200, "{steps} poll steps");
    assert!(
        wakes >= 90,
        "{wakes} wakes from a sender's poll to a request's"
    );
    // The report's tasks: 100 requests, the latency the program measured.
    let r = tests::report_json(&["--section", "userspace"], &[&file]);
    let rows = tests::report_rows(&r, "userspace", "tasks");
    let request = rows
        .iter()
        .find(|r| r["name"] == "request")
        .expect("a request row");
    assert_eq!(request["count"], 100, "{request}");
    let p50 = request["p50"].as_u64().unwrap();
    assert!(
        p50.abs_diff(m["p50_ns"]) * 10 <= m["p50_ns"],
        "p50 {p50} against the program's {}: {request}",
        m["p50_ns"]
    );
    assert!(request["polls"].as_u64().unwrap() >= 200, "{request}");
    assert!(request["delay_p50"].as_u64().is_some(), "{request}");
    assert!(request["busy"].as_u64().unwrap() > 0, "{request}");
    // The slowest request as a critical-path target: its polls, found by
    // its task.id on the workers that ran them, and its awaits; it slept
    // 2 ms and then awaited its sender's 8 ms timer.
    let p = tests::report_json(&["--critical-path", "task:request"], &[&file]);
    assert_eq!(p["target"]["instances"], 100, "{p}");
    let dur = p["target"]["dur"].as_u64().unwrap();
    let task = &p["task"];
    let polls = task["polls"].as_u64().unwrap();
    assert!(polls >= 2, "{task}");
    assert_eq!(task["polls_recorded"], polls, "every poll found: {task}");
    let (polled, awaiting) = (
        task["polled_ns"].as_u64().unwrap(),
        task["awaiting_ns"].as_u64().unwrap(),
    );
    assert_eq!(polled + awaiting, dur, "{task}");
    assert!(awaiting >= 7_000_000, "{task}");
    let times = task["poll_times"].as_array().unwrap();
    assert_eq!(times.len() as u64, polls);
    for poll in times {
        assert_eq!(poll["thread"], "app-worker", "{poll}");
        let whole = poll["to"].as_u64().unwrap() - poll["from"].as_u64().unwrap();
        let split = ["running_ns", "runnable_ns", "blocked_ns", "unknown_ns"]
            .iter()
            .map(|k| poll[k].as_u64().unwrap())
            .sum::<u64>();
        assert_eq!(split, whole, "{poll}");
    }
    // Its await for the channel ends with a wake from a sender's poll
    // (the wake flows): so for nearly every request.
    let woken_by_sender = |p: &serde_json::Value| {
        p["task"]["awaits"].as_array().unwrap().iter().any(|a| {
            a["woken_by"].as_str().is_some_and(|by| {
                by.starts_with("task \"sender\" (task.id ") && by.contains("app-worker")
            })
        })
    };
    let mut named = usize::from(woken_by_sender(&p));
    for nth in ["1", "2", "3"] {
        let p = tests::report_json(&["--critical-path", "task:request", "--nth", nth], &[&file]);
        named += usize::from(woken_by_sender(&p));
    }
    assert!(
        named >= 3,
        "{named} of 4 requests name the sender that woke them: {p}"
    );
}
