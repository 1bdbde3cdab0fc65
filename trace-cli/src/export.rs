//! `trace-cli export`: the SQL tables of trace files as Parquet files, for
//! engines that read Parquet (DataFusion through `trace-cli query`,
//! DuckDB, Spark, Trino, pandas).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::damage::DamageArgs;

#[cfg(feature = "sql")]
mod parquet;

/// Arguments of `trace-cli export`.
#[derive(Args)]
pub struct ExportArgs {
    /// The trace files (`-` for standard input, which needs --trace-id).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Write the tables as Parquet into this directory:
    /// `DIR/<table>/<trace id>.parquet`, one file per table and trace
    /// (exporting a trace again replaces its files).
    #[arg(long, value_name = "DIR", required = true)]
    parquet: PathBuf,
    /// The `host` column (default: the file's name without its extension,
    /// `stdin` for standard input; the recording does not say which
    /// machine it was made on).
    #[arg(long, value_name = "NAME")]
    host: Option<String>,
    /// The `trace_id` column and file name (default: a hash of the file's
    /// first MiB and its size); only with one file. Required for standard
    /// input: the id fills every row, so it must be known before the first
    /// is written, and a stream's size is known only at its end.
    #[arg(long, value_name = "ID")]
    trace_id: Option<String>,
    #[command(flatten)]
    damage: DamageArgs,
}

/// Runs `trace-cli export`.
pub fn run(args: ExportArgs) -> Result<ExitCode> {
    #[cfg(feature = "sql")]
    return parquet::run(args);
    #[cfg(not(feature = "sql"))]
    {
        drop(args);
        Err(crate::without_sql("export"))
    }
}
