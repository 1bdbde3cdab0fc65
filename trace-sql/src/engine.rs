//! The tables in DataFusion: a trace file's tables, read from the file by
//! each scan ([`crate::scan`]), batches held in memory, or a directory of
//! Parquet exports registered as one listing table per table folder; and
//! the session they are queried in, with [`crate::functions`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::prelude::SessionContext;
use std::io::Read as _;

use trace_analysis::{Context, Event, Wants, read_trace_wanting};

use crate::scan::{TraceStats, TraceTable};
use crate::tables::{self, TraceInfo};
use crate::writer::Collected;
use crate::{SqlError, functions, trace_id};

/// How deep below an export directory table folders are looked for.
pub const MAX_DEPTH: usize = 4;

/// A session with the trace tables' functions.
pub fn session() -> SessionContext {
    let ctx = SessionContext::new();
    ctx.register_udf(functions::arg());
    ctx
}

/// The trace info of the file at `path`: `trace_id` as given or computed
/// from the file ([`trace_id::of_file`]), `host` as given or the file's
/// name without its extension, and the machines a trace of several declares.
pub fn trace_info(
    path: &Path,
    host: Option<&str>,
    id: Option<&str>,
) -> Result<TraceInfo, SqlError> {
    let trace_id = match id {
        Some(id) => id.to_owned(),
        None => trace_id::of_file(path)?,
    };
    let host = match host {
        Some(h) => h.to_owned(),
        None => path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let machines = std::fs::File::open(path)
        .map(|f| trace_hosts::read_machines(std::io::BufReader::new(f)))
        .unwrap_or_default();
    Ok(TraceInfo {
        trace_id,
        host,
        machines,
    })
}

/// Registers the tables of the trace file at `path` in `ctx`, each read
/// from the file when a query scans it ([`TraceTable`]: only the tables a
/// query names are read, each with only the columns and records it needs).
/// Fails here if the file cannot be read or is not FXT. The figures of the
/// reads (malformed records, refused names) gather in the returned
/// [`TraceStats`] as queries run.
pub fn register_trace(
    ctx: &SessionContext,
    path: &Path,
    info: &TraceInfo,
) -> Result<TraceStats, SqlError> {
    let input = std::fs::File::open(path).map_err(|e| SqlError::io(path, e))?;
    read_trace_wanting(
        input.take(8),
        &mut |_: &Event, _: &Context| {},
        Wants::default(),
    )?;
    let stats = TraceStats::default();
    for name in tables::names() {
        let table = TraceTable::new(path.to_path_buf(), info.clone(), name, stats.clone())
            .ok_or_else(|| SqlError::NoTables(path.to_path_buf()))?;
        ctx.register_table(name, Arc::new(table))?;
    }
    Ok(stats)
}

/// Registers every table of `collected` (an empty one for a table without
/// rows), its batches spread over the session's partitions.
pub fn register_batches(ctx: &SessionContext, mut collected: Collected) -> Result<(), SqlError> {
    let partitions = ctx.state().config().target_partitions().max(1);
    for table in tables::all() {
        let name = table.name();
        let schema = tables::schema(table.as_ref());
        let batches = collected.batches.remove(name).unwrap_or_default();
        let mut parts: Vec<Vec<RecordBatch>> =
            vec![Vec::new(); partitions.min(batches.len()).max(1)];
        let n = parts.len();
        for (i, b) in batches.into_iter().enumerate() {
            parts[i % n].push(b);
        }
        let mem = MemTable::try_new(schema, parts)?;
        ctx.register_table(name, Arc::new(mem))?;
    }
    Ok(())
}

/// The folders of each table under `dir`: folders named as a table that
/// hold `.parquet` files, `dir` itself and up to [`MAX_DEPTH`] levels
/// below (an export, or a directory of exports).
pub fn table_folders(dir: &Path) -> Result<BTreeMap<&'static str, Vec<PathBuf>>, SqlError> {
    let names = tables::names();
    let mut found: BTreeMap<&'static str, Vec<PathBuf>> = BTreeMap::new();
    let mut pending = vec![(dir.to_path_buf(), 0usize)];
    while let Some((folder, depth)) = pending.pop() {
        let entries = std::fs::read_dir(&folder).map_err(|e| SqlError::io(&folder, e))?;
        let mut subfolders = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| SqlError::io(&folder, e))?;
            let path = entry.path();
            let hidden = entry.file_name().to_string_lossy().starts_with('.');
            if !hidden && entry.file_type().is_ok_and(|t| t.is_dir()) {
                subfolders.push(path);
            }
        }
        subfolders.sort();
        for sub in subfolders {
            let name = sub.file_name().map(|n| n.to_string_lossy().into_owned());
            let table = name.and_then(|n| names.iter().find(|t| **t == n).copied());
            match table {
                Some(table) if holds_parquet(&sub) => found.entry(table).or_default().push(sub),
                _ if depth < MAX_DEPTH => pending.push((sub, depth + 1)),
                _ => {}
            }
        }
    }
    Ok(found)
}

/// Whether `folder` holds a `.parquet` file.
fn holds_parquet(folder: &Path) -> bool {
    std::fs::read_dir(folder).is_ok_and(|entries| {
        entries.filter_map(Result::ok).any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            !name.starts_with('.') && name.ends_with(".parquet")
        })
    })
}

/// Registers the Parquet exports under `dir` (an export directory, or a
/// directory holding several) in `ctx`: each table as one listing table of
/// all its folders, with the documented schema (a table no export holds is
/// registered empty). Returns each table's folders.
pub async fn register_export(
    ctx: &SessionContext,
    dir: &Path,
) -> Result<BTreeMap<&'static str, Vec<PathBuf>>, SqlError> {
    let folders = table_folders(dir)?;
    if folders.is_empty() {
        return Err(SqlError::NoTables(dir.to_path_buf()));
    }
    for table in tables::all() {
        let name = table.name();
        let schema = tables::schema(table.as_ref());
        let Some(paths) = folders.get(name) else {
            ctx.register_table(name, Arc::new(MemTable::try_new(schema, vec![Vec::new()])?))?;
            continue;
        };
        let urls = paths
            .iter()
            .map(|p| {
                let p = std::path::absolute(p).map_err(|e| SqlError::io(p, e))?;
                Ok(ListingTableUrl::parse(format!("{}/", p.display()))?)
            })
            .collect::<Result<Vec<_>, SqlError>>()?;
        let options =
            ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
        let config = ListingTableConfig::new_with_multi_paths(urls)
            .with_listing_options(options)
            .with_schema(schema);
        ctx.register_table(name, Arc::new(ListingTable::try_new(config)?))?;
    }
    Ok(folders)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parquet_export::ParquetExport;
    use crate::tables::testing::{args, info, sym, track};
    use crate::writer::{BatchConsumer, TableWriter};
    use datafusion::arrow::util::pretty::pretty_format_batches;
    use trace_analysis::event::{Frame, Sample, Slice};
    use trace_analysis::{Context, Event, Sink, Value};

    /// A few system calls and a sample, through the writer in batches of 2.
    fn collected() -> Collected {
        let mut cx = Context::default();
        let sc = sym(&mut cx, "kernel:syscall");
        let (openat, getppid) = (sym(&mut cx, "openat"), sym(&mut cx, "getppid"));
        let mut events = Vec::new();
        for i in 0..5u64 {
            let (name, a) = if i < 3 {
                let a = args(
                    &mut cx,
                    &[
                        ("nr", Value::Int(257)),
                        ("dfd", Value::Int(-100)),
                        ("ret", Value::Int(-2)),
                    ],
                );
                (openat, a)
            } else {
                (
                    getppid,
                    args(&mut cx, &[("nr", Value::Int(110)), ("ret", Value::Int(1))]),
                )
            };
            events.push(Event::Slice(Slice {
                id: i + 1,
                ts: 100 * i,
                dur: 10 + i,
                track: track(7, 8),
                category: sc,
                name,
                depth: 0,
                parent: None,
                args: a,
                unfinished: false,
            }));
        }
        let (f, m, tb) = (
            sym(&mut cx, "spin"),
            sym(&mut cx, "/bin/x"),
            sym(&mut cx, "cpu-clock"),
        );
        events.push(Event::Sample(Sample {
            ts: 5,
            pid: 7,
            tid: 8,
            cpu: 0,
            timebase: tb,
            weight: None,
            frames: vec![
                Frame {
                    function: f,
                    mapping: m
                };
                2
            ],
        }));
        let mut w = TableWriter::new(info(), 2, Collected::default());
        for e in &events {
            w.event(e, &cx);
        }
        w.finish(&cx).unwrap()
    }

    async fn answers(ctx: &SessionContext) -> String {
        let sql = [
            "SELECT name, errno, count(*) AS n, max(arg(args, 'dfd')) AS dfd, sum(dur) AS dur \
             FROM syscalls GROUP BY name, errno ORDER BY name",
            "SELECT host, count(*) AS frames FROM \
             (SELECT host, unnest(stack) AS f FROM samples) WHERE f['function'] = 'spin' GROUP BY host",
            "SELECT count(*) AS n FROM slices WHERE category = 'kernel:syscall'",
            "SELECT count(*) AS n FROM wakeups",
        ];
        let mut out = String::new();
        for q in sql {
            let batches = ctx.sql(q).await.unwrap().collect().await.unwrap();
            out.push_str(&pretty_format_batches(&batches).unwrap().to_string());
            out.push('\n');
        }
        out
    }

    #[tokio::test]
    async fn memory_tables_and_their_parquet_export_answer_alike() {
        let collected = collected();
        let memory = session();
        register_batches(&memory, collected.clone()).unwrap();
        let from_memory = answers(&memory).await;
        assert!(
            from_memory.contains("| openat  | ENOENT | 3 | -100 | 33  |"),
            "{from_memory}"
        );
        assert!(
            from_memory.contains("| getppid |        | 2 |      | 27  |"),
            "{from_memory}"
        );
        assert!(
            from_memory.contains("| test-host | 2      |"),
            "{from_memory}"
        );

        let dir = tempfile::tempdir().unwrap();
        let mut export = ParquetExport::create(&dir.path().join("one"), &info()).unwrap();
        for (table, batches) in collected.batches {
            for b in batches {
                export.batch(table, b).unwrap();
            }
        }
        export.close().unwrap();
        let parquet = session();
        let folders = register_export(&parquet, dir.path()).await.unwrap();
        assert_eq!(folders.len(), tables::names().len());
        assert_eq!(answers(&parquet).await, from_memory);
    }

    #[tokio::test]
    async fn a_directory_without_exports_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = register_export(&session(), dir.path()).await.unwrap_err();
        assert!(matches!(err, SqlError::NoTables(_)), "{err}");
    }

    #[test]
    fn table_folders_of_one_export_or_many() {
        let dir = tempfile::tempdir().unwrap();
        let touch = |p: &str| {
            let p = dir.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"").unwrap();
        };
        touch("a/slices/1.parquet");
        touch("a/threads/1.parquet");
        touch("b/slices/2.parquet");
        touch("b/slices/.3.parquet.tmp");
        touch("c/syscalls/.3.parquet.tmp");
        touch("d/notatable/1.parquet");
        let found = table_folders(dir.path()).unwrap();
        assert_eq!(
            found.keys().copied().collect::<Vec<_>>(),
            ["slices", "threads"]
        );
        assert_eq!(found["slices"].len(), 2);
        let one = table_folders(&dir.path().join("a")).unwrap();
        assert_eq!(one["slices"], [dir.path().join("a/slices")]);
    }

    #[test]
    fn the_info_of_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("web-7.fxt");
        std::fs::write(&path, b"x").unwrap();
        let info = trace_info(&path, None, None).unwrap();
        assert_eq!(info.host, "web-7");
        assert_eq!(info.trace_id, trace_id::of_bytes(b"x", 1));
        let info = trace_info(&path, Some("h"), Some("id")).unwrap();
        assert_eq!((info.host.as_str(), info.trace_id.as_str()), ("h", "id"));
    }
}
