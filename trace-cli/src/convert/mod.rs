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

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use serde_json::{Map, Value, json};
use trace_common::fxt::read::{InstantScope, Reader, TraceState, instant_scope};
use trace_common::fxt::{Arg, ArgValue, EventKind, Record, ThreadRef, obj_type};
use trace_perfetto::{DecodedSample, SampleReader};

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
    let data = crate::read_trace(&args.file)?;
    let out: Box<dyn Write> = if args.output.as_os_str() == "-" {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(
            File::create(&args.output)
                .with_context(|| format!("cannot create {}", args.output.display()))?,
        )
    };
    let mut out = BufWriter::new(out);
    let stats = convert(&data, &mut out).context("writing the JSON output")?;
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
}

#[derive(Default)]
struct Converter {
    first: bool,
    events: u64,
    /// Thread koid → process koid, from thread kernel objects.
    thread_process: HashMap<u64, u64>,
    /// Thread koid → name.
    thread_names: HashMap<u64, String>,
    /// Context switches per CPU: (ns, outgoing tid, incoming tid).
    switches: BTreeMap<u16, Vec<(u64, u64, u64)>>,
    /// The stack samples.
    samples: Samples,
}

/// Stack samples in Chrome's form.
#[derive(Default)]
struct Samples {
    reader: SampleReader,
    /// Frame id by (parent id, name).
    ids: HashMap<(Option<u64>, String), u64>,
    /// `"stackFrames"`.
    frames: Map<String, Value>,
    /// `"samples"`.
    samples: Vec<Value>,
    /// Problems in the packets.
    errors: u64,
}

impl Samples {
    /// Adds `s`, interning its frames root first.
    fn add(&mut self, s: &DecodedSample) {
        let mut parent: Option<u64> = None;
        for frame in s.frames.iter().rev() {
            let name = samples::frame_name(frame);
            let next = self.ids.len() as u64 + 1;
            let id = *self.ids.entry((parent, name.clone())).or_insert(next);
            if id == next {
                let mut f = Map::new();
                f.insert("name".into(), name.into());
                f.insert("category".into(), frame.mapping_path.clone().into());
                if let Some(p) = parent {
                    f.insert("parent".into(), p.into());
                }
                self.frames.insert(id.to_string(), Value::Object(f));
            }
            parent = Some(id);
        }
        let mut sample = Map::new();
        sample.insert("cpu".into(), s.cpu.into());
        sample.insert("pid".into(), s.pid.into());
        sample.insert("tid".into(), s.tid.into());
        sample.insert("ts".into(), micros(s.ts));
        sample.insert("name".into(), s.timebase.clone().into());
        if let Some(leaf) = parent {
            sample.insert("sf".into(), leaf.into());
        }
        sample.insert("weight".into(), samples::weight(s).into());
        self.samples.push(Value::Object(sample));
    }

    /// Writes `,"stackFrames":{...},"samples":[...]` if there are samples.
    fn write(&self, out: &mut dyn Write) -> std::io::Result<()> {
        if self.samples.is_empty() {
            return Ok(());
        }
        out.write_all(b",\n\"stackFrames\":")?;
        serde_json::to_writer(&mut *out, &self.frames)?;
        out.write_all(b",\n\"samples\":[")?;
        for (i, s) in self.samples.iter().enumerate() {
            if i > 0 {
                out.write_all(b",\n")?;
            }
            serde_json::to_writer(&mut *out, s)?;
        }
        out.write_all(b"]")
    }
}

impl Converter {
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

/// Converts FXT `data` into Chrome JSON on `out`.
pub fn convert(data: &[u8], out: &mut dyn Write) -> std::io::Result<ConvertStats> {
    let mut state = TraceState::new();
    let mut c = Converter {
        first: true,
        ..Default::default()
    };
    let mut errors = 0;
    out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
    for item in Reader::new(data) {
        let (offset, record) = match item {
            Ok(r) => r,
            Err(_) => {
                errors += 1;
                continue;
            }
        };
        state.apply(&record);
        if let Some(payload) = samples::perfetto_payload(&record) {
            let (decoded, problems) = c.samples.reader.feed(payload);
            c.samples.errors += problems.len() as u64;
            for s in &decoded {
                c.samples.add(s);
            }
            continue;
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
                        let scope = match instant_scope(&record, &data[offset..]) {
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
                outgoing_tid,
                incoming_tid,
                ..
            } => c.switches.entry(*cpu).or_default().push((
                state.ticks_to_ns(*ts),
                *outgoing_tid,
                *incoming_tid,
            )),
            Record::LegacyContextSwitch {
                ts,
                cpu,
                outgoing_thread,
                incoming_thread,
                ..
            } => {
                let out_tid = resolve_thread(&state, *outgoing_thread).1;
                let in_tid = resolve_thread(&state, *incoming_thread).1;
                c.switches.entry(u16::from(*cpu)).or_default().push((
                    state.ticks_to_ns(*ts),
                    out_tid,
                    in_tid,
                ))
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
    }
    emit_cpu_tracks(&mut c, out)?;
    out.write_all(b"\n]")?;
    c.samples.write(out)?;
    out.write_all(b"}\n")?;
    Ok(ConvertStats {
        events: c.events,
        errors,
        samples: c.samples.samples.len() as u64,
        packet_errors: c.samples.errors,
    })
}

/// Turns each CPU's context switches into complete events named after the
/// thread that ran, on one pseudo-thread per CPU.
fn emit_cpu_tracks(c: &mut Converter, out: &mut dyn Write) -> std::io::Result<()> {
    let switches = std::mem::take(&mut c.switches);
    if switches.is_empty() {
        return Ok(());
    }
    c.emit(
        out,
        json!({"ph":"M","name":"process_name","pid":CPU_PSEUDO_PID,"tid":0,"args":{"name":"CPUs"}}),
    )?;
    for (cpu, mut list) in switches {
        list.sort_by_key(|s| s.0);
        c.emit(
            out,
            json!({"ph":"M","name":"thread_name","pid":CPU_PSEUDO_PID,"tid":cpu,"args":{"name":format!("CPU {cpu}")}}),
        )?;
        c.emit(
            out,
            json!({"ph":"M","name":"thread_sort_index","pid":CPU_PSEUDO_PID,"tid":cpu,"args":{"sort_index":cpu}}),
        )?;
        let mut running: Option<(u64, u64)> = None; // (tid, since)
        for (ts, _out_tid, in_tid) in list {
            if let Some((tid, since)) = running.take() {
                emit_cpu_slice(c, out, cpu, tid, since, ts)?;
            }
            if in_tid != 0 {
                running = Some((in_tid, ts));
            }
        }
    }
    Ok(())
}

fn emit_cpu_slice(
    c: &mut Converter,
    out: &mut dyn Write,
    cpu: u16,
    tid: u64,
    start: u64,
    end: u64,
) -> std::io::Result<()> {
    let name = match c.thread_names.get(&tid) {
        Some(n) => format!("{n} {tid}"),
        None => format!("{tid}"),
    };
    let pid = c.thread_process.get(&tid).copied().unwrap_or(0);
    c.emit(
        out,
        json!({"ph":"X","name":name,"cat":"kernel:sched","pid":CPU_PSEUDO_PID,"tid":cpu,
               "ts":micros(start),"dur":micros(end - start),"args":{"tid":tid,"pid":pid}}),
    )
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
        convert(&data, &mut out).unwrap();
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
        let stats = convert(&data, &mut out).unwrap();
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
        convert(&data, &mut out).unwrap();
        let json: Value = serde_json::from_slice(&out).unwrap();
        assert!(json.get("stackFrames").is_none() && json.get("samples").is_none());
    }
}
