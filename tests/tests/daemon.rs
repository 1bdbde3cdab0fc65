//! End-to-end: the `trace-manager` daemon, the controller protocol and
//! sessions.
//!
//! A real daemon on a socket of each test's own, real providers (the Rust
//! and C example programs, and hand-written hostile ones), `trace-cli` and
//! a scripted client speaking the protocol.

use std::fs::File;
use std::io::{BufReader, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tests::{Daemon, Trace, boottime_ns, parse, parse_bytes, pipe, runtime, trace_cli};
use trace_common::controller::{
    ProviderInfo, Reply, Request, SessionState, StartError, StartOptions, StopError, TraceConfig,
    fail,
};
use trace_common::fxt::ArgValue;
use trace_common::provider::{BufferDisposition, BufferingMode};
use trace_manager::client::Controller;

/// Waits until `n` providers are registered with `d`; returns them.
fn wait_providers(d: &Daemon, n: usize) -> Vec<ProviderInfo> {
    let rt = runtime();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let list = rt.block_on(async {
            let mut c = Controller::connect(&d.socket).unwrap();
            match c.call(Request::GetProviders, None).await.unwrap() {
                Reply::Providers(p) => p,
                other => panic!("{other:?}"),
            }
        });
        if list.len() >= n {
            return list;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {n} providers registered: {list:?}",
            list.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A provider program on `socket`, killed on drop.
struct App {
    child: Child,
    pid: u64,
}

impl App {
    /// `program SECONDS INTERVAL_US` (provider_app or its C twin), once it
    /// printed its pid.
    fn start(program: &str, socket: &Path, secs: f64, interval_us: u64) -> App {
        let (child, pid, _) = tests::start_provider(program, socket, secs, interval_us);
        App { child, pid }
    }

    fn rust(socket: &Path, secs: f64, interval_us: u64) -> App {
        App::start(
            env!("CARGO_BIN_EXE_provider_app"),
            socket,
            secs,
            interval_us,
        )
    }

    fn c(socket: &Path, secs: f64, interval_us: u64) -> App {
        App::start(
            env!("CARGO_BIN_EXE_provider_app_c"),
            socket,
            secs,
            interval_us,
        )
    }

    /// A hand-written provider (`garbage_provider MODE`).
    fn hostile(socket: &Path, mode: &str) -> App {
        let child = Command::new(env!("CARGO_BIN_EXE_garbage_provider"))
            .arg(mode)
            .env("TRACE_MANAGER_SOCKET", socket)
            .spawn()
            .unwrap();
        let pid = u64::from(child.id());
        App { child, pid }
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `app` events of process `pid`, by name.
fn app_events<'t>(t: &'t Trace, pid: u64, name: &str) -> Vec<&'t tests::Event> {
    t.events
        .iter()
        .filter(|e| e.pid == pid && e.category == "app" && e.name == name)
        .collect()
}

fn seq(e: &tests::Event) -> u64 {
    match e.args.get("seq") {
        Some(ArgValue::Uint64(v)) => *v,
        other => panic!("seq argument missing: {other:?}"),
    }
}

fn run_ok(mut c: Command) -> String {
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    err
}

#[test]
fn providers_stay_registered_across_sessions_and_join_a_running_one() {
    let d = Daemon::start("across");
    let a = App::rust(&d.socket, 60.0, 2000);
    let b = App::c(&d.socket, 60.0, 2000);
    let listed = wait_providers(&d, 2);
    assert!(listed.iter().all(|p| p.state == "registered"), "{listed:?}");

    // `trace-cli providers` asks the daemon.
    let out = Command::new(trace_cli())
        .arg("providers")
        .env("TRACE_MANAGER_SOCKET", &d.socket)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for pid in [a.pid, b.pid] {
        assert!(text.contains(&pid.to_string()), "{text}");
    }
    // Categories: the kernel's, and those the Rust provider declared.
    let out = Command::new(trace_cli())
        .arg("categories")
        .env("TRACE_MANAGER_SOCKET", &d.socket)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("kernel:sched"), "{text}");
    assert!(
        text.contains("providers declared") && text.lines().any(|l| l.trim() == "app"),
        "{text}"
    );

    for round in 0..2 {
        let file = d.dir.join(format!("round{round}.fxt"));
        let err = run_ok(d.record(&file, &["-c", "kernel:sched,app", "-d", "1"]));
        assert!(err.contains("2 userspace providers"), "{err}");
        let t = parse(&file);
        assert!(t.errors.is_empty(), "{:?}", t.errors);
        assert!(!t.switches.is_empty(), "kernel events in round {round}");
        for pid in [a.pid, b.pid] {
            assert!(
                !app_events(&t, pid, "tick").is_empty(),
                "round {round}: no events of {pid}"
            );
        }
    }
    // Both went back to idle between sessions.
    let listed = wait_providers(&d, 2);
    assert!(listed.iter().all(|p| p.state == "registered"), "{listed:?}");

    // A provider that registers while a session runs is started at once.
    let file = d.dir.join("late.fxt");
    let mut rec = d
        .record(&file, &["-c", "app", "-d", "3"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(rec.stderr.take().unwrap());
    tests::wait_for_recording(&mut stderr);
    let late = App::c(&d.socket, 60.0, 2000);
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert!(rec.wait().unwrap().success(), "{rest}");
    assert!(rest.contains("3 userspace providers"), "{rest}");
    let t = parse(&file);
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    for pid in [a.pid, b.pid, late.pid] {
        assert!(
            !app_events(&t, pid, "tick").is_empty(),
            "no events of {pid}"
        );
    }
}

/// Sends `req` and returns its reply.
async fn call(c: &mut Controller, req: Request) -> Reply {
    c.call(req, None).await.unwrap()
}

/// StopTracing's reply.
async fn stop_tracing(c: &mut Controller, write_results: bool) -> Reply {
    call(c, Request::StopTracing { write_results }).await
}

#[test]
fn a_scripted_client_walks_every_state_and_every_error() {
    let d = Daemon::start("states");
    let silent = App::hostile(&d.socket, "silent");
    wait_providers(&d, 1);
    runtime().block_on(async {
        let mut c = Controller::connect(&d.socket).unwrap();
        assert_eq!(
            call(&mut c, Request::StartTracing(StartOptions::default())).await,
            Reply::StartResult(Err(StartError::NotInitialized))
        );
        assert_eq!(
            stop_tracing(&mut c, true).await,
            Reply::StopResult(Err(StopError::NotInitialized))
        );
        assert!(matches!(
            call(&mut c, Request::GetStatus).await,
            Reply::Status(s) if s.state == Some(SessionState::Ready)
        ));

        let file = File::create(d.dir.join("states.fxt")).unwrap();
        let config = TraceConfig {
            categories: vec!["kernel:sched".into()],
            start_timeout_milliseconds: 300,
            ..TraceConfig::default()
        };
        let r = c
            .call(
                Request::InitializeTracing(config.clone()),
                Some(file.as_fd()),
            )
            .await
            .unwrap();
        assert_eq!(r, Reply::Initialized);
        assert_eq!(c.take_states(), [SessionState::Initialized]);

        // One session at a time.
        let mut other = Controller::connect(&d.socket).unwrap();
        match other
            .call(
                Request::InitializeTracing(config.clone()),
                Some(file.as_fd()),
            )
            .await
            .unwrap()
        {
            Reply::Failed {
                fatal: false,
                code: fail::SESSION_ACTIVE,
                message,
            } => assert!(message.contains("already active"), "{message}"),
            other => panic!("{other:?}"),
        }

        assert_eq!(
            stop_tracing(&mut c, true).await,
            Reply::StopResult(Err(StopError::NotStarted))
        );
        // The silent provider never answers: the start is acknowledged
        // after the start timeout.
        assert_eq!(
            call(&mut c, Request::StartTracing(StartOptions::default())).await,
            Reply::StartResult(Ok(()))
        );
        assert_eq!(
            c.take_states(),
            [SessionState::Starting, SessionState::Started]
        );
        assert_eq!(
            call(&mut c, Request::StartTracing(StartOptions::default())).await,
            Reply::StartResult(Err(StartError::AlreadyStarted))
        );
        tokio::time::sleep(Duration::from_millis(300)).await;

        // The silent provider keeps the stop waiting: a start meanwhile is
        // refused.
        let stop = c
            .send(
                Request::StopTracing {
                    write_results: true,
                },
                None,
            )
            .unwrap();
        let start = c
            .send(Request::StartTracing(StartOptions::default()), None)
            .unwrap();
        assert_eq!(
            c.wait(start).await.unwrap(),
            Reply::StartResult(Err(StartError::Stopping))
        );
        let Reply::StopResult(Ok(result)) = c.wait(stop).await.unwrap() else {
            panic!("the stop failed");
        };
        assert_eq!(
            c.take_states(),
            [SessionState::Stopping, SessionState::Stopped]
        );
        let kernel = &result.provider_stats[0];
        assert_eq!(kernel.name, "kernel");
        assert!(result.kernel.events > 0);
        let s = result
            .provider_stats
            .iter()
            .find(|p| p.pid as u64 == silent.pid)
            .expect("the silent provider's stats");
        assert!(!s.started, "{s:?}");
        assert_eq!(
            stop_tracing(&mut c, true).await,
            Reply::StopResult(Err(StopError::NotStarted))
        );
        let Reply::Terminated(end) = call(&mut c, Request::TerminateTracing).await else {
            panic!("terminate failed");
        };
        assert_eq!(
            c.take_states(),
            [SessionState::Terminating, SessionState::Ready]
        );
        let t = parse(&d.dir.join("states.fxt"));
        assert!(t.errors.is_empty(), "{:?}", t.errors);
        assert_eq!(t.records as u64, end.records);
        assert!(!t.switches.is_empty());
        drop(silent);
        // Once it is gone, nothing keeps the next stop waiting.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !matches!(call(&mut c, Request::GetProviders).await, Reply::Providers(p) if p.is_empty())
        {
            assert!(Instant::now() < deadline, "the silent provider stayed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        // TERMINATING lasts until the output is written out: a pipe nobody
        // reads holds it there.
        let (read, write) = pipe();
        // SAFETY: fcntl on a descriptor we own.
        unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, 4096) };
        assert_eq!(
            c.call(
                Request::InitializeTracing(config.clone()),
                Some(write.as_fd())
            )
            .await
            .unwrap(),
            Reply::Initialized
        );
        drop(write);
        assert_eq!(
            call(&mut c, Request::StartTracing(StartOptions::default())).await,
            Reply::StartResult(Ok(()))
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let terminate = c.send(Request::TerminateTracing, None).unwrap();
        assert_eq!(
            call(&mut c, Request::StartTracing(StartOptions::default())).await,
            Reply::StartResult(Err(StartError::Terminating))
        );
        assert!(matches!(
            call(&mut c, Request::TerminateTracing).await,
            Reply::Failed { fatal: false, message, .. } if message.contains("already being terminated")
        ));
        assert_eq!(
            stop_tracing(&mut c, true).await,
            Reply::StopResult(Err(StopError::NotStarted))
        );
        let reader = std::thread::spawn(move || {
            let mut data = Vec::new();
            File::from(read).read_to_end(&mut data).unwrap();
            data
        });
        assert!(matches!(
            c.wait(terminate).await.unwrap(),
            Reply::Terminated(_)
        ));
        let t = parse_bytes(&reader.join().unwrap());
        assert!(t.errors.is_empty(), "{:?}", t.errors);
        assert!(t.starts_with_magic);
        c.take_states();

        // A failing output aborts the session: its stop says so.
        let (read, write) = pipe();
        drop(read);
        assert_eq!(
            c.call(Request::InitializeTracing(config), Some(write.as_fd()))
                .await
                .unwrap(),
            Reply::Initialized
        );
        assert_eq!(
            call(&mut c, Request::StartTracing(StartOptions::default())).await,
            Reply::StartResult(Ok(()))
        );
        tokio::time::sleep(Duration::from_millis(800)).await;
        assert_eq!(
            stop_tracing(&mut c, true).await,
            Reply::StopResult(Err(StopError::Aborted))
        );
        // The owner was told when it happened, with the system's error.
        let early = c.take_early();
        assert!(
            early.iter().any(|m| m.txid == 0
                && matches!(&m.body, Reply::Failed { fatal: false, code: fail::ABORTED, message }
                    if message.contains("Broken pipe (os error 32)"))),
            "{early:?}"
        );
        assert!(matches!(
            call(&mut c, Request::TerminateTracing).await,
            Reply::Failed { fatal: false, code: fail::ABORTED, message, .. }
                if message.contains("Broken pipe (os error 32)")
        ));
        assert!(matches!(
            call(&mut c, Request::GetStatus).await,
            Reply::Status(s) if s.state == Some(SessionState::Ready)
        ));
        // Out of order: terminating what does not exist closes the
        // connection.
        assert!(matches!(
            call(&mut c, Request::TerminateTracing).await,
            Reply::Failed {
                fatal: true,
                code: fail::OUT_OF_ORDER,
                ..
            }
        ));
        assert!(c.recv().await.is_err(), "the connection is closed");
    });
    assert!(d.log().contains("session state READY"), "{}", d.log());
}

#[test]
fn alerts_and_watchers_are_queued_and_paired_in_order() {
    let d = Daemon::start("alerts");
    let _alerts = App::hostile(&d.socket, "alerts");
    wait_providers(&d, 1);
    runtime().block_on(async {
        let mut c = Controller::connect(&d.socket).unwrap();
        let file = File::create(d.dir.join("alerts.fxt")).unwrap();
        let config = TraceConfig {
            categories: vec!["app".into()],
            ..TraceConfig::default()
        };
        assert_eq!(
            c.call(Request::InitializeTracing(config), Some(file.as_fd()))
                .await
                .unwrap(),
            Reply::Initialized
        );
        // Watchers first: answered in order as the alerts come.
        let w1 = c.send(Request::WatchAlert, None).unwrap();
        let w2 = c.send(Request::WatchAlert, None).unwrap();
        assert_eq!(
            call(&mut c, Request::StartTracing(StartOptions::default())).await,
            Reply::StartResult(Ok(()))
        );
        assert_eq!(
            c.wait(w1).await.unwrap(),
            Reply::Alert {
                name: "first".into(),
                provider: "garbage-alerts".into()
            }
        );
        assert_eq!(
            c.wait(w2).await.unwrap(),
            Reply::Alert {
                name: "second".into(),
                provider: "garbage-alerts".into()
            }
        );
        // Alerts first: kept until asked for, in order.
        assert!(matches!(
            stop_tracing(&mut c, false).await,
            Reply::StopResult(Ok(_))
        ));
        assert_eq!(
            call(&mut c, Request::StartTracing(StartOptions::default())).await,
            Reply::StartResult(Ok(()))
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        for name in ["first", "second"] {
            assert_eq!(
                call(&mut c, Request::WatchAlert).await,
                Reply::Alert {
                    name: name.into(),
                    provider: "garbage-alerts".into()
                }
            );
        }
        // A watcher still waiting when the session ends is told so.
        let w3 = c.send(Request::WatchAlert, None).unwrap();
        assert!(matches!(
            call(&mut c, Request::TerminateTracing).await,
            Reply::Terminated(_)
        ));
        assert!(matches!(
            c.wait(w3).await.unwrap(),
            Reply::Failed { fatal: false, message, .. } if message.contains("session ended")
        ));
    });
}

#[test]
fn start_stop_cycles_follow_the_buffer_dispositions() {
    let d = Daemon::start("cycles");
    let app = App::rust(&d.socket, 60.0, 1000);
    wait_providers(&d, 1);
    let path = d.dir.join("cycles.fxt");
    let mut windows = Vec::new();
    runtime().block_on(async {
        let mut c = Controller::connect(&d.socket).unwrap();
        let file = File::create(&path).unwrap();
        let config = TraceConfig {
            categories: vec!["app".into()],
            buffering_mode: BufferingMode::Oneshot,
            ..TraceConfig::default()
        };
        assert_eq!(
            c.call(Request::InitializeTracing(config), Some(file.as_fd()))
                .await
                .unwrap(),
            Reply::Initialized
        );
        use BufferDisposition::{ClearEntire, Retain};
        // (disposition of the start, whether the stop writes the results)
        for (round, (disposition, write)) in [
            (ClearEntire, false),
            (Retain, true),
            (ClearEntire, false),
            (ClearEntire, true),
        ]
        .into_iter()
        .enumerate()
        {
            // Too many additional categories: the extras are discarded, the
            // start goes ahead.
            let additional = if round == 0 {
                (0..150).map(|i| format!("extra{i}")).collect()
            } else {
                Vec::new()
            };
            let t0 = boottime_ns();
            assert_eq!(
                call(
                    &mut c,
                    Request::StartTracing(StartOptions {
                        buffer_disposition: disposition,
                        additional_categories: additional,
                    })
                )
                .await,
                Reply::StartResult(Ok(()))
            );
            tokio::time::sleep(Duration::from_millis(400)).await;
            // The live status shows the provider's buffer filling.
            match call(&mut c, Request::GetStatus).await {
                Reply::Status(s) => {
                    assert_eq!(s.state, Some(SessionState::Started));
                    assert_eq!(s.providers, 1);
                    let p = &s.provider_progress[0];
                    assert_eq!(p.name, "provider-app");
                    assert!(p.fill_permille > 0, "{p:?}");
                }
                other => panic!("{other:?}"),
            }
            let stop = stop_tracing(&mut c, write).await;
            assert!(matches!(stop, Reply::StopResult(Ok(_))), "{stop:?}");
            windows.push((t0, boottime_ns()));
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        assert!(matches!(
            call(&mut c, Request::TerminateTracing).await,
            Reply::Terminated(_)
        ));
    });
    assert!(
        d.log()
            .contains("51 additional categories past the limit of 100 discarded"),
        "{}",
        d.log()
    );
    let t = parse(&path);
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    let ticks = app_events(&t, app.pid, "tick");
    let inside = |w: (u64, u64)| ticks.iter().filter(|e| e.ts >= w.0 && e.ts <= w.1).count();
    // The first window was retained by the second start and written by its
    // stop; the third was cleared by the fourth start.
    assert!(
        inside(windows[0]) > 10,
        "first window: {}",
        inside(windows[0])
    );
    assert!(inside(windows[1]) > 10, "second window");
    assert_eq!(inside(windows[2]), 0, "third window was cleared");
    assert!(inside(windows[3]) > 10, "fourth window");
    // Nothing between the windows, and nothing twice.
    let covered: usize = windows.iter().map(|&w| inside(w)).sum();
    assert_eq!(covered, ticks.len(), "events outside the windows");
    let mut seqs: Vec<u64> = ticks
        .iter()
        .filter(|e| e.tid == ticks[0].tid)
        .map(|e| seq(e))
        .collect();
    let n = seqs.len();
    seqs.dedup();
    assert_eq!(seqs.len(), n, "an event written twice");
}

#[test]
fn an_unresponsive_provider_does_not_hold_up_the_start() {
    let d = Daemon::start("timeout");
    let _silent = App::hostile(&d.socket, "silent");
    let app = App::rust(&d.socket, 60.0, 1000);
    wait_providers(&d, 2);
    let file = d.dir.join("timeout.fxt");
    let err = run_ok(d.record(&file, &["-c", "app", "-d", "1", "--start-timeout", "0.5"]));
    assert!(err.contains("1 did not start in time"), "{err}");
    assert!(d.log().contains("did not start in time"), "{}", d.log());
    let t = parse(&file);
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    // The other provider's data is complete: no sequence number missing.
    let ticks = app_events(&t, app.pid, "tick");
    let main = ticks.first().expect("the app's events").tid;
    let seqs: Vec<u64> = ticks
        .iter()
        .filter(|e| e.tid == main)
        .map(|e| seq(e))
        .collect();
    assert!(seqs.len() > 100, "{}", seqs.len());
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "a gap in {seqs:?}"
    );
}

#[test]
fn a_killed_client_returns_the_manager_to_ready() {
    let d = Daemon::start("killed");
    let app = App::rust(&d.socket, 60.0, 2000);
    wait_providers(&d, 1);
    let mut rec = d
        .record(&d.dir.join("killed.fxt"), &["-c", "kernel:sched,app"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(rec.stderr.take().unwrap());
    tests::wait_for_recording(&mut stderr);
    // Meanwhile a second recording is refused, clearly.
    let busy = Command::new(trace_cli())
        .args(["record", "-c", "app", "-d", "1", "-o"])
        .arg(d.dir.join("busy.fxt"))
        .env("TRACE_MANAGER_SOCKET", &d.socket)
        .output()
        .unwrap();
    assert!(!busy.status.success());
    let busy = String::from_utf8_lossy(&busy.stderr);
    assert!(busy.contains("session is already active"), "{busy}");
    // Others may look at the session's state, not more.
    runtime().block_on(async {
        let mut c = Controller::connect(&d.socket).unwrap();
        match call(&mut c, Request::GetStatus).await {
            Reply::Status(s) => {
                assert_eq!(s.state, Some(SessionState::Started));
                assert_eq!(s.bytes, 0);
            }
            other => panic!("{other:?}"),
        }
    });
    // A client sending garbage is cut off; the session goes on.
    runtime().block_on(async {
        let mut g = Controller::connect(&d.socket).unwrap();
        let mut bytes = trace_common::controller::Envelope {
            txid: 1,
            body: Request::GetProviders,
        }
        .encode()
        .unwrap();
        // A version this manager does not speak: the answer says which
        // each side speaks.
        let ours = trace_common::controller::VERSION;
        let mut future = bytes.clone();
        future[4..6].copy_from_slice(&(ours + 1).to_le_bytes());
        let mut h = Controller::connect(&d.socket).unwrap();
        h.send_raw(&future, None).unwrap();
        match h.recv().await.unwrap().body {
            Reply::Failed {
                fatal: true,
                code: fail::MALFORMED,
                message,
            } => assert!(
                message.contains(&format!("speaks controller protocol version {ours}"))
                    && message.contains(&format!("the client version {}", ours + 1)),
                "{message}"
            ),
            other => panic!("{other:?}"),
        }
        // An older client is answered in its own version, which it reads.
        let mut old = bytes.clone();
        old[4..6].copy_from_slice(&(ours - 1).to_le_bytes());
        let mut h = Controller::connect(&d.socket).unwrap();
        h.send_raw(&old, None).unwrap();
        match h.recv().await {
            Err(trace_manager::client::ClientError::Version { manager }) => {
                assert_eq!(manager, ours - 1)
            }
            other => panic!("{other:?}"),
        }
        bytes.extend_from_slice(b"trailing garbage");
        g.send_raw(&bytes, None).unwrap();
        assert!(matches!(
            g.recv().await.unwrap().body,
            Reply::Failed {
                fatal: true,
                code: fail::MALFORMED,
                ..
            }
        ));
        assert!(g.recv().await.is_err(), "the connection is closed");
    });
    assert!(rec.try_wait().unwrap().is_none(), "the recording goes on");

    rec.kill().unwrap();
    rec.wait().unwrap();
    let rt = runtime();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ready = rt.block_on(async {
            let mut c = Controller::connect(&d.socket).unwrap();
            matches!(
                call(&mut c, Request::GetStatus).await,
                Reply::Status(s) if s.state == Some(SessionState::Ready)
            )
        });
        if ready {
            break;
        }
        assert!(Instant::now() < deadline, "the manager stayed busy");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(d.log().contains("aborting the session"), "{}", d.log());
    let file = d.dir.join("after.fxt");
    run_ok(d.record(&file, &["-c", "kernel:sched,app", "-d", "1"]));
    let t = parse(&file);
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    assert!(!app_events(&t, app.pid, "tick").is_empty());
    assert!(!t.switches.is_empty());
}

#[test]
fn deferred_transfer_holds_the_trace_until_the_end() {
    let d = Daemon::start("defer");
    let _app = App::rust(&d.socket, 60.0, 1000);
    wait_providers(&d, 1);
    for defer in [false, true] {
        let mut args = vec![
            "-c",
            "kernel:sched,app",
            "-d",
            "3",
            "--buffering-mode",
            "streaming",
        ];
        if defer {
            args.push("--defer-transfer");
        }
        let mut rec = d
            .record(Path::new("-"), &args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(rec.stderr.take().unwrap());
        tests::wait_for_recording(&mut stderr);
        let stdout = rec.stdout.take().unwrap();
        // SAFETY: fcntl on the pipe we own.
        unsafe { libc::fcntl(stdout.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        std::thread::sleep(Duration::from_secs(1));
        let mut stdout = File::from(OwnedFd::from(stdout));
        let mut early = vec![0u8; 1 << 20];
        let got = match stdout.read(&mut early) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
            Err(e) => panic!("{e}"),
        };
        if defer {
            assert_eq!(got, 0, "deferred: nothing before the end");
        } else {
            assert!(got > 0, "streaming: records flow while recording");
        }
        let mut data = early[..got].to_vec();
        // SAFETY: fcntl on the pipe we own.
        unsafe { libc::fcntl(stdout.as_raw_fd(), libc::F_SETFL, 0) };
        stdout.read_to_end(&mut data).unwrap();
        assert!(rec.wait().unwrap().success());
        let t = parse_bytes(&data);
        assert!(t.errors.is_empty(), "{:?}", t.errors);
        assert!(!t.switches.is_empty());
        assert!(t.events.iter().any(|e| e.category == "app"));
    }
}

#[test]
fn streaming_to_stdout_for_thirty_seconds_loses_nothing() {
    let d = Daemon::start("stream30");
    let app = App::rust(&d.socket, 120.0, 500);
    wait_providers(&d, 1);
    let mut rec = d
        .record(
            Path::new("-"),
            &[
                "-c",
                "kernel:sched,app",
                "-d",
                "30",
                "--buffering-mode",
                "streaming",
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = rec.stdout.take().unwrap();
    let started = Instant::now();
    let reader = std::thread::spawn(move || {
        let mut data = Vec::new();
        let mut first = None;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = stdout.read(&mut buf).unwrap();
            if n == 0 {
                return (data, first);
            }
            first.get_or_insert_with(Instant::now);
            data.extend_from_slice(&buf[..n]);
        }
    });
    let mut err = String::new();
    rec.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(rec.wait().unwrap().success(), "{err}");
    let (data, first) = reader.join().unwrap();
    // Records flowed long before the end.
    assert!(
        first.expect("some output") - started < Duration::from_secs(20),
        "{err}"
    );
    let t = parse_bytes(&data);
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    assert!(t.starts_with_magic);
    assert!(tests::no_ring_drops(&err), "{err}");
    assert!(err.contains(" records, 0 dropped)"), "{err}");
    let ticks = app_events(&t, app.pid, "tick");
    let main = ticks.first().expect("the app's events").tid;
    let seqs: Vec<u64> = ticks
        .iter()
        .filter(|e| e.tid == main)
        .map(|e| seq(e))
        .collect();
    assert!(seqs.len() > 10_000, "{}", seqs.len());
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "userspace records lost"
    );
    assert!(t.switches.len() > 1000);
}

#[test]
fn a_command_recorded_through_the_daemon_is_followed_from_its_start() {
    let d = Daemon::start("command");
    let file = d.dir.join("command.fxt");
    let out = d
        .record(
            &file,
            &[
                "-c",
                "kernel:syscall,kernel:proc",
                "--",
                "sh",
                "-c",
                "echo pid=$$; exec /bin/sleep 0.2",
            ],
        )
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        d.log().contains("session state STARTED"),
        "not through the daemon"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let pid: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("pid="))
        .unwrap_or_else(|| panic!("{text}"))
        .trim()
        .parse()
        .unwrap();
    let t = parse(&file);
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    let calls: Vec<_> = t
        .events
        .iter()
        .filter(|e| e.category == "kernel:syscall")
        .collect();
    // The command's own calls from its first (the shell's execve of
    // itself is already followed), nobody else's.
    assert!(calls.iter().any(|e| e.pid == pid && e.name == "execve"));
    assert!(
        calls.iter().all(|e| e.pid == pid),
        "another process's calls"
    );
    assert!(
        t.process_names
            .get(&pid)
            .is_some_and(|n| n.iter().any(|n| n == "sleep")),
        "{:?}",
        t.process_names.get(&pid)
    );
}
