//! `cargo xtask bench profile`: what sampling stacks costs, in nanoseconds
//! of CPU per sample, at 99 and 999 Hz: of native code, and of Python code
//! with and without its frames read.
//!
//! The workload is the `stack_spin` test program, built for release: a
//! fixed amount of spinning (`--chain-batches N --direct-batches N/2`) in
//! two threads pinned to CPU 0, the tracer pinned to CPU 1. Each round runs,
//! interleaved, the workload untraced, and at each rate under:
//! - `trace-cli record -c kernel:profile --sample-hz HZ` (kernel and user
//!   stacks, user stacks unwound from an 8 KiB copy of the stack);
//! - `perf record -e cpu-clock -F HZ`, no stacks: the floor, what taking a
//!   sample at all costs;
//! - `perf record -e cpu-clock -F HZ -g` (frame-pointer call graphs, perf's
//!   default `-g`);
//! - `perf record -e cpu-clock -F HZ --call-graph dwarf,8192`, the
//!   like-for-like peer (8 KiB of stack per sample, unwound later).
//!
//! Only recording is measured, not perf's post-processing (`perf report`,
//! which unwinds perf's DWARF samples). The cost of one sample is the extra
//! CPU time the spinning threads needed for the same work (the sampling
//! interrupt runs in their time) plus the CPU time of the recorder's
//! process while they ran (from the workload's start handshake to its last
//! line), over the samples taken. The threads' CPU time is the least over
//! the rounds, traced and untraced (the work is the same every run: the
//! rest of the machine can only add to it), and the gap between the two
//! fastest untraced runs is printed as the noise of that share; the rest are
//! medians. What the recorder does before the workload starts (setting up,
//! loading programs) is left out; what it does after it ends (perf notes the
//! build ids of the programs its samples hit; the end of the file) is
//! printed apart, in milliseconds (`finish`): its process tree's user and
//! system time from `wait4`, less the workload's own CPU time, less the
//! recorder's CPU time at the workload's last line, less what the
//! workload's exit costs untraced. trace-cli is given a manager socket of
//! its own (`TRACE_MANAGER_SOCKET`), so that no daemon does its work: the
//! manager runs in its process.
//!
//! The second workload is `tests/python/bench_spin.py` under Debian's
//! `python3.11` (built without frame pointers): a fixed amount of
//! pure-Python work (`outer → middle → inner`) on one thread pinned to CPU
//! 0, measured the same way, under trace-cli with its Python frames read
//! (`trace-cli`) and not (`trace-cli no py`, `TRACE_PYTHON_FRAMES=0`) and
//! under the same perf peers. The overhead column is the cost per sample
//! times the rate: the share of the workload's CPU time that sampling it
//! costs.
//!
//! Samples are counted the same way for every tracer: the rate times the
//! CPU seconds the spinning threads used, since each tracer takes one
//! sample of a busy thread per 1/HZ of its CPU time; what each tracer says
//! it wrote (perf's `SAMPLE` records, trace-cli's kernel events) is printed
//! beside, as a check.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use super::{Built, build_release, median, number_before, perf_stat, which};
use crate::run::is_root;

/// The sampling rates measured, in Hz.
const RATES: [u32; 2] = [99, 999];

/// A recorder measured.
#[derive(Clone, Debug)]
enum Tracer {
    /// `trace-cli record -c kernel:profile`, this binary (named for the
    /// report: `trace-cli`, `trace-cli fp` for `--call-graph fp`, or
    /// `baseline` for another build), with `extra` arguments.
    TraceCli {
        name: &'static str,
        cli: PathBuf,
        extra: &'static [&'static str],
        env: &'static [(&'static str, &'static str)],
    },
    /// `perf record` without call graphs: the floor.
    PerfNoStacks,
    /// `perf record -g`: frame-pointer call graphs.
    PerfFramePointers,
    /// `perf record --call-graph dwarf,8192`: copies of the stack.
    PerfDwarf,
}

impl Tracer {
    fn name(&self) -> &'static str {
        match self {
            Tracer::TraceCli { name, .. } => name,
            Tracer::PerfNoStacks => "perf, no stacks",
            Tracer::PerfFramePointers => "perf -g",
            Tracer::PerfDwarf => "perf dwarf,8192",
        }
    }

    /// The recorder's command line up to (without) `--` and the workload,
    /// pinned to CPU 1, sampling at `hz` into `file`; trace-cli's manager
    /// socket beside `file`.
    fn command(&self, hz: u32, file: &Path) -> Command {
        let mut c = Command::new("taskset");
        c.args(["-c", "1"]);
        match self {
            Tracer::TraceCli {
                cli, extra, env, ..
            } => {
                c.envs(env.iter().copied())
                    .env("TRACE_MANAGER_SOCKET", file.with_file_name("manager.sock"))
                    .arg(cli)
                    .args(["record", "-c", "kernel:profile", "--sample-hz"])
                    .arg(hz.to_string())
                    .args(*extra);
            }
            Tracer::PerfNoStacks | Tracer::PerfFramePointers | Tracer::PerfDwarf => {
                c.args(["perf", "record", "-q", "-e", "cpu-clock", "-F"])
                    .arg(hz.to_string());
                match self {
                    Tracer::PerfFramePointers => c.arg("-g"),
                    Tracer::PerfDwarf => c.args(["--call-graph", "dwarf,8192"]),
                    _ => &mut c,
                };
            }
        }
        c.arg("-o").arg(file);
        c
    }
}

/// What one run measured.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Run {
    /// CPU time the spinning threads used for their fixed work.
    work_ns: u64,
    /// The recorder's CPU time while the workload ran (0 untraced).
    recorder_ns: u64,
    /// Traced: the recorder's CPU time after the workload's last line, and
    /// the workload's exit. Untraced: the CPU time the workload's exit
    /// costs (its `wait4` time less its own last reading).
    finish_ns: u64,
    /// Size of the output file.
    bytes: u64,
    /// Samples (or events) the tracer says it wrote.
    recorded: Option<u64>,
    /// Samples the tracer says it lost.
    dropped: Option<u64>,
}

/// One row of the report: one tracer's runs at one rate, against the
/// untraced runs. The work's CPU time is the least of the runs (the work is
/// the same every run: the rest of the machine can only add to it); the
/// rest are medians.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Row {
    /// Samples taken: the rate times the spinning threads' CPU seconds.
    samples: f64,
    /// How much more CPU time the same work needed, in percent.
    work_extra_percent: f64,
    /// The workload's extra CPU time per sample, in ns.
    in_workload_ns: f64,
    /// The recorder's CPU time per sample, in ns.
    recorder_ns: f64,
    /// Both: the cost of one sample, in ns.
    total_ns: f64,
    /// The recorder's CPU time after the workload's end, in ms.
    finish_ms: f64,
}

impl Row {
    /// The row of `runs` at `hz`, against the `untraced` runs of the same
    /// rounds.
    fn new(hz: u32, untraced: &[Run], runs: &[Run]) -> Row {
        let base_work = least(untraced.iter().map(|r| r.work_ns as f64));
        let base_exit = median(untraced.iter().map(|r| r.finish_ns as f64));
        let work = least(runs.iter().map(|r| r.work_ns as f64));
        let samples = median(runs.iter().map(|r| f64::from(hz) * r.work_ns as f64 / 1e9)).max(1.0);
        let in_workload_ns = (work - base_work) / samples;
        let recorder_ns = median(runs.iter().map(|r| r.recorder_ns as f64)) / samples;
        Row {
            samples,
            work_extra_percent: (work / base_work.max(1.0) - 1.0) * 100.0,
            in_workload_ns,
            recorder_ns,
            total_ns: in_workload_ns + recorder_ns,
            finish_ms: (median(runs.iter().map(|r| r.finish_ns as f64)) - base_exit) / 1e6,
        }
    }
}

/// Runs the benchmark: `rounds` interleaved rounds of `stack_spin` with
/// `batches` batches of spinning in its `chain` thread (half as many in
/// `direct`), untraced and under each recorder at each rate; with
/// `baseline` (another `trace-cli` binary), that one too.
pub fn profile_bench(rounds: usize, batches: u64, baseline: Option<&Path>) -> Result<()> {
    if !is_root() {
        bail!("the benchmark loads eBPF programs and samples with perf: run it as root");
    }
    if which("perf").is_none() {
        bail!("`perf` is needed for the peers: apt-get install linux-perf");
    }
    let cli = build_release(Built::TraceCli)?;
    let spin = build_release(Built::Bin("tests", "stack_spin"))?;
    let mut tracers = vec![
        Tracer::TraceCli {
            name: "trace-cli",
            cli: cli.clone(),
            extra: &[],
            env: &[],
        },
        Tracer::TraceCli {
            name: "trace-cli fp",
            cli: cli.clone(),
            extra: &["--call-graph", "fp"],
            env: &[],
        },
    ];
    if let Some(old) = baseline {
        tracers.push(Tracer::TraceCli {
            name: "baseline",
            cli: old.to_path_buf(),
            extra: &[],
            env: &[],
        });
    }
    tracers.extend([
        Tracer::PerfNoStacks,
        Tracer::PerfFramePointers,
        Tracer::PerfDwarf,
    ]);
    let dir = std::env::temp_dir().join(format!("trace-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let workload = workload_args(&spin, batches);
    let (untraced, runs) = run_rounds(&tracers, &workload, rounds, &dir)?;
    report(
        &format!(
            "stack_spin --chain-batches {batches} --direct-batches {}",
            batches / 2
        ),
        &tracers,
        &untraced,
        &runs,
        rounds,
    );

    // Python: Debian's interpreter (no frame pointers) running pure-Python
    // work, with and without its frames read at each sample.
    let python_tracers = vec![
        Tracer::TraceCli {
            name: "trace-cli",
            cli: cli.clone(),
            extra: &[],
            env: &[],
        },
        Tracer::TraceCli {
            name: "trace-cli no py",
            cli,
            extra: &[],
            env: &[("TRACE_PYTHON_FRAMES", "0")],
        },
        Tracer::PerfNoStacks,
        Tracer::PerfFramePointers,
        Tracer::PerfDwarf,
    ];
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/bench_spin.py");
    let python_batches = batches * 4;
    let python = vec![
        "taskset".to_owned(),
        "-c".to_owned(),
        "0".to_owned(),
        "/usr/bin/python3.11".to_owned(),
        script.display().to_string(),
        python_batches.to_string(),
    ];
    let (untraced, runs) = run_rounds(&python_tracers, &python, rounds, &dir)?;
    report(
        &format!("python3.11 tests/python/bench_spin.py {python_batches}"),
        &python_tracers,
        &untraced,
        &runs,
        rounds,
    );
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// Runs by rate, then tracer, one per round.
type ByRate = Vec<Vec<Vec<Run>>>;

/// `rounds` interleaved rounds of `workload`, untraced and under each of
/// `tracers` at each rate: the untraced runs, and `runs[rate][tracer]`.
fn run_rounds(
    tracers: &[Tracer],
    workload: &[String],
    rounds: usize,
    dir: &Path,
) -> Result<(Vec<Run>, ByRate)> {
    let mut untraced = Vec::new();
    let mut runs = vec![vec![Vec::new(); tracers.len()]; RATES.len()];
    for round in 0..rounds {
        eprintln!("bench: {} round {}/{rounds}", workload[3], round + 1);
        untraced.push(measure(None, workload, dir)?);
        for (at_rate, &hz) in runs.iter_mut().zip(&RATES) {
            for (of_tracer, tracer) in at_rate.iter_mut().zip(tracers) {
                of_tracer.push(measure(Some((tracer, hz)), workload, dir)?);
            }
        }
    }
    Ok((untraced, runs))
}

/// Prints the rows of `runs` (by rate, then tracer) against `untraced`,
/// for the workload `what`.
fn report(what: &str, tracers: &[Tracer], untraced: &[Run], runs: &ByRate, rounds: usize) {
    let untraced_work: Vec<f64> = untraced.iter().map(|r| r.work_ns as f64).collect();
    let base_work = least(untraced_work.iter().copied());
    let noise = gap_of_two_least(&untraced_work);
    println!(
        "workload: {what} ({:.3} s of CPU untraced at least, the two fastest runs {:.2}% apart) \
         on CPU 0, recorder on CPU 1, {rounds} rounds; cpu-clock samples; recording only",
        base_work / 1e9,
        noise / base_work.max(1.0) * 100.0
    );
    println!(
        "ns of CPU per sample = (the spinning threads' extra CPU time + the recorder's CPU time \
         while they ran) / (Hz x the threads' CPU seconds), the threads' time of the least run, \
         the recorder's of the median; overhead = that x Hz, of the workload's CPU time; \
         finish: the recorder's CPU time after the workload"
    );
    for (at_rate, &hz) in runs.iter().zip(&RATES) {
        let rows: Vec<Row> = at_rate.iter().map(|r| Row::new(hz, untraced, r)).collect();
        // The gap between the two fastest untraced runs over the samples of
        // a run: how far the workload's share may be off.
        println!(
            "{hz:>4} Hz: the two fastest untraced runs differ by {:.0} ns per sample",
            noise / (f64::from(hz) * base_work / 1e9).max(1.0)
        );
        let total_of = |peer: &Tracer| {
            let at = tracers.iter().position(|t| t.name() == peer.name());
            at.map_or(f64::NAN, |i| rows[i].total_ns)
        };
        let fp = total_of(&Tracer::PerfFramePointers);
        let dwarf = total_of(&Tracer::PerfDwarf);
        for ((tracer, row), of_tracer) in tracers.iter().zip(&rows).zip(at_rate) {
            let recorded = median_if_all(of_tracer.iter().map(|r| r.recorded));
            let dropped = median_if_all(of_tracer.iter().map(|r| r.dropped));
            println!(
                "{hz:>4} Hz {:<16} {:>7.0} samples  work {:>+6.2}%  {:>7.0} + {:>7.0} = {:>7.0} \
                 ns/sample  overhead {:>5.2}%  {:>5.2}x perf -g  {:>5.2}x perf dwarf  \
                 finish {:>6.1} ms  {recorded:>7} recorded  {dropped:>4} dropped  \
                 {:>6.0} bytes/sample",
                tracer.name(),
                row.samples,
                row.work_extra_percent,
                row.in_workload_ns,
                row.recorder_ns,
                row.total_ns,
                row.total_ns * f64::from(hz) / 1e9 * 100.0,
                row.total_ns / fp,
                row.total_ns / dwarf,
                row.finish_ms,
                median(of_tracer.iter().map(|r| r.bytes as f64)) / row.samples,
            );
        }
    }
}

/// The least of `values` (0 for none).
fn least(values: impl Iterator<Item = f64>) -> f64 {
    values.reduce(f64::min).unwrap_or(0.0)
}

/// How far apart the two least of `values` are (0 for fewer than two): the
/// precision of [`least`].
fn gap_of_two_least(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v[..] {
        [a, b, ..] => b - a,
        _ => 0.0,
    }
}

/// The median of `counts` as text, or `?` when a run had none.
fn median_if_all(counts: impl Iterator<Item = Option<u64>>) -> String {
    let counts: Option<Vec<u64>> = counts.collect();
    match counts {
        Some(v) if !v.is_empty() => format!("{:.0}", median(v.into_iter().map(|n| n as f64))),
        _ => "?".to_owned(),
    }
}

/// The workload's command line: `stack_spin` pinned to CPU 0, waiting for
/// a line on standard input before it spins.
fn workload_args(spin: &Path, batches: u64) -> Vec<String> {
    vec![
        "taskset".to_owned(),
        "-c".to_owned(),
        "0".to_owned(),
        spin.display().to_string(),
        "--chain-batches".to_owned(),
        batches.to_string(),
        "--direct-batches".to_owned(),
        (batches / 2).to_string(),
        "--wait-stdin".to_owned(),
    ]
}

/// Runs the workload once, untraced or under `tracer` at a rate, and
/// measures it (see the module's documentation).
fn measure(tracer: Option<(&Tracer, u32)>, workload: &[String], dir: &Path) -> Result<Run> {
    let file = dir.join("profile.out");
    let _ = std::fs::remove_file(&file);
    let errors = dir.join("stderr.txt");
    let mut cmd = match tracer {
        Some((t, hz)) => {
            let mut c = t.command(hz, &file);
            c.arg("--").args(workload);
            c
        }
        None => {
            let mut c = Command::new(&workload[0]);
            c.args(&workload[1..]);
            c
        }
    };
    let name = tracer.map_or("the workload", |(t, _)| t.name());
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(File::create(&errors)?)
        .spawn()
        .with_context(|| format!("running {cmd:?}"))?;
    let pid = child.id() as libc::pid_t;
    let failed = |what: &str| {
        let stderr = std::fs::read_to_string(&errors).unwrap_or_default();
        anyhow::anyhow!("{name} {what}: {stderr}")
    };
    let mut stdin = child.stdin.take().context("piped")?;
    let mut stdout = BufReader::new(child.stdout.take().context("piped")?);
    let mut line = String::new();
    stdout.read_line(&mut line)?;
    if !line.starts_with("pid=") {
        super::wait(pid)?;
        return Err(failed("did not start the workload"));
    }
    // The workload waits: the recorder is set up. Its cost from here on.
    let recorder_cpu_ns = || match tracer {
        Some(_) => process_cpu_ns(pid),
        None => Ok(0),
    };
    let at_start = recorder_cpu_ns()?;
    stdin.write_all(b"go\n")?;
    drop(stdin);
    line.clear();
    stdout.read_line(&mut line)?;
    let at_end = recorder_cpu_ns()?;
    let ended = super::wait(pid)?;
    let (success, tree_ns) = (ended.success, ended.cpu_ns);
    if !success {
        return Err(failed("failed"));
    }
    let report = SpinReport::parse(&line)
        .with_context(|| format!("no measurements in the workload's output {line:?}"))?;
    let finish_ns = tree_ns
        .checked_sub(report.process_cpu_ns + at_end)
        .with_context(|| format!("{name} used less CPU time than its workload: no wait for it?"))?;
    let stderr = std::fs::read_to_string(&errors).unwrap_or_default();
    let (recorded, dropped) = match tracer {
        None => (None, None),
        Some((Tracer::TraceCli { .. }, _)) => (
            number_before(&stderr, "kernel events").ok(),
            number_before(&stderr, "dropped").ok(),
        ),
        Some(_) => {
            // Counting what perf wrote is post-processing: after the measurement.
            let stats = Command::new("perf")
                .args(["report", "--stats", "-i"])
                .arg(&file)
                .output()
                .context("running perf report --stats")?;
            let text = String::from_utf8_lossy(&stats.stdout);
            (
                Some(perf_stat(&text, "SAMPLE events:")),
                Some(perf_stat(&text, "LOST_SAMPLES events:") + perf_stat(&text, "LOST events:")),
            )
        }
    };
    Ok(Run {
        work_ns: report.chain_cpu_ns + report.direct_cpu_ns,
        recorder_ns: at_end - at_start,
        finish_ns,
        bytes: std::fs::metadata(&file).map_or(0, |m| m.len()),
        recorded,
        dropped,
    })
}

/// The numbers of `stack_spin`'s last line this benchmark needs.
#[derive(Debug, PartialEq, Eq)]
struct SpinReport {
    chain_cpu_ns: u64,
    direct_cpu_ns: u64,
    process_cpu_ns: u64,
}

impl SpinReport {
    /// Parses `chain_cpu_ns=C direct_cpu_ns=D ... process_cpu_ns=Q`.
    fn parse(line: &str) -> Option<SpinReport> {
        let field = |key: &str| -> Option<u64> {
            line.split_whitespace()
                .filter_map(|f| f.split_once('='))
                .find(|(k, _)| *k == key)?
                .1
                .parse()
                .ok()
        };
        Some(SpinReport {
            chain_cpu_ns: field("chain_cpu_ns")?,
            direct_cpu_ns: field("direct_cpu_ns")?,
            process_cpu_ns: field("process_cpu_ns")?,
        })
    }
}

/// CPU time process `pid` has used so far, all its threads, in ns.
fn process_cpu_ns(pid: libc::pid_t) -> Result<u64> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `clock` is a valid clockid_t for the call to fill.
    let rc = unsafe { libc::clock_getcpuclockid(pid, &mut clock) };
    if rc != 0 {
        bail!("no CPU clock for process {pid}: error {rc}");
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for clock_gettime to fill.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        bail!(
            "reading process {pid}'s CPU clock: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_the_extra_cpu_time_over_the_samples() {
        let untraced = |work_ns, finish_ns| Run {
            work_ns,
            finish_ns,
            ..Run::default()
        };
        let untraced = [
            untraced(2_100_000_000, 100_000),
            untraced(2_000_000_000, 300_000),
            untraced(2_200_000_000, 200_000),
        ];
        // 2.01 s of work at least at 100 Hz: 201 samples, 10 ms more work
        // than the least untraced, 2 ms of recorder meanwhile, 5 ms after
        // beside the 0.2 ms the exit costs.
        let traced = [
            Run {
                work_ns: 2_010_000_000,
                recorder_ns: 2_000_000,
                finish_ns: 5_200_000,
                ..Run::default()
            },
            Run {
                work_ns: 2_050_000_000,
                recorder_ns: 2_000_000,
                finish_ns: 5_200_000,
                ..Run::default()
            },
            Run {
                work_ns: 2_010_000_000,
                recorder_ns: 2_000_000,
                finish_ns: 5_200_000,
                ..Run::default()
            },
        ];
        let row = Row::new(100, &untraced, &traced);
        assert!((row.samples - 201.0).abs() < 1e-9);
        assert!((row.work_extra_percent - 0.5).abs() < 1e-9);
        assert!((row.in_workload_ns - 10e6 / 201.0).abs() < 1e-6);
        assert!((row.recorder_ns - 2e6 / 201.0).abs() < 1e-6);
        assert!((row.total_ns - 12e6 / 201.0).abs() < 1e-6);
        assert!((row.finish_ms - 5.0).abs() < 1e-9);
    }

    #[test]
    fn command_lines() {
        let args = |c: Command| -> Vec<String> {
            c.get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        let file = Path::new("/t/out");
        let cli = Tracer::TraceCli {
            name: "trace-cli",
            cli: PathBuf::from("/b/trace-cli"),
            extra: &[],
            env: &[],
        };
        let command = cli.command(99, file);
        assert!(
            command
                .get_envs()
                .any(|(k, v)| k == "TRACE_MANAGER_SOCKET" && v == Some("/t/manager.sock".as_ref()))
        );
        assert_eq!(
            args(command).join(" "),
            "-c 1 /b/trace-cli record -c kernel:profile --sample-hz 99 -o /t/out"
        );
        assert_eq!(
            args(Tracer::PerfNoStacks.command(99, file)).join(" "),
            "-c 1 perf record -q -e cpu-clock -F 99 -o /t/out"
        );
        assert_eq!(
            args(Tracer::PerfFramePointers.command(999, file)).join(" "),
            "-c 1 perf record -q -e cpu-clock -F 999 -g -o /t/out"
        );
        assert_eq!(
            args(Tracer::PerfDwarf.command(99, file)).join(" "),
            "-c 1 perf record -q -e cpu-clock -F 99 --call-graph dwarf,8192 -o /t/out"
        );
        assert_eq!(
            workload_args(Path::new("/b/stack_spin"), 9).join(" "),
            "taskset -c 0 /b/stack_spin --chain-batches 9 --direct-batches 4 --wait-stdin"
        );
    }

    #[test]
    fn parses_the_workload_report() {
        let line = "chain_cpu_ns=5 direct_cpu_ns=6 chain_tid=1 direct_tid=2 pid=3 wall_ns=9 \
                    process_cpu_ns=12\n";
        assert_eq!(
            SpinReport::parse(line),
            Some(SpinReport {
                chain_cpu_ns: 5,
                direct_cpu_ns: 6,
                process_cpu_ns: 12
            })
        );
        assert_eq!(SpinReport::parse("pid=3"), None);
        assert_eq!(median_if_all([Some(3), Some(1), Some(2)].into_iter()), "2");
        assert_eq!(median_if_all([Some(3), None].into_iter()), "?");
        assert_eq!(least([3.0, 1.5, 2.0].into_iter()), 1.5);
        assert_eq!(gap_of_two_least(&[3.0, 1.5, 2.0]), 0.5);
        assert_eq!(gap_of_two_least(&[3.0]), 0.0);
    }
}
