//! What the writer refuses, and that a refused record appends nothing.

use std::borrow::Cow;

use trace_common::fxt::write::{EncodeError, encode, encoded_len};
use trace_common::fxt::{Arg, ArgValue, EventKind, LargeBlob, Record, StringRef, ThreadRef};

fn event<'a>(
    thread: ThreadRef,
    category: StringRef<'a>,
    name: StringRef<'a>,
    args: Vec<Arg<'a>>,
) -> Record<'a> {
    Record::Event {
        ts: 1,
        thread,
        category,
        name,
        args: Cow::Owned(args),
        kind: EventKind::Instant,
    }
}

#[track_caller]
fn refused(record: &Record<'_>, want: EncodeError) {
    let mut out = vec![9u8; 5];
    assert_eq!(encode(record, &mut out), Err(want.clone()));
    assert_eq!(out, vec![9u8; 5], "bytes appended on error");
    assert_eq!(encoded_len(record), Err(want));
}

fn int_arg(i: usize) -> Arg<'static> {
    Arg {
        name: StringRef::Index(1),
        value: ArgValue::Int32(i as i32),
    }
}

#[test]
fn too_many_args() {
    let args: Vec<_> = (0..16).map(int_arg).collect();
    refused(
        &event(
            ThreadRef::Index(1),
            StringRef::Empty,
            StringRef::Empty,
            args.clone(),
        ),
        EncodeError::TooManyArgs { count: 16 },
    );
    refused(
        &Record::ContextSwitch {
            ts: 0,
            cpu: 0,
            outgoing_state: 0,
            outgoing_tid: 0,
            incoming_tid: 0,
            args: Cow::Owned(args),
        },
        EncodeError::TooManyArgs { count: 16 },
    );
    // 15 is fine.
    let args: Vec<_> = (0..15).map(int_arg).collect();
    let r = event(
        ThreadRef::Index(1),
        StringRef::Empty,
        StringRef::Empty,
        args,
    );
    assert_eq!(encoded_len(&r), Ok(8 * (2 + 15)));
}

#[test]
fn record_too_large() {
    let big = "x".repeat(3000);
    let args: Vec<_> = (0..11)
        .map(|_| Arg::new("k", ArgValue::String(StringRef::inline(big.as_str()))))
        .collect();
    // header + ts + 11 × (1 + 1 + 375) words.
    refused(
        &event(
            ThreadRef::Index(1),
            StringRef::Empty,
            StringRef::Empty,
            args,
        ),
        EncodeError::RecordTooLarge {
            words: 2 + 11 * 377,
            max: 4095,
        },
    );
    // Exactly 4095 words is fine: a string record of 4094 stream words.
    let value = "y".repeat(4094 * 8 + 1);
    let r = Record::String {
        index: 1,
        value: value[..4094 * 8].into(),
    };
    assert_eq!(encoded_len(&r), Ok(4095 * 8));
    refused(
        &Record::String {
            index: 1,
            value: value.as_str().into(),
        },
        EncodeError::RecordTooLarge {
            words: 4096,
            max: 4095,
        },
    );
    // A blob argument too large for its 12-bit size field.
    let blob = vec![0u8; 4095 * 8];
    refused(
        &Record::LargeBlob(LargeBlob::Event {
            category: StringRef::Empty,
            name: StringRef::Empty,
            ts: 0,
            thread: ThreadRef::Index(1),
            args: Cow::Owned(vec![Arg::new("b", ArgValue::Blob(Cow::Borrowed(&blob)))]),
            payload: Cow::Borrowed(&[]),
        }),
        EncodeError::ArgTooLarge { words: 4097 },
    );
}

#[test]
fn strings_too_long() {
    let s = "z".repeat(0x8000);
    refused(
        &event(
            ThreadRef::Index(1),
            StringRef::inline(s.as_str()),
            StringRef::Empty,
            vec![],
        ),
        EncodeError::StringTooLong { len: 0x8000 },
    );
    refused(
        &Record::String {
            index: 1,
            value: s.as_str().into(),
        },
        EncodeError::StringTooLong { len: 0x8000 },
    );
    refused(
        &Record::Log {
            ts: 0,
            thread: ThreadRef::Index(1),
            message: s.as_str().into(),
        },
        EncodeError::StringTooLong { len: 0x8000 },
    );
    refused(
        &Record::Blob {
            name: StringRef::Empty,
            blob_type: 1,
            payload: Cow::Borrowed(s.as_bytes()),
        },
        EncodeError::PayloadTooLong { len: 0x8000 },
    );
    // 0x7FFF bytes fit the ref, but not into a normal record...
    refused(
        &event(
            ThreadRef::Index(1),
            StringRef::inline(&s[1..]),
            StringRef::Empty,
            vec![],
        ),
        EncodeError::RecordTooLarge {
            words: 2 + 0x1000,
            max: 4095,
        },
    );
    // ...only into a large one.
    let r = Record::LargeBlob(LargeBlob::Attachment {
        category: StringRef::inline(&s[1..]),
        name: StringRef::Empty,
        payload: Cow::Borrowed(&[]),
    });
    assert_eq!(encoded_len(&r), Ok(8 * (3 + 0x1000)));
}

#[test]
fn bad_indexes() {
    refused(
        &event(
            ThreadRef::Index(1),
            StringRef::Index(0),
            StringRef::Empty,
            vec![],
        ),
        EncodeError::BadStringIndex { index: 0 },
    );
    refused(
        &event(
            ThreadRef::Index(1),
            StringRef::Empty,
            StringRef::Index(0x8000),
            vec![],
        ),
        EncodeError::BadStringIndex { index: 0x8000 },
    );
    refused(
        &event(
            ThreadRef::Index(1),
            StringRef::Empty,
            StringRef::Empty,
            vec![Arg {
                name: StringRef::Index(0xFFFF),
                value: ArgValue::Null,
            }],
        ),
        EncodeError::BadStringIndex { index: 0xFFFF },
    );
    refused(
        &Record::String {
            index: 0,
            value: "a".into(),
        },
        EncodeError::BadStringIndex { index: 0 },
    );
    refused(
        &event(
            ThreadRef::Index(0),
            StringRef::Empty,
            StringRef::Empty,
            vec![],
        ),
        EncodeError::BadThreadIndex,
    );
    refused(
        &Record::Thread {
            index: 0,
            process: 1,
            thread: 2,
        },
        EncodeError::BadThreadIndex,
    );
    refused(
        &Record::UserspaceObject {
            pointer: 0,
            process: ThreadRef::Index(0),
            name: StringRef::Empty,
            args: Cow::Borrowed(&[]),
        },
        EncodeError::BadThreadIndex,
    );
}

#[test]
fn name_too_long() {
    let name = "n".repeat(256);
    refused(
        &Record::ProviderInfo {
            id: 1,
            name: name.as_str().into(),
        },
        EncodeError::NameTooLong { len: 256 },
    );
    let r = Record::ProviderInfo {
        id: 1,
        name: name[1..].into(),
    };
    assert_eq!(encoded_len(&r), Ok(8 * 33));
}

#[test]
fn values_out_of_range() {
    refused(
        &Record::ProviderEvent { id: 1, event: 16 },
        EncodeError::ValueOutOfRange {
            field: "provider event id",
            value: 16,
        },
    );
    refused(
        &Record::TraceInfo {
            info_type: 16,
            data: 0,
        },
        EncodeError::ValueOutOfRange {
            field: "trace info type",
            value: 16,
        },
    );
    refused(
        &Record::TraceInfo {
            info_type: 1,
            data: 1 << 40,
        },
        EncodeError::ValueOutOfRange {
            field: "trace info data",
            value: 1 << 40,
        },
    );
    refused(
        &Record::Initialization {
            ticks_per_second: 0,
        },
        EncodeError::ValueOutOfRange {
            field: "ticks per second",
            value: 0,
        },
    );
    refused(
        &Record::ContextSwitch {
            ts: 0,
            cpu: 0,
            outgoing_state: 16,
            outgoing_tid: 0,
            incoming_tid: 0,
            args: Cow::Borrowed(&[]),
        },
        EncodeError::ValueOutOfRange {
            field: "outgoing thread state",
            value: 16,
        },
    );
    refused(
        &Record::LegacyContextSwitch {
            ts: 0,
            cpu: 0,
            outgoing_state: 0xFF,
            outgoing_thread: ThreadRef::Index(1),
            incoming_thread: ThreadRef::Index(1),
            outgoing_priority: 0,
            incoming_priority: 0,
        },
        EncodeError::ValueOutOfRange {
            field: "outgoing thread state",
            value: 0xFF,
        },
    );
}

#[test]
fn malformed_unknown() {
    let cases: [(u8, Vec<u8>); 5] = [
        (10, vec![]),
        (10, vec![0x1A, 0, 0, 0, 0, 0, 0]),
        (11, 0x1Au64.to_le_bytes().to_vec()), // type mismatch
        (10, 0x2Au64.to_le_bytes().to_vec()), // size 2, 1 word
        (16, 0x10u64.to_le_bytes().to_vec()), // not a 4-bit type
    ];
    for (record_type, bytes) in cases {
        refused(
            &Record::Unknown {
                record_type,
                bytes: Cow::Owned(bytes),
            },
            EncodeError::MalformedUnknown,
        );
    }
}

#[test]
fn empty_inline_string_is_ref_zero() {
    let r = event(
        ThreadRef::Index(1),
        StringRef::Inline(Cow::Borrowed("")),
        StringRef::Inline(Cow::Borrowed("")),
        vec![Arg {
            name: StringRef::Inline(Cow::Borrowed("")),
            value: ArgValue::String(StringRef::Inline(Cow::Borrowed(""))),
        }],
    );
    let mut out = Vec::new();
    assert_eq!(encode(&r, &mut out), Ok(24));
    assert_eq!(
        out,
        [
            0x0000_0000_0110_0034u64.to_le_bytes(),
            1u64.to_le_bytes(),
            0x0000_0000_0000_0016u64.to_le_bytes()
        ]
        .concat()
    );
}

#[test]
fn display() {
    assert_eq!(
        EncodeError::TooManyArgs { count: 16 }.to_string(),
        "16 arguments, at most 15 allowed"
    );
    let _: &dyn std::error::Error = &EncodeError::BadThreadIndex;
}
