//! Spans and events of a program instrumented with the `tracing` crate,
//! written by the real engine into a real buffer.

use trace_common::fxt::read::{Reader, TraceState};
use trace_common::fxt::write::encode;
use trace_common::fxt::{ArgValue, EventKind, Record};
use trace_common::provider::buffer::{HEADER_BYTES, Header, Layout, RecordWalk, WalkMode};
use trace_common::provider::{BufferDisposition, BufferingMode};
use tracing_subscriber::layer::SubscriberExt;

use super::TraceLayer;
use crate::engine;

#[test]
fn spans_become_durations_and_events_become_instants() {
    let seen = recorded(|| {
        let span = tracing::info_span!(target: "layer_test::net", "send", bytes = 7u64, peer = "a");
        {
            let _e = span.enter();
            tracing::warn!(target: "layer_test::net", attempt = 2i64, "retrying");
        }
        tracing::info!(target: "elsewhere", "not enabled");
    });
    let arg = |e: &Written, n: &str| {
        e.3.iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].0, "layer_test::net");
    assert_eq!(seen[0].1, "retrying");
    assert_eq!(seen[0].2, EventKind::Instant);
    assert_eq!(arg(&seen[0], "level"), "WARN");
    assert_eq!(arg(&seen[0], "attempt"), "Int64(2)");
    assert_eq!(seen[1].1, "send");
    assert!(matches!(seen[1].2, EventKind::DurationComplete { .. }));
    assert_eq!(arg(&seen[1], "bytes"), "7");
}

/// An event written: category, name, kind and arguments (as text).
type Written = (String, String, EventKind, Vec<(String, String)>);

/// What `f` writes through the layer with `layer_test*` enabled.
fn recorded(f: impl FnOnce()) -> Vec<Written> {
    let _g = engine::serial();
    let mut words = vec![0u64; (1 << 20) / 8];
    let len = words.len() * 8;
    // SAFETY: `words` outlives the trace: the engine is terminated below.
    unsafe {
        engine::initialize(
            words.as_mut_ptr().cast(),
            len,
            BufferingMode::Oneshot,
            vec!["layer_test*".to_owned()],
            None,
        )
    }
    .unwrap();
    engine::start(BufferDisposition::ClearEntire, vec![]);
    let subscriber = tracing_subscriber::registry().with(TraceLayer);
    tracing::subscriber::with_default(subscriber, f);
    engine::stop();
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    engine::terminate();
    let layout = Layout::new(BufferingMode::Oneshot, len as u64).unwrap();
    let h = Header::read(bytes[..HEADER_BYTES].try_into().unwrap());
    let mut fxt = Vec::new();
    encode(&Record::Magic, &mut fxt).unwrap();
    let d = layout.durable_offset() as usize;
    for r in RecordWalk::new(
        &bytes[d..d + h.durable_data_end as usize],
        WalkMode::Durable,
    ) {
        fxt.extend_from_slice(r.bytes);
    }
    let r0 = layout.rolling_offset(0) as usize;
    for r in RecordWalk::new(
        &bytes[r0..r0 + h.rolling_data_end[0] as usize],
        WalkMode::Chunked,
    ) {
        fxt.extend_from_slice(r.bytes);
    }
    let mut state = TraceState::new();
    let mut seen = Vec::new();
    for r in Reader::new(&fxt) {
        let (_, rec) = r.unwrap();
        state.apply(&rec);
        if let Record::Event {
            category,
            name,
            args,
            kind,
            ..
        } = &rec
        {
            let args = args
                .iter()
                .map(|a| {
                    let v = match &a.value {
                        ArgValue::String(s) => state.string(s).unwrap().to_owned(),
                        ArgValue::Uint64(v) => v.to_string(),
                        v => format!("{v:?}"),
                    };
                    (state.string(&a.name).unwrap().to_owned(), v)
                })
                .collect();
            seen.push((
                state.string(category).unwrap().to_owned(),
                state.string(name).unwrap().to_owned(),
                *kind,
                args,
            ));
        }
    }
    seen
}

#[test]
fn a_span_polled_again_is_an_async_slice_with_flows_between_its_polls_and_wakes() {
    let seen = recorded(|| {
        let task = tracing::info_span!(target: "layer_test::rt", "request", n = 1u64);
        let task_id = task.id().unwrap().into_u64();
        drop(task.enter());
        // Woken from outside any span (a timer): a delay, no flow.
        tracing::trace!(target: "tokio::task::waker", op = "waker.wake", task.id = task_id);
        drop(task.enter());
        // Woken from inside another task's poll: a flow from it.
        let other = tracing::info_span!(target: "layer_test::rt", "sender");
        {
            let _p = other.enter();
            tracing::trace!(target: "tokio::task::waker", op = "waker.wake_by_ref", task.id = task_id);
        }
        drop(task.enter());
        // Once only: a plain duration.
        drop(other);
        drop(task);
    });
    let flows: Vec<(EventKind, &str)> = seen
        .iter()
        .filter(|e| e.1 == "poll")
        .map(|e| (e.2, e.0.as_str()))
        .collect();
    let ids = |pick: fn(&EventKind) -> Option<u64>| -> Vec<u64> {
        flows.iter().filter_map(|(k, _)| pick(k)).collect()
    };
    let begins = ids(|k| match k {
        EventKind::FlowBegin { id } => Some(*id),
        _ => None,
    });
    let steps = ids(|k| match k {
        EventKind::FlowStep { id } => Some(*id),
        _ => None,
    });
    let ends = ids(|k| match k {
        EventKind::FlowEnd { id } => Some(*id),
        _ => None,
    });
    // The polls' chain: begun at the first, a step at each later one.
    assert_eq!(steps.len(), 2, "{seen:?}");
    assert!(steps.iter().all(|s| *s == steps[0]) && begins.contains(&steps[0]));
    // The wake from `sender` ends in the third poll.
    assert_eq!(ends.len(), 1, "{seen:?}");
    assert!(begins.contains(&ends[0]) && ends[0] != steps[0]);
    assert_eq!(begins.len(), 2);
    let polls = seen
        .iter()
        .filter(|e| e.1 == "request" && matches!(e.2, EventKind::DurationComplete { .. }))
        .count();
    assert_eq!(polls, 3);
    let asyncs: Vec<_> = seen
        .iter()
        .filter(|e| {
            matches!(
                e.2,
                EventKind::AsyncBegin { .. } | EventKind::AsyncEnd { .. }
            )
        })
        .collect();
    assert_eq!(
        asyncs.len(),
        2,
        "only the task is an async slice: {asyncs:?}"
    );
    assert!(asyncs.iter().all(|e| e.1 == "request"));
    let end = asyncs
        .iter()
        .find(|e| matches!(e.2, EventKind::AsyncEnd { .. }))
        .unwrap();
    let arg = |n: &str| end.3.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
    assert_eq!(arg("polls"), Some("3"));
    assert_eq!(arg("wakes"), Some("2"));
    assert!(arg("busy_ns").is_some() && arg("sched_delay_ns").is_some());
}
