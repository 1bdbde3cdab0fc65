//! Helpers for the end-to-end tests: finding the built binaries, reading the
//! kernel's clock (CLOCK_BOOTTIME), and parsing a trace file into plain facts;
//! and, in [`workload`], what the stack-sampling test programs share.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Command;

use trace_common::fxt::read::{Reader, TraceState};
use trace_common::fxt::{ArgValue, EventKind, Record, obj_type};

pub mod cgroup;
pub mod disk;
pub mod machines;
pub mod workload;

/// The directory holding the workspace's built binaries (`target/debug`).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/debug/deps/<test> → target/debug
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test binary lives in target/<profile>/deps");
    dir.to_path_buf()
}

/// The path of the `trace-cli` binary; panics with a hint when it is missing.
pub fn trace_cli() -> PathBuf {
    let p = bin_dir().join("trace-cli");
    assert!(
        p.exists(),
        "{} is missing: run the tests with `cargo xtask test` (it builds every binary first)",
        p.display()
    );
    p
}

pub use trace_common::provider::clock::boottime_ns;

/// Fails the test unless it runs as root: these tests load eBPF programs.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "this end-to-end test records with real eBPF and must run as root"
    );
}

/// A test program started with piped standard input and output, which
/// printed `pid=P` first.
pub struct Target {
    /// The process.
    pub child: std::process::Child,
    /// Its standard input.
    pub stdin: std::process::ChildStdin,
    /// Its standard output, after the pid line.
    pub stdout: std::io::BufReader<std::process::ChildStdout>,
    /// Its pid.
    pub pid: u64,
}

/// Starts `program` (which prints `pid=P` first) with piped standard input
/// and output.
pub fn start_target(program: &Path) -> Target {
    let mut child = Command::new(program)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
    let stdin = child.stdin.take().expect("piped");
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("the pid line");
    let pid = line
        .trim()
        .strip_prefix("pid=")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid line from {}: {line:?}", program.display()));
    Target {
        child,
        stdin,
        stdout,
        pid,
    }
}

/// Whether a `trace-cli record` summary reports no event lost to a full
/// ring buffer: `0 dropped`, or zero on every CPU beside `other` drops —
/// runs the kernel skipped because another BPF program was running on the
/// CPU, which other tests' recordings cause when tests run in parallel.
pub fn no_ring_drops(summary: &str) -> bool {
    if summary.contains(", 0 dropped") {
        return true;
    }
    let Some(at) = summary.find(" dropped (") else {
        return false;
    };
    let list = &summary[at + " dropped (".len()..];
    let list = &list[..list.find(')').unwrap_or(list.len())];
    list.split(", ")
        .filter(|part| part.starts_with("cpu"))
        .all(|part| part.ends_with(" 0"))
}

/// Reads `trace-cli record`'s standard error until it says it is recording
/// (every probe and program attached); panics if it ends first.
pub fn wait_for_recording(stderr: &mut impl BufRead) {
    let mut line = String::new();
    while !line.starts_with("trace-cli: recording") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "trace-cli ended before recording"
        );
    }
}

/// Starts a provider program (`provider_app` or its C twin) as `program
/// SECONDS INTERVAL_US` registering on `socket`; returns it with the pid and
/// main thread id its first line gives.
pub fn start_provider(
    program: &str,
    socket: &Path,
    secs: f64,
    interval_us: u64,
) -> (std::process::Child, u64, u64) {
    let mut child = Command::new(program)
        .args([secs.to_string(), interval_us.to_string()])
        .env("TRACE_MANAGER_SOCKET", socket)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let field = |k: &str| -> u64 {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(k))
            .unwrap_or_else(|| panic!("no {k} in {line:?}"))
            .parse()
            .unwrap()
    };
    (child, field("pid="), field("main="))
}

/// Runs `trace-cli record ARGS -o OUTPUT`, which must fail before it starts
/// recording; returns its standard error.
pub fn record_fails(args: &[&str], output: &Path) -> String {
    let out = Command::new(trace_cli())
        .arg("record")
        .args(args)
        .arg("-o")
        .arg(output)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{args:?} was accepted: {err}");
    assert!(!err.contains("trace-cli: recording"), "{err}");
    err
}

/// A context switch, resolved.
#[derive(Clone, Debug)]
pub struct Switch {
    /// Nanoseconds.
    pub ts: u64,
    /// CPU.
    pub cpu: u16,
    /// Outgoing thread.
    pub out_tid: u64,
    /// Outgoing thread state.
    pub out_state: u8,
    /// Incoming thread.
    pub in_tid: u64,
    /// Arguments by name.
    pub args: HashMap<String, ArgValue<'static>>,
}

/// A thread wakeup, resolved.
#[derive(Clone, Debug)]
pub struct Wakeup {
    /// Nanoseconds.
    pub ts: u64,
    /// CPU.
    pub cpu: u16,
    /// The woken thread.
    pub tid: u64,
    /// Arguments by name.
    pub args: HashMap<String, ArgValue<'static>>,
}

/// An event record, resolved.
#[derive(Clone, Debug)]
pub struct Event {
    /// Nanoseconds.
    pub ts: u64,
    /// Process koid.
    pub pid: u64,
    /// Thread koid.
    pub tid: u64,
    /// Category.
    pub category: String,
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: EventKind,
    /// Arguments by name, string values resolved to inline strings.
    pub args: HashMap<String, ArgValue<'static>>,
}

/// Everything a test wants to know about a trace file.
#[derive(Debug, Default)]
pub struct Trace {
    /// Provider id → name, in the order declared.
    pub providers: Vec<(u32, String)>,
    /// Ticks per second of each initialization record.
    pub ticks_per_second: Vec<u64>,
    /// Provider events (id, event).
    pub provider_events: Vec<(u32, u8)>,
    /// Process koid → every name it was given, in order.
    pub process_names: HashMap<u64, Vec<String>>,
    /// Thread koid → (process koid, name), every naming in order.
    pub thread_names: HashMap<u64, Vec<(u64, String)>>,
    /// Context switches in file order.
    pub switches: Vec<Switch>,
    /// Wakeups in file order.
    pub wakeups: Vec<Wakeup>,
    /// Events in file order.
    pub events: Vec<Event>,
    /// Records decoded.
    pub records: usize,
    /// Reader errors (offset, message).
    pub errors: Vec<(usize, String)>,
    /// Whether the file starts with the magic number record.
    pub starts_with_magic: bool,
}

impl Trace {
    /// The last name given to thread `tid`, with its process.
    pub fn thread(&self, tid: u64) -> Option<&(u64, String)> {
        self.thread_names.get(&tid).and_then(|v| v.last())
    }

    /// Thread koids whose last name is `name`.
    pub fn threads_named(&self, name: &str) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .thread_names
            .iter()
            .filter(|(_, names)| names.last().is_some_and(|(_, n)| n == name))
            .map(|(tid, _)| *tid)
            .collect();
        v.sort();
        v
    }
}

/// Per thread, sorted (timestamp, on-CPU after it) transitions from the
/// trace's context switches.
pub fn cpu_transitions(t: &Trace) -> HashMap<u64, Vec<(u64, bool)>> {
    let mut m: HashMap<u64, Vec<(u64, bool)>> = HashMap::new();
    for s in &t.switches {
        m.entry(s.out_tid).or_default().push((s.ts, false));
        m.entry(s.in_tid).or_default().push((s.ts, true));
    }
    for v in m.values_mut() {
        v.sort();
    }
    m
}

/// A stretch a CPU ran a thread whose switch out no event recorded, in a
/// recording of `kernel:sched`: from the recorded switch that switched it
/// in to the switch the recorder inferred when the CPU's next event showed
/// another task (at the latest: the thread may have left earlier). A lost
/// switch does this, and so does a task the kernel keeps out of tracing (on
/// the test VM, its agent's threads): nothing that happens in its context
/// is recorded, not even the interrupts it takes, and no count says so.
#[derive(Clone, Debug)]
pub struct UntracedRun {
    /// The CPU.
    pub cpu: u16,
    /// The thread.
    pub tid: u64,
    /// When it was switched in.
    pub from: u64,
    /// When its switch out was inferred.
    pub to: u64,
}

/// The trace's [`UntracedRun`]s, in time order per CPU.
pub fn untraced_runs(t: &Trace) -> Vec<UntracedRun> {
    let mut by_cpu: HashMap<u16, Vec<&Switch>> = HashMap::new();
    for s in &t.switches {
        by_cpu.entry(s.cpu).or_default().push(s);
    }
    let mut runs = Vec::new();
    for (cpu, mut switches) in by_cpu {
        switches.sort_by_key(|s| s.ts);
        for pair in switches.windows(2) {
            let (into, out) = (pair[0], pair[1]);
            let inferred =
                |s: &Switch| matches!(s.args.get("inferred"), Some(ArgValue::Bool(true)));
            if into.in_tid != 0 && !inferred(into) && out.out_tid == into.in_tid && inferred(out) {
                runs.push(UntracedRun {
                    cpu,
                    tid: into.in_tid,
                    from: into.ts,
                    to: out.ts,
                });
            }
        }
    }
    runs
}

/// Whether `tid` was on a CPU at `ts` (within `slack` ns of a transition),
/// from [`cpu_transitions`]; `None` when the kernel's record around `ts` is
/// inconsistent (the thread is switched out twice with no switch in
/// between).
pub fn on_cpu(tr: &HashMap<u64, Vec<(u64, bool)>>, tid: u64, ts: u64, slack: u64) -> Option<bool> {
    let Some(v) = tr.get(&tid) else {
        return Some(false);
    };
    let i = v.partition_point(|&(t, _)| t <= ts);
    let before = i.checked_sub(1).map(|j| v[j]);
    let after = v.get(i).copied();
    Some(match (before, after) {
        (Some((_, true)), _) => true,
        // Switched out just before `ts` or in just after: clock slack.
        (Some((t, false)), _) if ts - t <= slack => true,
        (_, Some((t, true))) if t - ts <= slack => true,
        (Some((_, false)), Some((_, false))) => return None,
        (None, Some((_, false))) => true,
        _ => false,
    })
}

/// Asserts that every complete duration of `durations` starts and ends
/// while its thread is on a CPU (within 1 µs of a switch), by the trace's
/// context switches: at most 1% may have no usable kernel history around
/// them. `summary` is the recorder's: when it says kernel events were lost
/// (a switch in and the switch out after it lost together leave a thread
/// off its CPU where it ran; the kernel skips a program while another runs
/// on its CPU, which other tests' recordings cause), up to 1% may lie
/// outside too.
pub fn assert_durations_on_cpu(t: &Trace, durations: &[&Event], summary: &str) {
    let tr = cpu_transitions(t);
    let mut outside = Vec::new();
    let mut unknown = 0;
    for e in durations {
        let EventKind::DurationComplete { end_ts } = e.kind else {
            panic!("a complete duration: {:?}", e.kind)
        };
        assert!(end_ts >= e.ts);
        match (
            on_cpu(&tr, e.tid, e.ts, 1_000),
            on_cpu(&tr, e.tid, end_ts, 1_000),
        ) {
            (Some(true), Some(true)) => {}
            (None, _) | (_, None) => unknown += 1,
            _ => outside.push((e.tid, e.ts, end_ts)),
        }
    }
    assert!(
        unknown * 100 <= durations.len(),
        "{unknown} durations without kernel history"
    );
    let lost = !summary.contains(", 0 dropped");
    assert!(
        outside.is_empty() || (lost && outside.len() * 100 <= durations.len()),
        "{} of {} durations outside the thread's time on CPU (kernel events lost: {lost}), \
         e.g. {:?}; the first one's thread's switches around it: {:?}",
        outside.len(),
        durations.len(),
        &outside[..outside.len().min(5)],
        outside
            .first()
            .map(|&(tid, ts, end)| switches_around(t, tid, ts, end))
    );
}

/// The context switches of thread `tid` from the last before `from` to the
/// first after `to` (timestamp, CPU, previous thread, next thread).
fn switches_around(t: &Trace, tid: u64, from: u64, to: u64) -> Vec<(u64, u16, u64, u64)> {
    let mine: Vec<_> = t
        .switches
        .iter()
        .filter(|s| s.out_tid == tid || s.in_tid == tid)
        .collect();
    let lo = mine.iter().rposition(|s| s.ts < from).unwrap_or(0);
    let hi = mine.iter().position(|s| s.ts > to).unwrap_or(mine.len());
    mine[lo..(hi + 1).min(mine.len())]
        .iter()
        .map(|s| (s.ts, s.cpu, s.out_tid, s.in_tid))
        .collect()
}

fn resolve_args(
    state: &TraceState,
    args: &[trace_common::fxt::Arg<'_>],
) -> HashMap<String, ArgValue<'static>> {
    args.iter()
        .map(|a| {
            let name = state.string(&a.name).unwrap_or("?").to_owned();
            let value = match &a.value {
                ArgValue::String(s) => ArgValue::String(trace_common::fxt::StringRef::Inline(
                    state.string(s).unwrap_or("").to_owned().into(),
                )),
                other => other.clone().into_owned(),
            };
            (name, value)
        })
        .collect()
}

/// Parses a trace file.
pub fn parse(path: &Path) -> Trace {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    parse_bytes(&data)
}

/// Parses trace bytes.
pub fn parse_bytes(data: &[u8]) -> Trace {
    let mut t = Trace {
        starts_with_magic: data.get(..8) == Some(&[0x10, 0x00, 0x04, 0x46, 0x78, 0x54, 0x16, 0x00]),
        ..Default::default()
    };
    let mut state = TraceState::new();
    for item in Reader::new(data) {
        let (_, r) = match item {
            Ok(x) => x,
            Err(e) => {
                t.errors.push((e.offset, e.to_string()));
                continue;
            }
        };
        t.records += 1;
        state.apply(&r);
        match &r {
            Record::ProviderInfo { id, name } => t.providers.push((*id, name.to_string())),
            Record::Initialization { ticks_per_second } => {
                t.ticks_per_second.push(*ticks_per_second)
            }
            Record::ProviderEvent { id, event } => t.provider_events.push((*id, *event)),
            Record::KernelObject {
                koid,
                obj_type: ty,
                name,
                args,
            } => {
                let name = state.string(name).unwrap_or("").to_owned();
                if *ty == obj_type::PROCESS {
                    t.process_names.entry(*koid).or_default().push(name);
                } else if *ty == obj_type::THREAD {
                    let pid = state.process_of_thread(args).unwrap_or(u64::MAX);
                    t.thread_names.entry(*koid).or_default().push((pid, name));
                }
            }
            Record::ContextSwitch {
                ts,
                cpu,
                outgoing_state,
                outgoing_tid,
                incoming_tid,
                args,
            } => t.switches.push(Switch {
                ts: state.ticks_to_ns(*ts),
                cpu: *cpu,
                out_tid: *outgoing_tid,
                out_state: *outgoing_state,
                in_tid: *incoming_tid,
                args: resolve_args(&state, args),
            }),
            // The compact form: threads by table reference, priorities in
            // 8 bits, priority 0 for idle. Read as the weight arguments of
            // the other form, as an importer does.
            Record::LegacyContextSwitch {
                ts,
                cpu,
                outgoing_state,
                outgoing_thread,
                incoming_thread,
                outgoing_priority,
                incoming_priority,
            } => {
                let out_tid = state.thread(*outgoing_thread).map_or(u64::MAX, |(_, t)| t);
                let in_tid = state.thread(*incoming_thread).map_or(u64::MAX, |(_, t)| t);
                let weight = |tid: u64, prio: u8| {
                    ArgValue::Int32(if tid == 0 {
                        trace_common::fxt::wire::IDLE_WEIGHT
                    } else {
                        i32::from(prio)
                    })
                };
                t.switches.push(Switch {
                    ts: state.ticks_to_ns(*ts),
                    cpu: u16::from(*cpu),
                    out_tid,
                    out_state: *outgoing_state,
                    in_tid,
                    args: HashMap::from([
                        (
                            "outgoing_weight".to_owned(),
                            weight(out_tid, *outgoing_priority),
                        ),
                        (
                            "incoming_weight".to_owned(),
                            weight(in_tid, *incoming_priority),
                        ),
                    ]),
                });
            }
            Record::ThreadWakeup { ts, cpu, tid, args } => t.wakeups.push(Wakeup {
                ts: state.ticks_to_ns(*ts),
                cpu: *cpu,
                tid: *tid,
                args: resolve_args(&state, args),
            }),
            Record::Event {
                ts,
                thread,
                category,
                name,
                args,
                kind,
            } => {
                let (pid, tid) = state.thread(*thread).unwrap_or((u64::MAX, u64::MAX));
                t.events.push(Event {
                    ts: state.ticks_to_ns(*ts),
                    pid,
                    tid,
                    category: state.string(category).unwrap_or("?").to_owned(),
                    name: state.string(name).unwrap_or("?").to_owned(),
                    kind: *kind,
                    args: resolve_args(&state, args),
                });
            }
            _ => {}
        }
    }
    t
}

/// Starts `trace-manager --socket SOCKET ARGS`, logging at debug level to
/// `log`, and waits until it accepts connections.
pub fn start_daemon(socket: &Path, log: &Path, args: &[&str]) -> std::process::Child {
    let log = std::fs::File::create(log).unwrap();
    let mut child = Command::new(bin_dir().join("trace-manager"))
        .arg("--socket")
        .arg(socket)
        .args(["--log-level", "debug"])
        .args(args)
        .stderr(log)
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !can_connect(socket) {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the daemon exited: {status}");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the daemon did not come up"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child
}

/// A fresh directory for test `name`, under the system's temporary
/// directory (one per test process).
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("trace-e2e-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A runtime on this thread, for the async controller client.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A `trace-manager` daemon on a socket of its own, in the directory of
/// one test (its log in `daemon.log` there); killed on drop.
pub struct Daemon {
    /// The daemon's process.
    pub child: std::process::Child,
    /// Its socket.
    pub socket: PathBuf,
    /// The test's directory.
    pub dir: PathBuf,
}

impl Daemon {
    /// Starts a daemon (as root) for test `name` and waits until it
    /// accepts connections.
    pub fn start(name: &str) -> Daemon {
        Daemon::start_with(name, &[])
    }

    /// Starts a daemon with options `args` (`--flight-recorder ...`).
    pub fn start_with(name: &str, args: &[&str]) -> Daemon {
        require_root();
        let dir = temp_dir(name);
        let socket = dir.join("manager.sock");
        let child = start_daemon(&socket, &dir.join("daemon.log"), args);
        Daemon { child, socket, dir }
    }

    /// `trace-cli ARGS` on this daemon.
    pub fn cli(&self, args: &[&str]) -> Command {
        let mut c = Command::new(trace_cli());
        c.args(args).env("TRACE_MANAGER_SOCKET", &self.socket);
        c
    }

    /// What the daemon logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("daemon.log")).unwrap_or_default()
    }

    /// `trace-cli record -o OUT EXTRA` on this daemon.
    pub fn record(&self, out: &Path, extra: &[&str]) -> Command {
        let mut c = Command::new(trace_cli());
        c.arg("record")
            .arg("-o")
            .arg(out)
            .args(extra)
            .env("TRACE_MANAGER_SOCKET", &self.socket);
        c
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Processes killed, then waited for, on drop.
pub struct Killed(pub Vec<std::process::Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
        }
        for c in &mut self.0 {
            let _ = c.wait();
        }
    }
}

/// A SOCK_SEQPACKET connection to `socket`.
pub fn connect_seqpacket(socket: &Path) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    let path = socket.as_os_str().as_bytes();
    // SAFETY: plain socket calls on a sockaddr_un we fill in (the path is
    // checked to fit); the descriptor is owned by the OwnedFd at once.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let owned = std::os::fd::OwnedFd::from_raw_fd(fd);
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        if path.len() >= addr.sun_path.len() {
            return Err(std::io::ErrorKind::InvalidInput.into());
        }
        for (i, b) in path.iter().enumerate() {
            addr.sun_path[i] = *b as libc::c_char;
        }
        let r = libc::connect(
            fd,
            &addr as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_un>() as u32,
        );
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(owned)
    }
}

/// Whether a SOCK_SEQPACKET connection to `socket` succeeds (it is closed
/// at once).
pub fn can_connect(socket: &Path) -> bool {
    connect_seqpacket(socket).is_ok()
}

/// The resident set of process `pid` and its peak, in bytes (`VmRSS`,
/// `VmHWM` of /proc/PID/status).
pub fn rss(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|kib| kib.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Every stack sample of the file at `path`; fails on a packet that does
/// not decode or an interned id that does not resolve.
pub fn samples(path: &Path) -> Vec<trace_perfetto::DecodedSample> {
    let data = std::fs::read(path).unwrap();
    let mut reader = trace_perfetto::SampleReader::new();
    let mut all = Vec::new();
    for item in Reader::new(&data) {
        let (_, record) = item.unwrap();
        if let Record::Blob {
            blob_type, payload, ..
        } = record
            && blob_type == trace_perfetto::BLOB_TYPE_PERFETTO
        {
            let (found, errors) = reader.feed(&payload);
            assert!(errors.is_empty(), "{}: {errors:?}", path.display());
            all.extend(found);
        }
    }
    all
}

/// Copies program `from` to `to` with `cp`, in another process: a copy
/// written by this (multithreaded) test process can fail to execute with
/// ETXTBSY while another test thread's fork still holds the copy's
/// descriptor open for writing, between its fork and its exec.
pub fn copy_program(from: impl AsRef<Path>, to: &Path) {
    let (from, to) = (from.as_ref(), to);
    let _ = std::fs::remove_file(to);
    let status = Command::new("cp")
        .arg(from)
        .arg(to)
        .status()
        .unwrap_or_else(|e| panic!("running cp: {e}"));
    assert!(
        status.success(),
        "cp {} {} failed",
        from.display(),
        to.display()
    );
}

/// `trace-cli record ARGS -o OUT -- COMMAND...`, which must succeed, and
/// `trace-cli check OUT`, which must pass: what `record` printed. The
/// manager it runs listens beside OUT (`TRACE_MANAGER_SOCKET`), so that the
/// command's providers find it and not another test's.
pub fn record_checked<S: AsRef<std::ffi::OsStr>>(
    out: &Path,
    args: &[&str],
    command: &[S],
) -> std::process::Output {
    let socket = out.with_extension("sock");
    let output = Command::new(trace_cli())
        .arg("record")
        .args(args)
        .arg("-o")
        .arg(out)
        .arg("--")
        .args(command)
        .env("TRACE_MANAGER_SOCKET", &socket)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "trace-cli record failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (ok, report) = check(out);
    assert!(ok, "trace-cli check:\n{report}");
    output
}

/// `trace-cli check FILE`: whether it passes, and what it printed.
pub fn check(file: &Path) -> (bool, String) {
    let out = Command::new(trace_cli())
        .arg("check")
        .arg(file)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Records `program` (which prints `pid=P ...`, then waits for a line on
/// standard input) with `trace-cli record -c CATEGORIES -p P` once it runs,
/// lets it go and closes its standard input, and stops the recording when
/// it has ended (if the recording has not stopped by itself). Returns the
/// file (`dir/trace.fxt`), the program's first line and the rest of what it
/// printed.
pub fn record_running(
    dir: &Path,
    categories: &str,
    program: &str,
    args: &[&str],
) -> (PathBuf, String, String) {
    use std::io::{Read, Write};
    use std::process::Stdio;
    let file = dir.join("trace.fxt");
    let mut target = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = target.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(target.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let pid = workload::numbers(&first)["pid"].to_string();
    let mut recorder = Command::new(trace_cli())
        .args(["record", "-c", categories, "-p", &pid, "-o"])
        .arg(&file)
        .env("TRACE_MANAGER_SOCKET", dir.join("manager.sock"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(recorder.stderr.take().unwrap());
    wait_for_recording(&mut err);
    stdin.write_all(b"go\n").unwrap();
    drop(stdin);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert!(target.wait().unwrap().success());
    // SAFETY: kill() with a pid and a signal has no memory effects.
    unsafe { libc::kill(recorder.id() as i32, libc::SIGINT) };
    let mut log = String::new();
    err.read_to_string(&mut log).unwrap();
    assert!(recorder.wait().unwrap().success(), "{log}");
    (file, first, rest)
}

/// The files of a rotation over `dir/trace.fxt` (`trace-0001.fxt`, ...), in
/// order.
pub fn rotated_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("trace-") && n.ends_with(".fxt"))
        })
        .collect();
    files.sort();
    files
}

/// The rows `trace-cli query PATH SQL --format json` prints.
pub fn query(path: &Path, sql: &str) -> Vec<serde_json::Map<String, serde_json::Value>> {
    let output = Command::new(trace_cli())
        .args(["query", "--format", "json", "--"])
        .arg(path)
        .arg(sql)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "query {sql:?} on {} failed:\n{}",
        path.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: not JSON:\n{}",
            String::from_utf8_lossy(&output.stdout)
        )
    });
    rows.as_array()
        .expect("an array of rows")
        .iter()
        .map(|r| r.as_object().expect("a row object").clone())
        .collect()
}

/// `trace-cli report --json ARGS FILES`, parsed.
pub fn report_json(args: &[&str], files: &[&Path]) -> serde_json::Value {
    let out = Command::new(trace_cli())
        .arg("report")
        .arg("--json")
        .args(args)
        .args(files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "trace-cli report failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The rows of table `table` of section `section` of a [`report_json`].
pub fn report_rows<'v>(
    report: &'v serde_json::Value,
    section: &str,
    table: &str,
) -> &'v Vec<serde_json::Value> {
    let s = report["sections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == section)
        .unwrap_or_else(|| panic!("no section {section}"));
    let t = s["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == table)
        .unwrap_or_else(|| panic!("no table {table} in {section}: {s}"));
    t["rows"].as_array().unwrap()
}

/// A pipe: its read end and its write end (close-on-exec).
pub fn pipe() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(r, 0);
    // SAFETY: both were just created for us and nothing else owns them.
    unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ring_drops_are_told_apart_from_skipped_runs() {
        assert!(super::no_ring_drops("x, 0 dropped -> f"));
        assert!(super::no_ring_drops(
            "x, 2 dropped (cpu0 0, cpu1 0, other 2) -> f"
        ));
        assert!(!super::no_ring_drops(
            "x, 5 dropped (cpu0 3, cpu1 0, other 2) -> f"
        ));
        assert!(!super::no_ring_drops("x, 5 dropped -> f"));
    }
}
