//! Whole records read from a byte stream.

use std::io::Read;

use trace_common::fxt::wire;

use crate::SplitError;

/// The largest record read (a large blob record may say more): 64 MiB.
pub const MAX_RECORD_BYTES: usize = 64 << 20;

/// Reads an FXT stream record by record.
#[derive(Debug)]
pub struct RecordReader<R> {
    inner: R,
    buf: Vec<u8>,
    /// Bytes read so far.
    offset: u64,
}

impl<R: Read> RecordReader<R> {
    /// A reader at the start of `inner`.
    pub fn new(inner: R) -> Self {
        RecordReader {
            inner,
            buf: Vec::new(),
            offset: 0,
        }
    }

    /// The next whole record, or `None` at the end of the stream. A stream
    /// that ends inside a record, or a record of size zero or beyond
    /// [`MAX_RECORD_BYTES`], is an error.
    pub fn next_record(&mut self) -> Result<Option<&[u8]>, SplitError> {
        let mut header = [0u8; 8];
        let got = read_full(&mut self.inner, &mut header)?;
        if got == 0 {
            return Ok(None);
        }
        if got < 8 {
            return Err(SplitError::Truncated {
                offset: self.offset,
            });
        }
        let words = wire::record_size_words(u64::from_le_bytes(header));
        let len = usize::try_from(words)
            .ok()
            .and_then(|w| w.checked_mul(8))
            .filter(|l| (8..=MAX_RECORD_BYTES).contains(l))
            .ok_or(SplitError::BadRecordSize {
                offset: self.offset,
                words,
            })?;
        self.buf.clear();
        self.buf.extend_from_slice(&header);
        self.buf.resize(len, 0);
        if read_full(&mut self.inner, &mut self.buf[8..])? < len - 8 {
            return Err(SplitError::Truncated {
                offset: self.offset,
            });
        }
        self.offset += len as u64;
        Ok(Some(&self.buf))
    }
}

/// Reads until `buf` is full or the stream ends; the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> Result<usize, SplitError> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(SplitError::Read(e)),
        }
    }
    Ok(n)
}
