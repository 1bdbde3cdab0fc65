//! End-to-end: stack samples (Perfetto packets in FXT blob records of type
//! 3) through `trace-cli flamegraph`, `dump`, `convert` and `check`, on a
//! file made by hand.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use tests::trace_cli;
use trace_common::fxt::write::encode;
use trace_common::fxt::{Arg, ArgValue, Record, StringRef, obj_type};
use trace_perfetto::{BLOB_TYPE_PERFETTO, CpuMode, Frame, Mapping, Sample, SampleWriter};

/// Process 100 "spin" and its thread 101 "spinner".
const PID: u32 = 100;
const TID: u32 = 101;

/// A file under construction: magic, provider 1 at 10^9 ticks per second,
/// the process and thread named.
struct File {
    bytes: Vec<u8>,
}

impl File {
    fn new() -> Self {
        let mut f = File { bytes: Vec::new() };
        f.push(&Record::Magic);
        f.push(&Record::ProviderInfo {
            id: 1,
            name: "kernel".into(),
        });
        f.push(&Record::Initialization {
            ticks_per_second: 1_000_000_000,
        });
        f.push(&Record::KernelObject {
            koid: PID.into(),
            obj_type: obj_type::PROCESS,
            name: StringRef::inline("spin"),
            args: vec![].into(),
        });
        f.push(&Record::KernelObject {
            koid: TID.into(),
            obj_type: obj_type::THREAD,
            name: StringRef::inline("spinner"),
            args: vec![Arg::new("process", ArgValue::Koid(PID.into()))].into(),
        });
        f
    }

    fn push(&mut self, r: &Record<'_>) -> &mut Self {
        encode(r, &mut self.bytes).unwrap();
        self
    }

    /// A blob of Perfetto packets.
    fn blob(&mut self, payload: Vec<u8>) -> &mut Self {
        self.push(&Record::Blob {
            name: StringRef::inline("perfetto"),
            blob_type: BLOB_TYPE_PERFETTO,
            payload: payload.into(),
        })
    }

    /// Every pending payload of `writer`, one blob each.
    fn flush(&mut self, writer: &mut SampleWriter) -> &mut Self {
        for payload in writer.take() {
            self.blob(payload);
        }
        self
    }

    fn write(&self, name: &str) -> PathBuf {
        let path = tmp(name);
        std::fs::write(&path, &self.bytes).unwrap();
        path
    }
}

fn tmp(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("samples-{name}"))
}

fn spin_binary() -> Arc<Mapping> {
    Arc::new(Mapping {
        path: "/usr/bin/spin".into(),
        build_id: Some(vec![0xab, 0xcd]),
        start: 0x5555_0000_0000,
        end: 0x5555_0001_0000,
        file_offset: 0,
        load_bias: 0,
    })
}

/// The frames of `stack` (given root first), leaf first, in `mapping`.
fn frames(stack: &[&str], mapping: &Arc<Mapping>) -> Vec<Frame> {
    stack
        .iter()
        .rev()
        .enumerate()
        .map(|(i, f)| Frame {
            function: (*f).to_owned(),
            mapping: mapping.clone(),
            rel_pc: 0x1000 + 0x10 * i as u64,
        })
        .collect()
}

/// A sample of thread 101 at `ts`.
fn sample(ts: u64, count: Option<u64>, frames: &[Frame]) -> Sample<'_> {
    Sample {
        ts,
        pid: PID,
        tid: TID,
        cpu: 2,
        cpu_mode: CpuMode::User,
        timebase_count: count,
        frames,
    }
}

/// The CPU profile: main→spin_a→spin_b→spin_c 30 times and main→spin_d 10
/// times, interleaved, 1 ms apart; and where the thread blocked:
/// main→spin_d→nanosleep, then the kernel's schedule, 3 times 2 ms.
fn profile() -> File {
    let spin = spin_binary();
    let kernel = Arc::new(Mapping {
        path: "[kernel.kallsyms]".into(),
        build_id: None,
        start: 0xffff_ffff_8000_0000,
        end: 0xffff_ffff_9000_0000,
        file_offset: 0,
        load_bias: 0,
    });
    let c = frames(&["main", "spin_a", "spin_b", "spin_c"], &spin);
    let d = frames(&["main", "spin_d"], &spin);
    let mut blocked = frames(&["main", "spin_d", "nanosleep"], &spin);
    blocked.insert(
        0,
        Frame {
            function: "schedule".into(),
            mapping: kernel,
            rel_pc: 0x42,
        },
    );
    let mut cpu = SampleWriter::new(1, "cpu-clock");
    let mut off = SampleWriter::new(2, "off-cpu");
    let mut f = File::new();
    let mut ts = 1_000_000_000;
    for i in 0..40 {
        let stack = if i % 4 == 3 { &d } else { &c };
        cpu.push(&sample(ts, None, stack));
        ts += 1_000_000;
        if i % 10 == 0 {
            // Two blobs: samples spread over several payloads.
            f.flush(&mut cpu);
        }
        if i % 13 == 12 {
            off.push(&sample(ts, Some(2_000_000), &blocked));
        }
    }
    f.flush(&mut cpu).flush(&mut off);
    f
}

fn cli(args: &[&str], file: &Path) -> (bool, String, String) {
    let out = Command::new(trace_cli())
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn flamegraph_folds_the_cpu_profile() {
    let file = profile().write("folded.fxt");
    let (ok, out, err) = cli(&["flamegraph", "--folded"], &file);
    assert!(ok, "{err}");
    assert_eq!(
        out, "spin;main;spin_a;spin_b;spin_c 30\nspin;main;spin_d 10\n",
        "{err}"
    );
    // Off-CPU: weighted by the time blocked, kernel frames on top.
    let (ok, out, err) = cli(&["flamegraph", "--folded", "--offcpu"], &file);
    assert!(ok, "{err}");
    assert_eq!(out, "spin;main;spin_d;nanosleep;schedule 6000000\n");
    // The pid filter: another process has no samples; the error says whose
    // samples there are.
    let (ok, out, err) = cli(&["flamegraph", "--folded", "-p", "100"], &file);
    assert!(ok && out.lines().count() == 2, "{out}{err}");
    let (ok, _, err) = cli(&["flamegraph", "--folded", "-p", "7"], &file);
    assert!(!ok);
    assert!(err.contains("by process: 100 \"spin\" (40)"), "{err}");
}

#[test]
fn flamegraph_draws_an_svg() {
    let file = profile().write("svg.fxt");
    let svg = tmp("x.svg");
    let _ = std::fs::remove_file(&svg);
    let (ok, _, err) = cli(&["flamegraph", "-o", svg.to_str().unwrap()], &file);
    assert!(ok, "{err}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<?xml") && text.contains("</svg>"));
    for name in ["CPU profile: 40 samples", "spin_c", "spin_d", "spin_a"] {
        assert!(text.contains(name), "{name} missing from the SVG");
    }
    let off = tmp("off.svg");
    let (ok, _, err) = cli(
        &["flamegraph", "--offcpu", "-o", off.to_str().unwrap()],
        &file,
    );
    assert!(ok, "{err}");
    let text = std::fs::read_to_string(&off).unwrap();
    assert!(
        text.contains("Off-CPU time: 6.000 ms") && text.contains("nanosleep"),
        "{err}"
    );
}

#[test]
fn flamegraph_of_a_timebase_the_file_lacks_lists_those_it_has() {
    let file = profile().write("lacks.fxt");
    let (ok, out, err) = cli(&["flamegraph", "--timebase", "uprobe:*"], &file);
    assert!(!ok && out.is_empty());
    assert!(
        err.contains("no samples of timebase \"uprobe:*\"")
            && err.contains("cpu-clock (40), off-cpu (3)"),
        "{err}"
    );
    let empty = File::new().write("none.fxt");
    let (ok, _, err) = cli(&["flamegraph"], &empty);
    assert!(!ok && err.contains("has no stack samples"), "{err}");
}

#[test]
fn dump_prints_samples_with_their_frames() {
    let file = profile().write("dump.fxt");
    let (ok, out, err) = cli(&["dump"], &file);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    let first = lines
        .iter()
        .position(|l| l.contains(" sample cpu-clock "))
        .unwrap_or_else(|| panic!("no sample in:\n{out}"));
    assert!(
        lines[first].ends_with(
            " 1.000000000 sample cpu-clock pid=100 \"spin\" tid=101 \"spinner\" cpu=2 mode=user"
        ),
        "{}",
        lines[first]
    );
    assert_eq!(
        lines[first + 1..first + 5],
        [
            // As `perf script` prints frames: address, name, file.
            "                1000 spin_c (/usr/bin/spin)",
            "                1010 spin_b (/usr/bin/spin)",
            "                1020 spin_a (/usr/bin/spin)",
            "                1030 main (/usr/bin/spin)",
        ]
    );
    assert_eq!(out.matches(" sample cpu-clock ").count(), 40);
    assert_eq!(out.matches(" sample off-cpu ").count(), 3);
    let off_cpu = lines
        .iter()
        .position(|l| l.ends_with("count=2000000ns"))
        .unwrap_or_else(|| panic!("no off-CPU sample of 2 ms in:\n{out}"));
    assert!(
        lines[off_cpu + 1].ends_with(" schedule ([kernel.kallsyms])"),
        "{out}"
    );
    // The other records print as before.
    assert!(out.contains("kernel_object process koid=100 name=\"spin\""));
    assert!(!out.contains(" blob name="));
}

#[test]
fn convert_writes_stack_frames_and_samples() {
    let file = profile().write("convert.fxt");
    let json_path = tmp("convert.json");
    let out = Command::new(trace_cli())
        .arg("convert")
        .arg(&file)
        .arg("-o")
        .arg(&json_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    let frames = json["stackFrames"].as_object().unwrap();
    // main, spin_a, spin_b, spin_c, spin_d, nanosleep, schedule.
    assert_eq!(frames.len(), 7, "{frames:?}");
    let samples = json["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 43);
    let leaf = |s: &serde_json::Value| {
        frames[&s["sf"].as_u64().unwrap().to_string()]["name"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let first = &samples[0];
    assert_eq!(leaf(first), "spin_c");
    assert_eq!(
        (
            first["tid"].as_u64(),
            first["ts"].as_f64(),
            first["name"].as_str(),
            first["weight"].as_u64()
        ),
        (Some(101), Some(1_000_000.0), Some("cpu-clock"), Some(1))
    );
    let off: Vec<_> = samples.iter().filter(|s| s["name"] == "off-cpu").collect();
    assert_eq!(off.len(), 3);
    assert!(
        off.iter()
            .all(|s| leaf(s) == "schedule" && s["weight"] == 2_000_000)
    );
}

/// What `check --json` says of `file`: its exit status and the JSON.
fn check(file: &Path) -> (Option<i32>, serde_json::Value) {
    let out = Command::new(trace_cli())
        .args(["check", "--json"])
        .arg(file)
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), json)
}

fn violations(json: &serde_json::Value) -> Vec<String> {
    json["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["kind"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn check_counts_samples_and_finds_bad_packets() {
    let file = profile().write("check.fxt");
    let (code, json) = check(&file);
    assert_eq!(code, Some(0), "{json}");
    assert!(violations(&json).is_empty(), "{json}");
    assert_eq!(json["samples"]["cpu-clock"], 40);
    assert_eq!(json["samples"]["off-cpu"], 3);
    let (ok, text, _) = cli(&["check"], &file);
    assert!(ok);
    assert!(
        text.contains("Stack samples in the Perfetto packets, by timebase:\n          40  cpu-clock\n           3  off-cpu\n"),
        "{text}"
    );

    // A payload cut short: a packet of 127 bytes with 2 of them.
    let mut bad = profile();
    bad.blob(vec![0x0a, 0x7f, 0x08, 0x01]);
    let (code, json) = check(&bad.write("truncated.fxt"));
    assert_eq!(code, Some(1));
    assert_eq!(violations(&json), ["bad_perfetto_packet"], "{json}");
    assert_eq!(json["samples"]["cpu-clock"], 40);

    // A sample whose call stack was interned by another writer of the same
    // sequence: the id does not resolve.
    let spin = spin_binary();
    let (x, y) = (frames(&["x"], &spin), frames(&["y"], &spin));
    let mut a = SampleWriter::new(3, "cpu-clock");
    a.push(&sample(5, None, &x));
    let mut b = SampleWriter::new(3, "cpu-clock");
    b.push(&sample(5, None, &x));
    b.push(&sample(6, None, &y));
    b.take();
    b.push(&sample(7, None, &y));
    let mut f = File::new();
    f.flush(&mut a).flush(&mut b);
    let path = f.write("unresolved.fxt");
    let (code, json) = check(&path);
    assert_eq!(code, Some(1));
    assert_eq!(violations(&json), ["bad_perfetto_packet"], "{json}");
    let detail = json["violations"][0]["examples"][0]["detail"]
        .as_str()
        .unwrap();
    assert!(detail.contains("iid"), "{detail}");
    // dump says so too, and fails.
    let (ok, out, _) = cli(&["dump"], &path);
    assert!(!ok && out.contains("ERROR Perfetto packets: "), "{out}");
}
