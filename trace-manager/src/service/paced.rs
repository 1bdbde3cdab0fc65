//! A snapshot's output to a client: written without blocking, so that a
//! reader that stops reading is noticed and cut off instead of holding the
//! snapshot's memory and its thread for ever.

use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Duration;

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

/// How long a reader may take nothing before its snapshot is cut off.
pub(super) const READER_STALL: Duration = Duration::from_secs(10);

/// A descriptor written to in non-blocking mode, waiting at most `stall`
/// for the reader to make room each time it is full.
pub(super) struct PacedWriter {
    file: std::fs::File,
    stall: Duration,
}

impl PacedWriter {
    /// Writes to `fd` (a pipe, a socket or a file a client handed over),
    /// giving up when its reader takes nothing for `stall`.
    pub(super) fn new(fd: OwnedFd, stall: Duration) -> PacedWriter {
        // The descriptor is the client's own open file: it may have made it
        // non-blocking already, and nothing else writes to it.
        if let Ok(flags) = fcntl(fd.as_raw_fd(), FcntlArg::F_GETFL) {
            let flags = OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK;
            let _ = fcntl(fd.as_raw_fd(), FcntlArg::F_SETFL(flags));
        }
        PacedWriter {
            file: std::fs::File::from(fd),
            stall,
        }
    }
}

impl Write for PacedWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match self.file.write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let ms = u16::try_from(self.stall.as_millis()).unwrap_or(u16::MAX);
                    let mut fds = [PollFd::new(self.file.as_fd(), PollFlags::POLLOUT)];
                    match poll(&mut fds, PollTimeout::from(ms)) {
                        Ok(0) => {
                            return Err(io::Error::new(
                                io::ErrorKind::TimedOut,
                                format!(
                                    "the reader took nothing for {} s: the snapshot is cut off",
                                    self.stall.as_secs()
                                ),
                            ));
                        }
                        Ok(_) => {}
                        Err(nix::errno::Errno::EINTR) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                other => return other,
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_that_reads_gets_everything() {
        let (read, write) = nix::unistd::pipe().unwrap();
        let reader = std::thread::spawn(move || {
            let mut data = Vec::new();
            io::Read::read_to_end(&mut std::fs::File::from(read), &mut data).unwrap();
            data
        });
        let mut w = PacedWriter::new(write, Duration::from_secs(5));
        let data = vec![7u8; 1 << 20];
        w.write_all(&data).unwrap();
        drop(w);
        assert_eq!(reader.join().unwrap(), data);
    }

    #[test]
    fn a_reader_that_does_not_read_is_cut_off() {
        let (_read, write) = nix::unistd::pipe().unwrap();
        let mut w = PacedWriter::new(write, Duration::from_millis(200));
        let e = w.write_all(&vec![0u8; 1 << 20]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(e.to_string().contains("took nothing"), "{e}");
    }
}
