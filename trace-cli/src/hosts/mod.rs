//! `trace-cli record --host` and `snapshot --host`: the same recording, or
//! the same flight recorder snapshot, on several machines at once, their
//! clocks mapped onto this one's, merged into one trace.
//!
//! - `spec`: the machines named, and what each records.
//! - `ssh`: how a machine is reached (ssh, nothing listening).
//! - `clock`: the clock exchange (`trace-cli clock-server` on the remote
//!   side), a burst of pings a second.
//! - `remote`: a machine's `trace-cli record -o -` (or `snapshot -o -`),
//!   its trace spooled here as it comes.
//! - `merge`: the merged trace (`trace_hosts` rewrites each machine's).
//! - `remote_side`: what `record` does on a remote machine (stopping when
//!   asked, the tests' clock offset).

mod clock;
mod merge;
mod remote;
pub mod remote_side;
mod spec;
mod ssh;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use trace_hosts::{ClockMap, Machine, SyncPoint};

use clock::{ClockSession, Hello};
pub use clock::{serve as clock_server, test_offset_ns};
use remote::{HostEvent, RemoteCommand, RemoteRecording};
use spec::HostSpec;
use ssh::Ssh;

/// The options of `record` and `snapshot` that name other machines.
#[derive(Args, Clone, Debug, Default)]
pub struct HostArgs {
    /// Record another machine at the same time, into the same trace:
    /// NAME=DESTINATION, DESTINATION as ssh takes it (`root@10.0.0.2`,
    /// `ssh://db:2222`, a name of your ssh configuration). Its
    /// `trace-cli record` runs over ssh with your keys (no password is
    /// asked) and streams its trace here; its clock is mapped onto this
    /// machine's. It records the same categories and options, and the same
    /// `--cgroup`, `--unit` and `--container` selection (`-p` and a COMMAND
    /// stay here: without a selection of its own it records every process).
    /// May repeat.
    #[arg(long = "host", value_name = "NAME=DEST")]
    pub hosts: Vec<String>,
    /// Machines to record too, from a file: a line `NAME DESTINATION
    /// [OPTIONS...]` each (`#` comments), the options selecting what that
    /// machine records instead of this recording's selection
    /// (`db root@10.0.0.3 --unit postgresql`).
    #[arg(long = "hosts", value_name = "FILE")]
    pub hosts_file: Option<PathBuf>,
    /// The ssh command that reaches the machines, split at spaces.
    #[arg(long, value_name = "COMMAND", default_value = "ssh")]
    pub ssh: String,
    /// trace-cli on the other machines.
    #[arg(long, value_name = "PATH", default_value = "trace-cli")]
    pub remote_trace_cli: String,
    /// This machine's name in a trace of several (default: its host name).
    #[arg(long, value_name = "NAME")]
    pub host_name: Option<String>,
}

impl HostArgs {
    /// Whether other machines are recorded.
    pub fn any(&self) -> bool {
        !self.hosts.is_empty() || self.hosts_file.is_some()
    }
}

/// Where the spool files of `--host` go (the output's folder, or the
/// temporary one for standard output), and the name they start with.
pub fn spool_place(output: &Path, to_stdout: bool) -> (PathBuf, String) {
    let dir = match output.parent() {
        _ if to_stdout => std::env::temp_dir(),
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let stem = match output.file_name() {
        Some(n) if !to_stdout => n.to_string_lossy().into_owned(),
        _ => "trace.fxt".to_owned(),
    };
    (dir, stem)
}

/// The CPUs every machine together may have: the kernel provider writes
/// context switches in records with an 8-bit CPU number.
const MAX_CPUS: u32 = 256;

/// How long a machine may take to start recording.
const START_LIMIT: Duration = Duration::from_secs(60);

/// How long a machine may take to end its recording once asked.
const END_LIMIT: Duration = Duration::from_secs(60);

/// The other machines of a recording.
pub struct Hosts {
    local: Machine,
    running: Vec<Running>,
    events: UnboundedReceiver<HostEvent>,
    /// [`Hosts::wait_ready`] is over: a machine that ends now ends its
    /// part, started or not.
    waited: bool,
    stopping: bool,
    /// A machine's trigger that fired and was not answered yet.
    trigger: Option<String>,
    /// The spool files are the merge's to remove (or keep, if it failed).
    merging: bool,
    spool_dir: PathBuf,
    stem: String,
}

impl Drop for Hosts {
    /// A recording that failed before its merge: the other machines are
    /// asked to end, and what they sent is removed.
    fn drop(&mut self) {
        if self.merging {
            return;
        }
        self.stop();
        let spools = self
            .running
            .iter()
            .filter_map(|r| r.recording.as_ref().map(|rec| rec.spool.clone()));
        for s in spools.chain(std::iter::once(self.local_spool())) {
            std::fs::remove_file(s).ok();
        }
    }
}

/// One other machine.
struct Running {
    spec: HostSpec,
    hello: Hello,
    recording: Option<RemoteRecording>,
    clock_stop: Option<mpsc::Sender<()>>,
    clock: Option<JoinHandle<(Vec<SyncPoint>, Option<String>)>>,
    ready: bool,
    /// It stopped on its own trigger.
    triggered: bool,
    /// Its trace has ended.
    ended: bool,
    /// It ended before it was asked to (not on its trigger).
    ended_early: bool,
}

impl Hosts {
    /// Reaches every machine of `args`, maps its clock, and starts on it
    /// `trace-cli` with the words `command` gives for it (given the
    /// selection of its `--hosts` line, if it has one), which says a line
    /// starting with `ready` once it is ready; spool files go in
    /// `spool_dir`, named after `stem`. Fails, before anything is recorded,
    /// when a machine cannot be reached.
    pub fn start(
        args: &HostArgs,
        command: &dyn Fn(Option<&[String]>) -> Vec<String>,
        ready: &'static str,
        spool_dir: &Path,
        stem: &str,
    ) -> Result<Hosts> {
        let here = Hello::here();
        let local_name = args
            .host_name
            .clone()
            .unwrap_or_else(|| here.hostname.clone());
        let specs = spec::hosts(&args.hosts, args.hosts_file.as_deref(), &local_name)?;
        if specs.len() + 1 > trace_hosts::ids::MAX_MACHINES as usize {
            bail!(
                "at most {} machines fit in one trace",
                trace_hosts::ids::MAX_MACHINES
            );
        }
        let ssh = Ssh::new(&args.ssh);
        // Every machine reached at once: each answers in about a second.
        let opened: Vec<_> = specs
            .iter()
            .map(|h| {
                let (ssh, dest, cli) = (
                    ssh.clone(),
                    h.destination.clone(),
                    args.remote_trace_cli.clone(),
                );
                std::thread::spawn(move || -> Result<_> {
                    let (mut session, hello) = ClockSession::open(&ssh, &dest, &cli)?;
                    let first = session.burst().context("exchanging clock pings")?;
                    Ok((session, hello, first))
                })
            })
            .collect();
        let mut sessions = Vec::new();
        for (h, t) in specs.iter().zip(opened) {
            let opened = t
                .join()
                .map_err(|_| anyhow::anyhow!("the clock thread failed"))
                .and_then(|r| r);
            sessions
                .push(opened.with_context(|| {
                    format!("cannot reach host {} ({})", h.name, h.destination)
                })?);
        }
        let cpus: u32 = here.cpus + sessions.iter().map(|(_, h, _)| h.cpus).sum::<u32>();
        if cpus > MAX_CPUS {
            bail!("the machines have {cpus} CPUs together; one trace holds at most {MAX_CPUS}");
        }
        let (tx, events) = unbounded_channel();
        let mut running = Vec::new();
        for (index, (h, (session, hello, first))) in specs.into_iter().zip(sessions).enumerate() {
            let remote_args = command((!h.select.is_empty()).then_some(h.select.as_slice()));
            let spool = spool_dir.join(format!(".{stem}.{}-{}", h.name, std::process::id()));
            let command = RemoteCommand {
                cli: &args.remote_trace_cli,
                args: &remote_args,
                ready,
            };
            let recording = RemoteRecording::start(&ssh, &h, index, &command, spool, tx.clone())?;
            let (clock_stop, stop_rx) = mpsc::channel();
            let clock = std::thread::Builder::new()
                .name(format!("clock-{}", h.name))
                .spawn(move || session.follow(first.into_iter().collect(), &stop_rx))?;
            running.push(Running {
                spec: h,
                hello,
                recording: Some(recording),
                clock_stop: Some(clock_stop),
                clock: Some(clock),
                ready: false,
                triggered: false,
                ended: false,
                ended_early: false,
            });
        }
        Ok(Hosts {
            local: Machine {
                name: local_name,
                cpus: here.cpus,
                kernel: here.kernel,
                ..Machine::default()
            },
            running,
            events,
            waited: false,
            stopping: false,
            trigger: None,
            merging: false,
            spool_dir: spool_dir.to_owned(),
            stem: stem.to_owned(),
        })
    }

    /// Where this machine's own trace is kept until the merge.
    pub fn local_spool(&self) -> PathBuf {
        self.spool_dir.join(format!(
            ".{}.{}-{}",
            self.stem,
            self.local.name,
            std::process::id()
        ))
    }

    /// Takes `event` in; a trigger that fired is kept for [`Self::triggered`].
    fn on(&mut self, event: HostEvent) {
        match event {
            HostEvent::Ready(i) => self.running[i].ready = true,
            HostEvent::Triggered(i, line) => {
                let r = &mut self.running[i];
                r.triggered = true;
                let line = line.trim_start_matches("trace-cli: ");
                self.trigger
                    .get_or_insert_with(|| format!("host {}: {line}", r.spec.name));
            }
            HostEvent::Ended(i) => {
                let r = &mut self.running[i];
                r.ended = true;
                // One that never started fails the start (`wait_ready`).
                if (r.ready || self.waited) && !self.stopping && !r.ended_early && !r.triggered {
                    r.ended_early = true;
                    eprintln!(
                        "trace-cli: host {} ended before it was asked to; the others go on",
                        r.spec.name
                    );
                }
            }
        }
    }

    /// Waits until every machine records; a machine whose recording ended
    /// before it started (refused there: no rights, a probe it may not
    /// place) fails the whole recording, with what it said, before any
    /// machine's trace is kept. One that has not started within
    /// [`START_LIMIT`] is waited for no longer.
    pub async fn wait_ready(&mut self) -> Result<()> {
        let deadline = tokio::time::Instant::now() + START_LIMIT;
        while self.running.iter().any(|r| !r.ready && !r.ended) {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(e)) => self.on(e),
                Ok(None) | Err(_) => break,
            }
        }
        for r in self.running.iter().filter(|r| !r.ready && !r.ended) {
            eprintln!(
                "trace-cli: host {} has not started within {} s; waiting no longer",
                r.spec.name,
                START_LIMIT.as_secs()
            );
        }
        if !self.running.iter().any(|r| r.ended && !r.ready) {
            self.waited = true;
            return Ok(());
        }
        self.stop();
        let mut failed = Vec::new();
        for r in self.running.iter_mut().filter(|r| r.ended && !r.ready) {
            let Some(rec) = r.recording.take() else {
                continue;
            };
            let spool = rec.spool.clone();
            let ended = rec.finish(END_LIMIT, false);
            std::fs::remove_file(spool).ok();
            failed.push(format!(
                "host {} ({}) could not start recording: {}",
                r.spec.name,
                r.spec.destination,
                ended.cause.as_deref().unwrap_or("it ended at once")
            ));
        }
        bail!("{}", failed.join("; "))
    }

    /// Resolves when another machine stopped on its own trigger, saying
    /// which; machines that are lost are said and the others go on.
    pub async fn triggered(&mut self) -> String {
        loop {
            if let Some(why) = self.trigger.take() {
                return why;
            }
            match self.events.recv().await {
                Some(e) => self.on(e),
                None => std::future::pending::<()>().await,
            }
        }
    }

    /// Sends `line` to every machine's `trace-cli` (what a snapshot waits
    /// for), then asks them to end.
    pub fn release(&mut self, line: &str) {
        for r in &mut self.running {
            if let Some(rec) = &mut r.recording {
                rec.send(line);
            }
        }
        self.stop();
    }

    /// Asks every machine to end its recording.
    pub fn stop(&mut self) {
        self.stopping = true;
        for r in &mut self.running {
            if let Some(rec) = &mut r.recording {
                rec.stop();
            }
            if let Some(s) = r.clock_stop.take() {
                let _ = s.send(());
            }
        }
    }

    /// Waits for every machine's trace, then writes the merged trace of
    /// this machine's (`local_spool`) and theirs to `out`; says what each
    /// machine gave. The spool files are removed once merged.
    pub fn finish(mut self, out: &mut dyn std::io::Write, destination: &str) -> Result<()> {
        self.stop();
        self.merging = true;
        while let Ok(e) = self.events.try_recv() {
            self.on(e);
        }
        let finishing: Vec<_> = self
            .running
            .iter_mut()
            .map(|r| {
                let rec = r.recording.take();
                let asked = !r.ended_early;
                std::thread::spawn(move || {
                    rec.map(|rec| (rec.spool.clone(), rec.finish(END_LIMIT, asked)))
                })
            })
            .collect();
        let mut ended = Vec::new();
        for (r, t) in self.running.iter_mut().zip(finishing) {
            let done = t.join().ok().flatten();
            let (points, clock_failed) = r
                .clock
                .take()
                .and_then(|t| t.join().ok())
                .unwrap_or_default();
            ended.push((done, points, clock_failed));
        }
        // The recording machine first; the others' ids and CPUs after it.
        let local_spool = self.local_spool();
        let mut machines = vec![self.local.clone()];
        let mut cpu_base = self.local.cpus;
        for (i, (r, (_, points, _))) in self.running.iter().zip(&ended).enumerate() {
            machines.push(Machine {
                name: r.spec.name.clone(),
                destination: r.spec.destination.clone(),
                index: i as u32 + 1,
                cpus: r.hello.cpus,
                cpu_base,
                kernel: r.hello.kernel.clone(),
                clock: points.clone(),
            });
            cpu_base += r.hello.cpus;
        }
        let spools: Vec<PathBuf> = std::iter::once(local_spool.clone())
            .chain(
                ended
                    .iter()
                    .map(|(d, _, _)| d.as_ref().map(|(p, _)| p.clone()).unwrap_or_default()),
            )
            .collect();
        let parts: Vec<merge::Part<'_>> = machines
            .iter()
            .zip(&spools)
            .map(|(m, s)| merge::Part {
                machine: m.clone(),
                spool: s,
            })
            .collect();
        let at = machines
            .iter()
            .filter_map(|m| m.clock.first().map(|p| p.local_ns))
            .min()
            .unwrap_or_else(trace_manager::boottime_ns);
        let summaries = merge::write(&parts, at, out).with_context(|| {
            format!(
                "merging the machines' traces (kept in {})",
                self.spool_dir.display()
            )
        })?;
        for s in &spools {
            std::fs::remove_file(s).ok();
        }
        eprintln!(
            "trace-cli: {} machines on one timeline -> {destination}:",
            machines.len()
        );
        for (i, (m, s)) in machines.iter().zip(&summaries).enumerate() {
            let cpus = format!("CPUs {}-{}", m.cpu_base, m.cpu_base + m.cpus - 1);
            let mut line = if i == 0 {
                format!("  {} (this machine): {cpus}, ids as they are", m.name)
            } else {
                let map = ClockMap::new(m.clock.clone());
                let clock = match (map.first_offset_ns(), map.points()) {
                    (Some(o), points) => format!(
                        "clock {:+.1} µs ± {:.1} µs ({} sync points, fastest round trip {:.0} µs{})",
                        o as f64 / 1e3,
                        map.bound_ns() as f64 / 1e3,
                        points.len(),
                        points.iter().map(|p| p.rtt_ns).min().unwrap_or(0) as f64 / 1e3,
                        map.drift_ppm()
                            .map(|d| format!(", drift {d:+.2} ppm"))
                            .unwrap_or_default()
                    ),
                    (None, _) => "clock unknown: times as it gave them".into(),
                };
                format!(
                    "  {} ({}): {cpus}, pids {}+N, {clock}",
                    m.name,
                    m.destination,
                    m.ids().pid_base()
                )
            };
            line.push_str(&format!(", {} records", s.records));
            if s.dropped > 0 {
                line.push_str(&format!(
                    ", {} left out ({})",
                    s.dropped,
                    s.first_problem.as_deref().unwrap_or("")
                ));
            }
            eprintln!("{line}");
            if i > 0 {
                let (done, _, clock_failed) = &ended[i - 1];
                if let Some((_, e)) = done
                    && let Some(cause) = &e.cause
                {
                    eprintln!(
                        "    {} ended early: {cause}; what it sent until then ({} bytes) is kept",
                        m.name, e.bytes
                    );
                }
                if let Some(why) = clock_failed {
                    eprintln!(
                        "    {}: {why}; its clock is mapped with the points before",
                        m.name
                    );
                }
            }
        }
        Ok(())
    }
}
