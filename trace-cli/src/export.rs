//! `trace-cli export`: the SQL tables of trace files as Parquet files, for
//! engines that read Parquet (DataFusion through `trace-cli query`,
//! DuckDB, Spark, Trino, pandas).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::Args;
use trace_sql::engine;
use trace_sql::parquet_export::export_trace;

/// Arguments of `trace-cli export`.
#[derive(Args)]
pub struct ExportArgs {
    /// The trace files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Write the tables as Parquet into this directory:
    /// `DIR/<table>/<trace id>.parquet`, one file per table and trace
    /// (exporting a trace again replaces its files).
    #[arg(long, value_name = "DIR", required = true)]
    parquet: PathBuf,
    /// The `host` column (default: the file's name without its extension;
    /// the recording does not say which machine it was made on).
    #[arg(long, value_name = "NAME")]
    host: Option<String>,
    /// The `trace_id` column and file name (default: a hash of the file's
    /// first MiB and its size); only with one file.
    #[arg(long, value_name = "ID")]
    trace_id: Option<String>,
}

pub fn run(args: ExportArgs) -> Result<ExitCode> {
    if args.trace_id.is_some() && args.files.len() > 1 {
        bail!("--trace-id names one trace: export the files one at a time");
    }
    for file in &args.files {
        let info = engine::trace_info(file, args.host.as_deref(), args.trace_id.as_deref())?;
        let exported = export_trace(file, &args.parquet, &info)
            .with_context(|| format!("cannot export {}", file.display()))?;
        if exported.stats.errors > 0 {
            eprintln!(
                "trace-cli: skipped {} malformed record(s) in {}",
                exported.stats.errors,
                file.display()
            );
        }
        let rows: Vec<String> = exported
            .files
            .iter()
            .filter(|(_, _, n)| *n > 0)
            .map(|(t, _, n)| format!("{n} {t}"))
            .collect();
        eprintln!(
            "trace-cli: {} -> {} (trace_id {}, host {}): {}",
            file.display(),
            args.parquet.display(),
            info.trace_id,
            info.host,
            if rows.is_empty() {
                "no rows".to_owned()
            } else {
                rows.join(", ")
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}
