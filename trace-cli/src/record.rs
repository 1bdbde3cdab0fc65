//! `trace-cli record`: record a trace through the trace manager daemon, or
//! through a manager run in this process when no daemon is running.

use std::fs::File;
use std::os::fd::{AsFd as _, AsRawFd as _, OwnedFd};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use tokio::process::Command;
use tokio::signal::unix::{SignalKind, signal};
use trace_common::category::KERNEL_CATEGORIES;
use trace_common::controller::{
    ProviderSpec, Reply, Request, StartOptions, Status, TraceConfig, fail,
};
use trace_common::provider::BufferingMode;
use trace_manager::client::Controller;
use trace_manager::service::{Manager, ManagerError};
use trace_manager::session::kernel_categories;
use trace_manager::userspace::UserspaceError;

/// Arguments of `trace-cli record`.
#[derive(Args)]
pub struct RecordArgs {
    /// Where to write the trace; `-` streams it to standard output as it is
    /// recorded (a COMMAND's own output then goes to standard error).
    #[arg(short, long, default_value = "trace.fxt")]
    output: PathBuf,
    /// Stop after this many seconds (fractions allowed).
    #[arg(short, long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Categories to record, comma-separated; may repeat; globs like `kernel:*`
    /// work. Default: all.
    #[arg(
        short,
        long = "categories",
        value_name = "CAT,CAT...",
        value_delimiter = ','
    )]
    categories: Vec<String>,
    /// Size of the kernel ring buffer in megabytes (fractions allowed; it
    /// is rounded up to a power of two pages).
    #[arg(
        short = 'b',
        long = "buffer-size",
        value_name = "MEGABYTES",
        default_value_t = 64.0
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
    /// or be comma-separated.
    #[arg(short = 'p', long = "pid", value_name = "PID", value_delimiter = ',')]
    pids: Vec<u32>,
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
    /// Stop when a userspace provider raises this alert
    /// (`trace_provider::alert`, `trace_provider_alert`); may repeat.
    #[arg(long = "trigger", value_name = "ALERT")]
    triggers: Vec<String>,
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
    /// Run this command and stop when it exits. Kernel events are recorded
    /// for its process tree only (and the `--pid` processes), unless
    /// `--all-processes`.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

pub fn run(args: RecordArgs) -> Result<ExitCode> {
    if let Some(d) = args.duration
        && !(d.is_finite() && d > 0.0)
    {
        bail!("the duration must be a positive number of seconds, not {d}");
    }
    if let Some(d) = args.start_delay
        && !(d.is_finite() && d >= 0.0)
    {
        bail!("the start delay must be a number of seconds, 0 or more, not {d}");
    }
    if !(args.start_timeout.is_finite() && args.start_timeout >= 0.0) {
        bail!("the start timeout must be a number of seconds, 0 or more");
    }
    if !(args.buffer_megabytes > 0.0 && args.buffer_megabytes <= 4096.0) {
        bail!("the buffer size must be more than 0 and at most 4096 megabytes");
    }
    let categories: Vec<String> = args
        .categories
        .iter()
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty())
        .collect();
    for pattern in &categories {
        let kernel = pattern.starts_with("kernel");
        if kernel && !kernel_categories(std::slice::from_ref(pattern)).is_empty() {
            continue;
        }
        let hint = crate::categories::suggest(pattern);
        if kernel {
            let known: Vec<_> = KERNEL_CATEGORIES.iter().map(|(n, _)| *n).collect();
            match hint {
                Some(meant) => bail!(
                    "category {pattern:?} matches no known category; did you mean {meant:?}? \
                     (`trace-cli categories` lists them)"
                ),
                None => bail!(
                    "category {pattern:?} matches no known category (known: {})",
                    known.join(", ")
                ),
            }
        }
        // Userspace providers name their own categories, so this is no
        // error; but a kernel category without its prefix likely is one.
        if let Some(meant) = hint {
            eprintln!(
                "trace-cli: warning: {pattern:?} is not a kernel category and goes to userspace \
                 providers only; did you mean {meant:?}?"
            );
        }
    }
    if let Some(&pid) = args
        .pids
        .iter()
        .find(|&&p| p == 0 || !std::path::Path::new(&format!("/proc/{p}")).is_dir())
    {
        bail!("no process with id {pid}");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    // A manager run here lives on this thread beside the client.
    let local = tokio::task::LocalSet::new();
    runtime.block_on(local.run_until(record(args, categories)))
}

/// ` (cpu0 N, cpu1 M, other K)` when anything was dropped: where.
fn per_cpu_drops(per_cpu: &[(u32, u64)], total: u64) -> String {
    if total == 0 {
        return String::new();
    }
    let mut parts: Vec<String> = per_cpu
        .iter()
        .map(|(cpu, n)| format!("cpu{cpu} {n}"))
        .collect();
    let other = total.saturating_sub(per_cpu.iter().map(|&(_, n)| n).sum());
    if other > 0 {
        parts.push(format!("other {other}"));
    }
    format!(" ({})", parts.join(", "))
}

/// How often the progress line is redrawn (and alerts looked at).
const PROGRESS_TICK: Duration = Duration::from_millis(250);

/// The live status line on a terminal: elapsed time, events, bytes,
/// drops, providers. Nothing when standard error is not a terminal.
struct ProgressLine {
    bar: Option<indicatif::ProgressBar>,
}

impl ProgressLine {
    fn new() -> Self {
        use std::io::IsTerminal as _;
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::with_draw_target(
                None,
                indicatif::ProgressDrawTarget::stderr_with_hz(4),
            );
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            bar
        });
        ProgressLine { bar }
    }

    /// Whether the line is drawn (standard error is a terminal).
    fn shown(&self) -> bool {
        self.bar.is_some()
    }

    fn update(&self, p: &Status) {
        let Some(bar) = &self.bar else { return };
        let mut msg = format!(
            "{:.1} s  {} kernel events  {:.1} MiB written  {} dropped  kernel buffers {:.0}% full",
            Duration::from_nanos(p.elapsed_ns).as_secs_f64(),
            p.kernel_events,
            p.bytes as f64 / (1024.0 * 1024.0),
            p.dropped,
            f64::from(p.kernel_fill_permille) / 10.0
        );
        if p.providers > 0 {
            msg.push_str(&format!(
                "  {} providers ({} tracing)",
                p.providers, p.providers_started
            ));
        }
        for q in &p.provider_progress {
            msg.push_str(&format!(
                "  {} {:.0}%",
                q.name,
                f64::from(q.fill_permille) / 10.0
            ));
            if q.dropped > 0 {
                msg.push_str(&format!(" ({} dropped)", q.dropped));
            }
        }
        bar.set_message(msg);
        bar.tick();
    }

    /// Prints `line` above the progress line (or alone).
    fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// The manager a recording talks to: a daemon's, or one run here.
pub struct Connection {
    /// The connection.
    pub ctl: Controller,
    /// The embedded manager's task; it ends when `ctl` is dropped.
    pub embedded: Option<tokio::task::JoinHandle<()>>,
}

/// Connects to the daemon on the manager socket, else runs a manager here
/// that listens there (so providers register with it). `needs_kernel`:
/// without a daemon, the privileges to load eBPF programs are checked.
pub fn connect(needs_kernel: bool) -> Result<Connection> {
    let path = trace_manager::userspace::socket_path();
    match Controller::connect(&path) {
        Ok(ctl) => {
            log::info!("using the trace manager on {}", path.display());
            return Ok(Connection {
                ctl,
                embedded: None,
            });
        }
        // A daemon's socket this user may not use: saying that root or
        // CAP_BPF are needed would send them the wrong way (and a manager
        // run here could not take the path either).
        Err(e @ trace_manager::client::ClientError::Refused { .. }) => return Err(e.into()),
        Err(_) => {}
    }
    if needs_kernel {
        check_privileges()?;
    }
    match Manager::bind(Some(path.clone()), true) {
        Ok(manager) => embed(manager),
        // Another manager holds the socket: it may still be starting.
        Err(ManagerError::Socket(UserspaceError::Busy(_))) => {
            let deadline = std::time::Instant::now() + Duration::from_secs(3);
            loop {
                match Controller::connect(&path) {
                    Ok(ctl) => {
                        return Ok(Connection {
                            ctl,
                            embedded: None,
                        });
                    }
                    Err(e) if std::time::Instant::now() >= deadline => return Err(e.into()),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// Runs `manager` in this process and connects to it.
pub fn embed(mut manager: Manager) -> Result<Connection> {
    let fd = manager.local_client()?;
    // The manager is not Send: it runs on this thread (see `run`).
    let embedded = tokio::task::spawn_local(manager.run());
    Ok(Connection {
        ctl: Controller::from_fd(fd)?,
        embedded: Some(embedded),
    })
}

/// The failure in `reply`, as an error for the user.
fn failed(what: &str, reply: Reply) -> anyhow::Error {
    match reply {
        Reply::Failed { message, .. } => anyhow::anyhow!("{message}"),
        other => anyhow::anyhow!("{what}: unexpected answer from the trace manager: {other:?}"),
    }
}

/// A relative `BINARY` in a `BINARY:...` probe spec made absolute, so a
/// manager elsewhere finds the same file.
fn absolute_spec(spec: &str) -> String {
    let Some((binary, rest)) = spec.split_once(':') else {
        return spec.to_owned();
    };
    if binary.contains('/')
        && !binary.starts_with('/')
        && let Ok(abs) = std::path::absolute(binary)
    {
        return format!("{}:{rest}", abs.display());
    }
    spec.to_owned()
}

async fn record(args: RecordArgs, categories: Vec<String>) -> Result<ExitCode> {
    // From here on Ctrl-C ends the recording with a complete file, even one
    // pressed while it is being set up; a second one ends trace-cli at once.
    let mut interrupted = interruptions()?;
    let to_stdout = args.output.as_os_str() == "-";
    let mut specs = Vec::new();
    for spec in &args.provider_buffers {
        let (name, size) = spec
            .split_once('=')
            .and_then(|(n, s)| Some((n.to_owned(), s.trim().parse::<u32>().ok()?)))
            .filter(|(_, s)| (1..=4096).contains(s))
            .with_context(|| {
                format!("--provider-buffer wants NAME=MEGABYTES (1-4096), not {spec:?}")
            })?;
        specs.push(ProviderSpec {
            name,
            buffer_size_megabytes_hint: size,
            categories: Vec::new(),
        });
    }
    if args.provider_buffer_size == 0 || args.provider_buffer_size > 4096 {
        bail!("the provider buffer size must be between 1 and 4096 megabytes");
    }
    let mut config = TraceConfig {
        categories: categories.clone(),
        buffer_size_megabytes_hint: args.provider_buffer_size,
        start_timeout_milliseconds: (args.start_timeout * 1000.0) as u64,
        buffering_mode: BufferingMode::from_name(&args.buffering_mode)
            .unwrap_or(BufferingMode::Oneshot),
        provider_specs: specs,
        version: trace_common::controller::FXT_VERSION,
        defer_transfer: args.defer_transfer,
        kernel_buffer_bytes: (args.buffer_megabytes * 1024.0 * 1024.0) as u64,
        kernel_buffering_mode: BufferingMode::from_name(&args.kernel_buffering_mode)
            .unwrap_or(BufferingMode::Streaming),
        pids: if !args.pids.is_empty() || (!args.command.is_empty() && !args.all_processes) {
            Some(args.pids.clone())
        } else {
            None
        },
        uprobes: args.uprobes.iter().map(|s| absolute_spec(s)).collect(),
        usdt: args.usdt.iter().map(|s| absolute_spec(s)).collect(),
    };
    let needs_kernel = categories.is_empty()
        || !kernel_categories(&categories).is_empty()
        || !config.uprobes.is_empty()
        || !config.usdt.is_empty();

    let mut conn = connect(needs_kernel)?;
    let output: OwnedFd = if to_stdout {
        use std::io::IsTerminal as _;
        if std::io::stdout().is_terminal() {
            bail!("-o - writes the binary trace to standard output: pipe or redirect it");
        }
        std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .context("duplicating standard output")?
    } else {
        File::create(&args.output)
            .with_context(|| format!("cannot create {}", args.output.display()))?
            .into()
    };
    // A delayed start: the command runs now and is followed by its pid once
    // recording starts.
    let mut early_child = None;
    if let Some(delay) = args.start_delay.map(seconds).transpose()? {
        if let Some((program, rest)) = args.command.split_first() {
            let child = start_command(program, rest, None, to_stdout)?;
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
        conn = embed(Manager::bind(None, true)?)?;
        reply = conn
            .ctl
            .call(
                Request::InitializeTracing(config.clone()),
                Some(output.as_fd()),
            )
            .await?;
    }
    match reply {
        Reply::Initialized => {}
        Reply::Failed {
            code: fail::SESSION_ACTIVE,
            message,
            ..
        } => bail!("{message}; try again when it ends"),
        other => return Err(failed("initializing", other)),
    }
    // A file (also standard output redirected to one) is cut back to its
    // last whole record if writing fails; a pipe's reader has what it read.
    let output_is_file = File::from(output).metadata().is_ok_and(|m| m.is_file());
    let ctl = &mut conn.ctl;
    match ctl
        .call(Request::StartTracing(StartOptions::default()), None)
        .await?
    {
        Reply::StartResult(Ok(())) => {}
        Reply::StartResult(Err(e)) => bail!("starting: {e}"),
        other => return Err(failed("starting", other)),
    }

    let mut child = match (early_child, args.command.split_first()) {
        (Some(child), _) => {
            if let Some(pid) = child.id() {
                // Names it; it may have exited during the wait.
                follow(ctl, pid).await?;
            }
            Some(child)
        }
        (None, Some((program, rest))) => {
            let release = config.pids.is_some().then(Release::new).transpose()?;
            let child = start_command(program, rest, release.as_ref(), to_stdout)?;
            if let Some(release) = release {
                if let Some(pid) = child.id() {
                    // Followed before it runs its first instruction.
                    follow(ctl, pid).await?;
                }
                release.go();
            }
            Some(child)
        }
        (None, None) => None,
    };
    let duration = args.duration.map(seconds).transpose()?;
    // Printed once every provider is attached: scripts may wait for it.
    if child.is_none() && duration.is_none() {
        eprintln!("trace-cli: recording; press Ctrl-C to stop");
    } else {
        eprintln!("trace-cli: recording");
    }

    let mut watch = ctl.send(Request::WatchAlert, None)?;
    let reason = {
        let stop = async {
            let deadline = async {
                match duration {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            let exited = async {
                match child.as_mut() {
                    Some(c) => Some(c.wait().await),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = deadline => StopReason::Duration,
                status = exited => StopReason::CommandExited(status.and_then(|s| s.ok())),
                _ = interrupted.wait_for(|&n| n > 0) => StopReason::Signal,
            }
        };
        tokio::pin!(stop);
        let progress = ProgressLine::new();
        let mut tick = tokio::time::interval(PROGRESS_TICK);
        let reason = loop {
            let mut news = Vec::new();
            tokio::select! {
                reason = &mut stop => break reason,
                m = ctl.recv() => news.push(m?),
                _ = tick.tick() => {
                    if progress.shown() {
                        let status =
                            tokio::time::timeout(PROGRESS_TICK * 8, ctl.call(Request::GetStatus, None));
                        match status.await {
                            Ok(Ok(Reply::Status(s))) => progress.update(&s),
                            Ok(Ok(other)) => return Err(failed("asking for the status", other)),
                            Ok(Err(e)) => return Err(e.into()),
                            // A busy manager: the line waits.
                            Err(_) => {}
                        }
                    }
                }
            }
            news.extend(ctl.take_early());
            let mut triggered = None;
            let mut aborted = None;
            for m in news {
                match m.body {
                    Reply::Alert { name, provider } => {
                        progress.println(&format!(
                            "trace-cli: provider {provider:?} raised alert {name:?}"
                        ));
                        if triggered.is_none() && args.triggers.contains(&name) {
                            triggered = Some(name);
                        }
                        watch = ctl.send(Request::WatchAlert, None)?;
                    }
                    Reply::StateChanged(_) => {}
                    // The session failed (its output, say): nothing more
                    // is recorded, so nothing more is waited for.
                    Reply::Failed {
                        code: fail::ABORTED,
                        message,
                        ..
                    } if m.txid == 0 => {
                        aborted.get_or_insert(message);
                    }
                    Reply::Failed { message, .. } => bail!("{message}"),
                    other if m.txid == watch => return Err(failed("watching alerts", other)),
                    _ => {}
                }
            }
            if let Some(why) = aborted {
                break StopReason::Aborted(why);
            }
            if let Some(alert) = triggered {
                break StopReason::Trigger(alert);
            }
        };
        progress.finish();
        reason
    };
    // Also after an abort: the session ends, and a deferred trace's staged
    // records are still written out.
    let ended = ctl.call(Request::TerminateTracing, None).await?;
    drop(conn.ctl);
    if let Some(task) = conn.embedded {
        let _ = task.await;
    }
    if let StopReason::Trigger(alert) = &reason {
        eprintln!("trace-cli: stopped by alert {alert:?}");
    }

    // What became of the command, said last.
    let command = match (&reason, child.as_mut()) {
        (StopReason::CommandExited(Some(status)), _) if !status.success() => {
            Some(format!("trace-cli: the command exited with {status}"))
        }
        (StopReason::CommandExited(_), _) | (_, None) => None,
        // The recording failed, not the command: it is left to finish
        // (not killed, not waited for), and the user told which it is.
        (StopReason::Aborted(_), Some(c)) => match (c.try_wait(), c.id()) {
            (Ok(None), Some(pid)) => Some(format!(
                "trace-cli: the command (pid {pid}) is still running; it is no longer \
                 recorded, and trace-cli does not wait for it"
            )),
            (Ok(Some(status)), _) if !status.success() => {
                Some(format!("trace-cli: the command exited with {status}"))
            }
            _ => None,
        },
        // The recording ended first: the command is not left behind.
        (_, Some(c)) => {
            let _ = c.start_kill();
            let _ = c.wait().await;
            None
        }
    };
    let destination = if to_stdout {
        "standard output".to_owned()
    } else {
        args.output.display().to_string()
    };
    let why = match (&reason, ended) {
        // Said the moment it happened; the termination's answer repeats it.
        (StopReason::Aborted(why), _) => why.clone(),
        (_, Reply::Terminated(stats)) => {
            print_summary(&stats, &destination);
            if let Some(line) = command {
                eprintln!("{line}");
            }
            return Ok(ExitCode::SUCCESS);
        }
        // Writing the last records failed (the disk filled, say).
        (
            _,
            Reply::Failed {
                code: fail::ABORTED,
                message,
                ..
            },
        ) => message,
        (_, other) => return Err(failed("ending the recording", other)),
    };
    eprintln!("trace-cli: recording failed: {why}");
    if output_is_file {
        eprintln!("trace-cli: {destination} holds what was recorded until then, in whole records");
    }
    if let Some(line) = command {
        eprintln!("{line}");
    }
    Ok(ExitCode::FAILURE)
}

/// The summary of a recording that ended well.
fn print_summary(stats: &trace_common::controller::StopResult, destination: &str) {
    use trace_common::controller::KernelCount;
    let k = &stats.kernel;
    // Every kind but the name records, in this order (tests read it); then
    // any tracepoint selected by name.
    let shown = [
        KernelCount::Switches,
        KernelCount::Wakeups,
        KernelCount::ProcessEvents,
        KernelCount::SystemCalls,
        KernelCount::Interrupts,
        KernelCount::BlockRequests,
        KernelCount::MemoryEvents,
        KernelCount::ProbeHits,
        KernelCount::UsdtEvents,
    ];
    let named = k
        .counts
        .iter()
        .filter(|(kind, _)| matches!(kind, KernelCount::Tracepoint(_)))
        .map(|(kind, _)| kind.clone());
    let counts: Vec<String> = shown
        .into_iter()
        .chain(named)
        .map(|kind| format!("{} {}", k.count(&kind), kind.label()))
        .collect();
    eprintln!(
        "trace-cli: {} kernel events ({}) in {:.1} s, {} records, {} bytes, {} dropped{}{}{} -> {}",
        k.events,
        counts.join(", "),
        Duration::from_nanos(stats.traced_ns).as_secs_f64(),
        stats.records,
        stats.bytes,
        k.dropped,
        per_cpu_drops(&k.dropped_per_cpu, k.dropped),
        if k.malformed > 0 {
            format!(", {} malformed", k.malformed)
        } else {
            String::new()
        },
        providers_summary(&stats.provider_stats),
        destination
    );
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

/// Asks the manager to follow process `pid`.
async fn follow(ctl: &mut Controller, pid: u32) -> Result<()> {
    match ctl.call(Request::Follow { pid }, None).await? {
        Reply::Followed => Ok(()),
        // It may have exited already.
        Reply::Failed { message, .. } => {
            log::debug!("following the command: {message}");
            Ok(())
        }
        other => Err(failed("following the command", other)),
    }
}

fn providers_summary(p: &[trace_common::controller::ProviderStats]) -> String {
    let p: Vec<_> = p
        .iter()
        .filter(|s| s.id != trace_manager::session::KERNEL_PROVIDER_ID)
        .collect();
    if p.is_empty() {
        return String::new();
    }
    let records: u64 = p.iter().map(|s| s.records_written).sum();
    let dropped: u64 = p.iter().map(|s| s.records_dropped).sum();
    let late = p.iter().filter(|s| !s.started).count();
    format!(
        "; {} userspace provider{} ({} records, {} dropped{})",
        p.len(),
        if p.len() == 1 { "" } else { "s" },
        records,
        dropped,
        if late > 0 {
            format!(", {late} did not start in time")
        } else {
            String::new()
        }
    )
}

/// Holds a started command back until [`Release::go`]: the command is
/// `trace-cli` itself at first, which waits on a pipe and then becomes the
/// command (same pid), so the manager can follow it before it runs.
struct Release {
    read: OwnedFd,
    write: OwnedFd,
}

/// The environment variable that tells `trace-cli` to wait and become the
/// command.
pub const RELEASE_FD_ENV: &str = "TRACE_CLI_RELEASE_FD";

impl Release {
    fn new() -> Result<Release> {
        // The read end is inherited by the child; the write end is not.
        let (read, write) = nix::unistd::pipe().context("creating a pipe")?;
        nix::fcntl::fcntl(
            write.as_raw_fd(),
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )
        .context("creating a pipe")?;
        Ok(Release { read, write })
    }

    fn go(self) {
        let _ = nix::unistd::write(&self.write, b"g");
    }
}

/// In the child of [`Release`]: waits for the go, then becomes the command
/// (`args`). Returns only on failure.
pub fn wait_and_exec(fd: &str, args: &[std::ffi::OsString]) -> ExitCode {
    use std::os::unix::process::CommandExt as _;
    let Ok(fd) = fd.parse::<std::os::fd::RawFd>() else {
        return ExitCode::FAILURE;
    };
    // SAFETY: the parent passed this descriptor for this process to own.
    let read = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let mut go = [0u8; 1];
    // The parent went away without a go: the command does not run.
    if !matches!(nix::unistd::read(read.as_raw_fd(), &mut go), Ok(1)) {
        return ExitCode::FAILURE;
    }
    drop(read);
    let Some((program, rest)) = args.split_first() else {
        return ExitCode::FAILURE;
    };
    let e = std::process::Command::new(program)
        .args(rest)
        .env_remove(RELEASE_FD_ENV)
        .exec();
    eprintln!("trace-cli: cannot run {program:?}: {e}");
    ExitCode::from(127)
}

/// Starts `program` with `args`. With `release`, it waits for
/// [`Release::go`] before it runs.
fn start_command(
    program: &str,
    args: &[String],
    release: Option<&Release>,
    stdout_to_stderr: bool,
) -> Result<tokio::process::Child> {
    let mut cmd = match release {
        Some(r) => {
            let me = std::env::current_exe().context("finding trace-cli's own program")?;
            let mut cmd = Command::new(me);
            cmd.env(RELEASE_FD_ENV, r.read.as_raw_fd().to_string())
                .arg(program)
                .args(args);
            cmd
        }
        None => {
            let mut cmd = Command::new(program);
            cmd.args(args);
            cmd
        }
    };
    if stdout_to_stderr {
        let stderr = std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .context("duplicating standard error for the command")?;
        cmd.stdout(std::process::Stdio::from(stderr));
    }
    cmd.spawn()
        .with_context(|| format!("cannot run {program:?}"))
}

enum StopReason {
    Duration,
    Trigger(String),
    CommandExited(Option<std::process::ExitStatus>),
    Signal,
    /// The manager aborted the session (why): its output failed, say.
    Aborted(String),
}

/// Fails with one sentence when the process cannot load eBPF programs.
fn check_privileges() -> Result<()> {
    if nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    match missing_privileges(effective_capabilities().unwrap_or(0)) {
        None => Ok(()),
        Some(what) => bail!(
            "recording needs root, or the CAP_BPF and CAP_PERFMON capabilities, to load the kernel \
             trace provider: {what}; run it with sudo"
        ),
    }
}

/// What a process that is not root lacks to record, given its effective
/// capabilities; `None` when it has enough.
fn missing_privileges(caps: u64) -> Option<String> {
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let has = |c: u32| caps & (1u64 << c) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return None;
    }
    Some(
        match (has(CAP_BPF), has(CAP_PERFMON)) {
            (true, _) => "this process has CAP_BPF but lacks CAP_PERFMON",
            (_, true) => "this process has CAP_PERFMON but lacks CAP_BPF",
            _ => "this process is not root and has neither",
        }
        .to_owned(),
    )
}

fn effective_capabilities() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_privileges_are_named() {
        let cap = |c: u32| 1u64 << c;
        assert_eq!(missing_privileges(cap(21)), None);
        assert_eq!(missing_privileges(cap(38) | cap(39)), None);
        assert!(
            missing_privileges(cap(39))
                .unwrap()
                .contains("lacks CAP_PERFMON")
        );
        assert!(
            missing_privileges(cap(38))
                .unwrap()
                .contains("lacks CAP_BPF")
        );
        assert!(missing_privileges(0).unwrap().contains("neither"));
    }
}
