//! End-to-end: `--usdt` with `trace-cli record` and real uprobes, as root.
//! A running program's USDT probes (Rust `probe` crate and C `sys/sdt.h`:
//! register, memory and constant arguments of every size, semaphores)
//! become exactly one instant per pass with the right arguments; probes
//! behind a semaphore fire only while recorded; a command started by the
//! recorder is probed from its start; probes that cannot be placed fail
//! before recording.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use tests::{Event, parse, record_fails, require_root, trace_cli, wait_for_recording};
use trace_common::fxt::{ArgValue, EventKind, StringRef};

fn target_bin() -> &'static str {
    env!("CARGO_BIN_EXE_usdt_target")
}

fn tmp(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

/// The `usdt` instants named `name`, in time order.
fn hits<'a>(events: &'a [Event], name: &str) -> Vec<&'a Event> {
    let mut v: Vec<&Event> = events
        .iter()
        .filter(|e| e.category == "usdt" && e.name == name)
        .collect();
    v.sort_by_key(|e| e.ts);
    v
}

/// Argument `key` of `e` as a signed number (Int64 or Uint64).
fn int(e: &Event, key: &str) -> i128 {
    match e.args.get(key) {
        Some(ArgValue::Int64(v)) => i128::from(*v),
        Some(ArgValue::Uint64(v)) => i128::from(*v),
        other => panic!("{} {key}: {other:?} in {:?}", e.name, e.args),
    }
}

/// Sends `n` to the target and returns its `done ...` line.
fn pass(stdin: &mut impl Write, stdout: &mut impl BufRead, n: u32) -> String {
    writeln!(stdin, "{n}").unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    line.trim().to_owned()
}

#[test]
fn usdt_probes_of_a_running_program_carry_their_arguments() {
    require_root();
    let tests::Target {
        child: mut target,
        mut stdin,
        mut stdout,
        pid,
    } = tests::start_target(std::path::Path::new(target_bin()));
    // Untraced, the guarded probes are off.
    assert_eq!(pass(&mut stdin, &mut stdout, 3), "done lazy=0 guarded=0");

    let file = tmp("usdt.fxt");
    let mut recorder = Command::new(trace_cli())
        .args(["record", "-c", "kernel:proc", "-d", "2", "-p"])
        .arg(pid.to_string())
        .args(["--usdt", "trace_rs:*", "--usdt", "trace_c:point"])
        .args(["--usdt", "trace_c:constant", "--usdt", "trace_c:guarded"])
        // The string its first argument points at.
        .args(["--usdt", "trace_c:greet(str,_)"])
        .arg("-o")
        .arg(&file)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(recorder.stderr.take().unwrap());
    wait_for_recording(&mut err);
    // Traced: the kernel raised every semaphore.
    assert_eq!(pass(&mut stdin, &mut stdout, 7), "done lazy=7 guarded=7");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(recorder.wait().unwrap().success(), "{rest}");
    assert!(rest.contains("42 USDT events"), "{rest}");
    // Detached: the semaphores are down again and the program runs on.
    assert_eq!(pass(&mut stdin, &mut stdout, 2), "done lazy=0 guarded=0");
    drop(stdin);
    assert!(target.wait().unwrap().success());

    let trace = parse(&file);
    assert!(trace.errors.is_empty(), "{:?}", trace.errors);
    let mut per_name: HashMap<&str, usize> = HashMap::new();
    for e in trace.events.iter().filter(|e| e.category == "usdt") {
        assert_eq!((e.pid, e.tid), (pid, pid), "{e:?}");
        assert!(matches!(e.kind, EventKind::Instant), "{e:?}");
        *per_name.entry(e.name.as_str()).or_default() += 1;
    }
    let expected: HashMap<&str, usize> = [
        ("trace_rs:tick", 7),
        ("trace_rs:lazy", 7),
        ("trace_c:point", 7),
        ("trace_c:constant", 7),
        ("trace_c:guarded", 7),
        ("trace_c:greet", 7),
    ]
    .into();
    assert_eq!(per_name, expected);

    for (i, e) in hits(&trace.events, "trace_rs:tick").iter().enumerate() {
        let i = i as i128;
        assert_eq!((int(e, "arg0"), int(e, "arg1")), (i, -3 * i), "{e:?}");
    }
    for (i, e) in hits(&trace.events, "trace_rs:lazy").iter().enumerate() {
        assert_eq!(int(e, "arg0"), i as i128, "{e:?}");
    }
    for (i, e) in hits(&trace.events, "trace_c:point").iter().enumerate() {
        let i = i as i128;
        // int, short (signed, from memory), long long, unsigned char.
        assert!(matches!(e.args.get("arg1"), Some(ArgValue::Int64(_))));
        assert!(matches!(e.args.get("arg3"), Some(ArgValue::Uint64(_))));
        assert_eq!(
            (
                int(e, "arg0"),
                int(e, "arg1"),
                int(e, "arg2"),
                int(e, "arg3")
            ),
            (i, -i, -1_000_000_000_000 * i, 200 + i),
            "{e:?}"
        );
        assert!(!e.args.contains_key("unreadable_args"), "{e:?}");
    }
    for (i, e) in hits(&trace.events, "trace_c:greet").iter().enumerate() {
        assert_eq!(
            e.args.get("arg0"),
            Some(&ArgValue::String(StringRef::Inline(
                format!("hello {i}").into()
            ))),
            "{e:?}"
        );
        assert_eq!(int(e, "arg1"), i as i128, "{e:?}");
    }
    for e in hits(&trace.events, "trace_c:constant") {
        assert_eq!(int(e, "arg0"), 42, "{e:?}");
    }
    for (i, e) in hits(&trace.events, "trace_c:guarded").iter().enumerate() {
        assert_eq!(int(e, "arg0"), i as i128, "{e:?}");
    }
}

#[test]
fn a_command_is_probed_from_its_start() {
    require_root();
    let file = tmp("usdt_command.fxt");
    // Its own copy of the program: probes placed for every process raise
    // the semaphores of every process running that file, and other tests
    // run the original meanwhile.
    let copy = tmp("usdt_target_command");
    let _ = std::fs::remove_file(&copy);
    tests::copy_program(target_bin(), &copy);
    let bin = copy.to_str().unwrap();
    let out = Command::new(trace_cli())
        .args(["record", "-c", "kernel:proc", "--usdt"])
        .arg(format!("{bin}:trace_c:guarded"))
        // The same site again: placed once, so recorded once per pass.
        .arg("--usdt")
        .arg(format!("{bin}:trace_c:guard*"))
        .arg("--usdt")
        .arg(format!("{bin}:trace_rs:la*"))
        .arg("-o")
        .arg(&file)
        .args(["--", bin, "--once", "5"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "done lazy=5 guarded=5"
    );
    let trace = parse(&file);
    assert!(trace.errors.is_empty(), "{:?}", trace.errors);
    assert_eq!(hits(&trace.events, "trace_c:guarded").len(), 5);
    assert_eq!(hits(&trace.events, "trace_rs:lazy").len(), 5);
    assert_eq!(
        trace.events.iter().filter(|e| e.category == "usdt").count(),
        10
    );
    // The command's exec is in the same file, before its probes.
    let exec = trace
        .events
        .iter()
        .find(|e| {
            e.name == "exec"
                && e.args
                    .values()
                    .any(|v| format!("{v:?}").contains("usdt_target"))
        })
        .expect("the command's exec");
    assert!(hits(&trace.events, "trace_c:guarded")[0].ts > exec.ts);
}

#[test]
fn usdt_probes_that_cannot_be_placed_fail_before_recording() {
    require_root();
    let out_file = tmp("usdt_never.fxt");
    let run = |probe: &str| {
        record_fails(
            &["-c", "kernel:proc", "-d", "1", "--usdt", probe],
            &out_file,
        )
    };
    let bin = target_bin();
    // An unknown probe: the error lists the ones there are.
    let err = run(&format!("{bin}:trace_c:nope"));
    assert!(err.contains("no probe trace_c:nope"), "{err}");
    assert!(err.contains("trace_c:constant"), "{err}");
    assert!(err.contains("trace_rs:tick"), "{err}");
    // A program without probes.
    let err = run(&format!("{}:a:b", trace_cli().display()));
    assert!(err.contains("no .note.stapsdt"), "{err}");
    let err = run("/no/such/program:a:b");
    assert!(err.contains("cannot read"), "{err}");
    let err = run("trace_c:constant");
    assert!(err.contains("needs -p"), "{err}");
    // Argument types that do not fit the probe.
    let err = run(&format!("{bin}:trace_c:constant(str,str)"));
    assert!(err.contains("2 argument types given"), "{err}");
    let err = run(&format!("{bin}:trace_c:constant(text)"));
    assert!(err.contains("unknown argument type"), "{err}");
}

#[test]
fn each_process_gets_the_probes_of_its_own_program() {
    require_root();
    // Two copies of the program: the same probes in two different files.
    let copy = tmp("usdt_target_copy");
    let _ = std::fs::remove_file(&copy);
    tests::copy_program(target_bin(), &copy);
    let tests::Target {
        child: mut a,
        stdin: mut a_in,
        stdout: mut a_out,
        pid: a_pid,
    } = tests::start_target(std::path::Path::new(target_bin()));
    let tests::Target {
        child: mut b,
        stdin: mut b_in,
        stdout: mut b_out,
        pid: b_pid,
    } = tests::start_target(&copy);

    let file = tmp("usdt_two.fxt");
    let mut recorder = Command::new(trace_cli())
        .args(["record", "-c", "kernel:proc", "-d", "2"])
        .args(["-p", &a_pid.to_string(), "-p", &b_pid.to_string()])
        .args(["--usdt", "trace_c:constant"])
        .arg("-o")
        .arg(&file)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(recorder.stderr.take().unwrap());
    wait_for_recording(&mut err);
    assert_eq!(pass(&mut a_in, &mut a_out, 3), "done lazy=0 guarded=0");
    assert_eq!(pass(&mut b_in, &mut b_out, 4), "done lazy=0 guarded=0");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(recorder.wait().unwrap().success(), "{rest}");
    drop((a_in, b_in));
    assert!(a.wait().unwrap().success() && b.wait().unwrap().success());

    let trace = parse(&file);
    assert!(trace.errors.is_empty(), "{:?}", trace.errors);
    let count = |pid: u64| {
        hits(&trace.events, "trace_c:constant")
            .iter()
            .filter(|e| e.pid == pid)
            .count()
    };
    assert_eq!((count(a_pid), count(b_pid)), (3, 4));
}
