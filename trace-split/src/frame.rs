//! Whole records read from a byte stream, for readers that stop at the
//! first damaged place: [`RecordStream`] with its errors made final.

use std::io::Read;

use trace_common::fxt::stream::{RecordStream, StreamErrorKind};

use crate::SplitError;

pub use trace_common::fxt::stream::MAX_RECORD as MAX_RECORD_BYTES;

/// Reads an FXT stream record by record, in bounded memory.
#[derive(Debug)]
pub struct RecordReader<R> {
    records: RecordStream<R>,
}

impl<R: Read> RecordReader<R> {
    /// A reader at the start of `inner`.
    pub fn new(inner: R) -> Self {
        RecordReader {
            records: RecordStream::new(inner),
        }
    }

    /// The next whole record, or `None` at the end of the stream. A stream
    /// that ends inside a record, or a record of size zero or beyond
    /// [`MAX_RECORD_BYTES`], is an error.
    pub fn next_record(&mut self) -> Result<Option<&[u8]>, SplitError> {
        match self.records.next_record() {
            None => Ok(None),
            Some(Ok((_, bytes))) => Ok(Some(bytes)),
            Some(Err(e)) => Err(match e.kind {
                StreamErrorKind::Read(io) => SplitError::Read(io),
                StreamErrorKind::Truncated { .. } => SplitError::Truncated { offset: e.offset },
                StreamErrorKind::ZeroSize => SplitError::BadRecordSize {
                    offset: e.offset,
                    words: 0,
                },
                StreamErrorKind::TooLarge { bytes } => SplitError::BadRecordSize {
                    offset: e.offset,
                    words: bytes / 8,
                },
                _ => SplitError::BadRecordSize {
                    offset: e.offset,
                    words: 0,
                },
            }),
        }
    }
}
