//! `trace-cli convert`: FXT to Chrome trace-event JSON.
//!
//! Events land on their thread (`pid`/`tid`); process and thread names become
//! metadata events. The JSON format has no scheduler view, so context switches
//! become complete events on one track per CPU, under a pseudo-process
//! "CPUs", each slice named after the thread that ran; wake-ups become
//! instants on the woken thread.
//!
//! Stack samples (the Perfetto packets of blobs of type 3) go where Chrome's
//! format keeps samples: the top-level `"stackFrames"` (id → `name`,
//! `category` (the file the function is in), `parent`), each frame interned
//! by its parent and name, and `"samples"` (`cpu`, `pid`, `tid`, `ts`,
//! `name` (the timebase), `sf` (the leaf frame), `weight` (ns for off-CPU
//! and wakeup samples, else 1)).
//!
//! The file is read as a stream: what is held is the names of threads, the
//! distinct stack frames, and a window of context switches per CPU
//! ([`cpus`]); the samples wait in a temporary file ([`stacks`]).

mod cpus;
mod stacks;

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use serde_json::{Map, Value, json};
use trace_common::fxt::read::{InstantScope, TraceState, instant_scope};
use trace_common::fxt::{Arg, ArgValue, EventKind, Record, ThreadRef, obj_type};

use crate::damage::{DamageArgs, Skipped};
use crate::samples;

/// The pid of the pseudo-process holding one track per CPU.
const CPU_PSEUDO_PID: u64 = 0x7fff_fff0;

/// Arguments of `trace-cli convert`.
#[derive(Args)]
pub struct ConvertArgs {
    /// The FXT file to convert (`-` for standard input).
    file: PathBuf,
    /// Where to write the JSON (`-` for standard output).
    #[arg(short, long)]
    output: PathBuf,
    #[command(flatten)]
    damage: DamageArgs,
}

pub fn run(args: ConvertArgs) -> Result<ExitCode> {
    let input = crate::open_trace(&args.file)?;
    let out: Box<dyn Write> = if args.output.as_os_str() == "-" {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(
            File::create(&args.output)
                .with_context(|| format!("cannot create {}", args.output.display()))?,
        )
    };
    let mut out = BufWriter::new(out);
    let stats = convert(input, &mut out).context("converting to JSON")?;
    out.flush().context("writing the JSON output")?;
    if args.output.as_os_str() != "-" {
        let samples = if stats.samples > 0 {
            format!(", {} samples", stats.samples)
        } else {
            String::new()
        };
        eprintln!(
            "trace-cli: {} JSON events{samples} -> {}",
            stats.events,
            args.output.display()
        );
    }
    if stats.late_switches > 0 {
        eprintln!(
            "trace-cli: {} context switches came after later ones of their CPU by more than \
             the reorder window and are left out of the CPU tracks",
            stats.late_switches
        );
    }
    let skipped = Skipped {
        records: stats.errors,
        packets: stats.packet_errors,
    };
    args.damage.warn(skipped, &args.file, None);
    Ok(args.damage.status(skipped))
}

/// What a conversion did.
pub struct ConvertStats {
    /// JSON events written.
    pub events: u64,
    /// Malformed records skipped.
    pub errors: u64,
    /// Stack samples written.
    pub samples: u64,
    /// Problems in the Perfetto packets of blob records (samples that did
    /// not decode are left out).
    pub packet_errors: u64,
    /// Context switches too far out of time order to be drawn.
    pub late_switches: u64,
}

#[derive(Default)]
struct Converter {
    first: bool,
    events: u64,
    /// Thread koid → process koid, from thread kernel objects.
    thread_process: HashMap<u64, u64>,
    /// Thread koid → name.
    thread_names: HashMap<u64, String>,
    /// The CPU tracks.
    cpus: cpus::CpuTracks,
    /// The stack samples.
    samples: stacks::Samples,
}

impl Converter {
    /// A context switch to `incoming` on `cpu` at `ts` (ns).
    fn switch(
        &mut self,
        out: &mut dyn Write,
        cpu: u16,
        ts: u64,
        incoming: u64,
    ) -> std::io::Result<()> {
        if self.cpus.is_empty() {
            self.emit(
                out,
                json!({"ph":"M","name":"process_name","pid":CPU_PSEUDO_PID,"tid":0,"args":{"name":"CPUs"}}),
            )?;
        }
        if !self.cpus.known(cpu) {
            self.emit(
                out,
                json!({"ph":"M","name":"thread_name","pid":CPU_PSEUDO_PID,"tid":cpu,"args":{"name":format!("CPU {cpu}")}}),
            )?;
            self.emit(
                out,
                json!({"ph":"M","name":"thread_sort_index","pid":CPU_PSEUDO_PID,"tid":cpu,"args":{"sort_index":cpu}}),
            )?;
        }
        let mut cpus = std::mem::take(&mut self.cpus);
        let placed = cpus.switch(cpu, ts, incoming, &mut |s| self.cpu_slice(out, s));
        self.cpus = cpus;
        placed
    }

    /// A thread's time on a CPU, named after the thread.
    fn cpu_slice(&mut self, out: &mut dyn Write, s: cpus::CpuSlice) -> std::io::Result<()> {
        let name = match self.thread_names.get(&s.tid) {
            Some(n) => format!("{n} {}", s.tid),
            None => format!("{}", s.tid),
        };
        let pid = self.thread_process.get(&s.tid).copied().unwrap_or(0);
        self.emit(
            out,
            json!({"ph":"X","name":name,"cat":"kernel:sched","pid":CPU_PSEUDO_PID,"tid":s.cpu,
                   "ts":micros(s.start),"dur":micros(s.end - s.start),"args":{"tid":s.tid,"pid":pid}}),
        )
    }

    fn emit(&mut self, out: &mut dyn Write, event: Value) -> std::io::Result<()> {
        if !self.first {
            out.write_all(b",\n")?;
        }
        self.first = false;
        serde_json::to_writer(&mut *out, &event)?;
        self.events += 1;
        Ok(())
    }
}

/// Converts the FXT stream `input` into Chrome JSON on `out`; an error is
/// one of reading `input` or of writing `out`.
pub fn convert(input: impl Read, out: &mut dyn Write) -> std::io::Result<ConvertStats> {
    let mut state = TraceState::new();
    let mut c = Converter {
        first: true,
        ..Default::default()
    };
    let mut errors = 0;
    out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
    crate::records::each_record(input, &mut errors, |_, raw, record| {
        state.apply(&record);
        if let Some(payload) = samples::perfetto_payload(&record) {
            let (decoded, problems) = c.samples.reader.feed(payload);
            c.samples.errors += problems.len() as u64;
            for s in &decoded {
                c.samples.add(s)?;
            }
            return Ok(());
        }
        match &record {
            Record::KernelObject {
                koid,
                obj_type: ty,
                name,
                args,
            } => {
                let name = state.string(name).unwrap_or("").to_string();
                if *ty == obj_type::PROCESS {
                    c.emit(
                        out,
                        json!({"ph":"M","name":"process_name","pid":koid,"tid":koid,"args":{"name":name}}),
                    )?;
                } else if *ty == obj_type::THREAD {
                    let pid = state.process_of_thread(args).unwrap_or(0);
                    c.thread_process.insert(*koid, pid);
                    c.thread_names.insert(*koid, name.clone());
                    c.emit(
                        out,
                        json!({"ph":"M","name":"thread_name","pid":pid,"tid":koid,"args":{"name":name}}),
                    )?;
                }
            }
            Record::Event {
                ts,
                thread,
                category,
                name,
                args,
                kind,
            } => {
                let (pid, tid) = resolve_thread(&state, *thread);
                let mut ev = Map::new();
                ev.insert("name".into(), state.string(name).unwrap_or("").into());
                ev.insert("cat".into(), state.string(category).unwrap_or("").into());
                ev.insert("pid".into(), pid.into());
                ev.insert("tid".into(), tid.into());
                ev.insert("ts".into(), micros(state.ticks_to_ns(*ts)));
                let mut json_args = args_json(&state, args);
                let ph = match kind {
                    EventKind::Instant => {
                        let scope = match instant_scope(&record, raw) {
                            Some(InstantScope::Process) => "p",
                            Some(InstantScope::Global) => "g",
                            None => "t",
                        };
                        ev.insert("s".into(), scope.into());
                        "i"
                    }
                    EventKind::Counter { id } => {
                        if *id != 0 {
                            ev.insert("id".into(), id.to_string().into());
                        }
                        "C"
                    }
                    EventKind::DurationBegin => "B",
                    EventKind::DurationEnd => "E",
                    EventKind::DurationComplete { end_ts } => {
                        let start = state.ticks_to_ns(*ts);
                        let end = state.ticks_to_ns(*end_ts);
                        ev.insert("dur".into(), micros(end.saturating_sub(start)));
                        "X"
                    }
                    EventKind::AsyncBegin { id } => async_id(&mut ev, *id, "b"),
                    EventKind::AsyncInstant { id } => async_id(&mut ev, *id, "n"),
                    EventKind::AsyncEnd { id } => async_id(&mut ev, *id, "e"),
                    EventKind::FlowBegin { id } => flow_id(&mut ev, *id, "s"),
                    EventKind::FlowStep { id } => flow_id(&mut ev, *id, "t"),
                    EventKind::FlowEnd { id } => flow_id(&mut ev, *id, "f"),
                };
                ev.insert("ph".into(), ph.into());
                if !json_args.is_empty() {
                    ev.insert("args".into(), Value::Object(std::mem::take(&mut json_args)));
                }
                c.emit(out, Value::Object(ev))?;
            }
            Record::ContextSwitch {
                ts,
                cpu,
                outgoing_tid: _,
                incoming_tid,
                ..
            } => c.switch(out, *cpu, state.ticks_to_ns(*ts), *incoming_tid)?,
            Record::LegacyContextSwitch {
                ts,
                cpu,
                outgoing_thread: _,
                incoming_thread,
                ..
            } => {
                let in_tid = resolve_thread(&state, *incoming_thread).1;
                c.switch(out, u16::from(*cpu), state.ticks_to_ns(*ts), in_tid)?;
            }
            Record::ThreadWakeup { ts, cpu, tid, args } => {
                let pid = c.thread_process.get(tid).copied().unwrap_or(0);
                let mut a = args_json(&state, args);
                a.insert("cpu".into(), (*cpu).into());
                c.emit(
                    out,
                    json!({"ph":"i","s":"t","name":"wakeup","cat":"kernel:sched","pid":pid,"tid":tid,
                           "ts":micros(state.ticks_to_ns(*ts)),"args":a}),
                )?;
            }
            Record::Log {
                ts,
                thread,
                message,
            } => {
                let (pid, tid) = resolve_thread(&state, *thread);
                c.emit(
                    out,
                    json!({"ph":"i","s":"t","name":"log","cat":"log","pid":pid,"tid":tid,
                           "ts":micros(state.ticks_to_ns(*ts)),"args":{"message":message}}),
                )?;
            }
            _ => {}
        }
        Ok(())
    })?;
    let mut cpus = std::mem::take(&mut c.cpus);
    cpus.finish(&mut |s| c.cpu_slice(out, s))?;
    out.write_all(b"\n]")?;
    c.samples.write(out)?;
    out.write_all(b"}\n")?;
    Ok(ConvertStats {
        events: c.events,
        errors,
        samples: c.samples.count,
        packet_errors: c.samples.errors,
        late_switches: cpus.late,
    })
}

fn async_id(ev: &mut Map<String, Value>, id: u64, ph: &'static str) -> &'static str {
    ev.insert("id".into(), format!("{id:#x}").into());
    ph
}

fn flow_id(ev: &mut Map<String, Value>, id: u64, ph: &'static str) -> &'static str {
    ev.insert("id".into(), format!("{id:#x}").into());
    if ph != "s" {
        ev.insert("bp".into(), "e".into());
    }
    ph
}

fn resolve_thread(state: &TraceState, r: ThreadRef) -> (u64, u64) {
    state.thread(r).unwrap_or((0, 0))
}

/// Nanoseconds as the fractional microseconds Chrome JSON expects.
fn micros(ns: u64) -> Value {
    let v = ns as f64 / 1000.0;
    serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
}

fn args_json(state: &TraceState, args: &[Arg<'_>]) -> Map<String, Value> {
    let mut m = Map::new();
    for a in args {
        let key = state.string(&a.name).unwrap_or("?").to_string();
        let v = match &a.value {
            ArgValue::Null => Value::Null,
            ArgValue::Int32(v) => (*v).into(),
            ArgValue::Uint32(v) => (*v).into(),
            ArgValue::Int64(v) => (*v).into(),
            ArgValue::Uint64(v) => (*v).into(),
            ArgValue::Double(v) => {
                serde_json::Number::from_f64(*v).map_or(Value::Null, Value::Number)
            }
            ArgValue::String(s) => state.string(s).unwrap_or("").into(),
            ArgValue::Pointer(p) => format!("{p:#x}").into(),
            ArgValue::Koid(k) => (*k).into(),
            ArgValue::Bool(b) => (*b).into(),
            ArgValue::Blob(b) => format!("<{} bytes>", b.len()).into(),
        };
        m.insert(key, v);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_common::fxt::write::encode;
    use trace_common::fxt::{StringRef, ThreadRef};

    /// Instants keep their scope (Perfetto ignores it; Chrome JSON has it).
    #[test]
    fn instants_keep_their_scope() {
        let mut data = Vec::new();
        for r in [
            Record::Magic,
            Record::ProviderInfo {
                id: 1,
                name: "p".into(),
            },
            Record::Initialization {
                ticks_per_second: 1_000_000_000,
            },
        ] {
            encode(&r, &mut data).unwrap();
        }
        for (name, scope) in [
            ("thread", None),
            ("process", Some(1u64)),
            ("global", Some(2)),
        ] {
            let at = data.len();
            encode(
                &Record::Event {
                    ts: 1_000,
                    thread: ThreadRef::Inline {
                        process: 1,
                        thread: 2,
                    },
                    category: StringRef::inline("c"),
                    name: StringRef::inline(name),
                    args: vec![].into(),
                    kind: EventKind::Instant,
                },
                &mut data,
            )
            .unwrap();
            if let Some(scope) = scope {
                data.extend(scope.to_le_bytes());
                let header = u64::from_le_bytes(data[at..at + 8].try_into().unwrap()) + (1 << 4);
                data[at..at + 8].copy_from_slice(&header.to_le_bytes());
            }
        }
        let mut out = Vec::new();
        convert(&data[..], &mut out).unwrap();
        let json: Value = serde_json::from_slice(&out).unwrap();
        let scopes: Vec<(String, String)> = json["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "i")
            .map(|e| {
                (
                    e["name"].as_str().unwrap().to_owned(),
                    e["s"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            scopes,
            [
                ("thread".to_owned(), "t".to_owned()),
                ("process".to_owned(), "p".to_owned()),
                ("global".to_owned(), "g".to_owned())
            ]
        );
    }

    /// Samples become Chrome's `stackFrames` (each frame once per parent)
    /// and `samples` (leaf frame, time in µs, timebase, weight).
    #[test]
    fn samples_become_stack_frames_and_samples() {
        let data = crate::samples::testing::fxt(
            crate::samples::OFF_CPU,
            &[(&["main", "a", "b"], 2), (&["main", "d"], 1)],
            Some(2_000),
        );
        let mut out = Vec::new();
        let stats = convert(&data[..], &mut out).unwrap();
        assert_eq!((stats.samples, stats.packet_errors), (3, 0));
        let json: Value = serde_json::from_slice(&out).unwrap();
        let frames = json["stackFrames"].as_object().unwrap();
        // main, a, b, d: each once.
        assert_eq!(frames.len(), 4, "{frames:?}");
        let frame = |id: &Value| &frames[&id.as_u64().unwrap().to_string()];
        let stack = |leaf: &Value| {
            let mut names = Vec::new();
            let mut f = frame(leaf);
            loop {
                assert_eq!(f["category"], "/bin/prog");
                names.push(f["name"].as_str().unwrap().to_owned());
                match f.get("parent") {
                    Some(p) => f = frame(p),
                    None => break,
                }
            }
            names.join(";")
        };
        let samples = json["samples"].as_array().unwrap();
        let got: Vec<(String, u64, f64, String, u64)> = samples
            .iter()
            .map(|s| {
                assert_eq!((s["pid"].as_u64(), s["cpu"].as_u64()), (Some(100), Some(1)));
                (
                    stack(&s["sf"]),
                    s["tid"].as_u64().unwrap(),
                    s["ts"].as_f64().unwrap(),
                    s["name"].as_str().unwrap().to_owned(),
                    s["weight"].as_u64().unwrap(),
                )
            })
            .collect();
        let off = || "off-cpu".to_owned();
        assert_eq!(
            got,
            [
                ("b;a;main".to_owned(), 101, 1_000_000.0, off(), 2_000),
                ("b;a;main".to_owned(), 101, 1_001_000.0, off(), 2_000),
                ("d;main".to_owned(), 101, 1_002_000.0, off(), 2_000),
            ]
        );
        // The events are still there (the thread's name).
        assert!(
            json["traceEvents"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["name"] == "thread_name")
        );
    }

    /// Without samples the JSON has no `stackFrames` or `samples`.
    #[test]
    fn no_samples_no_sample_keys() {
        let mut data = Vec::new();
        encode(&Record::Magic, &mut data).unwrap();
        let mut out = Vec::new();
        convert(&data[..], &mut out).unwrap();
        let json: Value = serde_json::from_slice(&out).unwrap();
        assert!(json.get("stackFrames").is_none() && json.get("samples").is_none());
    }
}
