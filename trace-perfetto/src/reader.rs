//! Perfetto blob payloads back into samples, as Perfetto's importer reads them.

use std::collections::HashMap;

use prost::Message;

use crate::protos;
use crate::protos::trace_packet::SequenceFlags;
use crate::writer::CpuMode;

/// One decoded sample, with its interned references resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodedSample {
    /// The packet's trusted_packet_sequence_id.
    pub sequence_id: u32,
    /// The packet's timestamp (the last one seen when it has none).
    pub ts: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// CPU.
    pub cpu: u32,
    /// Execution state sampled.
    pub cpu_mode: CpuMode,
    /// The stream's name, from the sequence's defaults ("" if none).
    pub timebase: String,
    /// The counter's value, if written.
    pub timebase_count: Option<u64>,
    /// The call stack, leaf first; empty when the sample has none or when it
    /// does not resolve (then an error says why).
    pub frames: Vec<DecodedFrame>,
}

/// One frame of a decoded call stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedFrame {
    /// The function's name ("" when not given).
    pub function: String,
    /// The mapping's path ("" when the frame has no mapping). A path of one
    /// component reads as written; several are joined as Perfetto does
    /// (`/a/b`).
    pub mapping_path: String,
    /// The mapping's build id, if any.
    pub build_id: Option<Vec<u8>>,
    /// The instruction pointer relative to the mapping.
    pub rel_pc: u64,
}

/// A problem in a Perfetto blob payload.
#[derive(Debug, thiserror::Error)]
pub enum PerfettoError {
    /// The payload is not a sequence of framed packets from `offset` on.
    #[error("bad packet framing at byte {offset}: {reason}")]
    Framing {
        /// Byte offset in the payload.
        offset: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// A field's length runs past the end of the payload.
    #[error("field at byte {offset} declares {len} bytes but only {available} remain")]
    Truncated {
        /// Byte offset of the field in the payload.
        offset: usize,
        /// The declared length.
        len: u64,
        /// The bytes left in the payload.
        available: usize,
    },
    /// A packet's bytes are not a valid TracePacket.
    #[error("undecodable TracePacket at byte {offset}: {source}")]
    Decode {
        /// Byte offset of the packet in the payload.
        offset: usize,
        /// What prost found.
        #[source]
        source: prost::DecodeError,
    },
    /// A packet clears, defines or uses incremental state without a sequence.
    #[error("packet at byte {offset} uses incremental state but has no trusted_packet_sequence_id")]
    MissingSequenceId {
        /// Byte offset of the packet in the payload.
        offset: usize,
    },
    /// A packet needs incremental state that its sequence does not have (no
    /// packet cleared it yet, or packets were lost since): Perfetto skips it.
    #[error(
        "packet at byte {offset} on sequence {sequence_id} needs incremental state, but the sequence has none (never cleared, or packets lost); skipped"
    )]
    MissingIncrementalState {
        /// The packet's sequence.
        sequence_id: u32,
        /// Byte offset of the packet in the payload.
        offset: usize,
    },
    /// An interned id that is not defined on the sequence.
    #[error("{what} iid {iid} is not interned on sequence {sequence_id}")]
    UnresolvedIid {
        /// Which table: "callstack", "frame", "function name", "mapping",
        /// "mapping path" or "build id".
        what: &'static str,
        /// The id.
        iid: u64,
        /// The sequence.
        sequence_id: u32,
    },
}

/// One sequence's incremental state.
#[derive(Debug, Default)]
struct SequenceState {
    /// Whether a packet cleared the state and no loss happened since.
    valid: bool,
    timebase: String,
    function_names: HashMap<u64, String>,
    mapping_paths: HashMap<u64, String>,
    build_ids: HashMap<u64, Vec<u8>>,
    mappings: HashMap<u64, protos::Mapping>,
    frames: HashMap<u64, protos::Frame>,
    callstacks: HashMap<u64, Vec<u64>>,
}

impl SequenceState {
    fn clear_interned(&mut self) {
        self.function_names.clear();
        self.mapping_paths.clear();
        self.build_ids.clear();
        self.mappings.clear();
        self.frames.clear();
        self.callstacks.clear();
    }

    fn intern(&mut self, data: protos::InternedData) {
        fn string(s: Option<Vec<u8>>) -> String {
            String::from_utf8_lossy(&s.unwrap_or_default()).into_owned()
        }
        for s in data.function_names {
            self.function_names
                .insert(s.iid.unwrap_or(0), string(s.str));
        }
        for s in data.mapping_paths {
            self.mapping_paths.insert(s.iid.unwrap_or(0), string(s.str));
        }
        for s in data.build_ids {
            self.build_ids
                .insert(s.iid.unwrap_or(0), s.str.unwrap_or_default());
        }
        for m in data.mappings {
            self.mappings.insert(m.iid.unwrap_or(0), m);
        }
        for f in data.frames {
            self.frames.insert(f.iid.unwrap_or(0), f);
        }
        for c in data.callstacks {
            self.callstacks.insert(c.iid.unwrap_or(0), c.frame_ids);
        }
    }

    /// The frames of call stack `iid`, leaf first.
    fn resolve_callstack(
        &self,
        iid: u64,
        sequence_id: u32,
    ) -> Result<Vec<DecodedFrame>, PerfettoError> {
        let unresolved = |what, iid| PerfettoError::UnresolvedIid {
            what,
            iid,
            sequence_id,
        };
        let frame_ids = self
            .callstacks
            .get(&iid)
            .ok_or_else(|| unresolved("callstack", iid))?;
        // At most the writer's limit, the innermost kept: a small packet
        // must not expand into any number of frames.
        let kept = &frame_ids[frame_ids.len().saturating_sub(crate::MAX_FRAMES)..];
        let mut frames = Vec::with_capacity(kept.len());
        for &frame_iid in kept.iter().rev() {
            let frame = self
                .frames
                .get(&frame_iid)
                .ok_or_else(|| unresolved("frame", frame_iid))?;
            let function = match frame.function_name_id.unwrap_or(0) {
                0 => String::new(),
                id => self
                    .function_names
                    .get(&id)
                    .ok_or_else(|| unresolved("function name", id))?
                    .clone(),
            };
            let (mapping_path, build_id) = match frame.mapping_id.unwrap_or(0) {
                0 => (String::new(), None),
                id => {
                    let mapping = self
                        .mappings
                        .get(&id)
                        .ok_or_else(|| unresolved("mapping", id))?;
                    let mut parts = Vec::with_capacity(mapping.path_string_ids.len());
                    for &part in &mapping.path_string_ids {
                        parts.push(
                            self.mapping_paths
                                .get(&part)
                                .ok_or_else(|| unresolved("mapping path", part))?
                                .as_str(),
                        );
                    }
                    let build_id = match mapping.build_id.unwrap_or(0) {
                        0 => None,
                        id => {
                            let bytes = self
                                .build_ids
                                .get(&id)
                                .ok_or_else(|| unresolved("build id", id))?;
                            (!bytes.is_empty()).then(|| bytes.clone())
                        }
                    };
                    (join_path(&parts), build_id)
                }
            };
            frames.push(DecodedFrame {
                function,
                mapping_path,
                build_id,
                rel_pc: frame.rel_pc.unwrap_or(0),
            });
        }
        Ok(frames)
    }
}

/// A mapping's path from its components: one reads as is, several are
/// joined as Perfetto joins them (each after a `/`, a leading `//` made `/`).
fn join_path(parts: &[&str]) -> String {
    match parts {
        [] => String::new(),
        [one] => (*one).to_owned(),
        _ => {
            let mut path = String::new();
            for part in parts {
                path.push('/');
                path.push_str(part);
            }
            if path.starts_with("//") {
                path.remove(0);
            }
            path
        }
    }
}

/// Decodes blob payloads in file order, keeping each sequence's interned
/// data.
#[derive(Debug, Default)]
pub struct SampleReader {
    sequences: HashMap<u32, SequenceState>,
    packets: u64,
    last_ts: u64,
}

impl SampleReader {
    /// A reader that has seen no packet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes one blob payload. Returns the samples it holds, and the
    /// problems found (bad framing, undecodable packet, an interned id that
    /// does not resolve); never panics on any bytes, and a problem in one
    /// packet does not lose the others.
    pub fn feed(&mut self, payload: &[u8]) -> (Vec<DecodedSample>, Vec<PerfettoError>) {
        let mut samples = Vec::new();
        let mut errors = Vec::new();
        let mut pos = 0;
        while pos < payload.len() {
            let field_offset = pos;
            let Some(key) = read_varint(payload, &mut pos) else {
                errors.push(PerfettoError::Framing {
                    offset: field_offset,
                    reason: "unterminated field key",
                });
                break;
            };
            let (field, wire_type) = (key >> 3, key & 7);
            let len = match wire_type {
                0 => {
                    if read_varint(payload, &mut pos).is_none() {
                        errors.push(PerfettoError::Framing {
                            offset: field_offset,
                            reason: "unterminated varint field",
                        });
                        break;
                    }
                    continue;
                }
                1 => 8,
                5 => 4,
                2 => match read_varint(payload, &mut pos) {
                    Some(len) => len,
                    None => {
                        errors.push(PerfettoError::Framing {
                            offset: field_offset,
                            reason: "unterminated field length",
                        });
                        break;
                    }
                },
                _ => {
                    errors.push(PerfettoError::Framing {
                        offset: field_offset,
                        reason: "invalid wire type",
                    });
                    break;
                }
            };
            let available = payload.len() - pos;
            if len > available as u64 {
                errors.push(PerfettoError::Truncated {
                    offset: field_offset,
                    len,
                    available,
                });
                break;
            }
            let body = &payload[pos..pos + len as usize];
            pos += len as usize;
            // `Trace.packet = 1`; any other field of Trace is skipped.
            if field == 1 && wire_type == 2 {
                self.packet(field_offset, body, &mut samples, &mut errors);
            }
        }
        (samples, errors)
    }

    /// Packets decoded so far (of any kind).
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Handles one packet the way Perfetto's `ProtoTraceReader` does: state
    /// cleared or lost, then defaults, then interned data, then the check
    /// of `SEQ_NEEDS_INCREMENTAL_STATE`, then the sample.
    fn packet(
        &mut self,
        offset: usize,
        bytes: &[u8],
        samples: &mut Vec<DecodedSample>,
        errors: &mut Vec<PerfettoError>,
    ) {
        let packet = match protos::TracePacket::decode(bytes) {
            Ok(packet) => packet,
            Err(source) => {
                errors.push(PerfettoError::Decode { offset, source });
                return;
            }
        };
        self.packets += 1;

        let flags = packet.sequence_flags.unwrap_or(0);
        let cleared = packet.incremental_state_cleared == Some(true)
            || flags & SequenceFlags::SeqIncrementalStateCleared as u32 != 0;
        let needs = flags & SequenceFlags::SeqNeedsIncrementalState as u32 != 0;
        let lost = packet.previous_packet_dropped.unwrap_or(0) != 0;
        let Some(sequence_id) = packet.trusted_packet_sequence_id else {
            if cleared
                || needs
                || packet.interned_data.is_some()
                || packet.trace_packet_defaults.is_some()
                || packet.perf_sample.is_some()
            {
                errors.push(PerfettoError::MissingSequenceId { offset });
            }
            return;
        };
        let state = self.sequences.entry(sequence_id).or_default();
        if cleared {
            state.clear_interned();
            state.timebase.clear();
            state.valid = true;
        } else if lost {
            state.clear_interned();
            state.valid = false;
        }
        if let Some(defaults) = packet.trace_packet_defaults {
            state.timebase = defaults
                .perf_sample_defaults
                .and_then(|d| d.timebase)
                .map(|t| timebase_name(&t))
                .unwrap_or_default();
        }
        let mut reported = false;
        if let Some(data) = packet.interned_data {
            if state.valid {
                state.intern(data);
            } else {
                errors.push(PerfettoError::MissingIncrementalState {
                    sequence_id,
                    offset,
                });
                reported = true;
            }
        }
        if needs && !state.valid {
            if !reported {
                errors.push(PerfettoError::MissingIncrementalState {
                    sequence_id,
                    offset,
                });
            }
            return;
        }
        let ts = packet.timestamp.unwrap_or(self.last_ts);
        self.last_ts = self.last_ts.max(ts);

        let Some(sample) = packet.perf_sample else {
            return;
        };
        // A record of kernel ring buffer loss or of the sampler, not a sample.
        if sample.kernel_records_lost.unwrap_or(0) > 0 || sample.producer_event.is_some() {
            return;
        }
        let frames = match sample.callstack_iid.unwrap_or(0) {
            0 => Vec::new(),
            iid => state
                .resolve_callstack(iid, sequence_id)
                .unwrap_or_else(|e| {
                    errors.push(e);
                    Vec::new()
                }),
        };
        samples.push(DecodedSample {
            sequence_id,
            ts,
            pid: sample.pid.unwrap_or(0),
            tid: sample.tid.unwrap_or(0),
            cpu: sample.cpu.unwrap_or(0),
            cpu_mode: CpuMode::from_proto(sample.cpu_mode.unwrap_or(0)),
            timebase: state.timebase.clone(),
            timebase_count: sample.timebase_count,
            frames,
        });
    }
}

/// The name Perfetto gives a timebase: its `name`, else its counter's.
fn timebase_name(timebase: &protos::perf_events::Timebase) -> String {
    match (&timebase.name, timebase.counter) {
        (Some(name), _) if !name.is_empty() => name.clone(),
        (_, Some(counter)) => protos::perf_events::Counter::try_from(counter)
            .map(|c| c.perf_name())
            .unwrap_or("unknown")
            .to_owned(),
        _ => String::new(),
    }
}

/// Reads a base-128 varint at `*pos`, moving past it; `None` if it does not
/// end within the bytes or within 10 bytes.
fn read_varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for i in 0..10 {
        let byte = *bytes.get(*pos + i)?;
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            *pos += i + 1;
            return Some(value);
        }
    }
    None
}
