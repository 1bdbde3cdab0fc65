//! End-to-end: a C program instrumented with `trace/event.h` (built by
//! `tests/build.rs` with the system C compiler, warnings as errors) and the
//! kernel provider in one file, recorded by a real `trace-cli record`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use tests::{Event, Trace, parse, require_root, trace_cli};
use trace_common::fxt::{ArgValue, EventKind, StringRef};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("trace-e2e-c-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts `provider_app_c SECONDS INTERVAL_US` on `socket`; returns it with
/// its pid and main thread id from its first line.
fn start_app_c(socket: &Path, secs: f64, interval_us: u64) -> (Child, u64, u64) {
    tests::start_provider(
        env!("CARGO_BIN_EXE_provider_app_c"),
        socket,
        secs,
        interval_us,
    )
}

fn record(socket: &Path, out: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(trace_cli());
    c.arg("record")
        .arg("-o")
        .arg(out)
        .args(extra)
        .env("TRACE_MANAGER_SOCKET", socket);
    c
}

fn seq(e: &Event) -> u64 {
    match e.args.get("seq") {
        Some(ArgValue::Uint64(v)) => *v,
        other => panic!("seq argument missing from {}: {other:?}", e.name),
    }
}

fn app_events<'t>(t: &'t Trace, pid: u64, name: &str) -> Vec<&'t Event> {
    t.events
        .iter()
        .filter(|e| e.pid == pid && e.name == name && e.category == "app")
        .collect()
}

/// Sorted sequence numbers of `events`, checked contiguous.
fn contiguous_seqs(what: &str, events: &[&Event]) -> Vec<u64> {
    let mut seqs: Vec<u64> = events.iter().map(|e| seq(e)).collect();
    seqs.sort();
    let n = seqs.len();
    seqs.dedup();
    assert_eq!(seqs.len(), n, "{what}: an event appears twice");
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "{what}: events lost between {} and {}",
        seqs[0],
        seqs[n - 1]
    );
    seqs
}

#[test]
fn c_provider_started_before_recording_lines_up_with_the_kernel() {
    require_root();
    let dir = temp_dir("align");
    let socket = dir.join("provider.sock");
    let out = dir.join("trace.fxt");
    let (app, pid, main_tid) = start_app_c(&socket, 4.0, 2000);
    std::thread::sleep(Duration::from_millis(300));
    let rec = record(&socket, &out, &["-c", "kernel:sched,app", "-d", "1.5"])
        .env("RUST_LOG", "trace_manager=info")
        .output()
        .unwrap();
    assert!(
        rec.status.success(),
        "{}",
        String::from_utf8_lossy(&rec.stderr)
    );
    let stderr = String::from_utf8_lossy(&rec.stderr);
    assert!(stderr.contains("1 userspace provider"), "{stderr}");
    let app_out = app.wait_with_output().unwrap();
    assert!(app_out.status.success(), "the C program finished normally");
    let text = String::from_utf8_lossy(&app_out.stdout);
    assert!(text.contains("main_count="), "{text}");

    let t = parse(&out);
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    assert!(t.providers.iter().any(|(id, n)| *id == 1 && n == "kernel"));
    assert!(
        t.providers
            .iter()
            .any(|(id, n)| *id >= 2 && n == "provider-app-c"),
        "{:?}",
        t.providers
    );

    // Durations and instants, every one on the C program's main thread,
    // with contiguous sequence numbers.
    let work = app_events(&t, pid, "work");
    let ticks = app_events(&t, pid, "tick");
    assert!(work.len() > 200, "{} work events", work.len());
    assert!(ticks.len() > 200, "{} tick events", ticks.len());
    assert!(work.iter().chain(&ticks).all(|e| e.tid == main_tid));
    assert!(
        ticks.iter().all(|e| matches!(e.kind, EventKind::Instant)),
        "tick is an instant"
    );
    assert!(work.iter().all(|e| matches!(
        e.args.get("lang"),
        Some(ArgValue::String(StringRef::Inline(s))) if s == "c"
    )));
    let work_seqs = contiguous_seqs("work", &work);
    let tick_seqs = contiguous_seqs("tick", &ticks);
    // Each round writes work then tick: the two ranges agree up to the
    // round the trace started or stopped in.
    assert!(work_seqs[0].abs_diff(tick_seqs[0]) <= 1);
    assert!(work_seqs[work_seqs.len() - 1].abs_diff(tick_seqs[tick_seqs.len() - 1]) <= 1);
    // The counter guarded by TRACE_CATEGORY_ENABLED.
    assert!(t.events.iter().any(|e| e.pid == pid
        && e.name == "seq"
        && matches!(e.kind, EventKind::Counter { id: 1 })));
    // The kernel names the program's main thread on the same track.
    assert_eq!(t.thread(main_tid).map(|(p, _)| *p), Some(pid));

    // Every duration starts and ends while its thread is on a CPU.
    tests::assert_durations_on_cpu(&t, &work, &String::from_utf8_lossy(&rec.stderr));
}

#[test]
fn c_provider_writes_nothing_for_a_category_not_recorded() {
    require_root();
    let dir = temp_dir("off");
    let socket = dir.join("provider.sock");
    let out = dir.join("trace.fxt");
    let (app, pid, _) = start_app_c(&socket, 2.0, 1000);
    std::thread::sleep(Duration::from_millis(300));
    let rec = record(&socket, &out, &["-c", "other", "-d", "0.5"])
        .output()
        .unwrap();
    assert!(
        rec.status.success(),
        "{}",
        String::from_utf8_lossy(&rec.stderr)
    );
    assert!(app.wait_with_output().unwrap().status.success());
    let t = parse(&out);
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    assert!(t.providers.iter().any(|(_, n)| n == "provider-app-c"));
    assert!(
        t.events.iter().all(|e| e.pid != pid),
        "no event from a disabled category"
    );
}
