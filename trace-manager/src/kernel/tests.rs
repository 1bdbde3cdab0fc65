//! Tests of the kernel provider. Those named `root_*` load the real eBPF
//! programs: they need root and fail (never skip) without it.

use std::process::Command;
use std::time::{Duration, Instant};

use trace_common::category::{KERNEL_PROC, KERNEL_SCHED};
use trace_common::kernel::{ABSENT_ID, CLONE_THREAD, KernelEvent, c_str_bytes};

use crate::clock::boottime_ns;
use crate::kernel::load::EBPF_OBJECT;
use crate::kernel::translate::comm_str;

use super::*;

fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test loads eBPF programs and must run as root (sudo -E cargo test)"
    );
}

fn config(categories: &[&str]) -> KernelConfig {
    KernelConfig {
        categories: categories.iter().map(|c| (*c).to_owned()).collect(),
        ring_buffer_bytes: 4 << 20,
        pids: None,
        cgroups: Vec::new(),
        uprobes: Vec::new(),
        usdt: Vec::new(),
        tracepoints: Default::default(),
        classic_tracepoints: false,
        separate_syscall_events: false,
        stacks: Default::default(),
        backlog_bytes: crate::kernel::DEFAULT_BACKLOG_BYTES,
        deadline: None,
    }
}

/// Collects events until `done` says so or `timeout` passes.
fn collect(
    kernel: &mut KernelProvider,
    timeout: Duration,
    mut done: impl FnMut(&[KernelEvent]) -> bool,
) -> Vec<KernelEvent> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let deadline = Instant::now() + timeout;
    let mut events = Vec::new();
    rt.block_on(async {
        loop {
            kernel.drain(&mut |e| events.push(e));
            if done(&events) {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            // Wake up now and then even without data, to re-check `done`.
            let wait = left.min(Duration::from_millis(200));
            if let Ok(r) = tokio::time::timeout(wait, kernel.readable()).await {
                r.expect("readable");
            }
        }
    });
    events
}

#[test]
fn ring_size_is_a_power_of_two_pages() {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    assert_eq!(ring_size(0), page);
    assert_eq!(ring_size(1), page);
    assert_eq!(ring_size(page), page);
    assert_eq!(ring_size(page + 1), 2 * page);
    assert_eq!(ring_size(3 * page), 4 * page);
    assert_eq!(ring_size(8 << 20), 8 << 20);
    assert_eq!(ring_size(usize::MAX / 2), 1 << 31);
}

/// The helper ids the embedded object's programs call: every `BPF_JMP |
/// BPF_CALL` (opcode 0x85) with source register 0 (a helper, not a BPF
/// function or a kfunc) in an executable section, its id in `imm`.
fn helper_calls() -> std::collections::BTreeMap<i32, usize> {
    use object::{Object, ObjectSection, SectionFlags};
    let file = object::File::parse(EBPF_OBJECT).expect("the embedded eBPF object is ELF");
    let mut calls = std::collections::BTreeMap::new();
    for section in file.sections() {
        let SectionFlags::Elf { sh_flags } = section.flags() else {
            continue;
        };
        if sh_flags & u64::from(object::elf::SHF_EXECINSTR) == 0 {
            continue;
        }
        let code = section.data().expect("section data");
        let mut at = 0;
        while at + 8 <= code.len() {
            let insn = &code[at..at + 8];
            // `BPF_LD | BPF_IMM | BPF_DW` takes two slots; the second is data.
            if insn[0] == 0x18 {
                at += 16;
                continue;
            }
            if insn[0] == 0x85 && insn[1] >> 4 == 0 {
                let id = i32::from_le_bytes([insn[4], insn[5], insn[6], insn[7]]);
                *calls.entry(id).or_insert(0) += 1;
            }
            at += 8;
        }
    }
    calls
}

#[test]
fn programs_stamp_events_with_the_boottime_clock() {
    /// `bpf_ktime_get_ns`: CLOCK_MONOTONIC.
    const KTIME_GET_NS: i32 = 5;
    /// `bpf_ktime_get_boot_ns`: CLOCK_BOOTTIME.
    const KTIME_GET_BOOT_NS: i32 = 125;
    /// `bpf_ktime_get_coarse_ns`: CLOCK_MONOTONIC_COARSE.
    const KTIME_GET_COARSE_NS: i32 = 160;
    let calls = helper_calls();
    // Helpers every object of ours calls: the walk finds calls at all.
    assert!(
        calls.contains_key(&1),
        "no bpf_map_lookup_elem call: {calls:?}"
    );
    assert!(
        calls.get(&KTIME_GET_BOOT_NS).is_some_and(|&n| n > 0),
        "bpf_ktime_get_boot_ns is never called: {calls:?}"
    );
    for id in [KTIME_GET_NS, KTIME_GET_COARSE_NS] {
        assert!(
            !calls.contains_key(&id),
            "helper {id} reads a clock other than CLOCK_BOOTTIME: {calls:?}"
        );
    }
}

#[test]
fn unknown_category_is_rejected() {
    let err = KernelProvider::start(&config(&["kernel:sched", "kernel:nope"])).unwrap_err();
    assert!(
        matches!(&err, KernelError::UnknownCategory { name, .. } if name == "kernel:nope"),
        "{err}"
    );
    assert!(err.to_string().contains("kernel:proc"), "{err}");
}

#[test]
fn provider_and_errors_can_move_between_threads() {
    fn assert_send<T: Send>() {}
    fn assert_error<T: std::error::Error + Send + Sync + 'static>() {}
    assert_send::<KernelProvider>();
    assert_error::<KernelError>();
}

#[test]
fn root_records_a_child_process_and_a_thread_rename() {
    require_root();
    let t0 = boottime_ns();
    let mut kernel = KernelProvider::start(&config(&[KERNEL_SCHED, KERNEL_PROC])).unwrap();
    // A BTF tracepoint variant stands for its classic program.
    let mut attached: Vec<&str> = kernel
        .attached_programs()
        .iter()
        .map(|p| p.trim_end_matches("_btf"))
        .collect();
    attached.sort_unstable();
    assert_eq!(
        attached,
        [
            "cpu_frequency",
            "cpu_idle",
            "sched_process_exec",
            "sched_process_exit",
            "sched_switch",
            "sched_wakeup",
            "sched_wakeup_new",
            "task_newtask",
            "task_rename"
        ]
    );

    let me = std::process::id();
    let status = Command::new("/bin/true").spawn().unwrap();
    let child = status.id();
    let mut status = status;
    assert!(status.wait().unwrap().success());
    // A thread that names itself: a new task of this process, then a rename.
    let thread_name = "kp-rename-test";
    std::thread::Builder::new()
        .name(thread_name.into())
        .spawn(|| std::thread::sleep(Duration::from_millis(5)))
        .unwrap()
        .join()
        .unwrap();

    let events = collect(&mut kernel, Duration::from_secs(10), |events| {
        events.iter().any(|e| matches!(e, KernelEvent::Exit(x) if x.pid == child))
            && events.iter().any(|e| {
                matches!(e, KernelEvent::Rename(r) if c_str_bytes(&r.newcomm) == thread_name.as_bytes())
            })
    });
    kernel.detach();
    kernel.drain(&mut |_| {});
    let t1 = boottime_ns();

    for e in &events {
        let ts = e.header().ts;
        assert!(t0 <= ts && ts <= t1, "{e:?} outside [{t0}, {t1}]");
    }
    let new_task = events
        .iter()
        .find_map(|e| match e {
            KernelEvent::NewTask(n) if n.pid == child => Some(n),
            _ => None,
        })
        .expect("new task for the child");
    assert_eq!(new_task.clone_flags & CLONE_THREAD, 0);
    assert_eq!(new_task.child_tgid, child);
    assert_eq!(new_task.header.tgid, me);

    let exec = events
        .iter()
        .find_map(|e| match e {
            KernelEvent::Exec(x) if x.pid == child => Some(x),
            _ => None,
        })
        .expect("exec of the child");
    assert_eq!(exec.filename(), b"/bin/true");
    assert_eq!(c_str_bytes(&exec.comm), b"true");
    assert_eq!(exec.old_pid, child);
    assert_eq!(exec.header.tgid, child);

    let exit = events
        .iter()
        .find_map(|e| match e {
            KernelEvent::Exit(x) if x.pid == child => Some(x),
            _ => None,
        })
        .expect("exit of the child");
    assert_eq!(exit.header.tid, child);
    assert_eq!(exit.header.tgid, child);
    assert_eq!(c_str_bytes(&exit.comm), b"true");
    assert_eq!(exit.group_dead(), Some(true));
    assert!(new_task.header.ts <= exec.header.ts && exec.header.ts <= exit.header.ts);

    let rename = events
        .iter()
        .find_map(|e| match e {
            KernelEvent::Rename(r) if c_str_bytes(&r.newcomm) == thread_name.as_bytes() => Some(r),
            _ => None,
        })
        .expect("rename of the named thread");
    assert_eq!(rename.header.tgid, me);
    assert_eq!(rename.pid, rename.header.tid);
    let thread = events
        .iter()
        .find_map(|e| match e {
            KernelEvent::NewTask(n) if n.pid == rename.pid => Some(n),
            _ => None,
        })
        .expect("new task for the named thread");
    assert_ne!(thread.clone_flags & CLONE_THREAD, 0);
    assert_eq!(thread.child_tgid, me);

    let switches: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            KernelEvent::Switch(s) => Some(s),
            _ => None,
        })
        .collect();
    assert!(switches.len() >= 2, "only {} switches", switches.len());
    assert!(
        switches.iter().any(|s| s.next_pid == child),
        "the child never ran"
    );
    for s in &switches {
        assert_eq!(s.prev_pid, s.header.tid, "{s:?}");
        assert!((0..140).contains(&s.prev_prio) && (0..140).contains(&s.next_prio));
    }
    assert!(
        events
            .iter()
            .any(|e| matches!(e, KernelEvent::Wakeup(w) if w.pid == child && w.is_new())),
        "no wakeup_new of the child"
    );
    assert_eq!(kernel.malformed(), 0);
    // A 4 MiB ring buffer drained as this test does never fills; the kernel
    // may still skip a rare run while another BPF program runs on the CPU.
    assert_eq!(kernel.lost_in_programs().unwrap(), 0);
    assert!(
        kernel.dropped().unwrap() < 10,
        "{}",
        kernel.dropped().unwrap()
    );
}

#[test]
fn root_disabled_category_costs_nothing() {
    require_root();
    let mut kernel = KernelProvider::start(&config(&[KERNEL_SCHED])).unwrap();
    // A BTF tracepoint variant stands for its classic program; the naming
    // programs (kernel:proc's) are attached whatever the categories.
    let mut attached: Vec<&str> = kernel
        .attached_programs()
        .iter()
        .map(|p| p.trim_end_matches("_btf"))
        .collect();
    attached.sort_unstable();
    assert_eq!(
        attached,
        [
            "cpu_frequency",
            "cpu_idle",
            "sched_process_exec",
            "sched_process_exit",
            "sched_switch",
            "sched_wakeup",
            "sched_wakeup_new",
            "task_newtask",
            "task_rename",
        ]
    );
    let child = Command::new("/bin/true").spawn().unwrap().wait().unwrap();
    assert!(child.success());
    let events = collect(&mut kernel, Duration::from_millis(300), |_| false);
    assert!(events.iter().any(|e| matches!(e, KernelEvent::Switch(_))));
    // The child's exec names it.
    assert!(
        events
            .iter()
            .any(|e| matches!(e, KernelEvent::Exec(x) if comm_str(&x.comm) == "true"))
    );
    assert!(
        events.iter().all(|e| matches!(
            e,
            KernelEvent::Switch(_)
                | KernelEvent::Wakeup(_)
                | KernelEvent::Power(_)
                | KernelEvent::NewTask(_)
                | KernelEvent::Exec(_)
                | KernelEvent::Exit(_)
                | KernelEvent::Rename(_)
        )),
        "an event of another category arrived with only kernel:sched enabled"
    );
}

#[test]
fn root_full_ring_buffer_counts_drops() {
    require_root();
    // One page holds about 50 events; a few processes make far more.
    let mut kernel = KernelProvider::start(&KernelConfig {
        categories: vec![KERNEL_SCHED.into(), KERNEL_PROC.into()],
        ring_buffer_bytes: 1,
        pids: None,
        cgroups: Vec::new(),
        uprobes: Vec::new(),
        usdt: Vec::new(),
        tracepoints: Default::default(),
        classic_tracepoints: false,
        separate_syscall_events: false,
        stacks: Default::default(),
        backlog_bytes: crate::kernel::DEFAULT_BACKLOG_BYTES,
        deadline: None,
    })
    .unwrap();
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    // One page per online CPU.
    let cpus = kernel.cpus().len();
    assert!(cpus >= 1);
    assert_eq!(kernel.ring_buffer_bytes(), page * cpus);
    for _ in 0..20 {
        assert!(Command::new("/bin/true").status().unwrap().success());
    }
    kernel.detach();
    let mut n = 0;
    kernel.drain(&mut |_| n += 1);
    assert!(
        n > 0 && n <= cpus * page / 48,
        "{n} events from {cpus} {page}-byte rings"
    );
    let per_cpu = kernel.dropped_per_cpu().unwrap();
    assert_eq!(per_cpu.len(), cpus);
    assert!(
        per_cpu.iter().map(|&(_, n)| n).sum::<u64>() <= kernel.dropped().unwrap(),
        "{per_cpu:?}"
    );
    assert!(
        kernel.dropped().unwrap() > 0,
        "a full ring buffer lost nothing?"
    );
}

/// The events a `sleep 0.05` produces, for [`root_btf_and_classic_programs_agree`].
fn sleep_events(classic: bool) -> (Vec<&'static str>, u32, Vec<KernelEvent>) {
    let mut cfg = config(&[
        KERNEL_SCHED,
        KERNEL_PROC,
        trace_common::category::KERNEL_SYSCALL,
    ]);
    cfg.classic_tracepoints = classic;
    let mut kernel = KernelProvider::start(&cfg).unwrap();
    let programs = kernel.attached_programs().to_vec();
    let mut child = Command::new("sleep").arg("0.05").spawn().unwrap();
    let pid = child.id();
    assert!(child.wait().unwrap().success());
    let events = collect(&mut kernel, Duration::from_secs(5), |events| {
        events
            .iter()
            .any(|e| matches!(e, KernelEvent::Exit(x) if x.header.tid == pid))
    });
    (programs, pid, events)
}

#[test]
fn root_btf_and_classic_programs_agree() {
    require_root();
    for classic in [true, false] {
        let (programs, pid, events) = sleep_events(classic);
        let btf_switch = programs.contains(&"sched_switch_btf");
        if classic {
            assert!(
                programs.contains(&"sched_switch") && !btf_switch,
                "{programs:?}"
            );
        } else if std::path::Path::new(super::btf::VMLINUX_BTF).exists() {
            assert!(
                btf_switch && programs.contains(&"sys_enter_btf"),
                "{programs:?}"
            );
        }
        let what = if classic { "classic" } else { "BTF" };
        let sleeping = events.iter().any(|e| {
            matches!(e, KernelEvent::Switch(s) if s.prev_pid == pid
                && comm_str(&s.prev_comm) == "sleep"
                && s.prev_state & 0xff == 1
                && s.prev_prio == 120)
        });
        assert!(sleeping, "{what}: no switch away from the sleeping child");
        // The BTF programs read the woken and switched-in task's process;
        // the classic tracepoints do not carry it.
        let tgid = if btf_switch { pid } else { ABSENT_ID };
        let cpus = aya::util::nr_cpus().unwrap();
        let woken = events.iter().any(|e| {
            matches!(e, KernelEvent::Wakeup(w) if w.pid == pid
                && comm_str(&w.comm) == "sleep"
                && w.prio == 120
                && w.tgid == tgid
                && usize::from(w.target_cpu) < cpus)
        });
        assert!(woken, "{what}: no wake-up of the child");
        let switched_in = events.iter().any(|e| {
            matches!(e, KernelEvent::Switch(s) if s.next_pid == pid
                && comm_str(&s.next_comm) == "sleep"
                && s.next_prio == 120
                && s.next_tgid == tgid)
        });
        assert!(switched_in, "{what}: no switch to the child");
        let nr = libc::SYS_clock_nanosleep;
        let entered = events.iter().any(|e| {
            matches!(e, KernelEvent::SysEnter(s) if s.header.tid == pid
                && s.id == nr
                && s.args[0] == libc::CLOCK_REALTIME as u64
                && s.args[1] == 0
                && s.args[2] != 0)
        });
        assert!(
            entered,
            "{what}: no clock_nanosleep entry with its arguments"
        );
        let returned = events.iter().any(|e| {
            matches!(e, KernelEvent::SysExit(s) if s.header.tid == pid && s.id == nr && s.ret == 0)
        });
        assert!(returned, "{what}: no clock_nanosleep return");
    }
}

#[test]
fn root_fill_level_rises_with_waiting_events_and_falls_when_drained() {
    require_root();
    let mut cfg = config(&[KERNEL_SCHED, KERNEL_PROC]);
    cfg.ring_buffer_bytes = 256 << 10;
    let mut kernel = KernelProvider::start(&cfg).unwrap();
    assert!(kernel.fill() < 0.5);
    for _ in 0..30 {
        assert!(Command::new("/bin/true").status().unwrap().success());
    }
    let full = kernel.fill();
    assert!(full > 0.0 && full <= 1.0, "fill {full} with events waiting");
    kernel.detach();
    kernel.drain(&mut |_| {});
    assert!(
        kernel.fill() < full,
        "fill {} after draining",
        kernel.fill()
    );
}

/// A system call event of one thread, as the two-event path writes it:
/// `(time, is return, number, arguments, return value)`.
type CallEvent = (
    u64,
    bool,
    i64,
    [u64; trace_common::kernel::SYSCALL_ARGS],
    i64,
);

/// The entries and returns of process `tgid` among `events`, in time order,
/// with each whole-call event taken apart into its entry and return;
/// and how many whole-call events there were.
fn calls_of(tgid: u32, events: &[KernelEvent]) -> (Vec<CallEvent>, usize) {
    let mut out = Vec::new();
    let mut whole = 0;
    for e in events {
        match e {
            KernelEvent::SysEnter(s) if s.header.tgid == tgid => {
                out.push((s.header.ts, false, s.id, s.args, 0));
            }
            KernelEvent::SysExit(s) if s.header.tgid == tgid => {
                out.push((s.header.ts, true, s.id, [0; 6], s.ret));
            }
            KernelEvent::Syscall(s) if s.header.tgid == tgid => {
                whole += 1;
                let (entry, exit) = (s.entry(), s.exit());
                out.push((entry.header.ts, false, entry.id, entry.args, 0));
                out.push((exit.header.ts, true, exit.id, [0; 6], exit.ret));
            }
            _ => {}
        }
    }
    out.sort_by_key(|c| (c.0, c.1));
    (out, whole)
}

/// The same process recorded at once by the two-event path (every call as
/// an entry and a return) and by the one-event path (a call that stays on
/// its CPU as one event, the others as two): the same calls, with the same
/// numbers, arguments and return values, in the same order.
#[test]
fn root_one_event_and_two_event_system_calls_agree() {
    require_root();
    // Every process is recorded, the other tests' too: large rings, read
    // all along, so that nothing is dropped.
    let mut paired = config(&[trace_common::category::KERNEL_SYSCALL]);
    paired.ring_buffer_bytes = 32 << 20;
    let mut separate = paired.clone();
    separate.separate_syscall_events = true;
    let mut two = KernelProvider::start(&separate).unwrap();
    let mut one = KernelProvider::start(&paired).unwrap();
    // Calls that return at once (getppid, a failing stat, reads and
    // writes) and calls that block (sleeps, a pipe read), then exit_group.
    let script = "import os, time\n\
        for _ in range(2000): os.getppid()\n\
        for _ in range(20):\n\
        \x20   try: os.stat('/nonexistent/file')\n\
        \x20   except OSError: pass\n\
        for _ in range(5): time.sleep(0.002)\n\
        r, w = os.pipe()\n\
        if os.fork() == 0:\n\
        \x20   time.sleep(0.01); os.write(w, b'x'); os._exit(0)\n\
        os.read(r, 1); os.wait()\n";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut events = [Vec::new(), Vec::new()];
    // Only the child's events are kept.
    let keep = |events: &mut Vec<KernelEvent>, e: KernelEvent| {
        if e.header().tgid == pid {
            events.push(e);
        }
    };
    loop {
        for (kernel, events) in [&mut two, &mut one].into_iter().zip(&mut events) {
            kernel.drain(&mut |e| keep(events, e));
        }
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success());
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    for (kernel, events) in [&mut two, &mut one].into_iter().zip(&mut events) {
        kernel.cut().unwrap();
        kernel.detach();
        kernel.drain(&mut |e| keep(events, e));
        assert_eq!(kernel.dropped().unwrap(), 0);
    }
    let (by_two, whole_in_two) = calls_of(pid, &events[0]);
    let (by_one, whole_in_one) = calls_of(pid, &events[1]);
    assert_eq!(whole_in_two, 0, "the two-event path wrote whole calls");
    assert!(
        whole_in_one >= 2000,
        "only {whole_in_one} whole calls: the one-event path was not taken"
    );
    assert!(
        by_one.len() > 2 * whole_in_one,
        "no call went out as two events (the switch path was not taken)"
    );
    let getppid = by_two
        .iter()
        .filter(|c| c.1 && c.2 == libc::SYS_getppid)
        .count();
    assert!(getppid >= 2000, "{getppid} getppid returns");
    // The same calls in the same order; the times differ by the few
    // nanoseconds between the two programs on each hook.
    let strip = |v: &[CallEvent]| -> Vec<(bool, i64, [u64; 6], i64)> {
        v.iter()
            .map(|&(_, r, id, a, ret)| (r, id, a, ret))
            .collect()
    };
    let (a, b) = (strip(&by_two), strip(&by_one));
    if let Some(i) = (0..a.len().min(b.len())).find(|&i| a[i] != b[i]) {
        panic!(
            "call event {i} differs: two-event path {:?}, one-event path {:?}",
            by_two[i], by_one[i]
        );
    }
    assert_eq!(a.len(), b.len());
    for (x, y) in by_two.iter().zip(&by_one) {
        assert!(
            x.0.abs_diff(y.0) < 1_000_000,
            "times far apart: {x:?} {y:?}"
        );
    }
}

/// Calls still kept on a CPU when the recording stops (fewer than a ring
/// entry's worth, their task still running there) are read from the stage
/// and not lost.
#[test]
fn root_calls_kept_on_a_cpu_at_the_stop_are_not_lost() {
    require_root();
    let mut kernel =
        KernelProvider::start(&config(&[trace_common::category::KERNEL_SYSCALL])).unwrap();
    // Five calls, then computing without a system call until killed.
    let script = "import os, sys\n\
        for _ in range(5): os.getppid()\n\
        sys.stdout.write('ready\\n'); sys.stdout.flush()\n\
        while True: pass\n";
    // The child alone on the last CPU, this thread on the first: nothing
    // else is likely to switch the child out before the programs are gone.
    let cpus = kernel.cpus();
    let (first, last) = (cpus[0], cpus[cpus.len() - 1]);
    pin_this_thread(first);
    let mut child = Command::new("taskset")
        .args(["-c", &last.to_string(), "python3", "-c", script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line, "ready\n");
    kernel.cut().unwrap();
    kernel.detach();
    let mut events = Vec::new();
    kernel.drain(&mut |e| events.push(e));
    child.kill().unwrap();
    child.wait().unwrap();
    let (calls, _) = calls_of(pid, &events);
    // The last calls: the five getppid and the write of "ready", each
    // entered and returned.
    let last: Vec<(bool, i64)> = calls
        .iter()
        .rev()
        .take(12)
        .rev()
        .map(|c| (c.1, c.2))
        .collect();
    let mut want: Vec<(bool, i64)> = Vec::new();
    for _ in 0..5 {
        want.extend([(false, libc::SYS_getppid), (true, libc::SYS_getppid)]);
    }
    want.extend([(false, libc::SYS_write), (true, libc::SYS_write)]);
    assert_eq!(last, want, "the last calls of {} recorded", calls.len());
}

/// Pins the calling thread to `cpu`.
fn pin_this_thread(cpu: u32) {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes inside it;
    // sched_setaffinity(0) applies to the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0
        );
    }
}
