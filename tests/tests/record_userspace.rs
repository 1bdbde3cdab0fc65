//! End-to-end: userspace providers and the kernel provider in one file.
//!
//! Real processes linked with `trace-provider`, a real manager inside
//! `trace-cli record`, real sockets and eBPF. Each test uses its own socket.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tests::{Trace, parse, require_root, trace_cli};
use trace_common::fxt::{ArgValue, EventKind};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("trace-e2e-user-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts `provider_app SECONDS INTERVAL_US` on `socket`; returns it with
/// its pid and main thread id once it runs.
fn start_app(socket: &std::path::Path, secs: f64, interval_us: u64) -> (Child, u64, u64) {
    tests::start_provider(
        env!("CARGO_BIN_EXE_provider_app"),
        socket,
        secs,
        interval_us,
    )
}

fn record(socket: &PathBuf, out: &PathBuf, extra: &[&str]) -> Command {
    let mut c = Command::new(trace_cli());
    c.arg("record")
        .arg("-o")
        .arg(out)
        .args(extra)
        .env("TRACE_MANAGER_SOCKET", socket);
    c
}

fn seq(e: &tests::Event) -> u64 {
    match e.args.get("seq") {
        Some(ArgValue::Uint64(v)) => *v,
        other => panic!("seq argument missing: {other:?}"),
    }
}

fn app_events<'t>(t: &'t Trace, pid: u64, name: &str) -> Vec<&'t tests::Event> {
    t.events
        .iter()
        .filter(|e| e.pid == pid && e.name == name && e.category == "app")
        .collect()
}

#[test]
fn provider_started_before_recording_lines_up_with_the_kernel() {
    require_root();
    let dir = temp_dir("align");
    let socket = dir.join("provider.sock");
    let out = dir.join("trace.fxt");
    // A call every 4 ms: `seq-500` is raised 2 s after the start, well
    // after the recording started (300 ms, and the manager's start).
    let (app, pid, main_tid) = start_app(&socket, 4.0, 4000);
    std::thread::sleep(Duration::from_millis(300));
    let rec = record(&socket, &out, &["-c", "kernel:sched,app", "-d", "2"])
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
    assert!(stderr.contains("raised alert seq-500"), "{stderr}");
    let app_out = app.wait_with_output().unwrap();
    assert!(app_out.status.success(), "the app finished normally");

    let t = parse(&out);
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    assert!(t.providers.iter().any(|(id, n)| *id == 1 && n == "kernel"));
    assert!(
        t.providers
            .iter()
            .any(|(id, n)| *id >= 2 && n == "provider-app")
    );
    let work = app_events(&t, pid, "work");
    let ticks = app_events(&t, pid, "tick");
    assert!(work.len() > 200, "{} work events", work.len());
    assert!(ticks.len() > 200);
    let mut by_thread: HashMap<u64, Vec<u64>> = HashMap::new();
    for e in &work {
        by_thread.entry(e.tid).or_default().push(seq(e));
    }
    assert_eq!(by_thread.len(), 2, "main and worker threads");
    assert!(by_thread.contains_key(&main_tid));
    for seqs in by_thread.values_mut() {
        seqs.sort();
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "no event lost");
    }
    // The kernel names the app's threads on the same tracks.
    assert_eq!(t.thread(main_tid).map(|(p, _)| *p), Some(pid));

    // Every duration starts and ends while its thread is on a CPU.
    tests::assert_durations_on_cpu(&t, &work, &stderr);
}

#[test]
fn streaming_mode_saves_buffers_while_recording_and_loses_nothing() {
    require_root();
    let dir = temp_dir("stream");
    let socket = dir.join("provider.sock");
    let out = dir.join("trace.fxt");
    let (app, pid, _) = start_app(&socket, 4.0, 20);
    std::thread::sleep(Duration::from_millis(300));
    let rec = record(
        &socket,
        &out,
        &[
            "-c",
            "app",
            "-d",
            "2",
            "--buffering-mode",
            "streaming",
            "--provider-buffer-size",
            "1",
        ],
    )
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
    let dump = Command::new(trace_cli())
        .arg("dump")
        .arg(&out)
        .output()
        .unwrap();
    let sections = String::from_utf8_lossy(&dump.stdout)
        .lines()
        .filter(|l| l.contains("provider_section"))
        .count();
    assert!(
        sections >= 2,
        "buffers were saved during the trace ({sections} sections)"
    );
    let mut by_thread: HashMap<u64, Vec<u64>> = HashMap::new();
    for e in app_events(&t, pid, "tick") {
        by_thread.entry(e.tid).or_default().push(seq(e));
    }
    assert_eq!(by_thread.len(), 2);
    for (tid, seqs) in &mut by_thread {
        let n = seqs.len();
        seqs.sort();
        seqs.dedup();
        assert_eq!(seqs.len(), n, "thread {tid}: an event appears twice");
        assert!(n > 1000, "thread {tid}: {n} events");
        assert!(
            seqs.windows(2).all(|w| w[1] == w[0] + 1),
            "thread {tid}: events lost between {} and {}",
            seqs[0],
            seqs[n - 1]
        );
    }
}

#[test]
fn a_provider_killed_mid_trace_keeps_what_it_wrote() {
    require_root();
    let dir = temp_dir("sigkill");
    let socket = dir.join("provider.sock");
    let out = dir.join("trace.fxt");
    let (mut app, pid, _) = start_app(&socket, 30.0, 1000);
    std::thread::sleep(Duration::from_millis(300));
    let rec = record(&socket, &out, &["-c", "app", "-d", "2"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    app.kill().unwrap();
    app.wait().unwrap();
    let status = rec.wait_with_output().unwrap();
    assert!(status.status.success());
    let t = parse(&out);
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    let work = app_events(&t, pid, "work");
    assert!(
        work.len() > 100,
        "records written before SIGKILL: {}",
        work.len()
    );
}

#[test]
fn a_killed_manager_leaves_the_program_unharmed_and_it_registers_again() {
    require_root();
    let dir = temp_dir("mgrkill");
    let socket = dir.join("provider.sock");
    let (app, pid, _) = start_app(&socket, 5.0, 1000);
    std::thread::sleep(Duration::from_millis(300));
    let mut first = record(&socket, &dir.join("first.fxt"), &["-c", "app", "-d", "20"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    first.kill().unwrap();
    first.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let out = dir.join("second.fxt");
    let rec = record(&socket, &out, &["-c", "app", "-d", "1"])
        .output()
        .unwrap();
    assert!(
        rec.status.success(),
        "{}",
        String::from_utf8_lossy(&rec.stderr)
    );
    let t = parse(&out);
    assert!(t.errors.is_empty());
    assert!(
        app_events(&t, pid, "work").len() > 100,
        "the program registered with the second manager"
    );
    let app_out = app.wait_with_output().unwrap();
    assert!(app_out.status.success(), "the program ran to its end");
    let text = String::from_utf8_lossy(&app_out.stdout);
    assert!(text.contains("main_count="), "{text}");
}

#[test]
fn garbage_from_other_providers_leaves_the_file_valid_and_the_good_provider_complete() {
    require_root();
    let dir = temp_dir("garbage");
    let socket = dir.join("provider.sock");
    let out = dir.join("trace.fxt");
    let (app, pid, _) = start_app(&socket, 3.0, 1000);
    let hostile: Vec<Child> = ["buffer", "packets"]
        .iter()
        .map(|mode| {
            Command::new(env!("CARGO_BIN_EXE_garbage_provider"))
                .arg(mode)
                .env("TRACE_MANAGER_SOCKET", &socket)
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let rec = record(&socket, &out, &["-c", "app", "-d", "1.5"])
        .output()
        .unwrap();
    for mut h in hostile {
        let _ = h.kill();
        let _ = h.wait();
    }
    assert!(
        rec.status.success(),
        "{}",
        String::from_utf8_lossy(&rec.stderr)
    );
    assert!(app.wait_with_output().unwrap().status.success());
    let t = parse(&out);
    assert!(t.errors.is_empty(), "the file is valid FXT: {:?}", t.errors);
    // No hostile record switched the reader to another provider.
    assert!(
        !t.providers.iter().any(|(id, n)| *id == 1 || n == "kernel"),
        "{:?}",
        t.providers
    );
    assert!(t.ticks_per_second.iter().all(|&r| r == 1_000_000_000));
    let mut by_thread: HashMap<u64, Vec<u64>> = HashMap::new();
    for e in app_events(&t, pid, "work") {
        by_thread.entry(e.tid).or_default().push(seq(e));
    }
    assert_eq!(by_thread.len(), 2);
    for seqs in by_thread.values_mut() {
        seqs.sort();
        assert!(seqs.len() > 200);
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "no event lost");
    }
}

/// Per-thread sorted `tick` sequence numbers of the app.
fn ticks_by_thread(t: &Trace, pid: u64) -> HashMap<u64, Vec<u64>> {
    let mut m: HashMap<u64, Vec<u64>> = HashMap::new();
    for e in app_events(t, pid, "tick") {
        m.entry(e.tid).or_default().push(seq(e));
    }
    for v in m.values_mut() {
        v.sort();
    }
    m
}

#[test]
fn oneshot_keeps_the_first_records_and_reports_drops() {
    require_root();
    let dir = temp_dir("oneshot");
    let socket = dir.join("provider.sock");
    let out = dir.join("trace.fxt");
    let (app, pid, _) = start_app(&socket, 3.0, 0);
    std::thread::sleep(Duration::from_millis(300));
    let rec = record(
        &socket,
        &out,
        &[
            "-c",
            "app",
            "-d",
            "1",
            "--provider-buffer",
            "provider-app=1",
        ],
    )
    .output()
    .unwrap();
    assert!(rec.status.success());
    assert!(app.wait_with_output().unwrap().status.success());
    let t = parse(&out);
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    let id = t
        .providers
        .iter()
        .find(|(_, n)| n == "provider-app")
        .unwrap()
        .0;
    assert!(
        t.provider_events.iter().any(|&(p, _)| p == id),
        "a buffer-overflow provider event"
    );
    // Perfetto ignores provider events: the drops are a counter on the
    // provider's process too, from 0 before its records to the number
    // dropped after them.
    let drops: Vec<_> = t
        .events
        .iter()
        .filter(|e| e.name == "dropped_records")
        .collect();
    assert_eq!(drops.len(), 2, "{drops:?}");
    let app_ts: Vec<u64> = t
        .events
        .iter()
        .filter(|e| e.pid == pid && e.category == "app")
        .map(|e| e.ts)
        .collect();
    let (first, last) = (*app_ts.iter().min().unwrap(), *app_ts.iter().max().unwrap());
    for (d, want_zero) in drops.iter().zip([true, false]) {
        assert_eq!((d.pid, d.tid), (pid, pid));
        assert_eq!(d.category, "trace");
        assert_eq!(d.kind, EventKind::Counter { id: 0 });
        let Some(ArgValue::Uint64(n)) = d.args.get("records") else {
            panic!("records argument missing: {d:?}");
        };
        if want_zero {
            assert_eq!(*n, 0);
            assert!(d.ts <= first, "{} after the first record {first}", d.ts);
        } else {
            assert!(*n > 0);
            assert!(d.ts >= last, "{} before the last record {last}", d.ts);
        }
    }
    let stderr = String::from_utf8_lossy(&rec.stderr);
    assert!(!stderr.contains("(0 records"), "{stderr}");
    for seqs in ticks_by_thread(&t, pid).values() {
        // The first records after the start, without gaps; later ones dropped.
        assert!(seqs.len() > 100);
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1));
    }
}

#[test]
fn circular_keeps_the_newest_records() {
    require_root();
    let dir = temp_dir("circular");
    let socket = dir.join("provider.sock");
    let out = dir.join("trace.fxt");
    let (app, pid, _) = start_app(&socket, 2.5, 0);
    std::thread::sleep(Duration::from_millis(300));
    let rec = record(
        &socket,
        &out,
        &[
            "-c",
            "app",
            "-d",
            "1",
            "--buffering-mode",
            "circular",
            "--provider-buffer-size",
            "1",
        ],
    )
    .output()
    .unwrap();
    assert!(rec.status.success());
    let app_out = app.wait_with_output().unwrap();
    assert!(app_out.status.success());
    let t = parse(&out);
    // Every string and thread reference resolves: durable records survived.
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    let by_thread = ticks_by_thread(&t, pid);
    assert_eq!(by_thread.len(), 2);
    let work: usize = by_thread.values().map(|v| v.len()).sum();
    assert!(work > 1000);
    // 1 s of a tight loop does not fit in 1 MiB: the oldest were overwritten.
    assert!(
        by_thread.values().all(|v| v[0] > 0),
        "{:?}",
        by_thread.values().map(|v| v[0]).collect::<Vec<_>>()
    );
    for seqs in by_thread.values() {
        assert!(
            seqs.windows(2).all(|w| w[1] == w[0] + 1),
            "no gap in the kept window"
        );
    }
}

#[test]
fn providers_lists_programs_waiting_for_a_manager() {
    require_root();
    let dir = temp_dir("list");
    let socket = dir.join("provider.sock");
    let (app, pid, _) = start_app(&socket, 2.0, 1000);
    std::thread::sleep(Duration::from_millis(200));
    let out = Command::new(trace_cli())
        .args(["providers", "--wait", "0.5"])
        .env("TRACE_MANAGER_SOCKET", &socket)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("provider-app") && l.contains(&pid.to_string())),
        "{text}"
    );
    assert!(app.wait_with_output().unwrap().status.success());
}

#[test]
fn a_trigger_alert_stops_the_recording() {
    require_root();
    let dir = temp_dir("trigger");
    let socket = dir.join("provider.sock");
    let out = dir.join("trace.fxt");
    // The app raises `seq-500` about a second into the trace; without the
    // trigger the recording would last 20 s.
    let (mut app, pid, _) = start_app(&socket, 10.0, 2000);
    let started = std::time::Instant::now();
    let rec = record(
        &socket,
        &out,
        &[
            "-c",
            "app",
            "-d",
            "20",
            "--trigger",
            "nope",
            "--trigger",
            "seq-500",
        ],
    )
    .output()
    .unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&rec.stderr);
    assert!(rec.status.success(), "{stderr}");
    assert!(
        stderr.contains("provider \"provider-app\" raised alert \"seq-500\""),
        "{stderr}"
    );
    assert!(stderr.contains("stopped by alert \"seq-500\""), "{stderr}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let _ = app.kill();
    let _ = app.wait();
    // Everything up to the alert is in the file.
    let t = parse(&out);
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    let seqs: Vec<u64> = app_events(&t, pid, "work").iter().map(|e| seq(e)).collect();
    assert!(seqs.contains(&500), "{} work events", seqs.len());
}
