//! Per-provider reader state (§4.2, §4.3).

use std::borrow::Cow;

use trace_common::fxt::read::{Reader, TraceState};
use trace_common::fxt::write::encode;
use trace_common::fxt::{Record, StringRef, ThreadRef};

fn string(index: u16, value: &str) -> Record<'_> {
    Record::String {
        index,
        value: value.into(),
    }
}

fn thread(index: u8, process: u64, thread: u64) -> Record<'static> {
    Record::Thread {
        index,
        process,
        thread,
    }
}

#[test]
fn implicit_provider_zero() {
    let mut s = TraceState::new();
    assert_eq!(s, TraceState::default());
    assert_eq!(s.current_provider(), (0, None));
    assert_eq!(s.ticks_per_second(), 1_000_000_000);
    assert_eq!(s.ticks_to_ns(1234), 1234);
    assert_eq!(s.string(&StringRef::Empty), Some(""));
    assert_eq!(s.string(&StringRef::inline("abc")), Some("abc"));
    assert_eq!(s.string(&StringRef::Index(1)), None);
    assert_eq!(s.thread(ThreadRef::Index(1)), None);
    assert_eq!(
        s.thread(ThreadRef::Inline {
            process: 3,
            thread: 4
        }),
        Some((3, 4))
    );
    s.apply(&string(1, "zero"));
    assert_eq!(s.string(&StringRef::Index(1)), Some("zero"));
    assert_eq!(s.provider(0).unwrap().string(1), Some("zero"));
}

#[test]
fn providers_keep_separate_tables() {
    let mut s = TraceState::new();
    for r in [
        Record::ProviderInfo {
            id: 1,
            name: "one".into(),
        },
        Record::Initialization {
            ticks_per_second: 1000,
        },
        string(1, "a1"),
        thread(1, 10, 11),
        Record::ProviderInfo {
            id: 2,
            name: "two".into(),
        },
        string(1, "b1"),
        thread(1, 20, 21),
    ] {
        s.apply(&r);
    }
    assert_eq!(s.current_provider(), (2, Some("two")));
    assert_eq!(s.string(&StringRef::Index(1)), Some("b1"));
    assert_eq!(s.thread(ThreadRef::Index(1)), Some((20, 21)));
    assert_eq!(s.ticks_to_ns(5), 5);

    // A provider section switches back and keeps the tables.
    s.apply(&Record::ProviderSection { id: 1 });
    assert_eq!(s.current_provider(), (1, Some("one")));
    assert_eq!(s.string(&StringRef::Index(1)), Some("a1"));
    assert_eq!(s.thread(ThreadRef::Index(1)), Some((10, 11)));
    assert_eq!(s.ticks_per_second(), 1000);
    assert_eq!(s.ticks_to_ns(5), 5_000_000);

    // Later entries replace earlier ones; index 0 is ignored.
    s.apply(&string(1, "a1'"));
    s.apply(&string(0, "ignored"));
    s.apply(&thread(0, 1, 1));
    s.apply(&Record::Initialization {
        ticks_per_second: 0,
    });
    assert_eq!(s.string(&StringRef::Index(1)), Some("a1'"));
    assert_eq!(s.current().string(0), None);
    assert_eq!(s.current().thread(0), None);
    assert_eq!(s.ticks_per_second(), 1000);

    // Provider events and other records change nothing.
    let before = s.clone();
    s.apply(&Record::ProviderEvent { id: 2, event: 0 });
    s.apply(&Record::Magic);
    assert_eq!(s, before);

    // A provider info for a known id starts it afresh.
    s.apply(&Record::ProviderInfo {
        id: 2,
        name: "two again".into(),
    });
    assert_eq!(s.current_provider(), (2, Some("two again")));
    assert_eq!(s.string(&StringRef::Index(1)), None);

    // A section for an undeclared provider gives it empty tables.
    s.apply(&Record::ProviderSection { id: 7 });
    assert_eq!(s.current_provider(), (7, None));
    assert_eq!(s.string(&StringRef::Index(1)), None);
    assert_eq!(s.ticks_per_second(), 1_000_000_000);
    assert_eq!(s.provider(1).unwrap().name(), Some("one"));
    assert!(s.provider(99).is_none());
}

#[test]
fn ticks_to_ns_uses_128_bit_arithmetic_and_saturates() {
    let mut s = TraceState::new();
    s.apply(&Record::Initialization {
        ticks_per_second: 3,
    });
    assert_eq!(s.ticks_to_ns(1), 333_333_333);
    assert_eq!(s.ticks_to_ns(u64::MAX / 2), u64::MAX);
    s.apply(&Record::Initialization {
        ticks_per_second: 24_000_000,
    });
    // ticks * 10^9 overflows u64 but the result fits.
    let ticks = u64::MAX / 100;
    assert_eq!(
        s.ticks_to_ns(ticks),
        (u128::from(ticks) * 1_000_000_000 / 24_000_000) as u64
    );
    s.apply(&Record::Initialization {
        ticks_per_second: u64::MAX,
    });
    assert_eq!(s.ticks_to_ns(u64::MAX), 1_000_000_000);
}

#[test]
fn state_from_a_stream() {
    let records = [
        Record::Magic,
        Record::ProviderInfo {
            id: 5,
            name: "p".into(),
        },
        string(3, "s"),
        Record::KernelObject {
            koid: 1,
            obj_type: 1,
            name: StringRef::Index(3),
            args: Cow::Borrowed(&[]),
        },
    ];
    let mut data = Vec::new();
    for r in &records {
        encode(r, &mut data).unwrap();
    }
    let mut s = TraceState::new();
    let mut names = Vec::new();
    for item in Reader::new(&data) {
        let (_, r) = item.unwrap();
        s.apply(&r);
        if let Record::KernelObject { name, .. } = &r {
            names.push(s.string(name).map(str::to_owned));
        }
    }
    assert_eq!(names, [Some("s".to_owned())]);
}

#[test]
fn arguments_are_found_by_resolved_name() {
    use trace_common::fxt::{Arg, ArgValue};
    let mut s = TraceState::new();
    s.apply(&string(4, "process"));
    let args = [
        Arg::new("other", ArgValue::Int32(1)),
        Arg {
            name: StringRef::Index(4),
            value: ArgValue::Koid(77),
        },
    ];
    assert_eq!(s.arg(&args, "other"), Some(&ArgValue::Int32(1)));
    assert_eq!(s.arg(&args, "missing"), None);
    assert_eq!(s.process_of_thread(&args), Some(77));
    // A "process" argument of the wrong type names no process.
    let wrong = [Arg::new("process", ArgValue::Uint64(77))];
    assert_eq!(s.process_of_thread(&wrong), None);
}
