//! The recorded command: started held back until the manager follows it
//! (or at once, before a delayed start), and what became of it.

use std::os::fd::{AsFd as _, AsRawFd as _, OwnedFd};
use std::process::ExitCode;

use anyhow::{Context, Result};
use tokio::process::Command;
use trace_common::controller::{Reply, Request};
use trace_manager::client::Controller;

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
/// (`args`). Returns only on failure.
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
    eprintln!("trace-cli: cannot run {program:?}: {e}");
    ExitCode::from(127)
}

/// Starts `program` with `args`. With `release`, it waits for
/// [`Release::go`] before it runs.
pub(super) fn start_command(
    program: &str,
    args: &[String],
    release: Option<&Release>,
    stdout_to_stderr: bool,
) -> Result<tokio::process::Child> {
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
    cmd.spawn()
        .with_context(|| format!("cannot run {program:?}"))
}

/// Starts the `command` of a session that has started, held back until the
/// manager follows it when `config` records some processes only; a command
/// started before a delayed start (`early_child`) is named to the manager.
pub(super) async fn launch(
    ctl: &mut Controller,
    early_child: Option<tokio::process::Child>,
    command: &[String],
    config: &trace_common::controller::TraceConfig,
    to_stdout: bool,
) -> Result<Option<tokio::process::Child>> {
    Ok(match (early_child, command.split_first()) {
        (Some(child), _) => {
            if let Some(pid) = child.id() {
                // Names it; it may have exited during the wait.
                follow(ctl, pid).await?;
            }
            Some(child)
        }
        (None, Some((program, rest))) => {
            let release = config.pids.is_some().then(Release::new).transpose()?;
            let child = start_command(program, rest, release.as_ref(), to_stdout)?;
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
    })
}

/// What became of the command (`child`) once the recording ended for
/// `reason`, to be said last; a command still running is killed unless the
/// recording failed.
pub(super) async fn outcome(
    reason: &StopReason,
    child: Option<&mut tokio::process::Child>,
) -> Option<String> {
    match (reason, child) {
        (StopReason::CommandExited(Some(status)), _) if !status.success() => {
            Some(format!("trace-cli: the command exited with {status}"))
        }
        (StopReason::CommandExited(_), _) | (_, None) => None,
        // The recording failed, not the command: it is left to finish
        // (not killed, not waited for), and the user told which it is.
        (StopReason::Aborted(_), Some(c)) => match (c.try_wait(), c.id()) {
            (Ok(None), Some(pid)) => Some(format!(
                "trace-cli: the command (pid {pid}) is still running; it is no longer \
                 recorded, and trace-cli does not wait for it"
            )),
            (Ok(Some(status)), _) if !status.success() => {
                Some(format!("trace-cli: the command exited with {status}"))
            }
            _ => None,
        },
        // The recording ended first: the command is not left behind.
        (_, Some(c)) => {
            let _ = c.start_kill();
            let _ = c.wait().await;
            None
        }
    }
}
