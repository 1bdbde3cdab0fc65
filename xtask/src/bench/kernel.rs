//! `cargo xtask bench kernel`, `syscall` and `tracepoint`: what recording
//! costs a traced workload, against the floor, trace-cmd, bpftrace and
//! `perf record`, in interleaved rounds (see the [parent module](super)).

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::{
    Built, Sample, build_release, ensure_peers, median, perf_stat, recorded, total_time, which,
};
use crate::run::is_root;

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
    /// More trace-cli rows: other categories, or the same with a part of
    /// the translation turned off.
    variants: &'static [Variant],
}

/// A trace-cli row besides the main one: its name, what it records, and
/// the environment it runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    name: &'static str,
    trace_cli: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
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
                "sched:sched_waking",
                "sched:sched_wakeup_new",
            ],
            floor: &["sched_switch", "sched_waking", "sched_wakeup_new"],
            steps: &["clock", "ring"],
            step_hooks: &["sched_switch", "sched_waking", "sched_wakeup_new"],
            // Every wake-up of a pipe end is from one thread's call to
            // another's: with system calls each is a flow, whose cost the
            // last row leaves out.
            variants: &[
                Variant {
                    name: "+syscall",
                    trace_cli: &["-c", "kernel:sched,kernel:syscall"],
                    env: &[],
                },
                Variant {
                    name: "+syscall no flow",
                    trace_cli: &["-c", "kernel:sched,kernel:syscall"],
                    env: &[("TRACE_WAKE_FLOWS", "0")],
                },
            ],
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
            variants: &[],
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
    /// `trace-cli record -a` as a variant says.
    Variant(Variant),
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
            Tracer::Variant(v) => v.name,
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
    tracers.extend(w.variants.iter().map(|&v| Tracer::Variant(v)));
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
                Tracer::TraceCli => run_trace_cli(&cli, &dir, &w, w.trace_cli, &[])?,
                Tracer::Variant(v) => run_trace_cli(&cli, &dir, &w, v.trace_cli, v.env)?,
                Tracer::Baseline => {
                    run_trace_cli(baseline.unwrap_or(&cli), &dir, &w, w.trace_cli, &[])?
                }
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

fn run_trace_cli(
    cli: &Path,
    dir: &Path,
    w: &KernelWorkload,
    what: &[&str],
    env: &[(&str, &str)],
) -> Result<Sample> {
    let file = dir.join("bench.fxt");
    // Every process (`-a`), as `perf record -a`.
    let out = Command::new("taskset")
        .args(["-c", "1"])
        .arg(cli)
        .args(["record", "-a"])
        .args(what)
        .envs(env.iter().copied())
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
    recorded(&out.stdout, &stderr, &file)
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
