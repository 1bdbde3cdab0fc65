//! The clock exchange with a remote machine over its own ssh session.
//!
//! The remote side is `trace-cli clock-server` (hidden): it first writes
//! one line about its machine, then answers each 8-byte ping (a sequence
//! number) at once with the number and its CLOCK_BOOTTIME. The local side
//! sends bursts of pings — one before the recording, one a second while it
//! runs, one after — and keeps each burst's fastest exchange as a sync
//! point ([`trace_hosts::SyncPoint::best_of`]).

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::process::{Child, ChildStdin, ChildStdout, ExitCode};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use trace_hosts::{Ping, SyncPoint};
use trace_manager::boottime_ns;

use super::ssh::Ssh;

/// What the first line of `clock-server` starts with (and its version).
const HELLO: &str = "trace-cli-clock 1";

/// Set in a remote machine's environment, an offset in nanoseconds added
/// to every time it gives (its clock answers and its trace): only for the
/// tests, which measure that the offset is found again.
pub const TEST_OFFSET_ENV: &str = "TRACE_CLI_TEST_CLOCK_OFFSET_NS";

/// Pings per burst.
const BURST: usize = 64;
/// Time between bursts while recording.
const PERIOD: Duration = Duration::from_secs(1);

/// What a machine says of itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hello {
    /// Its host name.
    pub hostname: String,
    /// Its number of CPUs (configured, online or not).
    pub cpus: u32,
    /// Its kernel release.
    pub kernel: String,
}

impl Hello {
    /// This machine's.
    pub fn here() -> Hello {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_owned())
                .unwrap_or_default()
        };
        // SAFETY: sysconf reads a configuration value; no memory is passed.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
        Hello {
            hostname: read("/proc/sys/kernel/hostname"),
            cpus: u32::try_from(cpus).unwrap_or(1).max(1),
            kernel: read("/proc/sys/kernel/osrelease"),
        }
    }

    fn line(&self) -> String {
        format!("{HELLO}\t{}\t{}\t{}", self.hostname, self.cpus, self.kernel)
    }

    fn parse(line: &str) -> Option<Hello> {
        let mut f = line.trim_end().split('\t');
        (f.next()? == HELLO).then_some(())?;
        Some(Hello {
            hostname: f.next()?.to_owned(),
            cpus: f.next()?.parse().ok()?,
            kernel: f.next()?.to_owned(),
        })
    }
}

/// The test offset of this machine's clock, if one is set.
pub fn test_offset_ns() -> i64 {
    std::env::var(TEST_OFFSET_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Runs `trace-cli clock-server`: the remote side of the exchange, on
/// standard input and output, until standard input ends.
pub fn serve() -> Result<ExitCode> {
    let offset = test_offset_ns();
    let mut out = std::io::stdout().lock();
    let mut input = std::io::stdin().lock();
    writeln!(out, "{}", Hello::here().line())?;
    out.flush()?;
    let mut seq = [0u8; 8];
    loop {
        match input.read_exact(&mut seq) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Ok(ExitCode::SUCCESS);
            }
            Err(e) => return Err(e).context("reading a clock ping"),
        }
        let now = boottime_ns().wrapping_add_signed(offset);
        let mut answer = [0u8; 16];
        answer[..8].copy_from_slice(&seq);
        answer[8..].copy_from_slice(&now.to_le_bytes());
        out.write_all(&answer)?;
        out.flush()?;
    }
}

/// The local end of one machine's clock session.
pub struct ClockSession {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    seq: u64,
}

impl ClockSession {
    /// Starts `clock-server` on `destination` and reads what the machine
    /// says of itself.
    pub fn open(ssh: &Ssh, destination: &str, remote_cli: &str) -> Result<(ClockSession, Hello)> {
        let mut child = ssh.spawn(destination, &[remote_cli.to_owned(), "clock-server".into()])?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            bail!("ssh's pipes were not made");
        };
        let mut session = ClockSession {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            seq: 0,
        };
        let mut line = String::new();
        let read = session.stdout.read_line(&mut line);
        match (read, Hello::parse(&line)) {
            (Ok(_), Some(hello)) => Ok((session, hello)),
            _ => {
                let _ = session.child.kill();
                let _ = session.child.wait();
                let mut why = String::new();
                if let Some(mut e) = session.child.stderr.take() {
                    let _ = e.read_to_string(&mut why);
                }
                let why = why.trim();
                if line.trim().is_empty() && why.is_empty() {
                    bail!("ssh {destination} ended without an answer");
                }
                bail!(
                    "{} {}",
                    if line.trim().is_empty() {
                        ""
                    } else {
                        line.trim()
                    },
                    why
                );
            }
        }
    }

    /// One exchange.
    fn ping(&mut self) -> std::io::Result<Ping> {
        self.seq += 1;
        let sent = boottime_ns();
        self.stdin.write_all(&self.seq.to_le_bytes())?;
        self.stdin.flush()?;
        let mut answer = [0u8; 16];
        self.stdout.read_exact(&mut answer)?;
        let received = boottime_ns();
        let seq = u64::from_le_bytes(answer[..8].try_into().unwrap_or_default());
        if seq != self.seq {
            return Err(std::io::Error::other(format!(
                "clock answer {seq} to ping {}",
                self.seq
            )));
        }
        Ok(Ping {
            sent,
            remote: u64::from_le_bytes(answer[8..].try_into().unwrap_or_default()),
            received,
        })
    }

    /// A burst of pings, reduced to its fastest.
    pub fn burst(&mut self) -> std::io::Result<Option<SyncPoint>> {
        let mut pings = Vec::with_capacity(BURST);
        for _ in 0..BURST {
            pings.push(self.ping()?);
        }
        Ok(SyncPoint::best_of(&pings))
    }

    /// Bursts every [`PERIOD`] until `stop` says so (or is dropped), and a
    /// last one then; the points, and why the session ended early if it
    /// did.
    pub fn follow(
        mut self,
        first: Vec<SyncPoint>,
        stop: &mpsc::Receiver<()>,
    ) -> (Vec<SyncPoint>, Option<String>) {
        let mut points = first;
        let mut failed = None;
        loop {
            let last = !matches!(
                stop.recv_timeout(PERIOD),
                Err(mpsc::RecvTimeoutError::Timeout)
            );
            match self.burst() {
                Ok(p) => points.extend(p),
                Err(e) => {
                    failed = Some(format!("the clock session ended: {e}"));
                    break;
                }
            }
            if last {
                break;
            }
        }
        drop(self.stdin);
        let _ = self.child.kill();
        let _ = self.child.wait();
        (points, failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_reads_back() {
        let h = Hello::here();
        assert!(h.cpus >= 1);
        assert_eq!(Hello::parse(&h.line()), Some(h));
        assert_eq!(Hello::parse("bash: trace-cli: command not found"), None);
    }
}
