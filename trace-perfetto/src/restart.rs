//! What a reader must be told again for a trace cut in two to stand alone:
//! each packet sequence's defaults and the interned entries of its current
//! generation.
//!
//! [`SequenceRestart`] watches the payloads of a stream as they go by;
//! [`SequenceRestart::restart_payloads`] gives payloads that start every
//! sequence afresh (a packet that clears its incremental state, with its
//! defaults) and intern again everything its later packets may refer to.
//! Put at the start of a second file, they make the samples that follow
//! resolve there as they did in the whole stream.

use std::collections::BTreeMap;

use prost::Message;

use crate::protos;
use crate::protos::trace_packet::SequenceFlags;
use crate::writer::{append_packet, split_interned};

/// A blob payload's packets, undecoded (`Trace.packet = 1`).
#[derive(Clone, PartialEq, prost::Message)]
struct PacketBytes {
    #[prost(bytes = "vec", repeated, tag = "1")]
    packet: Vec<Vec<u8>>,
}

/// The state of one sequence since it was last cleared.
#[derive(Clone, Debug, Default)]
struct Sequence {
    defaults: Option<protos::TracePacketDefaults>,
    interned: protos::InternedData,
    /// The latest timestamp of a packet of the sequence.
    ts: u64,
    /// Its state is known (cleared at least once, nothing lost since).
    valid: bool,
}

/// The incremental state of every packet sequence of a stream.
#[derive(Clone, Debug, Default)]
pub struct SequenceRestart {
    sequences: BTreeMap<u32, Sequence>,
}

impl SequenceRestart {
    /// No sequence seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes note of a blob payload (blob type 3) of the stream. Packets that
    /// do not decode are passed over, as a reader passes them over.
    pub fn observe(&mut self, payload: &[u8]) {
        let Ok(packets) = PacketBytes::decode(payload) else {
            return;
        };
        for bytes in packets.packet {
            let Ok(packet) = protos::TracePacket::decode(bytes.as_slice()) else {
                continue;
            };
            let Some(id) = packet.trusted_packet_sequence_id else {
                continue;
            };
            let flags = packet.sequence_flags.unwrap_or(0);
            let cleared = packet.incremental_state_cleared == Some(true)
                || flags & SequenceFlags::SeqIncrementalStateCleared as u32 != 0;
            let sequence = self.sequences.entry(id).or_default();
            if cleared {
                *sequence = Sequence {
                    valid: true,
                    ..Default::default()
                };
            } else if packet.previous_packet_dropped.unwrap_or(0) != 0 {
                sequence.interned = protos::InternedData::default();
                sequence.valid = false;
            }
            if let Some(defaults) = packet.trace_packet_defaults {
                sequence.defaults = Some(defaults);
            }
            if let Some(data) = packet.interned_data {
                let i = &mut sequence.interned;
                i.function_names.extend(data.function_names);
                i.frames.extend(data.frames);
                i.callstacks.extend(data.callstacks);
                i.build_ids.extend(data.build_ids);
                i.mapping_paths.extend(data.mapping_paths);
                i.mappings.extend(data.mappings);
            }
            if let Some(ts) = packet.timestamp {
                sequence.ts = sequence.ts.max(ts);
            }
        }
    }

    /// Whether any sequence was seen.
    pub fn is_empty(&self) -> bool {
        self.sequences.is_empty()
    }

    /// Payloads (each at most [`MAX_BLOB_PAYLOAD`](crate::MAX_BLOB_PAYLOAD)
    /// bytes) that clear every known sequence and give it its defaults and
    /// interned entries again. A sequence whose state was lost is left out:
    /// its next clearing packet starts it.
    pub fn restart_payloads(&self) -> Vec<Vec<u8>> {
        let mut full = Vec::new();
        let mut current = Vec::new();
        for (&id, sequence) in &self.sequences {
            if !sequence.valid {
                continue;
            }
            let header = |first: bool| protos::TracePacket {
                timestamp: Some(sequence.ts),
                trusted_packet_sequence_id: Some(id),
                sequence_flags: Some(if first {
                    SequenceFlags::SeqIncrementalStateCleared as u32
                        | SequenceFlags::SeqNeedsIncrementalState as u32
                } else {
                    SequenceFlags::SeqNeedsIncrementalState as u32
                }),
                trace_packet_defaults: if first {
                    sequence.defaults.clone()
                } else {
                    None
                },
                ..Default::default()
            };
            let overhead = header(true).encoded_len();
            let budget = crate::MAX_BLOB_PAYLOAD.saturating_sub(overhead + 16);
            let chunks = split_interned(sequence.interned.clone(), budget);
            if chunks.is_empty() {
                append_packet(&header(true), &mut current, &mut full);
            }
            for (n, chunk) in chunks.into_iter().enumerate() {
                let mut packet = header(n == 0);
                packet.interned_data = Some(chunk);
                append_packet(&packet, &mut current, &mut full);
            }
        }
        if !current.is_empty() {
            full.push(current);
        }
        full
    }
}
