//! Writing the SQL tables of trace files as Parquet, with `trace-sql`.

use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use trace_sql::engine;
use trace_sql::parquet_export::{export_stream, export_trace};

use super::ExportArgs;
use crate::damage::Skipped;

pub(super) fn run(args: ExportArgs) -> Result<ExitCode> {
    let Some(dir) = args.parquet.as_deref() else {
        bail!("no output directory: --parquet DIR or --pprof DIR");
    };
    if args.trace_id.is_some() && args.files.len() > 1 {
        bail!("--trace-id names one trace: export the files one at a time");
    }
    let mut skipped = Skipped::default();
    for file in &args.files {
        let stdin = file.as_os_str() == "-";
        if stdin && args.trace_id.is_none() {
            bail!(
                "cannot export standard input without --trace-id: the id fills every row, and a stream's is known only at its end"
            );
        }
        let host = match (&args.host, stdin) {
            (Some(h), _) => Some(h.as_str()),
            (None, true) => Some("stdin"),
            (None, false) => None,
        };
        let info = engine::trace_info(file, host, args.trace_id.as_deref())
            .with_context(|| format!("cannot export {}", file.display()))?;
        let exported = if stdin {
            export_stream(std::io::stdin().lock(), dir, &info)
                .context("cannot export standard input")?
        } else {
            export_trace(file, dir, &info)
                .with_context(|| format!("cannot export {}", file.display()))?
        };
        crate::warn_names_refused(exported.stats.names_refused, file);
        let skip = Skipped {
            records: exported.stats.errors,
            packets: 0,
        };
        args.damage.warn(skip, file, None);
        skipped.records += skip.records;
        let rows: Vec<String> = exported
            .files
            .iter()
            .filter(|(_, _, n)| *n > 0)
            .map(|(t, _, n)| format!("{n} {t}"))
            .collect();
        eprintln!(
            "trace-cli: {} -> {} (trace_id {}, host {}): {}",
            file.display(),
            dir.display(),
            info.trace_id,
            info.host,
            if rows.is_empty() {
                "no rows".to_owned()
            } else {
                rows.join(", ")
            }
        );
    }
    Ok(args.damage.status(skipped))
}
