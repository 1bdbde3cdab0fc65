//! End-to-end: kernel tracepoints selected by name (`record -e`), with the
//! real kernel provider, as root.
//!
//! `tp_workload` hits five tracepoints of different shapes a known number
//! of times: `syscalls:sys_enter_openat` (a file name read from the
//! process), `signal:signal_generate` (a `char[16]` field),
//! `kmem:kmalloc` (pointers, sizes, flag names), the
//! `sys_enter_getpid..sys_exit_getpid` pair (durations), and
//! `sched:sched_migrate_task` (a `__data_loc` string, written by another
//! thread than the one it is about); `irq:softirq_*` is selected by glob.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tests::{Event, Trace, no_ring_drops, parse, require_root, temp_dir, trace_cli};
use trace_common::fxt::{ArgValue, EventKind, StringRef};

const ROUNDS: usize = 20;

/// `trace-cli record ARGS -o OUT -- tp_workload ROUNDS IDS MARKER`, and
/// the ids the workload wrote.
fn record(dir: &Path, args: &[&str]) -> (Output, HashMap<String, u64>, PathBuf) {
    let ids = dir.join("ids");
    let marker = dir.join("marker");
    std::fs::write(&marker, b"").unwrap();
    let out = dir.join("trace.fxt");
    let output = Command::new(trace_cli())
        .arg("record")
        .args(args)
        .arg("-o")
        .arg(&out)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_tp_workload"))
        .arg(ROUNDS.to_string())
        .arg(&ids)
        .arg(&marker)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "trace-cli record failed:\n{stderr}"
    );
    let ids = std::fs::read_to_string(&ids)
        .unwrap()
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.parse().unwrap()))
        .collect();
    (output, ids, out)
}

fn text<'a>(e: &'a Event, name: &str) -> &'a str {
    match e.args.get(name) {
        Some(ArgValue::String(StringRef::Inline(s))) => s,
        other => panic!("{}: {name} is {other:?}, not a text", e.name),
    }
}

fn events<'a>(t: &'a Trace, category: &str, name: &str) -> Vec<&'a Event> {
    t.events
        .iter()
        .filter(|e| e.category == category && e.name == name)
        .collect()
}

/// `trace-cli check FILE` finds nothing Perfetto would lose or draw wrong.
fn assert_checks(file: &Path) {
    let check = Command::new(trace_cli())
        .arg("check")
        .arg(file)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "trace-cli check:\n{report}");
}

#[test]
fn five_tracepoints_of_different_shapes_are_recorded_field_by_field() {
    require_root();
    let dir = temp_dir("tp-shapes");
    let (output, ids, file) = record(
        &dir,
        &[
            "-c",
            "none",
            "-e",
            "syscalls:sys_enter_openat",
            "-e",
            "signal:signal_generate if sig == 10",
            "-e",
            "kmem:kmalloc if bytes_req == 1234",
            "-e",
            "syscalls:sys_enter_getpid..syscalls:sys_exit_getpid",
            "-e",
            "irq:softirq_*",
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(no_ring_drops(&stderr), "{stderr}");
    let (pid, main) = (ids["pid"], ids["main"]);
    let marker = dir.join("marker");
    let t = parse(&file);
    assert!(t.errors.is_empty(), "{:?}", t.errors);

    // The pid filter holds for every tracepoint.
    let others: Vec<&Event> = t
        .events
        .iter()
        .filter(|e| !matches!(e.kind, EventKind::Counter { .. }) && e.pid != pid)
        .collect();
    assert!(others.is_empty(), "events of other processes: {others:?}");

    // openat: the file name read from the process, dfd as the int it is.
    let opens: Vec<&Event> = events(&t, "syscalls", "sys_enter_openat")
        .into_iter()
        .filter(|e| {
            matches!(e.args.get("filename"),
                Some(ArgValue::String(StringRef::Inline(f))) if f == marker.to_str().unwrap())
        })
        .collect();
    assert_eq!(opens.len(), ROUNDS, "{opens:?}");
    for e in &opens {
        assert_eq!(e.kind, EventKind::Instant);
        assert_eq!(e.tid, main);
        assert_eq!(e.args.get("dfd"), Some(&ArgValue::Int32(-100)));
        assert_eq!(e.args.get("flags"), Some(&ArgValue::Int32(libc::O_RDONLY)));
    }

    // signal_generate, filtered in the kernel on sig: every field.
    let signals = events(&t, "signal", "signal_generate");
    assert_eq!(signals.len(), ROUNDS, "{signals:?}");
    let s = signals[0];
    assert_eq!(s.args.get("sig"), Some(&ArgValue::Int32(libc::SIGUSR1)));
    assert_eq!(s.args.get("errno"), Some(&ArgValue::Int32(0)));
    assert_eq!(s.args.get("code"), Some(&ArgValue::Int32(0)), "SI_USER");
    assert_eq!(text(s, "comm"), "tp_workload");
    assert_eq!(s.args.get("pid"), Some(&ArgValue::Int32(pid as i32)));
    assert_eq!(s.args.get("group"), Some(&ArgValue::Int32(1)));
    assert_eq!(s.args.get("result"), Some(&ArgValue::Int32(0)), "delivered");
    assert_eq!(s.args.len(), 7, "{:?}", s.args);

    // kmalloc, filtered on the size the workload asked for.
    let allocs = events(&t, "kmem", "kmalloc");
    assert_eq!(allocs.len(), ROUNDS, "{allocs:?}");
    for a in &allocs {
        assert_eq!(a.args.get("bytes_req"), Some(&ArgValue::Uint64(1234)));
        assert!(matches!(a.args.get("bytes_alloc"), Some(ArgValue::Uint64(n)) if *n >= 1234));
        assert!(matches!(a.args.get("ptr"), Some(ArgValue::Pointer(p)) if *p != 0));
        assert!(matches!(a.args.get("call_site"), Some(ArgValue::Pointer(p)) if *p != 0));
        assert!(text(a, "gfp_flags").contains("GFP_KERNEL"), "{:?}", a.args);
    }

    // getpid pairs: one duration per call, the return value from the exit.
    // ROUNDS calls, ROUNDS more for kill's target, one for the ids file.
    let calls = events(&t, "syscalls", "sys_getpid");
    assert_eq!(calls.len(), 2 * ROUNDS + 1, "{calls:?}");
    for c in &calls {
        let EventKind::DurationComplete { end_ts } = c.kind else {
            panic!("not a duration: {c:?}");
        };
        assert!(end_ts >= c.ts);
        assert_eq!(c.tid, main);
        assert_eq!(c.args.get("ret"), Some(&ArgValue::Int64(pid as i64)));
    }

    // The glob selected both softirq ends (and raise); the summary counts each.
    for name in ["irq:softirq_entry", "irq:softirq_exit", "irq:softirq_raise"] {
        assert!(
            stderr.contains(name),
            "{name} not in the summary:\n{stderr}"
        );
    }
    assert!(
        stderr.contains(&format!("{ROUNDS} kmem:kmalloc")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{} sys_getpid", 2 * ROUNDS + 1)),
        "{stderr}"
    );
    assert_checks(&file);
}

#[test]
fn a_filter_on_a_located_string_keeps_exactly_the_events_of_one_thread() {
    require_root();
    let dir = temp_dir("tp-migrate");
    // Every process (the migration threads record the event), one thread's
    // events by a text filter on a `__data_loc` field; a prefix pattern.
    let (_, ids, file) = record(
        &dir,
        &[
            "-c",
            "none",
            "-a",
            "-e",
            "sched:sched_migrate_task if comm == \"tp_migr*\" && !(prio > 120 || dest_cpu < 0)",
        ],
    );
    let t = parse(&file);
    let moves = events(&t, "sched", "sched_migrate_task");
    // Only threads so named (other tests' workloads may run meanwhile).
    assert!(
        moves.iter().all(|m| text(m, "comm") == "tp_migrate"),
        "{moves:?}"
    );
    let migrate = ids["migrate"];
    let moves: Vec<&Event> = moves
        .into_iter()
        .filter(|m| m.args.get("pid") == Some(&ArgValue::Int32(migrate as i32)))
        .collect();
    assert_eq!(moves.len(), ROUNDS, "{moves:?}");
    for m in &moves {
        assert_eq!(m.args.get("prio"), Some(&ArgValue::Int32(120)));
        assert_ne!(m.args.get("orig_cpu"), m.args.get("dest_cpu"));
        // Recorded on the thread that moved it, not the one moved.
        assert_ne!(m.tid, migrate);
    }
    assert_checks(&file);
}

#[test]
fn mistakes_are_refused_before_recording_with_what_was_meant() {
    require_root();
    let dir = temp_dir("tp-errors");
    let out = dir.join("trace.fxt");
    let fail = |args: &[&str]| -> String {
        let o = Command::new(trace_cli())
            .arg("record")
            .args(["-c", "none", "-d", "5", "-o"])
            .arg(&out)
            .args(args)
            .output()
            .unwrap();
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let e = fail(&["-e", "sched:sched_migrate_tsk"]);
    assert!(e.contains("did you mean sched:sched_migrate_task?"), "{e}");
    assert!(!e.contains("recording\n"), "{e}");
    let e = fail(&["-e", "sched:sched_switch if prev_priority < 100"]);
    assert!(
        e.contains("no field `prev_priority`") && e.contains("prev_prio"),
        "{e}"
    );
    let e = fail(&["-e", "sched:sched_switch if prev_comm > \"a\""]);
    assert!(e.contains("only == and !="), "{e}");
    let e = fail(&["-e", "irq:softirq_entry if vec == TIMR"]);
    assert!(e.contains("`TIMR` is not a name of `vec`"), "{e}");

    // What -e can select, with the fields.
    let o = Command::new(trace_cli())
        .args(["events", "sched:sched_migrate_*"])
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(list.starts_with("sched:sched_migrate_task\n"), "{list}");
    assert!(list.contains("comm (__data_loc char[]: text)"), "{list}");
    assert!(list.contains("dest_cpu (int: i32)"), "{list}");
}

#[test]
fn pairs_nest_inside_the_system_calls_recorded_beside_them() {
    require_root();
    let dir = temp_dir("tp-nest");
    // The per-call tracepoints fire just after the raw ones the system call
    // category records: each pair must still lie inside its call's slice,
    // or Perfetto would drop it.
    let (_, ids, file) = record(
        &dir,
        &[
            "-c",
            "kernel:syscall",
            "-e",
            "syscalls:sys_enter_getpid..syscalls:sys_exit_getpid",
        ],
    );
    let t = parse(&file);
    let main = ids["main"];
    let calls: Vec<(u64, u64)> = events(&t, "kernel:syscall", "getpid")
        .into_iter()
        .filter(|e| e.tid == main)
        .map(|e| match e.kind {
            EventKind::DurationComplete { end_ts } => (e.ts, end_ts),
            _ => panic!("{e:?}"),
        })
        .collect();
    let pairs = events(&t, "syscalls", "sys_getpid");
    assert_eq!(pairs.len(), 2 * ROUNDS + 1, "{pairs:?}");
    for p in &pairs {
        let EventKind::DurationComplete { end_ts } = p.kind else {
            panic!("{p:?}");
        };
        assert!(
            calls.iter().any(|&(s, e)| s <= p.ts && end_ts <= e),
            "{p:?} is not inside a getpid call: {calls:?}"
        );
    }
    assert_checks(&file);
}

#[test]
fn the_daemon_resolves_and_records_tracepoints_too() {
    let daemon = tests::Daemon::start("tp-daemon");
    let out = daemon.dir.join("trace.fxt");
    let marker = daemon.dir.join("marker");
    std::fs::write(&marker, b"").unwrap();
    let ids = daemon.dir.join("ids");
    let o = daemon
        .record(
            &out,
            &[
                "-c",
                "none",
                "-e",
                "signal:signal_generate if sig == 10",
                "--",
                env!("CARGO_BIN_EXE_tp_workload"),
                &ROUNDS.to_string(),
                ids.to_str().unwrap(),
                marker.to_str().unwrap(),
            ],
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}\n{}", daemon.log());
    assert!(
        !stderr.contains("runs inside"),
        "through the daemon: {stderr}"
    );
    let t = parse(&out);
    assert_eq!(events(&t, "signal", "signal_generate").len(), ROUNDS);
    // A mistake is the daemon's error, said before recording.
    let o = daemon
        .record(
            &out,
            &["-c", "none", "-e", "signal:signal_generat", "-d", "1"],
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        stderr.contains("did you mean signal:signal_generate?"),
        "{stderr}"
    );
}

/// `-e` with a glob records what the kernel lets it attach and says what
/// it left out (`irq_vectors:irq_work_exit` is refused with EPERM here),
/// where the same tracepoint named exactly fails the recording; and a
/// tracepoint with more fields than an FXT event has arguments (15) keeps
/// every field, the 15th argument holding the rest as text, instead of the
/// session failing.
#[test]
fn globs_leave_out_what_the_kernel_refuses_and_wide_tracepoints_keep_every_field() {
    require_root();
    let dir = temp_dir("tracepoints-wide");
    let out = dir.join("glob.fxt");
    let run = |args: &[&str], out: &Path| {
        Command::new(trace_cli())
            .arg("record")
            .args(args)
            .arg("-o")
            .arg(out)
            .output()
            .unwrap()
    };
    let o = run(&["-c", "none", "-e", "irq_vectors:*", "-d", "1"], &out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("left out") && err.contains("irq_vectors:irq_work_exit"),
        "{err}"
    );
    assert_checks(&out);
    let o = run(
        &["-c", "none", "-e", "irq_vectors:irq_work_exit", "-d", "1"],
        &dir.join("named.fxt"),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("-e irq_vectors:irq_work_exit"), "{err}");

    // ext4:ext4_mballoc_alloc has 20 fields: a new file's blocks.
    let fs = Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&fs.stdout).trim(),
        "ext2/ext3",
        "this test writes to an ext4 file system ({})",
        dir.display()
    );
    let wide = dir.join("wide.fxt");
    let script = format!(
        "dd if=/dev/zero of={0}/data bs=1M count=8 conv=fsync 2>/dev/null; rm {0}/data",
        dir.display()
    );
    let o = Command::new(trace_cli())
        .args([
            "record",
            "-c",
            "none",
            "-e",
            "ext4:ext4_mballoc_alloc",
            "-o",
        ])
        .arg(&wide)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let t = parse(&wide);
    let allocs = events(&t, "ext4", "ext4_mballoc_alloc");
    assert!(!allocs.is_empty(), "{err}");
    for e in allocs {
        assert_eq!(e.args.len(), 15, "{e:?}");
        // The first fields as themselves, the last ones in `more`.
        assert!(e.args.contains_key("ino"), "{e:?}");
        let more = text(e, "more");
        assert!(more.contains("cr=") && more.contains("flags="), "{more}");
    }
    assert_checks(&wide);
    let _ = std::fs::remove_dir_all(&dir);
}
