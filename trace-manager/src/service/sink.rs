//! Where a session's trace goes: the descriptor the client passed, written
//! by a thread of its own so a slow reader never stalls the manager.

use std::fs::File;
use std::io::{self, Seek, Write};
use std::os::fd::OwnedFd;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Chunks in flight to the writer thread before writes wait for it.
const CHUNKS_IN_FLIGHT: usize = 256;

/// The output of a session: a `Write` whose bytes a thread writes to the
/// client's descriptor, at once or (deferred) when the session ends.
pub struct Sink {
    tx: Option<SyncSender<Vec<u8>>>,
    failed: Arc<Mutex<Option<io::ErrorKind>>>,
    thread: Option<JoinHandle<io::Result<u64>>>,
}

impl Sink {
    /// Writes to `dest`; with `defer`, into an unnamed temporary file first,
    /// copied to `dest` by [`Sink::close`].
    pub fn new(dest: OwnedFd, defer: bool) -> io::Result<Sink> {
        let dest = File::from(dest);
        let staging = if defer {
            Some(tempfile::tempfile()?)
        } else {
            None
        };
        let (tx, rx) = sync_channel(CHUNKS_IN_FLIGHT);
        let failed = Arc::new(Mutex::new(None));
        let f = failed.clone();
        let thread = std::thread::Builder::new()
            .name("trace-output".into())
            .spawn(move || write_out(rx, dest, staging, f))?;
        Ok(Sink {
            tx: Some(tx),
            failed,
            thread: Some(thread),
        })
    }

    /// Waits until every byte reached the client's descriptor; the number
    /// of bytes written there.
    pub fn close(mut self) -> io::Result<u64> {
        self.tx.take();
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(io::Error::other("the output thread panicked")),
            None => Ok(0),
        }
    }

    fn error(&self) -> Option<io::Error> {
        let kind = *self.failed.lock().unwrap_or_else(|e| e.into_inner());
        kind.map(|k| io::Error::new(k, "writing the trace to the client's output failed"))
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(e) = self.error() {
            return Err(e);
        }
        let tx = self.tx.as_ref().ok_or(io::ErrorKind::BrokenPipe)?;
        tx.send(buf.to_vec())
            .map_err(|_| self.error().unwrap_or(io::ErrorKind::BrokenPipe.into()))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        // Not joined: an aborted session's reader may never read.
        self.tx.take();
    }
}

fn write_out(
    rx: Receiver<Vec<u8>>,
    mut dest: File,
    mut staging: Option<File>,
    failed: Arc<Mutex<Option<io::ErrorKind>>>,
) -> io::Result<u64> {
    let fail = |e: io::Error| {
        *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.kind());
        e
    };
    let mut n = 0u64;
    for chunk in rx {
        match staging.as_mut() {
            Some(s) => s.write_all(&chunk).map_err(fail)?,
            None => {
                dest.write_all(&chunk).map_err(fail)?;
                n += chunk.len() as u64;
            }
        }
    }
    if let Some(mut s) = staging {
        s.rewind().map_err(fail)?;
        n = io::copy(&mut s, &mut dest).map_err(fail)?;
    }
    dest.flush().map_err(fail)?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn pipe() -> (File, OwnedFd) {
        let (r, w) = nix::unistd::pipe().unwrap();
        (File::from(r), w)
    }

    #[test]
    fn direct_output_arrives_while_writing() {
        let (mut r, w) = pipe();
        let mut s = Sink::new(w, false).unwrap();
        s.write_all(b"hello").unwrap();
        let mut got = [0u8; 5];
        r.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello");
        assert_eq!(s.close().unwrap(), 5);
    }

    #[test]
    fn deferred_output_arrives_at_close() {
        let (mut r, w) = pipe();
        nix::fcntl::fcntl(
            std::os::fd::AsRawFd::as_raw_fd(&r),
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .unwrap();
        let mut s = Sink::new(w, true).unwrap();
        s.write_all(b"abc").unwrap();
        s.write_all(b"def").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut got = [0u8; 6];
        assert_eq!(
            r.read(&mut got).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        assert_eq!(s.close().unwrap(), 6);
        r.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"abcdef");
    }

    #[test]
    fn a_closed_reader_fails_later_writes() {
        let (r, w) = pipe();
        drop(r);
        let mut s = Sink::new(w, false).unwrap();
        let mut failed = false;
        for _ in 0..100 {
            if s.write_all(b"x").is_err() || s.flush().is_err() {
                failed = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(failed);
    }
}
