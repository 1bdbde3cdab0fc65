//! The worked byte examples of the format reference (§6) as exact test
//! vectors: each record encodes to exactly the listed words and the words
//! decode back to the record.

use std::borrow::Cow;

use trace_common::fxt::read::{Reader, TraceState, decode, starts_with_magic};
use trace_common::fxt::wire;
use trace_common::fxt::write::{encode, encoded_len};
use trace_common::fxt::{Arg, ArgValue, EventKind, LargeBlob, Record, StringRef, ThreadRef};

fn to_words(bytes: &[u8]) -> Vec<u64> {
    assert_eq!(bytes.len() % 8, 0, "not a whole number of words");
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn to_bytes(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// `record` encodes to exactly `words`, and `words` decode to `record`.
#[track_caller]
fn vector(record: &Record<'_>, words: &[u64]) {
    let mut out = vec![0xAA; 3]; // encode appends
    let n = encode(record, &mut out).expect("encode");
    assert_eq!(n, words.len() * 8);
    assert_eq!(&out[..3], &[0xAA; 3]);
    let got = to_words(&out[3..]);
    assert_eq!(
        got,
        words,
        "\n got: {:x?}\nwant: {:x?}",
        got.iter().map(|w| format!("{w:#018x}")).collect::<Vec<_>>(),
        words
            .iter()
            .map(|w| format!("{w:#018x}"))
            .collect::<Vec<_>>()
    );
    assert_eq!(encoded_len(record), Ok(words.len() * 8));

    let bytes = to_bytes(words);
    let (decoded, len) = decode(&bytes).expect("decode");
    assert_eq!(len, bytes.len());
    let record = record.clone().into_owned();
    assert_eq!(decoded.into_owned(), record);

    let all: Vec<_> = Reader::new(&bytes)
        .map(|r| r.map(|(o, r)| (o, r.into_owned())))
        .collect();
    assert_eq!(all, vec![Ok((0, record))]);
}

fn inline(s: &str) -> StringRef<'_> {
    StringRef::Inline(Cow::Borrowed(s))
}

fn args<'a>(a: Vec<Arg<'a>>) -> Cow<'a, [Arg<'a>]> {
    Cow::Owned(a)
}

fn no_args() -> Cow<'static, [Arg<'static>]> {
    Cow::Borrowed(&[])
}

// §6.1 ---------------------------------------------------------------------

fn e1() -> Record<'static> {
    Record::Magic
}
fn e2() -> Record<'static> {
    Record::ProviderInfo {
        id: 1,
        name: "demo".into(),
    }
}

#[test]
fn e1_magic() {
    vector(&e1(), &[0x0016_5478_4604_0010]);
    let mut out = Vec::new();
    encode(&e1(), &mut out).unwrap();
    assert_eq!(out, [0x10, 0x00, 0x04, 0x46, 0x78, 0x54, 0x16, 0x00]);
    assert!(starts_with_magic(&out));
    assert!(!starts_with_magic(&out[..7]));
}

#[test]
fn e2_provider_info() {
    vector(&e2(), &[0x0040_0000_0011_0020, 0x0000_0000_6F6D_6564]);
}

#[test]
fn e3_provider_section() {
    vector(&Record::ProviderSection { id: 1 }, &[0x0000_0000_0012_0010]);
}

#[test]
fn e4_provider_event() {
    vector(
        &Record::ProviderEvent {
            id: 1,
            event: trace_common::fxt::provider_event::BUFFER_OVERFLOW,
        },
        &[0x0000_0000_0013_0010],
    );
}

// §6.2 ---------------------------------------------------------------------

fn e5() -> Record<'static> {
    Record::Initialization {
        ticks_per_second: 1_000_000_000,
    }
}
fn e6() -> Record<'static> {
    Record::String {
        index: 1,
        value: "cat".into(),
    }
}
fn e7() -> Record<'static> {
    Record::String {
        index: 2,
        value: "work".into(),
    }
}
fn e9() -> Record<'static> {
    Record::Thread {
        index: 1,
        process: 0x1234,
        thread: 0x5678,
    }
}

#[test]
fn e5_initialization() {
    vector(&e5(), &[0x21, 0x3B9A_CA00]);
}

#[test]
fn e6_e7_strings() {
    vector(&e6(), &[0x0000_0003_0001_0022, 0x0000_0000_0074_6163]);
    vector(&e7(), &[0x0000_0004_0002_0022, 0x0000_0000_6B72_6F77]);
}

#[test]
fn e8_string_two_stream_words() {
    vector(
        &Record::String {
            index: 3,
            value: "incoming_weight".into(),
        },
        &[
            0x0000_000F_0003_0032,
            0x676E_696D_6F63_6E69,
            0x0074_6867_6965_775F,
        ],
    );
}

#[test]
fn e9_thread() {
    vector(&e9(), &[0x0000_0000_0001_0033, 0x1234, 0x5678]);
}

// §6.3 ---------------------------------------------------------------------

fn e10() -> Record<'static> {
    Record::KernelObject {
        koid: 0x1234,
        obj_type: trace_common::fxt::obj_type::PROCESS,
        name: inline("demo_app"),
        args: no_args(),
    }
}
fn e11() -> Record<'static> {
    Record::KernelObject {
        koid: 0x5678,
        obj_type: trace_common::fxt::obj_type::THREAD,
        name: inline("main"),
        args: args(vec![Arg::new("process", ArgValue::Koid(0x1234))]),
    }
}

#[test]
fn e10_process_name() {
    vector(
        &e10(),
        &[0x0000_0080_0801_0037, 0x1234, 0x7070_615F_6F6D_6564],
    );
}

#[test]
fn e11_thread_name() {
    vector(
        &e11(),
        &[
            0x0000_0180_0402_0067,
            0x5678,
            0x0000_0000_6E69_616D,
            0x0000_0000_8007_0038,
            0x0073_7365_636F_7270,
            0x1234,
        ],
    );
}

// §6.4 ---------------------------------------------------------------------

fn e12() -> Record<'static> {
    Record::Event {
        ts: 2000,
        thread: ThreadRef::Inline {
            process: 0x1234,
            thread: 0x5678,
        },
        category: inline("cat"),
        name: inline("hello"),
        args: args(vec![Arg::new("count", ArgValue::Int32(42))]),
        kind: EventKind::Instant,
    }
}
const E12: [u64; 8] = [
    0x8005_8003_0010_0084,
    0x7D0,
    0x1234,
    0x5678,
    0x0000_0000_0074_6163,
    0x0000_006F_6C6C_6568,
    0x0000_002A_8005_0021,
    0x0000_0074_6E75_6F63,
];

fn refs_event(ts: u64, kind: EventKind) -> Record<'static> {
    Record::Event {
        ts,
        thread: ThreadRef::Index(1),
        category: StringRef::Index(1),
        name: StringRef::Index(2),
        args: no_args(),
        kind,
    }
}
fn e13() -> Record<'static> {
    refs_event(1000, EventKind::DurationComplete { end_ts: 5000 })
}
fn e14() -> Record<'static> {
    Record::Event {
        ts: 3000,
        thread: ThreadRef::Index(1),
        category: StringRef::Index(1),
        name: inline("mem"),
        args: args(vec![Arg::new("rss", ArgValue::Int64(1_048_576))]),
        kind: EventKind::Counter { id: 7 },
    }
}

#[test]
fn e12_instant_all_inline() {
    vector(&e12(), &E12);
}

#[test]
fn e13_duration_complete() {
    vector(&e13(), &[0x0002_0001_0104_0034, 0x3E8, 0x1388]);
}

#[test]
fn e14_counter() {
    vector(
        &e14(),
        &[
            0x8003_0001_0111_0074,
            0xBB8,
            0x0000_0000_006D_656D,
            0x0000_0000_8003_0033,
            0x0000_0000_0073_7372,
            0x0000_0000_0010_0000,
            7,
        ],
    );
}

#[test]
fn e15_async() {
    vector(
        &refs_event(3500, EventKind::AsyncBegin { id: 0x42 }),
        &[0x0002_0001_0105_0034, 0xDAC, 0x42],
    );
    vector(
        &refs_event(3500, EventKind::AsyncInstant { id: 0x42 }),
        &[0x0002_0001_0106_0034, 0xDAC, 0x42],
    );
    vector(
        &refs_event(3500, EventKind::AsyncEnd { id: 0x42 }),
        &[0x0002_0001_0107_0034, 0xDAC, 0x42],
    );
}

#[test]
fn e16_flow() {
    vector(
        &refs_event(1500, EventKind::FlowBegin { id: 0x99 }),
        &[0x0002_0001_0108_0034, 0x5DC, 0x99],
    );
    vector(
        &refs_event(1500, EventKind::FlowStep { id: 0x99 }),
        &[0x0002_0001_0109_0034, 0x5DC, 0x99],
    );
    vector(
        &refs_event(1500, EventKind::FlowEnd { id: 0x99 }),
        &[0x0002_0001_010A_0034, 0x5DC, 0x99],
    );
}

#[test]
fn other_event_kinds_with_refs() {
    // Not in §6, composed the same way as E13: no extra word for begin/end.
    vector(
        &refs_event(1000, EventKind::DurationBegin),
        &[0x0002_0001_0102_0024, 0x3E8],
    );
    vector(
        &refs_event(5000, EventKind::DurationEnd),
        &[0x0002_0001_0103_0024, 0x1388],
    );
    vector(
        &refs_event(1000, EventKind::Instant),
        &[0x0002_0001_0100_0024, 0x3E8],
    );
}

// §6.5 ---------------------------------------------------------------------

fn e17() -> Record<'static> {
    Record::ContextSwitch {
        ts: 8000,
        cpu: 3,
        outgoing_state: 3,
        outgoing_tid: 0x5678,
        incoming_tid: 0x9ABC,
        args: no_args(),
    }
}

#[test]
fn e17_context_switch() {
    vector(&e17(), &[0x1000_0030_0030_0048, 0x1F40, 0x5678, 0x9ABC]);
}

#[test]
fn e18_context_switch_with_weight() {
    let rec = |w: i32| Record::ContextSwitch {
        ts: 8000,
        cpu: 3,
        outgoing_state: 3,
        outgoing_tid: 0x5678,
        incoming_tid: 0x9ABC,
        args: args(vec![Arg {
            name: StringRef::Index(3),
            value: ArgValue::Int32(w),
        }]),
    };
    vector(
        &rec(100),
        &[
            0x1000_0030_0031_0058,
            0x1F40,
            0x5678,
            0x9ABC,
            0x0000_0064_0003_0011,
        ],
    );
    vector(
        &rec(wire::IDLE_WEIGHT),
        &[
            0x1000_0030_0031_0058,
            0x1F40,
            0x5678,
            0x9ABC,
            0x8000_0000_0003_0011,
        ],
    );
}

#[test]
fn e19_thread_wakeup() {
    vector(
        &Record::ThreadWakeup {
            ts: 7500,
            cpu: 1,
            tid: 0x5678,
            args: no_args(),
        },
        &[0x2000_0000_0010_0038, 0x1D4C, 0x5678],
    );
}

#[test]
fn e20_legacy_context_switch() {
    vector(
        &Record::LegacyContextSwitch {
            ts: 9000,
            cpu: 2,
            outgoing_state: 3,
            outgoing_thread: ThreadRef::Index(1),
            incoming_thread: ThreadRef::Index(2),
            outgoing_priority: 20,
            incoming_priority: 16,
        },
        &[0x0101_4020_1302_0028, 0x2328],
    );
}

#[test]
fn legacy_context_switch_inline_threads() {
    // Composed from §2.9.3: both refs 0, four koid words after the timestamp.
    vector(
        &Record::LegacyContextSwitch {
            ts: 9000,
            cpu: 2,
            outgoing_state: 3,
            outgoing_thread: ThreadRef::Inline {
                process: 1,
                thread: 2,
            },
            incoming_thread: ThreadRef::Inline {
                process: 3,
                thread: 4,
            },
            outgoing_priority: 20,
            incoming_priority: 16,
        },
        &[0x0101_4000_0302_0068, 0x2328, 1, 2, 3, 4],
    );
}

// §6.6 ---------------------------------------------------------------------

#[test]
fn e21_log() {
    vector(
        &Record::Log {
            ts: 9500,
            thread: ThreadRef::Index(1),
            message: "hi there".into(),
        },
        &[0x0000_0001_0008_0039, 0x251C, 0x6572_6568_7420_6968],
    );
}

#[test]
fn e22_blob() {
    vector(
        &Record::Blob {
            name: inline("blob1"),
            blob_type: wire::blob_type::DATA,
            payload: Cow::Borrowed(&[1, 2, 3]),
        },
        &[
            0x0001_0003_8005_0035,
            0x0000_0031_626F_6C62,
            0x0000_0000_0003_0201,
        ],
    );
}

#[test]
fn e23_large_blob_attachment() {
    vector(
        &Record::LargeBlob(LargeBlob::Attachment {
            category: StringRef::Index(1),
            name: inline("att"),
            payload: Cow::Borrowed(b"hello"),
        }),
        &[
            0x0000_0100_0000_005F,
            0x0000_0000_8003_0001,
            0x0000_0000_0074_7461,
            5,
            0x0000_006F_6C6C_6568,
        ],
    );
}

#[test]
fn large_blob_event_format() {
    // Composed from §2.11 format 0: format header, timestamp, inline koids,
    // one argument, blob size, payload.
    vector(
        &Record::LargeBlob(LargeBlob::Event {
            category: StringRef::Index(1),
            name: StringRef::Index(2),
            ts: 77,
            thread: ThreadRef::Inline {
                process: 0x1234,
                thread: 0x5678,
            },
            args: args(vec![Arg {
                name: StringRef::Index(3),
                value: ArgValue::Uint32(9),
            }]),
            payload: Cow::Borrowed(b"123456789"),
        }),
        &[
            0x0000_0000_0000_009F,
            0x0000_0001_0002_0001,
            77,
            0x1234,
            0x5678,
            0x0000_0009_0003_0012,
            9,
            0x3837_3635_3433_3231,
            0x39,
        ],
    );
}

#[test]
fn e24_userspace_object() {
    vector(
        &Record::UserspaceObject {
            pointer: 0xDEAD_BEEF,
            process: ThreadRef::Index(1),
            name: inline("obj"),
            args: no_args(),
        },
        &[0x0000_0080_0301_0036, 0xDEAD_BEEF, 0x0000_0000_006A_626F],
    );
}

#[test]
fn userspace_object_inline_process_has_one_koid_word() {
    vector(
        &Record::UserspaceObject {
            pointer: 0xDEAD_BEEF,
            process: ThreadRef::Inline {
                process: 0x1234,
                thread: 0,
            },
            name: StringRef::Index(5),
            args: no_args(),
        },
        &[0x0000_0000_0500_0036, 0xDEAD_BEEF, 0x1234],
    );
    // The thread koid of an inline process ref is not written.
    let with_thread = Record::UserspaceObject {
        pointer: 0xDEAD_BEEF,
        process: ThreadRef::Inline {
            process: 0x1234,
            thread: 99,
        },
        name: StringRef::Index(5),
        args: no_args(),
    };
    let mut out = Vec::new();
    encode(&with_thread, &mut out).unwrap();
    assert_eq!(to_words(&out), [0x0000_0000_0500_0036, 0xDEAD_BEEF, 0x1234]);
}

// §6.7 and §6.0: argument encodings ----------------------------------------

/// `arg` encodes to `words` when it is the only argument of a kernel object
/// record (header, koid, then the argument), and decodes back.
#[track_caller]
fn arg_vector(arg: Arg<'_>, words: &[u64]) {
    let record = Record::KernelObject {
        koid: 0,
        obj_type: 0,
        name: StringRef::Index(1),
        args: Cow::Owned(vec![arg]),
    };
    let header = wire::kernel_object_header(2 + words.len(), 0, 1, 1);
    let mut all = vec![header, 0];
    all.extend_from_slice(words);
    vector(&record, &all);
}

#[test]
fn section_6_7_arguments() {
    let idx = |i: u16, value| Arg {
        name: StringRef::Index(i),
        value,
    };
    arg_vector(idx(3, ArgValue::Int32(-7)), &[0xFFFF_FFF9_0003_0011]);
    arg_vector(
        idx(3, ArgValue::Double(1.5)),
        &[0x0000_0000_0003_0025, 0x3FF8_0000_0000_0000],
    );
    arg_vector(
        Arg::new("k", ArgValue::String(inline("v"))),
        &[0x0000_8001_8001_0036, 0x6B, 0x76],
    );
    arg_vector(
        idx(2, ArgValue::String(StringRef::Empty)),
        &[0x0000_0000_0002_0016],
    );
    arg_vector(
        Arg::new("isactive", ArgValue::Bool(true)),
        &[0x0000_0001_8008_0029, u64::from_le_bytes(*b"isactive")],
    );
    arg_vector(
        Arg::new("waker", ArgValue::Koid(0x9ABC)),
        &[0x0000_0000_8005_0038, 0x0000_0072_656B_6177, 0x9ABC],
    );
}

#[test]
fn section_6_0_published_constants() {
    let idx = |value| Arg {
        name: StringRef::Index(0x7FFF),
        value,
    };
    arg_vector(idx(ArgValue::Null), &[0x0000_0000_7FFF_0010]);
    arg_vector(idx(ArgValue::Bool(true)), &[0x0000_0001_7FFF_0019]);
    arg_vector(idx(ArgValue::Int32(0x1234_5678)), &[0x1234_5678_7FFF_0011]);
    arg_vector(
        idx(ArgValue::String(StringRef::Index(11))),
        &[0x0000_000B_7FFF_0016],
    );
}

#[test]
fn remaining_argument_types() {
    let idx = |value| Arg {
        name: StringRef::Index(4),
        value,
    };
    arg_vector(idx(ArgValue::Bool(false)), &[0x0000_0000_0004_0019]);
    arg_vector(idx(ArgValue::Uint32(u32::MAX)), &[0xFFFF_FFFF_0004_0012]);
    arg_vector(idx(ArgValue::Int64(-1)), &[0x0000_0000_0004_0023, u64::MAX]);
    arg_vector(idx(ArgValue::Uint64(5)), &[0x0000_0000_0004_0024, 5]);
    arg_vector(
        idx(ArgValue::Pointer(0x1000)),
        &[0x0000_0000_0004_0027, 0x1000],
    );
    arg_vector(idx(ArgValue::Koid(3)), &[0x0000_0000_0004_0028, 3]);
    arg_vector(
        idx(ArgValue::Blob(Cow::Borrowed(&[1, 2, 3, 4, 5, 6, 7, 8, 9]))),
        &[0x0000_0009_0004_003A, 0x0807_0605_0403_0201, 0x09],
    );
    arg_vector(
        idx(ArgValue::Blob(Cow::Borrowed(&[]))),
        &[0x0000_0000_0004_001A],
    );
    arg_vector(
        idx(ArgValue::String(inline("12345678"))),
        &[0x0000_8008_0004_0026, u64::from_le_bytes(*b"12345678")],
    );
}

// §6.8 ---------------------------------------------------------------------

const FILE_6_8: &str = "
1000 0446 7854 1600 2000 1100 0000 4000
6465 6d6f 0000 0000 2100 0000 0000 0000
00ca 9a3b 0000 0000 2200 0100 0300 0000
6361 7400 0000 0000 2200 0200 0400 0000
776f 726b 0000 0000 3300 0100 0000 0000
3412 0000 0000 0000 7856 0000 0000 0000
3700 0108 8000 0000 3412 0000 0000 0000
6465 6d6f 5f61 7070 6700 0204 8001 0000
7856 0000 0000 0000 6d61 696e 0000 0000
3800 0780 0000 0000 7072 6f63 6573 7300
3412 0000 0000 0000 3400 0401 0100 0200
e803 0000 0000 0000 8813 0000 0000 0000
8400 1000 0380 0580 d007 0000 0000 0000
3412 0000 0000 0000 7856 0000 0000 0000
6361 7400 0000 0000 6865 6c6c 6f00 0000
2100 0580 2a00 0000 636f 756e 7400 0000
7400 1101 0100 0380 b80b 0000 0000 0000
6d65 6d00 0000 0000 3300 0380 0000 0000
7273 7300 0000 0000 0000 1000 0000 0000
0700 0000 0000 0000 4800 3000 3000 0010
401f 0000 0000 0000 7856 0000 0000 0000
bc9a 0000 0000 0000
";

fn hexdump_bytes(s: &str) -> Vec<u8> {
    let hex: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn file_records() -> Vec<Record<'static>> {
    vec![
        e1(),
        e2(),
        e5(),
        e6(),
        e7(),
        e9(),
        e10(),
        e11(),
        e13(),
        e12(),
        e14(),
        e17(),
    ]
}

#[test]
fn section_6_8_complete_file() {
    let expected = hexdump_bytes(FILE_6_8);
    assert_eq!(expected.len(), 344);

    let mut out = Vec::new();
    let mut offsets = Vec::new();
    for r in file_records() {
        offsets.push(out.len());
        encode(&r, &mut out).unwrap();
    }
    assert_eq!(out.len(), 344);
    let got = to_words(&out);
    let want = to_words(&expected);
    assert_eq!(got.len(), 43);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "word {i}: {g:#018x} != {w:#018x}");
    }
    assert_eq!(out, expected);

    // Read it back, with the per-provider state.
    let mut state = TraceState::new();
    assert_eq!(state.current_provider(), (0, None));
    let mut decoded = Vec::new();
    for item in Reader::new(&expected) {
        let (offset, record) = item.expect("no errors in §6.8");
        state.apply(&record);
        decoded.push((offset, record.into_owned()));
    }
    let want: Vec<_> = offsets.into_iter().zip(file_records()).collect();
    assert_eq!(decoded, want);

    // Provider 1 "demo" at 10^9 ticks/s.
    assert_eq!(state.current_provider(), (1, Some("demo")));
    assert_eq!(state.ticks_per_second(), 1_000_000_000);
    // Strings 1 "cat", 2 "work"; thread 1 = (4660, 22136).
    assert_eq!(state.string(&StringRef::Index(1)), Some("cat"));
    assert_eq!(state.string(&StringRef::Index(2)), Some("work"));
    assert_eq!(state.string(&StringRef::Index(3)), None);
    assert_eq!(state.thread(ThreadRef::Index(1)), Some((4660, 22136)));
    assert_eq!(state.thread(ThreadRef::Index(2)), None);

    let records: Vec<_> = decoded.into_iter().map(|(_, r)| r).collect();
    // Process 4660 "demo_app"; thread 22136 "main" in process 4660.
    match &records[6] {
        Record::KernelObject {
            koid: 4660,
            obj_type: 1,
            name,
            args,
        } => {
            assert_eq!(state.string(name), Some("demo_app"));
            assert!(args.is_empty());
        }
        r => panic!("unexpected {r:?}"),
    }
    match &records[7] {
        Record::KernelObject {
            koid: 22136,
            obj_type: 2,
            name,
            args,
        } => {
            assert_eq!(state.string(name), Some("main"));
            assert_eq!(state.string(&args[0].name), Some("process"));
            assert_eq!(args[0].value, ArgValue::Koid(4660));
        }
        r => panic!("unexpected {r:?}"),
    }
    // A complete slice "work" [1000, 5000] ns on thread (4660, 22136).
    match &records[8] {
        Record::Event {
            ts,
            thread,
            category,
            name,
            kind: EventKind::DurationComplete { end_ts },
            ..
        } => {
            assert_eq!(state.string(category), Some("cat"));
            assert_eq!(state.string(name), Some("work"));
            assert_eq!(state.thread(*thread), Some((4660, 22136)));
            assert_eq!(state.ticks_to_ns(*ts), 1000);
            assert_eq!(state.ticks_to_ns(*end_ts), 5000);
        }
        r => panic!("unexpected {r:?}"),
    }
    // An instant "hello" at 2000 ns with count = 42.
    match &records[9] {
        Record::Event {
            ts,
            thread,
            name,
            args,
            kind: EventKind::Instant,
            ..
        } => {
            assert_eq!(state.string(name), Some("hello"));
            assert_eq!(state.thread(*thread), Some((4660, 22136)));
            assert_eq!(state.ticks_to_ns(*ts), 2000);
            assert_eq!(state.string(&args[0].name), Some("count"));
            assert_eq!(args[0].value, ArgValue::Int32(42));
        }
        r => panic!("unexpected {r:?}"),
    }
    // A counter sample mem/rss = 1048576 at 3000 ns, counter id 7.
    match &records[10] {
        Record::Event {
            ts,
            name,
            args,
            kind: EventKind::Counter { id: 7 },
            ..
        } => {
            assert_eq!(state.string(name), Some("mem"));
            assert_eq!(state.ticks_to_ns(*ts), 3000);
            assert_eq!(state.string(&args[0].name), Some("rss"));
            assert_eq!(args[0].value, ArgValue::Int64(1_048_576));
        }
        r => panic!("unexpected {r:?}"),
    }
    // A context switch on CPU 3 at 8000 ns from 22136 (blocked) to 39612.
    match &records[11] {
        Record::ContextSwitch {
            ts,
            cpu: 3,
            outgoing_state,
            outgoing_tid: 22136,
            incoming_tid: 39612,
            ..
        } => {
            assert_eq!(state.ticks_to_ns(*ts), 8000);
            assert_eq!(
                trace_common::fxt::ThreadState::from_u8(*outgoing_state),
                Some(trace_common::fxt::ThreadState::Blocked)
            );
        }
        r => panic!("unexpected {r:?}"),
    }
}
