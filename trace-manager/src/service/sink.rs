//! Where a session's trace goes: the descriptor the client passed, written
//! by a thread of its own so a slow reader never stalls the manager.

use std::fs::File;
use std::io::{self, Seek, Write};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Bytes queued for a reader that does not keep up before its session
/// fails (rather than the manager waiting for it).
const MAX_QUEUED_BYTES: u64 = 256 << 20;

/// The output of a session: a `Write` whose bytes a thread writes to the
/// client's descriptor, at once or (deferred) when the session ends.
/// Writing never waits for the reader: a reader more than
/// [`MAX_QUEUED_BYTES`] behind fails the writes instead.
pub struct Sink {
    tx: Option<Sender<Vec<u8>>>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<io::Result<u64>>>,
}

/// What the writer thread and the sink share.
#[derive(Default)]
struct Shared {
    failed: Mutex<Option<io::ErrorKind>>,
    queued: AtomicU64,
    /// The session was abandoned: what is left is not written.
    cancelled: AtomicBool,
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
        let (tx, rx) = channel();
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("trace-output".into())
            .spawn(move || write_out(rx, dest, staging, &s))?;
        Ok(Sink {
            tx: Some(tx),
            shared,
            thread: Some(thread),
        })
    }

    /// A handle that abandons what is not yet written (see
    /// [`Cancel::cancel`]).
    pub fn canceller(&self) -> Cancel {
        Cancel(self.shared.clone())
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
        let kind = *self.shared.failed.lock().unwrap_or_else(|e| e.into_inner());
        kind.map(|k| io::Error::new(k, "writing the trace to the client's output failed"))
    }
}

/// Abandons a sink's unwritten bytes, from any thread.
#[derive(Clone)]
pub struct Cancel(Arc<Shared>);

impl Cancel {
    /// Stops the writer thread at its next chunk; a deferred trace is not
    /// copied out.
    pub fn cancel(&self) {
        self.0.cancelled.store(true, Ordering::Relaxed);
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(e) = self.error() {
            return Err(e);
        }
        let queued = self.shared.queued.load(Ordering::Relaxed);
        if queued + buf.len() as u64 > MAX_QUEUED_BYTES {
            return Err(io::Error::other(format!(
                "the client is not reading its output ({} MiB behind)",
                queued >> 20
            )));
        }
        let tx = self.tx.as_ref().ok_or(io::ErrorKind::BrokenPipe)?;
        self.shared
            .queued
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
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
        // Dropped without `close`: the session was abandoned. Not joined:
        // its reader may never read.
        if self.thread.is_some() {
            self.shared.cancelled.store(true, Ordering::Relaxed);
        }
        self.tx.take();
    }
}

fn write_out(
    rx: Receiver<Vec<u8>>,
    mut dest: File,
    mut staging: Option<File>,
    shared: &Shared,
) -> io::Result<u64> {
    let fail = |e: io::Error| {
        *shared.failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.kind());
        e
    };
    let cancelled = || {
        shared
            .cancelled
            .load(Ordering::Relaxed)
            .then(|| io::Error::new(io::ErrorKind::Interrupted, "the session was abandoned"))
    };
    let mut n = 0u64;
    for chunk in rx {
        if let Some(e) = cancelled() {
            return Err(e);
        }
        match staging.as_mut() {
            Some(s) => s.write_all(&chunk).map_err(fail)?,
            None => {
                dest.write_all(&chunk).map_err(fail)?;
                n += chunk.len() as u64;
            }
        }
        shared
            .queued
            .fetch_sub(chunk.len() as u64, Ordering::Relaxed);
    }
    if let Some(mut s) = staging {
        if let Some(e) = cancelled() {
            return Err(e);
        }
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
    fn a_reader_far_behind_fails_writes_instead_of_stalling_them() {
        let (_r, w) = pipe();
        let mut s = Sink::new(w, false).unwrap();
        let chunk = vec![0u8; 1 << 20];
        let mut failed = None;
        for i in 0..(MAX_QUEUED_BYTES >> 20) + 2 {
            if let Err(e) = s.write_all(&chunk) {
                failed = Some((i, e));
                break;
            }
        }
        let (i, e) = failed.expect("writes failed");
        assert!(i >= (MAX_QUEUED_BYTES >> 20) - 1, "failed after {i} MiB");
        assert!(e.to_string().contains("not reading"), "{e}");
        s.canceller().cancel();
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
