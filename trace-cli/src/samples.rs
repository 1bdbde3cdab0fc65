//! Stack samples in a trace file, for `flamegraph`, `dump`, `convert` and
//! `check`.
//!
//! The recorder writes call stack samples as Perfetto `PerfSample` packets
//! inside FXT blob records of blob type 3 ([`BLOB_TYPE_PERFETTO`]); a
//! [`SampleReader`] fed every such payload in file order turns them back
//! into [`DecodedSample`]s. The processes and threads they ran in are named
//! by the file's kernel object records ([`Names`]).

use std::collections::{BTreeMap, HashMap};
use std::io::Read;

use trace_common::fxt::read::TraceState;
use trace_common::fxt::{Record, obj_type};
use trace_perfetto::{BLOB_TYPE_PERFETTO, DecodedFrame, DecodedSample, SampleReader};

/// The timebase of CPU profile samples.
pub const CPU_CLOCK: &str = "cpu-clock";
/// The timebase of the stacks where threads blocked; the count is the time
/// off CPU in ns.
pub const OFF_CPU: &str = "off-cpu";
/// The timebase of wakers' stacks; the count is how long the woken thread
/// had been blocked, in ns.
pub const WAKEUP: &str = "wakeup";

/// The payload of `record` if it is a blob of Perfetto packets.
pub fn perfetto_payload<'r>(record: &'r Record<'_>) -> Option<&'r [u8]> {
    match record {
        Record::Blob {
            blob_type, payload, ..
        } if *blob_type == BLOB_TYPE_PERFETTO => Some(payload),
        _ => None,
    }
}

/// Whether the counts of `timebase` are durations in ns (off-CPU and wakeup
/// samples) rather than event counts.
pub fn counts_ns(timebase: &str) -> bool {
    timebase == OFF_CPU || timebase == WAKEUP
}

/// What `sample` weighs: its count in ns for a timebase counted in ns, else
/// 1.
pub fn weight(sample: &DecodedSample) -> u64 {
    if counts_ns(&sample.timebase) {
        sample.timebase_count.unwrap_or(0)
    } else {
        1
    }
}

/// The name of `frame` in a flame graph or Chrome JSON: its function, or
/// for an unknown (or unnamed) function the file it is in and the address
/// there (`[libc.so.6+0x27304]`, as `stackcollapse-perf --addrs` keeps
/// them apart; [`trace_analysis::event::unnamed_frame`]). `;` (the folded
/// format's separator) becomes `:`, and line breaks spaces.
pub fn frame_name(frame: &DecodedFrame) -> String {
    let name =
        trace_analysis::event::unnamed_frame(&frame.function, &frame.mapping_path, frame.rel_pc)
            .unwrap_or_else(|| frame.function.clone());
    name.replace(';', ":").replace(['\n', '\r'], " ")
}

/// Names of processes and threads, from kernel object records.
#[derive(Debug, Default)]
pub struct Names {
    processes: HashMap<u64, String>,
    threads: HashMap<u64, String>,
}

impl Names {
    /// Learns the name in `record`, if it is a process or thread kernel
    /// object record (the last name given wins).
    pub fn apply(&mut self, state: &TraceState, record: &Record<'_>) {
        let Record::KernelObject {
            koid,
            obj_type: ty,
            name,
            ..
        } = record
        else {
            return;
        };
        let Some(name) = state.string(name).filter(|n| !n.is_empty()) else {
            return;
        };
        if *ty == obj_type::PROCESS {
            self.processes.insert(*koid, name.to_owned());
        } else if *ty == obj_type::THREAD {
            self.threads.insert(*koid, name.to_owned());
        }
    }

    /// The name of process `pid`.
    pub fn process(&self, pid: u32) -> Option<&str> {
        self.processes.get(&u64::from(pid)).map(String::as_str)
    }

    /// The name of thread `tid`.
    pub fn thread(&self, tid: u32) -> Option<&str> {
        self.threads.get(&u64::from(tid)).map(String::as_str)
    }

    /// What a flame graph's root frame says of a sample of `pid`/`tid`: its
    /// process's name (the `comm` of `perf script`), else its thread's, else
    /// `[pid N]`.
    pub fn root(&self, pid: u32, tid: u32) -> String {
        match self
            .process(pid)
            .or_else(|| self.thread(pid))
            .or_else(|| self.thread(tid))
        {
            Some(n) => n.replace(';', ":").replace(['\n', '\r'], " "),
            None => format!("[pid {pid}]"),
        }
    }
}

/// What reading the samples of a trace file found besides the samples.
#[derive(Debug, Default)]
pub struct Scan {
    /// Names of processes and threads, as the whole file gives them.
    pub names: Names,
    /// How many samples there are of each timebase.
    pub timebases: BTreeMap<String, u64>,
    /// Problems in the Perfetto packets.
    pub packet_errors: u64,
    /// The first of them: (offset of the blob record, what).
    pub first_packet_error: Option<(usize, String)>,
    /// Records of the file that did not decode.
    pub malformed: u64,
}

impl Scan {
    /// Reads the FXT stream `input`, handing each sample to `each` in file
    /// order (so that no more than a blob's samples are in memory at once);
    /// fails only if `input` cannot be read.
    pub fn read(input: impl Read, mut each: impl FnMut(DecodedSample)) -> std::io::Result<Self> {
        let mut scan = Scan::default();
        let mut state = TraceState::new();
        let mut reader = SampleReader::new();
        let mut malformed = 0;
        crate::records::each_record(input, &mut malformed, |offset, _, record| {
            let offset = offset as usize;
            state.apply(&record);
            scan.names.apply(&state, &record);
            let Some(payload) = perfetto_payload(&record) else {
                return Ok(());
            };
            let (samples, errors) = reader.feed(payload);
            scan.packet_errors += errors.len() as u64;
            if let Some(e) = errors.first()
                && scan.first_packet_error.is_none()
            {
                scan.first_packet_error = Some((offset, e.to_string()));
            }
            for s in samples {
                match scan.timebases.get_mut(s.timebase.as_str()) {
                    Some(n) => *n += 1,
                    None => {
                        scan.timebases.insert(s.timebase.clone(), 1);
                    }
                }
                each(s);
            }
            Ok(())
        })?;
        scan.malformed = malformed;
        Ok(scan)
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Samples made by hand for the tests.

    use std::sync::Arc;

    use trace_common::fxt::write::encode;
    use trace_common::fxt::{Arg, ArgValue, Record, StringRef, obj_type};
    use trace_perfetto::{
        BLOB_TYPE_PERFETTO, CpuMode, DecodedFrame, DecodedSample, Frame, Mapping, Sample,
        SampleWriter,
    };

    /// An FXT file: process 100 "spin" with thread 101 "worker", then
    /// blobs of `timebase` samples of thread 101, each stack (root first)
    /// `n` times, 1 ms apart, each with count `count` if given.
    pub fn fxt(timebase: &str, stacks: &[(&[&str], u32)], count: Option<u64>) -> Vec<u8> {
        let mut data = Vec::new();
        let push = |r: &Record<'_>, data: &mut Vec<u8>| encode(r, data).unwrap();
        push(&Record::Magic, &mut data);
        push(
            &Record::ProviderInfo {
                id: 1,
                name: "kernel".into(),
            },
            &mut data,
        );
        push(
            &Record::KernelObject {
                koid: 100,
                obj_type: obj_type::PROCESS,
                name: StringRef::inline("spin"),
                args: vec![].into(),
            },
            &mut data,
        );
        push(
            &Record::KernelObject {
                koid: 101,
                obj_type: obj_type::THREAD,
                name: StringRef::inline("worker"),
                args: vec![Arg::new("process", ArgValue::Koid(100))].into(),
            },
            &mut data,
        );
        let prog = Arc::new(Mapping {
            path: "/bin/prog".into(),
            build_id: None,
            start: 0x1000,
            end: 0x9000,
            file_offset: 0,
            load_bias: 0,
        });
        let mut writer = SampleWriter::new(1, timebase);
        let mut ts = 1_000_000_000;
        for (stack, n) in stacks {
            let frames: Vec<Frame> = stack
                .iter()
                .rev()
                .enumerate()
                .map(|(i, f)| Frame {
                    function: (*f).to_owned(),
                    mapping: prog.clone(),
                    rel_pc: 0x100 * (i as u64 + 1),
                })
                .collect();
            for _ in 0..*n {
                writer.push(&Sample {
                    ts,
                    pid: 100,
                    tid: 101,
                    cpu: 1,
                    cpu_mode: CpuMode::User,
                    timebase_count: count,
                    frames: &frames,
                });
                ts += 1_000_000;
            }
        }
        for payload in writer.take() {
            push(
                &Record::Blob {
                    name: StringRef::inline("perfetto"),
                    blob_type: BLOB_TYPE_PERFETTO,
                    payload: payload.into(),
                },
                &mut data,
            );
        }
        data
    }

    /// A sample of `timebase` in `pid`/`tid` with the `stack` given root
    /// first (each frame in `/bin/prog`).
    pub fn sample(
        timebase: &str,
        pid: u32,
        tid: u32,
        count: Option<u64>,
        stack: &[&str],
    ) -> DecodedSample {
        DecodedSample {
            sequence_id: 1,
            ts: 1_000,
            pid,
            tid,
            cpu: 0,
            cpu_mode: CpuMode::User,
            timebase: timebase.to_owned(),
            timebase_count: count,
            frames: stack
                .iter()
                .rev()
                .map(|f| DecodedFrame {
                    function: (*f).to_owned(),
                    mapping_path: "/bin/prog".to_owned(),
                    build_id: None,
                    rel_pc: 0x10,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_functions_are_named_after_their_file() {
        let frame = |function: &str, mapping: &str| DecodedFrame {
            function: function.to_owned(),
            mapping_path: mapping.to_owned(),
            build_id: None,
            rel_pc: 0x2a,
        };
        assert_eq!(frame_name(&frame("main", "/bin/prog")), "main");
        assert_eq!(
            frame_name(&frame("[unknown]", "/usr/lib/libc.so.6")),
            "[libc.so.6+0x2a]"
        );
        assert_eq!(
            frame_name(&frame("[unknown]", "[kernel.kallsyms]")),
            "[kernel.kallsyms]"
        );
        assert_eq!(frame_name(&frame("[unknown]", "")), "[unknown]");
        assert_eq!(frame_name(&frame("", "")), "[unknown]");
        assert_eq!(frame_name(&frame("", "/bin/prog")), "[prog+0x2a]");
        assert_eq!(frame_name(&frame("a;b\nc", "/x")), "a:b c");
    }

    #[test]
    fn only_off_cpu_and_wakeup_samples_weigh_their_count() {
        use testing::sample;
        assert_eq!(weight(&sample(OFF_CPU, 1, 1, Some(500), &["a"])), 500);
        assert_eq!(weight(&sample(WAKEUP, 1, 1, Some(7), &["a"])), 7);
        assert_eq!(weight(&sample(OFF_CPU, 1, 1, None, &["a"])), 0);
        assert_eq!(weight(&sample(CPU_CLOCK, 1, 1, Some(500), &["a"])), 1);
        assert_eq!(weight(&sample("uprobe:malloc", 1, 1, None, &["a"])), 1);
    }
}
