//! Several machines on one timeline, end to end. Each "machine" is a
//! network namespace of the test's own, reached over veth pairs the test
//! makes, running a real sshd (with keys the test makes) through which
//! `trace-cli record --hosts` starts the remote recordings; each machine
//! records a cgroup of its own. The machines share this kernel and its
//! clock, so the true offset between them is zero and the offset the
//! recording estimates *is* its error; a machine whose sshd sets the test
//! offset on its clock must have that offset found again.
//!
//! - Two machines exchange 1000 TCP messages one at a time: on the merged
//!   timeline every message is received after it was sent, both ways.
//! - Each machine's processes are its own (pids in its block, named by it
//!   in the `host` column), and `trace-cli check` finds nothing wrong.
//! - A machine whose recording is killed, and one whose link is cut, end
//!   their parts with the cause said; the recording goes on and the merged
//!   file holds what each sent.
//! - A trigger that fires on one machine stops every machine.
//! - `snapshot --host` writes every machine's flight recorder at once: the
//!   merged file has each machine's window, and the windows overlap.
//! - A machine reached as a user who is not root records with that user's
//!   rights there: without access to its daemon nothing starts; with it,
//!   the daemon records for the user; a probe on a file the user cannot
//!   read fails there, which the machines reached as root may probe.

use std::collections::HashMap;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tests::cgroup::Tree;
use tests::machines::{Machines, User, ip};
use tests::{bin_dir, check, query, report_json, report_rows, trace_cli, wait_for_recording};

/// The offset the second machine's clock is given (5 ms ahead).
const INJECTED_NS: i64 = 5_000_000;

/// A cgroup tree `NAME-PID` with the cgroups `a`, `b` and `here` below it,
/// one for each machine's workload.
fn cgroups(name: &str) -> (Tree, [PathBuf; 3]) {
    let tree = Tree::new(name);
    let dirs = ["a", "b", "here"].map(|sub| tree.cgroup(sub));
    (tree, dirs)
}

/// `trace-cli check` finds nothing wrong with `file`.
fn assert_clean(file: &Path) {
    let (ok, report) = check(file);
    assert!(ok, "trace-cli check:\n{report}");
}

/// A recording, interrupted if the test ends before it does.
struct Recording(Option<Child>);

impl Drop for Recording {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            // SAFETY: kill() with a pid and a signal has no memory effects.
            unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
            let _ = c.wait();
        }
    }
}

/// Starts `trace-cli record --hosts EXTRA` of machines `a` and `b` (each
/// selecting its cgroup of `tree`) from this machine (selecting `here`), and waits
/// until every machine records.
fn start_recording(
    m: &Machines,
    tree: &Tree,
    out: &Path,
    extra: &[&str],
) -> (Recording, BufReader<std::process::ChildStderr>) {
    let cgroups = ["a", "b", "here"].map(|sub| format!("{}/{sub}", tree.name));
    let hosts = m.dir.join("hosts");
    std::fs::write(
        &hosts,
        format!(
            "# the test's machines\na {} --cgroup {}\nb {} --cgroup {}\n",
            m.addrs[0], cgroups[0], m.addrs[1], cgroups[1]
        ),
    )
    .unwrap();
    let mut recorder = m
        .cli("record", &hosts, out)
        .args(["-c", "kernel:sched,kernel:syscall", "--cgroup", &cgroups[2]])
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(recorder.stderr.take().unwrap());
    let recording = Recording(Some(recorder));
    wait_for_recording(&mut err);
    (recording, err)
}

/// Ends the recording (SIGINT) and returns everything it said.
fn stop_recording(
    mut recording: Recording,
    mut err: BufReader<std::process::ChildStderr>,
) -> String {
    let mut recorder = recording.0.take().unwrap();
    // SAFETY: kill() with a pid and a signal has no memory effects.
    unsafe { libc::kill(recorder.id() as i32, libc::SIGINT) };
    let mut log = String::new();
    err.read_to_string(&mut log).unwrap();
    assert!(recorder.wait().unwrap().success(), "{log}");
    log
}

/// The starts and ends of `tid`'s calls named `name`, in time order.
fn calls(
    rows: &[serde_json::Map<String, serde_json::Value>],
    tid: u64,
    name: &str,
) -> Vec<(u64, u64)> {
    let n = |r: &serde_json::Map<String, serde_json::Value>, k: &str| r[k].as_u64().unwrap();
    let mut out: Vec<(u64, u64)> = rows
        .iter()
        .filter(|r| n(r, "tid") == tid && r["name"] == name)
        .map(|r| (n(r, "ts"), n(r, "ts") + n(r, "dur")))
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn root_two_machines_exchange_messages_on_one_timeline_with_their_clocks_found() {
    let m = Machines::new(
        "messages",
        181,
        &[("TRACE_CLI_TEST_CLOCK_OFFSET_NS", INJECTED_NS.to_string())],
    );
    let (mut tree, [ca, cb, cl]) = cgroups("trace-test-hosts");
    tree.start_in(Some(&cl), "sleep", &["60"]);
    let out = m.dir.join("merged.fxt");
    let (recorder, err) = start_recording(&m, &tree, &out, &[]);

    const COUNT: usize = 1000;
    let listen = format!("{}:7000", m.peer_addr);
    let (mut server, server_pid, server_tid) =
        m.pingpong(1, &cb, &["serve", &listen, &COUNT.to_string()]);
    let (mut client, client_pid, client_tid) =
        m.pingpong(0, &ca, &["send", &listen, &COUNT.to_string()]);
    assert!(client.wait().unwrap().success());
    assert!(server.wait().unwrap().success());
    std::thread::sleep(Duration::from_millis(300));
    let log = stop_recording(recorder, err);
    assert!(log.contains("3 machines on one timeline"), "{log}");

    // The machines as the trace declares them, and their clocks: the true
    // offset is 0 for `a` and INJECTED_NS for `b`, so each point's estimate
    // must lie within its own bound of it.
    let machines = trace_hosts::read_machines(std::fs::File::open(&out).unwrap());
    let names: Vec<&str> = machines.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["here", "a", "b"], "{log}");
    for (machine, truth) in [(&machines[1], 0i64), (&machines[2], INJECTED_NS)] {
        assert!(machine.clock.len() >= 2, "{machine:?}");
        let mut worst_point = 0;
        for p in &machine.clock {
            let error = (p.offset_ns - truth).unsigned_abs();
            assert!(
                error <= p.bound_ns,
                "{}: {p:?} is not within its bound of {truth}",
                machine.name
            );
            worst_point = worst_point.max(error);
        }
        // The mapping the merge used, against the truth, through the
        // recording.
        let map = trace_hosts::ClockMap::new(machine.clock.clone());
        let (first, last) = (
            machine.clock[0].local_ns,
            machine.clock.last().unwrap().local_ns,
        );
        let worst = (first..=last)
            .step_by(10_000_000)
            .map(|t| map.to_local(t.wrapping_add_signed(truth)).abs_diff(t))
            .max()
            .unwrap();
        assert!(
            worst <= map.bound_ns(),
            "{}: mapped {worst} ns off",
            machine.name
        );
        eprintln!(
            "alignment of {}: mapping off by at most {:.1} µs (single points {:.1} µs) over {} points, bound {:.1} µs",
            machine.name,
            worst as f64 / 1e3,
            worst_point as f64 / 1e3,
            machine.clock.len(),
            map.bound_ns() as f64 / 1e3
        );
    }
    assert_clean(&out);

    // Each machine's processes apart, named by their machine.
    let (a_pid, b_pid) = (10_000_000 + client_pid, 20_000_000 + server_pid);
    let rows = query(
        &out,
        &format!(
            "SELECT host, pid FROM processes WHERE pid IN ({a_pid}, {b_pid}, {client_pid}, {server_pid})"
        ),
    );
    let hosts: HashMap<u64, String> = rows
        .iter()
        .map(|r| {
            (
                r["pid"].as_u64().unwrap(),
                r["host"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        hosts,
        HashMap::from([(a_pid, "a".to_owned()), (b_pid, "b".to_owned())]),
        "{rows:?}"
    );

    // The report by machine, and one machine's processes alone: their
    // system calls are the SQL tables' of that host.
    let report = report_json(&["--by", "host", "--section", "groups"], &[&out]);
    let groups = report_rows(&report, "groups", "groups");
    for host in ["a", "b"] {
        let row = groups
            .iter()
            .find(|r| r["host"] == host)
            .unwrap_or_else(|| panic!("no row of {host}: {groups:?}"));
        let calls = query(
            &out,
            &format!("SELECT count(*) AS n FROM syscalls WHERE host = '{host}'"),
        )[0]["n"]
            .as_u64()
            .unwrap();
        assert_eq!(row["syscalls"], calls, "{row}");
        let report = report_json(&["--host", host, "--section", "syscalls"], &[&out]);
        let pids: Vec<u64> = report_rows(&report, "syscalls", "by_process")
            .iter()
            .map(|r| r["pid"].as_u64().unwrap())
            .collect();
        let base = if host == "a" { 10_000_000 } else { 20_000_000 };
        assert!(
            !pids.is_empty() && pids.iter().all(|p| p / 10_000_000 == base / 10_000_000),
            "{host}: {pids:?}"
        );
    }
    let err = Command::new(trace_cli())
        .args(["report", "--host", "nowhere"])
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&err.stderr);
    assert!(
        !err.status.success()
            && text.contains("no host \"nowhere\"")
            && text.contains("here, a, b"),
        "{text}"
    );

    // Every message received after it was sent, both ways.
    let (a_tid, b_tid) = (10_000_000 + client_tid, 20_000_000 + server_tid);
    let rows = query(
        &out,
        &format!(
            "SELECT host, tid, name, ts, dur FROM syscalls \
             WHERE tid IN ({a_tid}, {b_tid}) AND name IN ('sendto', 'recvfrom')"
        ),
    );
    let (a_send, a_recv) = (
        calls(&rows, a_tid, "sendto"),
        calls(&rows, a_tid, "recvfrom"),
    );
    let (b_send, b_recv) = (
        calls(&rows, b_tid, "sendto"),
        calls(&rows, b_tid, "recvfrom"),
    );
    for list in [&a_send, &a_recv, &b_send, &b_recv] {
        assert_eq!(list.len(), COUNT, "every call recorded");
    }
    let mut slack = (u64::MAX, u64::MAX);
    for i in 0..COUNT {
        // a sends message i; b's i-th receive returns it.
        assert!(
            b_recv[i].1 > a_send[i].0,
            "message {i} a→b received before it was sent"
        );
        // b answers; a's i-th receive returns the answer.
        assert!(
            a_recv[i].1 > b_send[i].0,
            "answer {i} b→a received before it was sent"
        );
        slack.0 = slack.0.min(b_recv[i].1 - a_send[i].0);
        slack.1 = slack.1.min(a_recv[i].1 - b_send[i].0);
    }
    eprintln!(
        "{COUNT} messages each way in order; shortest send→receive {:.1} µs a→b, {:.1} µs b→a",
        slack.0 as f64 / 1e3,
        slack.1 as f64 / 1e3
    );
}

#[test]
fn root_a_machine_killed_and_one_cut_off_end_their_parts_and_the_rest_goes_on() {
    let m = Machines::new("loss", 182, &[]);
    let (mut tree, [ca, cb, cl]) = cgroups("trace-test-hosts-loss");
    for c in [&ca, &cb, &cl] {
        tree.start_in(Some(c), "sh", &["-c", "while :; do sleep 0.01; done"]);
    }
    let out = m.dir.join("merged.fxt");
    let (recorder, err) = start_recording(&m, &tree, &out, &[]);
    std::thread::sleep(Duration::from_secs(1));
    // b's recording killed; a's link cut.
    let killed: Vec<u32> = m
        .pids(1)
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| c.trim() == "trace-cli")
        })
        .collect();
    assert!(!killed.is_empty(), "b records in its namespace");
    for p in killed {
        // SAFETY: kill() with a pid and a signal has no memory effects.
        unsafe { libc::kill(p as i32, libc::SIGKILL) };
    }
    ip(&["link", "set", &m.links[0], "down"]);
    std::thread::sleep(Duration::from_secs(6));
    let log = stop_recording(recorder, err);
    assert!(log.contains("host b ended before it was asked to"), "{log}");
    assert!(log.contains("host a ended before it was asked to"), "{log}");
    assert!(log.contains("    b ended early: "), "{log}");
    assert!(
        log.contains("    a ended early: the connection was lost"),
        "{log}"
    );

    // What each machine sent before it was lost is in the merged trace,
    // and this machine's recording went on to the end.
    let machines = trace_hosts::read_machines(std::fs::File::open(&out).unwrap());
    assert_eq!(machines.len(), 3, "{log}");
    let rows = query(
        &out,
        "SELECT host, count(*) AS n, max(ts) AS last FROM context_switches GROUP BY host",
    );
    let last: HashMap<String, u64> = rows
        .iter()
        .map(|r| {
            (
                r["host"].as_str().unwrap().to_owned(),
                r["last"].as_u64().unwrap(),
            )
        })
        .collect();
    for h in ["here", "a", "b"] {
        assert!(last.contains_key(h), "{h} sent nothing: {rows:?}\n{log}");
    }
    assert!(
        last["here"] > last["b"] + 3_000_000_000,
        "this machine recorded on after b was killed: {rows:?}"
    );
    assert_clean(&out);
}

#[test]
fn root_every_machines_flight_recorder_is_written_at_once_onto_one_timeline() {
    let m = Machines::new("snapshot", 183, &[]);
    // A flight recorder on each machine: the daemons' sockets are where
    // each machine's sessions look (sshd gives them TRACE_MANAGER_SOCKET).
    let sockets = ["manager-0.sock", "manager-1.sock", "manager-local.sock"];
    let mut daemons = tests::Killed(Vec::new());
    for (k, socket) in sockets.iter().enumerate() {
        daemons.0.push(tests::start_daemon(
            &m.dir.join(socket),
            &m.dir.join(format!("daemon-{k}.log")),
            &["--flight-recorder", "-c", "kernel:sched", "--window", "10s"],
        ));
    }
    std::thread::sleep(Duration::from_secs(2));
    let hosts = m.dir.join("hosts");
    std::fs::write(&hosts, format!("a {}\nb {}\n", m.addrs[0], m.addrs[1])).unwrap();
    let out = m.dir.join("snapshot.fxt");
    let run = m.cli("snapshot", &hosts, &out).output().unwrap();
    let log = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{log}");
    assert!(log.contains("3 machines on one timeline"), "{log}");
    let machines = trace_hosts::read_machines(std::fs::File::open(&out).unwrap());
    assert_eq!(machines.len(), 3, "{log}");
    // Each machine's window is there, on its own CPUs, and they overlap.
    let rows = query(
        &out,
        "SELECT host, count(*) AS n, min(ts) AS first, max(ts) AS last FROM context_switches GROUP BY host",
    );
    let spans: HashMap<String, (u64, u64)> = rows
        .iter()
        .map(|r| {
            let n = |k: &str| r[k].as_u64().unwrap();
            (
                r["host"].as_str().unwrap().to_owned(),
                (n("first"), n("last")),
            )
        })
        .collect();
    assert_eq!(spans.len(), 3, "{rows:?}");
    let latest_first = spans.values().map(|s| s.0).max().unwrap();
    let earliest_last = spans.values().map(|s| s.1).min().unwrap();
    assert!(
        latest_first < earliest_last,
        "the windows overlap: {rows:?}"
    );
    assert_clean(&out);
}

#[test]
fn root_a_trigger_on_one_machine_stops_every_machine() {
    let m = Machines::new("trigger", 184, &[]);
    let (mut tree, [ca, cb, cl]) = cgroups("trace-test-hosts-trigger");
    for c in [&ca, &cl] {
        tree.start_in(Some(c), "sleep", &["60"]);
    }
    let out = m.dir.join("merged.fxt");
    let (mut recording, mut err) = start_recording(
        &m,
        &tree,
        &out,
        &["--trigger", "syscall:clock_nanosleep>200ms"],
    );
    // A sleep of 300 ms on machine b only.
    tree.start_in(Some(&cb), "sleep", &["0.3"]);
    let recorder = recording.0.as_mut().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = recorder.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the recording did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    recording.0 = None;
    let mut log = String::new();
    err.read_to_string(&mut log).unwrap();
    assert!(status.success(), "{log}");
    assert!(
        log.contains("trace-cli: stopped: host b: stopped by trigger"),
        "{log}"
    );
    assert!(log.contains("3 machines on one timeline"), "{log}");
    assert!(!log.contains("ended early"), "{log}");
    let rows = query(
        &out,
        "SELECT host, name FROM instants WHERE category = 'trigger'",
    );
    assert!(
        rows.iter().any(|r| r["host"] == "b"),
        "the trigger is marked on b: {rows:?}"
    );
}

#[test]
fn root_a_machine_that_cannot_be_reached_fails_the_recording_before_it_starts() {
    let mut m = Machines::new("unreachable", 185, &[]);
    let hosts = m.dir.join("hosts");
    let out = m.dir.join("never.fxt");
    let fails = |cmd: &mut Command| {
        let run = cmd
            .args(["-c", "kernel:sched", "-d", "1"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&run.stderr).into_owned();
        assert!(!run.status.success(), "{err}");
        assert!(!err.contains("trace-cli: recording"), "{err}");
        assert!(!out.exists(), "{err}");
        let left: Vec<_> = std::fs::read_dir(&m.dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(".never.fxt"))
            .collect();
        assert!(left.is_empty(), "spool files left: {left:?}");
        err
    };
    // Nothing listens on that port of machine b.
    std::fs::write(
        &hosts,
        format!("a {}\nnowhere ssh://{}:2\n", m.addrs[0], m.addrs[1]),
    )
    .unwrap();
    let err = fails(&mut m.cli("record", &hosts, &out));
    assert!(
        err.contains(&format!(
            "cannot reach host nowhere (ssh://{}:2)",
            m.addrs[1]
        )) && err.contains("Connection refused"),
        "{err}"
    );
    // No trace-cli where it is said to be.
    std::fs::write(&hosts, format!("a {}\n", m.addrs[0])).unwrap();
    m.remote_cli = PathBuf::from("/nonexistent/trace-cli");
    let err = fails(&mut m.cli("record", &hosts, &out));
    assert!(
        err.contains("cannot reach host a") && err.contains("/nonexistent/trace-cli"),
        "{err}"
    );
}

#[test]
fn root_a_machine_reached_as_another_user_records_with_that_users_rights() {
    let m = Machines::new("rights", 186, &[]);
    let user = User::create();
    // The user can run trace-cli where it is (every directory above it
    // open to others).
    let can_run = Command::new("runuser")
        .args(["-u", &user.0, "--"])
        .arg(&m.remote_cli)
        .arg("--version")
        .output()
        .unwrap();
    assert!(
        can_run.status.success(),
        "{} cannot run {}: {}",
        user.0,
        m.remote_cli.display(),
        String::from_utf8_lossy(&can_run.stderr)
    );
    // Machine b's daemon, on the socket its sessions are given, reached
    // as the user; machine a as root, with a manager of its own.
    let socket = m.dir.join("manager-1.sock");
    let daemon = tests::start_daemon(&socket, &m.dir.join("daemon-b.log"), &[]);
    let _daemon = tests::Killed(vec![daemon]);
    let hosts = m.dir.join("hosts");
    std::fs::write(
        &hosts,
        format!(
            "a {}
b {}@{}
",
            m.addrs[0], user.0, m.addrs[1]
        ),
    )
    .unwrap();
    let out = m.dir.join("trace.fxt");
    // Whether this machine said it records (the others' lines come
    // prefixed with their names).
    let started = |err: &str| err.lines().any(|l| l.starts_with("trace-cli: recording"));
    let record = |extra: &[&str]| {
        let run = m
            .cli("record", &hosts, &out)
            .args(["-c", "kernel:sched", "-d", "1"])
            .args(extra)
            .output()
            .unwrap();
        (
            run.status.success(),
            String::from_utf8_lossy(&run.stderr).into_owned(),
        )
    };

    // The daemon's socket is root's alone (no `tracing` group here): the
    // user may neither reach it nor load programs.
    let (ok, err) = record(&[]);
    assert!(!ok && !started(&err), "{err}");
    assert!(
        err.contains("host b") && err.contains("tracing"),
        "the cause, on b: {err}"
    );

    // Opened to the user, as to a member of `tracing`.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    let (ok, err) = record(&[]);
    assert!(ok, "{err}");
    let machines = trace_hosts::read_machines(std::fs::File::open(&out).unwrap());
    assert_eq!(machines.len(), 3, "{err}");
    let switches_on = |k: u32| {
        let (from, to) = (machines[k as usize].cpu_base, machines[k as usize].cpus);
        tests::parse(&out)
            .switches
            .iter()
            .filter(|s| u32::from(s.cpu) >= from && u32::from(s.cpu) < from + to)
            .count()
    };
    assert!(switches_on(2) > 0, "b recorded nothing: {err}");

    // A probe on a file only root may read: the machines reached as root
    // resolve it; on b, the user's trace-cli cannot read it (nor could
    // the daemon, which opens a client's probe files with its rights).
    let private = m.dir.join("private-program");
    tests::copy_program(bin_dir().join("tcp_pingpong"), &private);
    let probe = format!("{}:main", private.display());
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let (ok, err) = record(&["--uprobe", &probe]);
    assert!(!ok && !started(&err), "{err}");
    assert!(
        err.contains("host b (")
            && err.contains("could not start recording")
            && err.contains("Permission denied"),
        "the cause, on b: {err}"
    );
    // Readable by everyone, the same probe is the user's too.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let (ok, err) = record(&["--uprobe", &probe]);
    assert!(ok, "{err}");
}
