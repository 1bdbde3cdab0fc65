//! The system call translation's tests.

use super::*;
use crate::kernel::syscalls::SyscallTable;
use crate::kernel::translate::testing::{ev, events_and_names, records};
use crate::output::FxtStream;
use trace_common::fxt::Record;
use trace_common::fxt::read::TraceState;

/// A syscall event of a stream: tid, name, kind, (argument, value).
type SyscallEvent = (u64, String, EventKind, Vec<(String, String)>);

fn syscall_events(bytes: &[u8]) -> Vec<SyscallEvent> {
    let (_, recs) = records(bytes);
    let mut st = TraceState::new();
    let mut out = Vec::new();
    for r in recs {
        st.apply(&r);
        if let Record::Event {
            thread,
            category,
            name,
            args,
            kind,
            ..
        } = &r
            && st.string(category) == Some("kernel:syscall")
        {
            let (_, tid) = st.thread(*thread).unwrap();
            let args = args
                .iter()
                .map(|a| {
                    (
                        st.string(&a.name).unwrap().to_owned(),
                        format!("{:?}", a.value),
                    )
                })
                .collect();
            out.push((tid, st.string(name).unwrap().to_owned(), *kind, args));
        }
    }
    out
}

#[test]
fn a_call_still_open_when_its_thread_is_switched_out_dead_ends_there() {
    let mut out = FxtStream::new(Vec::new()).unwrap();
    let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
    // Ids /proc does not know, so nothing is looked up there.
    let (pid, a, b) = (4_000_000_u32, 4_000_001_u32, 4_000_002_u32);
    let dead = 0x10;
    // A call whose return was lost, then the thread's exit too.
    t.sys_enter(
        &mut out,
        &ev::sys_enter(1000, a, pid, libc::SYS_getppid, [0; 6]),
    )
    .unwrap();
    t.switch(
        &mut out,
        &ev::switch(1200, 0, (a, pid, 120, dead, "w"), (0, 120, "")),
    )
    .unwrap();
    // exit_group, its thread's exit lost: it ends with the thread.
    t.sys_enter(
        &mut out,
        &ev::sys_enter(1300, b, pid, libc::SYS_exit_group, [0; 6]),
    )
    .unwrap();
    t.switch(
        &mut out,
        &ev::switch(1400, 1, (b, pid, 120, dead, "w"), (0, 120, "")),
    )
    .unwrap();
    t.set_stop(5000);
    t.finish_open(&mut out).unwrap();
    let calls = syscall_events(&out.finish().unwrap());
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0].1, "getppid");
    assert_eq!(calls[0].2, EventKind::DurationComplete { end_ts: 1200 });
    assert!(calls[0].3.iter().any(|(n, _)| n == "return_lost"));
    assert_eq!(calls[1].1, "exit_group");
    assert_eq!(calls[1].2, EventKind::DurationComplete { end_ts: 1400 });
    assert!(
        !calls[1]
            .3
            .iter()
            .any(|(n, _)| n == "return_lost" || n == "unfinished")
    );
}

#[test]
fn system_calls_pair_into_durations() {
    let mut out = FxtStream::new(Vec::new()).unwrap();
    let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
    t.set_start(500);
    let getpid = libc::SYS_getpid;
    let write = libc::SYS_write;
    let read = libc::SYS_read;
    let exit_group = libc::SYS_exit_group;
    // Ids /proc does not know, so nothing is looked up there.
    let (pid, a, b) = (4_000_000_u32, 4_000_001_u32, 4_000_002_u32);
    t.sys_enter(&mut out, &ev::sys_enter(1000, a, pid, getpid, [0; 6]))
        .unwrap();
    t.sys_exit(&mut out, &ev::sys_exit(1100, a, pid, getpid, 4_000_000))
        .unwrap();
    // A read that began before the recording returns.
    t.sys_exit(&mut out, &ev::sys_exit(1200, b, pid, read, 3))
        .unwrap();
    // A write whose return was lost, then another call.
    t.sys_enter(
        &mut out,
        &ev::sys_enter(1300, a, pid, write, [1, 0x1000, 5, 0, 0, 0]),
    )
    .unwrap();
    t.sys_enter(&mut out, &ev::sys_enter(1400, a, pid, getpid, [0; 6]))
        .unwrap();
    t.sys_exit(&mut out, &ev::sys_exit(1500, a, pid, getpid, 4_000_000))
        .unwrap();
    // exit_group never returns: the thread's exit ends it.
    t.sys_enter(&mut out, &ev::sys_enter(1600, b, pid, exit_group, [0; 6]))
        .unwrap();
    t.exit(&mut out, &ev::exit(1700, b, pid, "worker", Some(true)))
        .unwrap();
    // Still inside a call when the recording ends.
    t.sys_enter(
        &mut out,
        &ev::sys_enter(1800, a, pid, write, [2, 0x2000, 7, 0, 0, 0]),
    )
    .unwrap();
    t.set_stop(1_900);
    t.finish_syscalls(&mut out).unwrap();
    assert_eq!(t.counts().syscalls, 6);
    let bytes = out.finish().unwrap();
    let ev = syscall_events(&bytes);
    let summary: Vec<_> = ev
        .iter()
        .map(|(tid, name, kind, _)| (*tid, name.as_str(), *kind))
        .collect();
    let (a, b) = (u64::from(a), u64::from(b));
    assert_eq!(
        summary,
        [
            (a, "getpid", EventKind::DurationComplete { end_ts: 1100 }),
            (b, "read", EventKind::DurationComplete { end_ts: 1200 }),
            (a, "write", EventKind::DurationComplete { end_ts: 1400 }),
            (a, "getpid", EventKind::DurationComplete { end_ts: 1500 }),
            (
                b,
                "exit_group",
                EventKind::DurationComplete { end_ts: 1700 }
            ),
            (a, "write", EventKind::DurationComplete { end_ts: 1_900 }),
        ]
    );
    let arg = |i: usize, k: &str| ev[i].3.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(arg(0, "ret").as_deref(), Some("Int64(4000000)"));
    assert_eq!(arg(0, "nr"), Some(format!("Int64({getpid})")));
    assert_eq!(
        arg(1, "began_before_recording").as_deref(),
        Some("Bool(true)")
    );
    assert_eq!(arg(2, "arg2").as_deref(), Some("Uint64(5)"));
    assert_eq!(arg(2, "ret"), None);
    assert_eq!(arg(2, "return_lost").as_deref(), Some("Bool(true)"));
    assert_eq!(arg(4, "ret"), None);
    assert_eq!(arg(5, "arg0").as_deref(), Some("Uint64(2)"));
}

/// A whole-call event writes the same bytes as its entry and return
/// would; one returning after the stop ends there, unfinished, as an
/// entry alone would.
#[test]
fn a_whole_call_writes_what_its_entry_and_return_write() {
    use trace_common::kernel::{EventKind as Kind, KernelEvent};
    let (tid, pid, write) = (4_000_001_u32, 4_000_000_u32, libc::SYS_write);
    let whole = |enter_ts, ts, ret| trace_common::kernel::SyscallEvent {
        header: trace_common::kernel::EventHeader {
            kind: Kind::Syscall as u32,
            ..ev::header(ts, 0, tid, pid)
        },
        enter_ts,
        id: write,
        ret,
        args: [1, 0x1000, 5, 0, 0, 0],
    };
    let calls = [
        whole(1_000, 1_200, 5),
        whole(1_300, 1_350, -9),
        whole(1_900, 2_100, 5),
    ];
    let run = |one: bool| {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        t.set_start(500);
        t.set_stop(2_000);
        for c in &calls {
            if one {
                t.translate(&mut out, &KernelEvent::Syscall(*c)).unwrap();
            } else {
                t.translate(&mut out, &KernelEvent::SysEnter(c.entry()))
                    .unwrap();
                t.translate(&mut out, &KernelEvent::SysExit(c.exit()))
                    .unwrap();
            }
        }
        t.finish_open(&mut out).unwrap();
        out.into_inner()
    };
    let (two, one) = (run(false), run(true));
    assert_eq!(one, two);
    let calls = syscall_events(&one);
    let ends: Vec<_> = calls.iter().map(|c| c.2).collect();
    assert_eq!(
        ends,
        [1_200, 1_350, 2_000].map(|end_ts| EventKind::DurationComplete { end_ts })
    );
    assert!(calls[2].3.iter().any(|(name, _)| name == "unfinished"));
}

#[test]
fn sigreturn_returns_from_its_own_call_and_a_clone_childs_return_is_no_call() {
    let mut out = FxtStream::new(Vec::new()).unwrap();
    let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
    t.set_start(1_000);
    let sigreturn = i64::from(syscalls::Sysno::rt_sigreturn.id());
    let clone = i64::from(syscalls::Sysno::clone.id());
    let read = i64::from(syscalls::Sysno::read.id());
    // `rt_sigreturn` returns with call number -1.
    t.sys_enter(&mut out, &ev::sys_enter(2_000, 50, 50, sigreturn, [0; 6]))
        .unwrap();
    t.sys_exit(&mut out, &ev::sys_exit(2_100, 50, 50, -1, 0))
        .unwrap();
    // A return of nothing known at all: nothing is drawn.
    t.sys_exit(&mut out, &ev::sys_exit(2_200, 50, 50, -1, 0))
        .unwrap();
    // A thread created during the recording returns from clone without
    // having entered it: that is its parent's call, not one of its own.
    t.new_task(
        &mut out,
        &ev::new_task(3_000, 50, 50, 51, 50, "child", 0x10000),
    )
    .unwrap();
    t.current_task(&mut out, &ev::header(3_500, 1, 51, 50))
        .unwrap();
    t.sys_exit(&mut out, &ev::sys_exit(3_500, 51, 50, clone, 0))
        .unwrap();
    // A call of a thread first seen returning spans from when it was
    // first seen; a clone that returns a child's id is the parent's.
    t.sys_exit(&mut out, &ev::sys_exit(4_000, 52, 50, read, 5))
        .unwrap();
    t.sys_exit(&mut out, &ev::sys_exit(4_100, 53, 50, clone, 54))
        .unwrap();
    assert_eq!(t.counts().child_returns, 1);
    let bytes = out.finish().unwrap();
    let mut calls: Vec<(u64, u64, String, EventKind)> = Vec::new();
    for (ts, _, tid, name, kind) in events_and_names(&bytes).0 {
        if name != "thread_create" {
            calls.push((ts, tid, name, kind));
        }
    }
    assert_eq!(
        calls,
        [
            (
                2_000,
                50,
                "rt_sigreturn".to_owned(),
                EventKind::DurationComplete { end_ts: 2_100 }
            ),
            (
                4_000,
                52,
                "read".to_owned(),
                EventKind::DurationComplete { end_ts: 4_000 }
            ),
            (
                4_100,
                53,
                "clone".to_owned(),
                EventKind::DurationComplete { end_ts: 4_100 }
            ),
        ]
    );
}
