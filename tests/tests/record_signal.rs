//! End-to-end: `kernel:signal` with `trace-cli record` and the real kernel
//! provider, as root. A program catches a signal it sends itself, then
//! starts a child and stops it with SIGTERM; the trace must say who sent
//! what to whom and what became of it, on the right threads, as the
//! program itself knows it.

use std::path::PathBuf;
use std::process::Command;

use tests::{Event, check, parse, require_root, trace_cli};
use trace_common::fxt::{ArgValue, EventKind, StringRef};

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("record-signal-{}-{name}", std::process::id()))
}

/// Prints its pid and its child's, catches a SIGUSR1 it sends itself, then
/// kills the child with SIGTERM and waits for it.
const WORKLOAD: &str = r#"
import os, signal, subprocess, sys
caught = []
signal.signal(signal.SIGUSR1, lambda n, f: caught.append(n))
os.kill(os.getpid(), signal.SIGUSR1)
child = subprocess.Popen(["sleep", "30"])
print(os.getpid(), child.pid, len(caught), flush=True)
child.send_signal(signal.SIGTERM)
child.wait()
"#;

fn int(e: &Event, key: &str) -> Option<i64> {
    match e.args.get(key)? {
        ArgValue::Int32(v) => Some(i64::from(*v)),
        ArgValue::Koid(v) => i64::try_from(*v).ok(),
        _ => None,
    }
}

fn text<'a>(e: &'a Event, key: &str) -> Option<&'a str> {
    match e.args.get(key)? {
        ArgValue::String(StringRef::Inline(s)) => Some(s),
        _ => None,
    }
}

#[test]
fn signals_sent_and_delivered_are_on_their_threads_with_what_became_of_them() {
    require_root();
    let out = temp_path("sig.fxt");
    let run = Command::new(trace_cli())
        .args(["record", "-c", "kernel:signal,kernel:proc", "-o"])
        .arg(&out)
        .args(["--", "python3", "-c", WORKLOAD])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stdout}{stderr}");
    let nums: Vec<i64> = stdout
        .split_whitespace()
        .map(|w| w.parse().unwrap())
        .collect();
    let (me, child, caught) = (nums[0], nums[1], nums[2]);
    assert_eq!(caught, 1, "the workload caught its own signal");

    let trace = parse(&out);
    let signals: Vec<&Event> = trace
        .events
        .iter()
        .filter(|e| e.category == "kernel:signal")
        .collect();
    assert!(signals.iter().all(|e| e.kind == EventKind::Instant));
    let find = |name: &str, tid: i64| {
        signals
            .iter()
            .find(|e| e.name == name && e.tid as i64 == tid)
            .unwrap_or_else(|| panic!("no {name:?} on thread {tid}: {signals:#?}"))
    };

    // The signal it sent itself: sent to itself, delivered to its handler.
    let sent = find("SIGUSR1 sent", me);
    assert_eq!(int(sent, "sig"), Some(10));
    assert_eq!(int(sent, "target_tid"), Some(me));
    assert_eq!(text(sent, "result"), Some("delivered"));
    let delivered = find("SIGUSR1 delivered", me);
    assert_eq!(text(delivered, "action"), Some("caught"));
    assert!(matches!(
        delivered.args.get("handler"),
        Some(ArgValue::Pointer(p)) if *p > 1
    ));
    assert!(delivered.ts >= sent.ts);

    // The child, stopped with SIGTERM by its parent, dies of it: the kernel
    // delivers a fatal signal with the default action.
    let term = find("SIGTERM sent", me);
    assert_eq!(int(term, "target_tid"), Some(child));
    assert_eq!(int(term, "target_pid"), Some(child));
    assert_eq!(text(term, "result"), Some("delivered"));
    let died = signals
        .iter()
        .find(|e| e.tid as i64 == child && e.name.ends_with(" delivered"))
        .unwrap_or_else(|| panic!("nothing delivered to the child: {signals:#?}"));
    assert_eq!(text(died, "action"), Some("default"));
    assert!(died.ts >= term.ts);
    // And the parent hears of it.
    let chld = find("SIGCHLD sent", child);
    assert_eq!(int(chld, "target_pid"), Some(me));

    // The summary counts every one of them.
    let counted: usize = stderr
        .find(" signals")
        .and_then(|at| stderr[..at].rsplit([' ', '(']).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no signal count in the summary: {stderr}"));
    assert_eq!(counted, signals.len(), "{stderr}");

    let (clean, report) = check(&out);
    assert!(clean, "{report}");
    std::fs::remove_file(&out).ok();
}
