//! The `tracing` layer: spans and events of a program instrumented with the
//! `tracing` crate, written by the real engine into a real buffer.

use trace_common::fxt::read::{Reader, TraceState};
use trace_common::fxt::write::encode;
use trace_common::fxt::{ArgValue, EventKind, Record};
use trace_common::provider::buffer::{HEADER_BYTES, Header, Layout, RecordWalk, WalkMode};
use trace_common::provider::{BufferDisposition, BufferingMode};
use trace_provider::engine;
use trace_provider::layer::TraceLayer;
use tracing_subscriber::layer::SubscriberExt;

#[test]
fn spans_become_durations_and_events_become_instants() {
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
    tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!(target: "layer_test::net", "send", bytes = 7u64, peer = "a");
        {
            let _e = span.enter();
            tracing::warn!(target: "layer_test::net", attempt = 2i64, "retrying");
        }
        tracing::info!(target: "elsewhere", "not enabled");
    });
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
            let arg = |n: &str| match state.arg(args, n) {
                Some(ArgValue::String(s)) => state.string(s).unwrap().to_owned(),
                Some(v) => format!("{v:?}"),
                None => String::new(),
            };
            seen.push((
                state.string(category).unwrap().to_owned(),
                state.string(name).unwrap().to_owned(),
                *kind,
                arg("level"),
                arg("bytes"),
                arg("attempt"),
            ));
        }
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].0, "layer_test::net");
    assert_eq!(seen[0].1, "retrying");
    assert_eq!(seen[0].2, EventKind::Instant);
    assert_eq!(seen[0].3, "WARN");
    assert_eq!(seen[0].5, "Int64(2)");
    assert_eq!(seen[1].1, "send");
    assert!(matches!(seen[1].2, EventKind::DurationComplete { .. }));
    assert_eq!(seen[1].4, "Uint64(7)");
}
