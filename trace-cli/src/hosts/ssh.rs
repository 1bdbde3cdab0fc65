//! How a remote machine is reached: ssh, with the user's own keys and
//! configuration. Nothing listens for the recording: each machine runs
//! `trace-cli` as the user ssh logs in as, which reaches its
//! `trace-manager` through the local socket with that user's rights (root,
//! or the `tracing` group within the daemon's memory budget), as a local
//! `trace-cli` would.

use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};

use super::spec::shell_quote;

/// The ssh command line (`--ssh`).
#[derive(Clone, Debug)]
pub struct Ssh {
    words: Vec<String>,
}

impl Ssh {
    /// `command`, split at white space (`ssh -F ./cluster.conf`, say).
    pub fn new(command: &str) -> Ssh {
        let mut words: Vec<String> = command.split_whitespace().map(str::to_owned).collect();
        if words.is_empty() {
            words.push("ssh".into());
        }
        Ssh { words }
    }

    /// The program run.
    pub fn program(&self) -> &str {
        &self.words[0]
    }

    /// A command that runs `remote` (words, quoted for the remote shell)
    /// on `destination`. It gets a process group of its own, so that
    /// Ctrl-C reaches only `trace-cli`, which then ends the remote
    /// recordings in order rather than have ssh cut them. ssh never asks
    /// for a password (`BatchMode`), and a machine that stops answering is
    /// noticed within about 3 s (`ServerAliveInterval`).
    pub fn command(&self, destination: &str, remote: &[String]) -> Command {
        let mut c = Command::new(&self.words[0]);
        c.args(&self.words[1..])
            .args([
                "-T",
                "-o",
                "BatchMode=yes",
                "-o",
                "ServerAliveInterval=1",
                "-o",
                "ServerAliveCountMax=3",
                "-o",
                "ConnectTimeout=10",
                "--",
                destination,
            ])
            .arg(
                remote
                    .iter()
                    .map(|w| shell_quote(w))
                    .collect::<Vec<_>>()
                    .join(" "),
            )
            .process_group(0);
        c
    }

    /// Runs `remote` on `destination` with every standard stream piped.
    pub fn spawn(&self, destination: &str, remote: &[String]) -> anyhow::Result<Child> {
        use anyhow::Context as _;
        self.command(destination, remote)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot run {}", self.program()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remote_command_is_one_quoted_line_after_the_destination() {
        let ssh = Ssh::new("ssh -F /tmp/x.conf");
        let c = ssh.command(
            "root@h",
            &["trace-cli".into(), "-c".into(), "kernel:*".into()],
        );
        let args: Vec<_> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(&args[..2], ["-F", "/tmp/x.conf"]);
        let dest = args.iter().position(|a| a == "root@h").unwrap();
        assert_eq!(args[dest - 1], "--");
        assert_eq!(args[dest + 1], "trace-cli -c 'kernel:*'");
        assert_eq!(Ssh::new("  ").program(), "ssh");
    }
}
