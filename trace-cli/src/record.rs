//! `trace-cli record`: record a trace with an embedded manager.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use tokio::process::Command;
use tokio::signal::unix::{SignalKind, signal};
use trace_common::category::KERNEL_CATEGORIES;
use trace_common::provider::BufferingMode;
use trace_manager::kernel::{FollowHook, KernelError};
use trace_manager::recording::{RecordConfig, RecordError, Recording, kernel_categories};
use trace_manager::usdt::UsdtSite;
use trace_manager::userspace::UserspaceConfig;

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
    if categories.is_empty() || !kernel_categories(&categories).is_empty() {
        check_privileges()?;
    }
    if let Some(&pid) = args
        .pids
        .iter()
        .find(|&&p| p == 0 || !std::path::Path::new(&format!("/proc/{p}")).is_dir())
    {
        bail!("no process with id {pid}");
    }
    if !args.uprobes.is_empty() || !args.usdt.is_empty() {
        check_privileges()?;
    }

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(record(args, categories))
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

/// Every site of every `--usdt` probe in the `pids` processes (every
/// process when empty), each spec matching at least one.
fn resolve_usdt(specs: &[String], pids: &[u32]) -> Result<Vec<UsdtSite>> {
    let mut sites: Vec<UsdtSite> = Vec::new();
    for spec in specs {
        let found = trace_manager::usdt::resolve_in(spec, pids)?;
        log::info!("--usdt {spec}: {} sites", found.len());
        for site in found {
            // A site two specs match is placed once (else each pass would
            // be recorded twice), as the first spec says.
            if let Some(first) = sites
                .iter()
                .find(|s| s.binary == site.binary && s.offset == site.offset && s.pids == site.pids)
            {
                log::warn!(
                    "--usdt {spec}: {} is already recorded as --usdt {}",
                    site.event_name(),
                    first.spec
                );
                continue;
            }
            sites.push(site);
        }
    }
    Ok(sites)
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

    fn update(&self, p: &trace_manager::recording::Progress) {
        let Some(bar) = &self.bar else { return };
        let mut msg = format!(
            "{:.1} s  {} kernel events  {:.1} MiB written  {} dropped  kernel buffers {:.0}% full",
            p.elapsed.as_secs_f64(),
            p.kernel_events,
            p.bytes as f64 / (1024.0 * 1024.0),
            p.dropped,
            p.kernel_fill * 100.0
        );
        if p.providers.0 > 0 {
            msg.push_str(&format!(
                "  {} providers ({} tracing)",
                p.providers.0, p.providers.1
            ));
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

async fn record(args: RecordArgs, categories: Vec<String>) -> Result<ExitCode> {
    let to_stdout = args.output.as_os_str() == "-";
    let sink: Box<dyn Write> = if to_stdout {
        use std::io::IsTerminal as _;
        if std::io::stdout().is_terminal() {
            bail!("-o - writes the binary trace to standard output: pipe or redirect it");
        }
        Box::new(std::io::stdout())
    } else {
        Box::new(
            File::create(&args.output)
                .with_context(|| format!("cannot create {}", args.output.display()))?,
        )
    };
    // To a pipe, records go out at every tick; a smaller buffer keeps the
    // reader close behind.
    let buffer = if to_stdout { 64 << 10 } else { 1 << 20 };
    let mb = |m: u64| m * 1024 * 1024;
    let mut overrides = Vec::new();
    for spec in &args.provider_buffers {
        let (name, size) = spec
            .split_once('=')
            .and_then(|(n, s)| Some((n.to_owned(), s.trim().parse::<u64>().ok()?)))
            .filter(|(_, s)| (1..=4096).contains(s))
            .with_context(|| {
                format!("--provider-buffer wants NAME=MEGABYTES (1-4096), not {spec:?}")
            })?;
        overrides.push((name, mb(size)));
    }
    if args.provider_buffer_size == 0 || args.provider_buffer_size > 4096 {
        bail!("the provider buffer size must be between 1 and 4096 megabytes");
    }
    let config = RecordConfig {
        categories: categories.clone(),
        buffer_bytes: (args.buffer_megabytes * 1024.0 * 1024.0) as usize,
        userspace: Some(UserspaceConfig {
            socket_path: trace_manager::userspace::socket_path(),
            mode: BufferingMode::from_name(&args.buffering_mode).unwrap_or(BufferingMode::Oneshot),
            buffer_bytes: mb(u64::from(args.provider_buffer_size)),
            overrides,
            categories: categories
                .iter()
                .filter(|c| !c.starts_with("kernel:"))
                .cloned()
                .collect(),
        }),
        pids: if !args.pids.is_empty() || (!args.command.is_empty() && !args.all_processes) {
            Some(args.pids.clone())
        } else {
            None
        },
        kernel_mode: BufferingMode::from_name(&args.kernel_buffering_mode)
            .unwrap_or(BufferingMode::Streaming),
        // Resolved now: a wrong probe is an error before recording starts.
        uprobes: args
            .uprobes
            .iter()
            .map(|spec| trace_manager::uprobes::resolve_in(spec, &args.pids))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .flatten()
            .collect(),
        usdt: resolve_usdt(&args.usdt, &args.pids)?,
    };
    // A delayed start: the command runs now and is followed by its pid once
    // recording starts.
    let mut config = config;
    let mut early_child = None;
    if let Some(delay) = args.start_delay.map(Duration::from_secs_f64) {
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
        let mut sigint = signal(SignalKind::interrupt()).context("installing a SIGINT handler")?;
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            _ = sigint.recv() => bail!("interrupted before recording started"),
        }
    }
    let mut recording =
        Recording::start(&config, BufWriter::with_capacity(buffer, sink)).map_err(explain)?;

    let mut child = match (early_child, args.command.split_first()) {
        (Some(child), _) => {
            if let Some(pid) = child.id() {
                // Names it; it may have exited during the wait.
                if let Err(e) = recording.follow(pid) {
                    log::debug!("naming the command: {e}");
                }
            }
            Some(child)
        }
        (None, Some((program, rest))) => {
            let child = start_command(program, rest, recording.follow_hook(), to_stdout)?;
            if config.pids.is_some()
                && let Some(pid) = child.id()
            {
                // Names it (it follows itself already); it may have exited.
                if let Err(e) = recording.follow(pid) {
                    log::debug!("naming the command: {e}");
                }
            }
            Some(child)
        }
        (None, None) => None,
    };
    let mut sigint = signal(SignalKind::interrupt()).context("installing a SIGINT handler")?;
    let mut sigterm = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
    let duration = args.duration.map(Duration::from_secs_f64);
    // Printed once every provider is attached: scripts may wait for it.
    if child.is_none() && duration.is_none() {
        eprintln!("trace-cli: recording; press Ctrl-C to stop");
    } else {
        eprintln!("trace-cli: recording");
    }

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
                _ = sigint.recv() => StopReason::Signal,
                _ = sigterm.recv() => StopReason::Signal,
            }
        };
        tokio::pin!(stop);
        let progress = ProgressLine::new();
        // Collect in ticks: between them, alerts are looked at and the
        // progress line is redrawn.
        let reason = loop {
            let tick = async {
                tokio::select! {
                    reason = &mut stop => Some(reason),
                    () = tokio::time::sleep(PROGRESS_TICK) => None,
                }
            };
            if let Some(reason) = recording.run_until(tick).await.map_err(explain)? {
                break reason;
            }
            let mut triggered = None;
            for (provider, alert) in recording.take_alerts() {
                progress.println(&format!(
                    "trace-cli: provider {provider:?} raised alert {alert:?}"
                ));
                if triggered.is_none() && args.triggers.contains(&alert) {
                    triggered = Some(alert);
                }
            }
            if let Some(alert) = triggered {
                break StopReason::Trigger(alert);
            }
            progress.update(&recording.progress());
            if to_stdout {
                recording.flush().map_err(explain)?;
            }
        };
        progress.finish();
        reason
    };
    let (stats, _) = recording.finish().await.map_err(explain)?;
    if let StopReason::Trigger(alert) = &reason {
        eprintln!("trace-cli: stopped by alert {alert:?}");
    }

    if let Some(mut c) = child
        && !matches!(reason, StopReason::CommandExited(_))
    {
        // The recording ended first: the command is not left behind.
        let _ = c.start_kill();
        let _ = c.wait().await;
    }

    eprintln!(
        "trace-cli: {} kernel events ({} switches, {} wakeups, {} process events, {} system \
         calls, {} interrupts, {} block requests, {} memory events, {} probe hits, {} USDT \
         events) in {:.1} s, {} records, {} bytes, {} dropped{}{}{} -> {}",
        stats.kernel_events,
        stats.counts.context_switches,
        stats.counts.wakeups,
        stats.counts.proc_events,
        stats.counts.syscalls,
        stats.counts.interrupts,
        stats.counts.block_requests,
        stats.counts.memory_events,
        stats.counts.probes,
        stats.counts.usdt,
        stats.duration.as_secs_f64(),
        stats.records,
        stats.bytes,
        stats.dropped,
        per_cpu_drops(&stats.dropped_per_cpu, stats.dropped),
        if stats.malformed > 0 {
            format!(", {} malformed", stats.malformed)
        } else {
            String::new()
        },
        providers_summary(&stats.providers),
        if to_stdout {
            "standard output".to_owned()
        } else {
            args.output.display().to_string()
        }
    );
    if let StopReason::CommandExited(Some(status)) = reason
        && !status.success()
    {
        eprintln!("trace-cli: the command exited with {status}");
    }
    Ok(ExitCode::SUCCESS)
}

fn providers_summary(p: &[trace_manager::userspace::ProviderStats]) -> String {
    if p.is_empty() {
        return String::new();
    }
    let records: u64 = p.iter().map(|s| s.collect.records).sum();
    let dropped: u64 = p
        .iter()
        .map(|s| s.collect.dropped + s.collect.rejected)
        .sum();
    format!(
        "; {} userspace provider{} ({} records, {} dropped)",
        p.len(),
        if p.len() == 1 { "" } else { "s" },
        records,
        dropped
    )
}

/// Starts `program` with `args`. With `hook`, the child calls it between
/// fork and exec, so the pid filter follows the command from its first
/// instruction.
fn start_command(
    program: &str,
    args: &[String],
    hook: Option<FollowHook>,
    stdout_to_stderr: bool,
) -> Result<tokio::process::Child> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    if stdout_to_stderr {
        use std::os::fd::AsFd as _;
        let stderr = std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .context("duplicating standard error for the command")?;
        cmd.stdout(std::process::Stdio::from(stderr));
    }
    if let Some(hook) = hook {
        // SAFETY: the closure runs in the child between fork and exec; it
        // makes two system calls (getpid, bpf) on values it owns, which is
        // async-signal-safe.
        unsafe {
            cmd.pre_exec(move || hook.follow_self());
        }
    }
    cmd.spawn()
        .with_context(|| format!("cannot run {program:?}"))
}

enum StopReason {
    Duration,
    Trigger(String),
    CommandExited(Option<std::process::ExitStatus>),
    Signal,
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

/// Turns a recording error into one clear sentence for the user.
fn explain(e: RecordError) -> anyhow::Error {
    match e {
        RecordError::Kernel(k @ KernelError::Permission { .. }) => anyhow::anyhow!(
            "{k}; recording needs root (or CAP_BPF and CAP_PERFMON), run it with sudo"
        ),
        other => anyhow::Error::new(other),
    }
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
