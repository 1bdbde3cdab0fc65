//! End-to-end: the figures of a recording agree with independent
//! measurements of the same run.
//!
//! The CPU time `trace-cli report` gives a process agrees with
//! the process's own clock (CLOCK_PROCESS_CPUTIME_ID, which counts its
//! ended threads too), in every way of recording it: a command (`--`) in
//! each kernel buffering mode, a running process (`-p`), and a recording
//! cut into rotated files (their figures summed). `cpu_time_workload`
//! starts threads that each burn a known amount of CPU and end, then
//! sleeps: a thread whose last switch out the recording missed would be
//! charged for the whole sleep.
//!
//! And a circular recording that forgot its oldest events covers the time
//! of the events it kept, not the time since the recording began.
//!
//! The system calls of a shell loop that starts programs are those `strace
//! -f -c` counts in the same run, call by call: a new task's return from
//! the `vfork` or `clone` that made it is no call of its own.
//!
//! Every block request of four `dd`s writing with direct I/O finishes, in a
//! recording of every process and one of the command's alone made at once,
//! and the bytes of their files add up; a completion is missed only where
//! the recording says it lost events or a CPU ran a task the kernel keeps
//! out of tracing (its interrupts are not traced either).

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use tests::{report_json, report_rows, require_root, temp_dir, trace_cli};
use trace_common::fxt::{ArgValue, StringRef};

const WORKLOAD: &str = env!("CARGO_BIN_EXE_cpu_time_workload");

/// The tests of this file run one at a time: each compares a recording with
/// a measurement of the same run, and one of them storms every CPU with
/// system calls (a recording of everything beside it would lose events).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// The rows of the CPU section's table `table`, none when the trace has
/// no context switches (a rotated file may have none).
fn cpu_rows<'v>(report: &'v Value, table: &str) -> &'v [Value] {
    let has_tables = report["sections"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["id"] == "cpu" && s["tables"].as_array().is_some_and(|t| !t.is_empty()));
    if has_tables {
        report_rows(report, "cpu", table)
    } else {
        &[]
    }
}

/// The time on CPU the report gives process `pid` (0 when it has no row).
fn on_cpu(report: &Value, pid: u64) -> u64 {
    cpu_rows(report, "processes")
        .iter()
        .find(|r| r["pid"] == pid)
        .map_or(0, |r| r["on_cpu"].as_u64().unwrap())
}

/// `pid` and `cpu_ns` (or, with `total`, `total_cpu_ns`: from the process's
/// creation) of the workload's last line.
fn workload_figures(stdout: &str, total: bool) -> (u64, u64) {
    let line = stdout
        .lines()
        .find(|l| l.contains("cpu_ns="))
        .unwrap_or_else(|| panic!("no cpu_ns in {stdout:?}"));
    let n = tests::workload::numbers(line);
    (n["pid"], n[if total { "total_cpu_ns" } else { "cpu_ns" }])
}

/// Our figure is the workload's, give or take 10% and 15 ms (the report
/// also counts the process's exit, and the scheduler's own time around
/// switches), and up to the time the hypervisor took from this machine's
/// CPUs meanwhile (`stolen`): a thread's time on a CPU, from its switch in
/// to its switch out, includes that steal, and the process's own clock
/// (`CONFIG_PARAVIRT_TIME_ACCOUNTING`) does not.
fn agrees(what: &str, ours: u64, theirs: u64, stolen: u64) {
    let slack = theirs / 10 + 15_000_000;
    let slack_above = slack + stolen;
    assert!(
        ours <= theirs + slack_above && theirs <= ours + slack,
        "{what}: report says {:.1} ms on CPU, the process's own clock {:.1} ms ({:.1} ms \
         stolen by the hypervisor meanwhile)",
        ours as f64 / 1e6,
        theirs as f64 / 1e6,
        stolen as f64 / 1e6
    );
}

/// The time the hypervisor has taken from this machine's CPUs, all
/// together (`steal` in `/proc/stat`), in ns.
fn steal_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let ticks: u64 = stat
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(8))
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).unwrap_or(100);
    ticks * 1_000_000_000 / hz.max(1)
}

/// `trace-cli record ARGS -o OUT -- cpu_time_workload`: the workload's pid
/// and CPU time.
fn record_workload(out: &Path, args: &[&str]) -> (u64, u64) {
    let output = Command::new(trace_cli())
        .arg("record")
        .args(args)
        .arg("-o")
        .arg(out)
        .arg("--")
        .arg(WORKLOAD)
        .env("TRACE_MANAGER_SOCKET", out.with_extension("sock"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "trace-cli record failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Recorded from its fork: its CPU time since then.
    workload_figures(&String::from_utf8_lossy(&output.stdout), true)
}

#[test]
fn a_commands_cpu_time_is_its_own_in_every_buffering_mode() {
    require_root();
    let _one = one_at_a_time();
    let dir = temp_dir("accounting-modes");
    for mode in ["oneshot", "circular", "streaming"] {
        let out = dir.join(format!("{mode}.fxt"));
        let steal = steal_ns();
        let (pid, theirs) = record_workload(
            &out,
            &[
                "-c",
                "kernel:sched",
                "--kernel-buffering-mode",
                mode,
                "-b",
                "16",
            ],
        );
        let report = report_json(&["--section", "cpu"], &[&out]);
        agrees(mode, on_cpu(&report, pid), theirs, steal_ns() - steal);
    }
}

#[test]
fn a_running_processs_cpu_time_is_its_own() {
    require_root();
    let _one = one_at_a_time();
    let dir = temp_dir("accounting-pid");
    let steal = steal_ns();
    let (file, _, line) = tests::record_running(&dir, "kernel:sched", WORKLOAD, &["--wait-stdin"]);
    // Recorded from the moment it was let go: its CPU time since `main`
    // (before, it waited for the line).
    let (pid, theirs) = workload_figures(&line, false);
    let report = report_json(&["--section", "cpu"], &[&file]);
    agrees("-p", on_cpu(&report, pid), theirs, steal_ns() - steal);
}

#[test]
fn the_cpu_time_of_rotated_files_adds_up_to_the_processs_own() {
    require_root();
    let _one = one_at_a_time();
    let dir = temp_dir("accounting-rotated");
    let out = dir.join("trace.fxt");
    // The whole system's scheduling and system calls, so that the files
    // turn over while the workload runs; rings large enough that a test
    // build's slower translation drops no switch (a switch dropped charges
    // its thread until the next one).
    let steal = steal_ns();
    let (pid, theirs) = record_workload(
        &out,
        &[
            "-a",
            "-b",
            "64",
            "-c",
            "kernel:sched,kernel:syscall",
            "--buffering-mode",
            "streaming",
            "--rotate",
            "64K",
        ],
    );
    let files = tests::rotated_files(&dir);
    assert!(files.len() >= 3, "only {} files", files.len());
    let mut ours = 0;
    for f in &files {
        let report = report_json(&["--section", "cpu"], &[f]);
        let (from, to) = (
            report["trace"]["observed_ns"]
                .as_u64()
                .or(report["trace"]["start_ns"].as_u64())
                .unwrap(),
            report["trace"]["end_ns"].as_u64().unwrap(),
        );
        // Nothing in a file is charged for more time than the file covers.
        for cpu in cpu_rows(&report, "cpus") {
            let busy = cpu["busy"].as_u64().unwrap();
            assert!(
                busy <= to - from,
                "{}: {cpu} in {} ns",
                f.display(),
                to - from
            );
        }
        ours += on_cpu(&report, pid);
    }
    agrees("rotated files, summed", ours, theirs, steal_ns() - steal);
}

#[test]
fn a_circular_recording_covers_the_time_of_the_events_it_kept() {
    require_root();
    let _one = one_at_a_time();
    let dir = temp_dir("accounting-circular");
    let out = dir.join("trace.fxt");
    // Every CPU makes system calls as fast as it can for 3 s: a 1 MiB
    // circular buffer keeps a small part of that.
    let output = Command::new(trace_cli())
        .args([
            "record",
            "-a",
            "-c",
            "kernel:sched,kernel:syscall",
            "--kernel-buffering-mode",
            "circular",
            "-b",
            "1",
            "-o",
        ])
        .arg(&out)
        .arg("--")
        .args([env!("CARGO_BIN_EXE_syscall_rate"), "0", "3"])
        .env("TRACE_MANAGER_SOCKET", dir.join("manager.sock"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let t = tests::parse(&out);
    // What the buffer kept, in time: every switch and event it holds (the
    // CPUs running the storm switch seldom, so switches alone may cover
    // only a part of it).
    let stamps = || {
        t.switches
            .iter()
            .map(|s| s.ts)
            .chain(t.events.iter().map(|e| e.ts))
    };
    let (first, last) = (
        stamps().min().expect("nothing kept"),
        stamps().max().unwrap(),
    );
    let report = report_json(&["--section", "cpu"], &[&out]);
    let (from, to) = (
        report["trace"]["observed_ns"]
            .as_u64()
            .or(report["trace"]["start_ns"].as_u64())
            .unwrap(),
        report["trace"]["end_ns"].as_u64().unwrap(),
    );
    let kept = last - first;
    assert!(
        kept < 2_500_000_000,
        "the buffer kept {kept} ns of events ({} switches, {} events) of a 3 s storm: too \
         much for the test; {}",
        t.switches.len(),
        t.events.len(),
        String::from_utf8_lossy(&output.stderr)
    );
    // What the report covers is what the kept events cover, up to the
    // stop, which comes a little after the last of them.
    assert!(
        from >= first && to - from <= kept + 50_000_000,
        "the report covers {from}..{to} ({} ns), the kept events {first}..{last}",
        to - from
    );
    for cpu in report_rows(&report, "cpu", "cpus") {
        assert!(cpu["busy"].as_u64().unwrap() <= to - from, "{cpu}");
    }
}

#[test]
fn system_calls_are_counted_as_strace_counts_them_in_the_same_run() {
    require_root();
    let _one = one_at_a_time();
    let dir = temp_dir("figures-strace");
    let out = dir.join("trace.fxt");
    let summary = dir.join("strace.txt");
    let output = Command::new(trace_cli())
        .args(["record", "-c", "kernel:syscall,kernel:proc", "-o"])
        .arg(&out)
        .args(["--", "strace", "-f", "-qq", "-c", "-o"])
        .arg(&summary)
        .args([
            "sh",
            "-c",
            "for i in 1 2 3 4 5; do /bin/true; done; (/bin/true &); wait",
        ])
        .env("TRACE_MANAGER_SOCKET", dir.join("manager.sock"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // strace's table: `% time seconds usecs/call calls [errors] syscall`.
    let mut theirs = std::collections::BTreeMap::new();
    for line in std::fs::read_to_string(&summary).unwrap().lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 5 || fields[0].parse::<f64>().is_err() || fields.last() == Some(&"total")
        {
            continue;
        }
        let calls: u64 = fields[3].parse().unwrap();
        theirs.insert(fields.last().unwrap().to_string(), calls);
    }
    assert!(
        theirs.contains_key("vfork") || theirs.contains_key("clone"),
        "{theirs:?}"
    );
    let t = tests::parse(&out);
    // The traced tree is everything but strace itself (the command).
    let strace = t
        .events
        .iter()
        .find(|e| {
            e.category == "kernel:proc"
                && e.name == "exec"
                && matches!(e.args.get("filename"), Some(ArgValue::String(StringRef::Inline(f))) if f.ends_with("/strace"))
        })
        .expect("no exec of strace")
        .pid;
    // strace's children run strace's code (probes of what the kernel
    // allows, then the start of the command) until they execute a program:
    // strace counts their calls from that `execve` on (none of a child that
    // never executes one).
    let children: Vec<u64> = t
        .events
        .iter()
        .filter(|e| e.category == "kernel:proc" && e.name == "fork" && e.pid == strace)
        .filter_map(|e| match e.args.get("child_pid") {
            Some(ArgValue::Koid(k)) => Some(*k),
            _ => None,
        })
        .collect();
    let traced_from = |pid: u64| {
        t.events
            .iter()
            .find(|e| e.category == "kernel:proc" && e.name == "exec" && e.pid == pid)
            .map_or(u64::MAX, |e| e.ts)
    };
    let traced_from: std::collections::HashMap<u64, u64> =
        children.iter().map(|&c| (c, traced_from(c))).collect();
    assert!(!traced_from.is_empty(), "no child of strace seen");
    let mut ours = std::collections::BTreeMap::new();
    for e in t
        .events
        .iter()
        .filter(|e| e.category == "kernel:syscall" && e.pid != strace)
    {
        let end = match e.kind {
            trace_common::fxt::EventKind::DurationComplete { end_ts } => end_ts,
            _ => e.ts,
        };
        if traced_from.get(&e.pid).is_some_and(|&exec| end < exec) {
            continue;
        }
        *ours.entry(e.name.clone()).or_insert(0u64) += 1;
    }
    // Calls that never return (strace leaves them out of its table).
    for never in ["exit", "exit_group"] {
        ours.remove(never);
    }
    assert_eq!(ours, theirs, "ours (left) against strace -c (right)");
}

/// The events a recording lost, from its summary's `..., N dropped`: ring
/// buffers full, or runs the kernel skipped (a completion's interrupt
/// arriving while another program ran on the CPU).
fn dropped(summary: &str) -> u64 {
    summary
        .split(" dropped")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no drop count in {summary}"))
}

/// Four `dd` writing 32 MiB each with direct I/O, at once, then `sync`: the
/// device gets more than it queues at a time, and the kernel takes requests
/// back to issue them again. Recorded twice at once: every process (`-a`,
/// into `all`) and the command's processes alone (into `followed`); both
/// with the switches, to show where a CPU ran a task the kernel keeps out
/// of tracing. Returns the events each recording lost, as its summary
/// counts them.
fn record_direct_writes(all: &Path, followed: &Path) -> (u64, u64) {
    use std::io::Read;
    let dir = all.parent().unwrap();
    let categories = "kernel:block,kernel:proc,kernel:sched";
    // Ended by SIGINT below; `-d` ends it should the test fail first.
    let mut everything = Command::new(trace_cli())
        .args(["record", "-a", "-d", "120", "-c", categories, "-o"])
        .arg(all)
        .env("TRACE_MANAGER_SOCKET", dir.join("all.sock"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut all_err = std::io::BufReader::new(everything.stderr.take().unwrap());
    tests::wait_for_recording(&mut all_err);
    let script = format!(
        "for i in 1 2 3 4; do dd if=/dev/zero of={}/dd$i bs=1M count=32 oflag=direct 2>/dev/null & done; wait; sync",
        dir.display()
    );
    let output = Command::new(trace_cli())
        .args(["record", "-c", categories, "-o"])
        .arg(followed)
        .args(["--", "sh", "-c", &script])
        .env("TRACE_MANAGER_SOCKET", dir.join("followed.sock"))
        .output()
        .unwrap();
    let followed_err = String::from_utf8_lossy(&output.stderr);
    // SAFETY: kill(2) on the recorder this test started.
    unsafe { libc::kill(everything.id() as libc::pid_t, libc::SIGINT) };
    let status = everything.wait().unwrap();
    let mut rest = String::new();
    all_err.read_to_string(&mut rest).unwrap();
    assert!(output.status.success(), "{followed_err}");
    assert!(status.success(), "{rest}");
    (dropped(&rest), dropped(&followed_err))
}

/// A write request of one of the `dd`s' files: its event, the file, where
/// in the file it starts, and the bytes of the file it covers.
struct FileWrite<'a> {
    event: &'a tests::Event,
    file: u32,
    offset: u64,
    bytes: u64,
}

/// The write requests of `t` that wrote the files whose `extents` lie on
/// `disk`, each with where in its file it writes.
fn file_writes<'a>(
    t: &'a tests::Trace,
    disk: &str,
    extents: &[(u32, tests::disk::Extent)],
) -> Vec<FileWrite<'a>> {
    let mut writes = Vec::new();
    for e in t
        .events
        .iter()
        .filter(|e| e.category == "kernel:block" && e.name == "write")
    {
        let sector = match e.args.get("sector") {
            Some(ArgValue::Uint64(s)) => *s,
            other => panic!("a block request without its sector ({other:?}): {e:?}"),
        };
        let sectors = match e.args.get("sectors") {
            Some(ArgValue::Uint32(n)) => u64::from(*n),
            other => panic!("a block request without its length ({other:?}): {e:?}"),
        };
        let on_disk = matches!(
            e.args.get("dev"),
            Some(ArgValue::String(StringRef::Inline(d))) if *d == disk
        );
        let covered = sector..sector + sectors;
        let bytes: Vec<(u32, std::ops::Range<u64>)> = extents
            .iter()
            .map(|(file, x)| (*file, x.file_bytes(&covered)))
            .filter(|(_, b)| !b.is_empty())
            .collect();
        if on_disk && let Some(&(file, ref first)) = bytes.first() {
            writes.push(FileWrite {
                event: e,
                file,
                offset: first.start,
                bytes: bytes.iter().map(|(_, b)| b.end - b.start).sum(),
            });
        }
    }
    writes
}

#[test]
fn every_block_request_finishes_and_the_bytes_written_add_up() {
    require_root();
    let _one = one_at_a_time();
    let dir = temp_dir("figures-block");
    let (all_path, followed_path) = (dir.join("all.fxt"), dir.join("followed.fxt"));
    let (all_lost, followed_lost) = record_direct_writes(&all_path, &followed_path);
    let (all, followed) = (tests::parse(&all_path), tests::parse(&followed_path));
    // Where the four files lie on the disk: the requests that wrote them
    // are the `dd`s' own, whichever task the kernel issued them from (a
    // task that runs the device's queue issues what others queued, and the
    // kernel's worker issues again what it took back).
    let mut disk = String::new();
    let mut extents = Vec::new();
    for i in 1..=4 {
        let (d, e) = tests::disk::file_extents(&dir.join(format!("dd{i}")));
        disk = d;
        extents.extend(e.into_iter().map(|x| (i, x)));
    }
    let every_write = file_writes(&all, &disk, &extents);
    // Where the CPUs ran a task whose own events the kernel did not deliver.
    let untraced = tests::untraced_runs(&all);
    // `report` names the threads among them that no recorded switch ever
    // switched out (all of them when nothing was lost: a thread that showed
    // an event of its own in such a run had its switch out lost).
    let switched_out: std::collections::HashSet<u64> = all
        .switches
        .iter()
        .filter(|s| !matches!(s.args.get("inferred"), Some(ArgValue::Bool(true))))
        .map(|s| s.out_tid)
        .collect();
    let never_out: std::collections::BTreeSet<u64> = untraced
        .iter()
        .map(|r| r.tid)
        .filter(|t| !switched_out.contains(t))
        .collect();
    let report = tests::report_json(&["--section", "loss"], &[&all_path]);
    let listed: std::collections::BTreeSet<u64> = tests::report_rows(&report, "loss", "untraced")
        .iter()
        .map(|r| r["tid"].as_u64().unwrap())
        .collect();
    assert!(
        listed.is_subset(&never_out) && (all_lost > 0 || listed == never_out),
        "report's threads kept out of tracing {listed:?}, the switches' {never_out:?}"
    );
    eprintln!("threads kept out of tracing: {listed:?}");
    for (t, lost, mode) in [
        (&all, all_lost, "every process"),
        (&followed, followed_lost, "the command's"),
    ] {
        let writes = file_writes(t, &disk, &extents);
        let bytes: u64 = writes.iter().map(|w| w.bytes).sum();
        let requeued: u64 = writes
            .iter()
            .filter_map(|w| match w.event.args.get("requeued") {
                Some(ArgValue::Uint32(n)) => Some(u64::from(*n)),
                _ => None,
            })
            .sum();
        eprintln!(
            "{mode}: {} write requests, {requeued} requeues, {bytes} bytes, {lost} events lost",
            writes.len()
        );
        // Direct I/O: each write is done when its call returns, and the
        // four returned before the recording stopped. A request is left
        // unfinished only when the recording missed its completion: lost
        // (counted), or taken while the CPU ran a task the kernel keeps out
        // of tracing (not counted; the recording of every process shows
        // that CPU's run). `dd` writes 1 MiB a call, so a request was done
        // before the same file's next MiB was issued.
        let mut unexplained = Vec::new();
        for w in writes
            .iter()
            .filter(|w| w.event.args.contains_key("unfinished"))
        {
            let next_mib = ((w.offset >> 20) + 1) << 20;
            let done_by = every_write
                .iter()
                .filter(|o| o.file == w.file && o.offset >= next_mib)
                .map(|o| o.event.ts)
                .min()
                .unwrap_or(match w.event.kind {
                    trace_common::fxt::EventKind::DurationComplete { end_ts } => end_ts,
                    _ => w.event.ts,
                });
            let hidden: Vec<_> = untraced
                .iter()
                .filter(|r| r.from <= done_by && r.to >= w.event.ts)
                .collect();
            if hidden.is_empty() {
                unexplained.push((w.file, w.offset, w.event.ts, done_by, w.event));
            } else {
                eprintln!(
                    "{mode}: the completion of dd{}'s write at byte {} came while a task \
                     kept out of tracing ran: {hidden:?}",
                    w.file, w.offset
                );
            }
        }
        assert!(
            unexplained.len() as u64 <= lost,
            "{mode}: writes of dd's files that never finished, done by the time given, \
             with no CPU running an untraced task meanwhile and {lost} events lost \
             ({}): {unexplained:#?}",
            dir.display()
        );
        // Each byte the four wrote went to the device once. Under a pid
        // filter only the requests a followed task issued itself are
        // recorded (a `dd` issues its first ones; the kernel's worker most
        // of those taken back).
        if mode == "every process" {
            assert_eq!(bytes, 128 << 20, "bytes written to dd's files");
        } else {
            assert!(
                !writes.is_empty() && bytes <= 128 << 20,
                "{} requests, {bytes} bytes",
                writes.len()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
