//! `trace-cli export`: the SQL tables of trace files as Parquet files, for
//! engines that read Parquet (DataFusion through `trace-cli query`,
//! DuckDB, Spark, Trino, pandas); or a trace's stack samples as pprof
//! profiles (`pprof`, with the messages in `profile`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::damage::DamageArgs;

#[cfg(feature = "sql")]
mod parquet;
mod pprof;
mod profile;

/// Arguments of `trace-cli export`.
#[derive(Args)]
#[command(group(clap::ArgGroup::new("format").required(true).args(["parquet", "pprof"])))]
pub struct ExportArgs {
    /// The trace files (`-` for standard input, which needs --trace-id);
    /// one with --pprof.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Write the tables as Parquet into this directory:
    /// `DIR/<table>/<trace id>.parquet`, one file per table and trace
    /// (exporting a trace again replaces its files).
    #[arg(long, value_name = "DIR")]
    parquet: Option<PathBuf>,
    /// Write the stack samples as pprof profiles (gzipped profile.proto,
    /// for `go tool pprof`, Perfetto, speedscope, Pyroscope) into this
    /// directory: `DIR/<timebase>.pb.gz`, one per timebase, weighted as
    /// `flamegraph` weighs it (off-CPU and wakeup samples by their ns).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["host", "trace_id"])]
    pprof: Option<PathBuf>,
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
    if let Some(dir) = &args.pprof {
        let [file] = args.files.as_slice() else {
            anyhow::bail!("--pprof takes one trace file ({} given)", args.files.len());
        };
        return pprof::run(file, dir, &args.damage);
    }
    #[cfg(feature = "sql")]
    return parquet::run(args);
    #[cfg(not(feature = "sql"))]
    {
        drop(args);
        Err(crate::without_sql("export"))
    }
}
