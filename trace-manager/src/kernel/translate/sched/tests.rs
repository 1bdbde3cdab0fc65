//! The scheduling translation's unit tests.

use super::*;
use crate::kernel::syscalls::SyscallTable;
use crate::kernel::translate::testing::{ev, records};
use trace_common::fxt::obj_type;
use trace_common::fxt::read::TraceState;

#[test]
fn state_mapping() {
    assert_eq!(thread_state(0), ThreadState::Running);
    assert_eq!(thread_state(0x100), ThreadState::Running);
    assert_eq!(thread_state(1), ThreadState::Blocked);
    assert_eq!(thread_state(2), ThreadState::Blocked);
    assert_eq!(thread_state(4), ThreadState::Suspended);
    assert_eq!(thread_state(8), ThreadState::Suspended);
    assert_eq!(thread_state(0x10), ThreadState::Dead);
    assert_eq!(thread_state(0x20), ThreadState::Dying);
    assert_eq!(thread_state(0x80), ThreadState::Blocked);
}

#[test]
fn idle_gets_idle_weight() {
    assert_eq!(weight(0, 120), i32::MIN);
    assert_eq!(weight(5, 120), 120);
}

#[test]
fn a_switch_the_kernel_did_not_record_is_inferred_from_the_next_event_on_that_cpu() {
    let mut out = FxtStream::new(Vec::new()).unwrap();
    let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
    // CPU 0 switches from idle to thread 69, which the kernel keeps out
    // of tracing (or whose switch-out was lost): the next event on CPU
    // 0 comes from the idle task.
    t.current_task(&mut out, &ev::header(100, 0, 0, 0)).unwrap();
    t.switch(
        &mut out,
        &ev::switch(100, 0, (0, 0, 120, 0, "swapper/0"), (69, 110, "hidden")),
    )
    .unwrap();
    t.current_task(&mut out, &ev::header(400, 0, 0, 0)).unwrap();
    t.cpu_power(&mut out, &ev::cpu_power(400, 0, false, 1))
        .unwrap();
    t.current_task(&mut out, &ev::header(900, 0, 0, 0)).unwrap();
    t.switch(
        &mut out,
        &ev::switch(900, 0, (0, 0, 120, 0, "swapper/0"), (11, 120, "worker")),
    )
    .unwrap();
    assert_eq!(t.counts().inferred_switches, 1);
    let bytes = out.finish().unwrap();
    let (st, recs) = records(&bytes);
    let _ = st;
    let mut switches = Vec::new();
    let mut st = TraceState::new();
    for r in &recs {
        st.apply(r);
        match r {
            Record::LegacyContextSwitch {
                ts,
                outgoing_thread,
                incoming_thread,
                ..
            } => switches.push((
                *ts,
                st.thread(*outgoing_thread).unwrap().1,
                st.thread(*incoming_thread).unwrap().1,
                false,
            )),
            Record::ContextSwitch {
                ts,
                outgoing_tid,
                incoming_tid,
                args,
                ..
            } => switches.push((
                *ts,
                *outgoing_tid,
                *incoming_tid,
                st.arg(args, "inferred") == Some(&ArgValue::Bool(true)),
            )),
            _ => {}
        }
    }
    assert_eq!(
        switches,
        [(100, 0, 69, false), (400, 69, 0, true), (900, 0, 11, false)]
    );
    // Every switch out is of the thread switched in before it.
    for w in switches.windows(2) {
        assert_eq!(w[0].2, w[1].1, "{switches:?}");
    }
}

#[test]
fn an_event_that_comes_late_infers_no_switch_back_in_time() {
    let mut out = FxtStream::new(Vec::new()).unwrap();
    let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
    // Thread 100 runs on CPU 0, thread 200 on CPU 1.
    t.current_task(&mut out, &ev::header(10, 0, 100, 100))
        .unwrap();
    t.current_task(&mut out, &ev::header(50, 1, 200, 200))
        .unwrap();
    // 100 shows up on CPU 1 at 100: it left CPU 0 (idle there).
    t.current_task(&mut out, &ev::header(100, 1, 100, 100))
        .unwrap();
    // A call 100 made on CPU 0 at 60, staged there, arrives now: by
    // time it belongs before what CPU 0's track already says.
    t.current_task(&mut out, &ev::header(60, 0, 100, 100))
        .unwrap();
    // CPU 0 goes on at 150 with thread 300.
    t.current_task(&mut out, &ev::header(150, 0, 300, 300))
        .unwrap();
    assert_eq!(t.counts().late_events, 1);
    let bytes = out.finish().unwrap();
    let (_, recs) = records(&bytes);
    let mut by_cpu: std::collections::BTreeMap<u16, Vec<(u64, u64, u64)>> = Default::default();
    for r in &recs {
        if let Record::ContextSwitch {
            ts,
            cpu,
            outgoing_tid,
            incoming_tid,
            ..
        } = r
        {
            by_cpu
                .entry(*cpu)
                .or_default()
                .push((*ts, *outgoing_tid, *incoming_tid));
        }
    }
    assert_eq!(by_cpu[&0], [(100, 100, 0), (150, 0, 300)]);
    assert_eq!(by_cpu[&1], [(100, 200, 100)]);
    // In time order, every switch out is of the thread switched in
    // before it on that CPU.
    for switches in by_cpu.values_mut() {
        switches.sort();
        for w in switches.windows(2) {
            assert_eq!(w[0].2, w[1].1, "{switches:?}");
        }
    }
}

#[test]
fn with_a_pid_filter_a_wakeup_or_completion_by_another_task_infers_no_switch() {
    use trace_common::kernel::KernelEvent;
    let mut out = FxtStream::new(Vec::new()).unwrap();
    let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
    t.set_followed_only(true);
    // Followed thread 69 runs on CPU 0, then is switched out for a
    // task the filter does not follow (written as the idle task).
    t.translate(
        &mut out,
        &KernelEvent::Switch(ev::switch(100, 0, (0, 0, 120, 0, ""), (69, 120, "app"))),
    )
    .unwrap();
    t.translate(
        &mut out,
        &KernelEvent::Switch(ev::switch(200, 0, (69, 69, 120, 1, "app"), (0, 120, ""))),
    )
    .unwrap();
    // That task (500) wakes 69 and a request 69 issued completes in its
    // interrupt: neither says that 500 runs where the recording
    // follows only 69.
    t.translate(
        &mut out,
        &KernelEvent::Wakeup(ev::wakeup(300, 1, 69, 120, "app", 500, 0)),
    )
    .unwrap();
    t.translate(
        &mut out,
        &KernelEvent::BlockComplete(ev::block_complete(350, 8, 0, 0)),
    )
    .unwrap();
    t.translate(
        &mut out,
        &KernelEvent::Switch(ev::switch(400, 0, (0, 0, 120, 0, ""), (69, 120, "app"))),
    )
    .unwrap();
    assert_eq!(t.counts().inferred_switches, 0);
    assert_eq!(t.counts().context_switches, 3);
    // Without the filter the same wake-up is evidence of 500 on CPU 0.
    let mut out = FxtStream::new(Vec::new()).unwrap();
    let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
    t.translate(
        &mut out,
        &KernelEvent::Switch(ev::switch(200, 0, (69, 69, 120, 1, "app"), (0, 120, ""))),
    )
    .unwrap();
    t.translate(
        &mut out,
        &KernelEvent::Wakeup(ev::wakeup(300, 1, 69, 120, "app", 500, 0)),
    )
    .unwrap();
    assert_eq!(t.counts().inferred_switches, 1);
}

#[test]
fn a_thread_switched_in_on_another_cpu_leaves_the_first_one() {
    let mut out = FxtStream::new(Vec::new()).unwrap();
    let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
    t.switch(
        &mut out,
        &ev::switch(100, 0, (0, 0, 120, 0, "swapper/0"), (69, 110, "hidden")),
    )
    .unwrap();
    t.switch(
        &mut out,
        &ev::switch(200, 1, (0, 0, 120, 0, "swapper/1"), (69, 110, "hidden")),
    )
    .unwrap();
    assert_eq!(t.counts().inferred_switches, 1);
    assert_eq!(t.sched.threads.get(&69).and_then(|t| t.running_on), Some(1));
    assert_eq!(t.cpu_current[0].map(|c| c.tid), Some(0));
}

#[test]
fn switch_names_threads_and_writes_weights() {
    let mut out = FxtStream::new(Vec::new()).unwrap();
    let mut t = KernelTranslator::new();
    // prev 4242 of group 4240 ("worker"); next is the idle task.
    t.switch(
        &mut out,
        &ev::switch(
            1000,
            1,
            (4242, 4240, 120, 1, "worker"),
            (0, 120, "swapper/1"),
        ),
    )
    .unwrap();
    // The same thread again: no second name record.
    t.switch(
        &mut out,
        &ev::switch(
            2000,
            1,
            (4242, 4240, 120, 0, "worker"),
            (0, 120, "swapper/1"),
        ),
    )
    .unwrap();
    let bytes = out.finish().unwrap();
    let (st, recs) = records(&bytes);
    let names: Vec<_> = recs
        .iter()
        .filter_map(|r| match r {
            Record::KernelObject {
                koid,
                obj_type,
                name,
                args,
            } => Some((
                *koid,
                *obj_type,
                st.string(name).map(str::to_owned),
                args.len(),
            )),
            _ => None,
        })
        .collect();
    assert!(names.contains(&(4242, obj_type::THREAD, Some("worker".into()), 1)));
    assert!(
        names
            .iter()
            .any(|n| n.0 == 4240 && n.1 == obj_type::PROCESS)
    );
    assert_eq!(names.iter().filter(|n| n.0 == 4242).count(), 1);
    // Compact switches: threads by table reference, idle as priority 0.
    let switches: Vec<_> = recs
        .iter()
        .filter_map(|r| match r {
            Record::LegacyContextSwitch {
                ts,
                cpu,
                outgoing_state,
                outgoing_thread,
                incoming_thread,
                outgoing_priority,
                incoming_priority,
            } => Some((
                *ts,
                *cpu,
                *outgoing_state,
                *outgoing_thread,
                *incoming_thread,
                (*outgoing_priority, *incoming_priority),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(switches.len(), 2);
    assert_eq!((switches[0].0, switches[0].1), (1000, 1));
    assert_eq!(switches[0].2, ThreadState::Blocked as u8);
    assert_eq!(switches[1].2, ThreadState::Running as u8);
    assert_eq!(st.thread(switches[0].3), Some((4240, 4242)));
    assert_eq!(st.thread(switches[0].4), Some((0, 0)));
    assert_eq!(switches[0].5, (120, 0));
    // The second switch reuses both entries: two thread records in all.
    assert_eq!(
        (switches[1].3, switches[1].4),
        (switches[0].3, switches[0].4)
    );
    let thread_records = recs
        .iter()
        .filter(|r| matches!(r, Record::Thread { .. }))
        .count();
    assert_eq!(thread_records, 2);
}

#[test]
fn a_switch_that_does_not_fit_the_compact_form_carries_weights() {
    let mut out = FxtStream::new(Vec::new()).unwrap();
    let mut t = KernelTranslator::new();
    // The incoming thread's process is unknown (no such thread in
    // /proc: above any pid), and a CPU above 255.
    let ghost = 4_194_305;
    t.switch(
        &mut out,
        &ev::switch(1000, 1, (4242, 4240, 120, 1, "w"), (ghost, 100, "x")),
    )
    .unwrap();
    t.switch(
        &mut out,
        &ev::switch(2000, 300, (4242, 4240, 120, 1, "w"), (0, 120, "i")),
    )
    .unwrap();
    let bytes = out.finish().unwrap();
    let (st, recs) = records(&bytes);
    let switches: Vec<_> = recs
        .iter()
        .filter_map(|r| match r {
            Record::ContextSwitch {
                cpu,
                outgoing_tid,
                incoming_tid,
                args,
                ..
            } => Some((*cpu, *outgoing_tid, *incoming_tid, args.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(switches.len(), 2);
    assert_eq!((switches[0].1, switches[0].2), (4242, u64::from(ghost)));
    assert_eq!(switches[1].0, 300);
    let args = &switches[1].3;
    assert_eq!(st.string(&args[0].name), Some("incoming_weight"));
    assert_eq!(args[0].value, ArgValue::Int32(i32::MIN));
    assert_eq!(st.string(&args[1].name), Some("outgoing_weight"));
    assert_eq!(args[1].value, ArgValue::Int32(120));
}

/// The inferred switches of `bytes`: (ts, outgoing tid, `untraced`).
fn inferred_switches(bytes: &[u8]) -> Vec<(u64, u64, bool)> {
    let (_, recs) = records(bytes);
    let mut st = TraceState::new();
    let mut v = Vec::new();
    for r in &recs {
        st.apply(r);
        if let Record::ContextSwitch {
            ts,
            outgoing_tid,
            args,
            ..
        } = r
            && st.arg(args, "inferred") == Some(&ArgValue::Bool(true))
        {
            let untraced = st.arg(args, "untraced") == Some(&ArgValue::Bool(true));
            v.push((*ts, *outgoing_tid, untraced));
        }
    }
    v
}

#[test]
fn a_thread_switched_in_that_showed_nothing_before_its_switch_out_was_inferred_is_untraced() {
    // A recording of every task, then one under a filter.
    for followed_only in [false, true] {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        t.set_followed_only(followed_only);
        // CPU 0: idle switches to 69, which shows nothing of its own; the
        // next event on CPU 0 is idle's.
        t.current_task(&mut out, &ev::header(100, 0, 0, 0)).unwrap();
        t.switch(
            &mut out,
            &ev::switch(100, 0, (0, 0, 120, 0, "swapper/0"), (69, 110, "hidden")),
        )
        .unwrap();
        t.current_task(&mut out, &ev::header(400, 0, 0, 0)).unwrap();
        // CPU 1: idle switches to 11, which then shows an event of its own,
        // and its switch out is lost: inferred, but 11 was traced.
        t.current_task(&mut out, &ev::header(100, 1, 0, 0)).unwrap();
        t.switch(
            &mut out,
            &ev::switch(150, 1, (0, 0, 120, 0, "swapper/1"), (11, 120, "worker")),
        )
        .unwrap();
        t.current_task(&mut out, &ev::header(200, 1, 11, 11))
            .unwrap();
        t.current_task(&mut out, &ev::header(500, 1, 0, 0)).unwrap();
        // CPU 0 again: 12 is switched in by an event of its own (an
        // inferred switch in), and its switch out is inferred too: it was
        // seen.
        t.current_task(&mut out, &ev::header(600, 0, 12, 12))
            .unwrap();
        t.current_task(&mut out, &ev::header(700, 0, 0, 0)).unwrap();
        let bytes = out.finish().unwrap();
        assert_eq!(
            inferred_switches(&bytes),
            [
                (400, 69, !followed_only),
                (500, 11, false),
                (600, 0, false),
                (700, 12, false),
            ],
            "followed only: {followed_only}"
        );
    }
}
