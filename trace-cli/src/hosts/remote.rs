//! One remote machine's recording: `trace-cli record -o -` over ssh, its
//! trace kept in a spool file as it arrives, its messages said here with
//! the machine's name.

use std::collections::VecDeque;
use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ExitStatus};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::sync::mpsc::UnboundedSender;

use super::spec::HostSpec;
use super::ssh::Ssh;

/// What a remote recording tells the rest while it runs.
#[derive(Debug)]
pub enum HostEvent {
    /// It records (index of the host).
    Ready(usize),
    /// It stopped on its own trigger (index, what it said).
    Triggered(usize, String),
    /// Its trace ended: every byte that came is in its spool.
    Ended(usize),
}

/// What a machine runs: `cli ARGS`, ready once it says a line starting
/// with `ready`.
pub struct RemoteCommand<'a> {
    /// `trace-cli` there.
    pub cli: &'a str,
    /// Its arguments.
    pub args: &'a [String],
    /// What its line saying it is ready starts with.
    pub ready: &'static str,
}

/// Lines of a host's messages kept to say why it ended.
const KEPT_LINES: usize = 4;

/// A remote recording under way.
pub struct RemoteRecording {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Its trace as it came.
    pub spool: PathBuf,
    copy: Option<JoinHandle<std::io::Result<u64>>>,
    messages: Option<JoinHandle<VecDeque<String>>>,
}

/// How a remote recording ended.
pub struct Ended {
    /// Bytes of trace received.
    pub bytes: u64,
    /// Why it did not end as asked, if it did not.
    pub cause: Option<String>,
}

impl RemoteRecording {
    /// Starts `command` on `host` (host number `index`), its trace into
    /// `spool`.
    pub fn start(
        ssh: &Ssh,
        host: &HostSpec,
        index: usize,
        command: &RemoteCommand<'_>,
        spool: PathBuf,
        events: UnboundedSender<HostEvent>,
    ) -> Result<RemoteRecording> {
        let ready = command.ready;
        let mut file = std::fs::File::create(&spool)
            .with_context(|| format!("cannot create {}", spool.display()))?;
        let mut remote = vec![command.cli.to_owned()];
        remote.extend(command.args.iter().cloned());
        let mut child = ssh.spawn(&host.destination, &remote)?;
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            bail!("ssh's pipes were not made");
        };
        let stdin = child.stdin.take();
        let ended = events.clone();
        let copy = std::thread::Builder::new()
            .name(format!("host-{}", host.name))
            .spawn(move || {
                let mut stdout = stdout;
                let copied = std::io::copy(&mut stdout, &mut file);
                let _ = ended.send(HostEvent::Ended(index));
                copied
            })?;
        let name = host.name.clone();
        let messages = std::thread::Builder::new()
            .name(format!("host-{}-messages", host.name))
            .spawn(move || {
                let mut kept = VecDeque::new();
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    eprintln!("[{name}] {line}");
                    if line.starts_with(ready) {
                        let _ = events.send(HostEvent::Ready(index));
                    }
                    if line.starts_with("trace-cli: stopped by") {
                        let _ = events.send(HostEvent::Triggered(index, line.clone()));
                    }
                    if kept.len() == KEPT_LINES {
                        kept.pop_front();
                    }
                    kept.push_back(line);
                }
                kept
            })?;
        Ok(RemoteRecording {
            child,
            stdin,
            spool,
            copy: Some(copy),
            messages: Some(messages),
        })
    }

    /// Writes `line` to the remote `trace-cli`'s standard input.
    pub fn send(&mut self, line: &str) {
        use std::io::Write as _;
        if let Some(stdin) = &mut self.stdin {
            let _ = writeln!(stdin, "{line}").and_then(|()| stdin.flush());
        }
    }

    /// Asks the remote recording to end (its standard input closes).
    pub fn stop(&mut self) {
        self.stdin.take();
    }

    /// Waits up to `limit` for the remote recording to end after
    /// [`Self::stop`] (ssh is killed past it), and says how it went;
    /// `asked` says whether it was asked to stop.
    pub fn finish(mut self, limit: Duration, asked: bool) -> Ended {
        self.stop();
        let deadline = Instant::now() + limit;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break None;
                }
            }
        };
        let copied = self.copy.take().map(|t| t.join());
        let lines = self
            .messages
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        let bytes = match &copied {
            Some(Ok(Ok(n))) => *n,
            _ => 0,
        };
        let last = lines
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_owned());
        let cause = match (status, copied) {
            (None, _) => Some(format!(
                "did not end within {} s of being asked (ssh killed)",
                limit.as_secs()
            )),
            (_, Some(Ok(Err(e)))) => Some(format!("its trace could not be kept: {e}")),
            (Some(s), _) => why_ended(s, asked, last.as_deref()),
        };
        Ended { bytes, cause }
    }
}

/// Why a remote recording that exited with `status` did not end as asked,
/// `last` being the last thing it said.
fn why_ended(status: ExitStatus, asked: bool, last: Option<&str>) -> Option<String> {
    use std::os::unix::process::ExitStatusExt as _;
    let said = last.map(|l| format!(": {l}")).unwrap_or_default();
    match status.code() {
        Some(0) if asked => None,
        Some(0) => Some(format!("it stopped before the recording did{said}")),
        // ssh's own failures (connection refused, lost, timed out).
        Some(255) => Some(format!("the connection was lost{said}")),
        Some(c) => Some(format!("trace-cli there exited with status {c}{said}")),
        None => Some(format!(
            "ssh was killed by signal {}{said}",
            status.signal().unwrap_or(0)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt as _;

    #[test]
    fn causes_name_what_ended_the_host() {
        let exit = |c: i32| ExitStatus::from_raw(c << 8);
        assert_eq!(why_ended(exit(0), true, None), None);
        assert!(
            why_ended(exit(255), true, Some("Timeout, server x not responding."))
                .unwrap()
                .contains("connection was lost: Timeout")
        );
        assert!(why_ended(exit(1), true, None).unwrap().contains("status 1"));
        assert!(
            why_ended(ExitStatus::from_raw(9), true, None)
                .unwrap()
                .contains("signal 9")
        );
    }
}
