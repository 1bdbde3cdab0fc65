//! `cargo xtask bench analysis`: how fast a trace is read into answers.
//!
//! A large recording is made first (or given with `--trace`): `trace-cli
//! record -a -c 'kernel:*'` in streaming mode while `perf bench sched pipe`,
//! a `getppid` loop (`perf bench syscall basic`) and a loop of `dd` writes
//! with `fsync` (block requests, page faults) run, stopped once the file
//! holds `--size-mb` megabytes. It is kept in the target directory
//! (`bench/analysis.fxt`) and reused while it is at least that large.
//!
//! Each round then runs, interleaved and pinned to one CPU, `trace-cli
//! dump FILE > /dev/null` (the floor: decoding and printing every record),
//! `trace-cli report FILE > /dev/null`, `trace-cli export FILE --parquet
//! DIR`, and two queries of the file: a count over a small table
//! (`processes`) and a `GROUP BY` over the system calls. The report gives, per command, the medians of MB/s of FXT over
//! wall-clock time and over CPU time (user and system, from `wait4`), and
//! the largest peak resident set size seen (`ru_maxrss`): what the command
//! holds, which stays bounded however large the trace.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::{Built, build_release, median, target_dir, which};
use crate::run::is_root;

/// The query over a small table: only the process records are read.
const COUNT_PROCESSES: &str = "SELECT count(*) FROM processes";
/// The query over the system calls, the figures `report`'s system call
/// section gives.
const SYSCALLS_BY_NAME: &str = "SELECT name, count(*) AS calls, sum(dur) AS ns FROM syscalls GROUP BY name ORDER BY calls DESC";

/// One run of a command over the trace.
#[derive(Clone, Copy, Debug)]
struct Measured {
    wall: f64,
    cpu: f64,
    max_rss_kb: u64,
}

/// Runs the benchmark: makes (or reuses) a recording of at least `size_mb`
/// MB, or takes `trace`, then `rounds` interleaved rounds.
pub fn analysis_bench(rounds: usize, size_mb: u64, trace: Option<&Path>) -> Result<()> {
    let cli = build_release(Built::TraceCli)?;
    let file = match trace {
        Some(t) => t.to_path_buf(),
        None => {
            let f = target_dir().join("bench/analysis.fxt");
            let have = std::fs::metadata(&f).map_or(0, |m| m.len());
            if have < size_mb << 20 {
                record_large(&cli, &f, size_mb)?;
            }
            f
        }
    };
    let bytes = std::fs::metadata(&file)
        .with_context(|| format!("no trace at {}", file.display()))?
        .len();
    let mb = bytes as f64 / 1e6;
    let out = std::env::temp_dir().join(format!("trace-bench-export-{}", std::process::id()));
    let query = |sql: &str| vec!["query".into(), path(&file), sql.into()];
    let commands: [(&str, Vec<String>); 5] = [
        ("dump > /dev/null", vec!["dump".into(), path(&file)]),
        ("report > /dev/null", vec!["report".into(), path(&file)]),
        (
            "export --parquet",
            vec!["export".into(), path(&file), "--parquet".into(), path(&out)],
        ),
        ("query count processes", query(COUNT_PROCESSES)),
        ("query syscalls by name", query(SYSCALLS_BY_NAME)),
    ];
    let mut results: Vec<Vec<Measured>> = vec![Vec::new(); commands.len()];
    for round in 0..rounds {
        eprintln!("bench: round {}/{rounds}", round + 1);
        for (i, (_, args)) in commands.iter().enumerate() {
            std::fs::remove_dir_all(&out).ok();
            let mut c = Command::new("taskset");
            c.args(["-c", "1"]).arg(&cli).args(args);
            results[i].push(measure(&mut c)?);
        }
    }
    std::fs::remove_dir_all(&out).ok();
    println!(
        "trace: {} ({mb:.0} MB), {rounds} rounds, each command pinned to CPU 1, medians",
        file.display()
    );
    println!(
        "{:<24} {:>10} {:>12} {:>12} {:>14}",
        "trace-cli", "seconds", "MB/s (wall)", "MB/s (CPU)", "peak RSS"
    );
    for ((name, _), runs) in commands.iter().zip(&results) {
        let wall = median(runs.iter().map(|r| r.wall));
        let cpu = median(runs.iter().map(|r| r.cpu));
        let rss = runs.iter().map(|r| r.max_rss_kb).max().unwrap_or(0);
        println!(
            "{name:<24} {wall:>10.2} {:>12.0} {:>12.0} {:>11.1} MB",
            mb / wall,
            mb / cpu.max(1e-9),
            rss as f64 / 1024.0
        );
    }
    Ok(())
}

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Runs `cmd` with standard output to /dev/null; wall-clock seconds, CPU
/// seconds and peak RSS of the process.
fn measure(cmd: &mut Command) -> Result<Measured> {
    let start = Instant::now();
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {cmd:?}"))?;
    let ended = super::wait(child.id() as libc::pid_t)?;
    let wall = start.elapsed().as_secs_f64();
    if !ended.success {
        let mut err = String::new();
        if let Some(mut e) = child.stderr {
            std::io::Read::read_to_string(&mut e, &mut err).ok();
        }
        bail!("{cmd:?} failed: {err}");
    }
    Ok(Measured {
        wall,
        cpu: ended.cpu_ns as f64 / 1e9,
        max_rss_kb: ended.max_rss_kb,
    })
}

/// Records every kernel category system-wide under a mixed load until
/// `file` holds `size_mb` MB.
fn record_large(cli: &Path, file: &Path, size_mb: u64) -> Result<()> {
    if !is_root() {
        bail!("making the recording loads eBPF programs: run as root, or give --trace FILE");
    }
    if which("perf").is_none() {
        bail!("`perf` is needed for the workload: apt-get install linux-perf");
    }
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    eprintln!(
        "bench: recording {size_mb} MB of every kernel category into {}",
        file.display()
    );
    let scratch: PathBuf =
        std::env::temp_dir().join(format!("trace-bench-dd-{}", std::process::id()));
    let load = vec![
        dies_with_us(
            Command::new("perf")
                .args(["bench", "sched", "pipe", "-l", "1000000000"])
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )
        .spawn()
        .context("starting perf bench sched pipe")?,
        dies_with_us(
            Command::new("perf")
                .args(["bench", "syscall", "basic", "-l", "100000000000"])
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )
        .spawn()
        .context("starting perf bench syscall basic")?,
        dies_with_us(Command::new("sh").arg("-c").arg(format!(
            "while :; do dd if=/dev/zero of={} bs=64k count=64 conv=fsync 2>/dev/null; \
             cat /etc/services > /dev/null; done",
            scratch.display()
        )))
        .spawn()
        .context("starting the block I/O loop")?,
    ];
    let mut rec = Command::new(cli)
        .args(["record", "-a", "-c", "kernel:*", "-b", "256"])
        .args(["--kernel-buffering-mode", "streaming", "-o"])
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting trace-cli record")?;
    let started = Instant::now();
    let result = loop {
        std::thread::sleep(Duration::from_millis(200));
        if let Some(status) = rec.try_wait()? {
            break Err(anyhow::anyhow!("trace-cli record ended early: {status}"));
        }
        let have = std::fs::metadata(file).map_or(0, |m| m.len());
        if have >= size_mb << 20 {
            break Ok(());
        }
        if started.elapsed() > Duration::from_secs(600) {
            break Err(anyhow::anyhow!(
                "the recording grew to only {have} bytes in 10 minutes"
            ));
        }
    };
    // SAFETY: kill(2) with a pid we spawned and SIGINT has no memory effects.
    unsafe { libc::kill(rec.id() as libc::pid_t, libc::SIGINT) };
    let status = rec.wait()?;
    for mut l in load {
        l.kill().ok();
        l.wait().ok();
    }
    std::fs::remove_file(&scratch).ok();
    result?;
    if !status.success() {
        bail!("trace-cli record failed: {status}");
    }
    Ok(())
}

/// `cmd`, killed when this process ends however it ends (a load left
/// running would skew every later measurement).
fn dies_with_us(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: the closure runs in the child between fork and exec and only
    // makes one async-signal-safe system call.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        })
    }
}
