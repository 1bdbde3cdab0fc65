//! `cargo xtask bench selection`: what choosing the processes recorded
//! costs, by pid (`-p`, a command's process tree) and by cgroup
//! (`--cgroup`), in the eBPF programs at every event.
//!
//! Interleaved rounds of a `getppid` loop (`perf bench syscall basic`, on
//! CPU 0) recorded with `-c kernel:syscall`: untraced; under `trace-cli
//! record -a` (no selection); with the loop selected by pid (it is the
//! recorded command) and by cgroup (it runs in a cgroup of the benchmark's
//! own, which `--cgroup` names); and with a selection that leaves the loop
//! out (a sleeping process by `-p`, an empty cgroup by `--cgroup`), which
//! is what every other task of the machine pays while one container is
//! recorded. Each loop runs through the same `sh -c 'echo $$ >
//! CGROUP/cgroup.procs; exec ...'`, so that only the selection differs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use anyhow::{Context, Result, bail};

use super::{Built, Sample, build_release, median, recorded, total_time};
use crate::run::is_root;

/// What the recordings are told to select.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Select {
    /// The loop untraced.
    None,
    /// `-a`: every process.
    All,
    /// The loop, by pid (the recorded command).
    Pid,
    /// The loop, by its cgroup.
    Cgroup,
    /// A sleeping process by pid; the loop is left out.
    OtherPid,
    /// An empty cgroup; the loop is left out.
    OtherCgroup,
}

impl Select {
    fn name(self) -> &'static str {
        match self {
            Select::None => "none",
            Select::All => "-a (no selection)",
            Select::Pid => "-p (selected)",
            Select::Cgroup => "--cgroup (selected)",
            Select::OtherPid => "-p (left out)",
            Select::OtherCgroup => "--cgroup (left out)",
        }
    }
}

/// A cgroup of the benchmark's own under the cgroup v2 root; removed on
/// drop.
struct Cgroup {
    dir: PathBuf,
    name: String,
}

impl Cgroup {
    fn new(name: &str) -> Result<Cgroup> {
        let table = std::fs::read_to_string("/proc/self/mountinfo")?;
        let root = table
            .lines()
            .find_map(|l| {
                let (left, right) = l.split_once(" - ")?;
                let mut f = left.split_whitespace();
                let (root, mount) = (f.nth(3)?, f.next()?);
                (right.starts_with("cgroup2 ") && root == "/").then(|| PathBuf::from(mount))
            })
            .context("no cgroup v2 hierarchy is mounted")?;
        let name = format!("{name}-{}", std::process::id());
        let dir = root.join(&name);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Cgroup {
            dir,
            name: format!("/{name}"),
        })
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A sleeping process, killed on drop.
struct Sleeper(Child);

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the benchmark: `rounds` interleaved rounds of `loops` calls.
pub fn selection_bench(rounds: usize, loops: u64) -> Result<()> {
    if !is_root() {
        bail!("the benchmark loads eBPF programs and makes a cgroup: run it as root");
    }
    let cli = build_release(Built::TraceCli)?;
    let dir = std::env::temp_dir().join(format!("trace-bench-select-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let inside = Cgroup::new("trace-bench-selected")?;
    let empty = Cgroup::new("trace-bench-empty")?;
    let sleeper = Sleeper(
        Command::new("sleep")
            .arg("100000")
            .spawn()
            .context("starting sleep")?,
    );
    let selections = [
        Select::None,
        Select::All,
        Select::Pid,
        Select::Cgroup,
        Select::OtherPid,
        Select::OtherCgroup,
    ];
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); selections.len()];
    for round in 0..rounds {
        eprintln!("bench: round {}/{rounds}", round + 1);
        for (s, samples) in selections.iter().zip(&mut samples) {
            samples.push(run(&cli, &dir, *s, &inside, &empty, sleeper.0.id(), loops)?);
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    let base = median(samples[0].iter().map(|s| s.seconds));
    let per_call = |s: f64| (s - base) * 1e9 / loops as f64;
    println!(
        "workload: perf bench syscall basic -l {loops} on CPU 0 (in a cgroup of its own), \
         trace-cli -c kernel:syscall on CPU 1, {rounds} rounds, medians"
    );
    println!(
        "{:<22} {:>8} {:>10} {:>10} {:>9}",
        "selection", "seconds", "extra ns", "events", "dropped"
    );
    for (s, samples) in selections.iter().zip(&samples) {
        let secs = median(samples.iter().map(|x| x.seconds));
        println!(
            "{:<22} {secs:>8.3} {:>10.0} {:>10.0} {:>9.0}",
            s.name(),
            per_call(secs),
            median(samples.iter().map(|x| x.events as f64)),
            median(samples.iter().map(|x| x.dropped as f64)),
        );
    }
    let at = |s: Select| {
        selections
            .iter()
            .position(|&x| x == s)
            .map(|i| per_call(median(samples[i].iter().map(|x| x.seconds))))
            .unwrap_or(0.0)
    };
    // Two events per call (entry and return) go through the filter.
    println!(
        "the cgroup test against the pid lookup, per program run: {:.1} ns on a selected task, \
         {:.1} ns on a task left out (two runs per call)",
        (at(Select::Cgroup) - at(Select::Pid)) / 2.0,
        (at(Select::OtherCgroup) - at(Select::OtherPid)) / 2.0
    );
    Ok(())
}

/// The loop run beside `trace-cli record -c kernel:syscall SELECTION`,
/// which is stopped (Ctrl-C) once the loop has ended.
fn beside(cli: &Path, file: &Path, selection: &[&str], looped: &[&str]) -> Result<Sample> {
    use std::io::{BufRead, Read};
    let mut recorder = Command::new("taskset")
        .args(["-c", "1"])
        .arg(cli)
        .args(["record", "-c", "kernel:syscall"])
        .args(selection)
        .arg("-o")
        .arg(file)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("running trace-cli record")?;
    let mut err = std::io::BufReader::new(recorder.stderr.take().context("piped")?);
    let mut line = String::new();
    while !line.starts_with("trace-cli: recording") {
        line.clear();
        if err.read_line(&mut line)? == 0 {
            bail!("trace-cli record ended before recording");
        }
    }
    let out = Command::new(looped[0])
        .args(&looped[1..])
        .output()
        .context("running the loop")?;
    // SAFETY: kill() with a pid and a signal has no memory effects.
    unsafe { libc::kill(recorder.id() as i32, libc::SIGINT) };
    let mut stderr = String::new();
    err.read_to_string(&mut stderr)?;
    if !recorder.wait()?.success() {
        bail!("trace-cli record failed: {stderr}");
    }
    recorded(&out.stdout, &stderr, file)
}

/// One run of the loop under selection `s`.
fn run(
    cli: &Path,
    dir: &Path,
    s: Select,
    inside: &Cgroup,
    empty: &Cgroup,
    sleeper: u32,
    loops: u64,
) -> Result<Sample> {
    let script = format!(
        "echo $$ > {}/cgroup.procs && exec taskset -c 0 perf bench syscall basic -l {loops}",
        inside.dir.display()
    );
    let looped = ["sh", "-c", &script];
    if s == Select::None {
        let out = Command::new(looped[0])
            .args(&looped[1..])
            .output()
            .context("running the loop")?;
        return Ok(Sample {
            seconds: total_time(&String::from_utf8_lossy(&out.stdout))?,
            ..Sample::default()
        });
    }
    let file = dir.join("bench.fxt");
    let sleeper = sleeper.to_string();
    if s == Select::OtherPid {
        // A command is always selected with `-p`: the recording runs on its
        // own, the loop beside it.
        return beside(cli, &file, &["-p", &sleeper], &looped);
    }
    let selection: Vec<&str> = match s {
        Select::None | Select::Pid | Select::OtherPid => vec![],
        Select::All => vec!["-a"],
        Select::Cgroup => vec!["--cgroup", &inside.name],
        Select::OtherCgroup => vec!["--cgroup", &empty.name],
    };
    let out = Command::new("taskset")
        .args(["-c", "1"])
        .arg(cli)
        .args(["record", "-c", "kernel:syscall"])
        .args(&selection)
        .arg("-o")
        .arg(&file)
        .arg("--")
        .args(looped)
        .output()
        .context("running trace-cli record")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("trace-cli record failed: {stderr}");
    }
    recorded(&out.stdout, &stderr, &file)
}
