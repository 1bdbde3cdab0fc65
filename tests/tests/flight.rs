//! End-to-end: the daemon's flight recorder keeps the newest window of
//! kernel and provider events, `trace-cli snapshot` writes it out as a
//! whole trace while recording goes on, and a recording runs beside it.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use tests::{Daemon, Killed, Trace, parse, trace_cli};
use trace_common::fxt::ArgValue;

/// The number of a call or an event argument, if it is an integer.
fn int(v: Option<&ArgValue<'_>>) -> Option<u64> {
    match v? {
        ArgValue::Uint64(n) => Some(*n),
        ArgValue::Int64(n) => u64::try_from(*n).ok(),
        ArgValue::Uint32(n) => Some(u64::from(*n)),
        ArgValue::Int32(n) => u64::try_from(*n).ok(),
        ArgValue::Pointer(n) => Some(*n),
        _ => None,
    }
}

/// `numbered_calls` started on its own; its pid.
fn numbered_calls(secs: f64, interval_us: u64) -> (std::process::Child, u64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_numbered_calls"))
        .args([secs.to_string(), interval_us.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid = line.trim().strip_prefix("pid=").unwrap().parse().unwrap();
    (child, pid)
}

/// The numbered calls of `pid` in `t`: number → time.
fn calls(t: &Trace, pid: u64) -> BTreeMap<u64, u64> {
    t.events
        .iter()
        .filter(|e| e.pid == pid && e.category == "kernel:syscall" && e.name == "close")
        .filter_map(|e| Some((int(e.args.get("fd"))?.checked_sub(1_000_000)?, e.ts)))
        .collect()
}

/// The ticks of each thread of `pid` in `t`: thread → number → time.
fn ticks(t: &Trace, pid: u64) -> BTreeMap<u64, BTreeMap<u64, u64>> {
    let mut out: BTreeMap<u64, BTreeMap<u64, u64>> = BTreeMap::new();
    for e in &t.events {
        if e.pid == pid && e.category == "app" && e.name == "tick" {
            let seq = int(e.args.get("seq")).expect("a tick has its number");
            assert!(
                out.entry(e.tid).or_default().insert(seq, e.ts).is_none(),
                "tick {seq} twice"
            );
        }
    }
    out
}

/// `numbers` are one run without a gap, covering at least `span_ns`.
fn whole_run(what: &str, numbers: &BTreeMap<u64, u64>, span_ns: u64) {
    let (Some((first, t0)), Some((last, t1))) =
        (numbers.first_key_value(), numbers.last_key_value())
    else {
        panic!("{what}: none");
    };
    assert_eq!(
        (last - first + 1) as usize,
        numbers.len(),
        "{what}: a gap between {first} and {last}"
    );
    assert!(
        t1 - t0 >= span_ns,
        "{what}: {first}..{last} cover {} ms",
        (t1 - t0) / 1_000_000
    );
}

fn snapshot(d: &Daemon, out: &Path) -> String {
    let s = d.cli(&["snapshot", "-o"]).arg(out).output().unwrap();
    let stderr = String::from_utf8_lossy(&s.stderr).into_owned();
    assert!(s.status.success(), "{stderr}\n{}", d.log());
    stderr
}

fn check(file: &Path) {
    let out = Command::new(trace_cli())
        .arg("check")
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_snapshot_holds_the_last_window_without_gaps_and_recording_goes_on() {
    let d = Daemon::start_with(
        "flight-window",
        &[
            "--flight-recorder",
            "-c",
            "kernel:sched,kernel:syscall,kernel:proc,app",
            "--window",
            "2s",
        ],
    );
    let (app, app_pid, _) =
        tests::start_provider(env!("CARGO_BIN_EXE_provider_app"), &d.socket, 9.0, 500);
    let (calls_child, calls_pid) = numbered_calls(9.0, 300);
    let _running = Killed(vec![app, calls_child]);
    std::thread::sleep(Duration::from_millis(4500));

    let s1 = d.dir.join("s1.fxt");
    let asked = tests::boottime_ns();
    let said = snapshot(&d, &s1);
    assert!(said.contains("snapshot of "), "{said}");
    std::thread::sleep(Duration::from_millis(1000));
    let s2 = d.dir.join("s2.fxt");
    snapshot(&d, &s2);

    let mut last = BTreeMap::new();
    for (n, file) in [&s1, &s2].into_iter().enumerate() {
        check(file);
        let t = parse(file);
        assert!(t.errors.is_empty(), "{:?}", t.errors);
        // Processes and threads are named in the file itself.
        assert!(
            t.thread_names.contains_key(&calls_pid),
            "{}: the workload is named",
            file.display()
        );
        let calls = calls(&t, calls_pid);
        whole_run("numbered calls", &calls, 1_900_000_000);
        let ticks = ticks(&t, app_pid);
        assert_eq!(ticks.len(), 2, "main and worker");
        for (tid, seqs) in &ticks {
            whole_run(&format!("ticks of {tid}"), seqs, 1_900_000_000);
        }
        if n == 0 {
            // Up to the moment it was taken: the kernel's events wait 50
            // ms to be put in order; the providers' are read then.
            let newest_call = *calls.values().last().unwrap();
            assert!(
                newest_call + 300_000_000 > asked,
                "the newest call is {} ms older than the request",
                asked.saturating_sub(newest_call) / 1_000_000
            );
            for seqs in ticks.values() {
                let newest = *seqs.values().last().unwrap();
                assert!(
                    newest + 100_000_000 > asked,
                    "the newest tick is {} ms older than the request",
                    asked.saturating_sub(newest) / 1_000_000
                );
            }
            last.insert(0, *calls.keys().last().unwrap());
            for (tid, seqs) in &ticks {
                last.insert(*tid, *seqs.keys().last().unwrap());
            }
        } else {
            // The second continues the first: nothing lost in between.
            assert!(
                *calls.keys().next().unwrap() <= last[&0] + 1,
                "calls lost between the snapshots"
            );
            assert!(calls.keys().last().unwrap() > &last[&0]);
            for (tid, seqs) in &ticks {
                assert!(*seqs.keys().next().unwrap() <= last[tid] + 1);
                assert!(seqs.keys().last().unwrap() > &last[tid]);
            }
        }
    }
    let sessions = d.cli(&["sessions"]).output().unwrap();
    let listed = String::from_utf8_lossy(&sessions.stdout);
    assert!(listed.contains("flight recorder"), "{listed}");
}

#[test]
fn a_recording_runs_beside_the_flight_recorder_and_both_are_complete() {
    let d = Daemon::start_with(
        "flight-beside",
        &[
            "--flight-recorder",
            "-c",
            "kernel:syscall,app",
            "--window",
            "5s",
        ],
    );
    let (app, app_pid, _) =
        tests::start_provider(env!("CARGO_BIN_EXE_provider_app"), &d.socket, 7.0, 500);
    let (calls_child, calls_pid) = numbered_calls(7.0, 300);
    let _running = Killed(vec![app, calls_child]);
    std::thread::sleep(Duration::from_millis(1000));
    let out = d.dir.join("rec.fxt");
    let pid = calls_pid.to_string();
    let recording = d
        .record(
            &out,
            &[
                "-c",
                "kernel:syscall,kernel:sched,app",
                "-p",
                &pid,
                "-d",
                "2.5",
            ],
        )
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    // Both listed while both run.
    let during = d.cli(&["sessions"]).output().unwrap();
    let listed = String::from_utf8_lossy(&during.stdout);
    assert!(
        listed.contains("flight recorder") && listed.contains("recording"),
        "{listed}"
    );
    let rec = recording.wait_with_output().unwrap();
    assert!(
        rec.status.success(),
        "{}",
        String::from_utf8_lossy(&rec.stderr)
    );
    let s = d.dir.join("s.fxt");
    snapshot(&d, &s);
    for file in [&out, &s] {
        check(file);
    }
    let rec_trace = parse(&out);
    let kept_trace = parse(&s);
    let recorded = calls(&rec_trace, calls_pid);
    whole_run("recorded calls", &recorded, 2_300_000_000);
    let kept = calls(&kept_trace, calls_pid);
    whole_run("kept calls", &kept, 3_000_000_000);
    // The flight recorder kept every call the recording got.
    for n in recorded.keys() {
        assert!(kept.contains_key(n), "call {n} not in the flight recorder");
    }
    // Both have the provider's events, each without a gap, the recording's
    // up to its end.
    let rec_ticks = ticks(&rec_trace, app_pid);
    assert_eq!(rec_ticks.len(), 2, "main and worker in the recording");
    let rec_end = rec_trace.switches.iter().map(|s| s.ts).max().unwrap();
    for (tid, seqs) in &rec_ticks {
        whole_run(&format!("recorded ticks of {tid}"), seqs, 2_300_000_000);
        let newest = *seqs.values().last().unwrap();
        assert!(
            rec_end.abs_diff(newest) < 300_000_000,
            "the recording's ticks end {} ms before it",
            rec_end.saturating_sub(newest) / 1_000_000
        );
    }
    let kept_ticks = ticks(&kept_trace, app_pid);
    assert_eq!(kept_ticks.len(), 2, "main and worker in the snapshot");
    for (tid, seqs) in &kept_ticks {
        whole_run(&format!("kept ticks of {tid}"), seqs, 3_000_000_000);
    }
    // The recording has its own categories: wake-ups, which the flight
    // recorder does not record.
    assert!(!rec_trace.wakeups.is_empty());
    assert!(kept_trace.wakeups.is_empty());
}
