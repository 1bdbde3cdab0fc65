//! `trace-cli dump`: one human-readable line per record; the stack samples
//! of a blob of Perfetto packets as `perf script` prints them.

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use trace_common::fxt::read::{Reader, TraceState};
use trace_common::fxt::stream::RecordStream;
use trace_common::fxt::{Arg, ArgValue, LargeBlob, Record, StringRef, ThreadRef};
use trace_perfetto::{CpuMode, DecodedSample, PerfettoError, SampleReader};

use crate::samples::{self, Names};

/// Arguments of `trace-cli dump`.
#[derive(Args)]
pub struct DumpArgs {
    /// The FXT file to print (`-` for standard input).
    file: PathBuf,
}

pub fn run(args: DumpArgs) -> Result<ExitCode> {
    // Record by record: a dump of a file of any size takes the memory of
    // its largest record, not of the file.
    let mut records = RecordStream::new(crate::open_trace(&args.file)?);
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut state = TraceState::new();
    let mut names = Names::default();
    let mut samples = SampleReader::new();
    let mut errors = 0u64;
    let mut packet_errors = 0u64;
    while let Some(next) = records.next_record() {
        let (base, bytes) = match next {
            Ok((at, bytes)) => (at as usize, bytes),
            // A damaged place: said, and reading goes on where it can.
            Err(e) => {
                errors += 1;
                if writeln!(out, "{:#010x} ERROR {e}", e.offset).is_err() {
                    return Ok(ExitCode::SUCCESS);
                }
                continue;
            }
        };
        for item in Reader::new(bytes) {
            match item {
                Ok((at, record)) => {
                    let offset = base + at;
                    state.apply(&record);
                    names.apply(&state, &record);
                    let text = match samples::perfetto_payload(&record) {
                        Some(payload) => {
                            let (decoded, problems) = samples.feed(payload);
                            packet_errors += problems.len() as u64;
                            if decoded.is_empty() && problems.is_empty() {
                                format!("{offset:#010x} {}", describe(&state, &record))
                            } else {
                                describe_samples(offset, &names, &decoded, &problems)
                            }
                        }
                        None => format!("{offset:#010x} {}", describe(&state, &record)),
                    };
                    if writeln!(out, "{text}").is_err() {
                        // A closed pipe (e.g. `| head`) ends the dump quietly.
                        return Ok(ExitCode::SUCCESS);
                    }
                }
                Err(e) => {
                    errors += 1;
                    let _ = writeln!(out, "{:#010x} ERROR {}", base + e.offset, e.kind);
                }
            }
        }
    }
    out.flush().ok();
    if errors > 0 {
        eprintln!(
            "trace-cli: {errors} malformed record(s) in {}",
            args.file.display()
        );
    }
    if packet_errors > 0 {
        eprintln!(
            "trace-cli: {packet_errors} problem(s) in the Perfetto packets of {}",
            args.file.display()
        );
    }
    if errors > 0 || packet_errors > 0 {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The lines of the stack samples of a Perfetto blob at `offset`, as
/// `perf script` prints samples: one line for the sample (time, timebase,
/// process and thread, CPU, mode, count), then its frames, leaf first, one
/// per indented line (`    function (file)`); then the packets' problems.
pub fn describe_samples(
    offset: usize,
    names: &Names,
    decoded: &[DecodedSample],
    problems: &[PerfettoError],
) -> String {
    let mut out = String::new();
    for s in decoded {
        if !out.is_empty() {
            out.push('\n');
        }
        let _ = write!(
            out,
            "{offset:#010x} {}.{:09} sample {} pid={}",
            s.ts / 1_000_000_000,
            s.ts % 1_000_000_000,
            s.timebase,
            s.pid
        );
        if let Some(n) = names.process(s.pid) {
            let _ = write!(out, " {n:?}");
        }
        let _ = write!(out, " tid={}", s.tid);
        if let Some(n) = names.thread(s.tid) {
            let _ = write!(out, " {n:?}");
        }
        let mode = match s.cpu_mode {
            CpuMode::User => "user",
            CpuMode::Kernel => "kernel",
            CpuMode::Unknown => "unknown",
        };
        let _ = write!(out, " cpu={} mode={mode}", s.cpu);
        if let Some(n) = s.timebase_count {
            let unit = if samples::counts_ns(&s.timebase) {
                "ns"
            } else {
                ""
            };
            let _ = write!(out, " count={n}{unit}");
        }
        for f in &s.frames {
            let mapping = if f.mapping_path.is_empty() {
                "[unknown]"
            } else {
                &f.mapping_path
            };
            let function = if f.function.is_empty() {
                "[unknown]"
            } else {
                &f.function
            };
            // As `perf script` prints a frame: its address (here relative to
            // its file, as `addr2line -e FILE` takes it), name and file.
            let _ = write!(out, "\n    {:16x} {function} ({mapping})", f.rel_pc);
        }
    }
    for e in problems {
        if !out.is_empty() {
            out.push('\n');
        }
        let _ = write!(out, "{offset:#010x} ERROR Perfetto packets: {e}");
    }
    out
}

/// One line describing `record`, with references resolved through `state`.
pub fn describe(state: &TraceState, record: &Record<'_>) -> String {
    let s = |r: &StringRef<'_>| -> String {
        match state.string(r) {
            Some(v) => format!("{v:?}"),
            None => format!("<unknown string {r:?}>"),
        }
    };
    let t = |r: ThreadRef| -> String {
        match state.thread(r) {
            Some((p, t)) => format!("{p}/{t}"),
            None => format!("<unknown thread {r:?}>"),
        }
    };
    let ts = |ticks: u64| -> String {
        let ns = state.ticks_to_ns(ticks);
        format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
    };
    let args = |args: &[Arg<'_>]| -> String {
        let mut out = String::new();
        for a in args {
            let _ = write!(out, " {}=", state.string(&a.name).unwrap_or("?"));
            let _ = match &a.value {
                ArgValue::Null => write!(out, "null"),
                ArgValue::Int32(v) => write!(out, "{v}"),
                ArgValue::Uint32(v) => write!(out, "{v}u"),
                ArgValue::Int64(v) => write!(out, "{v}"),
                ArgValue::Uint64(v) => write!(out, "{v}u"),
                ArgValue::Double(v) => write!(out, "{v}"),
                ArgValue::String(r) => write!(out, "{}", s(r)),
                ArgValue::Pointer(v) => write!(out, "{v:#x}"),
                ArgValue::Koid(v) => write!(out, "koid:{v}"),
                ArgValue::Bool(v) => write!(out, "{v}"),
                ArgValue::Blob(b) => write!(out, "<blob {} bytes>", b.len()),
            };
        }
        out
    };
    match record {
        Record::Magic => "magic".into(),
        Record::ProviderInfo { id, name } => format!("provider_info id={id} name={name:?}"),
        Record::ProviderSection { id } => format!("provider_section id={id}"),
        Record::ProviderEvent { id, event } => {
            let what = if *event == 0 {
                "buffer_overflow (records were dropped)".to_string()
            } else {
                format!("event {event}")
            };
            format!("provider_event id={id} {what}")
        }
        Record::TraceInfo { info_type, data } => {
            format!("trace_info type={info_type} data={data:#x}")
        }
        Record::Initialization { ticks_per_second } => {
            format!("initialization ticks_per_second={ticks_per_second}")
        }
        Record::String { index, value } => format!("string #{index} = {value:?}"),
        Record::Thread {
            index,
            process,
            thread,
        } => format!("thread #{index} = {process}/{thread}"),
        Record::Event {
            ts: when,
            thread,
            category,
            name,
            args: a,
            kind,
        } => format!(
            "{} event {kind:?} thread={} cat={} name={}{}",
            ts(*when),
            t(*thread),
            s(category),
            s(name),
            args(a)
        ),
        Record::Blob {
            name,
            blob_type,
            payload,
        } => format!(
            "blob name={} type={blob_type} {} bytes",
            s(name),
            payload.len()
        ),
        Record::UserspaceObject {
            pointer,
            process,
            name,
            args: a,
        } => format!(
            "userspace_object ptr={pointer:#x} process={} name={}{}",
            t(*process),
            s(name),
            args(a)
        ),
        Record::KernelObject {
            koid,
            obj_type,
            name,
            args: a,
        } => {
            let kind = match *obj_type {
                1 => "process".to_string(),
                2 => "thread".to_string(),
                o => format!("type{o}"),
            };
            format!(
                "kernel_object {kind} koid={koid} name={}{}",
                s(name),
                args(a)
            )
        }
        Record::ContextSwitch {
            ts: when,
            cpu,
            outgoing_state,
            outgoing_tid,
            incoming_tid,
            args: a,
        } => format!(
            "{} context_switch cpu={cpu} out={outgoing_tid} state={outgoing_state} in={incoming_tid}{}",
            ts(*when),
            args(a)
        ),
        Record::ThreadWakeup {
            ts: when,
            cpu,
            tid,
            args: a,
        } => format!("{} wakeup cpu={cpu} tid={tid}{}", ts(*when), args(a)),
        Record::LegacyContextSwitch {
            ts: when,
            cpu,
            outgoing_state,
            outgoing_thread,
            incoming_thread,
            outgoing_priority,
            incoming_priority,
        } => format!(
            "{} legacy_context_switch cpu={cpu} out={} state={outgoing_state} prio={outgoing_priority} in={} prio={incoming_priority}",
            ts(*when),
            t(*outgoing_thread),
            t(*incoming_thread)
        ),
        Record::Log {
            ts: when,
            thread,
            message,
        } => format!("{} log thread={} {message:?}", ts(*when), t(*thread)),
        Record::LargeBlob(LargeBlob::Event {
            category,
            name,
            ts: when,
            thread,
            args: a,
            payload,
        }) => format!(
            "{} large_blob event cat={} name={} thread={} {} bytes{}",
            ts(*when),
            s(category),
            s(name),
            t(*thread),
            payload.len(),
            args(a)
        ),
        Record::LargeBlob(LargeBlob::Attachment {
            category,
            name,
            payload,
        }) => format!(
            "large_blob attachment cat={} name={} {} bytes",
            s(category),
            s(name),
            payload.len()
        ),
        Record::Unknown { record_type, bytes } => {
            format!("unknown record type={record_type} {} bytes", bytes.len())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample prints as a line, then its frames leaf first, indented.
    #[test]
    fn samples_print_with_their_frames() {
        let data = crate::samples::testing::fxt(
            crate::samples::OFF_CPU,
            &[(&["main", "a"], 1)],
            Some(1_500),
        );
        let mut state = TraceState::new();
        let mut names = Names::default();
        let mut reader = SampleReader::new();
        let mut lines = Vec::new();
        for item in Reader::new(&data) {
            let (offset, record) = item.unwrap();
            state.apply(&record);
            names.apply(&state, &record);
            if let Some(payload) = samples::perfetto_payload(&record) {
                let (decoded, problems) = reader.feed(payload);
                lines.push(describe_samples(offset, &names, &decoded, &problems));
            }
        }
        let text = lines.join("\n");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            lines[0].ends_with(
                " 1.000000000 sample off-cpu pid=100 \"spin\" tid=101 \"worker\" cpu=1 mode=user count=1500ns"
            ),
            "{text}"
        );
        assert_eq!(
            &lines[1..],
            [
                "                 100 a (/bin/prog)",
                "                 200 main (/bin/prog)"
            ]
        );
        // A payload that does not decode says so.
        let bad = describe_samples(0x40, &names, &[], &reader.feed(&[0x0a, 0x7f, 0x01]).1);
        assert!(
            bad.starts_with("0x00000040 ERROR Perfetto packets: "),
            "{bad}"
        );
    }
}
