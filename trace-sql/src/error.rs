//! Errors of building, exporting and querying the tables.

use std::path::PathBuf;

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use datafusion::parquet::errors::ParquetError;
use trace_analysis::ReadTraceError;

/// Building, exporting or querying the tables failed.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// The trace could not be read.
    #[error(transparent)]
    Read(#[from] ReadTraceError),
    /// A file or directory could not be read or written.
    #[error("{}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// Building a record batch failed.
    #[error("cannot build a record batch")]
    Arrow(#[from] ArrowError),
    /// Writing Parquet failed.
    #[error("cannot write Parquet")]
    Parquet(#[from] ParquetError),
    /// The query engine failed.
    #[error(transparent)]
    Engine(#[from] DataFusionError),
    /// A trace id that cannot name a file.
    #[error("trace id {0:?} cannot name a file: use letters, digits, '.', '_' and '-'")]
    BadTraceId(String),
    /// The query no longer wants the rows being read (it stopped early).
    #[error("the query stopped reading")]
    Stopped,
    /// A path holds no trace tables.
    #[error("{} holds no exported tables (no <table>/*.parquet folder)", .0.display())]
    NoTables(PathBuf),
}

impl SqlError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SqlError::Io {
            path: path.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    /// Each message in a chain of causes says one thing: its own.
    #[test]
    fn messages_leave_their_source_to_the_chain() {
        let e = SqlError::io("/x/y.parquet", std::io::Error::other("disk full"));
        assert_eq!(e.to_string(), "/x/y.parquet");
        assert_eq!(e.source().map(|s| s.to_string()), Some("disk full".into()));
        let e = SqlError::Read(ReadTraceError::Io(std::io::Error::other("disk full")));
        assert_eq!(e.to_string(), "cannot read the trace");
        assert_eq!(e.source().map(|s| s.to_string()), Some("disk full".into()));
    }
}
