//! End-to-end: `kernel:irq` and `kernel:block` with `trace-cli record` and
//! the real kernel provider, as root, under block I/O load: hard IRQ
//! handlers and softirqs as durations on named per-CPU tracks, block
//! requests as async slices from issue to completion.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use tests::{Event, parse, require_root, trace_cli};
use trace_common::fxt::{ArgValue, EventKind};

/// The sum of every numbered (device) interrupt line of /proc/interrupts,
/// and the text, for the handler names.
fn device_interrupts() -> (u64, String) {
    let text = std::fs::read_to_string("/proc/interrupts").unwrap();
    let total = text
        .lines()
        .filter(|l| {
            l.trim_start()
                .split(':')
                .next()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .flat_map(|l| {
            l.split(':')
                .nth(1)
                .unwrap_or("")
                .split_whitespace()
                .map_while(|n| n.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum();
    (total, text)
}

/// Bytes [`block_io`] writes and flushes.
const LOAD_BYTES: u64 = 16 << 20;

/// Writes and flushes a file on disk a few times ([`LOAD_BYTES`] in all):
/// block requests, and the device's completion interrupts.
fn block_io(name: &str) {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let chunk = vec![0x5au8; 1 << 20];
    for _ in 0..8 {
        let mut f = std::fs::File::create(&path).unwrap();
        for _ in 0..2 {
            f.write_all(&chunk).unwrap();
        }
        f.sync_all().unwrap();
    }
    std::fs::remove_file(&path).ok();
}

/// Records `category` for 2 s while `load` runs; returns the file and what
/// `trace-cli` printed after starting.
fn record_during(category: &str, file: &str, load: impl FnOnce()) -> (PathBuf, String) {
    let file = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(file);
    let mut recorder = Command::new(trace_cli())
        .args(["record", "-c", category, "-d", "2", "-o"])
        .arg(&file)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(recorder.stderr.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("trace-cli: recording") {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "trace-cli ended early"
        );
    }
    load();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(recorder.wait().unwrap().success(), "{rest}");
    assert!(rest.contains(", 0 dropped"), "{rest}");
    (file, rest)
}

#[test]
fn interrupts_are_durations_on_named_per_cpu_tracks() {
    require_root();
    let mut counts = None;
    let (file, rest) = record_during("kernel:irq", "irq.fxt", || {
        let (before, _) = device_interrupts();
        block_io("irq-load.bin");
        let (after, table) = device_interrupts();
        counts = Some((before, after, table));
    });
    let (before, after, table) = counts.unwrap();

    let trace = parse(&file);
    assert!(trace.errors.is_empty(), "{:?}", trace.errors);
    let irqs: Vec<&Event> = trace
        .events
        .iter()
        .filter(|e| e.category == "kernel:irq")
        .collect();
    assert!(!irqs.is_empty(), "no interrupts in 2 s: {rest}");

    // One pseudo-process, one named track per CPU.
    let process = irqs[0].pid;
    assert_eq!(
        trace.process_names.get(&process).and_then(|n| n.last()),
        Some(&"kernel interrupts".to_owned())
    );
    let mut tracks: HashMap<u64, Vec<(u64, u64)>> = HashMap::new();
    for e in &irqs {
        assert_eq!(e.pid, process, "{e:?}");
        let (pid, name) = trace.thread(e.tid).expect("track named");
        assert_eq!(*pid, process);
        assert!(
            name.starts_with("CPU ") && name.ends_with(" interrupts"),
            "{name}"
        );
        if let EventKind::DurationComplete { end_ts } = e.kind {
            assert!(end_ts >= e.ts && end_ts - e.ts < 1_000_000_000, "{e:?}");
            tracks.entry(e.tid).or_default().push((e.ts, end_ts));
        }
    }
    // On a track, two interrupts nest (a hard IRQ inside a softirq) or do
    // not overlap at all.
    for spans in tracks.values_mut() {
        spans.sort();
        for (i, a) in spans.iter().enumerate() {
            for b in &spans[i + 1..] {
                if b.0 >= a.1 {
                    break;
                }
                assert!(b.1 <= a.1, "overlapping, not nested: {a:?} {b:?}");
            }
        }
    }

    // Softirqs by vector name; timers run on any machine.
    let softirqs: HashSet<&str> = irqs
        .iter()
        .filter_map(|e| e.name.strip_prefix("softirq "))
        .collect();
    assert!(!softirqs.is_empty(), "no softirq");
    let known: Vec<&str> = (0..10)
        .filter_map(trace_common::kernel::softirq_name)
        .collect();
    for v in &softirqs {
        assert!(known.contains(v), "unknown softirq {v}");
    }

    // Hard IRQs: the device completions of the writes, named as in
    // /proc/interrupts, with their number.
    let hard: Vec<&&Event> = irqs
        .iter()
        .filter(|e| !e.name.starts_with("softirq "))
        .collect();
    if after > before {
        assert!(
            !hard.is_empty(),
            "{} device interrupts, none recorded",
            after - before
        );
        for e in &hard {
            assert!(
                table.contains(&e.name) || e.name.starts_with("irq "),
                "handler {} not in /proc/interrupts",
                e.name
            );
            assert!(e.args.contains_key("irq") && e.args.contains_key("handled"));
        }
    } else {
        eprintln!(
            "no device interrupt happened during the load on this machine (its block device \
             completes by polling?): only softirqs were checked"
        );
    }
}

#[test]
fn block_requests_are_async_slices_from_issue_to_completion() {
    require_root();
    let (file, rest) = record_during("kernel:block", "block.fxt", || block_io("block-load.bin"));
    let trace = parse(&file);
    assert!(trace.errors.is_empty(), "{:?}", trace.errors);
    let block: Vec<&Event> = trace
        .events
        .iter()
        .filter(|e| e.category == "kernel:block")
        .collect();
    assert!(!block.is_empty(), "no block request: {rest}");
    let process = block[0].pid;
    assert_eq!(
        trace.process_names.get(&process).and_then(|n| n.last()),
        Some(&"kernel block I/O".to_owned())
    );
    // Every completion ends a request begun earlier, on the same device
    // track, with the same name.
    let mut begun: HashMap<u64, &Event> = HashMap::new();
    let mut written = 0u64;
    for e in &block {
        assert_eq!(e.pid, process);
        let (_, track) = trace.thread(e.tid).expect("device track named");
        assert!(track.starts_with("block "), "{track}");
        match e.kind {
            EventKind::AsyncBegin { id } => {
                assert!(begun.insert(id, e).is_none(), "id {id} twice");
                assert!(e.args.contains_key("sector") && e.args.contains_key("issuer"));
            }
            EventKind::AsyncEnd { id } => {
                let b = begun
                    .get(&id)
                    .unwrap_or_else(|| panic!("end of {id} without begin"));
                assert!(
                    e.ts >= b.ts && e.tid == b.tid && e.name == b.name,
                    "{b:?} {e:?}"
                );
                assert_eq!(e.args.get("error"), Some(&ArgValue::Int32(0)));
                if b.name == "write"
                    && let Some(ArgValue::Uint32(n)) = b.args.get("bytes")
                {
                    written += u64::from(*n);
                }
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    // The flushed data went to a device inside the recording.
    assert!(
        written >= LOAD_BYTES,
        "{written} bytes written by completed requests, {LOAD_BYTES} flushed"
    );
}
