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

/// A daemon with a flight recorder, once the recorder runs (the socket
/// accepts connections while the programs are still being loaded).
fn flight_daemon(name: &str, args: &[&str]) -> Daemon {
    let d = Daemon::start_with(name, args);
    let listed = d.cli(&["sessions"]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("flight recorder"),
        "{}",
        d.log()
    );
    d
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

/// `numbered_calls ARGS` run to its end: its pid, the calls it made (when
/// it said), and how it ended.
fn run_numbered_calls(args: &[&str]) -> (u64, Option<u64>, std::process::ExitStatus) {
    let run = Command::new(env!("CARGO_BIN_EXE_numbered_calls"))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let field = |k: &str| -> Option<u64> {
        stdout
            .split_whitespace()
            .find_map(|f| f.strip_prefix(k))
            .map(|v| v.parse().unwrap())
    };
    let pid = field("pid=").unwrap_or_else(|| panic!("no pid in {stdout:?}"));
    (pid, field("calls="), run.status)
}

/// `trace-cli record -o DIR/trace.fxt ARGS` without a daemon, for test
/// `name`, once it records: the recorder, its standard error after the
/// "recording" line, and the file.
fn start_recording(
    name: &str,
    args: &[&str],
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStderr>,
    std::path::PathBuf,
) {
    let dir = tests::temp_dir(name);
    let out = dir.join("trace.fxt");
    let mut rec = Command::new(trace_cli())
        .args(["record", "-o"])
        .arg(&out)
        .args(args)
        .env("TRACE_MANAGER_SOCKET", dir.join("none.sock"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(rec.stderr.take().unwrap());
    tests::wait_for_recording(&mut stderr);
    (rec, stderr, out)
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
    let (ok, findings) = tests::check(file);
    assert!(ok, "{}: {findings}", file.display());
}

#[test]
fn a_snapshot_holds_the_last_window_without_gaps_and_recording_goes_on() {
    let d = flight_daemon(
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
    let asked_at = std::time::Instant::now();
    let said = snapshot(&d, &s1);
    assert!(said.contains("snapshot of "), "{said}");
    // The second is asked for 1 s after the first (at once if writing the
    // first took longer), so that its 2 s window still reaches back past
    // the first's newest events however long the first took to write.
    std::thread::sleep(Duration::from_millis(1000).saturating_sub(asked_at.elapsed()));
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
    let d = flight_daemon(
        "flight-beside",
        &[
            "--flight-recorder",
            "-c",
            "kernel:syscall,kernel:sched,app",
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
    // The recording has its own pid filter: the app's system calls, which
    // the flight recorder records, are not in it.
    let app_calls = |t: &Trace| {
        t.events
            .iter()
            .filter(|e| e.pid == app_pid && e.category == "kernel:syscall")
            .count()
    };
    assert_eq!(app_calls(&rec_trace), 0);
    assert!(app_calls(&kept_trace) > 0);
}

/// Tests that make processes crash, and recordings of every process that
/// stop on a crash, run one at a time: each would see the others' crashes.
static CRASHES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The trigger snapshot in `dir` in which trigger `name` is marked on
/// process `pid` (waiting at most 15 s for it), and that mark.
fn snapshot_marking(dir: &Path, name: &str, pid: u64) -> (std::path::PathBuf, tests::Event) {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        for file in files_in(dir) {
            // A file is whole once the daemon wrote it: read it only when
            // its size has settled.
            let size = std::fs::metadata(&file).map_or(0, |m| m.len());
            std::thread::sleep(Duration::from_millis(200));
            if std::fs::metadata(&file).map_or(0, |m| m.len()) != size || size == 0 {
                continue;
            }
            let t = parse(&file);
            if let Some(mark) = t
                .events
                .iter()
                .find(|e| e.category == "trigger" && e.name == name && e.pid == pid)
            {
                return (file, mark.clone());
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no snapshot in {} marks {name} on {pid}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_crash_and_a_slow_fsync_fire_triggers_whose_snapshots_hold_what_led_to_them() {
    let _one_at_a_time = CRASHES.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tests::temp_dir("flight-triggers");
    let snaps = dir.join("snaps");
    let snaps_arg = snaps.to_string_lossy().into_owned();
    let d = flight_daemon(
        "flight-triggers",
        &[
            "--flight-recorder",
            "-c",
            "kernel:sched,kernel:syscall,kernel:proc",
            "--window",
            "20s",
            "--trigger",
            "signal:SIGSEGV",
            "--trigger",
            "syscall:fsync>1ms",
            "--pre",
            "3",
            "--post",
            "0.5",
            "--trigger-interval",
            "0",
            "--trigger-dir",
            &snaps_arg,
        ],
    );

    // A process that makes numbered calls for a second, then crashes.
    let (crash_pid, crash_calls, status) = run_numbered_calls(&["1", "300", "segv"]);
    let crash_calls = crash_calls.expect("the calls it made");
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(status.signal(), Some(libc::SIGSEGV));
    // Where it fired is marked, on the crashing thread.
    let (first, mark) = snapshot_marking(&snaps, "signal:SIGSEGV", crash_pid);
    assert!(
        first.to_string_lossy().contains("signal_SIGSEGV"),
        "{}",
        first.display()
    );
    check(&first);
    let t = parse(&first);
    assert_eq!((mark.pid, mark.tid), (crash_pid, crash_pid));
    // Every call it made (the 3 s before the trigger hold them all), and
    // its exit.
    let made = calls(&t, crash_pid);
    let numbers: Vec<u64> = made.keys().copied().collect();
    assert!(
        numbers.len() as u64 == crash_calls
            && numbers.first() == Some(&0)
            && numbers.last() == Some(&(crash_calls - 1)),
        "its {crash_calls} numbered calls: {} from {:?} to {:?}",
        numbers.len(),
        numbers.first(),
        numbers.last()
    );
    let exit = t
        .events
        .iter()
        .find(|e| e.name == "exit" && e.pid == crash_pid)
        .unwrap_or_else(|| panic!("no exit of {crash_pid}\n{}", d.log()));
    assert!(exit.ts >= mark.ts);
    assert!(*made.values().last().unwrap() <= mark.ts);

    // A slow fsync: its own snapshot, with the call.
    let path = dir.join("fsync.data");
    let (slow_pid, _, status) =
        run_numbered_calls(&["0.5", "300", &format!("fsync:{}", path.display())]);
    assert!(status.success());
    let (second, mark) = snapshot_marking(&snaps, "syscall:fsync>1ms", slow_pid);
    check(&second);
    // A system-wide trace is root's: its directory and files too.
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&snaps), 0o700, "{}", snaps.display());
    for f in [&first, &second] {
        assert_eq!(mode(f), 0o600, "{}", f.display());
    }
    let t = parse(&second);
    assert!(int(mark.args.get("duration_ns")).unwrap() > 1_000_000);
    let fsync = t
        .events
        .iter()
        .find(|e| e.pid == slow_pid && e.name == "fsync")
        .expect("the fsync call");
    assert!(!calls(&t, slow_pid).is_empty(), "the calls before it");
    assert!(fsync.ts < mark.ts);
    // The crash is older than the second snapshot's window start (3 s
    // before its trigger) only if the runs were that far apart; the file
    // holds what it must either way. The daemon goes on.
    let sessions = d.cli(&["sessions"]).output().unwrap();
    assert!(String::from_utf8_lossy(&sessions.stdout).contains("flight recorder"));
}

/// The files in `dir`, sorted.
fn files_in(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

/// Waits (at most 15 s) until the daemon's log holds `what`.
fn logged(d: &Daemon, what: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let log = d.log();
        if log.contains(what) {
            return log;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the log does not say {what:?}:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Trigger snapshots cannot fill the disk: a program crashing again and
/// again gets one snapshot per `--trigger-interval`, the rest counted; a
/// snapshot that would pass `--trigger-space` is not taken; and on a full
/// disk a snapshot ends on its last whole record (or, holding nothing, is
/// removed), every file left passing `check`.
#[test]
fn trigger_snapshots_are_limited_and_whole_on_a_full_disk() {
    let _one_at_a_time = CRASHES.lock().unwrap_or_else(|e| e.into_inner());
    let flight = |name: &str, snaps: &Path, extra: &[&str]| {
        let snaps = snaps.to_string_lossy().into_owned();
        let args = [
            &[
                "--flight-recorder",
                "-c",
                "kernel:sched,kernel:syscall,kernel:proc",
                "--window",
                "20s",
                "--trigger",
                "signal:SIGSEGV",
                "--pre",
                "2",
                "--post",
                "0.2",
                "--trigger-dir",
                &snaps,
            ][..],
            extra,
        ]
        .concat();
        flight_daemon(name, &args)
    };
    let crash = || {
        let (_, _, status) = run_numbered_calls(&["0.05", "300", "segv"]);
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(status.signal(), Some(libc::SIGSEGV));
    };

    // Ten crashes in a row: one snapshot, nine counted.
    let dir = tests::temp_dir("flight-trigger-rate");
    let snaps = dir.join("snaps");
    let d = flight("flight-trigger-rate", &snaps, &["--trigger-interval", "30"]);
    for _ in 0..10 {
        crash();
        std::thread::sleep(Duration::from_millis(100));
    }
    logged(&d, "trigger signal:SIGSEGV snapshot:");
    let log = logged(&d, "too soon after the last snapshot");
    std::thread::sleep(Duration::from_secs(1));
    let files = files_in(&snaps);
    assert_eq!(files.len(), 1, "{files:?}\n{log}");
    check(&files[0]);
    drop(d);

    // No room left in what the snapshots may take: none taken.
    let d = flight(
        "flight-trigger-space",
        &snaps,
        &["--trigger-interval", "0", "--trigger-space", "64K"],
    );
    crash();
    logged(&d, "snapshot not taken");
    assert_eq!(files_in(&snaps).len(), 1, "{:?}", files_in(&snaps));
    drop(d);
    let _ = std::fs::remove_dir_all(&dir);

    // A folder on a full disk (a 4 MiB tmpfs): the first snapshot keeps the
    // whole records that fit, the next holds nothing and is removed.
    let dir = tests::temp_dir("flight-trigger-full");
    let disk = dir.join("disk");
    std::fs::create_dir_all(&disk).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4M", "tmpfs"])
        .arg(&disk)
        .status()
        .unwrap();
    assert!(mounted.success());
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(disk.clone());
    let snaps = disk.join("snaps");
    let d = flight("flight-trigger-full", &snaps, &["--trigger-interval", "0"]);
    // Two seconds of calls every 10 µs: far more than 4 MiB of events.
    let (_, _, _) = run_numbered_calls(&["2", "10", "segv"]);
    logged(&d, "keeps the");
    std::thread::sleep(Duration::from_millis(500));
    // What the first snapshot left free (it cut back to its last whole
    // record) is filled, so that the next has no room for anything.
    {
        use std::io::Write as _;
        let mut filler = std::fs::File::create(disk.join("filler")).unwrap();
        let block = vec![0u8; 4096];
        while filler.write_all(&block).is_ok() {}
        while filler.write_all(&block[..1]).is_ok() {}
    }
    crash();
    let log = logged(&d, "the file is removed");
    for line in log.lines().filter(|l| l.contains("snapshot")) {
        eprintln!("{line}");
    }
    let files = files_in(&snaps);
    assert_eq!(files.len(), 1, "{files:?}\n{log}");
    for f in &files {
        assert!(std::fs::metadata(f).unwrap().len() > 0, "{}", f.display());
        check(f);
    }
    drop(d);
    drop(_unmount);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_kernel_trigger_stops_a_recording_after_its_post_time() {
    tests::require_root();
    let _one_at_a_time = CRASHES.lock().unwrap_or_else(|e| e.into_inner());
    let (mut rec, _stderr, out) = start_recording(
        "record-trigger",
        &[
            "-c",
            "kernel:syscall,kernel:proc,kernel:sched",
            "-a",
            "-d",
            "30",
            "--trigger",
            "signal:SIGSEGV",
            "--post",
            "0.5",
        ],
    );
    let began = std::time::Instant::now();
    let (pid, _, _) = run_numbered_calls(&["0.5", "300", "segv"]);
    let status = rec.wait().unwrap();
    assert!(status.success());
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "the trigger stopped it: {:?}",
        began.elapsed()
    );
    check(&out);
    let t = parse(&out);
    let mark = t
        .events
        .iter()
        .find(|e| e.category == "trigger" && e.name == "signal:SIGSEGV")
        .expect("the trigger is marked");
    assert_eq!(mark.pid, pid);
    // Recorded until at least half a second after it.
    let last = t.switches.iter().map(|s| s.ts).max().unwrap();
    assert!(
        last >= mark.ts + 400_000_000,
        "{} ms after",
        (last - mark.ts) / 1_000_000
    );
    assert!(t.events.iter().any(|e| e.name == "exit" && e.pid == pid));
    // A trigger on system calls without recording them is refused.
    let refused = tests::record_fails(
        &[
            "-c",
            "kernel:sched",
            "--trigger",
            "syscall:fsync>1ms",
            "-d",
            "1",
        ],
        &out,
    );
    assert!(refused.contains("kernel:syscall"), "{refused}");
}

#[test]
fn with_pre_a_recording_keeps_only_the_time_around_its_trigger() {
    tests::require_root();
    let _one_at_a_time = CRASHES.lock().unwrap_or_else(|e| e.into_inner());
    let (mut rec, mut stderr, out) = start_recording(
        "record-pre",
        &[
            "-c",
            "kernel:syscall,kernel:proc,kernel:sched",
            "-a",
            "-d",
            "30",
            "--trigger",
            "signal:SIGSEGV",
            "--pre",
            "1",
            "--post",
            "0.3",
        ],
    );
    let (pid, made, _) = run_numbered_calls(&["3", "300", "segv"]);
    let made = made.expect("the calls it made");
    assert!(rec.wait().unwrap().success());
    let mut said = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut said).unwrap();
    assert!(said.contains("kept from 1 s before the trigger"), "{said}");
    check(&out);
    let t = parse(&out);
    let mark = t
        .events
        .iter()
        .find(|e| e.category == "trigger" && e.name == "signal:SIGSEGV")
        .expect("the trigger is marked");
    let calls = calls(&t, pid);
    whole_run("kept calls", &calls, 900_000_000);
    let (first, first_ts) = calls.first_key_value().map(|(n, ts)| (*n, *ts)).unwrap();
    // The calls of the 2 s before were dropped (a chunk of slack kept).
    assert!(first > 0, "every call kept");
    assert!(
        first_ts + 1_700_000_000 > mark.ts,
        "kept from {} ms before the trigger",
        (mark.ts - first_ts) / 1_000_000
    );
    assert_eq!(
        *calls.keys().last().unwrap(),
        made - 1,
        "up to the last call"
    );
    assert!(t.events.iter().any(|e| e.name == "exit" && e.pid == pid));
}

#[test]
fn a_running_circular_recording_can_be_snapshotted() {
    let d = Daemon::start("circular-snapshot");
    let (app, app_pid, _) =
        tests::start_provider(env!("CARGO_BIN_EXE_provider_app"), &d.socket, 8.0, 500);
    let (calls_child, calls_pid) = numbered_calls(8.0, 300);
    let _running = Killed(vec![app, calls_child]);
    let out = d.dir.join("rec.fxt");
    let pid = calls_pid.to_string();
    let mut rec = d
        .record(
            &out,
            &[
                "-c",
                "kernel:syscall,kernel:sched,app",
                "-p",
                &pid,
                "--kernel-buffering-mode",
                "circular",
                "--buffering-mode",
                "circular",
                "-d",
                "4",
            ],
        )
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    tests::wait_for_recording(&mut std::io::BufReader::new(rec.stderr.as_mut().unwrap()));
    std::thread::sleep(Duration::from_millis(2000));
    let s = d.dir.join("s.fxt");
    let asked = tests::boottime_ns();
    snapshot(&d, &s);
    assert!(rec.wait().unwrap().success(), "the recording goes on");
    for file in [&s, &out] {
        check(file);
    }
    let t = parse(&s);
    let kept = calls(&t, calls_pid);
    whole_run("snapshot's calls", &kept, 1_500_000_000);
    let newest = *kept.values().last().unwrap();
    assert!(
        newest + 500_000_000 > asked,
        "the newest call is {} ms older than the request",
        asked.saturating_sub(newest) / 1_000_000
    );
    let ticks = ticks(&t, app_pid);
    assert_eq!(ticks.len(), 2, "main and worker");
    for seqs in ticks.values() {
        assert!(seqs.len() > 100);
    }
    // The recording still has everything, the snapshot's calls included.
    let recorded = calls(&parse(&out), calls_pid);
    for n in kept.keys() {
        assert!(recorded.contains_key(n), "call {n}");
    }
}

/// A memory cgroup (v1 or v2) limited to `bytes`, removed on drop.
struct MemoryCgroup(std::path::PathBuf);

impl MemoryCgroup {
    fn new(name: &str, bytes: u64) -> MemoryCgroup {
        let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
        let root = if v2 {
            Path::new("/sys/fs/cgroup")
        } else {
            Path::new("/sys/fs/cgroup/memory")
        };
        let dir = root.join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let limit = if v2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        };
        std::fs::write(dir.join(limit), bytes.to_string()).unwrap();
        // No swapping instead of the kill.
        for swap in ["memory.swap.max", "memory.memsw.limit_in_bytes"] {
            let _ = std::fs::write(
                dir.join(swap),
                if v2 { "0".into() } else { bytes.to_string() },
            );
        }
        MemoryCgroup(dir)
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn an_out_of_memory_kill_fires_the_oom_trigger() {
    tests::require_root();
    let _one_at_a_time = CRASHES.lock().unwrap_or_else(|e| e.into_inner());
    let (mut rec, _stderr, out) = start_recording(
        "record-oom",
        &[
            "-c",
            "kernel:proc,kernel:sched",
            "-a",
            "-d",
            "30",
            "--trigger",
            "oom",
            "--post",
            "0.3",
        ],
    );
    let cgroup = MemoryCgroup::new("trace-oom", 32 << 20);
    // The shell moves itself into the cgroup, then becomes the program
    // that touches 8 times the limit.
    let victim = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {}/cgroup.procs && exec {} 256",
            cgroup.0.display(),
            env!("CARGO_BIN_EXE_touch_pages")
        ))
        .spawn()
        .unwrap();
    let victim_pid = u64::from(victim.id());
    let status = victim.wait_with_output().unwrap().status;
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(status.signal(), Some(libc::SIGKILL), "killed for memory");
    assert!(rec.wait().unwrap().success());
    check(&out);
    let t = parse(&out);
    assert!(
        t.events
            .iter()
            .any(|e| e.category == "trigger" && e.name == "oom"),
        "the trigger is marked"
    );
    let victim_mark = t
        .events
        .iter()
        .find(|e| e.category == "oom" && e.name == "mark_victim")
        .expect("the kill is recorded");
    assert_eq!(int(victim_mark.args.get("pid")), Some(victim_pid));
    assert!(
        t.events
            .iter()
            .any(|e| e.name == "exit" && e.pid == victim_pid)
    );
}

/// Runs `record ARGS` until it stops by itself after `act` (at most 20 s);
/// the trace, with the mark of trigger `name`.
fn record_until_trigger(name: &str, args: &[&str], act: impl FnOnce()) -> (Trace, tests::Event) {
    let args: Vec<&str> = args
        .iter()
        .copied()
        .chain(["-d", "30", "--trigger", name])
        .collect();
    let (mut rec, mut stderr, out) =
        start_recording(&format!("trigger-{}", name.replace(':', "-")), &args);
    let began = std::time::Instant::now();
    act();
    assert!(rec.wait().unwrap().success());
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "stopped by the trigger"
    );
    let mut said = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut said).unwrap();
    assert!(
        said.contains(&format!("stopped by trigger {name:?}")),
        "{said}"
    );
    check(&out);
    let t = parse(&out);
    let mark = t
        .events
        .iter()
        .find(|e| e.category == "trigger" && e.name == name)
        .cloned()
        .unwrap_or_else(|| panic!("no mark of {name}"));
    (t, mark)
}

#[test]
fn probe_and_tracepoint_triggers_stop_a_recording() {
    tests::require_root();
    // A return from a probed function.
    let tests::Target {
        child: mut target,
        mut stdin,
        mut stdout,
        pid,
    } = tests::start_target(Path::new(env!("CARGO_BIN_EXE_uprobe_target")));
    let pid_arg = pid.to_string();
    let (t, mark) = record_until_trigger(
        "uprobe:c_recurse",
        &["-c", "kernel:proc", "-p", &pid_arg, "--uprobe", "c_recurse"],
        || {
            use std::io::Write as _;
            stdin.write_all(b"0 1\n").unwrap();
            stdin.flush().unwrap();
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            assert!(line.starts_with("done"), "{line}");
        },
    );
    drop(stdin);
    assert!(target.wait().unwrap().success());
    assert_eq!(mark.pid, pid);
    assert!(
        t.events
            .iter()
            .any(|e| e.name == "c_recurse" && e.pid == pid)
    );

    // A tracepoint event that its filter lets through, in the kernel.
    let mut sleeper = Command::new("sleep").arg("20").spawn().unwrap();
    let target = sleeper.id();
    let (t, _) = record_until_trigger(
        "tracepoint:signal:signal_generate",
        &[
            "-c",
            "none",
            "-a",
            "-e",
            &format!(
                "signal:signal_generate if sig == {} && pid == {target}",
                libc::SIGUSR1
            ),
        ],
        || {
            // SAFETY: kill() with a pid and a signal has no memory effects.
            unsafe { libc::kill(target as i32, libc::SIGUSR1) };
        },
    );
    let _ = sleeper.wait();
    let generated: Vec<_> = t
        .events
        .iter()
        .filter(|e| e.category == "signal" && e.name == "signal_generate")
        .collect();
    assert_eq!(generated.len(), 1, "only what the filter lets through");
    assert_eq!(int(generated[0].args.get("pid")), Some(u64::from(target)));
}

#[test]
fn only_root_reads_the_flight_recorder() {
    use std::os::unix::fs::PermissionsExt as _;
    use std::os::unix::process::CommandExt as _;
    let d = flight_daemon(
        "flight-denied",
        &["--flight-recorder", "-c", "kernel:sched", "--window", "2s"],
    );
    // Anyone may connect, as members of `tracing` may to the real socket.
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = std::env::temp_dir().join(format!("trace-e2e-denied-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o777)).unwrap();
    let theirs = out.join("theirs.fxt");
    let refused = d
        .cli(&["snapshot", "-o"])
        .arg(&theirs)
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{err}");
    assert!(err.contains("only root may read it"), "{err}");
    assert!(
        std::fs::metadata(&theirs).map_or(0, |m| m.len()) == 0,
        "nothing of the trace reached the file"
    );
    // Root's snapshot is whole.
    let mine = out.join("mine.fxt");
    snapshot(&d, &mine);
    check(&mine);
    std::fs::remove_dir_all(&out).ok();
}

/// Snapshots asked for into pipes nobody reads cannot pin the daemon's
/// memory: a client gets one snapshot at a time and the daemon two in all
/// (the others are refused, saying so), and a reader that takes nothing for
/// 10 s is cut off with a message. Sixteen clients asking one after the
/// other, with a flight recorder filling its window, leave the daemon's
/// peak memory within a few windows of where it was.
#[test]
fn snapshots_nobody_reads_are_limited_and_cut_off() {
    use std::os::fd::AsFd;
    use trace_common::controller::{Reply, Request};
    let d = flight_daemon(
        "flight-unread",
        &[
            "--flight-recorder",
            "-c",
            "kernel:sched,kernel:syscall",
            "--window",
            "5s",
            "--window-max",
            "32M",
            // The kernel events' backlog within it too.
            "--memory-budget",
            "128M",
        ],
    );
    let daemon_pid = d.child.id();
    // Something to record: a stream of system calls.
    let calls = Command::new(env!("CARGO_BIN_EXE_syscall_rate"))
        .args(["50000", "40", "1"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let _calls = Killed(vec![calls]);
    // The window full.
    std::thread::sleep(Duration::from_secs(8));
    let (_, before) = tests::rss(daemon_pid);
    tests::runtime().block_on(async {
        let mut asked = Vec::new();
        let mut refused = 0;
        let began = std::time::Instant::now();
        for _ in 0..16 {
            let mut c = trace_manager::client::Controller::connect(&d.socket).unwrap();
            let (read, write) = tests::pipe();
            let txid = c.send(Request::Snapshot, Some(write.as_fd())).unwrap();
            drop(write);
            // A second one on the same connection while the first is unread.
            let (_read2, write2) = tests::pipe();
            let again = c
                .call(Request::Snapshot, Some(write2.as_fd()))
                .await
                .unwrap();
            assert!(
                matches!(&again, Reply::Failed { message, .. }
                    if message.contains("already being written")
                        || message.contains("the most at once")),
                "{again:?}"
            );
            asked.push((c, txid, read));
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // Asked before the first could be cut off (10 s), unless the
        // machine is that slow: then a slot freed may have been taken again.
        let most = if began.elapsed() < Duration::from_secs(9) {
            2
        } else {
            4
        };
        // Two at most were taken on; every other was refused at once.
        let mut cut_off = 0;
        for (mut c, txid, _read) in asked {
            match c.wait(txid).await.unwrap() {
                Reply::Failed { message, .. } if message.contains("took nothing for 10 s") => {
                    cut_off += 1
                }
                Reply::Failed { message, .. } if message.contains("the most at once") => {
                    refused += 1
                }
                other => panic!("{other:?}"),
            }
        }
        assert!((1..=most).contains(&cut_off), "{cut_off} cut off");
        assert_eq!(cut_off + refused, 16);
    });
    let (_, peak) = tests::rss(daemon_pid);
    eprintln!(
        "daemon peak {} MiB, {} MiB before the snapshots",
        peak >> 20,
        before >> 20
    );
    // Two snapshots of at most a 32 MiB window each, and their buffers.
    assert!(
        peak < before + (160 << 20),
        "peak {} MiB, before {} MiB",
        peak >> 20,
        before >> 20
    );
    // The daemon goes on: a snapshot that is read is written whole.
    let s = d.dir.join("after.fxt");
    snapshot(&d, &s);
    check(&s);
}
