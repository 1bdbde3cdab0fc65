//! `cargo xtask bench`: what tracing costs.
//!
//! `cargo xtask bench provider` ([`provider_bench`]) builds and runs the
//! `provider_bench` binary of the `tests` crate: the userspace engine's
//! nanoseconds per event for a disabled category check, an instant (without
//! and with two integer arguments), a complete duration with two integer
//! arguments, a counter and the engine alone without a clock read, with one
//! and two writing threads, beside the floor of reading the same clock and
//! copying the same bytes, measured in the same rounds. It needs neither
//! root nor a trace manager: the engine writes into a memfd in that process.
//!
//! `cargo xtask bench kernel` and `cargo xtask bench syscall` ([`bench()`])
//! measure what recording costs a traced workload: `perf bench sched pipe`
//! (two processes bouncing a message over pipes: context switches and
//! wake-ups) or `perf bench syscall basic` (a tight `getppid` loop: system
//! calls). The workload runs pinned to the first CPU, the tracer to the
//! second. Each round runs, interleaved, the workload untraced, under
//! `trace-cli record -a` with the workload's category (`kernel:sched`,
//! `kernel:syscall`), and under `perf record -a` with the matching
//! tracepoints (`sched:sched_switch` and `sched:sched_wakeup`;
//! `raw_syscalls:sys_enter` and `sys_exit`), so that the machine's noise
//! spreads over all three. The report gives the medians, the extra
//! nanoseconds per captured event, the slowdown, events captured and
//! dropped, and bytes per event in the output file. `cargo xtask bench
//! tracepoint` runs the `getppid` loop with trace-cli recording perf's two
//! tracepoints by name (`-c none -e raw_syscalls:sys_enter -e
//! raw_syscalls:sys_exit`): the generic program against perf on the same
//! events. `--baseline TRACE_CLI` adds another trace-cli binary (say, one
//! built from an earlier commit) to the rounds of `kernel`, `syscall` and
//! `profile`.
//!
//! `cargo xtask bench profile` ([`profile_bench`]) measures what sampling
//! stacks costs: nanoseconds of CPU per sample at 99 and 999 Hz, trace-cli
//! (`-c kernel:profile --sample-hz HZ`) against `perf record -g` and `perf
//! record --call-graph dwarf,8192`, on a fixed amount of spinning.
//!
//! `cargo xtask bench analysis` ([`analysis_bench`]) measures how fast
//! `trace-cli report` and `trace-cli export --parquet` read a large
//! recording, beside `trace-cli dump > /dev/null`, and the memory they hold.

mod analysis;
mod flight;
mod profile;
mod throughput;

pub use analysis::analysis_bench;
pub use flight::flight_bench;
pub use profile::profile_bench;
pub use throughput::throughput_bench;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::ebpf::target_dir;
use crate::run::{cargo, is_root, run};

/// One measured run.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    /// Seconds the workload reported for itself.
    seconds: f64,
    /// Events captured by the tracer.
    events: u64,
    /// Events the tracer reported lost.
    dropped: u64,
    /// Size of the output file.
    bytes: u64,
}

/// Which benchmarks `cargo xtask bench` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum What {
    /// The userspace provider engine, in-process: ns per event.
    Provider,
    /// Recording scheduling (`perf bench sched pipe`) with trace-cli,
    /// against perf (root).
    Kernel,
    /// Recording system calls (a `getppid` loop) with trace-cli, against
    /// perf (root).
    Syscall,
    /// The same loop, with trace-cli recording the tracepoints perf
    /// records, selected by name (`-e raw_syscalls:sys_enter` ...; root).
    Tracepoint,
    /// Sampling stacks (`-c kernel:profile`) of a CPU-bound program at 99
    /// and 999 Hz with trace-cli, against `perf record -g` and `perf record
    /// --call-graph dwarf` (root): ns of CPU per sample.
    Profile,
    /// The manager's rate of kernel events into FXT (replayed on one CPU),
    /// a system call storm on every CPU recorded by trace-cli and by perf,
    /// and the highest sustained rate recorded without a drop (root).
    Throughput,
    /// Reading a large recording (every kernel category, at least 500 MB
    /// by default) into `report` and a Parquet `export`, beside `dump >
    /// /dev/null`: MB/s and peak memory (root to make the recording).
    Analysis,
    /// What the daemon's flight recorder costs a `getppid` loop, beside
    /// `trace-cli record` of the same events, and how long a snapshot of a
    /// full window takes (root).
    Flight,
    /// All of them.
    All,
}

/// A kernel workload and how each tracer records it.
#[derive(Clone, Copy, Debug)]
pub struct KernelWorkload {
    /// `perf bench` suite and benchmark, e.g. `["sched", "pipe"]`.
    bench: [&'static str; 2],
    /// Loops per run.
    loops: u64,
    /// What one loop is, for the report.
    unit: &'static str,
    /// What `trace-cli record` is told to record (`-c CATEGORY`, or `-e`).
    trace_cli: &'static [&'static str],
    /// The tracepoints the peers record (`perf record -e`, `trace-cmd
    /// record -e`, bpftrace's probes).
    tracepoints: &'static [&'static str],
    /// The hooks trace-cli's programs use, for the floor
    /// (`trace_manager::kernel::floor`); none: no floor row.
    floor: &'static [&'static str],
    /// Steps above the floor, each a row: what the programs on the
    /// `step_hooks` do (`store`, `clock`, `ids`, `ring`: see
    /// `trace_manager::kernel::floor::FloorProgram`), with the floor on the
    /// other hooks.
    steps: &'static [&'static str],
    /// The hooks whose programs take the steps.
    step_hooks: &'static [&'static str],
}

impl KernelWorkload {
    /// `perf bench sched pipe`: context switches and wake-ups.
    pub fn sched_pipe(loops: u64) -> Self {
        KernelWorkload {
            bench: ["sched", "pipe"],
            loops,
            unit: "pipe round trip",
            trace_cli: &["-c", "kernel:sched"],
            tracepoints: &[
                "sched:sched_switch",
                "sched:sched_wakeup",
                "sched:sched_wakeup_new",
            ],
            floor: &["sched_switch", "sched_wakeup", "sched_wakeup_new"],
            steps: &["clock", "ring"],
            step_hooks: &["sched_switch", "sched_wakeup", "sched_wakeup_new"],
        }
    }

    /// `perf bench syscall basic`: a tight `getppid` loop.
    pub fn getppid(loops: u64) -> Self {
        KernelWorkload {
            bench: ["syscall", "basic"],
            loops,
            unit: "getppid call",
            trace_cli: &["-c", "kernel:syscall"],
            tracepoints: &["raw_syscalls:sys_enter", "raw_syscalls:sys_exit"],
            floor: &["sys_enter", "sys_exit", "sched_switch"],
            steps: &["store", "clock", "ids"],
            step_hooks: &["sys_enter", "sys_exit"],
        }
    }

    /// `perf bench syscall basic` with the same two tracepoints selected by
    /// name (`-e`, every field decoded) as perf records them.
    pub fn getppid_tracepoints(loops: u64) -> Self {
        KernelWorkload {
            trace_cli: &[
                "-c",
                "none",
                "-e",
                "raw_syscalls:sys_enter",
                "-e",
                "raw_syscalls:sys_exit",
            ],
            floor: &[],
            steps: &[],
            step_hooks: &[],
            ..Self::getppid(loops)
        }
    }
}

/// What a benchmark runs, built for release.
#[derive(Clone, Copy, Debug)]
enum Built {
    /// The `trace-cli` binary.
    TraceCli,
    /// Binary `name` of package `package`.
    Bin(&'static str, &'static str),
    /// Example `name` of package `package`.
    Example(&'static str, &'static str),
}

/// Builds `what` for release and returns its path.
fn build_release(what: Built) -> Result<PathBuf> {
    let (package, flag, name) = match what {
        Built::TraceCli => ("trace-cli", "--bin", "trace-cli"),
        Built::Bin(package, name) => (package, "--bin", name),
        Built::Example(package, name) => (package, "--example", name),
    };
    run(cargo().args(["build", "--release", "--package", package, flag, name]))?;
    let release = target_dir().join("release");
    Ok(match what {
        Built::Example(..) => release.join("examples").join(name),
        _ => release.join(name),
    })
}

/// Runs the userspace provider engine's benchmark (`provider_bench`): ns per
/// event for each event kind with one and two writing threads, beside the
/// floor of reading the clock and copying the same bytes.
pub fn provider_bench(iterations: u64) -> Result<()> {
    let bin = build_release(Built::Bin("tests", "provider_bench"))?;
    run(Command::new(&bin)
        .arg("--iterations")
        .arg(iterations.to_string()))
    .with_context(|| format!("running the provider benchmark {}", bin.display()))
}

/// The tracers of a kernel benchmark, in the order each round runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tracer {
    /// The workload alone.
    None,
    /// Empty programs on trace-cli's hooks.
    Floor,
    /// Programs doing one step on the system call hooks, on the floor.
    Step(&'static str),
    /// `trace-cli record -a`.
    TraceCli,
    /// Another trace-cli binary.
    Baseline,
    /// `trace-cmd record`: ftrace's own ring buffer.
    TraceCmd,
    /// bpftrace counting the events per probe in a map.
    Bpftrace,
    /// `perf record -a`.
    Perf,
}

impl Tracer {
    fn name(self) -> &'static str {
        match self {
            Tracer::None => "none",
            Tracer::Floor => "floor",
            Tracer::Step("store") => "floor + store",
            Tracer::Step("clock") => "floor + clock",
            Tracer::Step("ids") => "floor + ids",
            Tracer::Step("ring") => "floor + clock+ring",
            Tracer::Step(_) => "floor + step",
            Tracer::TraceCli => "trace-cli",
            Tracer::Baseline => "baseline",
            Tracer::TraceCmd => "trace-cmd",
            Tracer::Bpftrace => "bpftrace (count)",
            Tracer::Perf => "perf record",
        }
    }
}

/// Runs the benchmark: `rounds` interleaved rounds of workload `w` alone,
/// with the floor, and under trace-cli, trace-cmd, bpftrace (counting) and
/// perf; with `baseline` (another `trace-cli` binary, e.g. built from an
/// earlier commit), that one too, in the same rounds. Prints each one's
/// extra nanoseconds per loop, its ratio to trace-cmd's and its cost above
/// the floor.
pub fn bench(rounds: usize, w: KernelWorkload, baseline: Option<&Path>) -> Result<()> {
    if !is_root() {
        bail!("the benchmark loads eBPF programs: run it as root");
    }
    ensure_peers()?;
    let cli = build_release(Built::TraceCli)?;
    let floor = if w.floor.is_empty() {
        None
    } else {
        Some(build_release(Built::Example(
            "trace-manager",
            "kernel_floor",
        ))?)
    };
    let dir = std::env::temp_dir().join(format!("trace-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;

    let mut tracers = vec![Tracer::None];
    if floor.is_some() {
        tracers.push(Tracer::Floor);
        tracers.extend(w.steps.iter().map(|&s| Tracer::Step(s)));
    }
    tracers.push(Tracer::TraceCli);
    if baseline.is_some() {
        tracers.push(Tracer::Baseline);
    }
    tracers.extend([Tracer::TraceCmd, Tracer::Bpftrace, Tracer::Perf]);
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); tracers.len()];
    for round in 0..rounds {
        eprintln!("bench: round {}/{rounds}", round + 1);
        for (tracer, samples) in tracers.iter().zip(&mut samples) {
            let sample = match tracer {
                Tracer::None => run_untraced(&w)?,
                Tracer::Floor => run_floor(floor.as_deref().unwrap_or(&cli), &w, None)?,
                Tracer::Step(step) => run_floor(floor.as_deref().unwrap_or(&cli), &w, Some(step))?,
                Tracer::TraceCli => run_trace_cli(&cli, &dir, &w)?,
                Tracer::Baseline => run_trace_cli(baseline.unwrap_or(&cli), &dir, &w)?,
                Tracer::TraceCmd => run_trace_cmd(&dir, &w)?,
                Tracer::Bpftrace => run_bpftrace(&w)?,
                Tracer::Perf => run_perf(&dir, &w)?,
            };
            samples.push(sample);
        }
    }
    std::fs::remove_dir_all(&dir).ok();

    let secs = |t: Tracer| {
        tracers
            .iter()
            .position(|&x| x == t)
            .map(|i| median(samples[i].iter().map(|s| s.seconds)))
    };
    let base = secs(Tracer::None).unwrap_or(0.0);
    let per_loop = |s: f64| (s - base) * 1e9 / w.loops as f64;
    let trace_cmd = secs(Tracer::TraceCmd).map(per_loop);
    let floor_ns = secs(Tracer::Floor).map(per_loop);
    println!(
        "workload: perf bench {} {} -l {} on CPU 0, tracer on CPU 1, {rounds} rounds, medians; \
         trace-cli {}; peers record {}",
        w.bench[0],
        w.bench[1],
        w.loops,
        w.trace_cli.join(" "),
        w.tracepoints.join(" ")
    );
    println!(
        "{:<17} {:>8} {:>7} {:>9} {:>8} {:>10} {:>9} {:>10} {:>8} {:>7}",
        "tracer",
        "seconds",
        "slower",
        "extra ns",
        "x trace-",
        "ns above",
        "events",
        "dropped",
        "ns per",
        "bytes/"
    );
    println!(
        "{:<17} {:>8} {:>7} {:>9} {:>8} {:>10} {:>9} {:>10} {:>8} {:>7}",
        "",
        "",
        "",
        format!("/{}", w.unit.split(' ').next_back().unwrap_or("loop")),
        "cmd",
        "the floor",
        "",
        "",
        "event",
        "event"
    );
    for (tracer, samples) in tracers.iter().zip(&samples) {
        let secs = median(samples.iter().map(|s| s.seconds));
        let extra = per_loop(secs);
        let events = median(samples.iter().map(|s| s.events as f64));
        let dropped = median(samples.iter().map(|s| s.dropped as f64));
        let bytes = median(samples.iter().map(|s| s.bytes as f64));
        let ratio = trace_cmd
            .filter(|&t| t > 0.0)
            .map_or("-".to_owned(), |t| format!("{:.2}", extra / t));
        let above = floor_ns.map_or("-".to_owned(), |f| format!("{:.0}", extra - f));
        let (events_s, dropped_s, per_event, per_byte) =
            if matches!(tracer, Tracer::None | Tracer::Floor | Tracer::Step(_)) {
                (
                    "-".to_owned(),
                    "-".to_owned(),
                    "-".to_owned(),
                    "-".to_owned(),
                )
            } else {
                (
                    format!("{events:.0}"),
                    format!("{dropped:.0}"),
                    format!("{:.0}", (secs - base) * 1e9 / events.max(1.0)),
                    if bytes > 0.0 {
                        format!("{:.1}", bytes / events.max(1.0))
                    } else {
                        "-".to_owned()
                    },
                )
            };
        println!(
            "{:<17} {secs:>8.3} {:>6.1}% {extra:>9.0} {ratio:>8} {above:>10} {events_s:>9} {dropped_s:>10} {per_event:>8} {per_byte:>7}",
            tracer.name(),
            (secs / base - 1.0) * 100.0,
        );
    }
    if let (Some(store), Some(clock), Some(ids)) = (
        secs(Tracer::Step("store")),
        secs(Tracer::Step("clock")),
        secs(Tracer::Step("ids")),
    ) {
        // Two system call hooks per call.
        let each = |a: f64, b: f64| (a - b) * 1e9 / w.loops as f64 / 2.0;
        let floor = secs(Tracer::Floor).unwrap_or(base);
        println!(
            "per program run above the floor: a store to a per-CPU map {:.0} ns, a clock read \
             {:.0} ns, the task's ids {:.0} ns (two runs per call)",
            each(store, floor),
            each(clock, store),
            each(ids, store)
        );
    }
    let cli_events = tracers
        .iter()
        .position(|&x| x == Tracer::TraceCli)
        .map(|i| median(samples[i].iter().map(|s| s.events as f64)));
    if w.steps == ["clock", "ring"]
        && let (Some(clock), Some(ring), Some(events)) = (
            secs(Tracer::Step("clock")),
            secs(Tracer::Step("ring")),
            cli_events,
        )
        && events > 0.0
    {
        // Every scheduling event reads the clock once and writes one entry.
        let floor = secs(Tracer::Floor).unwrap_or(base);
        let cli = secs(Tracer::TraceCli).unwrap_or(base);
        let each = |a: f64, b: f64| (a - b) * 1e9 / events;
        println!(
            "per scheduling event ({:.1} per {}), above the floor: a clock read {:.0} ns, \
             a ring-buffer entry {:.0} ns, trace-cli {:.0} ns in all",
            events / w.loops as f64,
            w.unit,
            each(clock, floor),
            each(ring, clock),
            each(cli, floor),
        );
    }
    println!(
        "extra ns per {}: (seconds - none) / loops; x trace-cmd: that over trace-cmd's; above the \
         floor: over the floor's (empty programs on trace-cli's hooks: {})",
        w.unit,
        if w.floor.is_empty() {
            "none".to_owned()
        } else {
            w.floor.join(", ")
        }
    );
    Ok(())
}

/// Installs the peers the kernel benchmarks compare with (Debian's
/// `linux-perf`, `trace-cmd`, `bpftrace`) when one is missing.
pub(crate) fn ensure_peers() -> Result<()> {
    let missing: Vec<&str> = [
        ("perf", "linux-perf"),
        ("trace-cmd", "trace-cmd"),
        ("bpftrace", "bpftrace"),
    ]
    .into_iter()
    .filter(|(program, _)| which(program).is_none())
    .map(|(_, package)| package)
    .collect();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("bench: installing {}", missing.join(" "));
    run(Command::new("apt-get").arg("update"))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))
    .context("installing the benchmark's peers")
}

fn workload(w: &KernelWorkload) -> Command {
    let mut c = Command::new("taskset");
    c.args(["-c", "0", "perf", "bench"])
        .args(w.bench)
        .arg("-l")
        .arg(w.loops.to_string());
    c
}

fn workload_args(w: &KernelWorkload) -> Vec<String> {
    let c = workload(w);
    std::iter::once(c.get_program())
        .chain(c.get_args())
        .map(|s| s.to_string_lossy().into_owned())
        .collect()
}

/// The "Total time: X \[sec\]" line of `perf bench`.
fn total_time(output: &str) -> Result<f64> {
    output
        .lines()
        .find_map(|l| {
            let rest = l.trim().strip_prefix("Total time:")?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .with_context(|| format!("no total time in the workload's output: {output}"))
}

fn run_untraced(w: &KernelWorkload) -> Result<Sample> {
    let out = workload(w).output().context("running the workload")?;
    Ok(Sample {
        seconds: total_time(&String::from_utf8_lossy(&out.stdout))?,
        ..Default::default()
    })
}

/// The workload with empty programs on trace-cli's hooks; with `step`,
/// programs doing that on the system call hooks.
fn run_floor(floor: &Path, w: &KernelWorkload, step: Option<&str>) -> Result<Sample> {
    let programs: Vec<String> = w
        .floor
        .iter()
        .map(|&hook| match step {
            Some(step) if w.step_hooks.contains(&hook) => format!("{hook}:{step}"),
            _ => hook.to_owned(),
        })
        .collect();
    let out = Command::new("taskset")
        .args(["-c", "1"])
        .arg(floor)
        .arg(programs.join(","))
        .arg("--")
        .args(workload_args(w))
        .output()
        .context("running the workload with the floor programs")?;
    if !out.status.success() {
        bail!(
            "kernel_floor failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(Sample {
        seconds: total_time(&String::from_utf8_lossy(&out.stdout))?,
        ..Default::default()
    })
}

/// `trace-cmd record`; it exits 1 at the very end where resetting the
/// function filter is refused (the data is complete), so its status is not
/// checked: the workload's own output and the file are.
fn run_trace_cmd(dir: &Path, w: &KernelWorkload) -> Result<Sample> {
    let data = dir.join("trace.dat");
    let mut c = Command::new("taskset");
    c.args(["-c", "1", "trace-cmd", "record", "-d", "--no-filter"]);
    for tp in w.tracepoints {
        c.args(["-e", tp]);
    }
    let out = c
        .arg("-o")
        .arg(&data)
        .args(workload_args(w))
        .output()
        .context("running trace-cmd record")?;
    let seconds = total_time(&String::from_utf8_lossy(&out.stdout))
        .with_context(|| format!("trace-cmd record: {}", String::from_utf8_lossy(&out.stderr)))?;
    // Count the events: one line each in `trace-cmd report`, after a
    // `cpus=N` line.
    let mut report = Command::new("trace-cmd")
        .args(["report", "-i"])
        .arg(&data)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("running trace-cmd report")?;
    let mut lines = 0u64;
    if let Some(stdout) = report.stdout.take() {
        use std::io::BufRead;
        let mut r = std::io::BufReader::with_capacity(1 << 20, stdout);
        loop {
            let buf = r.fill_buf()?;
            if buf.is_empty() {
                break;
            }
            lines += buf.iter().filter(|&&b| b == b'\n').count() as u64;
            let n = buf.len();
            r.consume(n);
        }
    }
    report.wait()?;
    let stat = Command::new("trace-cmd")
        .args(["report", "--stat", "-i"])
        .arg(&data)
        .output()
        .context("running trace-cmd report --stat")?;
    let text = String::from_utf8_lossy(&stat.stdout);
    let dropped = ["overrun:", "dropped events:"]
        .iter()
        .map(|key| {
            text.lines()
                .filter_map(|l| l.trim_start().strip_prefix(key))
                .filter_map(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum();
    Ok(Sample {
        seconds,
        events: lines.saturating_sub(1),
        dropped,
        bytes: std::fs::metadata(&data)?.len(),
    })
}

/// bpftrace counting the events per probe (a map update each, nothing
/// else kept).
fn run_bpftrace(w: &KernelWorkload) -> Result<Sample> {
    let script: String = w
        .tracepoints
        .iter()
        .map(|tp| format!("tracepoint:{tp} {{ @[probe] = count(); }} "))
        .collect();
    // bpftrace wants the command's binaries by full path.
    let command: Vec<String> = workload_args(w)
        .into_iter()
        .map(|a| match a.as_str() {
            "taskset" | "perf" => which(&a).map_or(a, |p| p.display().to_string()),
            _ => a,
        })
        .collect();
    let out = Command::new("taskset")
        .args(["-c", "1", "bpftrace", "-e", &script, "-c"])
        .arg(command.join(" "))
        .output()
        .context("running bpftrace")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "bpftrace failed: {}{}",
            stdout,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // `@[tracepoint:group:name]: N` per probe.
    let events = stdout
        .lines()
        .filter(|l| l.starts_with("@["))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    let lost = stdout
        .lines()
        .chain(String::from_utf8_lossy(&out.stderr).lines())
        .filter_map(|l| {
            l.split_once(" events lost").map(|(n, _)| {
                n.split_whitespace()
                    .next_back()
                    .and_then(|n| n.parse::<u64>().ok())
            })
        })
        .flatten()
        .sum();
    Ok(Sample {
        seconds: total_time(&stdout)?,
        events,
        dropped: lost,
        bytes: 0,
    })
}

fn run_trace_cli(cli: &Path, dir: &Path, w: &KernelWorkload) -> Result<Sample> {
    let file = dir.join("bench.fxt");
    // Every process (`-a`), as `perf record -a`.
    let out = Command::new("taskset")
        .args(["-c", "1"])
        .arg(cli)
        .args(["record", "-a"])
        .args(w.trace_cli)
        .arg("-o")
        .arg(&file)
        .arg("--")
        .args(workload_args(w))
        .output()
        .context("running trace-cli record")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("trace-cli record failed: {stderr}");
    }
    Ok(Sample {
        seconds: total_time(&String::from_utf8_lossy(&out.stdout))?,
        events: number_before(&stderr, "kernel events")?,
        dropped: number_before(&stderr, "dropped")?,
        bytes: std::fs::metadata(&file)?.len(),
    })
}

fn run_perf(dir: &Path, w: &KernelWorkload) -> Result<Sample> {
    let data = dir.join("perf.data");
    let out = Command::new("taskset")
        .args(["-c", "1", "perf", "record", "-q", "-a"])
        .args(w.tracepoints.iter().flat_map(|tp| ["-e", tp]))
        .arg("-o")
        .arg(&data)
        .arg("--")
        .args(workload_args(w))
        .output()
        .context("running perf record")?;
    if !out.status.success() {
        bail!(
            "perf record failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let seconds = total_time(&String::from_utf8_lossy(&out.stdout))?;
    // Count the samples perf wrote, and the ones it lost.
    let stats = Command::new("perf")
        .args(["report", "--stats", "-i"])
        .arg(&data)
        .output()
        .context("running perf report --stats")?;
    let text = String::from_utf8_lossy(&stats.stdout);
    Ok(Sample {
        seconds,
        events: perf_stat(&text, "SAMPLE events:"),
        dropped: perf_stat(&text, "LOST_SAMPLES events:") + perf_stat(&text, "LOST events:"),
        bytes: std::fs::metadata(&data)?.len(),
    })
}

/// The first count `perf report --stats` gives for `key` (the aggregate).
pub(crate) fn perf_stat(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The number just before `label` in `text` ("… 123 kernel events …").
pub(crate) fn number_before(text: &str, label: &str) -> Result<u64> {
    let at = text
        .find(label)
        .with_context(|| format!("no {label:?} in {text:?}"))?;
    text[..at]
        .split_whitespace()
        .last()
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("no number before {label:?} in {text:?}"))
}

/// How a child process ended.
#[derive(Clone, Copy, Debug)]
struct Ended {
    /// It exited with status 0.
    success: bool,
    /// User and system time of it and of the children it waited for, in ns.
    cpu_ns: u64,
    /// Its peak resident set size, in KiB.
    max_rss_kb: u64,
}

/// Waits for child `pid` to end.
fn wait(pid: libc::pid_t) -> Result<Ended> {
    let mut status = 0;
    // SAFETY: all-zero is a valid rusage.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `usage` are valid for wait4 to fill.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            bail!("waiting for process {pid}: {e}");
        }
    }
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    Ok(Ended {
        success: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        cpu_ns: ns(usage.ru_utime) + ns(usage.ru_stime),
        max_rss_kb: u64::try_from(usage.ru_maxrss).unwrap_or(0),
    })
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_perf_bench_and_summaries() {
        let out = "# Running 'sched/pipe' benchmark:\n# Executed 50000 pipe operations\n\n     Total time: 0.415 [sec]\n\n       8.3 usecs/op\n";
        assert_eq!(total_time(out).unwrap(), 0.415);
        assert!(total_time("nothing").is_err());
        let summary = "trace-cli: 637299 kernel events (400298 switches) in 2.0 s, 637552 records, 30596808 bytes, 12 dropped -> x";
        assert_eq!(number_before(summary, "kernel events").unwrap(), 637299);
        assert_eq!(number_before(summary, "dropped").unwrap(), 12);
        let stats = "Aggregated stats:\n          SAMPLE events:      16141  (98.2%)\nsched:sched_switch stats:\n          SAMPLE events:      10030\n";
        assert_eq!(perf_stat(stats, "SAMPLE events:"), 16141);
        assert_eq!(perf_stat(stats, "LOST events:"), 0);
        assert_eq!(median([3.0, 1.0, 2.0].into_iter()), 2.0);
        assert_eq!(median([4.0, 1.0, 2.0, 3.0].into_iter()), 2.5);
    }
}
