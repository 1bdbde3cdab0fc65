//! Labels on a process, as a Perfetto packet: what ui.perfetto.dev shows of
//! a process beside its name.
//!
//! Perfetto's FXT importer keeps only the name of a process kernel-object
//! record. Labels reach the UI through the protobuf importer instead: a
//! `TrackDescriptor` whose `ProcessDescriptor` has the process's pid and
//! `process_labels` (`track_event_parser.cc`, `ParseProcessDescriptor`)
//! becomes arguments of the same process (`chrome.process_label[i]`,
//! looked up by pid, so the row the FXT records named), shown as the
//! subtitle of the process's track group and under "Args" in its details.
//! The packet needs no sequence, timestamp or interned state. Its uuid is
//! fixed per pid ([`process_track_uuid`]): a second descriptor with another
//! uuid for the same pid would be taken for a new process of that pid.

use prost::Message;

use crate::protos::{ProcessDescriptor, Trace, TracePacket, TrackDescriptor};

/// The uuid of the descriptor of process `pid`: "TRAC" in the high half,
/// the pid in the low one (non-zero, one per pid).
pub fn process_track_uuid(pid: u32) -> u64 {
    (u64::from(u32::from_be_bytes(*b"TRAC")) << 32) | u64::from(pid)
}

/// A blob payload (a `Trace` of one packet) that labels process `pid` with
/// `labels` (`"key=value"` texts, shown in order).
pub fn process_labels(pid: u32, labels: &[String]) -> Vec<u8> {
    Trace {
        packet: vec![TracePacket {
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(process_track_uuid(pid)),
                process: Some(ProcessDescriptor {
                    pid: Some(pid as i32),
                    process_labels: labels.to_vec(),
                }),
            }),
            ..TracePacket::default()
        }],
    }
    .encode_to_vec()
}

/// The pid and labels of each process descriptor in a blob payload.
pub fn read_process_labels(payload: &[u8]) -> Vec<(u32, Vec<String>)> {
    Trace::decode(payload)
        .map(|t| {
            t.packet
                .into_iter()
                .filter_map(|p| {
                    let process = p.track_descriptor?.process?;
                    Some((process.pid? as u32, process.process_labels))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_round_trip_in_the_bytes_perfetto_expects() {
        let labels = vec!["cgroup=/x.scope".to_owned(), "ns_pid=1".to_owned()];
        let bytes = process_labels(1234, &labels);
        // Trace.packet (field 1), then TracePacket.track_descriptor (field
        // 60, varint tag 0xE2 0x03), TrackDescriptor.uuid (field 1).
        assert_eq!(bytes[0], 0x0a);
        assert_eq!(&bytes[2..4], &[0xe2, 0x03]);
        assert_eq!(bytes[5], 0x08);
        assert_eq!(read_process_labels(&bytes), vec![(1234, labels)]);
        assert_ne!(process_track_uuid(0), 0);
    }
}
