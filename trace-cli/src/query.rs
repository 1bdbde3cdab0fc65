//! `trace-cli query`: SQL over the tables of a trace file, or of a
//! directory of Parquet exports, with DataFusion; one statement after
//! another from the command line, or an interactive prompt.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, ValueEnum};

use crate::damage::DamageArgs;

#[cfg(feature = "sql")]
mod statements;

/// Arguments of `trace-cli query`.
#[derive(Args)]
pub struct QueryArgs {
    /// A trace file, whose tables are read from it as queries scan them
    /// (only those a query names); or a directory of Parquet exports
    /// (`trace-cli export --parquet DIR`, or a directory holding several),
    /// each table read from its folders.
    path: PathBuf,
    /// SQL to run: one statement, or several separated by `;`. Without it,
    /// statements are read from standard input (an interactive prompt on a
    /// terminal), each ending with `;`; `.tables`, `.schema [TABLE]`,
    /// `.help` and `.quit` are commands there.
    sql: Option<String>,
    /// How results are printed.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// For a trace file: the `host` column (default: the file's name
    /// without its extension).
    #[arg(long, value_name = "NAME")]
    host: Option<String>,
    /// For a trace file: the `trace_id` column (default: computed from the
    /// file, as `export` does).
    #[arg(long, value_name = "ID")]
    trace_id: Option<String>,
    #[command(flatten)]
    damage: DamageArgs,
}

/// How results are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns with borders.
    Table,
    /// Comma-separated values with a header line (lists and structs as
    /// text).
    Csv,
    /// A JSON array of one object per row (nulls included).
    Json,
}

/// Runs `trace-cli query`.
pub fn run(args: QueryArgs) -> Result<ExitCode> {
    #[cfg(feature = "sql")]
    return statements::run(args);
    #[cfg(not(feature = "sql"))]
    {
        drop(args);
        Err(crate::without_sql("query"))
    }
}
