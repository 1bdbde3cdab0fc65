//! Strategies shared by the property tests.

#![allow(dead_code, reason = "each test binary uses some of the strategies")]

use std::borrow::Cow;

use proptest::prelude::*;
use trace_common::fxt::read::Reader;
use trace_common::fxt::wire;
use trace_common::fxt::write::encode;
use trace_common::fxt::{Arg, ArgValue, EventKind, LargeBlob, Record, StringRef, ThreadRef};

/// Text of 0 to about 40 bytes: ASCII, multi-byte UTF-8, lengths on both
/// sides of 8-byte boundaries.
pub fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z_]{0,17}", "\\PC{0,12}", ".{7,9}", "[αβγ€😀a]{0,12}",]
}

pub fn arb_string_ref() -> impl Strategy<Value = StringRef<'static>> {
    prop_oneof![
        Just(StringRef::Empty),
        (1..=wire::MAX_STRING_INDEX).prop_map(StringRef::Index),
        arb_text().prop_map(StringRef::inline),
    ]
}

pub fn arb_thread_ref() -> impl Strategy<Value = ThreadRef> {
    prop_oneof![
        (1..=u8::MAX).prop_map(ThreadRef::Index),
        (any::<u64>(), any::<u64>())
            .prop_map(|(process, thread)| ThreadRef::Inline { process, thread }),
    ]
}

pub fn arb_bytes(max: usize) -> impl Strategy<Value = Cow<'static, [u8]>> {
    prop::collection::vec(any::<u8>(), 0..=max).prop_map(Cow::Owned)
}

/// Every argument value type; doubles exclude NaN (NaN != NaN).
pub fn arb_arg_value() -> impl Strategy<Value = ArgValue<'static>> {
    use proptest::num::f64 as f;
    prop_oneof![
        Just(ArgValue::Null),
        any::<i32>().prop_map(ArgValue::Int32),
        any::<u32>().prop_map(ArgValue::Uint32),
        any::<i64>().prop_map(ArgValue::Int64),
        any::<u64>().prop_map(ArgValue::Uint64),
        (f::POSITIVE | f::NEGATIVE | f::NORMAL | f::SUBNORMAL | f::ZERO | f::INFINITE)
            .prop_map(ArgValue::Double),
        arb_string_ref().prop_map(ArgValue::String),
        any::<u64>().prop_map(ArgValue::Pointer),
        any::<u64>().prop_map(ArgValue::Koid),
        any::<bool>().prop_map(ArgValue::Bool),
        arb_bytes(40).prop_map(ArgValue::Blob),
    ]
}

pub fn arb_arg() -> impl Strategy<Value = Arg<'static>> {
    (arb_string_ref(), arb_arg_value()).prop_map(|(name, value)| Arg { name, value })
}

pub fn arb_args() -> impl Strategy<Value = Cow<'static, [Arg<'static>]>> {
    prop::collection::vec(arb_arg(), 0..=wire::MAX_ARGS).prop_map(Cow::Owned)
}

pub fn arb_event_kind() -> impl Strategy<Value = EventKind> {
    (0u8..=10, any::<u64>()).prop_map(|(t, x)| EventKind::from_parts(t, x).unwrap())
}

/// A well-framed record of a type the reader does not decode.
pub fn arb_unknown() -> impl Strategy<Value = Record<'static>> {
    let normal = (
        10u8..=14,
        any::<u64>(),
        prop::collection::vec(any::<u64>(), 0..4),
    )
        .prop_map(|(t, bits, body)| {
            let header = u64::from(t) | (((body.len() + 1) as u64) << 4) | (bits << 16);
            (t, header, body)
        });
    // Unknown event types (11..15), scheduling types (3..15), metadata types.
    let subtype = prop_oneof![
        (11u64..=15, prop::collection::vec(any::<u64>(), 0..3)).prop_map(|(e, body)| (
            4u8,
            4 | ((body.len() as u64 + 1) << 4) | (e << 16),
            body
        )),
        (3u64..=15, prop::collection::vec(any::<u64>(), 0..3)).prop_map(|(s, body)| (
            8u8,
            8 | ((body.len() as u64 + 1) << 4) | (s << 60),
            body
        )),
        (
            prop_oneof![Just(0u64), 5u64..=15],
            prop::collection::vec(any::<u64>(), 0..3)
        )
            .prop_map(|(m, body)| (0u8, ((body.len() as u64 + 1) << 4) | (m << 16), body)),
    ];
    // Large records of unknown large types, and large blobs of unknown formats.
    let large = (
        0u64..=15,
        2u64..=15,
        prop::collection::vec(any::<u64>(), 0..3),
    )
        .prop_map(|(lt, fmt, body)| {
            let size = body.len() as u64 + 1;
            let format = if lt == 0 { fmt << 40 } else { 0 };
            (15u8, 15 | (size << 4) | (lt << 36) | format, body)
        });
    prop_oneof![normal, subtype, large].prop_map(|(t, header, body)| {
        let mut bytes = header.to_le_bytes().to_vec();
        for w in body {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        Record::Unknown {
            record_type: t,
            bytes: Cow::Owned(bytes),
        }
    })
}

/// Any valid record (one that encodes and decodes to itself).
pub fn arb_record() -> impl Strategy<Value = Record<'static>> {
    let s = || arb_text().prop_map(Cow::Owned);
    prop_oneof![
        Just(Record::Magic),
        (any::<u32>(), "\\PC{0,30}").prop_map(|(id, name)| Record::ProviderInfo {
            id,
            name: name.into()
        }),
        any::<u32>().prop_map(|id| Record::ProviderSection { id }),
        (any::<u32>(), 0u8..16).prop_map(|(id, event)| Record::ProviderEvent { id, event }),
        (0u8..16, 0u64..(1 << 40))
            .prop_filter("that is the magic record", |(t, d)| {
                !(*t == 0 && *d == wire::MAGIC_VALUE)
            })
            .prop_map(|(info_type, data)| Record::TraceInfo { info_type, data }),
        (1..=u64::MAX).prop_map(|ticks_per_second| Record::Initialization { ticks_per_second }),
        (1..=wire::MAX_STRING_INDEX, s())
            .prop_map(|(index, value)| Record::String { index, value }),
        (1..=u8::MAX, any::<u64>(), any::<u64>()).prop_map(|(index, process, thread)| {
            Record::Thread {
                index,
                process,
                thread,
            }
        }),
        (
            any::<u64>(),
            arb_thread_ref(),
            arb_string_ref(),
            arb_string_ref(),
            arb_args(),
            arb_event_kind()
        )
            .prop_map(|(ts, thread, category, name, args, kind)| Record::Event {
                ts,
                thread,
                category,
                name,
                args,
                kind,
            }),
        (arb_string_ref(), any::<u8>(), arb_bytes(40)).prop_map(|(name, blob_type, payload)| {
            Record::Blob {
                name,
                blob_type,
                payload,
            }
        }),
        (
            any::<u64>(),
            prop_oneof![
                (1..=u8::MAX).prop_map(ThreadRef::Index),
                any::<u64>().prop_map(|process| ThreadRef::Inline { process, thread: 0 }),
            ],
            arb_string_ref(),
            arb_args()
        )
            .prop_map(|(pointer, process, name, args)| Record::UserspaceObject {
                pointer,
                process,
                name,
                args,
            }),
        (any::<u64>(), any::<u8>(), arb_string_ref(), arb_args()).prop_map(
            |(koid, obj_type, name, args)| Record::KernelObject {
                koid,
                obj_type,
                name,
                args,
            }
        ),
        (
            any::<u64>(),
            any::<u16>(),
            0u8..16,
            any::<u64>(),
            any::<u64>(),
            arb_args()
        )
            .prop_map(
                |(ts, cpu, outgoing_state, outgoing_tid, incoming_tid, args)| {
                    Record::ContextSwitch {
                        ts,
                        cpu,
                        outgoing_state,
                        outgoing_tid,
                        incoming_tid,
                        args,
                    }
                }
            ),
        (any::<u64>(), any::<u16>(), any::<u64>(), arb_args())
            .prop_map(|(ts, cpu, tid, args)| Record::ThreadWakeup { ts, cpu, tid, args }),
        (
            any::<u64>(),
            any::<u8>(),
            0u8..16,
            arb_thread_ref(),
            arb_thread_ref(),
            any::<u8>(),
            any::<u8>()
        )
            .prop_map(|(ts, cpu, st, o, i, op, ip)| Record::LegacyContextSwitch {
                ts,
                cpu,
                outgoing_state: st,
                outgoing_thread: o,
                incoming_thread: i,
                outgoing_priority: op,
                incoming_priority: ip,
            }),
        (any::<u64>(), arb_thread_ref(), s()).prop_map(|(ts, thread, message)| Record::Log {
            ts,
            thread,
            message
        }),
        (
            arb_string_ref(),
            arb_string_ref(),
            any::<u64>(),
            arb_thread_ref(),
            arb_args(),
            arb_bytes(100)
        )
            .prop_map(|(category, name, ts, thread, args, payload)| {
                Record::LargeBlob(LargeBlob::Event {
                    category,
                    name,
                    ts,
                    thread,
                    args,
                    payload,
                })
            }),
        (arb_string_ref(), arb_string_ref(), arb_bytes(100)).prop_map(
            |(category, name, payload)| Record::LargeBlob(LargeBlob::Attachment {
                category,
                name,
                payload,
            })
        ),
        arb_unknown(),
    ]
}

/// The records encoded one after the other, and the offset of each.
pub fn encode_all(records: &[Record<'_>]) -> (Vec<u8>, Vec<usize>) {
    let mut bytes = Vec::new();
    let mut offsets = Vec::new();
    for r in records {
        offsets.push(bytes.len());
        encode(r, &mut bytes).expect("valid record encodes");
    }
    (bytes, offsets)
}

/// Records the reader is allowed to return but the writer refuses: string
/// and thread records for the reserved index 0, which readers ignore (§2.3,
/// §2.4).
pub fn writer_refuses(record: &Record<'_>) -> bool {
    matches!(
        record,
        Record::String { index: 0, .. } | Record::Thread { index: 0, .. }
    )
}

/// Reads all of `data`, checking the reader's guarantees: offsets inside the
/// input and 8-byte aligned, strictly increasing, termination, and every
/// decoded record re-encoding to something that decodes to the same record.
/// Returns the number of records and of errors.
pub fn check_reader(data: &[u8]) -> Result<(usize, usize), TestCaseError> {
    let mut ok = 0;
    let mut errors = 0;
    let mut last: Option<usize> = None;
    let mut reader = Reader::new(data);
    let mut steps = 0usize;
    for item in reader.by_ref() {
        steps += 1;
        prop_assert!(steps <= data.len() / 8 + 1, "reader does not terminate");
        let offset = match &item {
            Ok((o, _)) => *o,
            Err(e) => e.offset,
        };
        prop_assert!(offset < data.len(), "offset {} outside the input", offset);
        prop_assert_eq!(offset % 8, 0);
        if let Some(l) = last {
            prop_assert!(offset > l, "offsets not increasing");
        }
        last = Some(offset);
        match item {
            Ok((_, record)) => {
                ok += 1;
                if writer_refuses(&record) {
                    continue;
                }
                let mut out = Vec::new();
                let n = encode(&record, &mut out);
                prop_assert!(
                    n.is_ok(),
                    "decoded {:?} does not re-encode: {:?}",
                    record,
                    n
                );
                let (again, _) = trace_common::fxt::read::decode(&out)
                    .map_err(|e| TestCaseError::fail(format!("re-decoding failed: {e}")))?;
                // Compare by bytes (NaN doubles compare unequal).
                let mut out2 = Vec::new();
                encode(&again, &mut out2).unwrap();
                prop_assert_eq!(out, out2);
            }
            Err(_) => errors += 1,
        }
    }
    // Fused: stays ended.
    prop_assert!(reader.next().is_none());
    Ok((ok, errors))
}
