//! The registration socket.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::sys::socket::{
    AddressFamily, Backlog, SockFlag, SockType, UnixAddr, accept4, bind, connect, getsockopt,
    listen, socket, sockopt::PeerCredentials,
};
use tokio::io::unix::AsyncFd;

use super::UserspaceError;

/// A listening `SOCK_SEQPACKET` socket; the file is removed on drop.
///
/// Whoever listens on a path holds an exclusive `flock` on `PATH.lock`
/// for as long, so two managers starting at once cannot both take the
/// path (or remove each other's socket as stale).
pub struct Listener {
    fd: AsyncFd<OwnedFd>,
    path: PathBuf,
    _lock: std::fs::File,
}

fn err(path: &Path, source: std::io::Error) -> UserspaceError {
    UserspaceError::Socket {
        path: path.to_owned(),
        source,
    }
}

fn seqpacket(flags: SockFlag) -> std::io::Result<OwnedFd> {
    socket(AddressFamily::Unix, SockType::SeqPacket, flags, None).map_err(super::io)
}

impl Listener {
    /// Binds `path`, replacing a stale socket file; fails when another
    /// manager listens there.
    pub fn bind(path: &Path) -> Result<Listener, UserspaceError> {
        let addr = UnixAddr::new(path).map_err(|e| err(path, super::io(e)))?;
        let group = nix::unistd::Group::from_name("tracing").ok().flatten();
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
            && !dir.exists()
        {
            std::fs::create_dir_all(dir).map_err(|e| err(path, e))?;
            let mode = if group.is_some() { 0o750 } else { 0o755 };
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
                .map_err(|e| err(path, e))?;
            if let Some(g) = &group {
                let _ = nix::unistd::chown(dir, None, Some(g.gid));
            }
        }
        let mut lock_path = path.as_os_str().to_owned();
        lock_path.push(".lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(|e| err(path, e))?;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(UserspaceError::Busy(path.to_owned()));
        }
        if path.exists() {
            let probe = seqpacket(SockFlag::SOCK_CLOEXEC).map_err(|e| err(path, e))?;
            if connect(probe.as_raw_fd(), &addr).is_ok() {
                return Err(UserspaceError::Busy(path.to_owned()));
            }
            std::fs::remove_file(path).map_err(|e| err(path, e))?;
        }
        let fd = seqpacket(SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK)
            .map_err(|e| err(path, e))?;
        match bind(fd.as_raw_fd(), &addr) {
            Ok(()) => {}
            // Another manager bound it between our check and now.
            Err(nix::Error::EADDRINUSE) => return Err(UserspaceError::Busy(path.to_owned())),
            Err(e) => return Err(err(path, super::io(e))),
        }
        let mode = if group.is_some() { 0o660 } else { 0o600 };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| err(path, e))?;
        if let Some(g) = &group {
            let _ = nix::unistd::chown(path, None, Some(g.gid));
        }
        listen(&fd, Backlog::new(64).unwrap_or(Backlog::MAXCONN))
            .map_err(|e| err(path, super::io(e)))?;
        let fd = super::async_fd(fd).map_err(|e| err(path, e))?;
        Ok(Listener {
            fd,
            path: path.to_owned(),
            _lock: lock,
        })
    }

    /// The next connection and the peer's pid.
    pub async fn accept(&self) -> std::io::Result<(OwnedFd, i32)> {
        loop {
            let mut g = self.fd.readable().await?;
            match g.try_io(|fd| {
                accept4(
                    fd.get_ref().as_raw_fd(),
                    SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
                )
                .map_err(super::io)
            }) {
                Ok(Ok(raw)) => {
                    // SAFETY: accept4 returned a new descriptor we own.
                    let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
                    let pid = getsockopt(&fd, PeerCredentials).map_or(0, |c| c.pid());
                    return Ok((fd, pid));
                }
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_listener_per_path() {
        let dir = std::env::temp_dir().join(format!("trace-listener-{}", std::process::id()));
        let path = dir.join("m.sock");
        let first = Listener::bind(&path).unwrap();
        assert!(matches!(
            Listener::bind(&path),
            Err(UserspaceError::Busy(_))
        ));
        drop(first);
        assert!(!path.exists(), "the socket file goes with its listener");
        // A stale socket file (its listener died without removing it) is
        // replaced.
        std::fs::write(&path, b"").unwrap();
        let again = Listener::bind(&path).unwrap();
        drop(again);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
