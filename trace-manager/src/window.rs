//! The flight recorder's memory: the newest records of an FXT stream, kept
//! for a span of time and within a size, from which a file that reads on
//! its own can be made at any moment.
//!
//! [`Window`] is the writer under the flight recorder's
//! [`FxtStream`](crate::output::FxtStream): each write holds whole records, appended to
//! the current chunk. Chunks are sealed at each [`Window::expire`] (the
//! manager's tick) or when full, and the oldest are dropped once they are
//! older than the span or the window is over its size; the records dropped
//! pass through a [`StreamState`], which therefore knows what a reader must
//! be told before the window's first record (provider declarations, string
//! and thread tables, names, open slices, Perfetto interned data).
//! [`Window::contents`] hands out the sealed chunks (shared, not copied)
//! with that state, and [`Contents::write_to`] writes them as a whole file.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::Arc;

use trace_split::{FlowFilter, RecordReader, StreamState};

/// Bytes of a chunk at most (a single larger write makes a chunk of its
/// own).
pub const CHUNK_BYTES: usize = 1 << 20;

/// A run of whole records that arrived together.
#[derive(Debug)]
struct Chunk {
    data: Arc<Vec<u8>>,
    /// When it was sealed (CLOCK_BOOTTIME ns): every record in it arrived
    /// before.
    sealed_ns: u64,
}

/// The newest records of a stream.
#[derive(Debug)]
pub struct Window {
    sealed: VecDeque<Chunk>,
    current: Vec<u8>,
    /// Bytes in `sealed` and `current`.
    bytes: usize,
    span_ns: u64,
    max_bytes: usize,
    /// What a reader knows at the start of the oldest chunk.
    state: StreamState,
    /// Bytes of records dropped from the window so far.
    dropped_bytes: u64,
    /// A copy of what is written, while tapped.
    tap: Option<Vec<u8>>,
}

/// What a window held at a moment, to be written out elsewhere.
#[derive(Debug)]
pub struct Contents {
    state: StreamState,
    /// Each chunk with when it was sealed.
    chunks: Vec<(u64, Arc<Vec<u8>>)>,
}

/// What [`Contents::write_to`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Bytes written.
    pub bytes: u64,
    /// Records written.
    pub records: u64,
    /// Flow steps and ends left out: their flow began before the window.
    pub flows_cut: u64,
}

impl Window {
    /// A window that keeps records for `span_ns` after they arrived, and
    /// at most about `max_bytes` of them (whole chunks are dropped).
    pub fn new(span_ns: u64, max_bytes: usize) -> Self {
        Window {
            sealed: VecDeque::new(),
            current: Vec::new(),
            bytes: 0,
            span_ns,
            max_bytes: max_bytes.max(2 * CHUNK_BYTES),
            state: StreamState::new(),
            dropped_bytes: 0,
            tap: None,
        }
    }

    /// From now on, keeps a copy of what is written, until
    /// [`Window::take_tap`].
    pub fn start_tap(&mut self) {
        self.tap = Some(Vec::new());
    }

    /// What was written since [`Window::start_tap`] (whole records), and
    /// stops keeping a copy.
    pub fn take_tap(&mut self) -> Vec<u8> {
        self.tap.take().unwrap_or_default()
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes of records dropped from the window (older than its span, or
    /// beyond its size) so far.
    pub fn dropped_bytes(&self) -> u64 {
        self.dropped_bytes
    }

    /// How long records are kept after they arrived, in nanoseconds.
    pub fn span_ns(&self) -> u64 {
        self.span_ns
    }

    fn seal(&mut self, now_ns: u64) {
        if self.current.is_empty() {
            return;
        }
        let data = std::mem::take(&mut self.current);
        self.sealed.push_back(Chunk {
            data: Arc::new(data),
            sealed_ns: now_ns,
        });
    }

    /// Seals what arrived until `now_ns` (CLOCK_BOOTTIME) and drops the
    /// chunks that are older than the span, or beyond the size.
    pub fn expire(&mut self, now_ns: u64) {
        self.seal(now_ns);
        while let Some(oldest) = self.sealed.front() {
            let old = oldest.sealed_ns.saturating_add(self.span_ns) < now_ns;
            if !(old || self.bytes > self.max_bytes) {
                break;
            }
            let Some(chunk) = self.sealed.pop_front() else {
                break;
            };
            self.bytes -= chunk.data.len();
            self.dropped_bytes += chunk.data.len() as u64;
            let mut records = RecordReader::new(chunk.data.as_slice());
            while let Ok(Some(record)) = records.next_record() {
                self.state.observe(record);
            }
        }
    }

    /// What the window holds now (what arrived until `now_ns`), shared.
    pub fn contents(&mut self, now_ns: u64) -> Contents {
        self.seal(now_ns);
        Contents {
            state: self.state.clone(),
            chunks: self
                .sealed
                .iter()
                .map(|c| (c.sealed_ns, Arc::clone(&c.data)))
                .collect(),
        }
    }
}

impl Write for Window {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // Whole records per write (FxtStream's contract): a chunk never
        // splits one.
        if !self.current.is_empty() && self.current.len() + buf.len() > CHUNK_BYTES {
            let sealed_ns = crate::clock::boottime_ns();
            self.seal(sealed_ns);
        }
        self.current.extend_from_slice(buf);
        self.bytes += buf.len();
        if let Some(tap) = self.tap.as_mut() {
            tap.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Contents {
    /// Bytes of the records held (what [`Contents::write_to`] writes,
    /// besides its preamble, tail and closing records).
    pub fn bytes(&self) -> u64 {
        self.chunks.iter().map(|(_, c)| c.len() as u64).sum()
    }

    /// Leaves out the chunks whose records all arrived before `ns`
    /// (CLOCK_BOOTTIME): what is written begins at most a chunk before.
    pub fn since(mut self, ns: u64) -> Contents {
        let keep_from = self
            .chunks
            .iter()
            .position(|(sealed, _)| *sealed >= ns)
            .unwrap_or(self.chunks.len());
        for (_, chunk) in self.chunks.drain(..keep_from) {
            let mut records = RecordReader::new(chunk.as_slice());
            while let Ok(Some(record)) = records.next_record() {
                self.state.observe(record);
            }
        }
        self
    }

    /// Writes a whole file: the magic number record and what a reader must
    /// know at the window's start, the window's records, then `tail`
    /// (records that follow the window, such as the providers' buffers
    /// read now; it starts with provider records that declare themselves),
    /// and last the ends of the slices still open.
    pub fn write_to(mut self, out: &mut impl Write, tail: &[u8]) -> std::io::Result<Written> {
        let mut written = Written::default();
        let mut put = |bytes: &[u8], records: u64, out: &mut dyn Write| {
            written.bytes += bytes.len() as u64;
            written.records += records;
            out.write_all(bytes)
        };
        let preamble = self.state.preamble();
        let n = count(&preamble);
        put(&preamble, n, out)?;
        // A flow begun before the window has nothing to be drawn from in
        // the file: its steps and end are left out. A run of records that
        // leaves out none is written as it is.
        let (mut flows, mut cut) = (FlowFilter::new(), 0);
        let chunks = std::mem::take(&mut self.chunks);
        for bytes in chunks.iter().map(|(_, c)| c.as_slice()).chain([tail]) {
            let (mut n, mut kept_to, mut from) = (0, 0, 0);
            let mut records = RecordReader::new(bytes);
            while let Ok(Some(record)) = records.next_record() {
                let at = from;
                from += record.len();
                if flows.keep(self.state.provider(), record) {
                    self.state.observe(record);
                    n += 1;
                    continue;
                }
                put(&bytes[kept_to..at], n, out)?;
                (n, kept_to) = (0, from);
                cut += 1;
            }
            put(&bytes[kept_to..], n, out)?;
        }
        let ends = self.state.close_open();
        let n = count(&ends);
        put(&ends, n, out)?;
        out.flush()?;
        written.flows_cut = cut;
        Ok(written)
    }
}

/// Records in `bytes` (whole records).
pub fn count(bytes: &[u8]) -> u64 {
    let mut n = 0;
    let mut records = RecordReader::new(bytes);
    while let Ok(Some(_)) = records.next_record() {
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::FxtStream;
    use trace_common::fxt::read::{Reader, TraceState};
    use trace_common::fxt::{Arg, ArgValue, EventKind, Record, StringRef, ThreadRef};

    fn tick(out: &mut FxtStream<Window>, seq: u64) {
        out.write(&Record::Event {
            ts: 1000 + seq,
            thread: ThreadRef::Index(1),
            category: StringRef::Index(1),
            name: StringRef::Index(2),
            args: vec![Arg::new(StringRef::inline("seq"), ArgValue::Uint64(seq))].into(),
            kind: EventKind::Instant,
        })
        .unwrap();
    }

    /// The sequence numbers of a whole file, every record resolved.
    fn seqs(file: &[u8]) -> Vec<u64> {
        let mut state = TraceState::new();
        let mut out = Vec::new();
        for item in Reader::new(file) {
            let (_, record) = item.unwrap();
            state.apply(&record);
            if let Record::Event {
                category,
                name,
                thread,
                args,
                ..
            } = &record
            {
                assert_eq!(state.string(category), Some("app"));
                assert_eq!(state.string(name), Some("tick"));
                assert_eq!(state.thread(*thread), Some((10, 11)));
                if let Some(ArgValue::Uint64(s)) = state.arg(args, "seq") {
                    out.push(*s);
                }
            }
        }
        out
    }

    #[test]
    fn a_snapshot_holds_no_flow_end_whose_begin_was_dropped() {
        let mut out = FxtStream::new(Window::new(1_000, 1 << 30)).unwrap();
        out.write(&Record::ProviderInfo {
            id: 2,
            name: "app".into(),
        })
        .unwrap();
        let flow = |out: &mut FxtStream<Window>, id: u64, kind: EventKind| {
            out.write(&Record::Event {
                ts: 1000 + id,
                thread: ThreadRef::Inline {
                    process: 10,
                    thread: 11,
                },
                category: StringRef::inline("app"),
                name: StringRef::inline("wake"),
                args: Vec::new().into(),
                kind,
            })
            .unwrap();
        };
        // Flow 1 begins in a chunk the window drops, and ends in one it
        // keeps; flow 2 lies inside the window.
        flow(&mut out, 1, EventKind::FlowBegin { id: 1 });
        out.get_mut().expire(10_000);
        flow(&mut out, 2, EventKind::FlowBegin { id: 2 });
        flow(&mut out, 1, EventKind::FlowEnd { id: 1 });
        flow(&mut out, 2, EventKind::FlowEnd { id: 2 });
        out.get_mut().expire(12_000);
        let mut file = Vec::new();
        let written = out
            .get_mut()
            .contents(12_000)
            .write_to(&mut file, &[])
            .unwrap();
        assert_eq!(written.bytes, file.len() as u64);
        assert_eq!(written.flows_cut, 1);
        let kinds: Vec<EventKind> = Reader::new(&file[..])
            .filter_map(|item| match item.unwrap().1 {
                Record::Event { kind, .. } => Some(kind),
                _ => None,
            })
            .collect();
        assert_eq!(
            kinds,
            [EventKind::FlowBegin { id: 2 }, EventKind::FlowEnd { id: 2 }]
        );
    }

    #[test]
    fn keeps_the_newest_span_and_each_snapshot_reads_alone() {
        let mut out = FxtStream::new(Window::new(1_000, 1 << 30)).unwrap();
        out.write(&Record::ProviderInfo {
            id: 2,
            name: "app".into(),
        })
        .unwrap();
        out.write(&Record::String {
            index: 1,
            value: "app".into(),
        })
        .unwrap();
        out.write(&Record::String {
            index: 2,
            value: "tick".into(),
        })
        .unwrap();
        out.write(&Record::Thread {
            index: 1,
            process: 10,
            thread: 11,
        })
        .unwrap();
        let mut now = 10_000;
        for seq in 0..100 {
            tick(&mut out, seq);
            if seq % 10 == 9 {
                now += 400;
                out.get_mut().expire(now);
            }
        }
        let mut file = Vec::new();
        let written = out
            .get_mut()
            .contents(now)
            .write_to(&mut file, &[])
            .unwrap();
        assert_eq!(written.bytes, file.len() as u64);
        let got = seqs(&file);
        // Chunks sealed within the last 1000 ns are kept: the last three.
        assert_eq!(got, (70..100).collect::<Vec<_>>());
        // What is dropped is gone; what comes on is kept.
        for seq in 100..110 {
            tick(&mut out, seq);
        }
        let mut file = Vec::new();
        out.get_mut()
            .contents(now + 1)
            .write_to(&mut file, &[])
            .unwrap();
        assert_eq!(seqs(&file), (70..110).collect::<Vec<_>>());
    }

    #[test]
    fn the_size_bounds_the_window() {
        let mut window = Window::new(u64::MAX / 2, 0);
        let record = [0u8; 4096];
        let mut header = trace_common::fxt::wire::record_header(
            trace_common::fxt::wire::record_type::EVENT,
            record.len() / 8,
        )
        .to_le_bytes()
        .to_vec();
        header.extend_from_slice(&record[8..]);
        for i in 0..2000 {
            window.write_all(&header).unwrap();
            if i % 100 == 0 {
                window.expire(i);
            }
        }
        window.expire(3000);
        assert!(
            window.bytes() <= 2 * CHUNK_BYTES + CHUNK_BYTES,
            "{}",
            window.bytes()
        );
        assert!(window.dropped_bytes() > 0);
    }
}
