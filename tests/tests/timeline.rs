//! End-to-end: ten seconds of the whole system with every kernel category
//! while a busy workload runs, read back as Perfetto's importer reads it
//! (`trace-cli check`) and record by record: no violation, every CPU's
//! context switches continuous, and every category present up to the stop.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use tests::{boottime_ns, parse, require_root, trace_cli};
use trace_common::fxt::ArgValue;

fn temp_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("trace-e2e-timeline-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_busy_system_recording_has_no_violation_and_ends_at_one_instant() {
    require_root();
    let dir = temp_dir("busy");
    let socket = dir.join("provider.sock");
    let out = dir.join("trace.fxt");
    // Registers before the recording and runs past its end (it is ended
    // once the recording is).
    let mut workload = Command::new(env!("CARGO_BIN_EXE_busy_workload"))
        .arg("300")
        .arg(&dir)
        .env("TRACE_MANAGER_SOCKET", &socket)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(workload.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    let pid: u64 = first
        .split_whitespace()
        .find_map(|f| f.strip_prefix("pid="))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {first:?}"));
    std::thread::sleep(Duration::from_millis(300));
    let before = boottime_ns();
    let rec = Command::new(trace_cli())
        .args(["record", "-c", "kernel:*,busy", "-d", "10"])
        .args(["--provider-buffer", "busy-workload=1"])
        .arg("-o")
        .arg(&out)
        .env("TRACE_MANAGER_SOCKET", &socket)
        .output()
        .unwrap();
    let after = boottime_ns();
    let stderr = String::from_utf8_lossy(&rec.stderr);
    assert!(rec.status.success(), "{stderr}");
    assert!(
        workload.try_wait().unwrap().is_none(),
        "the workload ran the whole recording"
    );
    workload.kill().unwrap();
    workload.wait().unwrap();
    // Its data file is in `dir`, with the trace.
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        if entry.file_name().to_string_lossy().starts_with("busy-") {
            let _ = std::fs::remove_file(entry.path());
        }
    }

    // Perfetto's importer: nothing lost or misdrawn.
    let check = Command::new(trace_cli())
        .args(["check", "--json", "--examples", "3"])
        .arg(&out)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(
        report["violation_count"],
        0,
        "{}",
        serde_json::to_string_pretty(&report["violations"]).unwrap()
    );
    assert_eq!(check.status.code(), Some(0));

    let t = parse(&out);
    assert!(t.errors.is_empty(), "{:?}", t.errors);

    // Every CPU's switches are continuous: each switches out the thread
    // the one before it switched in.
    let mut by_cpu: HashMap<u16, Vec<&tests::Switch>> = HashMap::new();
    for s in &t.switches {
        by_cpu.entry(s.cpu).or_default().push(s);
    }
    assert!(!by_cpu.is_empty());
    for (cpu, list) in &mut by_cpu {
        list.sort_by_key(|s| s.ts);
        assert!(list.len() > 100, "CPU {cpu}: {} switches", list.len());
        for w in list.windows(2) {
            assert_eq!(
                w[0].in_tid, w[1].out_tid,
                "CPU {cpu}: {} switched in at {}, {} switched out at {}",
                w[0].in_tid, w[0].ts, w[1].out_tid, w[1].ts
            );
        }
    }

    // The workload is in it: its async spans, its drops (shown as a
    // counter Perfetto draws), its signals and its block writes.
    assert!(
        t.events
            .iter()
            .any(|e| e.pid == pid && e.category == "busy" && e.name == "request"),
        "async spans of the workload"
    );
    let dropped = t
        .events
        .iter()
        .filter(|e| e.pid == pid && e.name == "dropped_records")
        .filter_map(|e| match e.args.get("records") {
            Some(ArgValue::Uint64(n)) => Some(*n),
            _ => None,
        })
        .max();
    assert!(
        dropped.is_some_and(|n| n > 0),
        "the workload's provider dropped records: {dropped:?}"
    );
    assert!(
        t.events
            .iter()
            .any(|e| e.pid == pid && e.name == "rt_sigreturn"),
        "signal handlers returned"
    );
    assert!(!t.events.iter().any(|e| e.name.starts_with("syscall_-")));
    assert!(
        t.events
            .iter()
            .any(|e| e.category == "kernel:block" && e.name == "write"),
        "block writes"
    );

    // Every kernel category ends within 50 ms of the stop, and nothing
    // comes after it. The stop is the end of whatever was still running
    // (written as ending there, `unfinished`).
    let stop = t
        .events
        .iter()
        .filter(|e| e.args.get("unfinished") == Some(&ArgValue::Bool(true)))
        .filter_map(|e| match e.kind {
            trace_common::fxt::EventKind::DurationComplete { end_ts } => Some(end_ts),
            _ => None,
        })
        .max()
        .expect("something still running at the stop");
    assert!(stop > before && stop < after, "{before} < {stop} < {after}");
    let mut last: HashMap<String, u64> = HashMap::new();
    let mut note = |cat: &str, ts: u64| {
        let e = last.entry(cat.to_owned()).or_default();
        *e = (*e).max(ts);
    };
    for s in &t.switches {
        note("kernel:sched", s.ts);
    }
    for w in &t.wakeups {
        note("kernel:sched", w.ts);
    }
    for e in &t.events {
        if e.category.starts_with("kernel:") {
            note(&e.category, e.ts);
        }
    }
    for cat in [
        "kernel:sched",
        "kernel:proc",
        "kernel:syscall",
        "kernel:irq",
        "kernel:block",
        "kernel:vm",
    ] {
        let l = *last.get(cat).unwrap_or_else(|| panic!("no {cat} record"));
        assert!(
            l <= stop,
            "{cat}: a record at {l}, after the stop at {stop}"
        );
        assert!(
            stop - l <= 50_000_000,
            "{cat}: the last record is {} ms before the stop\n{stderr}",
            (stop - l) / 1_000_000
        );
    }
}
