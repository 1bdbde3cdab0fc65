//! Packets moved into a trace merged from several machines: their times
//! put on the merged timeline, their processes, CPUs and sequences given
//! the ids the merged trace gives that machine's, and its name added to
//! the labels of its processes.

use prost::Message;

use crate::MAX_BLOB_PAYLOAD;
use crate::process::process_track_uuid;
use crate::protos::{Trace, TracePacket};

/// How one machine's packets change in the merged trace.
pub trait PacketMap {
    /// The merged timeline's time of the machine's time `ns`.
    fn timestamp(&self, ns: u64) -> u64;
    /// The merged trace's id of the machine's process or thread `id`.
    fn pid(&self, id: u32) -> u32;
    /// The merged trace's number of the machine's CPU `cpu`.
    fn cpu(&self, cpu: u32) -> u32;
    /// The merged trace's id of the machine's packet sequence `id`.
    fn sequence(&self, id: u32) -> u32;
    /// Labels added to those of a process descriptor.
    fn labels(&self) -> &[String];
}

/// A blob payload that is not a Perfetto `Trace`.
#[derive(Debug, thiserror::Error)]
#[error("a Perfetto blob does not decode: {0}")]
pub struct UndecodablePayload(String);

/// The packets of `payload` with `map` applied, as payloads of at most
/// [`MAX_BLOB_PAYLOAD`] bytes each (ids written wider can make one payload
/// two). A packet that alone is larger stays a payload of its own.
pub fn remap_payload(
    payload: &[u8],
    map: &impl PacketMap,
) -> Result<Vec<Vec<u8>>, UndecodablePayload> {
    let trace = Trace::decode(payload).map_err(|e| UndecodablePayload(e.to_string()))?;
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut current = Vec::new();
    for mut packet in trace.packet {
        remap_packet(&mut packet, map);
        let bytes = Trace {
            packet: vec![packet],
        }
        .encode_to_vec();
        if !current.is_empty() && current.len() + bytes.len() > MAX_BLOB_PAYLOAD {
            out.push(std::mem::take(&mut current));
        }
        current.extend_from_slice(&bytes);
    }
    if !current.is_empty() {
        out.push(current);
    }
    Ok(out)
}

fn remap_packet(p: &mut TracePacket, map: &impl PacketMap) {
    if let Some(ts) = &mut p.timestamp {
        *ts = map.timestamp(*ts);
    }
    if let Some(seq) = &mut p.trusted_packet_sequence_id {
        *seq = map.sequence(*seq);
    }
    if let Some(s) = &mut p.perf_sample {
        for id in [&mut s.pid, &mut s.tid].into_iter().flatten() {
            *id = map.pid(*id);
        }
        if let Some(cpu) = &mut s.cpu {
            *cpu = map.cpu(*cpu);
        }
    }
    if let Some(track) = &mut p.track_descriptor
        && let Some(process) = &mut track.process
        && let Some(pid) = &mut process.pid
    {
        let mapped = map.pid(*pid as u32);
        *pid = mapped as i32;
        track.uuid = Some(process_track_uuid(mapped));
        process.process_labels.extend(map.labels().iter().cloned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CpuMode, Frame, Mapping, Sample, SampleReader, SampleWriter, process_labels};
    use std::sync::Arc;

    struct Shift;

    impl PacketMap for Shift {
        fn timestamp(&self, ns: u64) -> u64 {
            ns + 1_000
        }
        fn pid(&self, id: u32) -> u32 {
            10_000_000 + id
        }
        fn cpu(&self, cpu: u32) -> u32 {
            cpu + 2
        }
        fn sequence(&self, id: u32) -> u32 {
            (1 << 20) | id
        }
        fn labels(&self) -> &[String] {
            const { &[] }
        }
    }

    #[test]
    fn samples_keep_their_stacks_on_the_merged_ids_and_times() {
        let m = Arc::new(Mapping {
            path: "/bin/x".into(),
            build_id: None,
            start: 0x1000,
            end: 0x2000,
            file_offset: 0,
            load_bias: 0,
        });
        let frames = [Frame {
            function: "main".into(),
            mapping: m,
            rel_pc: 0x10,
        }];
        let mut w = SampleWriter::new(1, "cpu-clock");
        for i in 0..3 {
            w.push(&Sample {
                ts: 5_000 + i,
                pid: 42,
                tid: 43,
                cpu: 1,
                cpu_mode: CpuMode::User,
                timebase_count: None,
                frames: &frames,
            });
        }
        let mut reader = SampleReader::new();
        for payload in w.take() {
            for p in remap_payload(&payload, &Shift).unwrap() {
                let (samples, errors) = reader.feed(&p);
                assert!(errors.is_empty(), "{errors:?}");
                for s in samples {
                    assert_eq!((s.pid, s.tid, s.cpu), (10_000_042, 10_000_043, 3));
                    assert!(s.ts >= 6_000);
                    assert_eq!(s.frames[0].function, "main");
                }
            }
        }
    }

    #[test]
    fn a_process_descriptor_gets_the_machine_label() {
        struct Named(Vec<String>);
        impl PacketMap for Named {
            fn timestamp(&self, ns: u64) -> u64 {
                ns
            }
            fn pid(&self, id: u32) -> u32 {
                20_000_000 + id
            }
            fn cpu(&self, cpu: u32) -> u32 {
                cpu
            }
            fn sequence(&self, id: u32) -> u32 {
                id
            }
            fn labels(&self) -> &[String] {
                &self.0
            }
        }
        let payload = process_labels(7, &["cgroup=/a".into()]);
        let out = remap_payload(&payload, &Named(vec!["host=db".into()])).unwrap();
        assert_eq!(
            crate::read_process_labels(&out[0]),
            vec![(
                20_000_007,
                vec!["cgroup=/a".to_owned(), "host=db".to_owned()]
            )]
        );
        assert!(remap_payload(&[0xff, 0xff], &Shift).is_err());
    }
}
