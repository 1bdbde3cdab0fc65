//! Writing a trace's tables as Parquet: `DIR/<table>/<trace_id>.parquet`,
//! one file per table and trace (a table without rows gets a file without
//! rows), zstd-compressed, in row groups of at most [`ROW_GROUP_ROWS`]
//! rows and about [`ROW_GROUP_BYTES`] encoded (the row group being written
//! is held in memory). A directory of many traces' exports is so one folder per table,
//! which DataFusion, DuckDB, Spark or Trino read as one table, and a row
//! group never mixes traces. Each file carries the `trace_id` and `host`
//! as key-value metadata too.
//!
//! Files are written under a temporary name and renamed when complete, so
//! a reader never sees half a file; exporting the same trace again
//! replaces its files.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use datafusion::arrow::array::RecordBatch;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::metadata::KeyValue;
use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties};
use trace_analysis::ReadStats;

use crate::SqlError;
use crate::tables::{self, TraceInfo};
use crate::writer::{BATCH_ROWS, BatchConsumer, stream_trace};

/// Rows of a row group, at most.
pub const ROW_GROUP_ROWS: usize = 1 << 20;
/// Encoded bytes of a row group, about, at most.
pub const ROW_GROUP_BYTES: usize = 16 << 20;

/// What an export wrote.
#[derive(Debug)]
pub struct Exported {
    /// Each table's file and its rows.
    pub files: Vec<(&'static str, PathBuf, u64)>,
    /// What reading the trace saw.
    pub stats: ReadStats,
}

struct TableFile {
    name: &'static str,
    writer: Option<ArrowWriter<BufWriter<File>>>,
    temp: PathBuf,
    path: PathBuf,
    rows: u64,
}

/// A [`BatchConsumer`] writing each table of one trace to its Parquet file.
pub struct ParquetExport {
    files: Vec<TableFile>,
}

/// Whether `id` can name a file: letters, digits, `.`, `_` and `-`, not
/// starting with a dot.
pub fn valid_trace_id(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('.')
        && id.len() <= 200
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

impl ParquetExport {
    /// Creates (or replaces) the files of `info`'s trace in `dir`.
    pub fn create(dir: &Path, info: &TraceInfo) -> Result<Self, SqlError> {
        if !valid_trace_id(&info.trace_id) {
            return Err(SqlError::BadTraceId(info.trace_id.clone()));
        }
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
            // Statistics per column chunk, not per page: a page index of
            // every page's minimum and maximum stays in memory until the
            // file is closed, and grew with the trace.
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_key_value_metadata(Some(vec![
                KeyValue::new("trace_id".into(), info.trace_id.clone()),
                KeyValue::new("host".into(), info.host.clone()),
            ]))
            .build();
        let mut export = ParquetExport { files: Vec::new() };
        for table in tables::all() {
            let name = table.name();
            let folder = dir.join(name);
            std::fs::create_dir_all(&folder).map_err(|e| SqlError::io(&folder, e))?;
            let path = folder.join(format!("{}.parquet", info.trace_id));
            let temp = folder.join(format!(".{}.parquet.tmp", info.trace_id));
            let file = File::create(&temp).map_err(|e| SqlError::io(&temp, e))?;
            // Pushed first, so that the temporary file is removed on error.
            export.files.push(TableFile {
                name,
                writer: None,
                temp,
                path,
                rows: 0,
            });
            let writer = ArrowWriter::try_new(
                BufWriter::new(file),
                tables::schema(table.as_ref()),
                Some(props.clone()),
            )?;
            if let Some(f) = export.files.last_mut() {
                f.writer = Some(writer);
            }
        }
        Ok(export)
    }

    /// Completes every file and moves it into place.
    pub fn close(mut self) -> Result<Vec<(&'static str, PathBuf, u64)>, SqlError> {
        let mut done = Vec::new();
        for f in &mut self.files {
            if let Some(w) = f.writer.take() {
                w.close()?;
            }
            std::fs::rename(&f.temp, &f.path).map_err(|e| SqlError::io(&f.path, e))?;
            done.push((f.name, f.path.clone(), f.rows));
        }
        self.files.clear();
        Ok(done)
    }
}

impl Drop for ParquetExport {
    fn drop(&mut self) {
        // Not closed: an error; no half-written file is left.
        for f in &self.files {
            let _ = std::fs::remove_file(&f.temp);
        }
    }
}

impl BatchConsumer for ParquetExport {
    fn batch(&mut self, table: &'static str, batch: RecordBatch) -> Result<(), SqlError> {
        let Some(f) = self.files.iter_mut().find(|f| f.name == table) else {
            return Ok(());
        };
        if let Some(w) = f.writer.as_mut() {
            w.write(&batch)?;
            f.rows += batch.num_rows() as u64;
        }
        Ok(())
    }
}

/// Exports the trace file at `path` into `dir` as `info`'s trace.
pub fn export_trace(path: &Path, dir: &Path, info: &TraceInfo) -> Result<Exported, SqlError> {
    let input = File::open(path).map_err(|e| SqlError::io(path, e))?;
    export_stream(input, dir, info)
}

/// Writes the tables of the trace read from `input` (standard input, a
/// pipe) into `dir` as [`export_trace`] does.
pub fn export_stream(
    input: impl std::io::Read,
    dir: &Path,
    info: &TraceInfo,
) -> Result<Exported, SqlError> {
    let export = ParquetExport::create(dir, info)?;
    let (stats, export) = stream_trace(input, info.clone(), BATCH_ROWS, export)?;
    Ok(Exported {
        files: export.close()?,
        stats,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::testing::info;
    use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    #[test]
    fn trace_ids_that_name_files() {
        assert!(valid_trace_id("0123abcd"));
        assert!(valid_trace_id("web-1_2024.06"));
        assert!(!valid_trace_id(""));
        assert!(!valid_trace_id("../x"));
        assert!(!valid_trace_id("a/b"));
        assert!(!valid_trace_id(".hidden"));
    }

    #[test]
    fn one_file_per_table_with_schema_and_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let info = info();
        let mut export = ParquetExport::create(dir.path(), &info).unwrap();
        let mut threads = tables::threads::Threads::default();
        let mut cx = trace_analysis::Context::default();
        let name = cx.strings.intern("main");
        use tables::Table;
        threads.event(
            &trace_analysis::Event::Thread {
                pid: 1,
                tid: 2,
                name,
            },
            &cx,
        );
        threads.end(&cx);
        let batch = tables::take_batch(&mut threads, &info).unwrap();
        export.batch("threads", batch).unwrap();
        let files = export.close().unwrap();
        assert_eq!(files.len(), tables::names().len());
        for (table, path, rows) in &files {
            assert_eq!(
                path,
                &dir.path().join(table).join("0123456789abcdef.parquet")
            );
            let reader =
                ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
            let kv = reader
                .metadata()
                .file_metadata()
                .key_value_metadata()
                .unwrap();
            assert!(
                kv.iter()
                    .any(|k| k.key == "host" && k.value.as_deref() == Some("test-host"))
            );
            let schema = reader.schema().clone();
            let want = tables::schema_of(table).unwrap();
            assert_eq!(schema.fields(), want.fields(), "{table}");
            let read: usize = reader.build().unwrap().map(|b| b.unwrap().num_rows()).sum();
            assert_eq!(read as u64, *rows);
            assert_eq!(*rows, u64::from(*table == "threads"));
        }
        // No temporary file is left.
        let left: Vec<_> = std::fs::read_dir(dir.path().join("threads"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }

    #[test]
    fn an_unfinished_export_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let export = ParquetExport::create(dir.path(), &info()).unwrap();
        drop(export);
        let left: Vec<_> = std::fs::read_dir(dir.path().join("slices"))
            .unwrap()
            .collect();
        assert!(left.is_empty());
    }
}
