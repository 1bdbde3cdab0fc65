//! Cutting an FXT stream into files that each stand alone.
//!
//! An FXT reader builds up state as it reads: which provider is current,
//! every provider's string and thread tables, the names of processes and
//! threads (kernel object records), the durations begun and not yet ended,
//! and for Perfetto packets in blob records, each packet sequence's interned
//! entries. A file cut out of the middle of a stream lacks all of it.
//! [`StreamState`] follows that state record by record and gives, at any
//! point, the records that restore it at the start of a new file
//! ([`StreamState::preamble`]) and the records that end the durations still
//! open in the file that stops there ([`StreamState::close_open`]).
//!
//! [`Rotator`] writes a stream into a series of files by size or by time,
//! each complete and valid on its own, keeping at most a given number of
//! them: `trace-cli record --rotate`. Its files, and any written through
//! [`WholeFile`], end on a whole record whatever fails (a full disk). A
//! [`FlowFilter`] leaves out of a file the flow steps and ends whose flow
//! began before it.
//!
//! ```
//! use trace_split::{Limit, Rotation, Rotator};
//! # let dir = tempfile::tempdir().unwrap();
//! let rotation = Rotation {
//!     base: dir.path().join("trace.fxt"),
//!     limit: Limit::Bytes(1 << 20),
//!     max_files: Some(4),
//! };
//! # let stream: &[u8] = &0x0016_5478_4604_0010u64.to_le_bytes();
//! let summary = Rotator::new(rotation).copy_from(stream);
//! assert!(summary.error.is_none());
//! assert_eq!(summary.files, [dir.path().join("trace-0001.fxt")]);
//! ```

mod flows;
mod frame;
mod rotate;
mod state;
mod whole;

use thiserror::Error;

pub use flows::FlowFilter;
pub use frame::{MAX_RECORD_BYTES, RecordReader};
pub use rotate::{Limit, Rotation, RotationSummary, Rotator, numbered, parse_limit};
pub use state::{MAX_OBJECTS, StreamState};
pub use whole::WholeFile;

/// Why a stream could not be split.
#[derive(Debug, Error)]
pub enum SplitError {
    /// Reading the stream failed.
    #[error("reading the trace stream: {0}")]
    Read(std::io::Error),
    /// The stream ended inside a record.
    #[error("the trace stream ends inside a record (at byte {offset})")]
    Truncated {
        /// Where the record began.
        offset: u64,
    },
    /// A record's size is zero or too large to be real.
    #[error("record at byte {offset} says it has {words} words")]
    BadRecordSize {
        /// Where the record began.
        offset: u64,
        /// The size it gave.
        words: u64,
    },
    /// A file could not be created, written or removed.
    #[error("{what} {path}: {source}")]
    File {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
}
