//! A stream cut anywhere reads, in the file after the cut, as it reads in
//! the whole stream; the file before the cut ends every slice it begins.

use std::collections::BTreeMap;

use proptest::prelude::*;
use trace_common::fxt::read::{TraceState, decode};
use trace_common::fxt::write::encode;
use trace_common::fxt::{Arg, ArgValue, EventKind, Record, StringRef, ThreadRef};
use trace_split::{Limit, Rotation, Rotator, StreamState, numbered, parse_limit};

fn rec(r: Record<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    encode(&r, &mut out).expect("encodes");
    out
}

fn string(index: u16, value: &str) -> Vec<u8> {
    rec(Record::String {
        index,
        value: value.to_owned().into(),
    })
}

fn event(ts: u64, thread: ThreadRef, cat: u16, name: u16, kind: EventKind, seq: u64) -> Vec<u8> {
    rec(Record::Event {
        ts,
        thread,
        category: StringRef::Index(cat),
        name: StringRef::Index(name),
        args: vec![Arg::new(StringRef::inline("seq"), ArgValue::Uint64(seq))].into(),
        kind,
    })
}

fn thread_object(koid: u64, process: u64, name: StringRef<'static>) -> Vec<u8> {
    rec(Record::KernelObject {
        koid,
        obj_type: trace_common::fxt::obj_type::THREAD,
        name,
        args: vec![Arg::new(
            StringRef::inline("process"),
            ArgValue::Koid(process),
        )]
        .into(),
    })
}

/// A stream of two providers whose tables use the same indexes for other
/// strings and threads, with names that change, nested slices, switches and
/// a provider re-declared (its tables reset).
fn stream() -> Vec<Vec<u8>> {
    let mut r = vec![rec(Record::Magic)];
    r.push(rec(Record::ProviderInfo {
        id: 1,
        name: "kernel".into(),
    }));
    r.push(rec(Record::Initialization {
        ticks_per_second: 1_000_000_000,
    }));
    r.push(string(1, "sched"));
    r.push(string(2, "worker-a"));
    r.push(thread_object(101, 100, StringRef::Index(2)));
    r.push(rec(Record::Thread {
        index: 1,
        process: 100,
        thread: 101,
    }));
    r.push(string(3, "syscall"));
    r.push(rec(Record::ProviderInfo {
        id: 2,
        name: "app".into(),
    }));
    r.push(rec(Record::Initialization {
        ticks_per_second: 1_000_000_000,
    }));
    r.push(string(1, "app"));
    r.push(string(2, "work"));
    r.push(string(3, "tick"));
    r.push(rec(Record::Thread {
        index: 1,
        process: 200,
        thread: 201,
    }));
    let t1 = ThreadRef::Index(1);
    let mut seq = 0;
    let mut ts = 1000;
    for round in 0..6u64 {
        // app: a slice with a nested slice and an instant inside
        r.push(rec(Record::ProviderSection { id: 2 }));
        r.push(event(ts, t1, 1, 2, EventKind::DurationBegin, seq));
        seq += 1;
        r.push(event(ts + 1, t1, 1, 3, EventKind::Instant, seq));
        seq += 1;
        r.push(event(ts + 2, t1, 1, 2, EventKind::DurationBegin, seq));
        seq += 1;
        // kernel in between: a rename (index 2 redefined), a call
        r.push(rec(Record::ProviderSection { id: 1 }));
        if round == 2 {
            r.push(string(2, "worker-b"));
            r.push(thread_object(101, 100, StringRef::Index(2)));
            r.push(string(2, "unrelated"));
        }
        r.push(event(
            ts + 3,
            t1,
            3,
            1,
            EventKind::DurationComplete { end_ts: ts + 4 },
            seq,
        ));
        seq += 1;
        r.push(rec(Record::ContextSwitch {
            ts: ts + 5,
            cpu: 0,
            outgoing_state: 3,
            outgoing_tid: 101,
            incoming_tid: 0,
            args: vec![].into(),
        }));
        r.push(rec(Record::ProviderSection { id: 2 }));
        r.push(event(ts + 6, t1, 1, 2, EventKind::DurationEnd, seq));
        seq += 1;
        r.push(event(
            ts + 7,
            ThreadRef::Inline {
                process: 200,
                thread: 202,
            },
            1,
            3,
            EventKind::Instant,
            seq,
        ));
        seq += 1;
        r.push(event(ts + 8, t1, 1, 2, EventKind::DurationEnd, seq));
        seq += 1;
        if round == 3 {
            // Declared again: its tables start empty.
            r.push(rec(Record::ProviderInfo {
                id: 2,
                name: "app".into(),
            }));
            r.push(string(1, "app"));
            r.push(string(2, "work"));
            r.push(string(3, "tick"));
            r.push(rec(Record::Thread {
                index: 1,
                process: 200,
                thread: 201,
            }));
        }
        ts += 100;
    }
    r
}

/// Every event and switch of `records` as a reader sees it: provider,
/// strings, thread koids and the thread's name, time, kind, arguments.
fn resolve(records: &[u8]) -> Vec<String> {
    let mut state = TraceState::new();
    let mut names: BTreeMap<u64, String> = BTreeMap::new();
    let mut out = Vec::new();
    let mut at = 0;
    while at < records.len() {
        let (record, len) = decode(&records[at..]).expect("decodes");
        at += len;
        state.apply(&record);
        let provider = state.current_provider().1.unwrap_or("?").to_owned();
        let s = |r: &StringRef<'_>| state.string(r).unwrap_or("<undefined>").to_owned();
        match &record {
            Record::KernelObject { koid, name, .. } => {
                names.insert(*koid, s(name));
            }
            Record::Event {
                ts,
                thread,
                category,
                name,
                args,
                kind,
            } => {
                let (p, t) = state.thread(*thread).unwrap_or((0, 0));
                let args: Vec<String> = args
                    .iter()
                    .map(|a| format!("{}={:?}", s(&a.name), a.value))
                    .collect();
                out.push(format!(
                    "{provider} {}:{} {p}/{t}({}) @{ts} {kind:?} {args:?}",
                    s(category),
                    s(name),
                    names.get(&t).map_or("?", String::as_str)
                ));
            }
            Record::ContextSwitch {
                ts, outgoing_tid, ..
            } => out.push(format!(
                "{provider} switch @{ts} out {outgoing_tid}({})",
                names.get(outgoing_tid).map_or("?", String::as_str)
            )),
            _ => {}
        }
    }
    out
}

/// `event` without its thread's name.
fn unnamed(event: &str) -> String {
    match (event.find('('), event.find(')')) {
        (Some(a), Some(b)) if a < b => format!("{}{}", &event[..a], &event[b + 1..]),
        _ => event.to_owned(),
    }
}

/// Begins minus ends per thread at the end of `records`; none below zero.
fn balance(records: &[u8]) -> BTreeMap<(u64, u64), i64> {
    let mut state = TraceState::new();
    let mut open = BTreeMap::new();
    let mut at = 0;
    while at < records.len() {
        let (record, len) = decode(&records[at..]).expect("decodes");
        at += len;
        state.apply(&record);
        if let Record::Event { thread, kind, .. } = &record {
            let key = state.thread(*thread).expect("thread defined");
            let n: &mut i64 = open.entry(key).or_default();
            match kind {
                EventKind::DurationBegin => *n += 1,
                EventKind::DurationEnd => {
                    *n -= 1;
                    assert!(*n >= 0, "an end without a begin on {key:?}");
                }
                _ => {}
            }
        }
    }
    open.retain(|_, n| *n != 0);
    open
}

/// Cuts `records` before record `k`: the file before (with the ends it
/// closes with), the file after (preamble, then the rest), and how many
/// begins the preamble repeats.
fn cut(records: &[Vec<u8>], k: usize) -> (Vec<u8>, Vec<u8>, usize) {
    let mut state = StreamState::new();
    let mut before = Vec::new();
    for r in &records[..k] {
        before.extend(r);
        state.observe(r);
    }
    before.extend(state.close_open());
    let preamble = state.preamble();
    let repeated = resolve(&preamble).len();
    let mut after = preamble;
    for r in &records[k..] {
        after.extend(r);
    }
    (before, after, repeated)
}

fn check_every_cut(records: &[Vec<u8>]) {
    let whole: Vec<u8> = records.concat();
    let all = resolve(&whole);
    for k in 1..=records.len() {
        let (before, after, repeated) = cut(records, k);
        let first = resolve(&records[..k].concat());
        // The file before: what the stream said up to the cut, every slice
        // ended.
        let got_before = resolve(&before);
        assert_eq!(got_before[..first.len()], first[..], "cut at {k}");
        assert!(
            got_before[first.len()..]
                .iter()
                .all(|e| e.contains("DurationEnd") && e.contains("cut")),
            "cut at {k}: {:?}",
            &got_before[first.len()..]
        );
        assert!(balance(&before).is_empty(), "cut at {k}");
        // The file after: the rest as the whole stream reads it.
        let got_after = resolve(&after);
        assert_eq!(got_after[repeated..], all[first.len()..], "cut at {k}");
        assert!(balance(&after).is_empty(), "cut at {k}");
        // The repeated begins are the open ones, as they were (their
        // thread named as it is named now).
        let earlier: Vec<String> = all[..first.len()].iter().map(|e| unnamed(e)).collect();
        for begin in &got_after[..repeated] {
            assert!(begin.contains("DurationBegin"), "{begin}");
            assert!(earlier.contains(&unnamed(begin)), "{begin}");
        }
    }
}

#[test]
fn every_cut_of_a_stream_reads_as_the_whole() {
    let records = stream();
    check_every_cut(&records);
    // The test can fail: without the preamble, the rest does not resolve.
    let records = stream();
    let k = records.len() / 2;
    let rest = resolve(&records[k..].concat());
    let all = resolve(&records.concat());
    assert_ne!(rest[..], all[all.len() - rest.len()..]);
}

#[test]
fn a_name_is_the_one_it_had_where_the_file_begins() {
    let records = stream();
    let renamed = records
        .iter()
        .position(|r| r == &string(2, "worker-b"))
        .expect("renamed");
    let (_, after, _) = cut(&records, renamed + 3);
    let got = resolve(&after);
    assert!(got.iter().any(|e| e.contains("(worker-b)")), "{got:?}");
    assert!(!got.iter().any(|e| e.contains("(worker-a)")), "{got:?}");
    let (before, _, _) = cut(&records, renamed + 3);
    let got = resolve(&before);
    assert!(got.iter().any(|e| e.contains("(worker-a)")), "{got:?}");
}

fn any_stream() -> impl Strategy<Value = Vec<Vec<u8>>> {
    // Operations on two providers and three threads.
    let op = (0u8..8, 0u8..3, 0u8..4);
    proptest::collection::vec(op, 1..120).prop_map(|ops| {
        let mut r = vec![rec(Record::Magic)];
        for id in [1u32, 2] {
            r.push(rec(Record::ProviderInfo {
                id,
                name: format!("p{id}").into(),
            }));
            for t in 1..=3u8 {
                r.push(rec(Record::Thread {
                    index: t,
                    process: u64::from(id) * 100,
                    thread: u64::from(id) * 100 + u64::from(t),
                }));
            }
            for i in 1..=4u16 {
                r.push(string(i, &format!("p{id}s{i}")));
            }
        }
        let mut ts = 1;
        for (n, (op, t, s)) in ops.into_iter().enumerate() {
            ts += 3;
            let thread = ThreadRef::Index(t + 1);
            let name = u16::from(s) + 1;
            let seq = n as u64;
            r.push(match op {
                0 => rec(Record::ProviderSection { id: 1 }),
                1 => rec(Record::ProviderSection { id: 2 }),
                2 => event(ts, thread, 1, name, EventKind::DurationBegin, seq),
                3 => event(ts, thread, 1, name, EventKind::DurationEnd, seq),
                4 => event(ts, thread, 2, name, EventKind::Instant, seq),
                5 => string(name, &format!("renamed{n}")),
                6 => thread_object(200 + u64::from(t) + 1, 200, StringRef::Index(name)),
                _ => event(
                    ts,
                    thread,
                    1,
                    name,
                    EventKind::DurationComplete { end_ts: ts + 1 },
                    seq,
                ),
            });
        }
        r
    })
}

/// Ends that would have no begin are dropped, as a writer never makes them.
fn well_formed(records: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut state = TraceState::new();
    let mut open: BTreeMap<(u64, u64), u32> = BTreeMap::new();
    records
        .into_iter()
        .filter(|r| {
            let (record, _) = decode(r).expect("decodes");
            state.apply(&record);
            if let Record::Event {
                thread,
                kind: EventKind::DurationEnd,
                ..
            } = &record
            {
                let n = open
                    .entry(state.thread(*thread).expect("thread"))
                    .or_default();
                if *n == 0 {
                    return false;
                }
                *n -= 1;
            }
            if let Record::Event {
                thread,
                kind: EventKind::DurationBegin,
                ..
            } = &record
            {
                *open
                    .entry(state.thread(*thread).expect("thread"))
                    .or_default() += 1;
            }
            true
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn random_streams_cut_anywhere(records in any_stream()) {
        let mut records = well_formed(records);
        // Whatever stays open is ended at the stream's end, as the manager
        // does at a stop.
        let mut state = StreamState::new();
        for r in &records {
            state.observe(r);
        }
        let ends = state.close_open();
        let mut at = 0;
        while at < ends.len() {
            let (_, len) = decode(&ends[at..]).expect("decodes");
            records.push(ends[at..at + len].to_vec());
            at += len;
        }
        check_every_cut(&records);
    }
}

#[test]
fn limits_parse() {
    assert_eq!(parse_limit("256M"), Ok(Limit::Bytes(256 << 20)));
    assert_eq!(parse_limit("64k"), Ok(Limit::Bytes(64 << 10)));
    assert_eq!(parse_limit("1G"), Ok(Limit::Bytes(1 << 30)));
    assert_eq!(parse_limit("4096"), Ok(Limit::Bytes(4096)));
    assert_eq!(
        parse_limit("60s"),
        Ok(Limit::Time(std::time::Duration::from_secs(60)))
    );
    assert_eq!(
        parse_limit("1.5min"),
        Ok(Limit::Time(std::time::Duration::from_secs(90)))
    );
    assert_eq!(
        parse_limit("250ms"),
        Ok(Limit::Time(std::time::Duration::from_millis(250)))
    );
    for bad in ["", "0", "-1M", "12x", "M", "1e400s"] {
        assert!(parse_limit(bad).is_err(), "{bad}");
    }
}

#[test]
fn rotation_by_size_keeps_the_newest_files_and_each_reads_alone() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("t.fxt");
    let mut records = stream();
    for _ in 0..5 {
        records.extend(stream().into_iter().skip(1));
    }
    let whole = records.concat();
    let summary = Rotator::new(Rotation {
        base: base.clone(),
        limit: Limit::Bytes(2048),
        max_files: Some(3),
    })
    .copy_from(whole.as_slice());
    assert!(summary.error.is_none(), "{:?}", summary.error);
    assert_eq!(summary.files.len(), 3);
    assert!(!summary.deleted.is_empty());
    assert_eq!(summary.deleted[0], numbered(&base, 1));
    assert_eq!(summary.stream_bytes, whole.len() as u64);
    for (f, n) in summary.deleted.iter().zip(1..) {
        assert_eq!(*f, numbered(&base, n));
        assert!(!f.exists());
    }
    let first_kept = summary.deleted.len() as u32 + 1;
    for (f, n) in summary.files.iter().zip(first_kept..) {
        assert_eq!(*f, numbered(&base, n));
    }
    // Without deletion, the files together hold every event once.
    let summary = Rotator::new(Rotation {
        base: dir.path().join("all.fxt"),
        limit: Limit::Bytes(2048),
        max_files: None,
    })
    .copy_from(whole.as_slice());
    assert!(summary.files.len() > 3);
    let mut seqs = Vec::new();
    for f in &summary.files {
        let bytes = std::fs::read(f).unwrap();
        assert!(balance(&bytes).is_empty(), "{}", f.display());
        let mut state = TraceState::new();
        let mut at = 0;
        let mut first = true;
        while at < bytes.len() {
            let (record, len) = decode(&bytes[at..]).unwrap();
            if first {
                assert_eq!(record, Record::Magic);
                first = false;
            }
            at += len;
            state.apply(&record);
            if let Record::Event { args, .. } = &record
                && let Some(ArgValue::Uint64(seq)) = state.arg(args, "seq")
            {
                seqs.push(*seq);
            }
        }
        // A file is as large as the limit at most, unless one record and
        // what it repeats are larger.
        assert!(bytes.len() <= 2048 + 1024, "{}", bytes.len());
    }
    // Repeated begins (in a later file's start) come again; every other
    // event is in one file only.
    let mut whole_seqs = Vec::new();
    let mut state = TraceState::new();
    let mut at = 0;
    while at < whole.len() {
        let (record, len) = decode(&whole[at..]).unwrap();
        at += len;
        state.apply(&record);
        if let Record::Event { args, .. } = &record
            && let Some(ArgValue::Uint64(seq)) = state.arg(args, "seq")
        {
            whole_seqs.push(*seq);
        }
    }
    seqs.sort_unstable();
    seqs.dedup();
    whole_seqs.sort_unstable();
    whole_seqs.dedup();
    assert_eq!(seqs, whole_seqs);
}

#[test]
fn rotation_by_time() {
    let dir = tempfile::tempdir().unwrap();
    let mut rotator = Rotator::new(Rotation {
        base: dir.path().join("t.fxt"),
        limit: Limit::Time(std::time::Duration::from_millis(30)),
        max_files: None,
    });
    for (n, r) in stream().iter().enumerate() {
        rotator.write_record(r).unwrap();
        if n % 20 == 19 {
            std::thread::sleep(std::time::Duration::from_millis(40));
        }
    }
    let summary = rotator.finish().unwrap();
    assert!(summary.files.len() >= 3, "{:?}", summary.files);
}

#[test]
fn a_truncated_stream_keeps_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let whole = stream().concat();
    let summary = Rotator::new(Rotation {
        base: dir.path().join("t.fxt"),
        limit: Limit::Bytes(1 << 20),
        max_files: None,
    })
    .copy_from(&whole[..whole.len() - 3]);
    assert!(matches!(
        summary.error,
        Some(trace_split::SplitError::Truncated { .. })
    ));
    assert_eq!(summary.files.len(), 1);
    let bytes = std::fs::read(&summary.files[0]).unwrap();
    assert!(!bytes.is_empty() && bytes.len() < whole.len());
}

#[test]
fn a_rotated_file_holds_no_flow_end_whose_begin_is_in_an_earlier_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = vec![rec(Record::Magic)];
    r.push(rec(Record::ProviderInfo {
        id: 1,
        name: "kernel".into(),
    }));
    r.push(string(1, "sched"));
    r.push(string(2, "wakeup"));
    let (a, b) = (
        ThreadRef::Inline {
            process: 100,
            thread: 101,
        },
        ThreadRef::Inline {
            process: 100,
            thread: 102,
        },
    );
    // Flows written as the recorder writes them: each end beside its
    // begin, so that a size limit falls between the two now and then.
    for id in 0..200u64 {
        let ts = 1000 + id * 10;
        r.push(event(ts, a, 1, 2, EventKind::FlowBegin { id }, id));
        r.push(event(ts, b, 1, 2, EventKind::FlowEnd { id }, id));
        if id % 3 == 0 {
            r.push(event(ts + 1, a, 1, 2, EventKind::Instant, id));
        }
    }
    let whole = r.concat();
    let summary = Rotator::new(Rotation {
        base: dir.path().join("t.fxt"),
        limit: Limit::Bytes(1000),
        max_files: None,
    })
    .copy_from(whole.as_slice());
    assert!(summary.error.is_none(), "{:?}", summary.error);
    assert!(summary.files.len() > 3);
    let mut ends = 0;
    for f in &summary.files {
        let bytes = std::fs::read(f).unwrap();
        let mut begun = std::collections::HashSet::new();
        let mut at = 0;
        while at < bytes.len() {
            let (record, len) = decode(&bytes[at..]).unwrap();
            at += len;
            match record {
                Record::Event {
                    kind: EventKind::FlowBegin { id },
                    ..
                } => {
                    begun.insert(id);
                }
                Record::Event {
                    kind: EventKind::FlowEnd { id },
                    ..
                } => {
                    assert!(begun.contains(&id), "{}: flow {id}", f.display());
                    ends += 1;
                }
                _ => {}
            }
        }
    }
    // The ends left out are those whose begin closed a file.
    assert!(summary.flows_cut > 0);
    assert_eq!(ends + summary.flows_cut, 200);
}
