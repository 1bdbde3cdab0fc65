//! Running `trace-cli query` with DataFusion: the tables registered, each
//! statement executed and its result printed.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use trace_sql::datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use trace_sql::datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use trace_sql::datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use trace_sql::datafusion::arrow::util::pretty::pretty_format_batches_with_schema;
use trace_sql::datafusion::error::DataFusionError;
use trace_sql::datafusion::prelude::SessionContext;
use trace_sql::engine;

use super::{Format, QueryArgs};
use crate::damage::Skipped;

pub(super) fn run(args: QueryArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the query runtime")?;
    let ctx = engine::session();
    let mut trace_stats = None;
    if args.path.is_dir() {
        if args.host.is_some() || args.trace_id.is_some() {
            bail!("--host and --trace-id name a trace file's rows; an export has its own");
        }
        runtime
            .block_on(engine::register_export(&ctx, &args.path))
            .with_context(|| format!("cannot read the exports in {}", args.path.display()))?;
    } else {
        if args.host.is_none() && args.trace_id.is_none() && !args.path.exists() {
            bail!("{} does not exist", args.path.display());
        }
        let info = engine::trace_info(&args.path, args.host.as_deref(), args.trace_id.as_deref())?;
        let stats = engine::register_trace(&ctx, &args.path, &info)
            .with_context(|| format!("cannot read {}", args.path.display()))?;
        trace_stats = Some(stats);
    }
    let result = run_statements(&ctx, &runtime, &args);
    let mut skipped = Skipped::default();
    if let Some(stats) = trace_stats {
        let stats = stats.get();
        crate::warn_names_refused(stats.names_refused, &args.path);
        // What the statements read of the file: a damaged part no table
        // named is not seen.
        skipped.records = stats.errors;
        args.damage.warn(skipped, &args.path, None);
    }
    match result {
        Ok(code) if code == ExitCode::SUCCESS => Ok(args.damage.status(skipped)),
        other => other,
    }
}

/// Runs the statements given, or the prompt.
fn run_statements(
    ctx: &SessionContext,
    runtime: &tokio::runtime::Runtime,
    args: &QueryArgs,
) -> Result<ExitCode> {
    match &args.sql {
        Some(sql) => {
            let (mut statements, rest) = split_statements(sql);
            if !is_blank(&rest) {
                statements.push(rest);
            }
            if statements.is_empty() {
                bail!("no SQL statement given");
            }
            for s in statements {
                runtime.block_on(execute(ctx, &s, args.format))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        None => runtime.block_on(prompt(ctx, args.format)),
    }
}

/// Runs one statement and prints its result.
async fn execute(ctx: &SessionContext, sql: &str, format: Format) -> Result<()> {
    let df = ctx.sql(sql).await.map_err(engine_error)?;
    let schema: SchemaRef = Arc::new(df.schema().as_arrow().clone());
    let batches = df.collect().await.map_err(engine_error)?;
    let mut out = Vec::new();
    write_result(&mut out, &schema, &batches, format)?;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(&out).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// A DataFusion error as one message: its text already says what its
/// causes say, which a chain of causes would print again.
fn engine_error(e: DataFusionError) -> anyhow::Error {
    anyhow::anyhow!("{}", e.strip_backtrace())
}

/// Writes `batches` of `schema` in `format`.
fn write_result(
    out: &mut Vec<u8>,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    format: Format,
) -> Result<()> {
    use trace_sql::datafusion::arrow::{csv, json};
    match format {
        Format::Table => {
            let text = pretty_format_batches_with_schema(schema.clone(), batches)?;
            writeln!(out, "{text}")?;
        }
        Format::Csv => {
            let mut w = csv::WriterBuilder::new().with_header(true).build(&mut *out);
            if batches.is_empty() {
                w.write(&RecordBatch::new_empty(flat_schema(schema)))?;
            }
            for b in batches {
                w.write(&flatten(b)?)?;
            }
        }
        Format::Json => {
            let mut w = json::WriterBuilder::new()
                .with_explicit_nulls(true)
                .build::<_, json::writer::JsonArray>(&mut *out);
            for b in batches {
                w.write(b)?;
            }
            w.finish()?;
            out.push(b'\n');
        }
    }
    Ok(())
}

/// Whether CSV can hold a column of `t` as it is.
fn csv_native(t: &DataType) -> bool {
    !t.is_nested() && !matches!(t, DataType::Map(..) | DataType::Union(..))
}

/// `schema` with nested columns as text.
fn flat_schema(schema: &SchemaRef) -> SchemaRef {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| {
            if csv_native(f.data_type()) {
                f.as_ref().clone()
            } else {
                Field::new(f.name(), DataType::Utf8, true)
            }
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// `batch` with nested columns (lists, structs, maps) as text, which CSV
/// can hold.
fn flatten(batch: &RecordBatch) -> Result<RecordBatch> {
    let options = FormatOptions::default();
    let columns = batch
        .columns()
        .iter()
        .map(|c| -> Result<ArrayRef> {
            if csv_native(c.data_type()) {
                return Ok(c.clone());
            }
            let f = ArrayFormatter::try_new(c.as_ref(), &options)?;
            let text: StringArray = (0..c.len())
                .map(|i| (!c.is_null(i)).then(|| f.value(i).to_string()))
                .collect();
            Ok(Arc::new(text))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(flat_schema(&batch.schema()), columns)?)
}

/// Whether `sql` holds nothing but white space and comments.
fn is_blank(sql: &str) -> bool {
    sql.lines()
        .map(|l| l.split("--").next().unwrap_or(""))
        .all(|l| l.trim().is_empty())
}

/// The complete statements of `text` (each ended by a `;` outside quotes
/// and comments, which is left out) and what follows the last.
fn split_statements(text: &str) -> (Vec<String>, String) {
    let mut statements = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut comment = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if comment {
            current.push(c);
            comment = c != '\n';
            continue;
        }
        match quote {
            Some(q) => {
                current.push(c);
                if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    current.push(c);
                }
                '-' if chars.peek() == Some(&'-') => {
                    comment = true;
                    current.push(c);
                }
                ';' => {
                    if !is_blank(&current) {
                        statements.push(current.trim().to_owned());
                    }
                    current.clear();
                }
                _ => current.push(c),
            },
        }
    }
    (statements, current)
}

/// Reads statements and commands from standard input until its end or
/// `.quit`; fails at the end if a statement failed and the input is not a
/// terminal (a script).
async fn prompt(ctx: &SessionContext, format: Format) -> Result<ExitCode> {
    let stdin = std::io::stdin();
    let terminal = stdin.is_terminal();
    if terminal {
        println!("trace-cli query: statements end with ';'; .tables, .schema TABLE, .help, .quit");
    }
    let mut pending = String::new();
    let mut failures = 0u64;
    let mut lines = stdin.lock().lines();
    loop {
        if terminal {
            print!("{}", if is_blank(&pending) { "sql> " } else { "  -> " });
            std::io::stdout().flush()?;
        }
        let Some(line) = lines.next() else {
            break;
        };
        let line = line.context("cannot read standard input")?;
        if is_blank(&pending) && line.trim_start().starts_with('.') {
            pending.clear();
            match command(ctx, line.trim()).await {
                Ok(true) => continue,
                Ok(false) => break,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    failures += 1;
                    continue;
                }
            }
        }
        pending.push_str(&line);
        pending.push('\n');
        let (statements, rest) = split_statements(&pending);
        pending = rest;
        for s in statements {
            if let Err(e) = execute(ctx, &s, format).await {
                eprintln!("error: {e:#}");
                failures += 1;
            }
        }
    }
    if !is_blank(&pending)
        && let Err(e) = execute(ctx, pending.trim(), format).await
    {
        eprintln!("error: {e:#}");
        failures += 1;
    }
    if terminal {
        println!();
    }
    Ok(if failures > 0 && !terminal {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Runs a `.` command; false for `.quit`.
async fn command(ctx: &SessionContext, line: &str) -> Result<bool> {
    let mut words = line.split_whitespace();
    let mut out = String::new();
    use std::fmt::Write as _;
    match words.next().unwrap_or("") {
        ".quit" | ".exit" => return Ok(false),
        ".tables" => {
            for name in trace_sql::tables::names() {
                let _ = writeln!(out, "{name}");
            }
        }
        ".schema" => {
            let wanted: Vec<String> = match words.next() {
                Some(t) => vec![t.to_owned()],
                None => trace_sql::tables::names()
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
            };
            for name in wanted {
                let table = ctx
                    .table_provider(name.as_str())
                    .await
                    .map_err(|_| anyhow::anyhow!("no table {name:?} (.tables lists them)"))?;
                let _ = writeln!(out, "{name}:");
                for f in table.schema().fields() {
                    let null = if f.is_nullable() { "" } else { " NOT NULL" };
                    let _ = writeln!(out, "  {} {}{null}", f.name(), f.data_type());
                }
            }
        }
        ".help" => {
            out.push_str(
                "SQL statements end with ';' (DataFusion's dialect; docs/SQL.md describes the tables).\n\
                 .tables          list the tables\n\
                 .schema [TABLE]  the columns of a table (of every table)\n\
                 .quit            leave\n",
            );
        }
        other => bail!("unknown command {other:?} (.help lists them)"),
    }
    print!("{out}");
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_end_at_semicolons_outside_quotes_and_comments() {
        let (s, rest) = split_statements(
            "SELECT ';' AS a; -- a comment; still\nSELECT \"x;y\" FROM t;\n\n SELECT 3",
        );
        assert_eq!(
            s,
            [
                "SELECT ';' AS a",
                "-- a comment; still\nSELECT \"x;y\" FROM t"
            ]
        );
        assert_eq!(rest, "\n\n SELECT 3");
        let (s, rest) = split_statements(";;  ;");
        assert!(s.is_empty());
        assert!(is_blank(&rest));
        assert!(is_blank("  -- only a comment\n"));
        assert!(!is_blank("SELECT 1 -- and a comment"));
    }

    #[test]
    fn engine_errors_are_said_once() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let ctx = SessionContext::new();
        let e = runtime
            .block_on(execute(&ctx, "SELECT * FROM nowhere", Format::Csv))
            .unwrap_err();
        let text = format!("{e:#}");
        assert!(text.contains("nowhere"), "{text}");
        assert_eq!(text.matches("nowhere").count(), 1, "{text}");
        let e = runtime
            .block_on(execute(&ctx, "SELECT CAST('x' AS INT)", Format::Csv))
            .unwrap_err();
        let text = format!("{e:#}");
        assert_eq!(text.matches("'x'").count(), 1, "{text}");
    }

    #[test]
    fn results_in_every_format() {
        use trace_sql::datafusion::arrow::array::{ListArray, UInt64Array};
        use trace_sql::datafusion::arrow::datatypes::UInt64Type;
        let list = ListArray::from_iter_primitive::<UInt64Type, _, _>(vec![
            Some(vec![Some(1), Some(2)]),
            None,
        ]);
        let batch = RecordBatch::try_from_iter(vec![
            (
                "n",
                Arc::new(UInt64Array::from(vec![Some(7), None])) as ArrayRef,
            ),
            ("l", Arc::new(list) as ArrayRef),
        ])
        .unwrap();
        let schema = batch.schema();
        let text = |format| {
            let mut out = Vec::new();
            write_result(&mut out, &schema, std::slice::from_ref(&batch), format).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(text(Format::Csv), "n,l\n7,\"[1, 2]\"\n,\n");
        let json: serde_json::Value = serde_json::from_str(&text(Format::Json)).unwrap();
        assert_eq!(
            json,
            serde_json::json!([{"n": 7, "l": [1, 2]}, {"n": null, "l": null}])
        );
        assert!(
            text(Format::Table).contains("| 7 | [1, 2] |"),
            "{}",
            text(Format::Table)
        );
        let mut out = Vec::new();
        write_result(&mut out, &schema, &[], Format::Json).unwrap();
        assert_eq!(out, b"[]\n");
        let mut out = Vec::new();
        write_result(&mut out, &schema, &[], Format::Csv).unwrap();
        assert_eq!(out, b"n,l\n");
    }
}
