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
//! tracepoints (`sched:sched_switch` and `sched:sched_waking`;
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
//! `cargo xtask bench selection` ([`selection_bench`]) measures what
//! choosing the processes recorded costs: the `getppid` loop recorded by
//! pid and by cgroup, selected and left out, beside no selection.
//!
//! `cargo xtask bench analysis` ([`analysis_bench`]) measures how fast
//! `trace-cli report` and `trace-cli export --parquet` read a large
//! recording, beside `trace-cli dump > /dev/null`, and the memory they hold.

mod analysis;
mod flight;
mod kernel;
mod profile;
mod provider;
mod selection;
mod throughput;

pub use analysis::analysis_bench;
pub use flight::flight_bench;
pub use kernel::{KernelWorkload, bench};
pub use profile::profile_bench;
pub use provider::provider_bench;
pub use selection::selection_bench;
pub use throughput::throughput_bench;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::ebpf::target_dir;
use crate::run::{cargo, run};

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
    /// What selecting the processes recorded costs per event, by pid and
    /// by cgroup, for the tasks selected and for those left out (root).
    Selection,
    /// What the daemon's flight recorder costs a `getppid` loop, beside
    /// `trace-cli record` of the same events, and how long a snapshot of a
    /// full window takes (root).
    Flight,
    /// All of them.
    All,
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

/// The "Total time: X \[sec\]" line of `perf bench`.
pub(crate) fn total_time(output: &str) -> Result<f64> {
    output
        .lines()
        .find_map(|l| {
            let rest = l.trim().strip_prefix("Total time:")?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .with_context(|| format!("no total time in the workload's output: {output}"))
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

/// One `trace-cli record` run of a `perf bench` workload: the workload's
/// own time (its output), the kernel events and drops the summary gives,
/// and the file's size.
fn recorded(stdout: &[u8], stderr: &str, file: &Path) -> Result<Sample> {
    Ok(Sample {
        seconds: total_time(&String::from_utf8_lossy(stdout))?,
        events: number_before(stderr, "kernel events")?,
        dropped: number_before(stderr, "dropped")?,
        bytes: std::fs::metadata(file)?.len(),
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
