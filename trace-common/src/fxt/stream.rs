//! Whole records read from a byte stream of any length, in bounded memory.
//!
//! [`RecordStream`] is how every reader of a trace file gets at its
//! records: it frames them by their size field as [`Reader`](super::read::Reader)
//! does for a slice, but holds only a window of the stream (about
//! [`CHUNK`] bytes, more only for a record larger than that), so reading a
//! file of many gigabytes takes the memory of its largest record.
//!
//! What it does with imperfect data, as [`Reader`](super::read::Reader)
//! does:
//!
//! - A record whose size runs past the end of the stream, or a trailing
//!   partial word, gives one [`StreamErrorKind::Truncated`] error and ends
//!   the stream.
//! - A size of 0 gives a [`StreamErrorKind::ZeroSize`] error; reading goes
//!   on with the next word.
//! - A record larger than the stream's limit ([`MAX_RECORD`] unless set
//!   otherwise) gives a [`StreamErrorKind::TooLarge`] error and is skipped
//!   by its size without being held.
//! - A failed read gives a [`StreamErrorKind::Read`] error and ends the
//!   stream.

use std::fmt;
use std::io::{ErrorKind, Read};
use std::vec::Vec;

use super::wire;

/// Bytes read from the stream at a time.
pub const CHUNK: usize = 1 << 20;

/// The largest record held by default (a large blob may say more): 64 MiB.
pub const MAX_RECORD: usize = 64 << 20;

/// What went wrong at a place in the stream.
#[derive(Debug)]
#[non_exhaustive]
pub enum StreamErrorKind {
    /// The stream ends inside a record; `bytes` of it were there.
    Truncated {
        /// Bytes of the record that the stream holds.
        bytes: u64,
    },
    /// The record's size field is 0.
    ZeroSize,
    /// The record is larger than the stream's limit; it was skipped.
    TooLarge {
        /// Its size in bytes.
        bytes: u64,
    },
    /// Reading the stream failed.
    Read(std::io::Error),
}

/// A damaged or unreadable place in the stream.
#[derive(Debug)]
pub struct StreamError {
    /// Byte offset in the stream of the record (or word) concerned.
    pub offset: u64,
    /// What is wrong there.
    pub kind: StreamErrorKind,
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = self.offset;
        match &self.kind {
            StreamErrorKind::Truncated { bytes } => write!(
                f,
                "{bytes} bytes at byte {at} (the end) do not make a whole record"
            ),
            StreamErrorKind::ZeroSize => write!(f, "record with size 0 at byte {at}"),
            StreamErrorKind::TooLarge { bytes } => {
                write!(f, "record of {bytes} bytes at byte {at} skipped")
            }
            StreamErrorKind::Read(e) => write!(f, "reading the trace at byte {at}: {e}"),
        }
    }
}

impl std::error::Error for StreamError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            StreamErrorKind::Read(e) => Some(e),
            _ => None,
        }
    }
}

/// Reads an FXT byte stream record by record; see the
/// [module documentation](self).
#[derive(Debug)]
pub struct RecordStream<R> {
    inner: R,
    buf: Vec<u8>,
    /// First byte of `buf` not yet handed out.
    start: usize,
    /// Stream offset of `buf[start]`.
    offset: u64,
    /// Bytes of a skipped record still to be read and dropped.
    skip: u64,
    max_record: usize,
    eof: bool,
    done: bool,
}

impl<R: Read> RecordStream<R> {
    /// A stream of the records of `inner`, from its current position.
    pub fn new(inner: R) -> Self {
        RecordStream {
            inner,
            buf: Vec::new(),
            start: 0,
            offset: 0,
            skip: 0,
            max_record: MAX_RECORD,
            eof: false,
            done: false,
        }
    }

    /// Sets the largest record held (at least one word); larger ones are
    /// skipped with a [`StreamErrorKind::TooLarge`] error.
    pub fn with_max_record(mut self, bytes: usize) -> Self {
        self.max_record = bytes.max(8);
        self
    }

    /// Bytes of the stream consumed so far: the offset of the next record
    /// (at the end, every byte read, a truncated tail too).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next record with its byte offset, an error for a damaged place
    /// (after which the stream goes on where it can), or `None` at the end.
    pub fn next_record(&mut self) -> Option<Result<(u64, &[u8]), StreamError>> {
        let (at, from, len) = match self.frame()? {
            Ok(found) => found,
            Err(e) => return Some(Err(e)),
        };
        Some(Ok((at, &self.buf[from..from + len])))
    }

    /// Finds the next record: its offset, where it starts in `buf`, and
    /// its length.
    fn frame(&mut self) -> Option<Result<(u64, usize, usize), StreamError>> {
        loop {
            if self.done {
                return None;
            }
            if self.skip > 0 {
                let avail = self.buf.len() - self.start;
                let n = usize::try_from(self.skip).unwrap_or(usize::MAX).min(avail);
                self.consume(n);
                self.skip -= n as u64;
                if self.skip > 0 {
                    if self.eof {
                        // The skipped record was reported; its end is
                        // simply missing.
                        self.done = true;
                        return None;
                    }
                    if let Err(e) = self.fill(1) {
                        return Some(Err(e));
                    }
                }
                continue;
            }
            let avail = self.buf.len() - self.start;
            if avail < 8 {
                if self.eof {
                    self.done = true;
                    if avail == 0 {
                        return None;
                    }
                    let e = self.error(StreamErrorKind::Truncated {
                        bytes: avail as u64,
                    });
                    self.consume(avail);
                    return Some(Err(e));
                }
                if let Err(e) = self.fill(8) {
                    return Some(Err(e));
                }
                continue;
            }
            let word = &self.buf[self.start..self.start + 8];
            let header = u64::from_le_bytes(word.try_into().unwrap_or_default());
            let words = wire::record_size_words(header);
            if words == 0 {
                let e = self.error(StreamErrorKind::ZeroSize);
                self.consume(8);
                return Some(Err(e));
            }
            let bytes = words.saturating_mul(8);
            let len = match usize::try_from(bytes) {
                Ok(len) if len <= self.max_record => len,
                _ => {
                    let e = self.error(StreamErrorKind::TooLarge { bytes });
                    self.skip = bytes;
                    return Some(Err(e));
                }
            };
            if len > avail {
                if self.eof {
                    self.done = true;
                    let e = self.error(StreamErrorKind::Truncated {
                        bytes: avail as u64,
                    });
                    self.consume(avail);
                    return Some(Err(e));
                }
                if let Err(e) = self.fill(len) {
                    return Some(Err(e));
                }
                continue;
            }
            let found = (self.offset, self.start, len);
            self.consume(len);
            return Some(Ok(found));
        }
    }

    fn error(&self, kind: StreamErrorKind) -> StreamError {
        StreamError {
            offset: self.offset,
            kind,
        }
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        self.offset += n as u64;
    }

    /// Reads until at least `need` unread bytes are buffered or the stream
    /// ends; a failed read ends the stream.
    fn fill(&mut self, need: usize) -> Result<(), StreamError> {
        // Keep only the unread tail.
        if self.start > 0 {
            self.buf.copy_within(self.start.., 0);
            self.buf.truncate(self.buf.len() - self.start);
            self.start = 0;
        }
        let target = need.max(CHUNK);
        let mut filled = self.buf.len();
        self.buf.resize(target.max(filled), 0);
        while filled < need {
            match self.inner.read(&mut self.buf[filled..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    self.buf.truncate(filled);
                    self.done = true;
                    return Err(StreamError {
                        offset: self.offset + filled as u64,
                        kind: StreamErrorKind::Read(e),
                    });
                }
            }
        }
        self.buf.truncate(filled);
        // Drop a buffer grown for one large record once it is not needed.
        if self.buf.capacity() > 2 * CHUNK.max(need) {
            self.buf.shrink_to(CHUNK.max(need));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::format;
    use std::string::{String, ToString};

    use super::*;
    use crate::fxt::Record;
    use crate::fxt::read::Reader;
    use crate::fxt::write::encode;

    /// A reader that hands out at most `step` bytes per read.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn records(data: &[u8], step: usize, max: usize) -> Vec<Result<(u64, Vec<u8>), String>> {
        let mut s = RecordStream::new(Trickle { data, step }).with_max_record(max);
        let mut out = Vec::new();
        while let Some(r) = s.next_record() {
            out.push(r.map(|(at, b)| (at, b.to_vec())).map_err(|e| e.to_string()));
        }
        out
    }

    fn sample() -> Vec<u8> {
        let mut data = Vec::new();
        encode(&Record::Magic, &mut data).unwrap();
        for i in 0..50u32 {
            encode(
                &Record::ProviderInfo {
                    id: i,
                    name: "p".repeat(i as usize).into(),
                },
                &mut data,
            )
            .unwrap();
        }
        data
    }

    #[test]
    fn records_are_those_the_slice_reader_finds_whatever_the_read_sizes() {
        let data = sample();
        let want: Vec<(u64, Vec<u8>)> = {
            let mut r = Reader::new(&data);
            let mut v = Vec::new();
            let mut at = r.offset();
            while let Some(Ok(_)) = r.next() {
                v.push((at as u64, data[at..r.offset()].to_vec()));
                at = r.offset();
            }
            v
        };
        for step in [1, 3, 8, 100, 1 << 20] {
            let got: Vec<_> = records(&data, step, MAX_RECORD)
                .into_iter()
                .map(Result::unwrap)
                .collect();
            assert_eq!(got, want, "read {step} bytes at a time");
        }
    }

    #[test]
    fn damage_is_reported_and_reading_goes_on_where_it_can() {
        let good = sample();
        let mut data = good[..8].to_vec();
        data.extend([0u8; 8]); // size 0
        let big_at = data.len();
        // A record of 1024 words, beyond a limit of 4096 bytes.
        data.extend((1024u64 << 4).to_le_bytes());
        data.extend([0u8; 8184]);
        let rest_at = data.len();
        data.extend(&good[8..]);
        data.extend([1, 2, 3]); // a partial word at the end
        let got = records(&data, 5, 4096);
        assert_eq!(got[0].as_ref().unwrap().0, 0);
        assert!(got[1].as_ref().unwrap_err().contains("size 0 at byte 8"));
        let skipped = got[2].as_ref().unwrap_err();
        assert!(
            skipped.contains(&format!("8192 bytes at byte {big_at} skipped")),
            "{skipped}"
        );
        assert_eq!(got[3].as_ref().unwrap().0, rest_at as u64);
        let last = got.last().unwrap().as_ref().unwrap_err();
        assert!(last.contains("3 bytes"), "{last}");
        assert_eq!(got.iter().filter(|r| r.is_ok()).count(), 51);
        assert_eq!(got.len(), 54);
    }

    #[test]
    fn a_record_cut_by_the_end_ends_the_stream() {
        let data = sample();
        let cut = &data[..data.len() - 4];
        let got = records(cut, 7, MAX_RECORD);
        let last = got.last().unwrap().as_ref().unwrap_err();
        assert!(last.contains("do not make a whole record"), "{last}");
        assert_eq!(got.iter().filter(|r| r.is_err()).count(), 1);
    }

    #[test]
    fn a_failed_read_ends_the_stream_with_its_cause() {
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("disk on fire"))
            }
        }
        let mut s = RecordStream::new(Broken);
        let e = s.next_record().unwrap().unwrap_err();
        assert!(matches!(e.kind, StreamErrorKind::Read(_)));
        assert!(s.next_record().is_none());
    }
}
