//! `trace-cli record`: record a trace through the trace manager daemon, or
//! through a manager run in this process when no daemon is running.
//!
//! - `config`: the arguments checked and mapped to a [`TraceConfig`].
//! - `connect`: the daemon, or a manager run here; the privileges needed.
//! - `command`: the recorded command, started and followed.
//! - `targets`: the `-p` processes, watched for their exit.
//! - `run_loop`: waiting for the end while alerts and the status come.
//! - `progress`: the live status line.
//! - `rotation`: the trace cut into a series of files (`--rotate`).
//! - `window`: only the time around a trigger kept (`--pre`).
//! - `summary`: what is said at the end.
//! - `forward`: what other machines (`--host`) are asked to record.

mod command;
mod config;
mod connect;
mod forward;
mod output;
mod progress;
mod rotation;
mod run_loop;
mod summary;
mod targets;
mod window;

use std::fs::File;
use std::os::fd::{AsFd as _, OwnedFd};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use tokio::signal::unix::{SignalKind, signal};
use trace_common::controller::{Reply, Request, StackOptions, StartOptions, TraceConfig, fail};
use trace_manager::Manager;

use command::start_command;
pub use command::{RELEASE_FD_ENV, wait_and_exec};
use connect::check_privileges;
pub use connect::{Connection, connect, embed};
use run_loop::StopReason;

/// Arguments of `trace-cli record`.
#[derive(Args)]
pub struct RecordArgs {
    /// Where to write the trace; `-` streams it to standard output as it is
    /// recorded (a COMMAND's own output then goes to standard error).
    #[arg(short, long, default_value = "trace.fxt")]
    output: PathBuf,
    /// Write a series of files instead of one: a new file when the current
    /// one would grow past a size (`256M`, `64K`, `1G`) or has been written
    /// for a time (`60s`, `5min`, `1h`). Each file reads on its own (names,
    /// strings and open slices repeated at its start); OUTPUT `trace.fxt`
    /// gives `trace-0001.fxt`, `trace-0002.fxt`...
    #[arg(long, value_name = "SIZE|TIME", value_parser = trace_split::parse_limit)]
    rotate: Option<trace_split::Limit>,
    /// With --rotate: keep at most this many files, deleting the oldest.
    #[arg(long, value_name = "N", requires = "rotate", value_parser = clap::value_parser!(u32).range(1..))]
    max_files: Option<u32>,
    /// Stop after this many seconds (fractions allowed).
    #[arg(short, long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Categories to record, comma-separated; may repeat; globs like `kernel:*`
    /// work. Default: all.
    #[arg(
        short,
        long = "categories",
        value_name = "CAT,CAT...",
        value_delimiter = ',',
        value_parser = crate::completions::Suggested(crate::completions::category_names),
        hide_possible_values = true
    )]
    categories: Vec<String>,
    /// Size of the kernel ring buffer in megabytes (fractions allowed; it
    /// is rounded up to a power of two pages).
    #[arg(
        short = 'b',
        long = "buffer-size",
        value_name = "MEGABYTES",
        default_value_t = 16.0
    )]
    buffer_megabytes: f64,
    /// What userspace providers do when their buffer fills.
    #[arg(long, value_name = "MODE", default_value = "oneshot", value_parser = ["oneshot", "circular", "streaming"])]
    buffering_mode: String,
    /// What happens to kernel events: `streaming` (the default) writes them
    /// as they come; `oneshot` keeps the first `-b` megabytes of them and
    /// counts the rest as dropped; `circular` keeps the newest `-b`
    /// megabytes and writes them at the end.
    #[arg(long, value_name = "MODE", default_value = "streaming", value_parser = ["oneshot", "circular", "streaming"])]
    kernel_buffering_mode: String,
    /// Size of each userspace provider's buffer in megabytes.
    #[arg(long, value_name = "MEGABYTES", default_value_t = 4)]
    provider_buffer_size: u32,
    /// Buffer size of one provider: NAME=MEGABYTES (may repeat).
    #[arg(long = "provider-buffer", value_name = "NAME=MB")]
    provider_buffers: Vec<String>,
    /// Record kernel events of this process only (all its threads, and the
    /// threads and processes it creates during the recording); may repeat
    /// or be comma-separated. Without a COMMAND, the recording stops when
    /// the last of them exits (see --keep-going).
    #[arg(short = 'p', long = "pid", value_name = "PID", value_delimiter = ',')]
    pids: Vec<u32>,
    /// With -p: go on recording after every PID has exited (until -d,
    /// Ctrl-C or a trigger), to keep what their children still do.
    #[arg(long, requires = "pids")]
    keep_going: bool,
    /// Record only the tasks in this cgroup (cgroup v2) or in any cgroup
    /// below it, including those that enter it during the recording:
    /// kernel events (decided in the kernel) and the userspace providers
    /// whose process is there. A path from the cgroup v2 hierarchy's root
    /// (`/system.slice/nginx.service`, as /proc/PID/cgroup shows it) or
    /// absolute under its mount point. May repeat (at most 8 cgroups with
    /// --unit and --container). With a COMMAND, records the cgroups while
    /// it runs.
    #[arg(long = "cgroup", value_name = "PATH", conflicts_with_all = ["pids", "all_processes"])]
    cgroups: Vec<String>,
    /// Record a systemd unit's processes: its cgroup, as --cgroup does
    /// (`nginx` means `nginx.service`; `session-2.scope`, `user.slice`
    /// work too). May repeat.
    #[arg(long = "unit", value_name = "NAME", conflicts_with_all = ["pids", "all_processes"])]
    units: Vec<String>,
    /// Record a container's processes: its cgroup, as --cgroup does.
    /// Docker, Podman, containerd (Kubernetes, nerdctl), CRI-O and
    /// systemd-nspawn are known by how they name their cgroups; a container
    /// is named by its name (Docker, Podman, nspawn), its id, or a prefix
    /// of its id as `docker ps` shows it. May repeat.
    #[arg(long = "container", value_name = "ID|NAME", conflicts_with_all = ["pids", "all_processes"])]
    containers: Vec<String>,
    /// Probe a function: its calls become durations (category `uprobe`) on
    /// the calling threads. `BINARY:SYMBOL`, `BINARY:0xOFFSET`, or `SYMBOL`
    /// with `-p` (in the process's program; `LIB:SYMBOL` such as
    /// `libc:malloc` in a library it has loaded). Rust and C++ names may be
    /// given demangled. May repeat.
    #[arg(long = "uprobe", value_name = "SPEC")]
    uprobes: Vec<String>,
    /// Record a USDT static probe: each time a thread passes it, an instant
    /// (category `usdt`, named `PROVIDER:NAME`) with its arguments.
    /// `BINARY:PROVIDER:NAME`, or `PROVIDER:NAME` with `-p` (searched in the
    /// process's program and libraries); globs such as `app:*` work. May
    /// repeat.
    #[arg(long = "usdt", value_name = "SPEC")]
    usdt: Vec<String>,
    /// Record kernel tracepoints by name, every field decoded: an instant
    /// per hit (category GROUP) on the thread it happened on. `GROUP:EVENT`;
    /// globs (`sched:*`, `irq:softirq_*`); comma lists; `ENTRY..EXIT` (e.g.
    /// `irq:softirq_entry..irq:softirq_exit`) for a duration from each entry
    /// to the next exit on the same thread; ` if FILTER` to keep only the
    /// events it matches, evaluated in the kernel (e.g. `sched:sched_switch
    /// if prev_prio < 100`). `trace-cli events` lists them with their
    /// fields. Adds to what `-c` selects (`-c none`: the tracepoints alone).
    /// May repeat.
    #[arg(short = 'e', long = "event", value_name = "SPEC", value_hint = clap::ValueHint::Other)]
    events: Vec<String>,
    /// Samples per second and CPU of `kernel:profile` (a `cpu-clock` timer;
    /// 99 stays out of step with the kernel's 100 Hz and 1000 Hz work).
    #[arg(long, value_name = "HZ", default_value_t = StackOptions::DEFAULT_SAMPLE_HZ)]
    sample_hz: u32,
    /// `kernel:offcpu` records blocks of at least this many microseconds
    /// (their stacks, and their wakers' stacks).
    #[arg(long, value_name = "US", default_value_t = StackOptions::DEFAULT_OFFCPU_MIN_US)]
    offcpu_min_us: u64,
    /// How user stacks are taken: `dwarf` copies --stack-size bytes of the
    /// stack and unwinds them with the binaries' .eh_frame (complete
    /// without frame pointers, as `perf record --call-graph dwarf`); `fp`
    /// walks frame pointers in the kernel (cheaper; stops at the first
    /// function built without them).
    #[arg(long, value_name = "MODE", default_value = "dwarf", value_parser = ["dwarf", "fp"])]
    call_graph: String,
    /// User stack bytes copied per stack with `--call-graph dwarf` (512 to
    /// 16384; deep stacks, such as Python's, want 16384).
    #[arg(long, value_name = "BYTES", default_value_t = StackOptions::DEFAULT_STACK_BYTES)]
    stack_size: u32,
    /// Record the calling stack of every event of these probes: any of
    /// `uprobe`, `usdt`, `syscall` (at each call's entry), `tracepoint`
    /// (`-e`), comma-separated, or `all`.
    #[arg(long = "stacks", value_name = "PROBES", value_delimiter = ',')]
    probe_stacks: Vec<String>,
    /// Stop when this happens: a userspace provider raises this alert
    /// (`trace_provider::alert`, `trace_provider_alert`), or the kernel
    /// sees this condition: `syscall:NAME>TIME` (a system call slower than
    /// that, e.g. `syscall:fsync>50ms`; `*` for any; needs
    /// `kernel:syscall`), `signal:SIG` (a process killed by SIGSEGV,
    /// SIGABRT...), `oom` (an out-of-memory kill), `tracepoint:GROUP:EVENT`
    /// (an `-e` tracepoint, with its filter), `uprobe:NAME`,
    /// `usdt:PROVIDER:NAME`. Where it fired is marked in the trace (an
    /// instant, category `trigger`). May repeat.
    #[arg(long = "trigger", value_name = "ALERT|CONDITION")]
    triggers: Vec<String>,
    /// After a trigger, go on recording this many seconds before stopping.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 0.0,
        requires = "triggers"
    )]
    post: f64,
    /// Keep only the events of this many seconds before the trigger (before
    /// the end, if none fires) and the `--post` seconds after, as a flight
    /// recorder does; the rest is dropped as the recording goes.
    #[arg(
        long,
        value_name = "SECONDS",
        requires = "triggers",
        conflicts_with = "rotate"
    )]
    pre: Option<f64>,
    /// How long to wait for userspace providers to start, in seconds; one
    /// that has not answered by then is recorded from when it does.
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0)]
    start_timeout: f64,
    /// Keep the trace in the manager until the recording ends, instead of
    /// writing it to the output as it is recorded.
    #[arg(long)]
    defer_transfer: bool,
    /// Wait this long before recording starts (fractions allowed). A
    /// COMMAND starts at once and is recorded from then on (its threads; the
    /// processes it started during the wait are not followed).
    #[arg(long, value_name = "SECONDS")]
    start_delay: Option<f64>,
    /// With a COMMAND, record kernel events of every process, not only the
    /// command's.
    #[arg(short = 'a', long = "all-processes", conflicts_with = "pids")]
    all_processes: bool,
    /// Run this command and stop when it exits; `record` then exits with
    /// the command's status (128 + N when signal N killed it; 127 when it
    /// is not found, 126 when it cannot be run, as shells do). Kernel
    /// events are recorded for its process tree only (and the `--pid`
    /// processes), unless `--all-processes` or a cgroup selection
    /// (`--cgroup`, `--unit`, `--container`) says what to record.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
    #[command(flatten)]
    hosts: crate::hosts::HostArgs,
    /// Stop when standard input ends: how the recording machine of
    /// `--host` ends a remote machine's recording.
    #[arg(long, hide = true)]
    stop_on_stdin_eof: bool,
}

/// Runs `trace-cli record`.
pub fn run(args: RecordArgs) -> Result<ExitCode> {
    let categories = config::check(&args)?;
    // A command that cannot be run is said at once, as a shell says it,
    // before anything is loaded.
    if let Some(program) = args.command.first()
        && let Err((code, why)) = command::check_runnable(program)
    {
        eprintln!("trace-cli: {why}");
        return Ok(ExitCode::from(code));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    // A manager run here lives on this thread beside the client.
    let local = tokio::task::LocalSet::new();
    runtime.block_on(local.run_until(record(args, categories)))
}

/// The failure in `reply`, as an error for the user.
fn failed(what: &str, reply: Reply) -> anyhow::Error {
    match reply {
        Reply::Failed { message, .. } => anyhow::anyhow!("{message}"),
        other => anyhow::anyhow!("{what}: unexpected answer from the trace manager: {other:?}"),
    }
}

/// Records: sets the session up, starts it and the command, waits for the
/// end, ends the session and says how it went.
async fn record(args: RecordArgs, categories: Vec<String>) -> Result<ExitCode> {
    // From here on Ctrl-C ends the recording with a complete file, even one
    // pressed while it is being set up; a second one ends trace-cli at once.
    let mut interrupted = interruptions()?;
    let to_stdout = args.output.as_os_str() == "-";
    let mut config = config::trace_config(&args, &categories)?;
    let needs_kernel = config::needs_kernel(&config);

    if (args.rotate.is_some() || args.pre.is_some()) && to_stdout {
        bail!("--rotate and --pre write files: they cannot go with -o -");
    }
    if args.hosts.any() && (args.rotate.is_some() || args.pre.is_some()) {
        bail!("--host merges whole traces: it cannot go with --rotate or --pre");
    }
    // Other machines are reached, and their recordings started, first:
    // one that cannot be reached fails the recording before it begins.
    let mut hosts = if args.hosts.any() {
        let (dir, stem) = crate::hosts::spool_place(&args.output, to_stdout);
        Some(crate::hosts::Hosts::start(
            &args.hosts,
            &forward::remote_command(&args),
            "trace-cli: recording",
            &dir,
            &stem,
        )?)
    } else {
        None
    };
    // A remote machine of a test with an offset on its clock.
    let shifted = args.stop_on_stdin_eof && to_stdout && crate::hosts::test_offset_ns() != 0;
    let mut shifter = None;
    // Watched from now on, so that a pid reused later is not taken for
    // them.
    let targets = (args.command.is_empty() && !args.keep_going)
        .then(|| targets::Targets::watch(&args.pids))
        .transpose()?
        .filter(|_| !args.pids.is_empty());
    let mut conn = connect(needs_kernel)?;
    let mut windowed = None;
    let (output, rotation) = match args.rotate {
        None if args.pre.is_some() => {
            let pre = seconds(args.pre.unwrap_or_default())?;
            let (output, w) = window::start(args.output.clone(), pre, seconds(args.post)?)?;
            windowed = Some(w);
            (Pending::Made(output), None)
        }
        Some(limit) => {
            let (output, rotation) = rotation::start(trace_split::Rotation {
                base: args.output.clone(),
                limit,
                max_files: args.max_files.map(|n| n as usize),
            })?;
            (Pending::Made(output), Some(rotation))
        }
        None if shifted => {
            let (fd, thread) =
                crate::hosts::remote_side::shift_output(crate::hosts::test_offset_ns())?;
            shifter = Some(thread);
            (Pending::Made(fd), None)
        }
        None => match &hosts {
            // This machine's part waits beside the output for the merge.
            Some(h) => (
                Pending::Plain(output::Output::open(&h.local_spool(), false)?),
                None,
            ),
            None => (
                Pending::Plain(output::Output::open(&args.output, to_stdout)?),
                None,
            ),
        },
    };
    // A delayed start: the command runs now and is followed by its pid once
    // recording starts.
    let mut early_child = None;
    if let Some(delay) = args.start_delay.map(seconds).transpose()? {
        if let Some((program, rest)) = args.command.split_first() {
            let child = match start_command(program, rest, None, to_stdout)? {
                Ok(child) => child,
                // Nothing is recorded yet.
                Err(status) => return Ok(ExitCode::from(status)),
            };
            if let (Some(pids), Some(pid)) = (config.pids.as_mut(), child.id()) {
                pids.push(pid);
            }
            early_child = Some(child);
        }
        eprintln!(
            "trace-cli: recording starts in {:.1} s",
            delay.as_secs_f64()
        );
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            _ = interrupted.wait_for(|&n| n > 0) => bail!("interrupted before recording started"),
        }
    }

    initialize(&mut conn, &config, output.fd(), needs_kernel).await?;
    let output = output.granted()?;
    // A file (also standard output redirected to one) is cut back to its
    // last whole record if writing fails; a pipe's reader has what it read.
    let output_is_file = File::from(output).metadata().is_ok_and(|m| m.is_file());
    // The manager holds the pipe's other end now: the rotation ends when
    // the manager closes it.
    let ctl = &mut conn.ctl;
    match ctl
        .call(Request::StartTracing(StartOptions::default()), None)
        .await?
    {
        Reply::StartResult(Ok(())) => {}
        Reply::StartResult(Err(e)) => bail!("starting: {e}"),
        other => return Err(failed("starting", other)),
    }
    if let Some(h) = hosts.as_mut() {
        h.wait_ready().await?;
    }

    let launched = command::launch(ctl, early_child, &args.command, &config, to_stdout).await?;
    // A command that could not be run ends the recording at once, with the
    // status a shell gives for it.
    let unrunnable = launched.as_ref().err().map(|&status| {
        use std::os::unix::process::ExitStatusExt as _;
        std::process::ExitStatus::from_raw(i32::from(status) << 8)
    });
    let mut child = launched.unwrap_or(None);
    let duration = args.duration.map(seconds).transpose()?;
    // Printed once every provider is attached: scripts may wait for it.
    if child.is_none() && duration.is_none() {
        eprintln!("trace-cli: recording; press Ctrl-C to stop");
    } else {
        eprintln!("trace-cli: recording");
    }

    let reason = match unrunnable {
        Some(status) => StopReason::CommandExited(Some(status)),
        None => {
            let other = async {
                match hosts.as_mut() {
                    Some(h) => StopReason::HostTrigger(h.triggered().await),
                    None if args.stop_on_stdin_eof => {
                        crate::hosts::remote_side::stdin_closed().await;
                        StopReason::Asked
                    }
                    None => std::future::pending().await,
                }
            };
            run_loop::wait_for_stop(
                ctl,
                child.as_mut(),
                targets.as_ref(),
                duration,
                &mut interrupted,
                &args.triggers,
                other,
            )
            .await?
        }
    };
    // Also after an abort: the session ends, and a deferred trace's staged
    // records are still written out.
    if let (StopReason::Trigger(_), Some(w)) = (&reason, &windowed) {
        w.fired();
    }
    if let StopReason::Trigger(alert) = &reason
        && args.post > 0.0
    {
        let post = seconds(args.post)?;
        eprintln!(
            "trace-cli: {alert:?} fired; recording {:.1} s more",
            post.as_secs_f64()
        );
        tokio::select! {
            () = tokio::time::sleep(post) => {}
            _ = interrupted.wait_for(|&n| n > 0) => {}
        }
    }
    if let StopReason::HostTrigger(why) = &reason {
        eprintln!("trace-cli: stopped: {why}");
    }
    if let Some(h) = hosts.as_mut() {
        h.stop();
    }
    let ended = ctl.call(Request::TerminateTracing, None).await?;
    drop(conn.ctl);
    if let Some(task) = conn.embedded {
        let _ = task.await;
        // The probes it placed are closed before this process exits.
        let open = trace_manager::probes_detaching();
        if open > 0 {
            eprintln!("trace-cli: removing {open} probes (the kernel takes a while for each)");
        }
        trace_manager::wait_probes_detached();
    }
    if let Some(t) = shifter {
        t.join()
            .map_err(|_| anyhow::anyhow!("the clock shift failed"))?
            .context("writing the shifted trace")?;
    }
    if let StopReason::TargetsExited = &reason {
        eprintln!(
            "trace-cli: {} exited: recording stopped (--keep-going records on after it)",
            if args.pids.len() == 1 {
                format!("process {}", args.pids[0])
            } else {
                "every process of -p".to_owned()
            }
        );
    }
    if let StopReason::Trigger(alert) = &reason {
        if trace_manager::is_kernel_trigger(alert) {
            eprintln!("trace-cli: stopped by trigger {alert:?}");
        } else {
            eprintln!("trace-cli: stopped by alert {alert:?}");
        }
    }

    let command = command::outcome(&reason, child.as_mut()).await;
    let destination = if to_stdout {
        "standard output".to_owned()
    } else if let Some(rotation) = &rotation {
        rotation.destination()
    } else {
        args.output.display().to_string()
    };
    let rotated = match rotation {
        Some(r) => Some(r.finish().await?),
        None => None,
    };
    if let Some(w) = windowed {
        let pre = args.pre.unwrap_or_default();
        let kept = w.finish().await?;
        eprintln!(
            "trace-cli: kept from {pre} s before the {}: {} records, {} bytes -> {}",
            if matches!(reason, StopReason::Trigger(_)) {
                "trigger"
            } else {
                "end"
            },
            kept.records,
            kept.bytes,
            args.output.display()
        );
    }
    let mut cause = rotated
        .as_ref()
        .and_then(|r| r.error.as_ref())
        .map(|e| format!("the rotation stopped: {e}"));
    let code = summary::report(
        &reason,
        ended,
        &destination,
        output_is_file || rotated.is_some(),
        command,
        &mut cause,
    )?;
    if let Some(h) = hosts {
        if to_stdout {
            h.finish(&mut std::io::stdout().lock(), &destination)?;
        } else {
            let file = File::create(&args.output)
                .with_context(|| format!("cannot create {}", args.output.display()))?;
            h.finish(&mut std::io::BufWriter::new(file), &destination)?;
        }
    }
    if let Some(rotated) = rotated {
        // Its failure is said here unless it was the recording's.
        rotation::report(&rotated, cause.is_some());
        if rotated.error.is_some() {
            return Ok(ExitCode::FAILURE);
        }
    }
    Ok(code)
}

/// The output descriptor before the session is granted.
enum Pending {
    /// The `-o` file or standard output.
    Plain(output::Output),
    /// A descriptor the rotation or the window reads from.
    Made(OwnedFd),
}

impl Pending {
    fn fd(&self) -> &OwnedFd {
        match self {
            Pending::Plain(o) => o.fd(),
            Pending::Made(fd) => fd,
        }
    }

    /// The session was granted: the descriptor, the path taken.
    fn granted(self) -> Result<OwnedFd> {
        match self {
            Pending::Plain(o) => o.granted(),
            Pending::Made(fd) => Ok(fd),
        }
    }
}

/// Initializes the session on `conn`, writing to `output`. When another
/// `trace-cli record` runs the manager, a manager run here records the
/// kernel alone; a recording of userspace providers only (not
/// `needs_kernel`) fails instead.
async fn initialize(
    conn: &mut Connection,
    config: &TraceConfig,
    output: &OwnedFd,
    needs_kernel: bool,
) -> Result<()> {
    let mut reply = conn
        .ctl
        .call(
            Request::InitializeTracing(config.clone()),
            Some(output.as_fd()),
        )
        .await?;
    if let Reply::Failed {
        code: fail::EMBEDDED,
        message,
        ..
    } = &reply
    {
        // Another `trace-cli record` owns the providers; the kernel is
        // still ours.
        if !needs_kernel {
            bail!("{message}; no userspace provider can be recorded now");
        }
        eprintln!("trace-cli: warning: {message}; recording without userspace providers");
        check_privileges()?;
        *conn = embed(Manager::bind(None, true)?)?;
        reply = conn
            .ctl
            .call(
                Request::InitializeTracing(config.clone()),
                Some(output.as_fd()),
            )
            .await?;
    }
    match reply {
        Reply::Initialized => Ok(()),
        Reply::Failed {
            code: fail::SESSION_ACTIVE,
            message,
            ..
        } => bail!("{message}; try again when it ends"),
        other => Err(failed("initializing", other)),
    }
}

/// `s` seconds; an error when it is too long to wait for.
fn seconds(s: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(s).with_context(|| format!("{s} seconds is no duration"))
}

/// How many times SIGINT or SIGTERM came (the first ends the recording);
/// the second ends the process at once.
fn interruptions() -> Result<tokio::sync::watch::Receiver<u32>> {
    let mut sigint = signal(SignalKind::interrupt()).context("installing a SIGINT handler")?;
    let mut sigterm = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
    let (tx, rx) = tokio::sync::watch::channel(0u32);
    tokio::task::spawn_local(async move {
        loop {
            tokio::select! {
                _ = sigint.recv() => {}
                _ = sigterm.recv() => {}
            }
            let n = *tx.borrow() + 1;
            if n >= 2 {
                eprintln!("trace-cli: interrupted again; the trace may be incomplete");
                std::process::exit(130);
            }
            let _ = tx.send(n);
        }
    });
    Ok(rx)
}
