//! End-to-end: whatever is selected, every thread in a recording is owned
//! by its process and named, as Perfetto's importer reads it. Every kernel
//! category alone and in common pairs is recorded under a workload that
//! starts, renames and ends processes and threads during the recording
//! (`lifecycle_workload`), for the whole system (`-a`), for a command
//! (`-- COMMAND`) and for a running process (`-p`); `trace-cli check` must
//! find no violation and no thread unnamed or named only after its first
//! record, and the processes must carry the names they executed.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tests::{parse, require_root, trace_cli, wait_for_recording};
use trace_common::category::KERNEL_CATEGORIES;

/// Common pairs.
const PAIRS: &[&str] = &[
    "kernel:syscall,kernel:sched",
    "kernel:syscall,kernel:proc",
    "kernel:vm,kernel:syscall",
    "kernel:sched,kernel:irq",
];

fn workload() -> &'static str {
    env!("CARGO_BIN_EXE_lifecycle_workload")
}

fn temp_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("trace-owned-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// What `check --json` says of `file`: violations and the warnings about
/// names, as `kind: count` lines (empty when clean).
fn ownership_findings(file: &Path) -> Vec<String> {
    let out = Command::new(trace_cli())
        .args(["check", "--json", "--examples", "3"])
        .arg(file)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    let mut found = Vec::new();
    for list in ["violations", "warnings"] {
        for f in json[list].as_array().unwrap() {
            let kind = f["kind"].as_str().unwrap();
            let about_names = matches!(
                kind,
                "thread_without_name" | "thread_named_after_its_records"
            );
            if list == "violations" || about_names {
                found.push(format!("{kind}: {} ({})", f["count"], f["examples"]));
            }
        }
    }
    found
}

/// The names of the processes and threads that the events and switches
/// of `file` happen on.
fn names_in_use(file: &Path) -> (HashSet<String>, HashSet<String>) {
    let t = parse(file);
    let (mut processes, mut threads) = (HashSet::new(), HashSet::new());
    let mut name_thread = |tid: u64| {
        if let Some((pid, name)) = t.thread(tid) {
            threads.insert(name.clone());
            if let Some(p) = t.process_names.get(pid).and_then(|v| v.last()) {
                processes.insert(p.clone());
            }
        }
    };
    for e in &t.events {
        name_thread(e.tid);
    }
    for s in &t.switches {
        name_thread(s.in_tid);
        name_thread(s.out_tid);
    }
    (processes, threads)
}

/// Checks one recording of the workload with `categories`; `label` says
/// which.
fn assert_owned(file: &Path, categories: &str, label: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for f in ownership_findings(file) {
        problems.push(format!("{label} -c {categories}: {f}"));
    }
    // The workload's system calls and scheduling happen on processes named
    // by what they executed and on threads named as they renamed
    // themselves, whether or not kernel:proc is recorded.
    if categories.contains("kernel:syscall") {
        let (processes, threads) = names_in_use(file);
        for want in ["lifecycle_workl", "ls", "find", "dd"] {
            if !processes.contains(want) {
                problems.push(format!(
                    "{label} -c {categories}: no events in a process named {want:?}: {processes:?}"
                ));
            }
        }
        if !threads.contains("renamed-worker") {
            problems.push(format!(
                "{label} -c {categories}: no events on the renamed thread: {threads:?}"
            ));
        }
    }
    problems
}

/// `trace-cli record ARGS -c CATEGORIES -o FILE -- lifecycle_workload`.
fn record_command(extra: &[&str], categories: &str, file: &Path) {
    let out = Command::new(trace_cli())
        .arg("record")
        .args(extra)
        .args(["-c", categories, "-o"])
        .arg(file)
        .arg("--")
        .arg(workload())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "record -c {categories} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn each_selection(label: &str, mut record: impl FnMut(&str, &Path)) {
    require_root();
    let mut problems = Vec::new();
    // Every kernel category alone, then the pairs.
    let singles = KERNEL_CATEGORIES.iter().map(|(name, _)| *name);
    for (i, categories) in singles.chain(PAIRS.iter().copied()).enumerate() {
        let file = temp_path(&format!("{label}-{i}.fxt"));
        record(categories, &file);
        problems.extend(assert_owned(&file, categories, label));
        let _ = std::fs::remove_file(&file);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_thread_is_owned_and_named_recording_the_whole_system() {
    each_selection("-a", |categories, file| {
        record_command(&["-a"], categories, file);
    });
}

#[test]
fn every_thread_is_owned_and_named_recording_a_command() {
    each_selection("--", |categories, file| {
        record_command(&[], categories, file);
    });
}

#[test]
fn every_thread_is_owned_and_named_recording_a_running_process() {
    each_selection("-p", |categories, file| {
        let mut target = Command::new(workload())
            .arg("--wait")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(target.stdout.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let pid = first.strip_prefix("pid=").unwrap().to_owned();
        let mut rec = Command::new(trace_cli())
            .args(["record", "-p", &pid, "-c", categories, "-d", "30", "-o"])
            .arg(file)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(rec.stderr.take().unwrap());
        wait_for_recording(&mut stderr);
        target.stdin.take().unwrap().write_all(b"go\n").unwrap();
        assert_eq!(lines.next().unwrap().unwrap(), "done");
        target.wait().unwrap();
        // Ctrl-C ends the recording with a complete file.
        // SAFETY: kill with a child's pid and a valid signal.
        unsafe {
            libc::kill(rec.id() as i32, libc::SIGINT);
        }
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
        assert!(
            rec.wait().unwrap().success(),
            "record -p -c {categories}: {rest}"
        );
    });
}

/// The circular mode keeps only the newest events: the processes and
/// threads in them are named as they were, although the events that
/// created them were forgotten.
#[test]
fn every_thread_is_owned_and_named_in_the_circular_mode() {
    require_root();
    let mut problems = Vec::new();
    for (i, categories) in ["kernel:syscall", "kernel:sched,kernel:vm"]
        .iter()
        .enumerate()
    {
        let file = temp_path(&format!("circular-{i}.fxt"));
        record_command(
            &["--kernel-buffering-mode", "circular", "-b", "1"],
            categories,
            &file,
        );
        for f in ownership_findings(&file) {
            problems.push(format!("circular -c {categories}: {f}"));
        }
        let _ = std::fs::remove_file(&file);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
