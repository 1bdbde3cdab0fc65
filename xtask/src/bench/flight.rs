//! `cargo xtask bench flight`: what the daemon's flight recorder costs the
//! traced programs, beside a normal recording of the same events, and how
//! long a snapshot of a full window takes.
//!
//! Interleaved rounds of a `getppid` loop (`perf bench syscall basic`, on
//! CPU 0), each untraced, under `trace-cli record -a -c
//! kernel:sched,kernel:syscall` (streaming to a file), and with a
//! `trace-manager --flight-recorder` of the same categories running (on
//! CPU 1, a 30 s window): extra ns per call of each. Then, with the flight
//! recorder's window full of that loop's events, `trace-cli snapshot`:
//! milliseconds, bytes and MB/s.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::{Built, build_release, median, number_before, total_time};
use crate::run::is_root;

/// What the flight recorder records in the benchmark.
const CATEGORIES: &str = "kernel:sched,kernel:syscall";

/// A flight recorder daemon on a socket of its own; killed on drop.
struct Daemon {
    child: Child,
    socket: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    fn start(manager: &Path, cli: &Path, dir: &Path, window: &str) -> Result<Daemon> {
        let socket = dir.join("flight.sock");
        let _ = std::fs::remove_file(&socket);
        let child = Command::new("taskset")
            .args(["-c", "1"])
            .arg(manager)
            .arg("--socket")
            .arg(&socket)
            .args(["--log-level", "warn", "--flight-recorder", "-c", CATEGORIES])
            .args(["--window", window])
            .spawn()
            .context("starting trace-manager --flight-recorder")?;
        let d = Daemon { child, socket };
        // Answered once the flight recorder runs.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = Command::new(cli)
                .arg("sessions")
                .env("TRACE_MANAGER_SOCKET", &d.socket)
                .output()?;
            if String::from_utf8_lossy(&out.stdout).contains("flight recorder") {
                return Ok(d);
            }
            if Instant::now() > deadline {
                bail!("the flight recorder did not start");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The loop's seconds, untraced (with the flight recorder running or not).
fn run_loop(calls: u64) -> Result<f64> {
    let out = Command::new("taskset")
        .args(["-c", "0", "perf", "bench", "syscall", "basic", "-l"])
        .arg(calls.to_string())
        .output()
        .context("running perf bench")?;
    total_time(&String::from_utf8_lossy(&out.stdout))
}

/// The loop's seconds under `trace-cli record`, and the events recorded.
fn run_recorded(cli: &Path, dir: &Path, calls: u64) -> Result<(f64, u64)> {
    let out = Command::new("taskset")
        .args(["-c", "1"])
        .arg(cli)
        .args(["record", "-a", "-c", CATEGORIES, "-o"])
        .arg(dir.join("bench.fxt"))
        .args([
            "--", "taskset", "-c", "0", "perf", "bench", "syscall", "basic",
        ])
        .arg("-l")
        .arg(calls.to_string())
        .env("TRACE_MANAGER_SOCKET", dir.join("none.sock"))
        .output()
        .context("running trace-cli record")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("trace-cli record failed: {stderr}");
    }
    Ok((
        total_time(&String::from_utf8_lossy(&out.stdout))?,
        number_before(&stderr, "kernel events")?,
    ))
}

/// Runs the benchmark: `rounds` interleaved rounds of `calls` calls.
pub fn flight_bench(rounds: usize, calls: u64) -> Result<()> {
    if !is_root() {
        bail!("the benchmark loads eBPF programs: run it as root");
    }
    super::ensure_peers()?;
    let cli = build_release(Built::TraceCli)?;
    let manager = build_release(Built::Bin("trace-manager", "trace-manager"))?;
    let dir = std::env::temp_dir().join(format!("trace-bench-flight-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;

    let (mut none, mut recorded, mut flight, mut events) = (vec![], vec![], vec![], vec![]);
    let (mut snap_ms, mut snap_bytes) = (vec![], vec![]);
    for round in 0..rounds {
        eprintln!("bench flight: round {}/{rounds}", round + 1);
        none.push(run_loop(calls)?);
        let (seconds, n) = run_recorded(&cli, &dir, calls)?;
        recorded.push(seconds);
        events.push(n as f64);
        let d = Daemon::start(&manager, &cli, &dir, "30s")?;
        flight.push(run_loop(calls)?);
        // The window now holds the loop's events: a snapshot of all of it.
        let file = dir.join("snapshot.fxt");
        let began = Instant::now();
        let out = Command::new(&cli)
            .args(["snapshot", "-o"])
            .arg(&file)
            .env("TRACE_MANAGER_SOCKET", &d.socket)
            .output()?;
        if !out.status.success() {
            bail!(
                "trace-cli snapshot failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        snap_ms.push(began.elapsed().as_secs_f64() * 1000.0);
        snap_bytes.push(std::fs::metadata(&file)?.len() as f64);
        drop(d);
    }
    std::fs::remove_dir_all(&dir).ok();

    let base = median(none.iter().copied());
    let per_call = |s: &[f64]| (median(s.iter().copied()) - base) * 1e9 / calls as f64;
    let (rec, fr) = (per_call(&recorded), per_call(&flight));
    println!(
        "flight recorder: {calls} getppid calls on CPU 0, {CATEGORIES}, {rounds} rounds, medians"
    );
    println!("{:<28} {:>12} {:>16}", "", "s per run", "extra ns / call");
    println!("{:<28} {:>12.3} {:>16}", "none", base, "-");
    println!(
        "{:<28} {:>12.3} {:>16.0}",
        "trace-cli record -a",
        median(recorded.iter().copied()),
        rec
    );
    println!(
        "{:<28} {:>12.3} {:>16.0}",
        "flight recorder (30 s)",
        median(flight.iter().copied()),
        fr
    );
    println!(
        "flight recorder / record: {:.2}x; events per run recorded: {:.0}",
        fr / rec,
        median(events.iter().copied())
    );
    let ms = median(snap_ms.iter().copied());
    let bytes = median(snap_bytes.iter().copied());
    println!(
        "snapshot of the full window: {ms:.0} ms for {:.1} MB ({:.0} MB/s), trace-cli's wall time",
        bytes / 1e6,
        bytes / 1e6 / (ms / 1000.0)
    );
    Ok(())
}
