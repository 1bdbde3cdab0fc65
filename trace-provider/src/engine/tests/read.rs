//! Reading a buffer back the way the manager does: header, durable
//! records, rolling buffers walked by chunks.

use trace_common::fxt::read::{Reader, TraceState};
use trace_common::fxt::write::encode;
use trace_common::fxt::{ArgValue, EventKind, Record};
use trace_common::provider::BufferingMode;
use trace_common::provider::buffer::{HEADER_BYTES, Header, Layout, RecordWalk, WalkMode};

use crate::engine;

pub(super) struct Buffer {
    pub(super) words: Vec<u64>,
    pub(super) mode: BufferingMode,
}

impl Buffer {
    pub(super) fn new(mode: BufferingMode, bytes: usize) -> Self {
        Buffer {
            words: vec![0; bytes / 8],
            mode,
        }
    }

    pub(super) fn attach(&mut self, categories: &[&str], notify: Option<engine::Notify>) {
        let len = self.words.len() * 8;
        // SAFETY: the buffer outlives the trace: every test terminates the
        // engine before dropping it.
        unsafe {
            engine::initialize(
                self.words.as_mut_ptr().cast(),
                len,
                self.mode,
                categories.iter().map(|c| c.to_string()).collect(),
                notify,
            )
        }
        .unwrap();
    }

    pub(super) fn bytes(&self) -> Vec<u8> {
        self.words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }
}

/// A snapshot turned into an FXT stream the way the manager assembles it.
pub(super) fn collect(
    bytes: &[u8],
    mode: BufferingMode,
    sections: &[(u64, u64, usize, u64)],
) -> Vec<u8> {
    let layout = Layout::new(mode, bytes.len() as u64).unwrap();
    let mut out = Vec::new();
    encode(&Record::Magic, &mut out).unwrap();
    // (durable from, durable to, rolling buffer, rolling end)
    for &(d0, d1, buf, end) in sections {
        let durable = &bytes
            [(layout.durable_offset() + d0) as usize..(layout.durable_offset() + d1) as usize];
        for r in RecordWalk::new(durable, WalkMode::Durable) {
            out.extend_from_slice(r.bytes);
        }
        let start = layout.rolling_offset(buf) as usize;
        for r in RecordWalk::new(&bytes[start..start + end as usize], WalkMode::Chunked) {
            out.extend_from_slice(r.bytes);
        }
    }
    out
}

pub(super) fn header(bytes: &[u8]) -> Header {
    Header::read(bytes[..HEADER_BYTES].try_into().unwrap())
}

/// A final collection at stop, as in fxt-format.md §7.4.
pub(super) fn collect_at_stop(bytes: &[u8], mode: BufferingMode) -> Vec<u8> {
    let layout = Layout::new(mode, bytes.len() as u64).unwrap();
    let h = header(bytes);
    h.validate(&layout).unwrap();
    let mut sections = Vec::new();
    if h.wrapped_count > 0 {
        let older = ((h.wrapped_count - 1) & 1) as usize;
        sections.push((0, h.durable_data_end, older, h.rolling_data_end[older]));
        let cur = (h.wrapped_count & 1) as usize;
        sections.push((
            h.durable_data_end,
            h.durable_data_end,
            cur,
            h.rolling_data_end[cur],
        ));
    } else {
        sections.push((0, h.durable_data_end, 0, h.rolling_data_end[0]));
    }
    collect(bytes, mode, &sections)
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Event {
    pub(super) category: String,
    pub(super) name: String,
    pub(super) thread: (u64, u64),
    pub(super) kind: EventKind,
    pub(super) args: Vec<(String, String)>,
    pub(super) ts: u64,
}

pub(super) fn events(fxt: &[u8]) -> Vec<Event> {
    let mut state = TraceState::new();
    let mut out = Vec::new();
    for r in Reader::new(fxt) {
        let (_, rec) = r.expect("the collected stream is valid FXT");
        state.apply(&rec);
        if let Record::Event {
            ts,
            thread,
            category,
            name,
            args,
            kind,
        } = &rec
        {
            out.push(Event {
                category: state
                    .string(category)
                    .expect("category resolves")
                    .to_owned(),
                name: state.string(name).expect("name resolves").to_owned(),
                thread: state.thread(*thread).expect("thread resolves"),
                kind: *kind,
                args: args
                    .iter()
                    .map(|a| {
                        let v = match &a.value {
                            ArgValue::String(s) => state.string(s).unwrap().to_owned(),
                            other => format!("{other:?}"),
                        };
                        (state.string(&a.name).unwrap().to_owned(), v)
                    })
                    .collect(),
                ts: *ts,
            });
        }
    }
    out
}

pub(super) fn seq(e: &Event) -> u64 {
    let v = &e.args.iter().find(|(n, _)| n == "seq").expect("seq arg").1;
    v.trim_start_matches("Uint64(")
        .trim_end_matches(')')
        .parse()
        .unwrap()
}

pub(super) fn tid() -> u64 {
    // SAFETY: gettid has no preconditions.
    (unsafe { libc::gettid() }) as u64
}
