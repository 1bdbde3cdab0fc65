//! End-to-end: `record --rotate` writes a series of files, each a complete
//! trace that `trace-cli check` passes, together holding every event once.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use tests::{check, parse, require_root, samples, trace_cli};
use trace_common::fxt::ArgValue;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("trace-e2e-rotate-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn rotation_by_size_gives_files_that_each_pass_check_and_hold_every_event_once() {
    require_root();
    let dir = temp_dir("size");
    let socket = dir.join("provider.sock");
    let out = dir.join("trace.fxt");
    let (app, pid, main_tid) =
        tests::start_provider(env!("CARGO_BIN_EXE_provider_app"), &socket, 24.0, 300);
    std::thread::sleep(Duration::from_millis(300));
    let pid_arg = pid.to_string();
    let rec = Command::new(trace_cli())
        .args(["record", "-o"])
        .arg(&out)
        .args([
            "-c",
            "app,kernel:sched,kernel:syscall,kernel:proc",
            "-p",
            &pid_arg,
            "-d",
            "20",
            "--buffering-mode",
            "streaming",
            "--provider-buffer-size",
            "1",
            "--rotate",
            "1M",
        ])
        .env("TRACE_MANAGER_SOCKET", &socket)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&rec.stderr);
    assert!(rec.status.success(), "{stderr}");
    assert!(app.wait_with_output().unwrap().status.success());
    let files = tests::rotated_files(&dir);
    assert!(files.len() >= 4, "{} files: {stderr}", files.len());
    assert!(
        stderr.contains(&format!("trace-cli: {} files: ", files.len())),
        "the summary lists the files: {stderr}"
    );
    assert!(!out.exists(), "no unrotated file");

    let mut ticks: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut calls = 0;
    for (n, file) in files.iter().enumerate() {
        let size = std::fs::metadata(file).unwrap().len();
        // A file is cut before the record that would take it past 1 MiB;
        // what it repeats at its start and the ends of its open slices
        // come on top.
        assert!(
            size <= (1 << 20) + (256 << 10),
            "{}: {size}",
            file.display()
        );
        let (ok, findings) = check(file);
        assert!(ok, "{}: {findings}", file.display());
        let t = parse(file);
        assert!(t.errors.is_empty(), "{}: {:?}", file.display(), t.errors);
        assert!(t.starts_with_magic);
        // Each file names the app's threads and its providers itself.
        assert!(
            t.providers.iter().any(|(_, name)| name == "kernel"),
            "{}",
            file.display()
        );
        if n > 0 {
            assert!(
                t.thread(main_tid).is_some(),
                "{}: the main thread is named",
                file.display()
            );
        }
        for e in &t.events {
            if e.pid == pid && e.category == "app" && e.name == "tick" {
                let Some(ArgValue::Uint64(seq)) = e.args.get("seq") else {
                    panic!("tick without seq: {e:?}");
                };
                ticks.entry(e.tid).or_default().push(*seq);
            }
            if e.pid == pid && e.category == "kernel:syscall" {
                calls += 1;
            }
        }
    }
    assert!(calls > 1000, "{calls} system calls of the app");
    assert_eq!(ticks.len(), 2, "main and worker");
    for (tid, seqs) in &mut ticks {
        let n = seqs.len();
        seqs.sort_unstable();
        seqs.dedup();
        assert_eq!(seqs.len(), n, "thread {tid}: a tick is in two files");
        assert!(n > 10_000, "thread {tid}: {n} ticks");
        assert_eq!(
            seqs[n - 1] - seqs[0] + 1,
            n as u64,
            "thread {tid}: ticks missing"
        );
    }
}

#[test]
fn rotation_by_time_keeps_the_newest_files() {
    require_root();
    let dir = temp_dir("time");
    let out = dir.join("trace.fxt");
    let rec = Command::new(trace_cli())
        .args(["record", "-o"])
        .arg(&out)
        .args([
            "-c",
            "kernel:sched,kernel:syscall",
            "-d",
            "5.5",
            "--rotate",
            "1s",
            "--max-files",
            "3",
        ])
        .env("TRACE_MANAGER_SOCKET", dir.join("none.sock"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&rec.stderr);
    assert!(rec.status.success(), "{stderr}");
    let files = tests::rotated_files(&dir);
    assert_eq!(files.len(), 3, "{files:?} {stderr}");
    assert!(stderr.contains("older deleted"), "{stderr}");
    // The newest are kept: the first file is gone.
    assert!(!dir.join("trace-0001.fxt").exists());
    let mut last_end = 0;
    for file in &files {
        let (ok, findings) = check(file);
        assert!(ok, "{}: {findings}", file.display());
        let t = parse(file);
        assert!(!t.switches.is_empty(), "{}", file.display());
        // In time order, one after the other.
        let first = t.switches.iter().map(|s| s.ts).min().unwrap();
        assert!(first >= last_end, "{}", file.display());
        last_end = t.switches.iter().map(|s| s.ts).max().unwrap();
    }
    // --max-files without --rotate, and -o - with it, are refused.
    let refused = tests::record_fails(&["--max-files", "2", "-d", "1"], &out);
    assert!(refused.contains("--rotate"), "{refused}");
}

#[test]
fn stack_samples_resolve_in_every_file() {
    require_root();
    let dir = temp_dir("stacks");
    let out = dir.join("trace.fxt");
    let rec = Command::new(trace_cli())
        .args(["record", "-o"])
        .arg(&out)
        .args([
            "-c",
            "kernel:profile,kernel:sched",
            "--sample-hz",
            "999",
            "--rotate",
            "16K",
            "--",
            env!("CARGO_BIN_EXE_stack_spin"),
            "--chain-ms",
            "1500",
            "--direct-ms",
            "500",
        ])
        .env("TRACE_MANAGER_SOCKET", dir.join("none.sock"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&rec.stderr);
    assert!(rec.status.success(), "{stderr}");
    let files = tests::rotated_files(&dir);
    assert!(files.len() >= 3, "{files:?} {stderr}");
    let mut with_chain = 0;
    let mut total = 0;
    for file in &files {
        let (ok, findings) = check(file);
        assert!(ok, "{}: {findings}", file.display());
        let found = samples(file);
        total += found.len();
        // The interned frames of earlier files are given again: later
        // files' samples are named all the way down.
        with_chain += found
            .iter()
            .filter(|s| {
                let names: Vec<&str> = s.frames.iter().map(|f| f.function.as_str()).collect();
                names.windows(3).any(|w| {
                    w[0].ends_with("spin_c") && w[1].ends_with("spin_b") && w[2].ends_with("spin_a")
                })
            })
            .count();
        if file != &files[0] && !found.is_empty() {
            assert!(
                found.iter().any(|s| !s.frames.is_empty()),
                "{}",
                file.display()
            );
        }
    }
    assert!(total > 1000, "{total} samples");
    assert!(with_chain * 2 > total, "{with_chain} of {total} in spin_c");
}

/// Under a load a plain recording takes, `--rotate` and `--pre` do too: a
/// `getppid` storm on every CPU for 6 s, recorded system-wide. The reader
/// of the manager's output (the thread cutting files) is slower than the
/// kernel; the manager then leaves the kernel unread until it catches up
/// (the kernel counts the drops) instead of giving up on the recording.
/// Exit status 0, every file passes `check`.
#[test]
fn rotation_and_pre_hold_under_a_storm() {
    require_root();
    let dir = temp_dir("storm");
    let socket = dir.join("manager.sock");
    for (name, extra) in [
        ("trace.fxt", &["--rotate", "16M"][..]),
        (
            "pre.fxt",
            &["--trigger", "syscall:fsync>60s", "--pre", "2"][..],
        ),
    ] {
        let storm = Command::new(env!("CARGO_BIN_EXE_syscall_rate"))
            .args(["0", "8"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let storm = tests::Killed(vec![storm]);
        let out = dir.join(name);
        let rec = Command::new(trace_cli())
            .args([
                "record",
                "-a",
                "-c",
                "kernel:sched,kernel:syscall",
                "-d",
                "6",
            ])
            .args(extra)
            .arg("-o")
            .arg(&out)
            .env("TRACE_MANAGER_SOCKET", &socket)
            .output()
            .unwrap();
        drop(storm);
        let stderr = String::from_utf8_lossy(&rec.stderr);
        assert!(rec.status.success(), "{extra:?}: {stderr}");
        let files: Vec<PathBuf> = if extra[0] == "--rotate" {
            tests::rotated_files(&dir)
        } else {
            vec![out]
        };
        assert!(!files.is_empty(), "{stderr}");
        for f in files {
            let (ok, findings) = check(&f);
            assert!(ok, "{}: {findings}", f.display());
        }
    }
}
