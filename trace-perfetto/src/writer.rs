//! Samples of one sampling stream into framed Perfetto packets.

use std::collections::HashMap;
use std::sync::Arc;

use prost::Message;
use prost::encoding::{encoded_len_varint, key_len};

use crate::protos;
use crate::protos::trace_packet::SequenceFlags;

/// Interned entries (names, paths, build ids, mappings, frames, call stacks)
/// a writer keeps before it starts a new generation: it clears the
/// sequence's incremental state and interns afresh, so its memory stays
/// bounded however long it writes.
pub const MAX_INTERNED: usize = 1 << 18;

/// Largest blob payload the writer hands out (an FXT record is at most 32 KiB
/// incl. header and name).
pub const MAX_BLOB_PAYLOAD: usize = 30 * 1024;

/// Longest function name written, in bytes; a longer one is cut on a
/// character boundary.
pub const MAX_FUNCTION_NAME_LEN: usize = 1024;

/// Most frames written for one sample; of a deeper stack, the innermost
/// `MAX_FRAMES` are kept (as perf does).
pub const MAX_FRAMES: usize = 2048;

/// Longest mapping path written, in bytes.
const MAX_PATH_LEN: usize = 4096;
/// Longest build id written, in bytes.
const MAX_BUILD_ID_LEN: usize = 64;
/// Longest timebase name written, in bytes.
const MAX_TIMEBASE_NAME_LEN: usize = 256;

/// Pending bytes from which [`SampleWriter::ready`] says to write them out.
const READY_LEN: usize = 24 * 1024;

/// Bytes around a packet's body: its key in `Trace` (1) and its length (at
/// most 3 bytes below 2 MiB).
const PACKET_FRAMING: usize = 1 + 3;
/// Bytes around an `interned_data` body: key (1) and length (3).
const INTERNED_FRAMING: usize = 1 + 3;
/// An upper bound of a packet's encoding without its interned data: the
/// header fields (under 40 bytes), the defaults (the timebase name plus
/// under 60 bytes) and a perf sample (under 70 bytes).
const MAX_PACKET_OVERHEAD: usize = 512 + MAX_TIMEBASE_NAME_LEN;
/// An upper bound of one interned entry's encoding with its key and length:
/// a call stack of `MAX_FRAMES` frame ids (each a key and a varint of at most
/// 10 bytes) and its own iid, or the longest string.
const MAX_ENTRY_LEN: usize = {
    let callstack = MAX_FRAMES * 11 + 11 + 8;
    let string = MAX_PATH_LEN + 11 + 8;
    if callstack > string {
        callstack
    } else {
        string
    }
};
// Any one interned entry fits in a packet of its own with the sample.
const _: () = assert!(
    PACKET_FRAMING + MAX_PACKET_OVERHEAD + INTERNED_FRAMING + MAX_ENTRY_LEN <= MAX_BLOB_PAYLOAD
);

/// Execution state a sample was taken in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CpuMode {
    /// Not known.
    Unknown,
    /// In the kernel.
    Kernel,
    /// In user space.
    User,
}

impl CpuMode {
    /// The `Profiling.CpuMode` value.
    pub fn to_proto(self) -> protos::profiling::CpuMode {
        match self {
            CpuMode::Unknown => protos::profiling::CpuMode::ModeUnknown,
            CpuMode::Kernel => protos::profiling::CpuMode::ModeKernel,
            CpuMode::User => protos::profiling::CpuMode::ModeUser,
        }
    }

    /// The mode of a `Profiling.CpuMode` value; other modes are `Unknown`.
    pub fn from_proto(value: i32) -> Self {
        match protos::profiling::CpuMode::try_from(value) {
            Ok(protos::profiling::CpuMode::ModeKernel) => CpuMode::Kernel,
            Ok(protos::profiling::CpuMode::ModeUser) => CpuMode::User,
            _ => CpuMode::Unknown,
        }
    }
}

/// Where a frame's code lives.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Mapping {
    /// The mapped file, e.g. `/usr/lib/libc.so.6`, or a name such as
    /// `[kernel.kallsyms]`.
    pub path: String,
    /// The file's GNU build id (raw bytes); `None` or empty: not known.
    pub build_id: Option<Vec<u8>>,
    /// First address of the mapping.
    pub start: u64,
    /// End address of the mapping.
    pub end: u64,
    /// Offset in the file of the mapping's first byte.
    pub file_offset: u64,
    /// `p_vaddr - p_offset` of the executable segment (usually 0).
    pub load_bias: u64,
}

/// One frame: function name (already symbolized and demangled; may be e.g.
/// `"[unknown]"`), its mapping, and pc relative to the mapping.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The function's name.
    pub function: String,
    /// The mapping holding the frame's code.
    pub mapping: Arc<Mapping>,
    /// The instruction pointer relative to the mapping.
    pub rel_pc: u64,
}

/// One sample to write.
#[derive(Clone, Copy, Debug)]
pub struct Sample<'a> {
    /// When, in CLOCK_BOOTTIME nanoseconds (the clock of the FXT records).
    pub ts: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// CPU the sample was taken on.
    pub cpu: u32,
    /// Execution state sampled.
    pub cpu_mode: CpuMode,
    /// A count carried with the sample. Perfetto reads it as the stream's
    /// counter since it started and draws it as a counter track per CPU;
    /// the recorder writes each off-CPU or wake-up sample's own nanoseconds
    /// there (its weight for `trace-cli flamegraph`), so that track shows
    /// each block's length rather than a running total.
    pub timebase_count: Option<u64>,
    /// The call stack, leaf (innermost) first.
    pub frames: &'a [Frame],
}

/// Writes samples of one sampling stream (one Perfetto packet sequence, one
/// timebase name such as "cpu-clock", "off-cpu", "wakeup", "uprobe:foo") as
/// Perfetto packets, interning function names, mapping paths, build ids,
/// mappings, frames and callstacks incrementally (each interned once per
/// sequence, in the packet that first uses it, or in packets just before it).
#[derive(Debug)]
pub struct SampleWriter {
    sequence_id: u32,
    timebase: protos::perf_events::Timebase,
    /// Whether the packet clearing the incremental state was written.
    started: bool,
    function_names: HashMap<String, u64>,
    mapping_paths: HashMap<String, u64>,
    build_ids: HashMap<Vec<u8>, u64>,
    mappings: HashMap<Mapping, u64>,
    /// (function name iid, mapping iid, rel_pc) to frame iid.
    frames: HashMap<(u64, u64, u64), u64>,
    /// Frame iids, root first, to call stack iid.
    callstacks: HashMap<Vec<u64>, u64>,
    /// Payloads completed.
    full: Vec<Vec<u8>>,
    /// The payload being filled.
    current: Vec<u8>,
    samples: u64,
    /// The frame iids of the sample being written.
    scratch: Vec<u64>,
    /// [`MAX_INTERNED`], lower in tests.
    max_interned: usize,
}

impl SampleWriter {
    /// `sequence_id`: trusted_packet_sequence_id (distinct per writer, not
    /// 0: Perfetto rejects packets needing incremental state on sequence 0);
    /// `timebase`: the name Perfetto shows for the stream. The sampling rate
    /// ([`with_frequency`](Self::with_frequency),
    /// [`with_period`](Self::with_period)) and the counter
    /// ([`with_counter`](Self::with_counter)) are optional.
    pub fn new(sequence_id: u32, timebase: &str) -> Self {
        debug_assert_ne!(sequence_id, 0, "Perfetto sequence ids start at 1");
        SampleWriter {
            sequence_id,
            timebase: protos::perf_events::Timebase {
                name: Some(truncate_str(timebase, MAX_TIMEBASE_NAME_LEN).to_owned()),
                ..Default::default()
            },
            started: false,
            max_interned: MAX_INTERNED,
            function_names: HashMap::new(),
            mapping_paths: HashMap::new(),
            build_ids: HashMap::new(),
            mappings: HashMap::new(),
            frames: HashMap::new(),
            callstacks: HashMap::new(),
            full: Vec::new(),
            current: Vec::new(),
            samples: 0,
            scratch: Vec::new(),
        }
    }

    /// Describes the stream as sampled `hz` times a second (written in the
    /// defaults with the first sample; replaces a period).
    pub fn with_frequency(mut self, hz: u64) -> Self {
        self.timebase.frequency = Some(hz);
        self.timebase.period = None;
        self
    }

    /// Describes the stream as sampled every `period` events (written in the
    /// defaults with the first sample; replaces a frequency).
    pub fn with_period(mut self, period: u64) -> Self {
        self.timebase.period = Some(period);
        self.timebase.frequency = None;
        self
    }

    /// Names the perf counter sampled, which gives Perfetto the unit of
    /// `timebase_count` (e.g. nanoseconds for `SwCpuClock`).
    pub fn with_counter(mut self, counter: protos::perf_events::Counter) -> Self {
        self.timebase.counter = Some(counter as i32);
        self
    }

    /// The stream's trusted_packet_sequence_id.
    pub fn sequence_id(&self) -> u32 {
        self.sequence_id
    }

    /// Encodes one sample (and whatever it newly interns) into the pending
    /// payload.
    pub fn push(&mut self, sample: &Sample<'_>) {
        if self.interned() >= self.max_interned {
            self.reset();
        }
        let frames = &sample.frames[..sample.frames.len().min(MAX_FRAMES)];
        let mut new = protos::InternedData::default();
        let mut ids = std::mem::take(&mut self.scratch);
        ids.clear();
        for frame in frames.iter().rev() {
            ids.push(self.intern_frame(frame, &mut new));
        }
        let callstack_iid = if ids.is_empty() {
            None
        } else {
            Some(self.intern_callstack(&ids, &mut new))
        };
        self.scratch = ids;

        let perf_sample = protos::PerfSample {
            cpu: Some(sample.cpu),
            pid: Some(sample.pid),
            tid: Some(sample.tid),
            callstack_iid,
            cpu_mode: match sample.cpu_mode {
                CpuMode::Unknown => None,
                mode => Some(mode.to_proto() as i32),
            },
            timebase_count: sample.timebase_count,
            kernel_records_lost: None,
            producer_event: None,
        };
        self.emit(sample.ts, new, perf_sample);
        self.samples += 1;
    }

    /// Whether the pending payload is big enough to be written out now
    /// (>= some threshold below MAX_BLOB_PAYLOAD, leaving room for the next
    /// sample, whose packets may themselves need splitting).
    pub fn ready(&self) -> bool {
        !self.full.is_empty() || self.current.len() >= READY_LEN
    }

    /// Takes the pending payloads, each at most MAX_BLOB_PAYLOAD bytes, each
    /// a whole number of framed TracePackets (never a packet split across two
    /// payloads). Empty when nothing is pending. The very first payload
    /// starts with the packet that clears incremental state and carries
    /// TracePacketDefaults (perf_sample_defaults with the timebase name).
    pub fn take(&mut self) -> Vec<Vec<u8>> {
        let mut out = std::mem::take(&mut self.full);
        if !self.current.is_empty() {
            out.push(std::mem::take(&mut self.current));
        }
        out
    }

    /// Samples written so far.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    fn intern_string(
        table: &mut HashMap<String, u64>,
        s: &str,
        out: &mut Vec<protos::InternedString>,
    ) -> u64 {
        if let Some(&iid) = table.get(s) {
            return iid;
        }
        let iid = table.len() as u64 + 1;
        table.insert(s.to_owned(), iid);
        out.push(protos::InternedString {
            iid: Some(iid),
            str: Some(s.as_bytes().to_vec()),
        });
        iid
    }

    fn intern_mapping(&mut self, mapping: &Mapping, new: &mut protos::InternedData) -> u64 {
        if let Some(&iid) = self.mappings.get(mapping) {
            return iid;
        }
        let path = truncate_str(&mapping.path, MAX_PATH_LEN);
        let path_iid = Self::intern_string(&mut self.mapping_paths, path, &mut new.mapping_paths);
        let build_id = match mapping.build_id.as_deref() {
            Some(id) if !id.is_empty() => {
                let id = &id[..id.len().min(MAX_BUILD_ID_LEN)];
                Some(match self.build_ids.get(id) {
                    Some(&iid) => iid,
                    None => {
                        let iid = self.build_ids.len() as u64 + 1;
                        self.build_ids.insert(id.to_vec(), iid);
                        new.build_ids.push(protos::InternedString {
                            iid: Some(iid),
                            str: Some(id.to_vec()),
                        });
                        iid
                    }
                })
            }
            _ => None,
        };
        let iid = self.mappings.len() as u64 + 1;
        self.mappings.insert(mapping.clone(), iid);
        new.mappings.push(protos::Mapping {
            iid: Some(iid),
            build_id,
            start_offset: None,
            start: Some(mapping.start),
            end: Some(mapping.end),
            load_bias: (mapping.load_bias != 0).then_some(mapping.load_bias),
            path_string_ids: vec![path_iid],
            exact_offset: Some(mapping.file_offset),
        });
        iid
    }

    fn intern_frame(&mut self, frame: &Frame, new: &mut protos::InternedData) -> u64 {
        let name = truncate_str(&frame.function, MAX_FUNCTION_NAME_LEN);
        let name_iid = Self::intern_string(&mut self.function_names, name, &mut new.function_names);
        let mapping_iid = self.intern_mapping(&frame.mapping, new);
        let key = (name_iid, mapping_iid, frame.rel_pc);
        if let Some(&iid) = self.frames.get(&key) {
            return iid;
        }
        let iid = self.frames.len() as u64 + 1;
        self.frames.insert(key, iid);
        new.frames.push(protos::Frame {
            iid: Some(iid),
            function_name_id: Some(name_iid),
            mapping_id: Some(mapping_iid),
            rel_pc: Some(frame.rel_pc),
        });
        iid
    }

    fn intern_callstack(&mut self, frame_ids: &[u64], new: &mut protos::InternedData) -> u64 {
        if let Some(&iid) = self.callstacks.get(frame_ids) {
            return iid;
        }
        let iid = self.callstacks.len() as u64 + 1;
        self.callstacks.insert(frame_ids.to_vec(), iid);
        new.callstacks.push(protos::Callstack {
            iid: Some(iid),
            frame_ids: frame_ids.to_vec(),
        });
        iid
    }

    /// A writer that starts a new generation every `n` interned entries.
    #[cfg(test)]
    pub(crate) fn with_max_interned(mut self, n: usize) -> Self {
        self.max_interned = n;
        self
    }

    /// Entries interned in the current generation.
    fn interned(&self) -> usize {
        self.function_names.len()
            + self.mapping_paths.len()
            + self.build_ids.len()
            + self.mappings.len()
            + self.frames.len()
            + self.callstacks.len()
    }

    /// Starts a new generation of interned entries: the tables are
    /// forgotten and the next packet clears the sequence's incremental
    /// state again (with the defaults), so a long recording's memory stays
    /// bounded by [`MAX_INTERNED`] entries.
    fn reset(&mut self) {
        self.function_names.clear();
        self.mapping_paths.clear();
        self.build_ids.clear();
        self.mappings.clear();
        self.frames.clear();
        self.callstacks.clear();
        self.started = false;
    }

    /// A packet of the sequence at `ts` with its flags (and the defaults, for
    /// the first packet of the sequence).
    fn header(&self, ts: u64, first: bool) -> protos::TracePacket {
        let needs = SequenceFlags::SeqNeedsIncrementalState as u32;
        let cleared = SequenceFlags::SeqIncrementalStateCleared as u32;
        protos::TracePacket {
            timestamp: Some(ts),
            trusted_packet_sequence_id: Some(self.sequence_id),
            sequence_flags: Some(if first { cleared | needs } else { needs }),
            // Only the very first: a later clearing packet starts a new
            // generation of interned entries on the same sequence.
            first_packet_on_sequence: (first && self.samples == 0).then_some(true),
            trace_packet_defaults: first.then(|| protos::TracePacketDefaults {
                perf_sample_defaults: Some(protos::PerfSampleDefaults {
                    timebase: Some(self.timebase.clone()),
                    ..Default::default()
                }),
                timestamp_clock_id: None,
            }),
            ..Default::default()
        }
    }

    /// Writes the sample's packet, preceded by packets of interned data when
    /// all of it does not fit in one packet.
    fn emit(&mut self, ts: u64, new: protos::InternedData, perf_sample: protos::PerfSample) {
        let mut packet = self.header(ts, !self.started);
        packet.perf_sample = Some(perf_sample);
        let overhead = packet.encoded_len();
        let interned_len = new.encoded_len();
        let whole = overhead + INTERNED_FRAMING + interned_len;
        if interned_len == 0 || PACKET_FRAMING + whole <= MAX_BLOB_PAYLOAD {
            if interned_len != 0 {
                packet.interned_data = Some(new);
            }
            self.append(&packet);
            self.started = true;
            return;
        }

        // Every packet below is at most as large as `packet` was without its
        // interned data, plus its share of the interned data.
        let sample = packet.perf_sample.take();
        let budget = MAX_BLOB_PAYLOAD.saturating_sub(PACKET_FRAMING + overhead + INTERNED_FRAMING);
        let mut chunks = split_interned(new, budget);
        let last = chunks.pop();
        for chunk in chunks {
            let mut data_packet = self.header(ts, !self.started);
            data_packet.interned_data = Some(chunk);
            self.append(&data_packet);
            self.started = true;
        }
        let mut packet = self.header(ts, !self.started);
        packet.perf_sample = sample;
        packet.interned_data = last;
        self.append(&packet);
        self.started = true;
    }

    /// Appends one framed packet to the pending payload, starting a new
    /// payload when it would not fit.
    fn append(&mut self, packet: &protos::TracePacket) {
        append_packet(packet, &mut self.current, &mut self.full);
    }
}

/// Appends one framed packet to `current`, first moving `current` to
/// `full` when the packet would not fit in it.
pub(crate) fn append_packet(
    packet: &protos::TracePacket,
    current: &mut Vec<u8>,
    full: &mut Vec<Vec<u8>>,
) {
    let len = packet.encoded_len();
    let framed = key_len(1) + encoded_len_varint(len as u64) + len;
    debug_assert!(framed <= MAX_BLOB_PAYLOAD);
    if current.len() + framed > MAX_BLOB_PAYLOAD {
        full.push(std::mem::take(current));
    }
    if current.is_empty() {
        current.reserve(MAX_BLOB_PAYLOAD);
    }
    prost::encoding::message::encode(1, packet, current);
}

/// Splits interned entries into groups of at most `budget` encoded bytes,
/// keeping their order (strings, mappings, frames, call stacks: an entry
/// comes no later than the entries referring to it).
pub(crate) fn split_interned(
    new: protos::InternedData,
    budget: usize,
) -> Vec<protos::InternedData> {
    struct Split {
        budget: usize,
        chunks: Vec<protos::InternedData>,
        current: protos::InternedData,
        len: usize,
    }
    impl Split {
        fn add<T: Message>(
            &mut self,
            tag: u32,
            items: Vec<T>,
            field: fn(&mut protos::InternedData) -> &mut Vec<T>,
        ) {
            for item in items {
                let len = item.encoded_len();
                let entry = key_len(tag) + encoded_len_varint(len as u64) + len;
                if self.len > 0 && self.len + entry > self.budget {
                    self.chunks.push(std::mem::take(&mut self.current));
                    self.len = 0;
                }
                self.len += entry;
                field(&mut self.current).push(item);
            }
        }
    }
    let mut split = Split {
        budget,
        chunks: Vec::new(),
        current: protos::InternedData::default(),
        len: 0,
    };
    split.add(5, new.function_names, |d| &mut d.function_names);
    split.add(17, new.mapping_paths, |d| &mut d.mapping_paths);
    split.add(16, new.build_ids, |d| &mut d.build_ids);
    split.add(19, new.mappings, |d| &mut d.mappings);
    split.add(6, new.frames, |d| &mut d.frames);
    split.add(7, new.callstacks, |d| &mut d.callstacks);
    if split.len > 0 {
        split.chunks.push(split.current);
    }
    split.chunks
}

/// `s` cut to at most `max` bytes, on a character boundary.
fn truncate_str(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
