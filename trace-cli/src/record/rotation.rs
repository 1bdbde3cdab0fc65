//! `--rotate`: the manager writes the trace into a pipe, and a thread here
//! cuts it into a series of files that each read on their own
//! ([`trace_split::Rotator`]). Cutting on this side works the same with the
//! daemon and with a manager run here, and the files are the user's own.

use std::fs::File;
use std::os::fd::OwnedFd;

use anyhow::{Context, Result};
use trace_split::{Rotation, RotationSummary, Rotator};

/// Bytes the pipe holds: the manager's writes of a flush go in at once.
const PIPE_BYTES: libc::c_int = 1 << 20;

/// A rotation running on its thread.
pub(super) struct Running {
    rotation: Rotation,
    thread: std::thread::JoinHandle<RotationSummary>,
}

/// Starts the thread cutting what comes into a pipe; the pipe's write end
/// is the manager's output.
pub(super) fn start(rotation: Rotation) -> Result<(OwnedFd, Running)> {
    let (read, write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("creating the trace's pipe")?;
    // SAFETY: F_SETPIPE_SZ on a pipe we own; failing leaves the default.
    unsafe {
        libc::fcntl(
            std::os::fd::AsRawFd::as_raw_fd(&write),
            libc::F_SETPIPE_SZ,
            PIPE_BYTES,
        )
    };
    let rotator = Rotator::new(rotation.clone());
    let thread = std::thread::Builder::new()
        .name("rotation".into())
        .spawn(move || rotator.copy_from(File::from(read)))
        .context("starting the rotation thread")?;
    Ok((write, Running { rotation, thread }))
}

impl Running {
    /// What the summary says the trace went to: `trace-NNNN.fxt`.
    pub(super) fn destination(&self) -> String {
        let numbered = trace_split::numbered(&self.rotation.base, 1);
        let name = numbered.file_name().map_or_else(String::new, |n| {
            n.to_string_lossy().replacen("0001", "NNNN", 1)
        });
        format!("{} (rotated)", numbered.with_file_name(name).display())
    }

    /// Waits for the manager to close the pipe and the last file to be
    /// written.
    pub(super) async fn finish(self) -> Result<RotationSummary> {
        let thread = self.thread;
        tokio::task::spawn_blocking(move || thread.join())
            .await
            .context("waiting for the rotation")?
            .map_err(|_| anyhow::anyhow!("the rotation thread panicked"))
    }
}

/// Lists the files written, and (with `say_error`) why the rotation
/// stopped early if it did.
pub(super) fn report(summary: &RotationSummary, say_error: bool) {
    let names: Vec<String> = summary
        .files
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    eprintln!(
        "trace-cli: {} file{}{}: {}",
        names.len(),
        if names.len() == 1 { "" } else { "s" },
        if summary.deleted.is_empty() {
            String::new()
        } else {
            format!(" ({} older deleted)", summary.deleted.len())
        },
        names.join(" ")
    );
    if let Some(e) = summary.error.as_ref().filter(|_| say_error) {
        eprintln!("trace-cli: the rotation stopped: {e}");
    }
}
