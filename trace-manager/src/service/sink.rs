//! Where a session's trace goes: the descriptor the client passed, written
//! by a thread of its own so a slow reader never stalls the manager.
//!
//! **The output never ends inside a record.** Every `write` the sink gets
//! holds whole records ([`crate::output::FxtStream`] hands over each record,
//! or each batch of validated records, in one `write_all`, and the sink
//! always takes a buffer whole), so the chunks it batches them into end on
//! record boundaries, and the thread writes chunk by chunk. When a write
//! fails partway through a chunk:
//!
//! - a regular file is cut back (`ftruncate`, and the offset moved back) to
//!   where the chunk began, the end of the last whole record: the file is
//!   valid FXT up to there, with nothing after it;
//! - on a pipe, socket or terminal nothing can be taken back. A chunk is
//!   written with as many `write` calls as it takes (a short write or
//!   `EINTR` continues it; a non-blocking descriptor is waited on with
//!   `poll`, not failed), so a write fails there only when the reader has
//!   gone (`EPIPE`, `ECONNRESET`) or the device failed (`EIO`): a reader
//!   still reading has every chunk before the failed one and, of that one,
//!   at most a beginning it must discard as a truncated last record.
//!
//! With `defer`, the chunks go to an unnamed temporary file (the staging
//! file) and are copied to the client's descriptor when the session ends.
//! A staging file that fails is cut back the same way, and what it holds
//! then is still delivered when the sink is closed; the copy goes in units
//! of whole chunks, and a failed unit is cut back off the client's file.
//!
//! Errors keep the operating system's cause and say what was written
//! where: `writing the trace to /path: No space left on device (os error
//! 28)` (see [`OutputFailure`]). The first one is kept; every later write
//! and [`Sink::failure`] return it.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd as _, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Bytes queued for a reader that does not keep up before its session
/// fails (rather than the manager waiting for it).
const MAX_QUEUED_BYTES: u64 = 256 << 20;

/// Records are handed to the thread in chunks of about this many bytes
/// (or fewer, at each flush).
const CHUNK_BYTES: usize = 64 << 10;

/// The output of a session: a `Write` whose bytes a thread writes to the
/// client's descriptor, at once or (deferred) when the session ends.
/// Writing never waits for the reader: a reader more than
/// `MAX_QUEUED_BYTES` behind fails the writes instead.
///
/// Every `write` must hold whole records, and [`Sink::flush`] hands what
/// is buffered to the thread (see the module's documentation).
pub struct Sink {
    tx: Option<Sender<Vec<u8>>>,
    /// Whole records not yet handed to the thread.
    pending: Vec<u8>,
    /// The client's output, for messages.
    name: String,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<io::Result<u64>>>,
    /// The last of a stop's records are being written: no limit on the
    /// queue (they are bounded by the kernel events' backlog, which the
    /// memory budget counts).
    finishing: bool,
}

/// Bytes queued for the reader past which the manager stops reading the
/// kernel until the reader catches up (see [`Sink::behind`]): the rings
/// fill and the kernel counts what it drops, as for any reader too slow.
pub const READER_BEHIND: u64 = 32 << 20;

/// What the writer thread and the sink share.
#[derive(Default)]
struct Shared {
    /// The first failure.
    failed: Mutex<Option<Failure>>,
    /// `failed` is set: every record's write looks here, not at the lock.
    has_failed: AtomicBool,
    queued: AtomicU64,
    /// The session was abandoned: what is left is not written.
    cancelled: AtomicBool,
}

impl Shared {
    /// Keeps `e`, met writing to `name`, unless a failure came first; the
    /// first failure, as an error.
    fn fail(&self, name: &str, e: io::Error) -> io::Error {
        let mut failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        let first = failed.get_or_insert_with(|| Failure::new(name, &e)).error();
        self.has_failed.store(true, Ordering::Release);
        first
    }

    fn failure(&self) -> Option<io::Error> {
        if !self.has_failed.load(Ordering::Acquire) {
            return None;
        }
        let failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        failed.as_ref().map(Failure::error)
    }
}

/// A failure, kept so that every caller gets it whole: the cause's kind
/// and operating system error number, not only its kind.
#[derive(Clone, Debug)]
struct Failure {
    /// Where the trace was written.
    name: String,
    kind: io::ErrorKind,
    os: Option<i32>,
    /// The cause's text, when it is no operating system error.
    text: String,
}

impl Failure {
    fn new(name: &str, e: &io::Error) -> Failure {
        Failure {
            name: name.to_owned(),
            kind: e.kind(),
            os: e.raw_os_error(),
            text: e.to_string(),
        }
    }

    /// The failure as an error of the cause's kind (see [`OutputFailure`]).
    fn error(&self) -> io::Error {
        let cause = match self.os {
            Some(n) => io::Error::from_raw_os_error(n),
            None => io::Error::new(self.kind, self.text.clone()),
        };
        io::Error::new(
            self.kind,
            OutputFailure {
                name: self.name.clone(),
                cause,
            },
        )
    }
}

/// Writing the trace failed: where to, and the cause. The sink's errors
/// are `io::Error`s of the cause's kind carrying this (`get_ref` and
/// `downcast_ref` give it back, and [`OutputFailure::cause`] the operating
/// system error with its number).
#[derive(Debug)]
pub struct OutputFailure {
    name: String,
    cause: io::Error,
}

impl OutputFailure {
    /// What failed, e.g. `No space left on device (os error 28)`.
    pub fn cause(&self) -> &io::Error {
        &self.cause
    }

    /// Where the trace was going: the client's file, or what its output is.
    pub fn destination(&self) -> &str {
        &self.name
    }

    /// The [`OutputFailure`] in an error the sink returned, if it is one.
    pub fn of(e: &io::Error) -> Option<&OutputFailure> {
        e.get_ref().and_then(|e| e.downcast_ref::<OutputFailure>())
    }
}

impl std::fmt::Display for OutputFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "writing the trace to {}: {}", self.name, self.cause)
    }
}

impl std::error::Error for OutputFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.cause)
    }
}

impl Sink {
    /// Writes to `dest`; with `defer`, into an unnamed temporary file first,
    /// copied to `dest` by [`Sink::close`].
    pub fn new(dest: OwnedFd, defer: bool) -> io::Result<Sink> {
        let dest = Out::client(File::from(dest));
        let staging = if defer {
            Some(Out::staging(tempfile::tempfile()?))
        } else {
            None
        };
        Sink::start(dest, staging)
    }

    /// A sink writing to `dest`, through `staging` if there is one.
    fn start<D, S>(dest: Out<D>, staging: Option<Out<S>>) -> io::Result<Sink>
    where
        D: Descriptor + Send + 'static,
        S: Descriptor + Send + 'static,
    {
        let (tx, rx) = channel();
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let name = dest.name.clone();
        let thread = std::thread::Builder::new()
            .name("trace-output".into())
            .spawn(move || write_out(rx, dest, staging, &s))?;
        Ok(Sink {
            tx: Some(tx),
            pending: Vec::with_capacity(CHUNK_BYTES),
            name,
            shared,
            thread: Some(thread),
            finishing: false,
        })
    }

    /// Bytes the output may take before its reader is `READER_BEHIND`
    /// behind (0 once it is).
    pub fn room(&self) -> u64 {
        let queued = self.shared.queued.load(Ordering::Relaxed) + self.pending.len() as u64;
        READER_BEHIND.saturating_sub(queued)
    }

    /// Whether the reader is more than `READER_BEHIND` bytes behind:
    /// the kernel should not be read until it catches up.
    pub fn behind(&self) -> bool {
        self.shared.queued.load(Ordering::Relaxed) + self.pending.len() as u64 > READER_BEHIND
    }

    /// Lifts the queue's limit while a stop writes its last records
    /// (`true`), or puts it back (`false`).
    pub fn set_finishing(&mut self, finishing: bool) {
        self.finishing = finishing;
    }

    /// A handle that abandons what is not yet written (see
    /// `Cancel::cancel`).
    pub fn canceller(&self) -> Cancel {
        Cancel(self.shared.clone())
    }

    /// Waits until every byte reached the client's descriptor; the number
    /// of bytes written there. After a failure, the error: a deferred
    /// trace's staging file that failed still has its whole records
    /// copied out first.
    pub fn close(mut self) -> io::Result<u64> {
        if self.failure().is_none() {
            // A failure here is the thread's, which it returns.
            let _ = self.send_pending();
        }
        self.tx.take();
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(io::Error::other("the output thread panicked")),
            None => Ok(0),
        }
    }

    /// The first failure writing the trace, if any: an error of the
    /// cause's kind carrying an [`OutputFailure`].
    pub fn failure(&self) -> Option<io::Error> {
        self.shared.failure()
    }

    /// Hands the buffered records to the thread.
    fn send_pending(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.pending, Vec::with_capacity(CHUNK_BYTES));
        self.send(chunk)
    }

    fn send(&mut self, chunk: Vec<u8>) -> io::Result<()> {
        let Some(tx) = self.tx.as_ref() else {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the output is closed",
            ));
        };
        let n = chunk.len() as u64;
        self.shared.queued.fetch_add(n, Ordering::Relaxed);
        tx.send(chunk).map_err(|_| {
            self.shared.queued.fetch_sub(n, Ordering::Relaxed);
            // The thread ended: it failed, or was cancelled.
            self.failure().unwrap_or_else(|| {
                io::Error::new(io::ErrorKind::BrokenPipe, "the output thread has ended")
            })
        })
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

/// `buf` must hold whole records; it is taken whole or not at all.
impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        let queued = self.shared.queued.load(Ordering::Relaxed) + self.pending.len() as u64;
        if !self.finishing && queued + buf.len() as u64 > MAX_QUEUED_BYTES {
            let behind = io::Error::other(format!(
                "the client is not reading it ({} MiB behind)",
                queued >> 20
            ));
            return Err(self.shared.fail(&self.name, behind));
        }
        if self.pending.len() + buf.len() > CHUNK_BYTES {
            self.send_pending()?;
        }
        if buf.len() >= CHUNK_BYTES {
            self.send(buf.to_vec())?;
        } else {
            self.pending.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    /// Hands what is buffered to the thread (it does not wait for the
    /// thread to write it); the failure, if writing failed.
    fn flush(&mut self) -> io::Result<()> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        self.send_pending()
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

impl Shared {
    /// An error when the session was abandoned: nothing more is written.
    fn abandoned(&self) -> Option<io::Error> {
        self.cancelled
            .load(Ordering::Relaxed)
            .then(|| io::Error::new(io::ErrorKind::Interrupted, "the session was abandoned"))
    }
}

/// What the thread writes to: a file (in tests, one that fills up).
trait Descriptor: Read + Write + Seek {
    /// Sets the file's length (`ftruncate`).
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Waits until a write would not block (a non-blocking descriptor).
    fn wait_writable(&self) -> io::Result<()>;
}

impl Descriptor for File {
    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }

    fn wait_writable(&self) -> io::Result<()> {
        let mut p = libc::pollfd {
            fd: self.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        };
        loop {
            // SAFETY: one valid pollfd, for the call's length.
            if unsafe { libc::poll(&mut p, 1, -1) } >= 0 {
                // Writable, or an error the next write reports.
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// A descriptor the trace goes to, written a unit of whole records at a
/// time.
struct Out<D> {
    file: D,
    /// For messages: its path, or what it is.
    name: String,
    /// A regular file: what went out of a failed unit can be cut off.
    regular: bool,
    /// Bytes of the current unit written so far.
    unit: u64,
}

impl Out<File> {
    /// The client's descriptor, named by its path when it has one.
    fn client(file: File) -> Out<File> {
        let regular = file.metadata().is_ok_and(|m| m.file_type().is_file());
        let name = match crate::procfs::fd_target(file.as_fd()) {
            Ok(p) if p.is_absolute() => p.display().to_string(),
            Ok(p) => format!("the client's output ({})", p.display()),
            Err(_) => "the client's output".to_owned(),
        };
        Out {
            file,
            name,
            regular,
            unit: 0,
        }
    }

    /// The deferred trace's staging file.
    fn staging(file: File) -> Out<File> {
        Out {
            file,
            name: format!("the staging file in {}", std::env::temp_dir().display()),
            regular: true,
            unit: 0,
        }
    }
}

impl<D: Descriptor> Out<D> {
    /// Writes all of `bytes`, the current unit's next part; on failure,
    /// what went out of the unit is cut back off.
    fn write_part(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            match self.file.write(bytes) {
                Ok(0) => return Err(self.cut_back(io::ErrorKind::WriteZero.into())),
                Ok(n) => {
                    bytes = &bytes[n..];
                    self.unit += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if let Err(e) = self.file.wait_writable() {
                        return Err(self.cut_back(e));
                    }
                }
                Err(e) => return Err(self.cut_back(e)),
            }
        }
        Ok(())
    }

    /// The current unit went out whole.
    fn end_unit(&mut self) {
        self.unit = 0;
    }

    /// After a failed write: a regular file's end and offset go back to
    /// where the current unit began, the end of its last whole record.
    /// Returns `e`.
    fn cut_back(&mut self, e: io::Error) -> io::Error {
        let unit = std::mem::take(&mut self.unit);
        if self.regular && unit > 0 {
            // The offset is just past what went out (with O_APPEND too).
            let r = self.file.stream_position().and_then(|end| {
                let whole = end.saturating_sub(unit);
                self.file.set_len(whole)?;
                self.file.seek(SeekFrom::Start(whole)).map(drop)
            });
            if let Err(t) = r {
                log::error!("cutting a partly written record off {}: {t}", self.name);
            }
        }
        e
    }
}

/// The thread: each chunk (whole records) to `dest`, or with `staging`
/// to the staging file and, when the sink closes, on to `dest`. The bytes
/// written to `dest`.
fn write_out<D: Descriptor, S: Descriptor>(
    rx: Receiver<Vec<u8>>,
    mut dest: Out<D>,
    staging: Option<Out<S>>,
    shared: &Shared,
) -> io::Result<u64> {
    let Some(mut staging) = staging else {
        let mut n = 0u64;
        for chunk in rx {
            if let Some(e) = shared.abandoned() {
                return Err(e);
            }
            let written = dest.write_part(&chunk);
            dest.end_unit();
            shared
                .queued
                .fetch_sub(chunk.len() as u64, Ordering::Relaxed);
            written.map_err(|e| shared.fail(&dest.name, e))?;
            n += chunk.len() as u64;
        }
        return Ok(n);
    };
    // The staging file in units of whole records (chunks, joined up to
    // at least CHUNK_BYTES), to copy out unit by unit.
    let mut units: Vec<u64> = Vec::new();
    let mut failed = None;
    for chunk in rx {
        if let Some(e) = shared.abandoned() {
            return Err(e);
        }
        let len = chunk.len() as u64;
        shared.queued.fetch_sub(len, Ordering::Relaxed);
        if failed.is_some() {
            // Queued before the failure; the sink takes nothing after it.
            continue;
        }
        match staging.write_part(&chunk) {
            Ok(()) => {
                staging.end_unit();
                match units.last_mut() {
                    Some(u) if *u < CHUNK_BYTES as u64 => *u += len,
                    _ => units.push(len),
                }
            }
            Err(e) => failed = Some(shared.fail(&staging.name, e)),
        }
    }
    if let Some(e) = shared.abandoned() {
        return Err(e);
    }
    // What the staging file holds is delivered, even after it failed.
    let n = copy_out(&mut staging, &units, &mut dest, shared)?;
    match failed {
        Some(e) => Err(e),
        None => Ok(n),
    }
}

/// Copies the staging file's `units` to `dest`, a unit at a time: a unit
/// that fails is cut back off `dest`. The bytes copied.
fn copy_out<D: Descriptor, S: Descriptor>(
    staging: &mut Out<S>,
    units: &[u64],
    dest: &mut Out<D>,
    shared: &Shared,
) -> io::Result<u64> {
    staging
        .file
        .rewind()
        .map_err(|e| shared.fail(&staging.name, e))?;
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut n = 0u64;
    for &unit in units {
        if let Some(e) = shared.abandoned() {
            return Err(e);
        }
        let mut left = unit;
        while left > 0 {
            let part = &mut buf[..left.min(CHUNK_BYTES as u64) as usize];
            if let Err(e) = staging.file.read_exact(part) {
                let e = dest.cut_back(e);
                return Err(shared.fail(&staging.name, e));
            }
            dest.write_part(part)
                .map_err(|e| shared.fail(&dest.name, e))?;
            left -= part.len() as u64;
        }
        dest.end_unit();
        n += unit;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::FxtStream;
    use trace_common::fxt::Record;
    use trace_common::fxt::read::Reader;

    fn pipe() -> (File, OwnedFd) {
        let (r, w) = nix::unistd::pipe().unwrap();
        (File::from(r), w)
    }

    /// A file on a disk of `room` bytes: a write past it fails with
    /// ENOSPC, after a short write of what still fits.
    struct Filling {
        file: File,
        room: u64,
    }

    impl Read for Filling {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.file.read(buf)
        }
    }

    impl Seek for Filling {
        fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
            self.file.seek(pos)
        }
    }

    impl Write for Filling {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let free = self.room.saturating_sub(self.file.metadata()?.len());
            if free == 0 {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            self.file.write(&buf[..buf.len().min(free as usize)])
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Descriptor for Filling {
        fn set_len(&self, len: u64) -> io::Result<()> {
            self.file.set_len(len)
        }

        fn wait_writable(&self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A regular file on a disk of `room` bytes, and a handle to read it.
    fn filling(room: u64) -> (Out<Filling>, File) {
        let file = tempfile::tempfile().unwrap();
        let back = file.try_clone().unwrap();
        let out = Out {
            file: Filling { file, room },
            name: "the test file".into(),
            regular: true,
            unit: 0,
        };
        (out, back)
    }

    /// A regular file, and a handle to read it.
    fn plain() -> (Out<File>, File) {
        let file = tempfile::tempfile().unwrap();
        let back = file.try_clone().unwrap();
        let out = Out {
            file,
            name: "the plain file".into(),
            regular: true,
            unit: 0,
        };
        (out, back)
    }

    /// Writes `n` string records of different lengths, flushing (handing
    /// a chunk to the thread) after every `per_flush`, until one fails.
    fn write_records(s: &mut FxtStream<Sink>, n: usize, per_flush: usize) {
        for i in 0..n {
            let value = "x".repeat(1 + i % 61);
            let record = Record::String {
                index: (i % 1000 + 1) as u16,
                value: value.as_str().into(),
            };
            if s.write(&record).is_err() {
                return;
            }
            if i % per_flush == per_flush - 1 && s.flush().is_err() {
                return;
            }
        }
    }

    /// The length of `file`, which must be whole records, and their number.
    /// (The tests' disks have odd sizes: records are whole 8-byte words,
    /// so a file that filled its disk ends in part of one.)
    fn whole_records(mut file: File) -> (u64, usize) {
        let mut bytes = Vec::new();
        file.rewind().unwrap();
        file.read_to_end(&mut bytes).unwrap();
        assert_eq!(bytes.len() % 8, 0, "{} bytes", bytes.len());
        let mut n = 0;
        for r in Reader::new(&bytes) {
            r.unwrap_or_else(|e| panic!("{} bytes: {e:?}", bytes.len()));
            n += 1;
        }
        (bytes.len() as u64, n)
    }

    /// `e` is ENOSPC, kept whole, met writing to `name`.
    fn assert_disk_full(e: &io::Error, name: &str) {
        assert_eq!(e.kind(), io::ErrorKind::StorageFull, "{e}");
        let failure = OutputFailure::of(e).expect("an OutputFailure");
        assert_eq!(failure.cause().raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(failure.destination(), name);
        assert_eq!(
            e.to_string(),
            format!("writing the trace to {name}: No space left on device (os error 28)")
        );
    }

    #[test]
    fn a_write_failing_midway_is_cut_back_to_the_last_whole_record() {
        let (out, back) = filling(10_001);
        let mut s = FxtStream::new(Sink::start(out, None::<Out<File>>).unwrap()).unwrap();
        // Chunks of 7 records: the one that fills the disk goes out in part.
        write_records(&mut s, 100_000, 7);
        let e = s.into_inner().close().unwrap_err();
        assert_disk_full(&e, "the test file");
        let (len, records) = whole_records(back);
        assert!(len < 10_001 && len > 10_001 - 7 * 80, "{len} bytes");
        assert!(records > 7, "{records} records");
    }

    #[test]
    fn later_writes_and_the_sink_report_the_first_failure() {
        let (out, _back) = filling(100);
        let mut s = FxtStream::new(Sink::start(out, None::<Out<File>>).unwrap()).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let e = loop {
            write_records(&mut s, 1, 1);
            if let Some(e) = s.get_ref().failure() {
                break e;
            }
            assert!(std::time::Instant::now() < deadline, "no failure");
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        assert_disk_full(&e, "the test file");
        let again = s.write(&Record::Magic).unwrap_err();
        assert!(again.to_string().contains("os error 28"), "{again}");
    }

    #[test]
    fn a_deferred_copy_onto_a_full_disk_keeps_whole_units() {
        let (staging, _) = plain();
        let (dest, back) = filling(300_001);
        let mut s = FxtStream::new(Sink::start(dest, Some(staging)).unwrap()).unwrap();
        write_records(&mut s, 40_000, 50);
        let e = s.into_inner().close().unwrap_err();
        assert_disk_full(&e, "the test file");
        let (len, records) = whole_records(back);
        // Units are at least a chunk: at most about one is lost.
        assert!(
            len < 300_001 && len >= 300_001 - 2 * CHUNK_BYTES as u64,
            "{len} bytes"
        );
        assert!(records > 1000, "{records} records");
    }

    #[test]
    fn a_full_staging_file_is_cut_back_and_what_it_holds_still_delivered() {
        let (staging, staged) = filling(50_001);
        let (dest, back) = plain();
        let mut s = FxtStream::new(Sink::start(dest, Some(staging)).unwrap()).unwrap();
        write_records(&mut s, 40_000, 50);
        let e = s.into_inner().close().unwrap_err();
        assert_disk_full(&e, "the test file");
        let (staged_len, _) = whole_records(staged);
        let (len, records) = whole_records(back);
        assert_eq!(len, staged_len);
        // Chunks of 50 records (at most 80 bytes each) are cut back.
        assert!(len < 50_001 && len > 50_001 - 50 * 80, "{len} bytes");
        assert!(records > 1000, "{records} records");
    }

    #[test]
    fn errors_name_the_file_and_the_operating_systems_error() {
        let full = File::options().write(true).open("/dev/full").unwrap();
        let mut s = Sink::new(full.into(), false).unwrap();
        s.write_all(b"12345678").unwrap();
        s.flush().unwrap();
        let e = s.close().unwrap_err();
        assert_disk_full(&e, "/dev/full");
    }

    #[test]
    fn direct_output_arrives_while_writing() {
        let (mut r, w) = pipe();
        let mut s = Sink::new(w, false).unwrap();
        s.write_all(b"hello").unwrap();
        s.flush().unwrap();
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
