//! End-to-end: `trace-cli record` with the real kernel provider, as root.
//!
//! These tests load real eBPF programs; they fail (never skip) when not root.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tests::{Trace, boottime_ns, parse, require_root, trace_cli};
use trace_common::fxt::{ArgValue, EventKind, ThreadState};

fn temp_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("trace-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn pingpong() -> &'static str {
    env!("CARGO_BIN_EXE_pingpong")
}

/// Checks that `dump` and `convert` accept the file and that the JSON parses.
fn check_dump_and_convert(file: &Path) -> serde_json::Value {
    let dump = Command::new(trace_cli())
        .arg("dump")
        .arg(file)
        .output()
        .unwrap();
    assert!(
        dump.status.success(),
        "dump failed: {}",
        String::from_utf8_lossy(&dump.stderr)
    );
    let text = String::from_utf8(dump.stdout).unwrap();
    assert!(text.lines().next().unwrap().contains("magic"));
    let json_path = file.with_extension("json");
    let conv = Command::new(trace_cli())
        .arg("convert")
        .arg(file)
        .arg("-o")
        .arg(&json_path)
        .output()
        .unwrap();
    assert!(
        conv.status.success(),
        "convert failed: {}",
        String::from_utf8_lossy(&conv.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json_path).unwrap()).expect("convert wrote JSON");
    assert!(
        json["traceEvents"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    );
    json
}

fn assert_valid(trace: &Trace) {
    assert!(
        trace.starts_with_magic,
        "file must start with the magic record"
    );
    assert!(trace.errors.is_empty(), "reader errors: {:?}", trace.errors);
    assert_eq!(
        trace.providers.first().map(|p| p.1.as_str()),
        Some("kernel")
    );
    assert_eq!(trace.ticks_per_second, vec![1_000_000_000]);
}

#[test]
fn records_pingpong_threads_and_their_lifecycle() {
    require_root();
    let file = temp_path("pingpong.fxt");
    let rounds = 2000u64;
    let t0 = boottime_ns();
    // Every process (`-a`): the fork of the command is the recorder's.
    let out = Command::new(trace_cli())
        .args(["record", "-a", "-c", "kernel:sched,kernel:proc", "-o"])
        .arg(&file)
        .arg("--")
        .arg(pingpong())
        .arg(rounds.to_string())
        .output()
        .unwrap();
    let t1 = boottime_ns();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "record failed: {stderr}");
    assert!(
        stderr.contains("kernel events"),
        "summary line missing: {stderr}"
    );

    // The workload printed its pid and thread ids.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("pid="))
        .unwrap_or_else(|| panic!("workload output missing: {stdout}"));
    let ids: HashMap<&str, u64> = line
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k, v.parse().unwrap()))
        .collect();
    let (pid, ping, pong) = (ids["pid"], ids["ping"], ids["pong"]);

    let trace = parse(&file);
    assert_valid(&trace);

    // Names: both threads, in the right process, and the process itself.
    assert_eq!(trace.thread(ping), Some(&(pid, "ping-a".to_owned())));
    assert_eq!(trace.thread(pong), Some(&(pid, "pong-b".to_owned())));
    assert_eq!(
        trace
            .process_names
            .get(&pid)
            .and_then(|n| n.last())
            .map(String::as_str),
        Some("pingpong")
    );

    // Context switches between the two threads (they share one CPU).
    let direct = trace
        .switches
        .iter()
        .filter(|s| {
            (s.out_tid == ping && s.in_tid == pong) || (s.out_tid == pong && s.in_tid == ping)
        })
        .count() as u64;
    assert!(
        direct >= rounds / 2,
        "expected at least {} direct switches between ping and pong, found {direct}",
        rounds / 2
    );
    // A thread that gives up the CPU to wait on the pipe is blocked.
    assert!(trace.switches.iter().any(|s| s.out_tid == ping
        && s.in_tid == pong
        && s.out_state == ThreadState::Blocked as u8));
    // Weights are Int32; the idle task has i32::MIN.
    for s in &trace.switches {
        for key in ["incoming_weight", "outgoing_weight"] {
            assert!(
                matches!(s.args.get(key), Some(ArgValue::Int32(_))),
                "{key} missing or not Int32 on {s:?}"
            );
        }
        if s.in_tid == 0 {
            assert_eq!(s.args["incoming_weight"], ArgValue::Int32(i32::MIN));
        }
    }
    // Wake-ups of each thread by the other.
    assert!(
        trace
            .wakeups
            .iter()
            .any(|w| w.tid == pong && w.args.get("waker") == Some(&ArgValue::Koid(ping)))
    );

    // Timestamps: inside the recording window, monotonic per CPU.
    let mut last: HashMap<u16, u64> = HashMap::new();
    for s in &trace.switches {
        assert!(
            (t0..=t1).contains(&s.ts),
            "switch at {} outside the recording window [{t0}, {t1}]",
            s.ts
        );
        let prev = last.insert(s.cpu, s.ts).unwrap_or(0);
        assert!(s.ts >= prev, "switches on CPU {} go back in time", s.cpu);
    }
    for e in &trace.events {
        assert!((t0..=t1).contains(&e.ts), "event outside the window: {e:?}");
    }

    // fork, exec and exit of the command.
    let proc_events: Vec<_> = trace
        .events
        .iter()
        .filter(|e| e.category == "kernel:proc")
        .collect();
    let fork = proc_events
        .iter()
        .find(|e| e.name == "fork" && e.args.get("child_pid") == Some(&ArgValue::Koid(pid)))
        .expect("fork of the command");
    let exec = proc_events
        .iter()
        .find(|e| e.name == "exec" && e.tid == pid)
        .expect("exec of the command");
    match exec.args.get("filename") {
        Some(ArgValue::String(s)) => {
            assert!(format!("{s:?}").contains("pingpong"), "exec filename {s:?}")
        }
        other => panic!("exec filename missing: {other:?}"),
    }
    let threads_created: Vec<_> = proc_events
        .iter()
        .filter(|e| e.name == "thread_create" && e.pid == pid)
        .collect();
    assert!(
        threads_created.len() >= 2,
        "thread creations: {threads_created:?}"
    );
    let exit = proc_events
        .iter()
        .find(|e| e.name == "exit" && e.tid == pid && e.pid == pid)
        .expect("exit of the command");
    assert_eq!(exit.args.get("process_exit"), Some(&ArgValue::Bool(true)));
    assert!(fork.ts <= exec.ts && exec.ts <= exit.ts);
    assert!(matches!(fork.kind, EventKind::Instant));

    let json = check_dump_and_convert(&file);
    let events = json["traceEvents"].as_array().unwrap();
    assert!(events.iter().any(|e| e["ph"] == "M"
        && e["name"] == "thread_name"
        && e["args"]["name"] == "ping-a"
        && e["pid"] == pid));
    assert!(
        events
            .iter()
            .any(|e| e["ph"] == "X" && e["cat"] == "kernel:sched")
    );
}

#[test]
fn duration_stops_the_recording_and_names_existing_threads() {
    require_root();
    // A process started before the recording: it must be named from /proc.
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let file = temp_path("duration.fxt");
    let started = Instant::now();
    let out = Command::new(trace_cli())
        .args(["record", "-d", "1", "-c", "kernel:*", "-o"])
        .arg(&file)
        .output()
        .unwrap();
    let took = started.elapsed();
    sleeper.kill().ok();
    sleeper.wait().ok();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(took >= Duration::from_secs(1), "stopped early: {took:?}");
    let trace = parse(&file);
    assert_valid(&trace);
    let pid = u64::from(sleeper.id());
    assert_eq!(
        trace
            .process_names
            .get(&pid)
            .and_then(|n| n.last())
            .map(String::as_str),
        Some("sleep")
    );
    assert!(
        !trace.switches.is_empty(),
        "a second of a live system has context switches"
    );
    // Each CPU writes its own ring buffer; the file has them merged into
    // one time order.
    let mut cpus: Vec<u16> = trace.switches.iter().map(|s| s.cpu).collect();
    cpus.sort();
    cpus.dedup();
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    if online > 1 {
        assert!(cpus.len() > 1, "switches only on CPUs {cpus:?}");
    }
    assert!(
        trace.switches.windows(2).all(|w| w[0].ts <= w[1].ts),
        "context switches out of time order across CPUs"
    );
    assert!(
        trace.wakeups.windows(2).all(|w| w[0].ts <= w[1].ts),
        "wake-ups out of time order across CPUs"
    );
    check_dump_and_convert(&file);
}

#[test]
fn sigint_writes_a_complete_file() {
    require_root();
    let file = temp_path("sigint.fxt");
    let child = Command::new(trace_cli())
        .args(["record", "-c", "kernel:sched", "-o"])
        .arg(&file)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill with a valid pid and signal number has no memory effects.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let trace = parse(&file);
    assert_valid(&trace);
    assert!(!trace.switches.is_empty());
    // Only the selected category was recorded.
    assert!(trace.events.iter().all(|e| e.category != "kernel:proc"));
    // CPU idle states as counters, one argument per CPU, where the kernel
    // has the tracepoint and a CPU went idle (switched to the idle task).
    if Path::new("/sys/kernel/tracing/events/power/cpu_idle").exists()
        && trace.switches.iter().any(|s| s.in_tid == 0)
    {
        let idle: Vec<_> = trace
            .events
            .iter()
            .filter(|e| e.name == "cpu_idle")
            .collect();
        assert!(!idle.is_empty(), "no cpu_idle counter");
        for e in &idle {
            assert!(matches!(e.kind, EventKind::Counter { .. }), "{e:?}");
            assert_eq!(
                trace.process_names.get(&e.pid).and_then(|n| n.last()),
                Some(&"kernel CPUs".to_owned())
            );
            let (cpu, value) = e.args.iter().next().expect("one argument");
            assert!(cpu.starts_with("cpu"), "{cpu}");
            assert!(matches!(value, ArgValue::Int64(v) if *v >= -1), "{value:?}");
        }
    }
    check_dump_and_convert(&file);
}

#[test]
fn without_privileges_it_says_what_is_missing() {
    require_root();
    let file = temp_path("unprivileged.fxt");
    let _ = std::fs::remove_file(&file);
    // No manager there (the default socket may be another test's
    // recording's, which would refuse `nobody` instead).
    let socket = temp_path("no-manager.sock");
    // Run as `nobody`: no root, no capabilities.
    let out = {
        use std::os::unix::process::CommandExt;
        Command::new(trace_cli())
            .args(["record", "-d", "1", "-o"])
            .arg(&file)
            .env("TRACE_MANAGER_SOCKET", &socket)
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap()
    };
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("needs root") && stderr.contains("CAP_BPF"),
        "unclear error: {stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "one sentence: {stderr}");
    // With one of the two capabilities (kept across the user change as an
    // ambient capability), the error names the other.
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=+bpf",
            "--ambient-caps=+bpf",
        ])
        .arg(trace_cli())
        .args(["record", "-d", "1", "-o"])
        .arg(&file)
        .env("TRACE_MANAGER_SOCKET", &socket)
        .output();
    match out {
        Ok(out) if !String::from_utf8_lossy(&out.stderr).starts_with("setpriv") => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success());
            assert!(stderr.contains("lacks CAP_PERFMON"), "{stderr}");
        }
        _ => eprintln!("no usable `setpriv` here: the one-capability case was not checked"),
    }
}

#[test]
fn unknown_category_is_a_clear_error() {
    let out = Command::new(trace_cli())
        .args(["record", "-c", "kernel:nope", "-d", "1", "-o", "/dev/null"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("kernel:nope") && stderr.contains("kernel:sched"),
        "{stderr}"
    );
}
