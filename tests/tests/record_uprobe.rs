//! End-to-end: `--uprobe` with `trace-cli record` and real uprobes, as root:
//! a Rust function (named demangled) and a C function of a test program
//! called with known nesting become exactly that many durations, nested as
//! they ran, on the calling thread; probes that cannot be placed fail
//! before recording.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use tests::{Event, parse, record_fails, require_root, trace_cli, wait_for_recording};
use trace_common::fxt::EventKind;

fn target_bin() -> &'static str {
    env!("CARGO_BIN_EXE_uprobe_target")
}

fn tmp(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

/// `(start, end)` of the complete durations named `name` on thread `tid`.
fn spans(events: &[Event], name: &str, tid: u64) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = events
        .iter()
        .filter(|e| e.category == "uprobe" && e.name == name && e.tid == tid)
        .filter_map(|e| match e.kind {
            EventKind::DurationComplete { end_ts } => Some((e.ts, end_ts)),
            _ => None,
        })
        .collect();
    v.sort();
    v
}

/// How many of `spans` contain each one: its nesting depth.
fn depths(spans: &[(u64, u64)]) -> Vec<usize> {
    spans
        .iter()
        .map(|&(s, e)| {
            spans
                .iter()
                .filter(|&&(s2, e2)| (s2, e2) != (s, e) && s2 <= s && e <= e2)
                .count()
        })
        .collect()
}

#[test]
fn probed_functions_become_nested_durations_on_the_calling_thread() {
    require_root();
    let tests::Target {
        child: mut target,
        mut stdin,
        mut stdout,
        pid,
    } = tests::start_target(std::path::Path::new(target_bin()));
    let mut line = String::new();

    let file = tmp("uprobe.fxt");
    let mut recorder = Command::new(trace_cli())
        .args(["record", "-c", "kernel:proc", "-d", "2", "-p"])
        .arg(pid.to_string())
        .args([
            "--uprobe",
            "uprobe_target::recurse",
            "--uprobe",
            "c_recurse",
        ])
        .arg("-o")
        .arg(&file)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(recorder.stderr.take().unwrap());
    wait_for_recording(&mut err);
    // 5 top-level Rust calls 4 deep, 4 top-level C calls 3 deep.
    stdin.write_all(b"5 4\n").unwrap();
    stdin.flush().unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "done 32");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(recorder.wait().unwrap().success(), "{rest}");
    // Detached: the program goes on unharmed, with the same results.
    stdin.write_all(b"5 4\n").unwrap();
    stdin.flush().unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "done 32");
    drop(stdin);
    assert!(target.wait().unwrap().success());

    let trace = parse(&file);
    assert!(trace.errors.is_empty(), "{:?}", trace.errors);
    let rust = spans(&trace.events, "uprobe_target::recurse", pid);
    let c = spans(&trace.events, "c_recurse", pid);
    assert_eq!(rust.len(), 20, "{rust:?}");
    assert_eq!(c.len(), 12, "{c:?}");
    // Each level of the recursion as often as there were top-level calls.
    let mut d = depths(&rust);
    d.sort();
    assert_eq!(d, [[0; 5], [1; 5], [2; 5], [3; 5]].concat());
    let mut d = depths(&c);
    d.sort();
    assert_eq!(d, [[0; 4], [1; 4], [2; 4]].concat());
    // Nothing else was probed.
    assert_eq!(
        trace
            .events
            .iter()
            .filter(|e| e.category == "uprobe")
            .count(),
        32
    );
}

#[test]
fn probes_that_cannot_be_placed_fail_before_recording() {
    require_root();
    let out_file = tmp("never.fxt");
    let run = |probe: &str| {
        record_fails(
            &["-c", "kernel:proc", "-d", "1", "--uprobe", probe],
            &out_file,
        )
    };
    let bin = target_bin();
    let err = run(&format!("{bin}:no_such_function_here"));
    assert!(err.contains("no function `no_such_function_here`"), "{err}");
    let err = run("/no/such/program:main");
    assert!(err.contains("cannot read"), "{err}");
    let err = run("c_recurse");
    assert!(err.contains("needs -p"), "{err}");
    // A stripped copy has no symbol table: the error says so.
    let stripped = tmp("uprobe_target.stripped");
    tests::copy_program(bin, &stripped);
    let status = Command::new("strip").arg(&stripped).status();
    if status.is_ok_and(|s| s.success()) {
        let err = run(&format!("{}:c_recurse", stripped.display()));
        assert!(err.contains("stripped"), "{err}");
    } else {
        eprintln!("no `strip` here: the stripped case was not checked");
    }
}

#[test]
fn each_process_gets_the_probes_of_its_own_program() {
    require_root();
    // Two copies of the program: the same function in two different files.
    let copy = tmp("uprobe_target_copy");
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

    let file = tmp("uprobe_two.fxt");
    let mut recorder = Command::new(trace_cli())
        .args(["record", "-c", "kernel:proc", "-d", "2"])
        .args(["-p", &a_pid.to_string(), "-p", &b_pid.to_string()])
        .args(["--uprobe", "c_recurse"])
        .arg("-o")
        .arg(&file)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(recorder.stderr.take().unwrap());
    wait_for_recording(&mut err);
    let mut line = String::new();
    // One top-level C call (3 nested) in A, two in B.
    for (stdin, stdout, n) in [(&mut a_in, &mut a_out, 1), (&mut b_in, &mut b_out, 2)] {
        writeln!(stdin, "0 {n}").unwrap();
        stdin.flush().unwrap();
        line.clear();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), format!("done {}", 3 * n));
    }
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(recorder.wait().unwrap().success(), "{rest}");
    drop((a_in, b_in));
    assert!(a.wait().unwrap().success() && b.wait().unwrap().success());

    let trace = parse(&file);
    assert!(trace.errors.is_empty(), "{:?}", trace.errors);
    assert_eq!(spans(&trace.events, "c_recurse", a_pid).len(), 3);
    assert_eq!(spans(&trace.events, "c_recurse", b_pid).len(), 6);
}
