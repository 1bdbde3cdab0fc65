//! One machine's trace rewritten into the merged one: every time put on
//! the recording machine's clock, every process, thread, CPU, provider and
//! packet sequence given the machine's ids, and every process labelled
//! with the machine's name.

use std::collections::HashSet;
use std::io::{Read, Write};

use trace_common::fxt::read::{TraceState, decode};
use trace_common::fxt::stream::RecordStream;
use trace_common::fxt::write::encode;
use trace_common::fxt::{Arg, ArgValue, LargeBlob, Record, StringRef, ThreadRef, obj_type};
use trace_perfetto::{BLOB_TYPE_PERFETTO, PacketMap};

use crate::clock::ClockMap;
use crate::ids::MachineIds;

/// What went wrong with a machine's trace.
#[derive(Debug, thiserror::Error)]
pub enum RemapError {
    /// Reading the trace or writing the merged one failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// What rewriting one machine's trace did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemapSummary {
    /// Records read.
    pub records: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Records left out: damaged, undecodable, or with a CPU past what
    /// their record type can hold.
    pub dropped: u64,
    /// Why the first of them was left out.
    pub first_problem: Option<String>,
}

/// Rewrites the records of one machine's trace.
pub struct Remapper {
    ids: MachineIds,
    clock: ClockMap,
    labels: Vec<String>,
    state: TraceState,
    labelled: HashSet<u64>,
    summary: RemapSummary,
}

impl Remapper {
    /// A rewriter for the machine of `ids`, whose clock `clock` maps onto
    /// the recording machine's, its processes labelled `host=HOST` when
    /// `host` is given.
    pub fn new(ids: MachineIds, clock: ClockMap, host: Option<&str>) -> Self {
        Remapper {
            ids,
            clock,
            labels: host.map(|h| vec![format!("host={h}")]).unwrap_or_default(),
            state: TraceState::new(),
            labelled: HashSet::new(),
            summary: RemapSummary::default(),
        }
    }

    /// Rewrites the trace read from `input` onto `out` (without its magic
    /// number record: the merged trace has one). A damaged place is left
    /// out and counted, and the rest is still written.
    pub fn copy(
        mut self,
        input: impl Read,
        mut out: impl Write,
    ) -> Result<RemapSummary, RemapError> {
        let mut stream = RecordStream::new(input);
        let mut buf = Vec::new();
        while let Some(next) = stream.next_record() {
            match next {
                Ok((_, bytes)) => {
                    self.summary.records += 1;
                    let bytes = bytes.to_vec();
                    self.record(&bytes, &mut buf);
                }
                Err(e) => self.problem(format!("damaged: {e}")),
            }
            if buf.len() >= 1 << 20 {
                out.write_all(&buf)?;
                self.summary.bytes += buf.len() as u64;
                buf.clear();
            }
        }
        out.write_all(&buf)?;
        self.summary.bytes += buf.len() as u64;
        out.flush()?;
        Ok(self.summary)
    }

    fn problem(&mut self, why: String) {
        self.summary.dropped += 1;
        self.summary.first_problem.get_or_insert(why);
    }

    /// Rewrites one record onto `out`.
    pub fn record(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        let mut record = match decode(bytes) {
            Ok((r, _)) => r,
            Err(e) => return self.problem(format!("undecodable record: {e}")),
        };
        self.state.apply(&record);
        let mut extra = Vec::new();
        match self.map(&mut record, &mut extra) {
            Ok(true) => {}
            Ok(false) => return,
            Err(why) => return self.problem(why),
        }
        if let Err(e) = encode(&record, out) {
            return self.problem(format!("cannot write a record again: {e}"));
        }
        for r in extra {
            if let Err(e) = encode(&r, out) {
                self.problem(format!("cannot write a record again: {e}"));
            }
        }
    }

    /// The machine's time `ticks` (of the current provider) on the merged
    /// timeline.
    fn ts(&self, ticks: u64) -> u64 {
        let tps = self.state.ticks_per_second();
        if tps == 1_000_000_000 {
            return self.clock.to_local(ticks);
        }
        let local = self.clock.to_local(self.state.ticks_to_ns(ticks));
        u64::try_from(u128::from(local) * u128::from(tps) / 1_000_000_000).unwrap_or(u64::MAX)
    }

    fn thread(&self, r: &mut ThreadRef) {
        if let ThreadRef::Inline { process, thread } = r {
            *process = self.ids.koid(*process);
            *thread = self.ids.koid(*thread);
        }
    }

    fn args(&self, args: &mut std::borrow::Cow<'_, [Arg<'_>]>) {
        if args.iter().any(|a| matches!(a.value, ArgValue::Koid(_))) {
            for a in args.to_mut() {
                if let ArgValue::Koid(k) = &mut a.value {
                    *k = self.ids.koid(*k);
                }
            }
        }
    }

    /// Maps `record` in place, with records to write after it in `extra`;
    /// `false` when it is left out on purpose, an error when it cannot be
    /// kept.
    fn map<'a>(
        &mut self,
        record: &mut Record<'a>,
        extra: &mut Vec<Record<'a>>,
    ) -> Result<bool, String> {
        match record {
            Record::Magic => return Ok(false),
            Record::ProviderInfo { id, .. }
            | Record::ProviderSection { id }
            | Record::ProviderEvent { id, .. } => *id = self.ids.provider(*id),
            Record::Thread {
                process, thread, ..
            } => {
                *process = self.ids.koid(*process);
                *thread = self.ids.koid(*thread);
            }
            Record::Event {
                ts,
                thread,
                args,
                kind,
                ..
            } => {
                if let trace_common::fxt::EventKind::DurationComplete { end_ts } = kind {
                    *end_ts = self.ts(*end_ts);
                }
                *ts = self.ts(*ts);
                self.thread(thread);
                self.args(args);
            }
            Record::Blob {
                blob_type, payload, ..
            } if *blob_type == BLOB_TYPE_PERFETTO => {
                let payloads = trace_perfetto::remap_payload(payload, &Packets(self))
                    .map_err(|e| e.to_string())?;
                let mut payloads = payloads.into_iter();
                *payload = payloads.next().unwrap_or_default().into();
                extra.extend(payloads.map(|p| Record::Blob {
                    name: StringRef::Empty,
                    blob_type: BLOB_TYPE_PERFETTO,
                    payload: p.into(),
                }));
            }
            Record::UserspaceObject { process, args, .. } => {
                self.thread(process);
                self.args(args);
            }
            Record::KernelObject {
                koid,
                obj_type: t,
                args,
                ..
            } => {
                if matches!(*t, obj_type::PROCESS | obj_type::THREAD) {
                    *koid = self.ids.koid(*koid);
                }
                self.args(args);
                if *t == obj_type::PROCESS && !self.labels.is_empty() && self.labelled.insert(*koid)
                {
                    let pid = u32::try_from(*koid).unwrap_or(u32::MAX);
                    extra.push(Record::Blob {
                        name: StringRef::Empty,
                        blob_type: BLOB_TYPE_PERFETTO,
                        payload: trace_perfetto::process_labels(pid, &self.labels).into(),
                    });
                }
            }
            Record::ContextSwitch {
                ts,
                cpu,
                outgoing_tid,
                incoming_tid,
                args,
                ..
            } => {
                *ts = self.ts(*ts);
                *cpu = self.cpu16(*cpu)?;
                *outgoing_tid = self.ids.koid(*outgoing_tid);
                *incoming_tid = self.ids.koid(*incoming_tid);
                self.args(args);
            }
            Record::ThreadWakeup { ts, cpu, tid, args } => {
                *ts = self.ts(*ts);
                *cpu = self.cpu16(*cpu)?;
                *tid = self.ids.koid(*tid);
                self.args(args);
            }
            Record::LegacyContextSwitch {
                ts,
                cpu,
                outgoing_thread,
                incoming_thread,
                ..
            } => {
                *ts = self.ts(*ts);
                let merged = self.ids.cpu(u32::from(*cpu));
                *cpu = u8::try_from(merged)
                    .map_err(|_| format!("CPU {merged} does not fit a legacy context switch"))?;
                self.thread(outgoing_thread);
                self.thread(incoming_thread);
            }
            Record::Log { ts, thread, .. } => {
                *ts = self.ts(*ts);
                self.thread(thread);
            }
            Record::LargeBlob(LargeBlob::Event {
                ts, thread, args, ..
            }) => {
                *ts = self.ts(*ts);
                self.thread(thread);
                self.args(args);
            }
            Record::TraceInfo { .. }
            | Record::Initialization { .. }
            | Record::String { .. }
            | Record::Blob { .. }
            | Record::LargeBlob(LargeBlob::Attachment { .. })
            | Record::Unknown { .. } => {}
        }
        Ok(true)
    }

    fn cpu16(&self, cpu: u16) -> Result<u16, String> {
        let merged = self.ids.cpu(u32::from(cpu));
        u16::try_from(merged).map_err(|_| format!("CPU {merged} does not fit a scheduling record"))
    }
}

/// A machine's Perfetto packets mapped as its FXT records are.
struct Packets<'r>(&'r Remapper);

impl PacketMap for Packets<'_> {
    fn timestamp(&self, ns: u64) -> u64 {
        self.0.clock.to_local(ns)
    }
    fn pid(&self, id: u32) -> u32 {
        self.0.ids.id32(id)
    }
    fn cpu(&self, cpu: u32) -> u32 {
        self.0.ids.cpu(cpu)
    }
    fn sequence(&self, id: u32) -> u32 {
        self.0.ids.sequence(id)
    }
    fn labels(&self) -> &[String] {
        &self.0.labels
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_common::fxt::EventKind;
    use trace_common::fxt::read::Reader;

    fn encode_all(records: &[Record<'_>]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in records {
            encode(r, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn a_machine_trace_lands_on_its_ids_and_the_local_clock() {
        let input = encode_all(&[
            Record::Magic,
            Record::ProviderInfo {
                id: 1,
                name: "kernel".into(),
            },
            Record::Initialization {
                ticks_per_second: 1_000_000_000,
            },
            Record::KernelObject {
                koid: 1234,
                obj_type: obj_type::PROCESS,
                name: StringRef::inline("nginx"),
                args: vec![].into(),
            },
            Record::KernelObject {
                koid: 1235,
                obj_type: obj_type::THREAD,
                name: StringRef::inline("worker"),
                args: vec![Arg::new("process", ArgValue::Koid(1234))].into(),
            },
            Record::Event {
                ts: 5_000_000,
                thread: ThreadRef::Inline {
                    process: 1234,
                    thread: 1235,
                },
                category: StringRef::inline("c"),
                name: StringRef::inline("span"),
                args: vec![].into(),
                kind: EventKind::DurationComplete { end_ts: 6_000_000 },
            },
            Record::LegacyContextSwitch {
                ts: 5_500_000,
                cpu: 1,
                outgoing_state: 3,
                outgoing_thread: ThreadRef::Inline {
                    process: 1234,
                    thread: 1235,
                },
                incoming_thread: ThreadRef::Inline {
                    process: 0,
                    thread: 0,
                },
                outgoing_priority: 120,
                incoming_priority: 0,
            },
        ]);
        let mut out = Vec::new();
        let summary = Remapper::new(
            MachineIds::new(1, 2),
            ClockMap::constant(1_000_000),
            Some("db"),
        )
        .copy(&input[..], &mut out)
        .unwrap();
        assert_eq!(summary.records, 7);
        assert_eq!(summary.dropped, 0);
        let records: Vec<_> = Reader::new(&out)
            .map(|r| r.unwrap().1.into_owned())
            .collect();
        assert!(!records.contains(&Record::Magic));
        assert!(records.contains(&Record::ProviderInfo {
            id: 1 << 16 | 1,
            name: "kernel".into()
        }));
        let labels: Vec<_> = records
            .iter()
            .filter_map(|r| match r {
                Record::Blob { payload, .. } => {
                    Some(trace_perfetto::read_process_labels(&payload[..]))
                }
                _ => None,
            })
            .collect();
        assert_eq!(labels, vec![vec![(10_001_234, vec!["host=db".to_owned()])]]);
        let thread = ThreadRef::Inline {
            process: 10_001_234,
            thread: 10_001_235,
        };
        assert!(records.iter().any(|r| matches!(*r,
            Record::Event { ts: 4_000_000, thread: ref t, kind: EventKind::DurationComplete { end_ts: 5_000_000 }, .. } if *t == thread)));
        assert!(records.iter().any(|r| matches!(*r,
            Record::LegacyContextSwitch { ts: 4_500_000, cpu: 3, outgoing_thread: ref t,
                incoming_thread: ThreadRef::Inline { process: 0, thread: 0 }, .. } if *t == thread)));
        assert!(records.iter().any(|r| matches!(*r,
            Record::KernelObject { koid: 10_001_235, ref args, .. } if args[0].value == ArgValue::Koid(10_001_234))));
    }

    #[test]
    fn damage_and_cpus_past_the_record_are_counted_and_the_rest_kept() {
        let mut input = encode_all(&[Record::LegacyContextSwitch {
            ts: 1,
            cpu: 200,
            outgoing_state: 3,
            outgoing_thread: ThreadRef::Inline {
                process: 1,
                thread: 1,
            },
            incoming_thread: ThreadRef::Inline {
                process: 2,
                thread: 2,
            },
            outgoing_priority: 1,
            incoming_priority: 1,
        }]);
        input.extend(encode_all(&[Record::String {
            index: 1,
            value: "x".into(),
        }]));
        input.extend_from_slice(&[0, 0, 0]);
        let mut out = Vec::new();
        let s = Remapper::new(MachineIds::new(1, 100), ClockMap::default(), None)
            .copy(&input[..], &mut out)
            .unwrap();
        assert_eq!(s.dropped, 2, "{s:?}");
        assert!(s.first_problem.unwrap().contains("CPU 300"));
        assert_eq!(Reader::new(&out).count(), 1);
    }
}
