//! End-to-end: `trace-cli check` on hand-made files, one for every kind of
//! finding it reports, and a clean one.

use std::collections::BTreeMap;
use std::process::Command;

use tests::trace_cli;
use trace_common::fxt::write::encode;
use trace_common::fxt::{
    Arg, ArgValue, EventKind, LargeBlob, Record, StringRef, ThreadRef, obj_type,
};

/// A file under construction: magic, provider 1 at 10^9 ticks per second.
struct File {
    bytes: Vec<u8>,
}

impl File {
    /// The file with its cast named: processes 1 and 2, threads 10 and 11
    /// of process 1 and 20 of process 2.
    fn new() -> Self {
        let mut f = File { bytes: Vec::new() };
        f.push(&Record::Magic);
        f.push(&Record::ProviderInfo {
            id: 1,
            name: "test".into(),
        });
        f.push(&Record::Initialization {
            ticks_per_second: 1_000_000_000,
        });
        f.cast();
        f
    }

    /// Names processes 1 and 2 and their threads 10, 11 and 20.
    fn cast(&mut self) -> &mut Self {
        self.process(1).process(2);
        self.thread(1, 10).thread(1, 11).thread(2, 20)
    }

    /// A named process `pid`.
    fn process(&mut self, pid: u64) -> &mut Self {
        self.push(&Record::KernelObject {
            koid: pid,
            obj_type: obj_type::PROCESS,
            name: StringRef::inline(format!("p{pid}")),
            args: vec![].into(),
        })
    }

    fn push(&mut self, r: &Record<'_>) -> &mut Self {
        encode(r, &mut self.bytes).unwrap();
        self
    }

    fn raw(&mut self, words: &[u64]) -> &mut Self {
        for w in words {
            self.bytes.extend(w.to_le_bytes());
        }
        self
    }

    /// A named thread `tid` of process `pid`.
    fn thread(&mut self, pid: u64, tid: u64) -> &mut Self {
        let name = format!("t{tid}");
        self.push(&Record::KernelObject {
            koid: tid,
            obj_type: obj_type::THREAD,
            name: StringRef::inline(name),
            args: vec![Arg::new("process", ArgValue::Koid(pid))].into(),
        })
    }

    fn event(
        &mut self,
        ts: u64,
        (pid, tid): (u64, u64),
        category: &str,
        name: &str,
        args: Vec<Arg<'static>>,
        kind: EventKind,
    ) -> &mut Self {
        self.push(&Record::Event {
            ts,
            thread: ThreadRef::Inline {
                process: pid,
                thread: tid,
            },
            category: StringRef::inline(category.to_owned()),
            name: StringRef::inline(name.to_owned()),
            args: args.into(),
            kind,
        })
    }

    fn complete(&mut self, ts: u64, end: u64, who: (u64, u64), name: &str) -> &mut Self {
        self.event(
            ts,
            who,
            "c",
            name,
            vec![],
            EventKind::DurationComplete { end_ts: end },
        )
    }

    fn switch(&mut self, ts: u64, cpu: u16, out: u64, inc: u64) -> &mut Self {
        let w = |tid: u64| if tid == 0 { i32::MIN } else { 120 };
        self.push(&Record::ContextSwitch {
            ts,
            cpu,
            outgoing_state: 3,
            outgoing_tid: out,
            incoming_tid: inc,
            args: vec![
                Arg::new("incoming_weight", ArgValue::Int32(w(inc))),
                Arg::new("outgoing_weight", ArgValue::Int32(w(out))),
            ]
            .into(),
        })
    }

    fn wakeup(&mut self, ts: u64, tid: u64, waker: u64) -> &mut Self {
        self.push(&Record::ThreadWakeup {
            ts,
            cpu: 0,
            tid,
            args: vec![
                Arg::new("weight", ArgValue::Int32(120)),
                Arg::new("waker", ArgValue::Koid(waker)),
            ]
            .into(),
        })
    }
}

/// What `check --json` says of `bytes`: its exit status and every kind of
/// finding with its count.
fn check(bytes: &[u8]) -> (Option<i32>, BTreeMap<String, u64>) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!(
        "check-{}-{:?}.fxt",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&path, bytes).unwrap();
    let out = Command::new(trace_cli())
        .args(["check", "--json"])
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let mut kinds = BTreeMap::new();
    for list in ["violations", "warnings"] {
        for f in json[list].as_array().unwrap() {
            kinds.insert(
                f["kind"].as_str().unwrap().to_owned(),
                f["count"].as_u64().unwrap(),
            );
        }
    }
    (out.status.code(), kinds)
}

/// `bytes` has findings of `kind` and of no other kind; a violation
/// makes `check` exit 1, a warning alone does not.
#[track_caller]
fn only(bytes: &[u8], kind: &str, violation: bool) {
    let (code, kinds) = check(bytes);
    assert_eq!(
        kinds.keys().collect::<Vec<_>>(),
        vec![kind],
        "expected only {kind}, got {kinds:?}"
    );
    assert_eq!(code, Some(if violation { 1 } else { 0 }), "{kinds:?}");
}

/// `bytes` has findings of exactly the kinds `expected`; `check` exits 1
/// when `violation`.
#[track_caller]
fn exactly(bytes: &[u8], expected: &[&str], violation: bool) {
    let (code, kinds) = check(bytes);
    assert_eq!(
        kinds.keys().map(String::as_str).collect::<Vec<_>>(),
        expected,
        "{kinds:?}"
    );
    assert_eq!(code, Some(if violation { 1 } else { 0 }), "{kinds:?}");
}

/// `bytes` has findings of `kind` (among others).
#[track_caller]
fn has(bytes: &[u8], kind: &str) {
    let (code, kinds) = check(bytes);
    assert!(kinds.contains_key(kind), "expected {kind}, got {kinds:?}");
    assert_eq!(code, Some(1));
}

const P: (u64, u64) = (1, 10);

#[test]
fn a_clean_file_has_no_findings() {
    let mut f = File::new();
    f.switch(100, 0, 0, 10)
        .switch(200, 0, 10, 11)
        .wakeup(250, 10, 11)
        .switch(300, 0, 11, 10)
        .switch(400, 0, 10, 0);
    f.complete(100, 500, P, "outer")
        .complete(150, 200, P, "inner")
        .event(160, P, "c", "flow", vec![], EventKind::FlowBegin { id: 1 })
        .complete(600, 700, (1, 11), "other")
        .event(
            650,
            (1, 11),
            "c",
            "flow",
            vec![],
            EventKind::FlowEnd { id: 1 },
        )
        .event(100, P, "c", "a", vec![], EventKind::AsyncBegin { id: 5 })
        .event(300, P, "c", "a", vec![], EventKind::AsyncEnd { id: 5 })
        .event(
            100,
            P,
            "c",
            "load",
            vec![Arg::new("value", ArgValue::Int64(3))],
            EventKind::Counter { id: 0 },
        )
        .event(300, P, "c", "mark", vec![], EventKind::Instant);
    let (code, kinds) = check(&f.bytes);
    assert!(kinds.is_empty(), "{kinds:?}");
    assert_eq!(code, Some(0));
}

#[test]
fn framing() {
    only(b"not a trace at all", "not_fxt", true);
    let mut f = File::new();
    f.raw(&[0]);
    f.event(1, P, "c", "lost", vec![], EventKind::Instant);
    only(&f.bytes, "zero_size_record", true);
    let mut f = File::new();
    f.event(1, P, "c", "cut", vec![], EventKind::Instant);
    let cut = f.bytes.len() - 8;
    only(&f.bytes[..cut], "truncated_record", true);
    let mut f = File::new();
    f.push(&Record::LargeBlob(LargeBlob::Attachment {
        category: "c".into(),
        name: "big".into(),
        payload: vec![7u8; 40_000].into(),
    }));
    only(&f.bytes, "large_record_desync", true);
    // A string record whose text is not UTF-8.
    let mut f = File::new();
    f.raw(&[2 | 2 << 4 | 1 << 16 | 1 << 32, 0xFF]);
    only(&f.bytes, "malformed_record", true);
}

#[test]
fn providers_and_time() {
    let mut f = File::new();
    f.push(&Record::ProviderSection { id: 9 });
    f.event(1, P, "c", "orphan", vec![], EventKind::Instant);
    only(&f.bytes, "undeclared_provider", true);
    // Initialization with 0 ticks per second: every event is dropped.
    let mut f = File::new();
    f.raw(&[1 | 2 << 4, 0]);
    f.event(1, P, "c", "e", vec![], EventKind::Instant);
    has(&f.bytes, "zero_ticks_per_second");
    let mut f = File::new();
    f.event(u64::MAX, P, "c", "late", vec![], EventKind::Instant);
    only(&f.bytes, "timestamp_overflow", true);
    let mut f = File { bytes: Vec::new() };
    f.push(&Record::Magic).push(&Record::ProviderInfo {
        id: 1,
        name: "untimed".into(),
    });
    f.cast();
    f.event(1, P, "c", "e", vec![], EventKind::Instant);
    only(&f.bytes, "no_initialization", false);
    let mut f = File::new();
    f.push(&Record::ProviderEvent { id: 1, event: 0 });
    only(&f.bytes, "provider_event_ignored", false);
    let mut f = File::new();
    f.push(&Record::Log {
        ts: 1,
        thread: ThreadRef::Inline {
            process: 1,
            thread: 10,
        },
        message: "hello".into(),
    });
    only(&f.bytes, "log_ignored", false);
}

#[test]
fn references() {
    let mut f = File::new();
    f.push(&Record::Event {
        ts: 1,
        thread: ThreadRef::Inline {
            process: 1,
            thread: 10,
        },
        category: StringRef::inline("c"),
        name: StringRef::Index(5),
        args: vec![].into(),
        kind: EventKind::Instant,
    });
    only(&f.bytes, "invalid_string_ref", true);
    let mut f = File::new();
    f.push(&Record::Event {
        ts: 1,
        thread: ThreadRef::Index(3),
        category: StringRef::inline("c"),
        name: StringRef::inline("e"),
        args: vec![].into(),
        kind: EventKind::Instant,
    });
    // Read as thread 0 of process 0.
    exactly(
        &f.bytes,
        &["record_in_process_zero", "undefined_thread_ref"],
        true,
    );
    let mut f = File::new();
    f.process(1 << 33).thread(1 << 33, 30);
    f.event(1, (1 << 33, 30), "c", "e", vec![], EventKind::Instant);
    only(&f.bytes, "koid_truncated", true);
    let mut f = File::new();
    f.push(&Record::KernelObject {
        koid: 30,
        obj_type: obj_type::THREAD,
        name: "lonely".into(),
        args: vec![].into(),
    });
    only(&f.bytes, "thread_without_process", true);
    let mut f = File::new();
    f.push(&Record::ThreadWakeup {
        ts: 1,
        cpu: 0,
        tid: 10,
        args: vec![Arg::new("weight", ArgValue::Int64(120))].into(),
    });
    only(&f.bytes, "invalid_arg_type", true);
}

#[test]
fn scheduling() {
    let mut f = File::new();
    f.switch(100, 0, 0, 10).switch(200, 0, 11, 0);
    only(&f.bytes, "switch_continuity", true);
    let mut f = File::new();
    f.switch(100, 0, 0, 10).switch(200, 1, 0, 10);
    only(&f.bytes, "switch_in_while_running", true);
    let mut f = File::new();
    f.switch(100, 0, 0, 10).wakeup(200, 10, 11);
    only(&f.bytes, "wakeup_of_running_thread", true);
    let mut f = File::new();
    f.wakeup(200, 10, 0);
    only(&f.bytes, "waker_koid_zero", true);
}

/// Perfetto's process tracker: where each thread lands.
#[test]
fn processes() {
    // A thread in scheduling records that no thread object places: its
    // slices go to a process with pid 0.
    let mut f = File::new();
    f.switch(100, 0, 0, 40).switch(200, 0, 40, 0);
    only(&f.bytes, "sched_thread_without_process", true);
    // The same with the compact record: it has a process in the record,
    // which the importer ignores (priority 0 would make it idle).
    let mut f = File::new();
    f.push(&Record::Thread {
        index: 1,
        process: 1,
        thread: 40,
    });
    f.push(&Record::LegacyContextSwitch {
        ts: 100,
        cpu: 0,
        outgoing_state: 3,
        outgoing_thread: ThreadRef::Index(1),
        incoming_thread: ThreadRef::Index(1),
        outgoing_priority: 120,
        incoming_priority: 120,
    });
    only(&f.bytes, "sched_thread_without_process", true);
    // A waker no record ever places.
    let mut f = File::new();
    f.wakeup(100, 10, 41);
    only(&f.bytes, "sched_thread_without_process", true);
    // One thread id in two processes: thread 10 of process 1 has events
    // in process 2 (a row no thread object names, so also a warning).
    let mut f = File::new();
    f.complete(100, 200, (2, 10), "elsewhere");
    exactly(
        &f.bytes,
        &["thread_split_across_processes", "thread_without_name"],
        true,
    );
    // Two thread objects for one thread id, in different processes.
    let mut f = File::new();
    f.thread(2, 10);
    only(&f.bytes, "thread_split_across_processes", true);
    // An event in process 0, and a thread object naming process 0.
    let mut f = File::new();
    f.thread(0, 42);
    f.event(1, (0, 42), "c", "e", vec![], EventKind::Instant);
    only(&f.bytes, "record_in_process_zero", true);
    // A thread object whose process never appears, and a counter of a
    // process nothing names.
    let mut f = File::new();
    f.thread(7, 70);
    only(&f.bytes, "process_without_name", true);
    let mut f = File::new();
    f.event(
        1,
        (8, 8),
        "c",
        "load",
        vec![Arg::new("value", ArgValue::Int64(3))],
        EventKind::Counter { id: 0 },
    );
    only(&f.bytes, "process_without_name", true);
    // A thread named only after its first record: a warning (Perfetto
    // applies every object first, a reader in file order does not).
    let mut f = File::new();
    f.event(1, (1, 50), "c", "e", vec![], EventKind::Instant);
    f.thread(1, 50);
    only(&f.bytes, "thread_named_after_its_records", false);
    let mut f = File::new();
    f.switch(100, 0, 0, 50).switch(200, 0, 50, 0);
    f.thread(1, 50);
    only(&f.bytes, "thread_named_after_its_records", false);
    // A thread no object names at all.
    let mut f = File::new();
    f.event(1, (1, 60), "c", "e", vec![], EventKind::Instant);
    only(&f.bytes, "thread_without_name", false);
    // Not findings: idle (compact record, priority 0 and no object) and
    // the cast's own threads.
    let mut f = File::new();
    f.push(&Record::LegacyContextSwitch {
        ts: 100,
        cpu: 0,
        outgoing_state: 3,
        outgoing_thread: ThreadRef::Inline {
            process: 0,
            thread: 0,
        },
        incoming_thread: ThreadRef::Inline {
            process: 1,
            thread: 10,
        },
        outgoing_priority: 0,
        incoming_priority: 120,
    });
    f.wakeup(150, 11, 10).complete(160, 170, (2, 20), "s");
    exactly(&f.bytes, &[], false);
}

#[test]
fn slices() {
    let mut f = File::new();
    f.complete(100, 200, P, "a").complete(150, 250, P, "b");
    only(&f.bytes, "overlapping_complete_slices", true);
    let mut f = File::new();
    f.complete(200, 100, P, "backwards");
    only(&f.bytes, "negative_duration", true);
    let mut f = File::new();
    f.complete(100, 200, P, "outer")
        .event(150, P, "c", "inner", vec![], EventKind::DurationBegin)
        .event(300, P, "c", "later", vec![], EventKind::Instant);
    only(&f.bytes, "misnested_end", true);
    let mut f = File::new();
    f.event(100, P, "c", "", vec![], EventKind::DurationEnd);
    only(&f.bytes, "unmatched_end", true);
    let mut f = File::new();
    f.event(100, P, "c", "open", vec![], EventKind::DurationBegin);
    only(&f.bytes, "unmatched_begin", true);
    let mut f = File::new();
    for i in 0..513 {
        f.event(100 + i, P, "c", "deep", vec![], EventKind::DurationBegin);
    }
    for i in 0..512 {
        f.event(1000 + i, P, "c", "", vec![], EventKind::DurationEnd);
    }
    only(&f.bytes, "max_depth_exceeded", true);
    // A thread created at 200 with a slice from 100.
    let mut f = File::new();
    f.thread(1, 1).thread(1, 50);
    f.event(
        200,
        (1, 1),
        "kernel:proc",
        "thread_create",
        vec![Arg::new("tid", ArgValue::Koid(50))],
        EventKind::Instant,
    )
    .complete(100, 300, (1, 50), "clone");
    only(&f.bytes, "slice_before_thread_creation", true);
    // An instant with the process scope word.
    let mut f = File::new();
    let header_at = f.bytes.len();
    f.event(1, P, "c", "scoped", vec![], EventKind::Instant);
    f.raw(&[1]);
    let mut header = u64::from_le_bytes(f.bytes[header_at..header_at + 8].try_into().unwrap());
    let words = (header >> 4) & 0xFFF;
    header = (header & !(0xFFF << 4)) | ((words + 1) << 4);
    f.bytes[header_at..header_at + 8].copy_from_slice(&header.to_le_bytes());
    only(&f.bytes, "instant_scope_ignored", false);
}

#[test]
fn async_slices() {
    let mut f = File::new();
    f.event(100, P, "c", "a", vec![], EventKind::AsyncBegin { id: 1 })
        .event(200, P, "c", "b", vec![], EventKind::AsyncEnd { id: 1 });
    has(&f.bytes, "async_end_mismatch");
    let mut f = File::new();
    f.event(
        100,
        (1, 10),
        "c",
        "a",
        vec![],
        EventKind::AsyncBegin { id: 7 },
    )
    .event(
        200,
        (1, 10),
        "c",
        "a",
        vec![],
        EventKind::AsyncEnd { id: 7 },
    )
    .event(
        300,
        (2, 20),
        "c",
        "b",
        vec![],
        EventKind::AsyncBegin { id: 7 },
    )
    .event(
        400,
        (2, 20),
        "c",
        "b",
        vec![],
        EventKind::AsyncEnd { id: 7 },
    );
    only(&f.bytes, "async_id_collision", true);
}

#[test]
fn flows() {
    let mut f = File::new();
    f.event(100, P, "c", "f", vec![], EventKind::FlowBegin { id: 1 });
    only(&f.bytes, "flow_outside_slice", true);
    let mut f = File::new();
    f.complete(100, 200, P, "s")
        .event(300, P, "c", "f", vec![], EventKind::FlowBegin { id: 1 });
    only(&f.bytes, "flow_bound_to_ended_slice", true);
    let mut f = File::new();
    f.complete(100, 200, P, "s")
        .event(150, P, "c", "f", vec![], EventKind::FlowEnd { id: 9 });
    only(&f.bytes, "flow_unmatched", true);
    let mut f = File::new();
    f.complete(100, 500, P, "s")
        .event(200, P, "c", "f", vec![], EventKind::FlowBegin { id: 3 })
        .event(300, P, "c", "f", vec![], EventKind::FlowBegin { id: 3 });
    only(&f.bytes, "flow_duplicate_id", true);
    let mut f = File::new();
    f.complete(100, 500, (1, 10), "s")
        .event(
            200,
            (1, 10),
            "c",
            "f",
            vec![],
            EventKind::FlowBegin { id: 4 },
        )
        .complete(100, 500, (2, 20), "s")
        .event(
            300,
            (2, 20),
            "c",
            "f",
            vec![],
            EventKind::FlowBegin { id: 4 },
        );
    only(&f.bytes, "flow_id_collision", true);
}

#[test]
fn counters() {
    let mut f = File::new();
    f.event(
        100,
        P,
        "c",
        "a:b",
        vec![Arg::new("c", ArgValue::Int64(1))],
        EventKind::Counter { id: 0 },
    )
    .event(
        200,
        P,
        "c",
        "a",
        vec![Arg::new("b:c", ArgValue::Int64(2))],
        EventKind::Counter { id: 0 },
    );
    only(&f.bytes, "counter_name_collision", true);
    let mut f = File::new();
    f.event(
        100,
        P,
        "c",
        "n",
        vec![Arg::new("text", ArgValue::String(StringRef::inline("x")))],
        EventKind::Counter { id: 0 },
    );
    only(&f.bytes, "non_numeric_counter", true);
}

#[test]
fn perfetto_packets() {
    // A blob of Perfetto packets (type 3) whose one packet claims 127 bytes
    // and has 2; tests/tests/samples.rs has the case of an interned id that
    // does not resolve.
    let mut f = File::new();
    f.push(&Record::Blob {
        name: StringRef::inline("perfetto"),
        blob_type: 3,
        payload: vec![0x0a, 0x7f, 0x08, 0x01].into(),
    });
    only(&f.bytes, "bad_perfetto_packet", true);
}

#[test]
fn the_text_report_names_each_finding_and_its_rule() {
    let mut f = File::new();
    f.complete(100, 200, P, "a").complete(150, 250, P, "b");
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join("check-text.fxt");
    std::fs::write(&path, &f.bytes).unwrap();
    let out = Command::new(trace_cli())
        .arg("check")
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("overlapping_complete_slices"), "{text}");
    assert!(text.contains("slice_tracker.cc"), "{text}");
    assert!(text.contains("\"b\""), "{text}");
    assert!(text.contains("complete durations"), "{text}");
    assert!(text.contains("1 violations."), "{text}");
}
