//! Copying a provider's records from its buffer into the output.
//!
//! Nothing in the buffer is trusted: the manager computes the layout from
//! the buffer's size and mode itself, checks the header against it, copies
//! each region into private memory before walking it, forwards only whole
//! records of event-data types, and maps TSC timestamps onto
//! CLOCK_BOOTTIME, the kernel provider's timeline.
//!
//! A provider that dropped records gets, besides the FXT provider event
//! (buffer overflow, which Perfetto's importer ignores), a counter
//! `dropped_records` (category `trace`, argument `records`) on its process:
//! 0 where its trace started, the number dropped where its data ends.

use crate::clock::boottime_ns;
use std::io::Write;

use trace_common::fxt::wire::record_type;
use trace_common::fxt::{Arg, ArgValue, EventKind, Record, StringRef, ThreadRef};
use trace_common::provider::BufferingMode;
use trace_common::provider::buffer::{HEADER_BYTES, Header, Layout, RecordWalk, WalkMode};
use trace_common::provider::clock::{TimeAnchor, TimeMap, read_tsc};

use super::namespace::NsIds;
use crate::output::{FxtStream, OutputError, ProviderSections};

/// Per-provider counts of what collection did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CollectStats {
    /// Records forwarded to the output.
    pub records: u64,
    /// Bytes forwarded to the output.
    pub bytes: u64,
    /// Records the provider reported as dropped (buffer full).
    pub dropped: u64,
    /// Records the manager refused (metadata, reserved types, bad framing).
    pub rejected: u64,
    /// Times the provider switched rolling buffers.
    pub wraps: u32,
    /// The buffer's header could not be trusted; nothing was collected.
    pub bad_header: bool,
    /// How much of the buffer held records at the last collection, in
    /// percent.
    pub usage_percent: u8,
}

/// Reads CLOCK_BOOTTIME and the TSC together, keeping the tightest pair.
pub fn anchor() -> TimeAnchor {
    let mut best = (
        u64::MAX,
        TimeAnchor {
            ticks: 0,
            ns: boottime_ns(),
        },
    );
    for _ in 0..5 {
        let (Some(t0), n, Some(t1)) = (read_tsc(), boottime_ns(), read_tsc()) else {
            break;
        };
        if t1 - t0 < best.0 {
            best = (
                t1 - t0,
                TimeAnchor {
                    ticks: t0 + (t1 - t0) / 2,
                    ns: n,
                },
            );
        }
    }
    best.1
}

/// The state of one provider's part of the output.
#[derive(Clone)]
pub struct Forwarder {
    section: ProviderSections,
    /// For TSC providers: the anchor taken when the trace started.
    tsc_start: Option<TimeAnchor>,
    tsc_map: Option<TimeMap>,
    /// The provider's process id, for its `dropped_records` counter.
    pid: u32,
    /// The id map of a provider in another PID namespace.
    ns: Option<NsIds>,
    /// When the manager last started the provider (kernel timeline).
    started_ns: Option<u64>,
    /// The earliest and latest timestamps forwarded since then (kernel
    /// timeline), a complete duration's end included.
    first_ts: Option<u64>,
    last_ts: Option<u64>,
    /// Offset in the durable buffer up to which records were forwarded.
    pub durable_forwarded: u64,
    /// Counts so far.
    pub stats: CollectStats,
}

impl Forwarder {
    /// A forwarder for provider `id` of process `pid`; `tsc_start` is set
    /// for TSC providers.
    pub fn new(id: u32, name: &str, pid: u32, tsc_start: Option<TimeAnchor>) -> Self {
        Forwarder {
            section: ProviderSections::new(id, name),
            tsc_start,
            tsc_map: None,
            pid,
            ns: NsIds::of(pid),
            started_ns: None,
            first_ts: None,
            last_ts: None,
            durable_forwarded: 0,
            stats: CollectStats::default(),
        }
    }

    /// A forwarder for another output that has not seen this provider:
    /// its section begins with the provider's declaration, and its durable
    /// buffer (names and threads) is forwarded from the start; the clock
    /// mapping is this one's.
    pub fn for_other_output(&self) -> Forwarder {
        let mut f = self.clone();
        f.section = ProviderSections::new(self.section.id(), self.section.name());
        f.durable_forwarded = 0;
        f.stats = CollectStats::default();
        f
    }

    /// The provider is (re)started at `ns` (CLOCK_BOOTTIME): where its
    /// `dropped_records` counter starts from 0.
    pub fn started(&mut self, ns: u64) {
        self.started_ns = Some(ns);
        self.first_ts = None;
        self.last_ts = None;
    }

    /// Notes the timestamps of a timed record as written to the output.
    fn note_times(&mut self, record: &[u8]) {
        let n = record.len();
        if n < 16 {
            return;
        }
        let header = u64::from_le_bytes(ts_of(record));
        let start = u64::from_le_bytes(ts_of(&record[8..]));
        let complete = header & 0xF == u64::from(record_type::EVENT)
            && (header >> 16) & 0xF
                == u64::from(trace_common::fxt::wire::event_type::DURATION_COMPLETE)
            && n >= 24;
        let end = if complete {
            u64::from_le_bytes(ts_of(&record[n - 8..]))
        } else {
            start
        };
        let (lo, hi) = (start.min(end), start.max(end));
        self.first_ts = Some(self.first_ts.map_or(lo, |f| f.min(lo)));
        self.last_ts = Some(self.last_ts.map_or(hi, |l| l.max(hi)));
    }

    /// Writes the `dropped_records` counter of a provider that dropped
    /// `dropped` records, read at `now` (CLOCK_BOOTTIME): 0 where its trace
    /// started (or its first record, if earlier), `dropped` where its data
    /// ends, never after `now`. Perfetto ignores the provider event
    /// (buffer overflow); it draws this counter on the provider's process.
    fn write_drops<W: Write>(
        &self,
        out: &mut FxtStream<W>,
        dropped: u64,
        now: u64,
    ) -> Result<(), OutputError> {
        let zero_at = match (self.started_ns, self.first_ts) {
            (Some(s), Some(f)) => s.min(f),
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => now,
        }
        .min(now);
        let end_at = self.last_ts.unwrap_or(now).clamp(zero_at, now);
        let thread = ThreadRef::Inline {
            process: u64::from(self.pid),
            thread: u64::from(self.pid),
        };
        for (ts, n) in [(zero_at, 0), (end_at, dropped)] {
            let args = [Arg::new("records", ArgValue::Uint64(n))];
            out.write(&Record::Event {
                ts,
                thread,
                category: StringRef::inline("trace"),
                name: StringRef::inline("dropped_records"),
                args: args[..].into(),
                kind: EventKind::Counter { id: 0 },
            })?;
        }
        Ok(())
    }

    /// A thread of the provider, `tid` in its PID namespace, started
    /// writing: a provider in another namespace has its host id looked up
    /// now, while it lives.
    pub fn new_thread(&mut self, tid: u32) {
        if let Some(ns) = self.ns.as_mut() {
            ns.learn(tid);
        }
    }

    /// Takes a fresh anchor to map the timestamps collected next.
    pub fn refresh_clock(&mut self) {
        if let Some(a) = self.tsc_start {
            let b = anchor();
            self.tsc_map = TimeMap::new(a, b).or_else(|| TimeMap::with_rate(a, 1_000_000_000));
        }
    }

    /// Writes the provider info (first time) or section record.
    pub fn begin_section<W: Write>(&mut self, out: &mut FxtStream<W>) -> Result<(), OutputError> {
        self.section.begin(out)
    }

    /// Forwards the whole records of `region`; returns the offset just past
    /// the last one.
    pub fn forward<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        region: &[u8],
        mode: WalkMode,
    ) -> Result<usize, OutputError> {
        let mut walk = RecordWalk::new(region, mode);
        let mut word = Vec::new();
        let mut mapped = Vec::new();
        for r in &mut walk {
            match r.record_type {
                record_type::STRING..=record_type::LOG | record_type::LARGE => {}
                // The manager writes the initialization record itself.
                record_type::INITIALIZATION => continue,
                _ => {
                    self.stats.rejected += 1;
                    continue;
                }
            }
            // Well-framed is not enough: a record that does not decode
            // (bad argument sizes, string lengths past its end) is refused.
            let Ok((mut record, _)) = trace_common::fxt::read::decode(r.bytes) else {
                self.stats.rejected += 1;
                continue;
            };
            // A provider in a container names its threads by its own
            // namespace's ids.
            let remap = self.ns.as_mut().is_some_and(|ns| ns.map(&mut record));
            let bytes: &[u8] = match remap {
                true => {
                    mapped.clear();
                    match trace_common::fxt::write::encode(&record, &mut mapped) {
                        Ok(_) => &mapped,
                        Err(_) => {
                            self.stats.rejected += 1;
                            continue;
                        }
                    }
                }
                _ => r.bytes,
            };
            let timed = matches!(
                r.record_type,
                record_type::EVENT | record_type::SCHEDULING | record_type::LOG
            );
            let written: &[u8] = match self.tsc_map {
                Some(map) if timed && bytes.len() >= 16 => {
                    word.clear();
                    word.extend_from_slice(bytes);
                    let mut ts = [0u8; 8];
                    ts.copy_from_slice(&word[8..16]);
                    let ns = map.ns(u64::from_le_bytes(ts));
                    word[8..16].copy_from_slice(&ns.to_le_bytes());
                    // A complete duration's end time is its last word.
                    let header = u64::from_le_bytes(ts_of(&word[..8]));
                    let n = word.len();
                    if r.record_type == record_type::EVENT
                        && (header >> 16) & 0xF
                            == u64::from(trace_common::fxt::wire::event_type::DURATION_COMPLETE)
                        && n >= 24
                    {
                        let end = map.ns(u64::from_le_bytes(ts_of(&word[n - 8..])));
                        word[n - 8..].copy_from_slice(&end.to_le_bytes());
                    }
                    &word
                }
                _ => bytes,
            };
            if timed {
                self.note_times(written);
            }
            out.write_raw(written, 1)?;
            self.stats.records += 1;
            self.stats.bytes += written.len() as u64;
        }
        if walk.stop().is_some() {
            self.stats.rejected += 1;
        }
        Ok(walk.position())
    }
}

fn ts_of(b: &[u8]) -> [u8; 8] {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[..8]);
    w
}

/// Which rolling buffers a collection includes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rolling {
    /// The final collection: the older buffer too if it was not saved.
    Final {
        /// The streaming save that was acknowledged last, if any.
        last_saved: Option<u32>,
    },
    /// A streaming save of buffer `wrapped & 1`.
    Save {
        /// The wrapped count of the save request.
        wrapped: u32,
        /// The durable end of the save request.
        durable_end: u64,
    },
}

/// Collects a snapshot of a whole buffer into the output.
pub fn collect<W: Write>(
    out: &mut FxtStream<W>,
    fwd: &mut Forwarder,
    snapshot: &[u8],
    mode: BufferingMode,
    which: Rolling,
) -> Result<(), OutputError> {
    let Ok(layout) = Layout::new(mode, snapshot.len() as u64) else {
        fwd.stats.bad_header = true;
        return Ok(());
    };
    let header = Header::read(
        snapshot[..HEADER_BYTES]
            .try_into()
            .unwrap_or(&[0; HEADER_BYTES]),
    );
    if header.validate(&layout).is_err() {
        fwd.stats.bad_header = true;
        return Ok(());
    }
    fwd.refresh_clock();
    fwd.begin_section(out)?;
    let final_collection = matches!(which, Rolling::Final { .. });
    if final_collection && header.num_records_dropped > 0 {
        out.write(&Record::ProviderEvent {
            id: fwd.section.id(),
            event: trace_common::fxt::provider_event::BUFFER_OVERFLOW,
        })?;
        fwd.stats.dropped = header.num_records_dropped;
    }
    fwd.stats.wraps = header.wrapped_count;
    let used = header.durable_data_end.min(layout.durable)
        + (0..2)
            .map(|b| header.rolling_data_end[b].min(layout.rolling[b]))
            .sum::<u64>();
    fwd.stats.usage_percent =
        (used.saturating_mul(100) / (snapshot.len() as u64).max(1)).min(100) as u8;
    let durable_end = match which {
        Rolling::Save { durable_end, .. } => durable_end,
        Rolling::Final { .. } => header.durable_data_end,
    }
    .min(layout.durable);
    if durable_end > fwd.durable_forwarded {
        let d0 = (layout.durable_offset() + fwd.durable_forwarded) as usize;
        let d1 = (layout.durable_offset() + durable_end) as usize;
        let used = fwd.forward(out, &snapshot[d0..d1], WalkMode::Durable)?;
        fwd.durable_forwarded += used as u64;
    }
    let mut buffers = Vec::new();
    match which {
        Rolling::Save { wrapped, .. } => buffers.push((wrapped & 1) as usize),
        Rolling::Final { last_saved } => {
            let w = header.wrapped_count;
            if w > 0 && last_saved != Some(w - 1) && mode != BufferingMode::Oneshot {
                buffers.push(((w - 1) & 1) as usize);
            }
            buffers.push((w & 1) as usize);
        }
    }
    for b in buffers {
        let start = layout.rolling_offset(b) as usize;
        let end = header.rolling_data_end[b].min(layout.rolling[b]) as usize;
        fwd.forward(out, &snapshot[start..start + end], WalkMode::Chunked)?;
    }
    if final_collection && header.num_records_dropped > 0 {
        fwd.write_drops(out, header.num_records_dropped, boottime_ns())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_common::fxt::read::Reader;
    use trace_common::fxt::write::encode;

    fn put(buf: &mut [u8], at: usize, r: &Record<'_>) -> usize {
        let mut v = Vec::new();
        encode(r, &mut v).unwrap();
        buf[at..at + v.len()].copy_from_slice(&v);
        v.len()
    }

    fn instant(ts: u64) -> Record<'static> {
        Record::Event {
            ts,
            thread: ThreadRef::Inline {
                process: 1,
                thread: 2,
            },
            category: StringRef::Index(1),
            name: StringRef::inline("x"),
            args: Vec::new().into(),
            kind: EventKind::Instant,
        }
    }

    #[test]
    fn forwards_durable_then_rolling_and_refuses_metadata_and_garbage() {
        let layout = Layout::new(BufferingMode::Oneshot, 64 * 1024).unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let d = layout.durable_offset() as usize;
        let mut n = put(
            &mut buf,
            d,
            &Record::Initialization {
                ticks_per_second: 1,
            },
        );
        n += put(
            &mut buf,
            d + n,
            &Record::String {
                index: 1,
                value: "cat".into(),
            },
        );
        let r = layout.rolling_offset(0) as usize;
        let mut m = put(&mut buf, r, &instant(5));
        // A provider info record would hijack the reader's provider: refused.
        m += put(
            &mut buf,
            r + m,
            &Record::ProviderInfo {
                id: 1,
                name: "kernel".into(),
            },
        );
        m += put(&mut buf, r + m, &instant(6));
        // Garbage: a header claiming more words than there are.
        buf[r + m..r + m + 8].copy_from_slice(&0xFFF4u64.to_le_bytes());
        let mut h = layout.initial_header();
        h.durable_data_end = n as u64;
        h.rolling_data_end[0] = 4096;
        h.num_records_dropped = 3;
        buf[..HEADER_BYTES].copy_from_slice(&h.to_bytes());
        // A record in the next chunk is past the garbage's chunk: still found
        // only if the garbage does not swallow it (it does: framing is lost).
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut f = Forwarder::new(2, "app", 42, None);
        collect(
            &mut out,
            &mut f,
            &buf,
            BufferingMode::Oneshot,
            Rolling::Final { last_saved: None },
        )
        .unwrap();
        assert_eq!(f.stats.records, 3, "string and two events");
        assert_eq!(f.stats.rejected, 2, "provider info, garbage");
        assert_eq!(f.stats.dropped, 3);
        let bytes = out.finish().unwrap();
        let recs: Vec<_> = Reader::new(&bytes).map(|r| r.unwrap().1).collect();
        assert!(matches!(recs[1], Record::ProviderInfo { id: 2, .. }));
        assert!(matches!(
            recs[2],
            Record::Initialization {
                ticks_per_second: 1_000_000_000
            }
        ));
        assert!(matches!(recs[3], Record::ProviderEvent { id: 2, .. }));
        assert!(matches!(recs[4], Record::String { index: 1, .. }));
        assert!(matches!(recs[5], Record::Event { ts: 5, .. }));
        assert!(matches!(recs[6], Record::Event { ts: 6, .. }));
        // The drops again, as a counter Perfetto shows: from 0 at the first
        // record (no start time known here) to 3 at the last.
        assert_eq!(drop_samples(&recs[7..]), [(5, 0), (6, 3)]);
        assert_eq!(recs.len(), 9);
    }

    /// The `dropped_records` samples among `recs`, as (time, records).
    fn drop_samples(recs: &[Record<'_>]) -> Vec<(u64, u64)> {
        recs.iter()
            .filter_map(|r| match r {
                Record::Event {
                    ts,
                    thread,
                    category,
                    name,
                    args,
                    kind,
                } if *name == StringRef::inline("dropped_records") => {
                    assert_eq!(*kind, EventKind::Counter { id: 0 });
                    assert_eq!(*category, StringRef::inline("trace"));
                    assert_eq!(
                        *thread,
                        ThreadRef::Inline {
                            process: 42,
                            thread: 42
                        }
                    );
                    assert_eq!(args.len(), 1);
                    assert_eq!(args[0].name, StringRef::inline("records"));
                    let ArgValue::Uint64(n) = args[0].value else {
                        panic!("records is {:?}", args[0].value);
                    };
                    Some((*ts, n))
                }
                _ => None,
            })
            .collect()
    }

    /// A oneshot buffer holding `events` in its rolling buffer, with
    /// `dropped` records dropped.
    fn oneshot_buffer(events: &[Record<'_>], dropped: u64) -> Vec<u8> {
        let layout = Layout::new(BufferingMode::Oneshot, 64 * 1024).unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let r = layout.rolling_offset(0) as usize;
        let mut m = 0;
        for e in events {
            m += put(&mut buf, r + m, e);
        }
        let mut h = layout.initial_header();
        h.durable_data_end = 0;
        h.rolling_data_end[0] = m as u64;
        h.num_records_dropped = dropped;
        buf[..HEADER_BYTES].copy_from_slice(&h.to_bytes());
        buf
    }

    #[test]
    fn drops_are_also_a_counter_on_the_providers_process() {
        let complete = Record::Event {
            ts: 100,
            thread: ThreadRef::Inline {
                process: 42,
                thread: 43,
            },
            category: StringRef::inline("app"),
            name: StringRef::inline("work"),
            args: Vec::new().into(),
            kind: EventKind::DurationComplete { end_ts: 900 },
        };
        let buf = oneshot_buffer(&[complete, instant(500)], 7);
        let final_ = Rolling::Final { last_saved: None };
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut f = Forwarder::new(2, "app", 42, None);
        f.started(50);
        collect(&mut out, &mut f, &buf, BufferingMode::Oneshot, final_).unwrap();
        let bytes = out.finish().unwrap();
        let recs: Vec<_> = Reader::new(&bytes).map(|r| r.unwrap().1).collect();
        assert!(
            recs.iter()
                .any(|r| matches!(r, Record::ProviderEvent { id: 2, .. })),
            "the provider event stays"
        );
        // 0 at the start, 7 where the data ends (the duration's end).
        assert_eq!(drop_samples(&recs), [(50, 0), (900, 7)]);

        // A restart begins a new series, from the new start time.
        let mut out = FxtStream::new(Vec::new()).unwrap();
        f.started(1_000);
        let buf = oneshot_buffer(&[instant(2_000)], 1);
        collect(&mut out, &mut f, &buf, BufferingMode::Oneshot, final_).unwrap();
        let bytes = out.finish().unwrap();
        let recs: Vec<_> = Reader::new(&bytes).map(|r| r.unwrap().1).collect();
        assert_eq!(drop_samples(&recs), [(1_000, 0), (2_000, 1)]);

        // Never later than the collection: a timestamp from the future is
        // not believed.
        let mut out = FxtStream::new(Vec::new()).unwrap();
        f.started(1_000);
        let buf = oneshot_buffer(&[instant(u64::MAX - 1)], 1);
        let before = boottime_ns();
        collect(&mut out, &mut f, &buf, BufferingMode::Oneshot, final_).unwrap();
        let after = boottime_ns();
        let bytes = out.finish().unwrap();
        let recs: Vec<_> = Reader::new(&bytes).map(|r| r.unwrap().1).collect();
        let samples = drop_samples(&recs);
        assert_eq!(samples[0], (1_000, 0));
        assert!((before..=after).contains(&samples[1].0), "{samples:?}");

        // No drops, or a streaming save: no counter.
        for (dropped, which) in [
            (0, final_),
            (
                5,
                Rolling::Save {
                    wrapped: 0,
                    durable_end: 0,
                },
            ),
        ] {
            let mut out = FxtStream::new(Vec::new()).unwrap();
            let mut f = Forwarder::new(2, "app", 42, None);
            f.started(50);
            let buf = oneshot_buffer(&[instant(500)], dropped);
            collect(&mut out, &mut f, &buf, BufferingMode::Oneshot, which).unwrap();
            let bytes = out.finish().unwrap();
            let recs: Vec<_> = Reader::new(&bytes).map(|r| r.unwrap().1).collect();
            assert!(drop_samples(&recs).is_empty());
        }
    }

    #[test]
    fn an_untrusted_header_yields_nothing() {
        let mut buf = vec![0xAAu8; 64 * 1024];
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut f = Forwarder::new(2, "app", 42, None);
        collect(
            &mut out,
            &mut f,
            &buf,
            BufferingMode::Circular,
            Rolling::Final { last_saved: None },
        )
        .unwrap();
        assert!(f.stats.bad_header);
        buf.truncate(100);
        collect(
            &mut out,
            &mut f,
            &buf,
            BufferingMode::Circular,
            Rolling::Final { last_saved: None },
        )
        .unwrap();
        assert_eq!(out.records(), 1);
    }

    #[test]
    fn tsc_timestamps_are_mapped_onto_the_boottime_clock() {
        let a = TimeAnchor {
            ticks: 1_000,
            ns: 50,
        };
        let mut f = Forwarder::new(3, "app", 42, Some(a));
        f.tsc_map = TimeMap::new(
            a,
            TimeAnchor {
                ticks: 3_000,
                ns: 1_050,
            },
        );
        let mut v = Vec::new();
        encode(&instant(2_000), &mut v).unwrap();
        let mut out = FxtStream::new(Vec::new()).unwrap();
        f.forward(&mut out, &v, WalkMode::Durable).unwrap();
        let bytes = out.finish().unwrap();
        let recs: Vec<_> = Reader::new(&bytes).map(|r| r.unwrap().1).collect();
        assert!(matches!(recs[1], Record::Event { ts: 550, .. }));
    }
}
