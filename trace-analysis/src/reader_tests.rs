//! Tests of the reader on traces written with `trace_common`'s encoder.

use std::borrow::Cow;

use proptest::prelude::*;
use trace_common::fxt::write::encode;
use trace_common::fxt::{Arg, ArgValue, EventKind, Record, StringRef, ThreadRef, obj_type};

use crate::event::{Dropped, Event, OutState, Value};
use crate::reader::{Context, ReadTraceError, read_trace};

fn trace(records: &[Record<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    encode(&Record::Magic, &mut out).unwrap();
    for r in records {
        encode(r, &mut out).unwrap();
    }
    out
}

fn event<'a>(ts: u64, tid: u64, name: &'a str, kind: EventKind, args: Vec<Arg<'a>>) -> Record<'a> {
    Record::Event {
        ts,
        thread: ThreadRef::Inline {
            process: 10,
            thread: tid,
        },
        category: StringRef::Index(1),
        name: StringRef::inline(name),
        args: Cow::Owned(args),
        kind,
    }
}

fn read(data: &[u8]) -> (Vec<Event>, Context) {
    let mut events = Vec::new();
    let (_, cx) = read_trace(data, &mut |e: &Event, _: &Context| events.push(e.clone())).unwrap();
    (events, cx)
}

#[test]
fn resolves_tables_pairs_and_nests() {
    let data = trace(&[
        Record::ProviderInfo {
            id: 2,
            name: "app".into(),
        },
        Record::Initialization {
            ticks_per_second: 1_000_000,
        },
        Record::String {
            index: 1,
            value: "cat".into(),
        },
        Record::KernelObject {
            koid: 10,
            obj_type: obj_type::PROCESS,
            name: StringRef::inline("server"),
            args: Cow::Owned(vec![]),
        },
        Record::KernelObject {
            koid: 11,
            obj_type: obj_type::THREAD,
            name: StringRef::inline("worker"),
            args: Cow::Owned(vec![Arg::new("process", ArgValue::Koid(10))]),
        },
        // µs ticks: outer begin 1 ms, inner complete 2..3 ms, outer end 5 ms.
        event(1_000, 11, "outer", EventKind::DurationBegin, vec![]),
        event(
            2_000,
            11,
            "inner",
            EventKind::DurationComplete { end_ts: 3_000 },
            vec![Arg::new("n", ArgValue::Int32(-4))],
        ),
        event(5_000, 11, "outer", EventKind::DurationEnd, vec![]),
        event(6_000, 11, "req", EventKind::AsyncBegin { id: 7 }, vec![]),
        event(9_000, 11, "req", EventKind::AsyncEnd { id: 7 }, vec![]),
        Record::ContextSwitch {
            ts: 10_000,
            cpu: 1,
            outgoing_state: 3,
            outgoing_tid: 11,
            incoming_tid: 0,
            args: Cow::Owned(vec![]),
        },
        Record::ThreadWakeup {
            ts: 11_000,
            cpu: 0,
            tid: 11,
            args: Cow::Owned(vec![Arg::new("waker", ArgValue::Koid(12))]),
        },
    ]);
    let (events, cx) = read(&data);
    assert_eq!(cx.provider_name(2), "app");
    assert_eq!(cx.process_name(10), "server");
    assert_eq!(cx.thread_name(11), "worker");
    let slices: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::Slice(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(slices.len(), 2);
    let outer = slices
        .iter()
        .find(|s| cx.strings.get(s.name) == "outer")
        .unwrap();
    let inner = slices
        .iter()
        .find(|s| cx.strings.get(s.name) == "inner")
        .unwrap();
    assert_eq!(
        (outer.ts, outer.dur, outer.depth),
        (1_000_000, 4_000_000, 0)
    );
    assert_eq!(
        (inner.ts, inner.dur, inner.depth),
        (2_000_000, 1_000_000, 1)
    );
    assert_eq!(inner.parent, Some(outer.id));
    assert_eq!(cx.strings.get(inner.category), "cat");
    assert_eq!(inner.args[0].1, Value::Int(-4));
    assert_eq!(inner.track.provider, 2);
    let a = events
        .iter()
        .find_map(|e| match e {
            Event::Async(a) => Some(a),
            _ => None,
        })
        .unwrap();
    assert_eq!((a.ts, a.dur, a.id), (6_000_000, 3_000_000, 7));
    let sw = events
        .iter()
        .find_map(|e| match e {
            Event::Switch(s) => Some(s),
            _ => None,
        })
        .unwrap();
    assert_eq!((sw.prev_tid, sw.prev_pid, sw.next_tid), (11, 10, 0));
    assert_eq!(sw.prev_state, OutState::Blocked);
    let w = events
        .iter()
        .find_map(|e| match e {
            Event::Wakeup(w) => Some(w),
            _ => None,
        })
        .unwrap();
    assert_eq!((w.tid, w.pid, w.waker_tid), (11, 10, Some(12)));
}

#[test]
fn process_labels_are_read_from_the_name_record_and_kept() {
    let labelled = |name: &'static str, args: Vec<Arg<'static>>| Record::KernelObject {
        koid: 42,
        obj_type: obj_type::PROCESS,
        name: StringRef::inline(name),
        args: Cow::Owned(args),
    };
    let data = trace(&[
        Record::ProviderInfo {
            id: 1,
            name: "kernel".into(),
        },
        labelled(
            "nginx",
            vec![
                Arg::new(
                    "cgroup",
                    ArgValue::String(StringRef::inline("/system.slice/docker-ab.scope")),
                ),
                Arg::new(
                    "container_runtime",
                    ArgValue::String(StringRef::inline("docker")),
                ),
                Arg::new(
                    "container_id",
                    ArgValue::String(StringRef::inline("ab12cd34ef56aa")),
                ),
                Arg::new("ns_pid", ArgValue::Uint64(1)),
            ],
        ),
        // A rename without labels keeps them.
        labelled("nginx: worker", vec![]),
    ]);
    let (_, cx) = read(&data);
    assert_eq!(cx.process_name(42), "nginx: worker");
    assert_eq!(cx.cgroup_of(42), Some("/system.slice/docker-ab.scope"));
    assert_eq!(cx.container_of(42).as_deref(), Some("docker ab12cd34ef56"));
    assert_eq!(cx.labels(42).and_then(|l| l.ns_pid), Some(1));
    assert_eq!(cx.labels(7), None);
}

#[test]
fn kernel_drop_counter_is_a_loss() {
    let data = trace(&[
        Record::ProviderInfo {
            id: 1,
            name: "kernel".into(),
        },
        Record::String {
            index: 1,
            value: "kernel".into(),
        },
        event(
            1,
            1,
            "dropped_events",
            EventKind::Counter { id: 0 },
            vec![
                Arg::new("cpu0", ArgValue::Uint64(0)),
                Arg::new("cpu1", ArgValue::Uint64(0)),
                Arg::new("other", ArgValue::Uint64(0)),
            ],
        ),
        event(
            5,
            1,
            "dropped_events",
            EventKind::Counter { id: 0 },
            vec![
                Arg::new("cpu0", ArgValue::Uint64(3)),
                Arg::new("cpu1", ArgValue::Uint64(4)),
                Arg::new("other", ArgValue::Uint64(2)),
            ],
        ),
        Record::ProviderEvent { id: 1, event: 0 },
        // Running totals: only what grew since the last sample counts.
        event(
            9,
            1,
            "dropped_events",
            EventKind::Counter { id: 0 },
            vec![
                Arg::new("cpu0", ArgValue::Uint64(3)),
                Arg::new("cpu1", ArgValue::Uint64(10)),
                Arg::new("other", ArgValue::Uint64(2)),
            ],
        ),
    ]);
    let (events, _) = read(&data);
    let losses: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::Loss(l) => Some(l),
            _ => None,
        })
        .collect();
    let dropped = |cpu, events| Dropped { cpu, events };
    assert_eq!(losses.len(), 3, "no loss for the samples of 0");
    assert_eq!(losses[0].events, Some(9));
    assert_eq!(
        losses[0].per_cpu,
        vec![dropped(Some(0), 3), dropped(Some(1), 4), dropped(None, 2)]
    );
    assert_eq!(losses[1].events, None);
    assert!(losses[1].per_cpu.is_empty());
    assert_eq!(losses[2].events, Some(6));
    assert_eq!(losses[2].per_cpu, vec![dropped(Some(1), 6)]);
}

#[test]
fn reads_across_chunk_boundaries() {
    // More records than one read chunk holds.
    let mut records = Vec::new();
    for i in 0..200_000u64 {
        records.push(event(
            i * 10,
            1,
            "tick",
            EventKind::DurationComplete { end_ts: i * 10 + 5 },
            vec![],
        ));
    }
    let data = trace(&records);
    assert!(data.len() > trace_common::fxt::stream::CHUNK);
    let mut n = 0;
    let (stats, _) = read_trace(&data[..], &mut |e: &Event, _: &Context| {
        if matches!(e, Event::Slice(_)) {
            n += 1;
        }
    })
    .unwrap();
    assert_eq!(n, 200_000);
    assert_eq!(stats.errors, 0);
    assert_eq!(stats.bytes, data.len() as u64);
}

#[test]
fn a_complete_event_marked_unfinished_is_unfinished() {
    let data = trace(&[
        event(
            1,
            1,
            "read",
            EventKind::DurationComplete { end_ts: 9 },
            vec![Arg::new("unfinished", ArgValue::Bool(true))],
        ),
        event(
            10,
            1,
            "write",
            EventKind::DurationComplete { end_ts: 12 },
            vec![],
        ),
    ]);
    let (events, cx) = read(&data);
    let flags: Vec<(&str, bool)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Slice(s) => Some((cx.strings.get(s.name), s.unfinished)),
            _ => None,
        })
        .collect();
    assert_eq!(flags, vec![("read", true), ("write", false)]);
}

#[test]
fn not_fxt_is_an_error() {
    let r = read_trace(
        &b"hello world, not a trace"[..],
        &mut |_: &Event, _: &Context| {},
    );
    assert!(matches!(r, Err(ReadTraceError::NotFxt)));
    let r = read_trace(&b""[..], &mut |_: &Event, _: &Context| {});
    assert!(matches!(r, Err(ReadTraceError::NotFxt)));
}

#[test]
fn truncated_trace_keeps_what_came_before() {
    let data = trace(&[
        event(1, 1, "a", EventKind::DurationComplete { end_ts: 2 }, vec![]),
        event(3, 1, "b", EventKind::DurationComplete { end_ts: 4 }, vec![]),
    ]);
    let cut = &data[..data.len() - 5];
    let mut n = 0;
    let (stats, _) = read_trace(cut, &mut |e: &Event, _: &Context| {
        if matches!(e, Event::Slice(_)) {
            n += 1;
        }
    })
    .unwrap();
    assert_eq!(n, 1);
    assert_eq!(stats.errors, 1);
}

proptest! {
    #[test]
    fn garbage_after_the_magic_never_panics(tail in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let mut data = trace(&[]);
        data.extend_from_slice(&tail);
        let _ = read_trace(&data[..], &mut |_: &Event, _: &Context| {});
    }

    #[test]
    fn corrupted_records_never_panic(seed in proptest::collection::vec((0usize..2000, any::<u8>()), 1..40)) {
        let mut data = trace(&[
            Record::ProviderInfo { id: 1, name: "kernel".into() },
            Record::String { index: 1, value: "kernel:syscall".into() },
            event(1, 1, "a", EventKind::DurationBegin, vec![Arg::new("x", ArgValue::Uint64(1))]),
            event(2, 1, "b", EventKind::DurationComplete { end_ts: 9 }, vec![]),
            event(3, 1, "a", EventKind::DurationEnd, vec![]),
            Record::ContextSwitch { ts: 4, cpu: 0, outgoing_state: 1, outgoing_tid: 1, incoming_tid: 2, args: Cow::Owned(vec![]) },
        ]);
        for (pos, byte) in seed {
            if pos >= 8 && pos < data.len() {
                data[pos] = byte;
            }
        }
        let _ = read_trace(&data[..], &mut |_: &Event, _: &Context| {});
    }
}

/// A trace of every kind of record, with a span still open at its end and
/// the trace's last time on records other than durations.
fn every_kind() -> Vec<u8> {
    trace(&[
        Record::ProviderInfo {
            id: 2,
            name: "app".into(),
        },
        Record::String {
            index: 1,
            value: "cat".into(),
        },
        Record::KernelObject {
            koid: 10,
            obj_type: obj_type::PROCESS,
            name: StringRef::inline("server"),
            args: Cow::Owned(vec![]),
        },
        Record::KernelObject {
            koid: 11,
            obj_type: obj_type::THREAD,
            name: StringRef::inline("worker"),
            args: Cow::Owned(vec![Arg::new("process", ArgValue::Koid(10))]),
        },
        event(1_000, 11, "open", EventKind::DurationBegin, vec![]),
        event(
            2_000,
            11,
            "inner",
            EventKind::DurationComplete { end_ts: 3_000 },
            vec![],
        ),
        event(4_000, 11, "mark", EventKind::Instant, vec![]),
        event(
            5_000,
            11,
            "depth",
            EventKind::Counter { id: 1 },
            vec![Arg::new("v", ArgValue::Int32(3))],
        ),
        event(6_000, 11, "req", EventKind::AsyncBegin { id: 7 }, vec![]),
        event(
            7_000,
            11,
            "late",
            EventKind::DurationComplete { end_ts: 90_000 },
            vec![],
        ),
        Record::ContextSwitch {
            ts: 95_000,
            cpu: 1,
            outgoing_state: 3,
            outgoing_tid: 11,
            incoming_tid: 0,
            args: Cow::Owned(vec![]),
        },
        Record::ThreadWakeup {
            ts: 99_000,
            cpu: 0,
            tid: 11,
            args: Cow::Owned(vec![]),
        },
    ])
}

/// The events read with `wants`, as text with names resolved, and the
/// trace's last time.
fn read_wanting(data: &[u8], wants: crate::Wants) -> (Vec<String>, Option<u64>) {
    let mut events = Vec::new();
    let (stats, _) = crate::read_trace_wanting(
        data,
        &mut |e: &Event, cx: &Context| {
            let text = match e {
                Event::Process { pid, name } => format!("process {pid} {}", cx.strings.get(*name)),
                Event::Thread { tid, name, .. } => {
                    format!("thread {tid} {}", cx.strings.get(*name))
                }
                Event::Slice(s) => format!(
                    "slice {} {} {} {} {}",
                    cx.strings.get(s.name),
                    s.ts,
                    s.dur,
                    s.depth,
                    s.unfinished
                ),
                Event::Instant(i) => format!("instant {}", cx.strings.get(i.name)),
                Event::Counter(c) => format!("counter {}", cx.strings.get(c.name)),
                Event::Async(a) => format!("async {} {} {}", a.ts, a.dur, a.unfinished),
                Event::Switch(s) => format!("switch {}", s.ts),
                Event::Wakeup(w) => format!("wakeup {}", w.ts),
                other => format!("{other:?}"),
            };
            events.push(text);
        },
        wants,
    )
    .unwrap();
    (events, stats.last_ts)
}

#[test]
fn only_the_events_wanted_are_read_with_the_same_values() {
    use crate::Wants;
    let data = every_kind();
    let (all, last) = read_wanting(&data, Wants::ALL);
    assert_eq!(last, Some(99_000));
    assert!(
        all.contains(&"slice open 1000 98000 0 true".to_owned()),
        "{all:?}"
    );
    let kinds = [
        (
            "slice",
            Wants {
                durations: true,
                end_time: true,
                ..Wants::default()
            },
        ),
        (
            "instant",
            Wants {
                instants: true,
                ..Wants::default()
            },
        ),
        (
            "counter",
            Wants {
                counters: true,
                ..Wants::default()
            },
        ),
        (
            "async",
            Wants {
                asyncs: true,
                end_time: true,
                ..Wants::default()
            },
        ),
        (
            "switch",
            Wants {
                switches: true,
                ..Wants::default()
            },
        ),
        (
            "wakeup",
            Wants {
                wakeups: true,
                ..Wants::default()
            },
        ),
    ];
    for (kind, wants) in kinds {
        let (got, _) = read_wanting(&data, wants);
        let want: Vec<String> = all
            .iter()
            .filter(|e| e.starts_with(kind) || e.starts_with("process") || e.starts_with("thread"))
            .cloned()
            .collect();
        assert!(want.len() > 2, "{kind}: {all:?}");
        assert_eq!(got, want, "{kind}");
    }
    // Nothing but the names: no event decoded.
    let (names, _) = read_wanting(&data, Wants::default());
    assert_eq!(names, ["process 10 server", "thread 11 worker"]);
}
