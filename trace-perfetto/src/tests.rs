use std::sync::Arc;

use proptest::prelude::*;
use prost::Message;

use crate::protos;
use crate::*;

fn mapping(path: &str, build_id: Option<&[u8]>, start: u64) -> Arc<Mapping> {
    Arc::new(Mapping {
        path: path.to_owned(),
        build_id: build_id.map(<[u8]>::to_vec),
        start,
        end: start + 0x10_0000,
        file_offset: 0x1000,
        load_bias: 0,
    })
}

fn frame(function: &str, mapping: &Arc<Mapping>, rel_pc: u64) -> Frame {
    Frame {
        function: function.to_owned(),
        mapping: mapping.clone(),
        rel_pc,
    }
}

fn sample(ts: u64, frames: &[Frame]) -> Sample<'_> {
    Sample {
        ts,
        pid: 100,
        tid: 101,
        cpu: 1,
        cpu_mode: CpuMode::User,
        timebase_count: None,
        frames,
    }
}

/// What the reader should give back for `sample` written on `sequence_id`.
fn expected(sample: &Sample<'_>, sequence_id: u32, timebase: &str) -> DecodedSample {
    DecodedSample {
        sequence_id,
        ts: sample.ts,
        pid: sample.pid,
        tid: sample.tid,
        cpu: sample.cpu,
        cpu_mode: sample.cpu_mode,
        timebase: timebase.to_owned(),
        timebase_count: sample.timebase_count,
        frames: sample
            .frames
            .iter()
            .map(|f| DecodedFrame {
                function: f.function.clone(),
                mapping_path: f.mapping.path.clone(),
                build_id: f.mapping.build_id.clone().filter(|b| !b.is_empty()),
                rel_pc: f.rel_pc,
            })
            .collect(),
    }
}

/// Feeds every payload, asserting that none has a problem.
fn read_all(payloads: &[Vec<u8>]) -> Vec<DecodedSample> {
    let mut reader = SampleReader::new();
    let mut out = Vec::new();
    for payload in payloads {
        let (samples, errors) = reader.feed(payload);
        assert!(errors.is_empty(), "{errors:?}");
        out.extend(samples);
    }
    out
}

/// One field of a protobuf message, decoded by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(bytes: &[u8], pos: &mut usize) -> u64 {
    let mut value = 0u64;
    let mut shift = 0;
    loop {
        let byte = bytes[*pos];
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return value;
        }
        shift += 7;
    }
}

/// The fields of a message in order, as (field number, value); only the
/// varint and length-delimited wire types occur here.
fn fields(bytes: &[u8]) -> Vec<(u64, Value<'_>)> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < bytes.len() {
        let key = varint(bytes, &mut pos);
        match key & 7 {
            0 => out.push((key >> 3, Value::Varint(varint(bytes, &mut pos)))),
            2 => {
                let len = varint(bytes, &mut pos) as usize;
                out.push((key >> 3, Value::Bytes(&bytes[pos..pos + len])));
                pos += len;
            }
            wire => panic!("unexpected wire type {wire}"),
        }
    }
    out
}

fn field<'a>(fields: &[(u64, Value<'a>)], number: u64) -> Vec<Value<'a>> {
    fields
        .iter()
        .filter(|(n, _)| *n == number)
        .map(|(_, v)| *v)
        .collect()
}

fn one_varint(fields: &[(u64, Value<'_>)], number: u64) -> u64 {
    match field(fields, number).as_slice() {
        [Value::Varint(v)] => *v,
        other => panic!("field {number}: {other:?}"),
    }
}

fn one_bytes<'a>(fields: &[(u64, Value<'a>)], number: u64) -> &'a [u8] {
    match field(fields, number).as_slice() {
        [Value::Bytes(b)] => b,
        other => panic!("field {number}: {other:?}"),
    }
}

/// The framed packets of a payload.
fn packets(payload: &[u8]) -> Vec<&[u8]> {
    fields(payload)
        .into_iter()
        .map(|(number, value)| {
            assert_eq!(number, 1, "Trace.packet is field 1");
            match value {
                Value::Bytes(b) => b,
                Value::Varint(_) => panic!("Trace.packet is length-delimited"),
            }
        })
        .collect()
}

#[test]
fn golden_first_packet() {
    let kernel = mapping("[kernel.kallsyms]", None, 0);
    let libc = mapping("/usr/lib/libc.so.6", Some(&[0xab, 0xcd]), 0x7f00_0000_0000);
    let frames = [
        frame("do_syscall_64", &kernel, 0x44),
        frame("main", &libc, 0x1234),
    ];
    let mut writer = SampleWriter::new(7, "cpu-clock")
        .with_frequency(99)
        .with_counter(protos::perf_events::Counter::SwCpuClock);
    writer.push(&Sample {
        ts: 1_000_000,
        pid: 42,
        tid: 43,
        cpu: 2,
        cpu_mode: CpuMode::Kernel,
        timebase_count: Some(5),
        frames: &frames,
    });
    let payloads = writer.take();
    assert_eq!(payloads.len(), 1);
    let pkts = packets(&payloads[0]);
    assert_eq!(pkts.len(), 1, "one sample that fits: one packet");
    let p = fields(pkts[0]);

    assert_eq!(one_varint(&p, 8), 1_000_000, "timestamp = 8");
    assert_eq!(one_varint(&p, 10), 7, "trusted_packet_sequence_id = 10");
    assert_eq!(
        one_varint(&p, 13),
        3,
        "sequence_flags = 13: cleared | needs"
    );
    assert_eq!(one_varint(&p, 87), 1, "first_packet_on_sequence = 87");
    assert!(field(&p, 58).is_empty(), "no timestamp_clock_id");

    // trace_packet_defaults = 59 { perf_sample_defaults = 12 { timebase = 1 {
    //   frequency = 2, counter = 4, name = 10 } } }
    let defaults = fields(one_bytes(&p, 59));
    let perf_defaults = fields(one_bytes(&defaults, 12));
    let timebase = fields(one_bytes(&perf_defaults, 1));
    assert_eq!(one_bytes(&timebase, 10), b"cpu-clock");
    assert_eq!(one_varint(&timebase, 2), 99);
    assert_eq!(one_varint(&timebase, 4), 1, "SW_CPU_CLOCK = 1");

    // interned_data = 12
    let interned = fields(one_bytes(&p, 12));
    let strings = |number| -> Vec<(u64, Vec<u8>)> {
        field(&interned, number)
            .into_iter()
            .map(|v| match v {
                Value::Bytes(b) => {
                    let s = fields(b);
                    (one_varint(&s, 1), one_bytes(&s, 2).to_vec())
                }
                Value::Varint(_) => panic!("InternedString is a message"),
            })
            .collect()
    };
    // function_names = 5; stacks are interned root first.
    assert_eq!(
        strings(5),
        vec![(1, b"main".to_vec()), (2, b"do_syscall_64".to_vec())]
    );
    assert_eq!(
        strings(17),
        vec![
            (1, b"/usr/lib/libc.so.6".to_vec()),
            (2, b"[kernel.kallsyms]".to_vec())
        ],
        "mapping_paths = 17"
    );
    assert_eq!(strings(16), vec![(1, vec![0xab, 0xcd])], "build_ids = 16");

    // mappings = 19: iid 1, build_id 2, start 4, end 5, path_string_ids 7
    // (unpacked: a varint entry), exact_offset 8.
    let mappings = field(&interned, 19);
    assert_eq!(mappings.len(), 2);
    let Value::Bytes(libc_mapping) = mappings[0] else {
        panic!()
    };
    let m = fields(libc_mapping);
    assert_eq!(one_varint(&m, 1), 1);
    assert_eq!(one_varint(&m, 2), 1);
    assert_eq!(one_varint(&m, 4), 0x7f00_0000_0000);
    assert_eq!(one_varint(&m, 5), 0x7f00_0010_0000);
    assert_eq!(one_varint(&m, 7), 1);
    assert_eq!(one_varint(&m, 8), 0x1000);

    // frames = 6: iid 1, function_name_id 2, mapping_id 3, rel_pc 4.
    let frames = field(&interned, 6);
    assert_eq!(frames.len(), 2);
    let Value::Bytes(root) = frames[0] else {
        panic!()
    };
    let f = fields(root);
    assert_eq!(
        (
            one_varint(&f, 1),
            one_varint(&f, 2),
            one_varint(&f, 3),
            one_varint(&f, 4)
        ),
        (1, 1, 1, 0x1234)
    );

    // callstacks = 7: iid 1, frame_ids 2, unpacked, root first.
    let callstack = fields(one_bytes(&interned, 7));
    assert_eq!(one_varint(&callstack, 1), 1);
    assert_eq!(
        field(&callstack, 2),
        vec![Value::Varint(1), Value::Varint(2)]
    );

    // perf_sample = 66: cpu 1, pid 2, tid 3, callstack_iid 4, cpu_mode 5
    // (MODE_KERNEL = 1), timebase_count 6.
    let s = fields(one_bytes(&p, 66));
    assert_eq!(one_varint(&s, 1), 2);
    assert_eq!(one_varint(&s, 2), 42);
    assert_eq!(one_varint(&s, 3), 43);
    assert_eq!(one_varint(&s, 4), 1);
    assert_eq!(one_varint(&s, 5), 1);
    assert_eq!(one_varint(&s, 6), 5);
}

#[test]
fn golden_later_packet_bytes() {
    let mut writer = SampleWriter::new(1, "x");
    writer.push(&sample(5, &[]));
    writer.take();
    writer.push(&Sample {
        ts: 300,
        pid: 1,
        tid: 2,
        cpu: 3,
        cpu_mode: CpuMode::User,
        timebase_count: None,
        frames: &[],
    });
    let payloads = writer.take();
    #[rustfmt::skip]
    let expected: Vec<u8> = vec![
        0x0a, 18,               // Trace.packet (1, length-delimited), 18 bytes
        0x40, 0xac, 0x02,       // timestamp (8) = 300
        0x50, 0x01,             // trusted_packet_sequence_id (10) = 1
        0x68, 0x02,             // sequence_flags (13) = SEQ_NEEDS_INCREMENTAL_STATE
        0x92, 0x04, 8,          // perf_sample (66), 8 bytes
        0x08, 0x03,             //   cpu (1) = 3
        0x10, 0x01,             //   pid (2) = 1
        0x18, 0x02,             //   tid (3) = 2
        0x28, 0x02,             //   cpu_mode (5) = MODE_USER
    ];
    assert_eq!(payloads, vec![expected]);
}

#[test]
fn round_trip_several_sequences() {
    let libc = mapping(
        "/usr/lib/libc.so.6",
        Some(b"\x01\x02\x03\x04"),
        0x7f00_0000_0000,
    );
    let app = mapping("/usr/bin/app", None, 0x5555_0000_0000);
    let kernel = mapping("[kernel.kallsyms]", Some(b""), 0);
    let pool: Vec<Frame> = (0..40)
        .map(|i| match i % 3 {
            0 => frame(&format!("libc_fn_{i}"), &libc, 0x100 * i),
            1 => frame(&format!("app::module::function_{i}"), &app, 0x10 * i),
            _ => frame(&format!("kernel_fn_{i}"), &kernel, 0x8 * i),
        })
        .collect();
    let stacks: Vec<Vec<Frame>> = (0..25)
        .map(|i: usize| {
            let depth = 1 + i % 12;
            (0..depth)
                .map(|d| pool[(i * 7 + d * 3) % pool.len()].clone())
                .collect()
        })
        .collect();

    let names = ["cpu-clock", "off-cpu", "uprobe:foo"];
    let mut writers: Vec<SampleWriter> = names
        .iter()
        .enumerate()
        .map(|(i, name)| SampleWriter::new(i as u32 + 1, name))
        .collect();
    let mut file = Vec::new();
    let mut want = Vec::new();
    for n in 0..3000u64 {
        let w = (n % 3) as usize;
        let stack = &stacks[(n as usize * 13) % stacks.len()];
        let s = Sample {
            ts: 1_000 + n,
            pid: 10 + w as u32,
            tid: 20 + (n % 5) as u32,
            cpu: (n % 4) as u32,
            cpu_mode: [CpuMode::User, CpuMode::Kernel, CpuMode::Unknown][(n % 3) as usize],
            timebase_count: (n % 2 == 0).then_some(n * 10),
            frames: stack,
        };
        writers[w].push(&s);
        want.push(expected(&s, w as u32 + 1, names[w]));
        if writers[w].ready() {
            file.extend(writers[w].take());
        }
    }
    for w in &mut writers {
        assert_eq!(w.samples(), 1000);
        file.extend(w.take());
        assert!(w.take().is_empty());
    }
    assert!(file.len() > 3, "several payloads");
    for payload in &file {
        assert!(payload.len() <= MAX_BLOB_PAYLOAD);
    }

    let mut got = read_all(&file);
    let key = |s: &DecodedSample| (s.sequence_id, s.ts);
    got.sort_by_key(key);
    want.sort_by_key(key);
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
}

#[test]
fn strings_interned_once_per_sequence() {
    let libc = mapping("/usr/lib/libc.so.6", None, 0x1000);
    let stack = [
        frame("leaf_function_name_marker", &libc, 1),
        frame("root_function_name_marker", &libc, 2),
    ];
    let count =
        |bytes: &[u8], needle: &[u8]| bytes.windows(needle.len()).filter(|w| *w == needle).count();
    for sequence_id in [1, 2] {
        let mut writer = SampleWriter::new(sequence_id, "cpu-clock");
        writer.push(&sample(1, &stack));
        let first: usize = writer.take().iter().map(Vec::len).sum();
        writer.push(&sample(2, &stack));
        let second: usize = writer.take().iter().map(Vec::len).sum();
        assert!(
            second * 4 < first,
            "a repeated stack costs little: {second} vs {first}"
        );
        assert!(second < 40, "{second}");
        for n in 3..50 {
            writer.push(&sample(n, &stack));
        }
        let all: Vec<u8> = writer.take().concat();
        assert_eq!(count(&all, b"leaf_function_name_marker"), 0);
        assert_eq!(count(&all, b"/usr/lib/libc.so.6"), 0);
    }
    // The same stack in a new writer (a new sequence) is interned again.
    let mut writer = SampleWriter::new(3, "cpu-clock");
    writer.push(&sample(1, &stack));
    writer.push(&sample(2, &stack));
    let all = writer.take().concat();
    assert_eq!(count(&all, b"leaf_function_name_marker"), 1);
    assert_eq!(count(&all, b"/usr/lib/libc.so.6"), 1);
}

#[test]
fn huge_sample_is_split() {
    let libc = mapping("/usr/lib/libc.so.6", Some(&[7; 20]), 0x1000);
    let stack: Vec<Frame> = (0..200)
        .map(|i| frame(&format!("{i:04}{}", "x".repeat(1996)), &libc, i))
        .collect();
    let mut writer = SampleWriter::new(9, "off-cpu");
    let s = sample(77, &stack);
    writer.push(&s);
    assert!(writer.ready());
    let payloads = writer.take();
    assert!(payloads.len() > 1, "{} payloads", payloads.len());
    let mut flags = Vec::new();
    let mut with_sample = Vec::new();
    for payload in &payloads {
        assert!(payload.len() <= MAX_BLOB_PAYLOAD, "{}", payload.len());
        for p in packets(payload) {
            let f = fields(p);
            assert_eq!(one_varint(&f, 10), 9);
            assert_eq!(one_varint(&f, 8), 77);
            flags.push(one_varint(&f, 13));
            assert_eq!(
                field(&f, 59).len(),
                usize::from(flags.len() == 1),
                "defaults first"
            );
            with_sample.push(!field(&f, 66).is_empty());
        }
    }
    assert!(flags.len() > 1);
    assert_eq!(flags[0], 3);
    assert!(flags[1..].iter().all(|&f| f == 2));
    let last = with_sample.len() - 1;
    assert!(
        with_sample[last] && !with_sample[..last].contains(&true),
        "the sample comes last"
    );
    let got = read_all(&payloads);
    assert_eq!(got.len(), 1);
    let mut want = expected(&s, 9, "off-cpu");
    for f in &mut want.frames {
        f.function.truncate(MAX_FUNCTION_NAME_LEN);
    }
    assert_eq!(got[0], want);

    // The same stack again is one small packet.
    writer.push(&sample(78, &stack));
    let again = writer.take();
    assert_eq!(again.len(), 1);
    assert!(again[0].len() < 64);
}

#[test]
fn deepest_stacks_and_longest_names_are_cut() {
    let lib = mapping("/lib/x.so", None, 0);
    let euro = "€".repeat(1000);
    let stack: Vec<Frame> = (0..MAX_FRAMES + 500)
        .map(|i| frame(&format!("{euro}{i}"), &lib, i as u64))
        .collect();
    let mut writer = SampleWriter::new(1, "deep");
    writer.push(&sample(1, &stack));
    let payloads = writer.take();
    assert!(payloads.iter().all(|p| p.len() <= MAX_BLOB_PAYLOAD));
    let got = read_all(&payloads);
    assert_eq!(got[0].frames.len(), MAX_FRAMES);
    // The innermost frames are kept. Every name is cut to 341 "€" (1023
    // bytes), so they are all the same function, told apart by rel_pc.
    for (i, f) in got[0].frames.iter().enumerate() {
        assert_eq!(f.function, "€".repeat(341));
        assert_eq!(f.rel_pc, i as u64);
    }
}

#[test]
fn ready_and_take() {
    let lib = mapping("/lib/x.so", None, 0);
    let stack = [frame("f", &lib, 1)];
    let mut writer = SampleWriter::new(1, "t");
    assert!(writer.take().is_empty());
    assert!(!writer.ready());
    let mut n = 0;
    while !writer.ready() {
        writer.push(&sample(n, &stack));
        n += 1;
    }
    let payloads = writer.take();
    assert_eq!(payloads.len(), 1);
    assert!(payloads[0].len() > MAX_BLOB_PAYLOAD / 2);
    assert!(!writer.ready());
    assert_eq!(read_all(&payloads).len() as u64, n);
}

fn framed(packet: &protos::TracePacket) -> Vec<u8> {
    protos::Trace {
        packet: vec![packet.clone()],
    }
    .encode_to_vec()
}

#[test]
fn unresolved_iids_are_reported() {
    let clear = protos::TracePacket {
        trusted_packet_sequence_id: Some(5),
        sequence_flags: Some(3),
        timestamp: Some(10),
        perf_sample: Some(protos::PerfSample {
            pid: Some(1),
            tid: Some(1),
            callstack_iid: Some(9),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut reader = SampleReader::new();
    let (samples, errors) = reader.feed(&framed(&clear));
    assert_eq!(samples.len(), 1, "the sample stays, without its stack");
    assert!(samples[0].frames.is_empty());
    assert!(
        matches!(
            errors.as_slice(),
            [PerfettoError::UnresolvedIid {
                what: "callstack",
                iid: 9,
                sequence_id: 5
            }]
        ),
        "{errors:?}"
    );

    let dangling_frame = protos::TracePacket {
        trusted_packet_sequence_id: Some(5),
        sequence_flags: Some(2),
        interned_data: Some(protos::InternedData {
            callstacks: vec![protos::Callstack {
                iid: Some(1),
                frame_ids: vec![4],
            }],
            ..Default::default()
        }),
        perf_sample: Some(protos::PerfSample {
            callstack_iid: Some(1),
            ..Default::default()
        }),
        ..Default::default()
    };
    let (samples, errors) = reader.feed(&framed(&dangling_frame));
    assert_eq!(samples.len(), 1);
    assert_eq!(samples[0].ts, 10, "no timestamp: the last one");
    assert!(
        matches!(
            errors.as_slice(),
            [PerfettoError::UnresolvedIid {
                what: "frame",
                iid: 4,
                sequence_id: 5
            }]
        ),
        "{errors:?}"
    );
    assert_eq!(reader.packets(), 2);
    assert!(errors[0].to_string().contains("frame iid 4"));
}

#[test]
fn packets_before_the_clearing_are_skipped() {
    let lib = mapping("/lib/x.so", None, 0);
    let stack = [frame("f", &lib, 1)];
    let mut writer = SampleWriter::new(4, "t");
    writer.push(&sample(1, &stack));
    let first = writer.take();
    writer.push(&sample(2, &stack));
    let second = writer.take();

    // The second payload alone: its sequence was never cleared.
    let mut reader = SampleReader::new();
    let (samples, errors) = reader.feed(&second[0]);
    assert!(samples.is_empty());
    assert!(
        matches!(
            errors.as_slice(),
            [PerfettoError::MissingIncrementalState {
                sequence_id: 4,
                offset: 0
            }]
        ),
        "{errors:?}"
    );
    // Then in order.
    let (samples, errors) = reader.feed(&first[0]);
    assert_eq!((samples.len(), errors.len()), (1, 0));
    let (samples, errors) = reader.feed(&second[0]);
    assert_eq!((samples.len(), errors.len()), (1, 0));
    assert_eq!(samples[0].frames[0].function, "f");

    // A lost packet invalidates the state until the next clearing.
    let lost = protos::TracePacket {
        trusted_packet_sequence_id: Some(4),
        previous_packet_dropped: Some(1),
        ..Default::default()
    };
    let (_, errors) = reader.feed(&framed(&lost));
    assert!(errors.is_empty());
    let (samples, errors) = reader.feed(&second[0]);
    assert!(samples.is_empty());
    assert_eq!(errors.len(), 1);
}

#[test]
fn a_bad_packet_does_not_lose_the_others() {
    let lib = mapping("/lib/x.so", None, 0);
    let stack = [frame("f", &lib, 1)];
    let mut writer = SampleWriter::new(1, "t");
    writer.push(&sample(1, &stack));
    writer.push(&sample(2, &stack));
    let payload = writer.take().concat();
    let packets = packets(&payload);
    let mut mixed = Vec::new();
    let mut frame_packet = |body: &[u8]| {
        mixed.push(0x0a);
        mixed.push(body.len() as u8);
        mixed.extend_from_slice(body);
    };
    frame_packet(packets[0]);
    frame_packet(&[0xff]); // an unterminated key
    frame_packet(packets[1]);
    mixed.extend_from_slice(&[0x0a, 0x7f, 0x01]); // 127 bytes declared, 1 there

    let mut reader = SampleReader::new();
    let (samples, errors) = reader.feed(&mixed);
    assert_eq!(samples.len(), 2);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(matches!(errors[0], PerfettoError::Decode { .. }));
    assert!(matches!(
        errors[1],
        PerfettoError::Truncated {
            len: 127,
            available: 1,
            ..
        }
    ));
    assert_eq!(reader.packets(), 2);
}

#[test]
fn packets_without_a_sequence() {
    let packet = protos::TracePacket {
        timestamp: Some(1),
        perf_sample: Some(protos::PerfSample::default()),
        ..Default::default()
    };
    let mut reader = SampleReader::new();
    let (samples, errors) = reader.feed(&framed(&packet));
    assert!(samples.is_empty());
    assert!(matches!(
        errors.as_slice(),
        [PerfettoError::MissingSequenceId { offset: 0 }]
    ));
    // A packet of another kind is skipped quietly.
    let other = protos::TracePacket {
        timestamp: Some(1),
        ..Default::default()
    };
    assert_eq!(reader.feed(&framed(&other)).1.len(), 0);
}

#[test]
fn timebase_from_the_counter() {
    let mut writer =
        SampleWriter::new(2, "").with_counter(protos::perf_events::Counter::HwCpuCycles);
    writer.push(&sample(1, &[]));
    let got = read_all(&writer.take());
    assert_eq!(got[0].timebase, "cpu-cycles");
    assert!(got[0].frames.is_empty());
}

fn some_payloads() -> Vec<Vec<u8>> {
    let lib = mapping("/lib/x.so", Some(b"id"), 0x1000);
    let kernel = mapping("[kernel.kallsyms]", None, 0);
    let stack = [
        frame("a", &lib, 1),
        frame("b", &kernel, 2),
        frame("c", &lib, 3),
    ];
    let mut writer = SampleWriter::new(3, "cpu-clock").with_period(1000);
    for n in 0..4 {
        writer.push(&sample(n, &stack[n as usize % 2..]));
    }
    writer.take()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut reader = SampleReader::new();
        let _ = reader.feed(&bytes);
        let _ = reader.feed(&some_payloads()[0]);
        let _ = reader.feed(&bytes);
    }

    #[test]
    fn corrupted_payloads_never_panic(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut payload = some_payloads().concat();
        for (at, byte) in edits {
            let i = at.index(payload.len());
            payload[i] = byte;
        }
        payload.truncate(cut.index(payload.len() + 1));
        let mut reader = SampleReader::new();
        let _ = reader.feed(&payload);
    }
}

#[test]
fn a_long_stream_starts_new_generations_that_still_decode() {
    let lib = mapping("/usr/lib/libx.so", Some(b"\x01\x02"), 0x1000);
    let mut writer = SampleWriter::new(5, "cpu-clock").with_max_interned(10);
    let mut written = Vec::new();
    for i in 0..40u64 {
        let frames = vec![
            frame(&format!("leaf_{i}"), &lib, 0x10 + i),
            frame("main", &lib, 0x20),
        ];
        let s = sample(1000 + i, &frames);
        writer.push(&s);
        written.push(expected(&s, 5, "cpu-clock"));
    }
    let payloads = writer.take();
    // Every sample decodes, across the clearing packets of new generations.
    assert_eq!(read_all(&payloads), written);
    // The tables were started afresh: the first packet alone says it is the
    // sequence's first; several clear the state.
    let packets: Vec<&[u8]> = payloads.iter().flat_map(|p| packets(p)).collect();
    let firsts = packets
        .iter()
        .filter(|p| !field(&fields(p), 87).is_empty())
        .count();
    let clearings = packets
        .iter()
        .filter(|p| one_varint(&fields(p), 13) & 1 != 0)
        .count();
    assert_eq!(firsts, 1);
    assert!(clearings >= 5, "{clearings} clearing packets");
}

#[test]
fn a_stream_cut_anywhere_reads_the_same_after_the_restart_payloads() {
    let libc = mapping("/usr/lib/libc.so.6", Some(b"\x01\x02"), 0x7f00_0000_0000);
    let kernel = mapping("[kernel.kallsyms]", Some(b""), 0);
    let pool: Vec<Frame> = (0..60)
        .map(|i| match i % 2 {
            0 => frame(&format!("libc_fn_{i}"), &libc, 0x100 * i),
            _ => frame(&format!("kernel_fn_{i}"), &kernel, 0x8 * i),
        })
        .collect();
    let names = ["cpu-clock", "off-cpu"];
    // The second writer starts new generations, so some cuts fall after a
    // clearing packet of its own.
    let mut writers = [
        SampleWriter::new(1, names[0]),
        SampleWriter::new(2, names[1]).with_max_interned(40),
    ];
    let mut file = Vec::new();
    for n in 0..1500u64 {
        let w = (n % 2) as usize;
        let depth = 1 + (n as usize * 7) % 20;
        let stack: Vec<Frame> = (0..depth)
            .map(|d| pool[(n as usize * 11 + d * 5) % pool.len()].clone())
            .collect();
        writers[w].push(&sample(1_000 + n, &stack));
        if writers[w].ready() {
            file.extend(writers[w].take());
        }
    }
    for w in &mut writers {
        file.extend(w.take());
    }
    assert!(file.len() > 6, "several payloads: {}", file.len());
    let whole = read_all(&file);
    let mut restart = SequenceRestart::new();
    let mut before = 0;
    for cut in 0..=file.len() {
        let mut second = restart.restart_payloads();
        for payload in &second {
            assert!(payload.len() <= MAX_BLOB_PAYLOAD);
        }
        second.extend(file[cut..].iter().cloned());
        let got = read_all(&second);
        assert_eq!(got, whole[before..], "cut before payload {cut}");
        if let Some(payload) = file.get(cut) {
            restart.observe(payload);
            before += read_all(&file[..=cut]).len() - read_all(&file[..cut]).len();
        }
    }
}
