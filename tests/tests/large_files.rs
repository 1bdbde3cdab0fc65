//! End-to-end: every command that reads a trace file holds about the same
//! memory for a file four times as large, and answers the same way
//! whatever the size: `dump`, `check`, `convert`, `flamegraph`, `report`.
//!
//! The files are made here: one process with two threads, a complete event
//! and a context switch every microsecond (some written out of time
//! order, which `check` must put back), and blobs of stack samples.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use tests::trace_cli;
use trace_common::fxt::write::encode;
use trace_common::fxt::{Arg, ArgValue, EventKind, Record, StringRef, ThreadRef, obj_type};
use trace_perfetto::{BLOB_TYPE_PERFETTO, CpuMode, Frame, Mapping, Sample, SampleWriter};

const PID: u64 = 100;
const TIDS: [u64; 2] = [101, 102];

fn push(out: &mut Vec<u8>, r: &Record<'_>) {
    encode(r, out).unwrap();
}

/// Writes a file of about `mb` MB at `path`.
fn make(path: &Path, mb: usize) {
    let mut head = Vec::new();
    push(&mut head, &Record::Magic);
    push(
        &mut head,
        &Record::ProviderInfo {
            id: 1,
            name: "kernel".into(),
        },
    );
    push(
        &mut head,
        &Record::Initialization {
            ticks_per_second: 1_000_000_000,
        },
    );
    push(
        &mut head,
        &Record::KernelObject {
            koid: PID,
            obj_type: obj_type::PROCESS,
            name: StringRef::inline("big"),
            args: vec![].into(),
        },
    );
    for tid in TIDS {
        push(
            &mut head,
            &Record::KernelObject {
                koid: tid,
                obj_type: obj_type::THREAD,
                name: StringRef::inline(format!("worker-{tid}")),
                args: vec![Arg::new("process", ArgValue::Koid(PID))].into(),
            },
        );
    }
    // Templates: the timestamp is the word after the header, the end of a
    // complete event its last word.
    let event = |tid: u64| {
        let mut b = Vec::new();
        push(
            &mut b,
            &Record::Event {
                ts: 0,
                thread: ThreadRef::Inline {
                    process: PID,
                    thread: tid,
                },
                category: StringRef::inline("work"),
                name: StringRef::inline("step"),
                args: vec![Arg::new("n", ArgValue::Uint64(7))].into(),
                kind: EventKind::DurationComplete { end_ts: 0 },
            },
        );
        b
    };
    let events = [event(TIDS[0]), event(TIDS[1])];
    let switch = |out: u64, inc: u64| {
        let mut b = Vec::new();
        push(
            &mut b,
            &Record::ContextSwitch {
                ts: 0,
                cpu: 0,
                outgoing_state: 3,
                outgoing_tid: out,
                incoming_tid: inc,
                args: vec![
                    Arg::new("incoming_weight", ArgValue::Int32(120)),
                    Arg::new("outgoing_weight", ArgValue::Int32(120)),
                ]
                .into(),
            },
        );
        b
    };
    let switches = [switch(TIDS[1], TIDS[0]), switch(TIDS[0], TIDS[1])];
    let mapping = Arc::new(Mapping {
        path: "/usr/bin/big".into(),
        build_id: None,
        start: 0x5555_0000_0000,
        end: 0x5555_0001_0000,
        file_offset: 0,
        load_bias: 0,
    });
    let frames: Vec<Frame> = ["main", "work", "step"]
        .iter()
        .rev()
        .enumerate()
        .map(|(i, f)| Frame {
            function: (*f).to_owned(),
            mapping: mapping.clone(),
            rel_pc: 0x1000 + 0x10 * i as u64,
        })
        .collect();
    let mut samples = SampleWriter::new(1, "cpu-clock");

    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    file.write_all(&head).unwrap();
    let mut written = head.len();
    let mut block = Vec::with_capacity(1 << 20);
    let mut i: u64 = 0;
    let put = |block: &mut Vec<u8>, template: &[u8], ts: u64, end: Option<u64>| {
        let at = block.len();
        block.extend_from_slice(template);
        block[at + 8..at + 16].copy_from_slice(&ts.to_le_bytes());
        if let Some(end) = end {
            let last = block.len() - 8;
            block[last..].copy_from_slice(&end.to_le_bytes());
        }
    };
    while written < mb << 20 {
        block.clear();
        for _ in 0..4096 {
            let ts = 1_000_000_000 + i * 1000;
            let who = (i % 2) as usize;
            // Every 64th pair of events is written in the wrong order.
            if i.is_multiple_of(64) {
                put(&mut block, &events[1 - who], ts + 1000, Some(ts + 1400));
                put(&mut block, &events[who], ts, Some(ts + 400));
                put(&mut block, &switches[who], ts + 500, None);
                put(&mut block, &switches[1 - who], ts + 1500, None);
                i += 2;
                continue;
            }
            put(&mut block, &events[who], ts, Some(ts + 400));
            put(&mut block, &switches[who], ts + 500, None);
            i += 1;
        }
        samples.push(&Sample {
            ts: 1_000_000_000 + i * 1000,
            cpu: 0,
            pid: PID as u32,
            tid: TIDS[0] as u32,
            cpu_mode: CpuMode::User,
            frames: &frames,
            timebase_count: None,
        });
        for payload in samples.take() {
            push(
                &mut block,
                &Record::Blob {
                    name: StringRef::inline("perfetto"),
                    blob_type: BLOB_TYPE_PERFETTO,
                    payload: payload.into(),
                },
            );
        }
        file.write_all(&block).unwrap();
        written += block.len();
    }
    file.flush().unwrap();
}

/// Runs `trace-cli ARGS`: its standard output, whether it succeeded, and
/// its peak resident set size in KiB.
#[expect(
    clippy::zombie_processes,
    reason = "reaped with wait4, which gives its peak memory"
)]
fn run(args: &[&str]) -> (String, bool, u64) {
    let child = Command::new(trace_cli())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.unwrap();
    // Standard output is read as it comes (up to a point: the dump and the
    // JSON are long), so the command never waits on a full pipe.
    let mut head = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = std::io::Read::read(&mut stdout, &mut buf).unwrap();
        if n == 0 {
            break;
        }
        if head.len() < 1 << 20 {
            head.extend_from_slice(&buf[..n]);
        }
    }
    let mut status = 0;
    // SAFETY: `usage` is a plain C struct that wait4 fills in; `pid` is our
    // own child, not yet waited for.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::wait4(pid, &mut status, 0, &mut usage), pid);
        usage
    };
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    (
        String::from_utf8_lossy(&head).into_owned(),
        ok,
        usage.ru_maxrss as u64,
    )
}

fn tmp(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("large-{name}"))
}

#[test]
fn every_reader_holds_the_same_memory_for_a_file_four_times_as_large() {
    let small = tmp("small.fxt");
    let large = tmp("large.fxt");
    make(&small, 16);
    make(&large, 64);
    let path = |p: &Path| p.to_str().unwrap().to_owned();
    let commands: [(&str, Vec<&str>); 5] = [
        ("dump", vec!["dump"]),
        ("check", vec!["check"]),
        ("convert", vec!["convert", "-o", "-"]),
        ("flamegraph", vec!["flamegraph", "--folded"]),
        ("report", vec!["report"]),
    ];
    let mut failed = Vec::new();
    for (name, args) in &commands {
        let with = |file: &Path| {
            let mut a = args.clone();
            let f = path(file);
            a.insert(1, &f);
            run(&a)
        };
        let (small_out, small_ok, small_kb) = with(&small);
        let (large_out, large_ok, large_kb) = with(&large);
        eprintln!("{name}: peak {small_kb} KiB on 16 MB, {large_kb} KiB on 64 MB");
        assert!(small_ok && large_ok, "{name} failed");
        // The file grows by 48 MiB; what the command holds may not grow by
        // more than a quarter of that.
        if large_kb > small_kb + 12 * 1024 {
            failed.push(format!("{name}: {small_kb} KiB -> {large_kb} KiB"));
        }
        match *name {
            "check" => {
                for out in [&small_out, &large_out] {
                    assert!(out.contains("No violations"), "check:\n{out}");
                }
            }
            "flamegraph" => {
                let n = |out: &str| -> u64 {
                    out.lines()
                        .filter_map(|l| l.strip_prefix("big;main;work;step "))
                        .map(|n| n.trim().parse::<u64>().unwrap())
                        .sum()
                };
                assert!(n(&large_out) > 3 * n(&small_out), "{large_out}");
            }
            _ => {}
        }
    }
    std::fs::remove_file(&small).ok();
    std::fs::remove_file(&large).ok();
    assert!(failed.is_empty(), "memory grew with the file: {failed:?}");
}
