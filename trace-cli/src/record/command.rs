//! The recorded command: started held back until the manager follows it
//! (or at once, before a delayed start), and what became of it.

use std::os::fd::{AsFd as _, AsRawFd as _, OwnedFd};
use std::process::ExitCode;

use anyhow::{Context, Result};
use tokio::process::Command;
use trace_common::controller::{Reply, Request};
use trace_manager::Controller;

use super::failed;
use super::run_loop::StopReason;

/// Asks the manager to follow process `pid`.
pub(super) async fn follow(ctl: &mut Controller, pid: u32) -> Result<()> {
    match ctl.call(Request::Follow { pid }, None).await? {
        Reply::Followed => Ok(()),
        // It may have exited already.
        Reply::Failed { message, .. } => {
            log::debug!("following the command: {message}");
            Ok(())
        }
        other => Err(failed("following the command", other)),
    }
}

/// Holds a started command back until [`Release::go`]: the command is
/// `trace-cli` itself at first, which waits on a pipe and then becomes the
/// command (same pid), so the manager can follow it before it runs.
pub(super) struct Release {
    read: OwnedFd,
    write: OwnedFd,
}

/// The environment variable that tells `trace-cli` to wait and become the
/// command.
pub const RELEASE_FD_ENV: &str = "TRACE_CLI_RELEASE_FD";

impl Release {
    /// A pipe whose read end the command inherits.
    pub(super) fn new() -> Result<Release> {
        // The read end is inherited by the child; the write end is not.
        let (read, write) = nix::unistd::pipe().context("creating a pipe")?;
        nix::fcntl::fcntl(
            write.as_raw_fd(),
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )
        .context("creating a pipe")?;
        Ok(Release { read, write })
    }

    /// Lets the command run.
    pub(super) fn go(self) {
        let _ = nix::unistd::write(&self.write, b"g");
    }
}

/// In the child of [`Release`]: waits for the go, then becomes the command
/// (`args`). Returns only on failure: 127 when the command is not found,
/// 126 when it cannot be run, as shells do.
pub fn wait_and_exec(fd: &str, args: &[std::ffi::OsString]) -> ExitCode {
    use std::os::unix::process::CommandExt as _;
    let Ok(fd) = fd.parse::<std::os::fd::RawFd>() else {
        return ExitCode::FAILURE;
    };
    // SAFETY: the parent passed this descriptor for this process to own.
    let read = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let mut go = [0u8; 1];
    // The parent went away without a go: the command does not run.
    if !matches!(nix::unistd::read(read.as_raw_fd(), &mut go), Ok(1)) {
        return ExitCode::FAILURE;
    }
    drop(read);
    let Some((program, rest)) = args.split_first() else {
        return ExitCode::FAILURE;
    };
    let e = std::process::Command::new(program)
        .args(rest)
        .env_remove(RELEASE_FD_ENV)
        .exec();
    let (code, why) = if e.kind() == std::io::ErrorKind::NotFound {
        (NOT_FOUND, "command not found".to_owned())
    } else {
        (CANNOT_RUN, e.to_string())
    };
    eprintln!("trace-cli: {}: {why}", program.to_string_lossy());
    ExitCode::from(code)
}

/// The exit status of a command that is not found, as shells give it.
const NOT_FOUND: u8 = 127;
/// The exit status of a command that is found but cannot be run.
const CANNOT_RUN: u8 = 126;

/// Why `program` cannot be run, and the exit status that says it (127:
/// not found, 126: not executable), looked up as `execvp` does: a name
/// with a `/` is a path, any other is searched in `PATH`.
pub(super) fn check_runnable(program: &str) -> Result<(), (u8, String)> {
    use nix::unistd::{AccessFlags, access};
    let runnable = |p: &std::path::Path| {
        p.metadata().is_ok_and(|m| m.is_file()) && access(p, AccessFlags::X_OK).is_ok()
    };
    if program.is_empty() {
        return Err((NOT_FOUND, "the command is an empty string".to_owned()));
    }
    if program.contains('/') {
        let path = std::path::Path::new(program);
        return match path.metadata() {
            Err(e) => Err((NOT_FOUND, format!("{program}: {e}"))),
            Ok(m) if m.is_dir() => Err((CANNOT_RUN, format!("{program}: is a directory"))),
            Ok(_) if !runnable(path) => Err((
                CANNOT_RUN,
                format!("{program}: not executable (permission denied)"),
            )),
            Ok(_) => Ok(()),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut found = false;
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(program);
        if runnable(&candidate) {
            return Ok(());
        }
        found |= candidate.is_file();
    }
    if found {
        Err((
            CANNOT_RUN,
            format!("{program}: not executable (permission denied)"),
        ))
    } else {
        Err((NOT_FOUND, format!("{program}: command not found")))
    }
}

/// Starts `program` with `args`. With `release`, through `trace-cli`
/// itself, which waits for [`Release::go`] and then becomes the command.
/// `Ok(Err(status))` when the command cannot be run: the status a shell
/// gives for it (127, 126), once said why.
pub(super) fn start_command(
    program: &str,
    args: &[String],
    release: Option<&Release>,
    stdout_to_stderr: bool,
) -> Result<Result<tokio::process::Child, u8>> {
    let mut cmd = match release {
        Some(r) => {
            let me = std::env::current_exe().context("finding trace-cli's own program")?;
            let mut cmd = Command::new(me);
            cmd.env(RELEASE_FD_ENV, r.read.as_raw_fd().to_string())
                .arg(program)
                .args(args);
            cmd
        }
        None => {
            let mut cmd = Command::new(program);
            cmd.args(args);
            cmd
        }
    };
    if stdout_to_stderr {
        let stderr = std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .context("duplicating standard error for the command")?;
        cmd.stdout(std::process::Stdio::from(stderr));
    }
    match cmd.spawn() {
        Ok(child) => Ok(Ok(child)),
        // Checked before recording, but it may have changed since.
        Err(e) if release.is_none() && e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("trace-cli: {program}: command not found");
            Ok(Err(NOT_FOUND))
        }
        Err(e) if release.is_none() && e.kind() == std::io::ErrorKind::PermissionDenied => {
            eprintln!("trace-cli: {program}: {e}");
            Ok(Err(CANNOT_RUN))
        }
        Err(e) => Err(e).with_context(|| format!("cannot run {program:?}")),
    }
}

/// Starts the `command` of a session that has started, held back until the
/// manager follows it when `config` records some processes only; a command
/// started before a delayed start (`early_child`) is named to the manager.
/// `Ok(Err(status))` when the command cannot be run.
pub(super) async fn launch(
    ctl: &mut Controller,
    early_child: Option<tokio::process::Child>,
    command: &[String],
    config: &trace_common::controller::TraceConfig,
    to_stdout: bool,
) -> Result<Result<Option<tokio::process::Child>, u8>> {
    Ok(Ok(match (early_child, command.split_first()) {
        (Some(child), _) => {
            if let Some(pid) = child.id() {
                // Names it; it may have exited during the wait.
                follow(ctl, pid).await?;
            }
            Some(child)
        }
        (None, Some((program, rest))) => {
            let release = config.pids.is_some().then(Release::new).transpose()?;
            let child = match start_command(program, rest, release.as_ref(), to_stdout)? {
                Ok(child) => child,
                Err(status) => return Ok(Err(status)),
            };
            if let Some(release) = release {
                if let Some(pid) = child.id() {
                    // Followed before it runs its first instruction.
                    follow(ctl, pid).await?;
                }
                release.go();
            }
            Some(child)
        }
        (None, None) => None,
    }))
}

/// What became of the recorded command.
#[derive(Default)]
pub(super) struct Outcome {
    /// What to say last.
    pub(super) line: Option<String>,
    /// The exit status `record` gives: the command's own when it ended the
    /// recording (128 + the signal's number when a signal killed it).
    pub(super) code: Option<u8>,
}

/// `status` said as a sentence about the command, and as the exit status
/// a shell gives for it.
pub(super) fn describe(status: std::process::ExitStatus) -> (String, u8) {
    use std::os::unix::process::ExitStatusExt as _;
    if let Some(sig) = status.signal() {
        let name = nix::sys::signal::Signal::try_from(sig)
            .map(|s| format!("{s} (signal {sig})"))
            .unwrap_or_else(|_| format!("signal {sig}"));
        let core = if status.core_dumped() {
            ", core dumped"
        } else {
            ""
        };
        (
            format!("the command was killed by {name}{core}"),
            128u8.wrapping_add(sig as u8),
        )
    } else {
        let code = status.code().unwrap_or(1);
        (
            format!("the command exited with status {code}"),
            (code & 0xff) as u8,
        )
    }
}

/// What became of the command (`child`) once the recording ended for
/// `reason`; a command still running is killed unless the recording
/// failed.
pub(super) async fn outcome(
    reason: &StopReason,
    child: Option<&mut tokio::process::Child>,
) -> Outcome {
    let said = |status: std::process::ExitStatus| {
        let (line, code) = describe(status);
        Outcome {
            line: (code != 0).then(|| format!("trace-cli: {line}")),
            code: Some(code),
        }
    };
    match (reason, child) {
        (StopReason::CommandExited(Some(status)), _) => said(*status),
        (StopReason::CommandExited(None), _) | (_, None) => Outcome::default(),
        // The recording failed, not the command: it is left to finish
        // (not killed, not waited for), and the user told which it is.
        (StopReason::Aborted(_), Some(c)) => match (c.try_wait(), c.id()) {
            (Ok(None), Some(pid)) => Outcome {
                line: Some(format!(
                    "trace-cli: the command (pid {pid}) is still running; it is no longer \
                     recorded, and trace-cli does not wait for it"
                )),
                code: None,
            },
            (Ok(Some(status)), _) => said(status),
            _ => Outcome::default(),
        },
        // The recording ended first: the command is not left behind.
        (_, Some(c)) => {
            let _ = c.start_kill();
            let _ = c.wait().await;
            Outcome::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt as _;

    use super::*;

    #[test]
    fn statuses_are_said_and_passed_on_as_a_shell_does() {
        // A wait status: the code in the second byte, a signal in the first.
        let (line, code) = describe(std::process::ExitStatus::from_raw(3 << 8));
        assert_eq!(
            (line.as_str(), code),
            ("the command exited with status 3", 3)
        );
        let (line, code) = describe(std::process::ExitStatus::from_raw(11));
        assert_eq!(code, 139);
        assert!(line.contains("SIGSEGV"), "{line}");
        let (line, code) = describe(std::process::ExitStatus::from_raw(9 | 0x80));
        assert_eq!(code, 137);
        assert!(line.contains("core dumped"), "{line}");
    }

    #[test]
    fn commands_that_cannot_run_get_127_or_126() {
        assert!(check_runnable("sh").is_ok());
        assert!(check_runnable("/bin/sh").is_ok());
        assert_eq!(
            check_runnable("no-such-command-here").unwrap_err(),
            (127, "no-such-command-here: command not found".to_owned())
        );
        assert_eq!(check_runnable("/no/such/program").unwrap_err().0, 127);
        assert_eq!(check_runnable("/").unwrap_err().0, 126);
        assert_eq!(check_runnable("").unwrap_err().0, 127);
    }
}
