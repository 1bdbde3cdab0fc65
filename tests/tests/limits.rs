//! End-to-end: the daemon's limits under abuse — a thousand idle providers,
//! ten thousand idle connections, and sessions asking for more memory than
//! the budget — with the daemon's memory measured (`VmRSS`, `VmHWM`).

use std::io::{BufRead, BufReader};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tests::{
    Killed, can_connect, connect_seqpacket, parse, require_root, rss, start_daemon, temp_dir,
    trace_cli,
};

const MIB: u64 = 1 << 20;

/// `idle_providers N` on `socket`, and the lines it prints, once every
/// provider registered.
fn idle_providers(socket: &Path, n: usize) -> (Killed, mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_idle_providers"))
        .arg(n.to_string())
        .env("TRACE_MANAGER_SOCKET", socket)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out: ChildStdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) if l == format!("registered {n}") => break,
            Ok(_) => {}
            Err(e) => panic!("{n} providers did not all register: {e}"),
        }
    }
    (Killed(vec![child]), rx)
}

/// `idle_providers N` on `socket` as `uid` (and the same gid; root when
/// `None`), and how many of them were registered and refused, once each
/// was answered.
fn providers_answered(socket: &Path, n: usize, uid: Option<u32>) -> (Killed, (usize, usize)) {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_idle_providers"));
    cmd.arg(n.to_string())
        .env("TRACE_MANAGER_SOCKET", socket)
        .stdout(Stdio::piped());
    if let Some(uid) = uid {
        cmd.uid(uid).gid(uid);
    }
    let mut child = cmd.spawn().unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let killed = Killed(vec![child]);
    for line in out.lines().map_while(Result::ok) {
        if let Some(counts) = line.strip_prefix("answered ") {
            let mut c = counts.split(' ').map(|c| c.parse().unwrap());
            return (killed, (c.next().unwrap(), c.next().unwrap()));
        }
    }
    panic!("idle_providers ended before every provider was answered");
}

/// A process's CPU time so far (user and system), from /proc.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command's name, which ends with the last ')'.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    // utime and stime: fields 14 and 15 of the whole line.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_millis(ticks * 1000 / hz)
}

/// Raises this process's descriptor limit to its hard limit.
fn more_descriptors() {
    // SAFETY: getrlimit/setrlimit with a struct we own.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
}

/// Opens `n` connections to `socket` that say nothing.
fn idle_connections(socket: &Path, n: usize) -> Vec<OwnedFd> {
    (0..n)
        .map(|_| connect_seqpacket(socket).unwrap_or_else(|e| panic!("connect: {e}")))
        .collect()
}

fn record(socket: &Path, out: &Path, args: &[&str]) -> std::process::Output {
    Command::new(trace_cli())
        .arg("record")
        .arg("-o")
        .arg(out)
        .args(args)
        .env("TRACE_MANAGER_SOCKET", socket)
        .output()
        .unwrap()
}

#[test]
fn a_thousand_idle_providers_and_ten_thousand_idle_connections_cost_little() {
    require_root();
    more_descriptors();
    let dir = temp_dir("idle");
    let socket = dir.join("manager.sock");
    let daemon = Killed(vec![start_daemon(
        &socket,
        &dir.join("daemon.log"),
        &["--memory-budget", "512M", "--max-connections", "12000"],
    )]);
    let pid = daemon.0[0].id();
    let (_providers, _lines) = idle_providers(&socket, 1000);
    let (before, _) = rss(pid);

    // Ten thousand connections that say nothing (the daemon closes them
    // after 5 s), and a normal recording meanwhile.
    let idle = idle_connections(&socket, 10_000);
    std::thread::sleep(Duration::from_millis(500));
    let (during, _) = rss(pid);
    let out = dir.join("trace.fxt");
    let began = Instant::now();
    let rec = record(&socket, &out, &["-c", "kernel:sched", "-d", "2"]);
    let took = began.elapsed();
    let stderr = String::from_utf8_lossy(&rec.stderr);
    assert!(rec.status.success(), "{stderr}");
    let (_, peak) = rss(pid);
    drop(idle);
    assert!(
        stderr.contains("1000 userspace providers"),
        "every idle provider took part: {stderr}"
    );
    assert!(
        took < Duration::from_secs(15),
        "a 2 s recording took {took:?}"
    );
    let t = parse(&out);
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    assert!(!t.switches.is_empty());

    // Idle connections: a task and a descriptor each, no buffer.
    eprintln!(
        "daemon RSS: {} MiB with 1000 providers, {} MiB with 10000 idle connections too, \
         peak {} MiB",
        before / MIB,
        during / MIB,
        peak / MIB
    );
    assert!(
        during.saturating_sub(before) < 10_000 * 4096,
        "10000 idle connections took {} MiB",
        during.saturating_sub(before) / MIB
    );
    // Within the documented budget: 512 MiB of trace buffers at most,
    // and what the daemon needs besides.
    assert!(
        peak < 512 * MIB + 128 * MIB,
        "peak {} MiB beyond the budget",
        peak / MIB
    );
    // Memory returns once the connections are gone.
    std::thread::sleep(Duration::from_millis(1500));
    let (after, _) = rss(pid);
    assert!(
        after < during.max(before) + 16 * MIB,
        "{} MiB after the connections closed, {} MiB before",
        after / MIB,
        before / MIB
    );
    assert!(can_connect(&socket), "the daemon still serves");
}

#[test]
fn sessions_beyond_the_memory_budget_are_refused_or_shrunk() {
    require_root();
    let dir = temp_dir("budget");
    let socket = dir.join("manager.sock");
    let _daemon = Killed(vec![start_daemon(
        &socket,
        &dir.join("daemon.log"),
        &["--session-memory-budget", "96M"],
    )]);
    let out = dir.join("trace.fxt");

    // A kernel buffer larger than the budget: refused, naming the limit.
    let rec = record(
        &socket,
        &out,
        &["-c", "kernel:sched", "-b", "128", "-d", "1"],
    );
    let stderr = String::from_utf8_lossy(&rec.stderr);
    assert!(!rec.status.success());
    assert!(
        stderr.contains("memory budget of 96 MiB"),
        "the limit is named: {stderr}"
    );

    // Twenty providers of 4 MiB, a 64 MiB kernel buffer and the kernel's
    // backlog (16 MiB at least) do not fit in 96 MiB: each provider gets
    // the same share of what it asked for.
    let (_providers, lines) = idle_providers(&socket, 20);
    let rec = record(
        &socket,
        &out,
        &["-c", "kernel:sched", "-b", "64", "-d", "1"],
    );
    let stderr = String::from_utf8_lossy(&rec.stderr);
    assert!(rec.status.success(), "{stderr}");
    let sizes: Vec<u64> = lines
        .try_iter()
        .filter_map(|l| l.strip_prefix("initialized ").map(str::to_owned))
        .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(sizes.len(), 20, "{sizes:?}");
    let total: u64 = sizes.iter().sum();
    assert!(total <= 32 * MIB, "{} MiB of provider buffers", total / MIB);
    assert!(
        sizes.iter().all(|&s| (256 << 10..4 * MIB).contains(&s)),
        "{sizes:?}"
    );

    // One provider asking for more than the whole budget: the same share
    // for everyone, so it gets the most, and the others what remains (or
    // nothing, below the 256 KiB minimum); the session records.
    let rec = record(
        &socket,
        &out,
        &[
            "-c",
            "kernel:sched",
            "-b",
            "64",
            "--provider-buffer",
            "idle-0=1024",
            "-d",
            "1",
        ],
    );
    let stderr = String::from_utf8_lossy(&rec.stderr);
    assert!(rec.status.success(), "{stderr}");
    let sizes: Vec<(String, u64)> = lines
        .try_iter()
        .filter_map(|l| l.strip_prefix("initialized ").map(str::to_owned))
        .map(|l| {
            let mut f = l.split_whitespace();
            (
                f.next().unwrap().to_owned(),
                f.next().unwrap().parse().unwrap(),
            )
        })
        .collect();
    let total: u64 = sizes.iter().map(|(_, s)| s).sum();
    assert!(total <= 32 * MIB, "{} MiB of provider buffers", total / MIB);
    let big = sizes
        .iter()
        .find(|(n, _)| n == "idle-0")
        .expect("idle-0 traced");
    assert!(big.1 < 1024 * MIB && big.1 >= 4 * MIB, "{sizes:?}");
    let log = std::fs::read_to_string(dir.join("daemon.log")).unwrap();
    assert!(log.contains("of what it asked for"), "{log}");
}

#[test]
fn a_storm_past_a_small_backlog_ends_and_keeps_what_it_read() {
    require_root();
    let dir = temp_dir("budget-storm");
    let socket = dir.join("manager.sock");
    let budget = 48 * MIB;
    let daemon = Killed(vec![start_daemon(
        &socket,
        &dir.join("daemon.log"),
        &["--memory-budget", "48M"],
    )]);
    let pid = daemon.0[0].id();
    let (rss_before, _) = rss(pid);
    let out = dir.join("trace.fxt");
    // Far more events than the translation follows at once: the backlog
    // reaches its limit (16 MiB, the least it is given), the rings fill
    // and the kernel drops the rest.
    let began = Instant::now();
    let rec = record(
        &socket,
        &out,
        &[
            "-a",
            "-c",
            "kernel:syscall,kernel:sched",
            "-b",
            "8",
            "--",
            env!("CARGO_BIN_EXE_syscall_loop"),
            "2000000",
        ],
    );
    let stderr = String::from_utf8_lossy(&rec.stderr);
    assert!(rec.status.success(), "{stderr}");
    assert!(
        began.elapsed() < Duration::from_secs(120),
        "the recording took {:?}",
        began.elapsed()
    );
    let (ok, findings) = tests::check(&out);
    assert!(ok, "{findings}");
    let calls = parse(&out)
        .events
        .iter()
        .filter(|e| e.name == "getppid")
        .count();
    assert!(calls > 100_000, "{calls} calls recorded\n{stderr}");
    // The daemon goes on answering once the storm is over.
    let sessions = Command::new(trace_cli())
        .arg("sessions")
        .env("TRACE_MANAGER_SOCKET", &socket)
        .output()
        .unwrap();
    assert!(sessions.status.success());
    let (_, peak) = rss(pid);
    eprintln!(
        "the daemon grew by {} MiB under a {} MiB budget",
        peak.saturating_sub(rss_before) / MIB,
        budget / MIB
    );
}

/// Runs `n` providers on `socket` one after the other, each for half a
/// second, ticking every 10 ms; their pids.
fn short_lived_providers(socket: &Path, n: usize) -> Vec<u64> {
    (0..n)
        .map(|_| {
            let (mut child, pid, _) =
                tests::start_provider(env!("CARGO_BIN_EXE_tiny_provider"), socket, 0.5, 10_000);
            assert!(child.wait().unwrap().success());
            pid
        })
        .collect()
}

/// The pids of `trace` that wrote `tick` instants.
fn ticking(file: &Path) -> std::collections::HashSet<u64> {
    let (ok, findings) = tests::check(file);
    assert!(ok, "{}: {findings}", file.display());
    let t = parse(file);
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    t.events
        .iter()
        .filter(|e| e.name == "tick")
        .map(|e| e.pid)
        .collect()
}

/// Providers that come and go give their buffers and registry places back
/// once their records are saved. Twenty-four providers, one after the
/// other, pass through a budget that holds eight (a recording with
/// `--session-memory-budget 32M`) or sixteen (the flight recorder's 64 MiB)
/// of their 4 MiB buffers, then one more: every one of them is in the
/// trace, none "left out: memory budget".
#[test]
fn providers_that_went_away_give_their_buffers_back() {
    require_root();
    // A recording.
    let dir = temp_dir("departed");
    let socket = dir.join("manager.sock");
    let log = dir.join("daemon.log");
    let daemon = Killed(vec![start_daemon(
        &socket,
        &log,
        &["--session-memory-budget", "32M"],
    )]);
    let out = dir.join("trace.fxt");
    let mut rec = Command::new(trace_cli())
        .args(["record", "-c", "app", "-d", "60", "-o"])
        .arg(&out)
        .env("TRACE_MANAGER_SOCKET", &socket)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(rec.stderr.take().unwrap());
    tests::wait_for_recording(&mut err);
    let pids = short_lived_providers(&socket, 25);
    // SAFETY: kill(2) with a pid we spawned has no memory effects.
    unsafe { libc::kill(rec.id() as libc::pid_t, libc::SIGINT) };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(rec.wait().unwrap().success(), "{rest}");
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!log_text.contains("memory budget has"), "{log_text}");
    let seen = ticking(&out);
    let missing: Vec<&u64> = pids.iter().filter(|p| !seen.contains(p)).collect();
    assert!(
        missing.is_empty(),
        "not recorded: {missing:?}\n{rest}\n{log_text}"
    );
    drop(daemon);

    // The flight recorder.
    let d = tests::Daemon::start_with(
        "departed-flight",
        &["--flight-recorder", "-c", "app", "--window", "60s"],
    );
    let pids = short_lived_providers(&d.socket, 25);
    let snap = d.dir.join("snapshot.fxt");
    let s = d.cli(&["snapshot", "-o"]).arg(&snap).output().unwrap();
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    assert!(!d.log().contains("left out"), "{}", d.log());
    let seen = ticking(&snap);
    let missing: Vec<&u64> = pids.iter().filter(|p| !seen.contains(p)).collect();
    assert!(missing.is_empty(), "not recorded: {missing:?}\n{}", d.log());
}

/// One user cannot lock the others' providers out: of the registry's 1000
/// places a user other than root gets 250, users other than root 875
/// together, and the rest is root's; a provider program refused tries
/// again ever more slowly, and the daemon logs refusals a line a second
/// at most.
#[test]
fn one_user_cannot_lock_the_others_providers_out() {
    require_root();
    more_descriptors();
    let dir = temp_dir("provider-shares");
    let socket = dir.join("manager.sock");
    let log = dir.join("daemon.log");
    let _daemon = Killed(vec![start_daemon(&socket, &log, &[])]);
    // Anyone may connect, as members of `tracing` may.
    std::fs::set_permissions(&socket, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    // A thousand providers of one member: its share.
    let mut held = Vec::new();
    let (p, answered) = providers_answered(&socket, 1000, Some(61_001));
    held.push(p);
    assert_eq!(answered, (250, 750));
    // Two more members get theirs; a fourth what users may have together.
    for uid in [61_002, 61_003] {
        let (p, answered) = providers_answered(&socket, 250, Some(uid));
        held.push(p);
        assert_eq!(answered, (250, 0), "uid {uid}");
    }
    let (p, answered) = providers_answered(&socket, 250, Some(61_004));
    held.push(p);
    assert_eq!(answered, (125, 125));
    // Root's programs still register, up to the total.
    let (p, answered) = providers_answered(&socket, 200, None);
    held.push(p);
    assert_eq!(answered, (125, 75));

    // A real provider program of the first member, refused again and
    // again: it waits longer each time (100 ms doubling), where it used to
    // reconnect at once.
    let mut program = Command::new(env!("CARGO_BIN_EXE_tiny_provider"));
    program
        .arg("60")
        .env("TRACE_MANAGER_SOCKET", &socket)
        .stdout(Stdio::null());
    std::os::unix::process::CommandExt::uid(&mut program, 61_001);
    std::os::unix::process::CommandExt::gid(&mut program, 61_001);
    let refused = Killed(vec![program.spawn().unwrap()]);
    let pid = refused.0[0].id();
    std::thread::sleep(Duration::from_secs(6));
    let cpu = cpu_time(pid);
    drop(refused);
    eprintln!("a refused provider used {cpu:?} of CPU in 6 s");
    assert!(cpu < Duration::from_millis(300), "{cpu:?} of CPU in 6 s");

    // A refusal says which limit; the log holds a line a second of them
    // at most (and their count).
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("the limit per user"), "{text}");
    let lines = text.lines().filter(|l| l.contains("refused")).count();
    assert!(lines < 30, "{lines} lines about refused providers:\n{text}");
    assert!(can_connect(&socket), "the daemon still serves");
    drop(held);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Users other than root together stop an eighth short of the connection
/// limit, so root still gets in when they are all at their own limits; a
/// client refused is told which limit, once.
#[test]
fn users_at_their_connection_limits_leave_room_for_root() {
    require_root();
    let dir = temp_dir("connection-shares");
    let socket = dir.join("manager.sock");
    let _daemon = Killed(vec![start_daemon(
        &socket,
        &dir.join("daemon.log"),
        &[
            "--max-connections",
            "64",
            "--max-connections-per-user",
            "32",
        ],
    )]);
    std::fs::set_permissions(&socket, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    // Two members' providers: the first at its own limit, the second
    // stopped where users other than root must (56 of 64).
    let (_a, answered) = providers_answered(&socket, 32, Some(61_011));
    assert_eq!(answered, (32, 0));
    let (_b, answered) = providers_answered(&socket, 32, Some(61_012));
    assert_eq!(answered, (24, 8));
    // A third member's client is told why, once.
    let mut cli = Command::new(trace_cli());
    cli.arg("providers").env("TRACE_MANAGER_SOCKET", &socket);
    std::os::unix::process::CommandExt::uid(&mut cli, 61_013);
    std::os::unix::process::CommandExt::gid(&mut cli, 61_013);
    let out = cli.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("the trace manager refused the connection") && err.contains("kept for root"),
        "{err}"
    );
    assert!(!err.contains("Broken pipe"), "{err}");
    assert_eq!(err.matches("refused").count(), 1, "{err}");
    // Root is let in.
    let out = Command::new(trace_cli())
        .arg("providers")
        .env("TRACE_MANAGER_SOCKET", &socket)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("idle-0"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A provider flooding a recording whose reader is slow loses its own
/// records, never the session, and the daemon does not queue for the
/// reader: its streaming saves wait while the reader is 32 MiB behind, and
/// what it writes meanwhile finds its buffers full.
#[test]
fn a_flooding_provider_with_a_slow_reader_loses_its_own_records_only() {
    require_root();
    let dir = temp_dir("flood-slow-reader");
    let socket = dir.join("manager.sock");
    let daemon = Killed(vec![start_daemon(
        &socket,
        &dir.join("daemon.log"),
        &["--memory-budget", "256M"],
    )]);
    let pid = daemon.0[0].id();
    let flood = Command::new(env!("CARGO_BIN_EXE_tiny_provider"))
        .args(["60", "0"])
        .env("TRACE_MANAGER_SOCKET", &socket)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let _flood = Killed(vec![flood]);
    std::thread::sleep(Duration::from_millis(500));
    let (before, _) = rss(pid);
    // `record -o -` into a pipe read at about 3 MB/s.
    let mut rec = Command::new(trace_cli())
        .args(["record", "-c", "app", "--buffering-mode", "streaming"])
        .args(["-d", "10", "-o", "-"])
        .env("TRACE_MANAGER_SOCKET", &socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = rec.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 << 10];
        let mut n = 0u64;
        loop {
            match std::io::Read::read(&mut stdout, &mut buf) {
                Ok(0) | Err(_) => return n,
                Ok(k) => n += k as u64,
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let out = rec.wait_with_output().unwrap();
    let read = reader.join().unwrap();
    let (_, peak) = rss(pid);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "{stderr}read {} MiB; daemon {} MiB before, peak {} MiB",
        read / MIB,
        before / MIB,
        peak / MIB
    );
    assert!(out.status.success(), "{stderr}");
    // The provider's own records were lost (its buffers full), and said.
    let dropped: u64 = stderr
        .split("userspace provider (")
        .nth(1)
        .and_then(|s| s.split(" dropped").next())
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no provider drops in {stderr}"));
    assert!(dropped > 0, "{stderr}");
    // The daemon held a reader's lag (32 MiB) and a buffer, not the flood.
    assert!(
        peak.saturating_sub(before) < 64 * MIB,
        "the daemon grew from {} to {} MiB",
        before / MIB,
        peak / MIB
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The sizes of `file`'s ELF sections by name (`readelf -SW`).
fn section_sizes(file: &Path) -> std::collections::HashMap<String, u64> {
    let out = Command::new("readelf")
        .arg("-SW")
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success(), "readelf {}", file.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            // `  [15] .eh_frame  PROGBITS  addr  off  size ...`
            let rest = line.trim_start().strip_prefix('[')?.split_once(']')?.1;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let size = u64::from_str_radix(fields.get(4)?, 16).ok()?;
            Some((fields.first()?.to_string(), size))
        })
        .collect()
}

/// Naming the stacks of many large programs does not pile them up: four
/// copies of the debug `trace-cli` (each a distinct file whose symbol tables
/// alone pass the resolver's 64 MiB), run one after the other 12 s apart
/// under the CPU and off-CPU profiles, grow the daemon by its budget, the
/// resolver's limit, one copy's symbols (those named within 10 s stay) and
/// two copies' unwind tables (the running one's, and one exited less than
/// 2 s ago), not by all four.
#[test]
fn stacks_of_many_large_programs_keep_the_daemon_within_its_limits() {
    require_root();
    let dir = temp_dir("stacks-memory");
    let socket = dir.join("manager.sock");
    let daemon = Killed(vec![start_daemon(
        &socket,
        &dir.join("daemon.log"),
        &["--memory-budget", "32M"],
    )]);
    let pid = daemon.0[0].id();
    let cli = trace_cli();
    // A first recording: what any session costs the daemon (programs
    // loaded, buffers made) is in `before`; its file is the workload's input.
    let input = dir.join("input.fxt");
    let warm = Command::new(&cli)
        .args([
            "record",
            "-c",
            "kernel:sched,kernel:syscall",
            "-d",
            "1",
            "-o",
        ])
        .arg(&input)
        .env("TRACE_MANAGER_SOCKET", &socket)
        .output()
        .unwrap();
    assert!(
        warm.status.success(),
        "{}",
        String::from_utf8_lossy(&warm.stderr)
    );
    let (_, before) = rss(pid);

    let copies: Vec<_> = (0..4)
        .map(|i| {
            let copy = dir.join(format!("trace-cli-{i}"));
            std::fs::copy(&cli, &copy).unwrap();
            copy
        })
        .collect();
    let mut rec = Command::new(&cli)
        .args([
            "record",
            "-c",
            "kernel:profile,kernel:offcpu",
            "--sample-hz",
            "999",
        ])
        .args(["-d", "60", "-o"])
        .arg(dir.join("stacks.fxt"))
        .arg("--")
        .arg("sh")
        .arg("-c")
        .arg(
            "for c in \"$@\"; do end=$(($(date +%s%N) + 1500000000)); \
             while [ $(date +%s%N) -lt $end ]; do \"$c\" report \"$INPUT\" > /dev/null; done; \
             sleep 12; done",
        )
        .arg("sh")
        .args(&copies)
        .env("INPUT", &input)
        .env("TRACE_MANAGER_SOCKET", &socket)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = rec.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut rec.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{stderr}");
    let (_, peak) = rss(pid);

    let sections = section_sizes(&cli);
    let size = |name: &str| sections.get(name).copied().unwrap_or(0);
    let symbols = size(".symtab") * 3 + size(".strtab");
    let unwind = size(".eh_frame") + size(".eh_frame_hdr");
    assert!(
        symbols > 64 * MIB,
        "trace-cli's symbols ({} MiB) no longer pass the resolver's limit: the test needs \
         larger programs",
        symbols / MIB
    );
    let bound = 32 * MIB + 64 * MIB + symbols + 2 * unwind + 32 * MIB;
    eprintln!(
        "{stderr}daemon {} MiB before, peak {} MiB; bound {} MiB over before (one copy: \
         {} MiB of symbols, {} MiB of unwind tables)",
        before / MIB,
        peak / MIB,
        bound / MIB,
        symbols / MIB,
        unwind / MIB
    );
    // The samples were named: the copies' functions appear in the profile.
    let folded = Command::new(&cli)
        .args(["flamegraph", "--folded"])
        .arg(dir.join("stacks.fxt"))
        .output()
        .unwrap();
    let folded = String::from_utf8_lossy(&folded.stdout);
    assert!(
        folded.contains("trace_cli::main"),
        "no trace-cli frame named in the profile:\n{}",
        folded.lines().take(20).collect::<Vec<_>>().join("\n")
    );
    assert!(
        peak.saturating_sub(before) <= bound,
        "the daemon grew from {} to {} MiB, more than {} MiB",
        before / MIB,
        peak / MIB,
        bound / MIB
    );
    let _ = std::fs::remove_dir_all(&dir);
}
