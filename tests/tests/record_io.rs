//! End-to-end: `kernel:irq`, `kernel:block` and `kernel:vm` with `trace-cli
//! record` and the real kernel provider, as root, under load that causes
//! them: hard IRQ handlers and softirqs as durations on named per-CPU
//! tracks, block requests as async slices from issue to completion, page
//! faults as instants and resident-set sizes as counters.

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
    // No CPU's ring buffer overflowed. (Runs the kernel skipped because
    // another BPF program was running on the CPU, as other tests' recordings
    // do meanwhile, are counted apart, as `other`.)
    assert!(tests::no_ring_drops(&rest), "{rest}");
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
            assert!(e.args.contains_key("irq"), "{e:?}");
            // Whether it was handled is known once it returned (not for a
            // handler still running when the recording ended).
            if matches!(e.kind, EventKind::DurationComplete { .. })
                && !e.args.contains_key("exit_lost")
            {
                assert!(e.args.contains_key("handled"), "{e:?}");
            }
        }
    } else {
        eprintln!(
            "no device interrupt happened during the load on this machine (its block device \
             completes by polling?): only softirqs were checked"
        );
    }
}

#[test]
fn block_requests_are_durations_on_the_tracks_of_their_device() {
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
    // Each request is one complete duration from issue to completion, on
    // a track named after its device; requests on one track never overlap.
    let mut by_track: HashMap<u64, Vec<(u64, u64)>> = HashMap::new();
    let mut written = 0u64;
    for e in &block {
        assert_eq!(e.pid, process);
        let (_, track) = trace.thread(e.tid).expect("device track named");
        let Some(ArgValue::String(trace_common::fxt::StringRef::Inline(device))) =
            e.args.get("device")
        else {
            panic!("no device: {e:?}");
        };
        let device = device.to_string();
        assert!(
            *track == device || track.starts_with(&format!("{device} (")),
            "track {track} of device {device}"
        );
        assert!(
            std::path::Path::new("/dev").join(&device).exists(),
            "/dev/{device}"
        );
        let EventKind::DurationComplete { end_ts } = e.kind else {
            panic!("unexpected {:?}", e.kind);
        };
        assert!(end_ts >= e.ts);
        assert!(e.args.contains_key("sector") && e.args.contains_key("issuer"));
        by_track.entry(e.tid).or_default().push((e.ts, end_ts));
        // Issued inside the recording, and done when the flush returned:
        // one marked `unfinished` is a completion the recording missed
        // (lost, or an interrupt taken while the CPU ran a task the kernel
        // keeps out of tracing), and wrote its bytes all the same.
        let done =
            e.args.get("error") == Some(&ArgValue::Int32(0)) || e.args.contains_key("unfinished");
        if done
            && e.name == "write"
            && let Some(ArgValue::Uint32(n)) = e.args.get("bytes")
        {
            written += u64::from(*n);
        }
    }
    for spans in by_track.values_mut() {
        spans.sort();
        assert!(spans.windows(2).all(|w| w[0].1 <= w[1].0), "{spans:?}");
    }
    // The flushed data went to a device inside the recording.
    assert!(
        written >= LOAD_BYTES,
        "{written} bytes written by requests without an error, {LOAD_BYTES} flushed"
    );
}

#[test]
fn page_faults_and_resident_set_of_a_command() {
    require_root();
    let mb = 32u64;
    let file = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("vm.fxt");
    let out = Command::new(trace_cli())
        .args(["record", "-c", "kernel:vm", "-o"])
        .arg(&file)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_touch_pages"))
        .arg(mb.to_string())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(tests::no_ring_drops(&stderr), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let ids: HashMap<&str, u64> = stdout
        .lines()
        .find(|l| l.starts_with("pid="))
        .unwrap_or_else(|| panic!("no output: {stdout}"))
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| {
            let v = match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
                None => v.parse().unwrap(),
            };
            (k, v)
        })
        .collect();
    let (pid, start, len) = (ids["pid"], ids["start"], ids["len"]);
    let trace = parse(&file);
    assert!(trace.errors.is_empty(), "{:?}", trace.errors);
    let vm: Vec<&Event> = trace
        .events
        .iter()
        .filter(|e| e.category == "kernel:vm")
        .collect();
    // Only the command (its tree) is recorded.
    assert!(
        vm.iter().all(|e| e.pid == pid),
        "another process in the trace"
    );

    // Resident set: the anonymous counter of the process grew by the pages
    // it touched.
    let anon: Vec<i64> = vm
        .iter()
        .filter(|e| e.name == "rss" && matches!(e.kind, EventKind::Counter { .. }))
        .filter_map(|e| match e.args.get("anon") {
            Some(ArgValue::Int64(v)) => Some(*v),
            _ => None,
        })
        .collect();
    let max = anon.iter().copied().max().unwrap_or(0);
    assert!(max >= (len as i64), "anon rss at most {max}, {len} touched");

    let faults: Vec<&&Event> = vm.iter().filter(|e| e.name == "page_fault").collect();
    if !std::path::Path::new("/sys/kernel/tracing/events/exceptions/page_fault_user").exists() {
        eprintln!("this kernel has no exceptions:page_fault_user (x86 only): faults not checked");
        return;
    }
    // One write fault per touched page, inside the mapping.
    let in_mapping = faults
        .iter()
        .filter(|e| match e.args.get("address") {
            Some(ArgValue::Pointer(a)) => (start..start + len).contains(a),
            _ => false,
        })
        .filter(|e| {
            e.args.get("access")
                == Some(&ArgValue::String(trace_common::fxt::StringRef::inline(
                    "write",
                )))
        })
        .count() as u64;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    assert!(
        in_mapping >= len / page,
        "{in_mapping} write faults in the mapping, {} pages touched",
        len / page
    );
    assert!(matches!(faults[0].kind, EventKind::Instant));
}
