//! End-to-end: the daemon and `trace-cli` as a tester abused them — a user
//! the daemon's socket refuses, a damaged trace file, Follow of a process
//! that does not exist, and more providers in a session than a stop result
//! used to list.

use std::collections::HashSet;
use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use tests::{Daemon, Killed, parse, runtime, temp_dir, trace_cli};
use trace_common::controller::{Reply, Request, StartOptions, Status, TraceConfig, fail};
use trace_common::fxt::write::encode;
use trace_common::fxt::{EventKind, Record, StringRef, ThreadRef};
use trace_manager::client::Controller;

/// The user and group tests run as when they must not be root.
const NOBODY: u32 = 65534;

/// `trace-cli ARGS` with the manager socket `socket`, as `uid` (and the
/// same gid, no other group) when given.
fn cli(args: &[&str], socket: &Path, uid: Option<u32>) -> Output {
    let mut c = Command::new(trace_cli());
    c.args(args)
        .env("TRACE_MANAGER_SOCKET", socket)
        .env("RUST_LOG", "warn");
    if let Some(uid) = uid {
        // Root dropping to a user: std also drops supplementary groups.
        c.uid(uid).gid(uid);
    }
    c.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_user_the_socket_refuses_is_told_so_not_that_root_is_needed() {
    let d = Daemon::start("refused");
    let out = d.dir.join("refused.fxt");
    let socket = d.socket.display().to_string();
    let refused = |o: &Output| {
        let err = stderr(o);
        assert!(!o.status.success(), "{err}");
        assert!(
            err.contains(&format!("socket {socket} refused the connection")),
            "{err}"
        );
        assert!(err.contains("`tracing` group"), "{err}");
        assert!(!err.contains("CAP_BPF"), "{err}");
    };
    // A recording, with and without kernel categories.
    let args = ["record", "-c", "kernel:sched", "-d", "1", "-o"];
    let o = cli(
        &[&args[..], &[out.to_str().unwrap()]].concat(),
        &d.socket,
        Some(NOBODY),
    );
    refused(&o);
    let o = cli(
        &[
            "record",
            "-c",
            "app",
            "-d",
            "1",
            "-o",
            out.to_str().unwrap(),
        ],
        &d.socket,
        Some(NOBODY),
    );
    refused(&o);
    assert!(!out.exists(), "nothing recorded");
    // The providers it asks the daemon for.
    refused(&cli(&["providers"], &d.socket, Some(NOBODY)));
    // Categories: the kernel's still, and a word on what is missing.
    let o = cli(&["categories"], &d.socket, Some(NOBODY));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("kernel:sched"));
    assert!(
        stderr(&o).contains(&format!("socket {socket} refused the connection")),
        "{}",
        stderr(&o)
    );
    // Root is let in.
    let o = cli(&["providers"], &d.socket, None);
    assert!(o.status.success(), "{}", stderr(&o));

    // No daemon at all: that none runs, and what this user lacks to record
    // alone.
    let none = d.dir.join("none.sock");
    let o = cli(
        &[
            "record",
            "-c",
            "kernel:sched",
            "-d",
            "1",
            "-o",
            out.to_str().unwrap(),
        ],
        &none,
        Some(NOBODY),
    );
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("no trace-manager daemon runs"), "{err}");
    assert!(
        err.contains("root (or the CAP_BPF and CAP_PERFMON capabilities)"),
        "{err}"
    );
    assert!(!err.contains("refused the connection"), "{err}");
}

/// A small valid trace: magic, a provider, a process and an instant.
fn small_trace() -> Vec<Vec<u8>> {
    let records = [
        Record::Magic,
        Record::ProviderInfo {
            id: 1,
            name: "p".into(),
        },
        Record::Initialization {
            ticks_per_second: 1_000_000_000,
        },
        Record::Event {
            ts: 1000,
            thread: ThreadRef::Inline {
                process: 10,
                thread: 11,
            },
            category: StringRef::inline("app"),
            name: StringRef::inline("first"),
            args: Vec::new().into(),
            kind: EventKind::Instant,
        },
        Record::Event {
            ts: 2000,
            thread: ThreadRef::Inline {
                process: 10,
                thread: 11,
            },
            category: StringRef::inline("app"),
            name: StringRef::inline("second"),
            args: Vec::new().into(),
            kind: EventKind::Instant,
        },
    ];
    records
        .iter()
        .map(|r| {
            let mut b = Vec::new();
            encode(r, &mut b).unwrap();
            b
        })
        .collect()
}

#[test]
fn convert_fails_on_a_damaged_file_unless_told_to_skip_damage() {
    let dir = temp_dir("convert");
    let records = small_trace();
    let good = dir.join("good.fxt");
    std::fs::write(&good, records.concat()).unwrap();
    // A zero word (a record of size 0) between the two events.
    let mut damaged_bytes = records[..4].concat();
    damaged_bytes.extend_from_slice(&[0u8; 8]);
    damaged_bytes.extend_from_slice(&records[4]);
    let damaged = dir.join("damaged.fxt");
    std::fs::write(&damaged, damaged_bytes).unwrap();
    let json = dir.join("out.json");
    let convert = |file: &Path, extra: &[&str]| {
        let o = Command::new(trace_cli())
            .arg("convert")
            .arg(file)
            .arg("-o")
            .arg(&json)
            .args(extra)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let names: Vec<String> = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["name"].as_str().map(str::to_owned))
            .collect();
        (o, names)
    };

    let (o, names) = convert(&good, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(names.contains(&"second".to_owned()), "{names:?}");

    // Damaged: exit status 1, but every readable record is converted.
    let (o, names) = convert(&damaged, &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("skipped 1 malformed record(s)"), "{err}");
    assert!(err.contains("--skip-damage"), "{err}");
    assert!(
        names.contains(&"first".to_owned()) && names.contains(&"second".to_owned()),
        "{names:?}"
    );

    // Told to skip damage: exit status 0, the same output.
    let (o, skipped) = convert(&damaged, &["--skip-damage"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("skipped 1 malformed record(s)"));
    assert_eq!(skipped, names);

    // As `dump` does.
    let o = Command::new(trace_cli())
        .arg("dump")
        .arg(&damaged)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));

    // And as every command that reads a trace does: its answers from what
    // could be read, exit status 1 unless told to skip damage.
    let parquet = dir.join("parquet");
    let readers: [Vec<String>; 3] = [
        vec!["report".into()],
        vec!["query".into(), "SELECT count(*) FROM threads".into()],
        vec![
            "export".into(),
            "--parquet".into(),
            parquet.display().to_string(),
        ],
    ];
    for args in &readers {
        let run = |file: &Path, extra: &[&str]| {
            let mut c = Command::new(trace_cli());
            c.arg(&args[0]).arg(file).args(&args[1..]).args(extra);
            c.output().unwrap()
        };
        let o = run(&good, &[]);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let o = run(&damaged, &[]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("skipped 1 malformed record(s)"),
            "{args:?}: {err}"
        );
        assert!(err.contains("--skip-damage"), "{args:?}: {err}");
        assert!(!o.stdout.is_empty() || args[0] == "export", "{args:?}");
        let o = run(&damaged, &["--skip-damage"]);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
}

/// A process that has exited (and been reaped).
fn gone_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    c.wait().unwrap();
    c.id()
}

#[test]
fn follow_of_a_process_that_does_not_exist_is_refused() {
    let d = Daemon::start("follow");
    let file = File::create(d.dir.join("follow.fxt")).unwrap();
    let mut sleeper = Killed(vec![Command::new("sleep").arg("60").spawn().unwrap()]);
    let live = sleeper.0[0].id();
    let gone = gone_pid();
    runtime().block_on(async {
        let mut c = Controller::connect(&d.socket).unwrap();
        let config = TraceConfig {
            categories: vec!["kernel:sched".into()],
            pids: Some(vec![std::process::id()]),
            kernel_buffer_bytes: 4 << 20,
            ..TraceConfig::default()
        };
        assert_eq!(
            c.call(Request::InitializeTracing(config), Some(file.as_fd()))
                .await
                .unwrap(),
            Reply::Initialized
        );
        let refused = |reply: Reply, pid: u32| match reply {
            Reply::Failed {
                fatal: false,
                code: fail::NO_SUCH_PROCESS,
                message,
            } => assert!(
                message.contains(&format!("process {pid}")) && message.contains("no such process"),
                "{message}"
            ),
            other => panic!("Follow of {pid}: {other:?}"),
        };
        // Before tracing starts: refused, and not kept (the start would
        // fail on it).
        for pid in [gone, 0, u32::MAX] {
            refused(c.call(Request::Follow { pid }, None).await.unwrap(), pid);
        }
        assert_eq!(
            c.call(Request::StartTracing(StartOptions::default()), None)
                .await
                .unwrap(),
            Reply::StartResult(Ok(()))
        );
        // While tracing.
        refused(
            c.call(Request::Follow { pid: gone }, None).await.unwrap(),
            gone,
        );
        // A live process is followed.
        assert_eq!(
            c.call(Request::Follow { pid: live }, None).await.unwrap(),
            Reply::Followed
        );
        match c.call(Request::TerminateTracing, None).await.unwrap() {
            Reply::Terminated(_) => {}
            other => panic!("{other:?}"),
        }
    });
    drop(file);
    let t = parse(&d.dir.join("follow.fxt"));
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    assert!(
        t.process_names.contains_key(&u64::from(live)),
        "the followed process is named in the trace"
    );
    sleeper.0.clear();
}

#[test]
fn every_provider_of_a_session_is_reported() {
    const N: usize = 120;
    let d = Daemon::start("many");
    // Idle programs: a tick a second each, on a machine of two CPUs.
    let mut providers = Killed(Vec::new());
    let mut pids = HashSet::new();
    for _ in 0..N {
        let (child, pid, _) = tests::start_provider(
            env!("CARGO_BIN_EXE_tiny_provider"),
            &d.socket,
            600.0,
            1_000_000,
        );
        providers.0.push(child);
        pids.insert(pid as i32);
    }
    let path = d.dir.join("many.fxt");
    let file = File::create(&path).unwrap();
    runtime().block_on(async {
        let mut c = Controller::connect(&d.socket).unwrap();
        let config = TraceConfig {
            categories: vec!["app".into()],
            buffer_size_megabytes_hint: 1,
            start_timeout_milliseconds: 30_000,
            ..TraceConfig::default()
        };
        assert_eq!(
            c.call(Request::InitializeTracing(config), Some(file.as_fd()))
                .await
                .unwrap(),
            Reply::Initialized
        );
        // Providers that register during the session are initialized at
        // once: wait until all of them are in it.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match c.call(Request::GetStatus, None).await.unwrap() {
                Reply::Status(Status { providers, .. }) if providers as usize == N => break,
                Reply::Status(s) => {
                    assert!(
                        Instant::now() < deadline,
                        "{} of {N} providers",
                        s.providers
                    )
                }
                other => panic!("{other:?}"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(
            c.call(Request::StartTracing(StartOptions::default()), None)
                .await
                .unwrap(),
            Reply::StartResult(Ok(()))
        );
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let check = |r: &trace_common::controller::StopResult| {
            assert_eq!(r.providers_total as usize, N);
            assert_eq!(r.provider_stats.len(), N);
            let got: HashSet<i32> = r.provider_stats.iter().map(|s| s.pid).collect();
            assert_eq!(got, pids);
            assert!(r.provider_stats.iter().all(|s| s.started), "{r:?}");
        };
        match c
            .call(
                Request::StopTracing {
                    write_results: true,
                },
                None,
            )
            .await
            .unwrap()
        {
            Reply::StopResult(Ok(r)) => check(&r),
            other => panic!("{other:?}"),
        }
        match c.call(Request::TerminateTracing, None).await.unwrap() {
            Reply::Terminated(r) => check(&r),
            other => panic!("{other:?}"),
        }
    });
    drop(file);
    let t = parse(&path);
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    let ticking: HashSet<i32> = t
        .events
        .iter()
        .filter(|e| e.name == "tick")
        .map(|e| e.pid as i32)
        .collect();
    assert_eq!(ticking, pids, "every provider's records are in the trace");

    // trace-cli's summary counts them all.
    let out = d.dir.join("many-cli.fxt");
    let o = cli(
        &[
            "record",
            "-c",
            "app",
            "-d",
            "1",
            "--provider-buffer-size",
            "1",
            "-o",
            out.to_str().unwrap(),
        ],
        &d.socket,
        None,
    );
    let err = stderr(&o);
    assert!(o.status.success(), "{err}\n{}", d.log());
    assert!(err.contains(&format!("{N} userspace providers")), "{err}");
}

/// How long `trace-cli sessions` took at most, run again and again while
/// `busy` says the daemon has something slow to do.
fn slowest_answer(socket: &Path, mut busy: impl FnMut() -> bool) -> (Duration, usize) {
    let mut slowest = Duration::ZERO;
    let mut asked = 0;
    while busy() {
        let start = Instant::now();
        let out = cli(&["sessions"], socket, None);
        slowest = slowest.max(start.elapsed());
        asked += 1;
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("flight"),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    (slowest, asked)
}

/// Resolving probes and attaching or detaching hundreds of them happens off
/// the daemon's loop: while an outsider's session resolves 64 probes in its
/// own process named 1 024 times, and while a recording of the 350-odd
/// `syscalls:sys_enter_*` tracepoints attaches them and then detaches them
/// (the kernel takes tens of milliseconds for each here), another
/// client's `sessions` is answered within a second each time, beside the
/// flight recorder; both recordings succeed and their files pass `check`.
#[test]
fn slow_setups_leave_the_daemon_answering_others() {
    let d = Daemon::start_with(
        "slow-setups",
        &["--flight-recorder", "-c", "kernel:sched", "--window", "5s"],
    );
    make_public(&d);
    let python = Command::new("/usr/bin/python3")
        .args(["-c", "import time; time.sleep(120)"])
        .uid(NOBODY)
        .gid(NOBODY)
        .spawn()
        .unwrap();
    let pid = python.id().to_string();
    let _python = Killed(vec![python]);
    std::thread::sleep(Duration::from_millis(300));
    let pids = vec![pid.as_str(); 1024].join(",");
    let probes = d.dir.join("probes.fxt");
    let mut args: Vec<&str> = vec!["record", "-p", &pids, "-c", "kernel:sched", "-d", "1"];
    for _ in 0..64 {
        args.extend(["--uprobe", "PyObject_Malloc"]);
    }
    args.extend(["-o", probes.to_str().unwrap()]);
    let recorder = as_nobody(&args, &d.socket);
    let (slowest, asked) = answers_while(&d.socket, recorder, &probes);
    eprintln!("64 probes x 1 024 pids: {asked} answers, the slowest in {slowest:?}");
    assert!(slowest < Duration::from_secs(1), "{slowest:?}\n{}", d.log());

    let all = d.dir.join("syscalls.fxt");
    let recorder = as_nobody(
        &[
            "record",
            "-c",
            "none",
            "-e",
            "syscalls:sys_enter_*",
            "-d",
            "1",
            "-o",
            all.to_str().unwrap(),
        ],
        &d.socket,
    );
    let (slowest, asked) = answers_while(&d.socket, recorder, &all);
    eprintln!("every syscalls:sys_enter_* tracepoint: {asked} answers, the slowest in {slowest:?}");
    assert!(slowest < Duration::from_secs(1), "{slowest:?}\n{}", d.log());
    // Its hundreds of tracepoints are still being detached: the daemon
    // answers meanwhile too.
    let until = Instant::now() + Duration::from_secs(5);
    let (slowest, _) = slowest_answer(&d.socket, || Instant::now() < until);
    assert!(slowest < Duration::from_secs(1), "{slowest:?}\n{}", d.log());
}

/// Lets anyone connect to the daemon's socket and write into its directory,
/// as members of `tracing` may.
fn make_public(d: &Daemon) {
    use std::os::unix::fs::PermissionsExt;
    for (path, mode) in [(&d.socket, 0o666), (&d.dir, 0o777)] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// `trace-cli ARGS` as nobody on `socket`, started.
fn as_nobody(args: &[&str], socket: &Path) -> std::process::Child {
    Command::new(trace_cli())
        .args(args)
        .env("TRACE_MANAGER_SOCKET", socket)
        .env("RUST_LOG", "warn")
        .uid(NOBODY)
        .gid(NOBODY)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// The slowest of the answers to `sessions` while `recorder` runs; the
/// recording must succeed and its file `out` pass `check`.
fn answers_while(
    socket: &Path,
    mut recorder: std::process::Child,
    out: &Path,
) -> (Duration, usize) {
    let answers = slowest_answer(socket, || recorder.try_wait().unwrap().is_none());
    let done = recorder.wait_with_output().unwrap();
    assert!(done.status.success(), "{}", stderr(&done));
    let (ok, report) = tests::check(out);
    assert!(ok, "{report}");
    answers
}
