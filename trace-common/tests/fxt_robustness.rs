//! The reader on malformed input: it never panics, reports errors at
//! aligned offsets inside the input, always terminates, and skips what it
//! does not know.

mod common;

use std::borrow::Cow;

use common::{arb_record, check_reader, encode_all};
use proptest::prelude::*;
use trace_common::fxt::read::{ReadError, ReadErrorKind, Reader, decode};
use trace_common::fxt::wire;
use trace_common::fxt::write::encode;
use trace_common::fxt::{Arg, ArgValue, EventKind, Record, StringRef, ThreadRef};

fn bytes(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn read_all(data: &[u8]) -> Vec<Result<(usize, Record<'static>), ReadError>> {
    Reader::new(data)
        .map(|r| r.map(|(o, r)| (o, r.into_owned())))
        .collect()
}

fn dec(words: &[u64]) -> Result<(Record<'static>, usize), ReadErrorKind> {
    decode(&bytes(words)).map(|(r, n)| (r.into_owned(), n))
}

fn err(offset: usize, kind: ReadErrorKind) -> Result<(usize, Record<'static>), ReadError> {
    Err(ReadError { offset, kind })
}

// Property tests -------------------------------------------------------------

/// A word that looks like a record or argument header more often than a
/// random word does: small size, any type, random upper bits.
fn arb_word() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        (0u64..16, 0u64..8, any::<u64>()).prop_map(|(t, s, hi)| t | (s << 4) | (hi << 16)),
        (0u64..16, 0u64..8, any::<u16>())
            .prop_map(|(t, s, hi)| t | (s << 4) | (u64::from(hi) << 16)),
        Just(0u64),
        Just(wire::MAGIC),
    ]
}

#[derive(Clone, Debug)]
enum Mutation {
    FlipBit(usize),
    Truncate(usize),
    InsertWord(usize, u64),
    SetWord(usize, u64),
    DeleteWord(usize),
    InsertBytes(usize, Vec<u8>),
}

fn arb_mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => any::<usize>().prop_map(Mutation::FlipBit),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        2 => (any::<usize>(), arb_word()).prop_map(|(i, w)| Mutation::InsertWord(i, w)),
        2 => (any::<usize>(), arb_word()).prop_map(|(i, w)| Mutation::SetWord(i, w)),
        1 => any::<usize>().prop_map(Mutation::DeleteWord),
        1 => (any::<usize>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(i, b)| Mutation::InsertBytes(i, b)),
    ]
}

fn mutate(data: &mut Vec<u8>, m: &Mutation) {
    let words = data.len() / 8;
    match m {
        Mutation::FlipBit(i) => {
            if !data.is_empty() {
                let bit = i % (data.len() * 8);
                data[bit / 8] ^= 1 << (bit % 8);
            }
        }
        Mutation::Truncate(i) => data.truncate(i % (data.len() + 1)),
        Mutation::InsertWord(i, w) => {
            let at = (i % (words + 1)) * 8;
            data.splice(at..at, w.to_le_bytes());
        }
        Mutation::SetWord(i, w) => {
            if words > 0 {
                let at = (i % words) * 8;
                data[at..at + 8].copy_from_slice(&w.to_le_bytes());
            }
        }
        Mutation::DeleteWord(i) => {
            if words > 0 {
                let at = (i % words) * 8;
                data.drain(at..at + 8);
            }
        }
        Mutation::InsertBytes(i, b) => {
            let at = i % (data.len() + 1);
            data.splice(at..at, b.iter().copied());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn random_bytes(data in prop::collection::vec(any::<u8>(), 0..600)) {
        check_reader(&data)?;
        // decode on every suffix never panics either.
        for start in 0..data.len().min(64) {
            let _ = decode(&data[start..]);
        }
    }

    #[test]
    fn random_header_like_words(words in prop::collection::vec(arb_word(), 0..80)) {
        check_reader(&bytes(&words))?;
    }

    #[test]
    fn mutated_valid_streams(
        records in prop::collection::vec(arb_record(), 1..12),
        mutations in prop::collection::vec(arb_mutation(), 1..6),
    ) {
        let (mut data, _) = encode_all(&records);
        for m in &mutations {
            mutate(&mut data, m);
        }
        check_reader(&data)?;
    }

    #[test]
    fn truncated_valid_streams(records in prop::collection::vec(arb_record(), 1..8), cut in any::<usize>()) {
        let (data, offsets) = encode_all(&records);
        let cut = cut % (data.len() + 1);
        let (ok, errors) = check_reader(&data[..cut])?;
        // Every record that ends before the cut is read; then at most one error.
        let whole = offsets
            .iter()
            .zip(offsets.iter().skip(1).chain(std::iter::once(&data.len())))
            .filter(|(_, end)| **end <= cut)
            .count();
        prop_assert_eq!(ok, whole);
        prop_assert_eq!(errors, usize::from(cut != data.len() && !offsets.contains(&cut)));
    }
}

// Framing ------------------------------------------------------------------

#[test]
fn empty_input() {
    assert!(read_all(&[]).is_empty());
    assert_eq!(decode(&[]), Err(ReadErrorKind::Truncated));
}

#[test]
fn zero_size_record_is_skipped_one_word() {
    let data = bytes(&[0, wire::MAGIC, 0x0000_0000_FFFF_0000, wire::MAGIC]);
    assert_eq!(
        read_all(&data),
        vec![
            err(0, ReadErrorKind::ZeroSize),
            Ok((8, Record::Magic)),
            err(16, ReadErrorKind::ZeroSize),
            Ok((24, Record::Magic)),
        ]
    );
    assert_eq!(decode(&data), Err(ReadErrorKind::ZeroSize));
    // A large record with size 0 in [4..35] (but bits set above) too.
    let data = bytes(&[0xFFFF_FFF0_0000_000F, wire::MAGIC]);
    assert_eq!(
        read_all(&data),
        vec![err(0, ReadErrorKind::ZeroSize), Ok((8, Record::Magic))]
    );
}

#[test]
fn size_past_end_ends_reading() {
    // String record claiming 3 words, only 2 present.
    let data = bytes(&[wire::MAGIC, 0x0000_0003_0001_0032, 0x0074_6163]);
    assert_eq!(
        read_all(&data),
        vec![Ok((0, Record::Magic)), err(8, ReadErrorKind::Truncated)]
    );
    // A large record with a 32-bit size far past the end.
    let data = bytes(&[0x0000_000F_FFFF_FFFF, 0, 0]);
    assert_eq!(read_all(&data), vec![err(0, ReadErrorKind::Truncated)]);
    assert_eq!(decode(&data), Err(ReadErrorKind::Truncated));
}

#[test]
fn truncated_tail() {
    let mut data = bytes(&[wire::MAGIC]);
    data.extend_from_slice(&[0x21, 0, 0, 0, 0]);
    assert_eq!(
        read_all(&data),
        vec![Ok((0, Record::Magic)), err(8, ReadErrorKind::Truncated)]
    );
    let mut r = Reader::new(&data);
    assert!(r.next().unwrap().is_ok());
    assert_eq!(r.offset(), 8);
    assert!(r.next().unwrap().is_err());
    assert!(r.next().is_none());
    assert!(r.next().is_none());
}

#[test]
fn large_record_framed_by_32_bit_size() {
    // An attachment of 40 000 bytes: more than 4095 words.
    let payload = vec![7u8; 40_000];
    let rec = Record::LargeBlob(trace_common::fxt::LargeBlob::Attachment {
        category: StringRef::Index(1),
        name: StringRef::Index(2),
        payload: Cow::Borrowed(&payload),
    });
    let mut data = Vec::new();
    let n = encode(&rec, &mut data).unwrap();
    assert_eq!(n, 8 * (3 + 5000));
    let header = u64::from_le_bytes(data[..8].try_into().unwrap());
    assert_eq!(wire::get(header, 4, 35), 5003);
    encode(&Record::Magic, &mut data).unwrap();
    assert_eq!(
        read_all(&data),
        vec![Ok((0, rec.into_owned())), Ok((n, Record::Magic))]
    );
}

// Malformed content: error, then the next record --------------------------

#[track_caller]
fn bad_then_magic(record: &[u64], kind: ReadErrorKind) {
    let mut words = record.to_vec();
    words.push(wire::MAGIC);
    let data = bytes(&words);
    assert_eq!(
        read_all(&data),
        vec![err(0, kind), Ok((record.len() * 8, Record::Magic))]
    );
    assert_eq!(decode(&data), Err(kind));
}

#[test]
fn bad_utf8() {
    bad_then_magic(
        &[0x0000_0003_0001_0022, 0x0000_0000_00FF_FEFD],
        ReadErrorKind::InvalidUtf8 { what: "string" },
    );
    // In an inline argument name.
    bad_then_magic(
        &[
            wire::kernel_object_header(4, 1, 0, 1),
            1,
            0x0000_0000_8001_0020,
            0xC3,
        ],
        ReadErrorKind::InvalidUtf8 {
            what: "argument name",
        },
    );
}

#[test]
fn inline_string_past_the_record() {
    // Event of 3 words whose inline name claims 16 bytes.
    bad_then_magic(
        &[
            wire::event_header(3, 0, 0, 1, 0, 0x8010),
            5,
            0x6161_6161_6161_6161,
        ],
        ReadErrorKind::Overrun { what: "name" },
    );
    // String record whose length is more than its size holds.
    bad_then_magic(
        &[0x0000_0009_0001_0022, 0x6161_6161_6161_6161],
        ReadErrorKind::Overrun { what: "string" },
    );
}

#[test]
fn missing_fixed_words() {
    bad_then_magic(
        &[wire::record_header(1, 1)],
        ReadErrorKind::Overrun {
            what: "ticks per second",
        },
    );
    bad_then_magic(
        &[wire::context_switch_header(3, 0, 0, 0), 1, 2],
        ReadErrorKind::Overrun {
            what: "incoming thread koid",
        },
    );
    // Duration complete without its end timestamp.
    bad_then_magic(
        &[wire::event_header(2, 4, 0, 1, 1, 1), 5],
        ReadErrorKind::Overrun { what: "event data" },
    );
    // Inline thread koids missing.
    bad_then_magic(
        &[wire::event_header(3, 0, 0, 0, 1, 1), 5, 6],
        ReadErrorKind::Overrun {
            what: "thread koid",
        },
    );
}

#[test]
fn zero_ticks_per_second() {
    bad_then_magic(
        &[0x21, 0],
        ReadErrorKind::InvalidValue {
            what: "ticks per second (0)",
        },
    );
}

#[test]
fn inconsistent_arguments() {
    // Argument of size 0.
    bad_then_magic(
        &[
            wire::kernel_object_header(3, 1, 1, 1),
            1,
            0x0000_0000_0001_0001,
        ],
        ReadErrorKind::ZeroArgSize,
    );
    // Argument size running past the record.
    bad_then_magic(
        &[
            wire::kernel_object_header(3, 1, 1, 1),
            1,
            wire::arg_header(3, 2, 1),
        ],
        ReadErrorKind::Overrun { what: "argument" },
    );
    // An int64 argument of size 1 (its value word missing).
    bad_then_magic(
        &[
            wire::kernel_object_header(4, 1, 1, 1),
            1,
            wire::arg_header(3, 1, 1),
            99,
        ],
        ReadErrorKind::Overrun {
            what: "argument value",
        },
    );
    // Three arguments announced, room for one.
    bad_then_magic(
        &[
            wire::kernel_object_header(3, 1, 1, 3),
            1,
            wire::int32_arg(1, 5),
        ],
        ReadErrorKind::Overrun { what: "argument" },
    );
    // A blob argument longer than its size.
    bad_then_magic(
        &[
            wire::kernel_object_header(4, 1, 1, 1),
            1,
            wire::arg_header(10, 2, 1) | (9 << 32),
            0,
        ],
        ReadErrorKind::Overrun {
            what: "argument blob",
        },
    );
}

// Unknown things are skipped, not errors ---------------------------------

#[test]
fn unknown_record_types_are_kept_whole() {
    for t in 10u64..=14 {
        let rec = [t | (3 << 4) | (0xABCD << 16), 1, 2];
        let mut words = rec.to_vec();
        words.push(wire::MAGIC);
        let data = bytes(&words);
        let got = read_all(&data);
        assert_eq!(
            got,
            vec![
                Ok((
                    0,
                    Record::Unknown {
                        record_type: t as u8,
                        bytes: Cow::Owned(data[..24].to_vec()),
                    }
                )),
                Ok((24, Record::Magic)),
            ]
        );
        // And it re-encodes to the same bytes.
        let mut out = Vec::new();
        encode(&got[0].as_ref().unwrap().1, &mut out).unwrap();
        assert_eq!(out, &data[..24]);
    }
}

#[test]
fn unknown_subtypes_are_kept_whole() {
    let cases: [&[u64]; 7] = [
        &[wire::event_header(2, 11, 0, 1, 1, 1), 5], // event type 11
        &[0x3000_0000_0000_0028, 5],                 // scheduling type 3
        &[0x0000_0000_0005_0010],                    // metadata type 5
        &[0x0000_0000_0000_0010],                    // metadata type 0
        &[0x0000_0000_0514_0020, 0],                 // trace info type 1, 2 words
        &[0x0000_0010_0000_002F, 0],                 // large type 1
        &[0x0000_0200_0000_002F, 0],                 // large blob format 2
    ];
    for rec in cases {
        let data = bytes(rec);
        let (got, len) = decode(&data).unwrap();
        assert_eq!(len, data.len());
        assert_eq!(
            got,
            Record::Unknown {
                record_type: (rec[0] & 0xF) as u8,
                bytes: Cow::Borrowed(&data[..]),
            }
        );
    }
}

#[test]
fn trace_info() {
    // One-word trace info of another type is kept as TraceInfo.
    let (r, _) = dec(&[0x1234_5678_9A54_0010]).unwrap();
    assert_eq!(
        r,
        Record::TraceInfo {
            info_type: 5,
            data: 0x12_3456_789A,
        }
    );
    // Magic with a trailing word is still the magic record.
    let (r, n) = dec(&[wire::MAGIC + 0x10, 0]).unwrap();
    assert_eq!((r, n), (Record::Magic, 16));
}

#[test]
fn unknown_argument_types_are_skipped() {
    let data = bytes(&[
        wire::kernel_object_header(6, 1, 1, 3),
        1,
        wire::arg_header(12, 2, 1),
        0xFFFF,
        wire::int32_arg(2, -1),
        wire::arg_header(15, 1, 0x8001),
    ]);
    let (r, _) = decode(&data).unwrap();
    assert_eq!(
        r,
        Record::KernelObject {
            koid: 1,
            obj_type: 1,
            name: StringRef::Index(1),
            args: Cow::Owned(vec![Arg {
                name: StringRef::Index(2),
                value: ArgValue::Int32(-1),
            }]),
        }
    );
}

#[test]
fn trailing_words_are_accepted() {
    // E12 with the legacy instant scope word (2 = global) appended.
    let mut words = vec![
        0x8005_8003_0010_0094,
        0x7D0,
        0x1234,
        0x5678,
        0x0000_0000_0074_6163,
        0x0000_006F_6C6C_6568,
        0x0000_002A_8005_0021,
        0x0000_0074_6E75_6F63,
        2,
    ];
    let data = bytes(&words);
    let (r, n) = decode(&data).unwrap();
    assert_eq!(n, 72);
    let want = Record::Event {
        ts: 2000,
        thread: ThreadRef::Inline {
            process: 0x1234,
            thread: 0x5678,
        },
        category: StringRef::inline("cat"),
        name: StringRef::inline("hello"),
        args: Cow::Owned(vec![Arg::new("count", ArgValue::Int32(42))]),
        kind: EventKind::Instant,
    };
    assert_eq!(r, want);
    // The writer omits the scope word.
    let mut out = Vec::new();
    encode(&want, &mut out).unwrap();
    words.pop();
    words[0] = 0x8005_8003_0010_0084;
    assert_eq!(out, bytes(&words));

    // Arguments with trailing words, and an initialization record with one.
    let (r, _) = dec(&[
        wire::kernel_object_header(5, 1, 1, 1),
        1,
        wire::arg_header(8, 3, 1),
        77,
        0xDEAD,
    ])
    .unwrap();
    assert_eq!(
        r,
        Record::KernelObject {
            koid: 1,
            obj_type: 1,
            name: StringRef::Index(1),
            args: Cow::Owned(vec![Arg {
                name: StringRef::Index(1),
                value: ArgValue::Koid(77),
            }]),
        }
    );
    let (r, _) = dec(&[0x31, 1000, 0]).unwrap();
    assert_eq!(
        r,
        Record::Initialization {
            ticks_per_second: 1000
        }
    );
}

#[test]
fn lenient_decoding() {
    // 0x8000 (inline, length 0) reads as the empty string.
    let (r, _) = dec(&[wire::event_header(2, 0, 0, 1, 0x8000, 0x8000), 5]).unwrap();
    assert_eq!(
        r,
        Record::Event {
            ts: 5,
            thread: ThreadRef::Index(1),
            category: StringRef::Empty,
            name: StringRef::Empty,
            args: Cow::Owned(vec![]),
            kind: EventKind::Instant,
        }
    );
    // Bool: only bit 32 counts; reserved bits are ignored.
    let (r, _) = dec(&[
        wire::kernel_object_header(3, 1, 1, 1) | (0xFFFFF << 44),
        1,
        wire::arg_header(9, 1, 1) | (0xFFFF_FFFE << 32),
    ])
    .unwrap();
    match r {
        Record::KernelObject { args, .. } => assert_eq!(args[0].value, ArgValue::Bool(false)),
        r => panic!("{r:?}"),
    }
    // String and thread records for index 0 are returned (the state ignores them).
    let (r, _) = dec(&[0x0000_0001_0000_0022, 0x61]).unwrap();
    assert_eq!(
        r,
        Record::String {
            index: 0,
            value: "a".into()
        }
    );
}

#[test]
fn error_display() {
    let e = ReadError {
        offset: 16,
        kind: ReadErrorKind::Overrun { what: "name" },
    };
    assert_eq!(
        e.to_string(),
        "at byte offset 0x10: name runs past the end of the record"
    );
    let _: &dyn std::error::Error = &e;
}

#[test]
fn the_scope_word_of_an_instant_is_read() {
    use trace_common::fxt::read::{InstantScope, instant_scope};
    let instant = Record::Event {
        ts: 5,
        thread: ThreadRef::Inline {
            process: 1,
            thread: 2,
        },
        category: StringRef::inline("c"),
        name: StringRef::inline("n"),
        args: vec![].into(),
        kind: EventKind::Instant,
    };
    let mut plain = Vec::new();
    encode(&instant, &mut plain).unwrap();
    // The same record with the legacy scope word after it.
    let with = |scope: u64| {
        let mut b = plain.clone();
        b.extend(scope.to_le_bytes());
        let header = u64::from_le_bytes(b[..8].try_into().unwrap()) + (1 << 4);
        b[..8].copy_from_slice(&header.to_le_bytes());
        b
    };
    let scope_of = |b: &[u8]| {
        let (r, _) = decode(b).unwrap();
        instant_scope(&r, b)
    };
    assert_eq!(scope_of(&plain), None);
    assert_eq!(scope_of(&with(0)), None);
    assert_eq!(scope_of(&with(1)), Some(InstantScope::Process));
    assert_eq!(scope_of(&with(2)), Some(InstantScope::Global));
}
