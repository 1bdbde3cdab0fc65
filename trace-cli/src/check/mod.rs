//! `trace-cli check`: reads any FXT file as Perfetto's importer does and
//! reports what it imports, what it ignores, and every record that would be
//! lost or drawn wrongly.
//!
//! The model follows google/perfetto's `src/trace_processor/importers/`:
//! `fuchsia/fuchsia_trace_tokenizer.cc` (file order: framing, providers,
//! string and thread tables, kernel objects; [`tokenizer`]), then
//! `fuchsia/fuchsia_trace_parser.cc` in timestamp order ([`parser`]), with
//! `common/slice_tracker.cc` ([`slices`]), the legacy async tracks of
//! `common/track_compressor.cc`, `common/flow_tracker.cc`, and the
//! scheduling state of the FXT parser ([`sched`]), and the rows
//! `common/process_tracker.cc` files threads in ([`processes`]). Each
//! finding names the rule it stands for ([`findings::Kind::rule`]);
//! docs/ARCHITECTURE.md lists them. Blobs of Perfetto packets (blob type 3) are read in file
//! order with `trace_perfetto::SampleReader`, as the importer's protobuf
//! reader reads them: what does not decode or resolve is a finding, and the
//! stack samples are counted by timebase.

mod findings;
mod items;
mod order;
mod parser;
mod processes;
mod sched;
mod slices;
mod tokenizer;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::Args;

pub use findings::{Findings, Severity};
use tokenizer::{Symbols, Tokenized};

/// Arguments of `trace-cli check`.
#[derive(Args)]
pub struct CheckArgs {
    /// The FXT file to check (`-` for standard input).
    file: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Examples shown per kind of finding.
    #[arg(long, default_value_t = 5, value_name = "N")]
    examples: usize,
}

/// Checks the file; exit status 1 when it has violations.
pub fn run(args: CheckArgs) -> Result<ExitCode> {
    let input = crate::open_trace(&args.file)?;
    let report = analyze(input, args.examples)
        .with_context(|| format!("checking {}", args.file.display()))?;
    let text = if args.json {
        let mut s = serde_json::to_string_pretty(&report.json(&args.file.to_string_lossy()))?;
        s.push('\n');
        s
    } else {
        report.text(&args.file.to_string_lossy())
    };
    crate::print_all(text.as_bytes())?;
    Ok(if report.findings.violations() > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// What a check found.
pub struct Report {
    tok: Tokenized,
    findings: Findings,
    /// The earliest and latest timestamps of the events.
    range: Option<(i64, i64)>,
}

/// Checks the FXT stream `input`, keeping `examples` examples per kind of
/// finding. The file is read once, in file order as the importer's
/// tokenizer reads it; its events are then parsed in time order
/// ([`order`]). An error is one of reading `input` or the sorted events.
pub fn analyze(input: impl std::io::Read, examples: usize) -> std::io::Result<Report> {
    let mut findings = Findings::new(examples);
    let mut tok = tokenizer::tokenize(input, &mut findings)?;
    let items = std::mem::take(&mut tok.items);
    let range = items.range();
    let names = Names {
        symbols: &tok.symbols,
        thread_names: &tok.thread_names,
        process_names: &tok.process_names,
        thread_pid: &tok.thread_pid,
    };
    // Where threads land is checked beside the parser, on the same items;
    // its findings follow the parser's, as when it ran after it.
    let mut placed = Findings::new(examples);
    let mut threads = processes::start(&tok, &names, &mut placed);
    parser::parse(items.into_sorted(), &tok, names, &mut findings, |item| {
        threads.item(item)
    })?;
    threads.finish();
    findings.append(placed);
    Ok(Report {
        tok,
        findings,
        range,
    })
}

impl Report {
    fn time_range(&self) -> Option<(i64, i64)> {
        self.range
    }

    fn sorted(map: &HashMap<&'static str, u64>) -> Vec<(&'static str, u64)> {
        let mut v: Vec<_> = map.iter().map(|(k, n)| (*k, *n)).collect();
        v.sort();
        v
    }

    /// The report for a terminal.
    pub fn text(&self, file: &str) -> String {
        let mut out = String::new();
        let c = &self.tok.counts;
        let _ = writeln!(out, "{file}: {} records, {} bytes", c.records, c.bytes);
        if !self.tok.providers.is_empty() {
            let names: Vec<String> = self
                .tok
                .providers
                .iter()
                .map(|(id, n)| format!("{n:?} (#{id})"))
                .collect();
            let _ = writeln!(out, "providers: {}", names.join(", "));
        }
        if let Some((a, b)) = self.time_range() {
            let _ = writeln!(
                out,
                "time: {} to {} ({:.3} s)",
                fmt_ts(a),
                fmt_ts(b),
                (b - a) as f64 / 1e9
            );
        }
        let _ = writeln!(out, "\nImported by Perfetto:");
        for (what, n) in Self::sorted(&c.imported) {
            let _ = writeln!(out, "  {n:>10}  {what}");
        }
        if self.tok.perfetto_bytes > 0 {
            let _ = writeln!(
                out,
                "  {:>10}  bytes of embedded Perfetto packets",
                self.tok.perfetto_bytes
            );
        }
        if !self.tok.samples.is_empty() {
            let _ = writeln!(out, "\nStack samples in the Perfetto packets, by timebase:");
            for (timebase, n) in &self.tok.samples {
                let _ = writeln!(out, "  {n:>10}  {timebase}");
            }
        }
        if !c.ignored.is_empty() {
            let _ = writeln!(out, "\nIgnored by Perfetto:");
            for (what, n) in Self::sorted(&c.ignored) {
                let _ = writeln!(out, "  {n:>10}  {what}");
            }
        }
        if c.dropped > 0 {
            let _ = writeln!(
                out,
                "\nDropped by Perfetto: {} records (see below)",
                c.dropped
            );
        }
        for severity in [Severity::Violation, Severity::Warning] {
            let found: Vec<_> = self
                .findings
                .iter()
                .filter(|(k, _, _)| k.severity() == severity)
                .collect();
            if found.is_empty() {
                continue;
            }
            let _ = writeln!(
                out,
                "\n{}:",
                match severity {
                    Severity::Violation => "Violations (lost or misdrawn in Perfetto)",
                    Severity::Warning => "Warnings (shown differently from what the file says)",
                }
            );
            for (kind, n, examples) in found {
                let _ = writeln!(out, "  {n:>10}  {} [{}]", kind.title(), kind.id());
                let _ = writeln!(out, "              rule: {}", kind.rule());
                for e in examples {
                    let at = match e.ts {
                        Some(ts) => format!("{:#010x} {}", e.offset, fmt_ts(ts)),
                        None => format!("{:#010x}", e.offset),
                    };
                    if e.detail.is_empty() {
                        let _ = writeln!(out, "              {at}");
                    } else {
                        let _ = writeln!(out, "              {at}: {}", e.detail);
                    }
                }
            }
        }
        let v = self.findings.violations();
        let _ = writeln!(
            out,
            "\n{}",
            if v == 0 {
                "No violations.".to_owned()
            } else {
                format!("{v} violations.")
            }
        );
        out
    }

    /// The report as JSON.
    pub fn json(&self, file: &str) -> serde_json::Value {
        use serde_json::json;
        let c = &self.tok.counts;
        let findings = |severity: Severity| -> Vec<serde_json::Value> {
            self.findings
                .iter()
                .filter(|(k, _, _)| k.severity() == severity)
                .map(|(kind, n, examples)| {
                    json!({
                        "kind": kind.id(),
                        "count": n,
                        "title": kind.title(),
                        "rule": kind.rule(),
                        "examples": examples.iter().map(|e| json!({
                            "offset": e.offset,
                            "ts": e.ts,
                            "detail": e.detail,
                        })).collect::<Vec<_>>(),
                    })
                })
                .collect()
        };
        let range = self.time_range();
        json!({
            "file": file,
            "records": c.records,
            "bytes": c.bytes,
            "providers": self.tok.providers.iter().map(|(id, n)| json!({"id": id, "name": n})).collect::<Vec<_>>(),
            "first_ts": range.map(|r| r.0),
            "last_ts": range.map(|r| r.1),
            "imported": c.imported,
            "ignored": c.ignored,
            "dropped": c.dropped,
            "perfetto_packet_bytes": self.tok.perfetto_bytes,
            "samples": self.tok.samples,
            "violations": findings(Severity::Violation),
            "warnings": findings(Severity::Warning),
            "violation_count": self.findings.violations(),
        })
    }
}

/// Nanoseconds as seconds with nine decimals.
pub fn fmt_ts(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let ns = ns.unsigned_abs();
    format!("{sign}{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// Names of threads and processes, for the examples.
#[derive(Clone, Copy)]
pub struct Names<'a> {
    symbols: &'a Symbols,
    thread_names: &'a HashMap<u64, String>,
    process_names: &'a HashMap<u64, String>,
    thread_pid: &'a HashMap<u64, u64>,
}

impl Names<'_> {
    /// `thread 69 "tokio-rt-worker" of process 1 "process_api"`.
    fn thread(&self, tid: u64) -> String {
        let mut s = format!("thread {tid}");
        if let Some(n) = self.thread_names.get(&tid) {
            let _ = write!(s, " {n:?}");
        }
        if let Some(&pid) = self.thread_pid.get(&tid) {
            let _ = write!(s, " of {}", self.process(pid));
        }
        s
    }

    /// `process 1 "process_api"`.
    fn process(&self, pid: u64) -> String {
        match self.process_names.get(&pid) {
            Some(n) => format!("process {pid} {n:?}"),
            None => format!("process {pid}"),
        }
    }
}
