//! `cargo xtask bench throughput`: how many kernel events per second the
//! manager turns into FXT, and how much of a system call storm a recording
//! keeps.
//!
//! 1. **The manager alone**: `kernel_replay` (an example of
//!    `trace-manager`) records a workload's kernel events as they come out
//!    of the rings, then replays them through what the manager does with
//!    each (the merge in time order, decoding, translation, encoding) on
//!    one CPU: events per second, for a system call workload (`perf bench
//!    syscall basic`), a scheduling one (`perf bench sched pipe`) and a
//!    mixed one recorded with every event category (pipes, calls, a
//!    written and synced file, a directory walk: interrupts, block
//!    requests, page faults and resident-set changes among them).
//! 2. **The storm**: two processes make `getppid` calls flat out, one on
//!    each of the first two CPUs, recorded system-wide with `-c
//!    kernel:syscall` at the default buffer size by trace-cli, and with
//!    `raw_syscalls:sys_enter`/`sys_exit` by `perf record -a`: calls made,
//!    events kept and lost.
//! 3. **The highest sustained rate without a drop**: `syscall_rate` makes
//!    calls at a given rate on every CPU for a few seconds under `trace-cli
//!    record -a -c kernel:syscall`; the rate doubles until a recording
//!    drops, then is bisected. Every CPU runs the workload, so the manager
//!    has a share of a CPU only.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::{Built, build_release, number_before, perf_stat};
use crate::run::is_root;

/// Runs the three parts; `calls` is each storm process's number of calls.
pub fn throughput_bench(calls: u64) -> Result<()> {
    if !is_root() {
        bail!("the benchmark loads eBPF programs: run it as root");
    }
    super::ensure_peers()?;
    let cli = build_release(Built::TraceCli)?;
    let replay = build_release(Built::Example("trace-manager", "kernel_replay"))?;
    let rate = build_release(Built::Bin("tests", "syscall_rate"))?;
    let dir = std::env::temp_dir().join(format!("trace-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;

    println!("1. the manager alone: kernel events replayed on CPU 1 (kernel_replay)");
    let scratch = dir.join("dd.out");
    let mixed = format!(
        "perf bench sched pipe -l 50000 >/dev/null; \
         perf bench syscall basic -l 500000 >/dev/null; \
         dd if=/dev/zero of={} bs=1M count=64 conv=fsync 2>/dev/null; \
         ls -R /usr/lib >/dev/null",
        scratch.display()
    );
    let workloads: [(&str, &str, Vec<&str>); 3] = [
        (
            "getppid loop",
            "kernel:sched,kernel:syscall",
            vec!["perf", "bench", "syscall", "basic", "-l", "2000000"],
        ),
        (
            "sched pipe",
            "kernel:sched,kernel:syscall",
            vec!["perf", "bench", "sched", "pipe", "-l", "200000"],
        ),
        (
            "mixed",
            "kernel:sched,kernel:proc,kernel:syscall,kernel:irq,kernel:block,kernel:vm",
            vec!["sh", "-c", &mixed],
        ),
    ];
    for (what, categories, command) in &workloads {
        let out = Command::new("taskset")
            .args(["-c", "1"])
            .arg(&replay)
            .args(["--categories", categories, "--"])
            .args(["taskset", "-c", "0"])
            .args(command)
            .output()
            .context("running kernel_replay")?;
        if !out.status.success() {
            bail!(
                "kernel_replay failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout
            .lines()
            .find(|l| l.starts_with("replayed"))
            .unwrap_or("no result");
        println!("   {what:<13} (-c {categories}): {line}");
    }
    std::fs::remove_file(&scratch).ok();

    println!(
        "2. the storm: 2 x {calls} getppid calls, one process on each of CPUs 0 and 1, \
         recorded system-wide at the default buffer size"
    );
    let storm = format!(
        "taskset -c 0 perf bench syscall basic -l {calls} >/dev/null & \
         taskset -c 1 perf bench syscall basic -l {calls} >/dev/null & wait"
    );
    let file = dir.join("storm.fxt");
    let out = Command::new(&cli)
        .args(["record", "-a", "-c", "kernel:syscall", "-o"])
        .arg(&file)
        .args(["--", "sh", "-c", &storm])
        .output()
        .context("running trace-cli record")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("trace-cli record failed: {stderr}");
    }
    let kept = number_before(&stderr, "system calls")?;
    let dropped = number_before(&stderr, "dropped")?;
    println!(
        "   trace-cli   {kept:>10} calls kept (one event each, or two when the caller was \
         switched out), {dropped} events dropped ({:.3}% of the calls)",
        100.0 * dropped as f64 / (2 * calls) as f64
    );
    let data = dir.join("perf.data");
    let out = Command::new("perf")
        .args(["record", "-q", "-a", "-e", "raw_syscalls:sys_enter", "-e"])
        .args(["raw_syscalls:sys_exit", "-o"])
        .arg(&data)
        .args(["--", "sh", "-c", &storm])
        .output()
        .context("running perf record")?;
    if !out.status.success() {
        bail!(
            "perf record failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stats = Command::new("perf")
        .args(["report", "--stats", "-i"])
        .arg(&data)
        .output()
        .context("running perf report --stats")?;
    let text = String::from_utf8_lossy(&stats.stdout);
    let samples = perf_stat(&text, "SAMPLE events:");
    let lost = perf_stat(&text, "LOST_SAMPLES events:") + perf_stat(&text, "LOST events:");
    println!("   perf record {samples:>10} events kept (two per call), {lost} lost");
    std::fs::remove_file(&data).ok();

    println!(
        "3. the highest sustained rate without a drop: getppid calls on every CPU for 3 s \
         (syscall_rate), trace-cli record -a -c kernel:syscall at the default buffer size"
    );
    let best = sustained(&cli, &rate, &file)?;
    match best {
        Some((asked, reached, flat_out)) => println!(
            "   {:.2} M calls/s kept without a drop (asked {:.2} M/s){}",
            reached / 1e6,
            asked / 1e6,
            if flat_out {
                ": the workload's own top speed, nothing dropped even there"
            } else {
                ""
            }
        ),
        None => println!("   every rate tried dropped events"),
    }
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// One paced recording: the rate reached and the events dropped.
fn paced(cli: &Path, rate_bin: &Path, file: &Path, rate: f64) -> Result<(f64, u64)> {
    let out = Command::new(cli)
        .args(["record", "-a", "-c", "kernel:syscall", "-o"])
        .arg(file)
        .arg("--")
        .arg(rate_bin)
        .arg(format!("{rate:.0}"))
        .arg("3")
        .output()
        .context("running trace-cli record")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("trace-cli record failed: {stderr}");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let reached = stdout
        .split_whitespace()
        .find_map(|w| w.strip_prefix("rate="))
        .and_then(|r| r.parse::<f64>().ok())
        .with_context(|| format!("no rate in the workload's output: {stdout}"))?;
    let dropped = number_before(&stderr, "dropped")?;
    let asked = if rate > 0.0 {
        format!("asked {:.2} M calls/s", rate / 1e6)
    } else {
        "flat out".to_owned()
    };
    eprintln!(
        "bench: {asked}, reached {:.2} M calls/s, {dropped} dropped",
        reached / 1e6
    );
    Ok((reached, dropped))
}

/// The highest rate (asked, reached, whether that was the workload's top
/// speed) recorded without a drop.
fn sustained(cli: &Path, rate_bin: &Path, file: &Path) -> Result<Option<(f64, f64, bool)>> {
    // The workload's top speed under the recording.
    let (top, dropped) = paced(cli, rate_bin, file, 0.0)?;
    if dropped == 0 {
        return Ok(Some((top, top, true)));
    }
    let (mut good, mut bad) = (None::<(f64, f64)>, top);
    let mut asked = 250_000.0;
    while asked < bad {
        let (reached, dropped) = paced(cli, rate_bin, file, asked)?;
        if dropped > 0 {
            bad = asked;
            break;
        }
        good = Some((asked, reached));
        asked *= 2.0;
    }
    for _ in 0..4 {
        let low = good.map_or(0.0, |(a, _)| a);
        let mid = (low + bad) / 2.0;
        if mid - low < 50_000.0 {
            break;
        }
        let (reached, dropped) = paced(cli, rate_bin, file, mid)?;
        if dropped > 0 {
            bad = mid;
        } else {
            good = Some((mid, reached));
        }
    }
    Ok(good.map(|(a, r)| (a, r, false)))
}
