use trace_common::fxt::{Arg, ArgValue, Record};

use super::walk::ThreadTime;
use super::{CriticalPath, CriticalPathError, Options, Target, TargetKind, critical_path};
use crate::report::testing::Fxt;

const MS: u64 = 1_000_000;
const APP: u64 = 100;
const A: u64 = 101;
const B: u64 = 102;
const HOG: u64 = 103;
const IRQ_PID: u64 = 0x7FFF_0000;
const CPU1_IRQ: u64 = 0x7FFF_0002;
const BLOCK_PID: u64 = 0x7FFE_0000;
const VDA: u64 = 0x7FFE_0001;

fn wake(t: &mut Fxt, ts: u64, cpu: u16, tid: u64, waker: u64) {
    t.record(&Record::ThreadWakeup {
        ts,
        cpu,
        tid,
        args: vec![Arg::new("waker", ArgValue::Koid(waker))].into(),
    });
}

/// A requester (A) whose span waits on a futex that a holder (B) releases
/// after a write and an `fsync` whose block request an interrupt ends; A
/// then waits for a CPU behind a hog.
fn mutex_trace() -> Fxt {
    let mut t = Fxt::new();
    t.process(APP, "app")
        .thread(APP, A, "requester")
        .thread(APP, B, "holder")
        .process(HOG, "hog")
        .thread(HOG, HOG, "hog")
        .process(IRQ_PID, "kernel interrupts")
        .thread(IRQ_PID, CPU1_IRQ, "CPU 1 interrupts")
        .process(BLOCK_PID, "kernel block I/O")
        .thread(BLOCK_PID, VDA, "vda");
    t.switch(MS / 2, 0, 0, 3, A);
    t.switch(MS / 2, 1, 0, 3, B);
    let futex = || {
        vec![
            Arg::new("uaddr", ArgValue::Uint64(0x7f00)),
            Arg::new("op", ArgValue::Int32(128)),
            Arg::new("ret", ArgValue::Int64(0)),
        ]
    };
    t.slice(MS, 41 * MS, APP, A, "app", "request", vec![]);
    t.slice(
        2 * MS,
        38 * MS + MS / 10,
        APP,
        A,
        "kernel:syscall",
        "futex",
        futex(),
    );
    t.switch(2 * MS, 0, A, 3, 0);
    t.slice(MS, 10 * MS, APP, B, "kernel:syscall", "write", vec![]);
    t.slice(10 * MS, 36 * MS, APP, B, "kernel:syscall", "fsync", vec![]);
    t.switch(11 * MS, 1, B, 3, 0);
    t.slice(
        12 * MS,
        35 * MS - MS / 10,
        BLOCK_PID,
        VDA,
        "kernel:block",
        "write",
        vec![
            Arg::new("device", ArgValue::String("vda".into())),
            Arg::new("bytes", ArgValue::Uint64(32 << 20)),
            Arg::new("issuer", ArgValue::Koid(B)),
        ],
    );
    t.slice(
        30 * MS,
        30 * MS + 1000,
        IRQ_PID,
        CPU1_IRQ,
        "kernel:irq",
        "timer",
        vec![],
    );
    t.slice(
        35 * MS - 5000,
        35 * MS + 5000,
        IRQ_PID,
        CPU1_IRQ,
        "kernel:irq",
        "virtio2-req.0",
        vec![],
    );
    wake(&mut t, 35 * MS, 1, B, CPU1_IRQ);
    t.switch(35 * MS + MS / 10, 1, 0, 3, B);
    t.switch(30 * MS, 0, 0, 3, HOG);
    t.slice(
        36 * MS + MS / 2,
        36 * MS + 600_000,
        APP,
        B,
        "kernel:syscall",
        "futex",
        futex(),
    );
    wake(&mut t, 36 * MS + 550_000, 1, A, B);
    t.switch(38 * MS, 0, HOG, 1, A);
    t.switch(45 * MS, 0, A, 3, 0);
    t.switch(45 * MS, 1, B, 3, 0);
    t
}

fn run(t: &Fxt, target: &str) -> Result<CriticalPath, CriticalPathError> {
    let options = Options {
        target: target.parse().expect("a target"),
        ..Options::default()
    };
    critical_path(|| Ok(&t.bytes[..]), &options).map(|(p, _)| p)
}

#[test]
fn targets_parse() {
    let t: Target = "syscall:fsync".parse().unwrap();
    assert_eq!(t.kind, TargetKind::Syscall);
    assert_eq!(t.name, "fsync");
    let t: Target = "handle request".parse().unwrap();
    assert_eq!(
        (t.kind, t.name.as_str()),
        (TargetKind::Span, "handle request")
    );
    assert_eq!(
        "thread:42".parse::<Target>().unwrap().kind,
        TargetKind::Thread
    );
    assert!("thread:x".parse::<Target>().is_err());
    assert!("span:".parse::<Target>().is_err());
}

fn ms(ns: u64) -> f64 {
    ns as f64 / MS as f64
}

#[test]
fn a_futex_wait_is_followed_to_the_holder_and_its_fsync() {
    let p = run(&mutex_trace(), "request").unwrap();
    assert_eq!(p.target.tid, A);
    assert_eq!(p.target.dur, 40 * MS);
    let a: &ThreadTime = p.path.as_ref().unwrap();
    assert_eq!(a.thread, "requester");
    assert_eq!(a.running_ns, 4 * MS);
    assert_eq!(a.runnable_ns, 38 * MS - (36 * MS + 550_000));
    assert_eq!(a.blocked_ns, 36 * MS + 550_000 - 2 * MS);
    assert_eq!(a.runnable_behind[0].name, "hog (103)");
    assert_eq!(a.waits.len(), 1);
    let wait = &a.waits[0];
    assert_eq!(wait.reason, "futex 0x7f00");
    assert_eq!(wait.on.as_deref(), Some("0x7f00"));
    assert_eq!(wait.woken_by, "holder (102)");
    assert_eq!(wait.waker_in.as_deref(), Some("futex"));
    let b = wait.waker.as_deref().expect("the holder followed");
    assert_eq!((b.from, b.to), (2 * MS, 36 * MS + 550_000));
    assert_eq!(ms(b.running_ns), 9.0 + 1.45);
    assert_eq!(b.blocked_ns, 24 * MS);
    assert_eq!(b.runnable_ns, MS / 10);
    assert_eq!(
        b.runnable_behind[0].name,
        "nothing: CPU 1 idle (waking it up)"
    );
    assert_eq!(b.syscalls[0].name, "fsync");
    assert_eq!(b.syscalls[0].ns, 26 * MS);
    assert_eq!(b.syscalls[1].ns, 8 * MS);
    assert_eq!(b.syscalls[1].name, "write");
    let fsync = &b.waits[0];
    assert_eq!(fsync.reason, "fsync");
    assert_eq!(fsync.woken_by, "interrupt virtio2-req.0 on CPU 1");
    let r = fsync.requests.as_ref().expect("its block request");
    assert_eq!((r.count, r.bytes), (1, 32 << 20));
    assert_eq!(r.devices, vec!["vda".to_string()]);
    assert_eq!(r.busy_ns, 35 * MS - MS / 10 - 12 * MS);
    assert!(fsync.waker.is_none());
    // No off-CPU stacks: the answer says what would add them.
    assert!(
        p.gaps.iter().any(|g| g.contains("kernel:offcpu")),
        "{:?}",
        p.gaps
    );
}

#[test]
fn a_system_call_and_a_thread_range_are_targets_too() {
    let t = mutex_trace();
    let p = run(&t, "syscall:fsync").unwrap();
    assert_eq!((p.target.tid, p.target.dur), (B, 26 * MS));
    assert_eq!(p.path.as_ref().unwrap().blocked_ns, 24 * MS);
    // The longest futex call is A's; the second in time is B's.
    let p = run(&t, "syscall:futex").unwrap();
    assert_eq!(p.target.tid, A);
    let options = Options {
        target: "syscall:futex".parse().unwrap(),
        nth: Some(2),
        ..Options::default()
    };
    let (p, _) = critical_path(|| Ok(&t.bytes[..]), &options).unwrap();
    assert_eq!((p.target.tid, p.target.nth, p.target.instances), (B, 2, 2));
    let options = Options {
        target: "thread:103".parse().unwrap(),
        selection: crate::report::Selection {
            time: "@30000000..@40000000".parse().unwrap(),
            ..Default::default()
        },
        ..Options::default()
    };
    let (p, _) = critical_path(|| Ok(&t.bytes[..]), &options).unwrap();
    assert_eq!(p.target.name, "hog");
    assert_eq!(p.path.as_ref().unwrap().running_ns, 8 * MS);
    assert!(matches!(
        run(&t, "nothing"),
        Err(CriticalPathError::NotFound(_))
    ));
}

#[test]
fn a_wake_up_inside_an_interrupt_is_the_interrupts() {
    // B wakes A while an interrupt runs on B's CPU: the interrupt woke it.
    let mut t = Fxt::new();
    t.process(APP, "app")
        .thread(APP, A, "a")
        .thread(APP, B, "b");
    t.switch(0, 0, 0, 3, A);
    t.switch(0, 1, 0, 3, B);
    t.slice(MS, 10 * MS, APP, A, "app", "work", vec![]);
    t.switch(2 * MS, 0, A, 3, 0);
    t.slice(
        5 * MS,
        5 * MS + 2000,
        IRQ_PID,
        CPU1_IRQ,
        "kernel:irq",
        "eth0",
        vec![],
    );
    wake(&mut t, 5 * MS + 1000, 1, A, B);
    t.switch(5 * MS + 2000, 0, 0, 3, A);
    let p = run(&t, "work").unwrap();
    assert_eq!(
        p.path.as_ref().unwrap().waits[0].woken_by,
        "interrupt eth0 on CPU 1"
    );
    assert!(p.path.as_ref().unwrap().waits[0].waker.is_none());
}

#[test]
fn waits_that_wake_each_other_stop_at_the_cycle() {
    // A waits for B, which over the same time waits for A.
    let mut t = Fxt::new();
    t.process(APP, "app")
        .thread(APP, A, "a")
        .thread(APP, B, "b");
    t.switch(0, 0, 0, 3, A);
    t.switch(0, 1, 0, 3, B);
    t.slice(MS, 20 * MS, APP, A, "app", "work", vec![]);
    t.switch(2 * MS, 0, A, 3, 0);
    t.switch(3 * MS, 1, B, 3, 0);
    wake(&mut t, 4 * MS, 0, B, A);
    t.switch(5 * MS, 1, 0, 3, B);
    wake(&mut t, 10 * MS, 1, A, B);
    t.switch(11 * MS, 0, 0, 3, A);
    let p = run(&t, "work").unwrap();
    let b = p.path.as_ref().unwrap().waits[0].waker.as_deref().unwrap();
    assert_eq!(b.tid, B);
    // B's wait was ended by A, which is being explained above: not again.
    assert_eq!(b.waits[0].waker_tid, Some(A));
    assert!(b.waits[0].waker.is_none());
    assert!(b.waits[0].waker_above);
}

#[test]
fn a_task_is_its_polls_on_the_threads_that_ran_them_and_its_awaits() {
    use trace_common::fxt::EventKind;
    // Task 7 ("req") from 1 to 30 ms: polled on A (2–4 ms), then on B
    // (20–25 ms), where its poll blocks in a read that A's write ends.
    // Task 8's poll on A (10–12 ms) is not one of its polls.
    let mut t = Fxt::new();
    t.process(APP, "app")
        .thread(APP, A, "worker-0")
        .thread(APP, B, "worker-1");
    t.switch(0, 0, 0, 3, A);
    t.switch(0, 1, 0, 3, B);
    let id = |n: u64| vec![Arg::new("task.id", ArgValue::Uint64(n))];
    let spawn = "runtime.spawn";
    t.slice(2 * MS, 4 * MS, APP, A, "tokio::task", spawn, id(7));
    t.slice(10 * MS, 12 * MS, APP, A, "tokio::task", spawn, id(8));
    t.slice(20 * MS, 25 * MS, APP, B, "kernel:syscall", "read", vec![]);
    t.switch(21 * MS, 1, B, 3, 0);
    t.slice(
        22 * MS,
        22 * MS + 100,
        APP,
        A,
        "kernel:syscall",
        "write",
        vec![],
    );
    wake(&mut t, 22 * MS + 50, 1, B, A);
    t.switch(23 * MS, 1, 0, 3, B);
    t.slice(20 * MS, 25 * MS, APP, B, "tokio::task", spawn, id(7));
    // Task 9 ("sender") wakes it from its poll on A; its own polls are
    // chained by a flow too, which is no wake.
    let mut sender = id(9);
    sender.push(Arg::new("task.name", ArgValue::String("sender".into())));
    t.slice(15 * MS, 16 * MS, APP, A, "tokio::task", spawn, sender);
    let flow = |t: &mut Fxt, ts: u64, tid: u64, kind: EventKind| {
        t.event(ts, APP, tid, "tokio::task", "poll", kind, vec![]);
    };
    flow(&mut t, 15 * MS + 2, A, EventKind::FlowBegin { id: 50 });
    flow(&mut t, 20 * MS + 2, B, EventKind::FlowEnd { id: 50 });
    flow(&mut t, 2 * MS + 2, A, EventKind::FlowBegin { id: 60 });
    flow(&mut t, 20 * MS + 2, B, EventKind::FlowStep { id: 60 });
    let begin = id(7);
    t.event(
        MS,
        APP,
        B,
        "tokio::task",
        "req",
        EventKind::AsyncBegin { id: 1 },
        begin,
    );
    let mut end = vec![Arg::new("polls", ArgValue::Uint64(2))];
    end.push(Arg::new("sched_delay_ns", ArgValue::Uint64(MS)));
    end.push(Arg::new("wakes", ArgValue::Uint64(1)));
    t.event(
        30 * MS,
        APP,
        B,
        "tokio::task",
        "req",
        EventKind::AsyncEnd { id: 1 },
        end,
    );
    let p = run(&t, "task:req").unwrap();
    assert_eq!(p.target.dur, 29 * MS);
    assert!(p.path.is_none());
    let task = p.task.expect("the task's time");
    assert_eq!((task.polls, task.polls_recorded), (2, Some(2)));
    assert_eq!(task.polled_ns, 7 * MS);
    assert_eq!(task.awaiting_ns, 22 * MS);
    assert_eq!(task.longest_await_ns, 16 * MS);
    assert_eq!((task.sched_delay_ns, task.wakes), (Some(MS), Some(1)));
    assert_eq!(task.threads[0].name, "worker-1 (102)");
    assert_eq!(task.threads[0].ns, 5 * MS);
    // Its awaits: from its creation (no waker), then until the sender's
    // wake.
    assert_eq!(task.awaits.len(), 2);
    assert_eq!((task.awaits[0].from, task.awaits[0].ns), (MS, MS));
    assert_eq!(task.awaits[0].woken_by, None);
    assert!(task.awaits[0].first && !task.awaits[1].first);
    assert_eq!(task.awaits[1].ns, 16 * MS);
    assert_eq!(
        task.awaits[1].woken_by.as_deref(),
        Some("task \"sender\" (task.id 9) on worker-0 (101)")
    );
    assert_eq!(task.awaits[1].waker_tid, Some(A));
    // The second poll blocked in its read, woken by worker-0 in its write.
    let second = &task.poll_times[1];
    assert_eq!(second.tid, B);
    assert_eq!(second.blocked_ns, 22 * MS + 50 - 21 * MS);
    let wait = &second.waits[0];
    assert_eq!(wait.syscall.as_deref(), Some("read"));
    assert_eq!(wait.waker_tid, Some(A));
    assert_eq!(wait.waker_in.as_deref(), Some("write"));
    assert!(matches!(
        run(&t, "task:nothing"),
        Err(CriticalPathError::NotFound(_))
    ));
    let parsed: Target = "task:req".parse().unwrap();
    assert_eq!(parsed.kind, TargetKind::Task);
}
