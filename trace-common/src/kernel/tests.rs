//! Unit tests of the shared kernel layouts and their decoding.

use super::events::PlainData;
use super::*;

fn header(kind: EventKind) -> EventHeader {
    EventHeader {
        kind: kind as u32,
        cpu: 3,
        ts: 123_456_789,
        tid: 42,
        tgid: 41,
    }
}

fn bytes_of<T: PlainData>(value: &T) -> [u8; 512] {
    let mut out = [0u8; 512];
    // SAFETY: `T` is plain data without padding, so all its
    // `size_of::<T>()` bytes are initialised; `out` is large enough for
    // every event struct (the largest is 312 bytes).
    let src =
        unsafe { core::slice::from_raw_parts((value as *const T).cast::<u8>(), size_of::<T>()) };
    out[..src.len()].copy_from_slice(src);
    out
}

#[test]
fn round_trip_switch() {
    let mut comm = [0u8; COMM_LEN];
    comm[..4].copy_from_slice(b"bash");
    let ev = SchedSwitchEvent {
        header: header(EventKind::Switch),
        prev_comm: comm,
        next_comm: [0; COMM_LEN],
        prev_pid: 42,
        prev_prio: 120,
        next_pid: 0,
        next_prio: 120,
        prev_state: 1,
        next_tgid: 0,
    };
    let buf = bytes_of(&ev);
    let n = size_of::<SchedSwitchEvent>();
    assert_eq!(parse(&buf[..n]), Ok(KernelEvent::Switch(ev)));
    // Trailing bytes are ignored.
    assert_eq!(parse(&buf[..n + 8]), Ok(KernelEvent::Switch(ev)));
    assert_eq!(
        parse(&buf[..n - 1]),
        Err(ParseError::TooShort {
            len: n - 1,
            needed: n
        })
    );
    let KernelEvent::Switch(back) = parse(&buf[..n]).unwrap() else {
        panic!("wrong kind");
    };
    assert_eq!(c_str_bytes(&back.prev_comm), b"bash");
    assert_eq!(c_str_bytes(&back.next_comm), b"");
}

#[test]
fn exec_filename_is_bounded() {
    let mut ev = ProcessExecEvent {
        header: header(EventKind::Exec),
        pid: 1,
        old_pid: 1,
        comm: [0; COMM_LEN],
        filename_len: 9,
        reserved: 0,
        filename: [b'x'; FILENAME_LEN],
        cgroup: 0,
    };
    ev.filename[..9].copy_from_slice(b"/bin/true");
    assert_eq!(ev.filename(), b"/bin/true");
    ev.filename_len = u32::MAX;
    assert_eq!(ev.filename().len(), FILENAME_LEN);
}

#[test]
fn rejects_garbage_without_panicking() {
    assert!(matches!(parse(&[]), Err(ParseError::TooShort { .. })));
    assert_eq!(parse(&[0u8; 64]), Err(ParseError::UnknownKind(0)));
    let mut buf = [0xffu8; 400];
    assert_eq!(parse(&buf), Err(ParseError::UnknownKind(u32::MAX)));
    for &k in EventKind::ALL {
        buf[..4].copy_from_slice(&(k as u32).to_le_bytes());
        assert!(parse(&buf[..k.event_size()]).is_ok());
        assert!(parse(&buf[..k.event_size() - 1]).is_err());
        assert_eq!(parse(&buf).unwrap().kind(), k);
    }
    // Every prefix of every length parses or fails cleanly.
    for len in 0..buf.len() {
        let _ = parse(&buf[..len]);
    }
}

#[test]
fn programs_have_known_categories() {
    for tp in TRACEPOINTS {
        assert!(
            crate::category::KERNEL_CATEGORIES
                .iter()
                .any(|(name, _)| *name == tp.category)
        );
    }
}

/// The wire numbers and sizes of the kinds: both sides and recordings
/// already written depend on them.
#[test]
fn kind_numbers_and_sizes_are_pinned() {
    let expected: &[(EventKind, u32, usize)] = &[
        (EventKind::Switch, 1, 80),
        (EventKind::Wakeup, 2, 56),
        (EventKind::NewTask, 4, 64),
        (EventKind::Exec, 5, 320),
        (EventKind::Exit, 6, 56),
        (EventKind::Rename, 7, 64),
        (EventKind::SysEnter, 8, 80),
        (EventKind::SysExit, 9, 40),
        (EventKind::IrqEntry, 10, 64),
        (EventKind::IrqExit, 11, 32),
        (EventKind::Softirq, 12, 32),
        (EventKind::BlockIssue, 13, 56),
        (EventKind::BlockComplete, 14, 56),
        (EventKind::PageFault, 15, 48),
        (EventKind::RssStat, 16, 48),
        (EventKind::Power, 17, 40),
        (EventKind::Uprobe, 18, 40),
        (EventKind::Usdt, 19, 264),
        (EventKind::BlockRequeue, 23, 56),
        (EventKind::SignalGenerate, 24, 40),
        (EventKind::SignalDeliver, 25, 40),
        (EventKind::Syscall, 22, 96),
    ];
    assert_eq!(EventKind::ALL.len(), expected.len());
    for (&kind, &(want, number, size)) in EventKind::ALL.iter().zip(expected) {
        assert_eq!(kind, want);
        assert_eq!(kind as u32, number, "{kind:?}");
        assert_eq!(EventKind::from_u32(number), Some(kind));
        assert_eq!(kind.event_size(), size, "{kind:?}");
    }
    assert_eq!(EventKind::from_u32(0), None);
    assert_eq!(EventKind::from_u32(3), None);
    assert_eq!(EventKind::from_u32(20), None);
}

/// Every kind's struct starts with its header, and the decoded event
/// reports the kind it was written with.
#[test]
fn every_kind_decodes_as_itself() {
    let mut buf = [0u8; 512];
    for &kind in EventKind::ALL {
        let h = header(kind);
        buf[..size_of::<EventHeader>()].copy_from_slice(&bytes_of(&h)[..size_of::<EventHeader>()]);
        let event = parse(&buf[..kind.event_size()]).unwrap();
        assert_eq!(event.kind(), kind);
        assert_eq!(*event.header(), h);
    }
}
