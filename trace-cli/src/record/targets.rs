//! The processes of `-p`, watched so that a recording of them stops when
//! the last one exits: a pidfd for each (the kernel makes it readable when
//! the process exits, whether it is our child or not), else, where there is
//! none (a kernel before 5.3, a thread id), a look at `/proc` now and then.

use std::os::fd::{FromRawFd as _, OwnedFd};
use std::time::Duration;

use anyhow::Result;
use tokio::io::unix::AsyncFd;

/// How often a process without a pidfd is looked for.
const POLL: Duration = Duration::from_millis(200);

/// The processes watched.
pub(super) struct Targets {
    /// Those with a pidfd.
    fds: Vec<AsyncFd<OwnedFd>>,
    /// Those without.
    polled: Vec<u32>,
}

impl Targets {
    /// Watches `pids` (those gone already are not waited for). Needs the
    /// runtime.
    pub(super) fn watch(pids: &[u32]) -> Result<Targets> {
        let mut targets = Targets {
            fds: Vec::new(),
            polled: Vec::new(),
        };
        for &pid in pids {
            match pidfd_open(pid) {
                // SAFETY: an OwnedFd is an open descriptor that stays open,
                // and its raw value never changes, while the AsyncFd owns it.
                Ok(fd) => match unsafe {
                    AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
                } {
                    Ok(fd) => targets.fds.push(fd),
                    Err(e) => {
                        let e = e.into_parts().1;
                        log::debug!("pid {pid}: cannot poll its pidfd ({e}); looked for instead");
                        targets.polled.push(pid);
                    }
                },
                Err(nix::Error::ESRCH) => log::debug!("pid {pid} exited already"),
                Err(e) => {
                    log::debug!("pid {pid}: no pidfd ({e}); looked for instead");
                    targets.polled.push(pid);
                }
            }
        }
        Ok(targets)
    }

    /// Returns once every process has exited.
    pub(super) async fn all_exited(&self) {
        for fd in &self.fds {
            // Readable once the process has exited; an error polling it
            // is taken as the same (nothing more can be learnt).
            let _ = fd.readable().await;
        }
        for &pid in &self.polled {
            while trace_manager::process_exists(pid) {
                tokio::time::sleep(POLL).await;
            }
        }
    }
}

/// A pidfd for process `pid` (close-on-exec, as pidfd_open makes them).
fn pidfd_open(pid: u32) -> nix::Result<OwnedFd> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| nix::Error::ESRCH)?;
    // SAFETY: pidfd_open takes a pid and flags (0) and returns a new
    // descriptor or -1; it touches no memory of ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(nix::Error::last());
    }
    let fd = std::os::fd::RawFd::try_from(fd).map_err(|_| nix::Error::EBADF)?;
    // SAFETY: the descriptor was just created and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
