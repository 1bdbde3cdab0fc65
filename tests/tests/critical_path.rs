//! `trace-cli report --critical-path` on real programs recorded with real
//! eBPF, its figures against what the programs measured:
//! - `lock_holder`: a `request` span waiting on a `std::sync::Mutex` held
//!   by a thread that writes 32 MiB and `fsync`s: the span's time is the
//!   futex wait, woken by the holder, whose own time over it is the write
//!   and the `fsync`, down to the block requests, each within 10% of the
//!   program's own clock.
//! - `preempted`: a thread pinned to a CPU with two spinning threads: its
//!   running time is its CPU time, the rest is runnable, behind the two.
//! - `mmap_storm`: four threads mapping and unmapping memory contend on
//!   their process's `mmap_lock`: `kernel:lock` writes the waits, named
//!   `rwsem …`, and the critical path names waits by them.
//!
//! Each recording passes `trace-cli check`.

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use tests::{no_ring_drops, record_checked, require_root, temp_dir, trace_cli, workload::numbers};

/// `trace-cli record ARGS -o DIR/trace.fxt -- COMMAND`, checked
/// ([`tests::record_checked`]): the file and the command's last line. A
/// recording that lost events to full ring buffers (a machine busy with
/// more than the test: `-a` records all of it) is made again, twice at
/// most: the figures compared need every wake-up and call.
fn record(dir: &Path, args: &[&str], command: &[&str]) -> (std::path::PathBuf, String) {
    let file = dir.join("trace.fxt");
    let mut attempts = 0;
    loop {
        attempts += 1;
        let output = record_checked(&file, args, command);
        let summary = String::from_utf8_lossy(&output.stderr);
        if attempts < 3 && !no_ring_drops(&summary) {
            eprintln!("the recording lost events, recording again:\n{summary}");
            continue;
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        return (file, stdout.lines().last().unwrap_or_default().to_owned());
    }
}

/// `trace-cli report --critical-path TARGET --json ARGS FILE`, parsed.
fn critical_path(file: &Path, target: &str, args: &[&str]) -> Value {
    let mut all = vec!["--critical-path", target];
    all.extend_from_slice(args);
    tests::report_json(&all, &[file])
}

/// The same as text.
fn critical_path_text(file: &Path, target: &str, args: &[&str]) -> String {
    let out = Command::new(trace_cli())
        .args(["report", "--critical-path", target])
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether `got` lies within 10% of `want`.
fn near(got: u64, want: u64) -> bool {
    got.abs_diff(want) * 10 <= want
}

/// The share named `name` of `shares`, ns.
fn share(shares: &Value, name: &str) -> u64 {
    shares
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .and_then(|s| s["ns"].as_u64())
        .unwrap_or(0)
}

/// Every wait below `t`, depth first.
fn all_waits(t: &Value, out: &mut Vec<Value>) {
    for w in t["waits"].as_array().unwrap() {
        out.push(w.clone());
        if !w["waker"].is_null() {
            all_waits(&w["waker"], out);
        }
    }
}

const CATEGORIES: &str = "kernel:sched,kernel:syscall,kernel:block,kernel:irq,kernel:offcpu,app";

#[test]
fn a_wait_on_a_mutex_is_followed_to_the_holders_write_fsync_and_block_requests() {
    require_root();
    let dir = temp_dir("critical-lock");
    let (file, stdout) = record(
        &dir,
        &["-a", "-c", CATEGORIES],
        &[env!("CARGO_BIN_EXE_lock_holder"), dir.to_str().unwrap()],
    );
    let m = numbers(&stdout);
    let p = critical_path(&file, "request", &["--min-wait-us", "200"]);
    let t = &p["target"];
    assert_eq!(t["tid"], m["requester"], "{p}");
    assert!(
        near(t["dur"].as_u64().unwrap(), m["request_ns"]),
        "{p}\n{stdout}"
    );
    let a = &p["path"];
    // Almost all of the span is the wait for the lock, in a futex.
    let wait = &a["waits"][0];
    assert!(
        wait["reason"].as_str().unwrap().starts_with("futex 0x"),
        "{wait}"
    );
    assert!(
        near(wait["ns"].as_u64().unwrap(), m["wait_ns"]),
        "{wait}\n{stdout}"
    );
    assert_eq!(wait["waker_tid"], m["holder"], "{wait}");
    assert_eq!(wait["syscall"], "futex");
    assert!(
        wait["stack"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f.as_str().unwrap().contains("lock_holder::main")),
        "{wait}"
    );
    // The holder's time over it: its write and its fsync, as it timed them.
    let b = &wait["waker"];
    assert_eq!(b["tid"], m["holder"]);
    assert_eq!(b["thread"], "holder");
    assert!(
        near(share(&b["syscalls"], "write"), m["write_ns"]),
        "{b}\n{stdout}"
    );
    assert!(
        near(share(&b["syscalls"], "fsync"), m["fsync_ns"]),
        "{b}\n{stdout}"
    );
    assert!(share(&b["blocked_in"], "fsync") > 0, "{b}");
    // Its fsync waited for block requests on the disk, its own or a
    // writeback worker's, woken by their completions.
    let mut waits = Vec::new();
    all_waits(b, &mut waits);
    assert!(
        waits
            .iter()
            .any(|w| w["requests"]["count"].as_u64() > Some(0)
                && w["requests"]["bytes"].as_u64() > Some(0)),
        "no wait for block requests under the holder: {b}"
    );
    let text = critical_path_text(&file, "request", &["--min-wait-us", "200"]);
    assert!(text.contains("woken by holder ("), "{text}");
    assert!(text.contains("block I/O:"), "{text}");
    // The same in SQL: the documented critical-path query, its target the
    // span, finds the wait in the futex call, woken by the holder in its
    // own futex call, and below it the holder blocked in its fsync.
    let rows = tests::query(&file, &documented_critical_path("slices", "request"));
    let first = &rows[0];
    assert_eq!(first["depth"], 0, "{rows:#?}");
    assert_eq!(first["tid"], m["requester"], "{rows:#?}");
    assert_eq!(first["in_call"], "futex", "{rows:#?}");
    assert_eq!(first["woken_by"], "holder", "{rows:#?}");
    assert_eq!(first["waker_in"], "futex", "{rows:#?}");
    let overlap = (first["overlap_ms"].as_f64().unwrap() * 1e6) as u64;
    assert!(near(overlap, m["wait_ns"]), "{rows:#?}\n{stdout}");
    assert!(
        rows.iter()
            .any(|r| r["depth"] == 1 && r["tid"] == m["holder"] && r["in_call"] == "fsync"),
        "{rows:#?}"
    );
}

/// The critical-path example of docs/SQL.md, its target the longest slice
/// named `name` of `table` instead of the longest `futex` call.
fn documented_critical_path(table: &str, name: &str) -> String {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/SQL.md")).unwrap();
    let at = doc
        .find("WITH RECURSIVE")
        .expect("the critical-path example");
    let sql = &doc[at..at + doc[at..].find(';').unwrap()];
    let target = "FROM syscalls\n  WHERE name = 'futex'";
    assert!(sql.contains(target), "{sql}");
    sql.replace(target, &format!("FROM {table} WHERE name = '{name}'"))
}

#[test]
fn a_preempted_thread_is_runnable_behind_the_threads_that_held_its_cpu() {
    require_root();
    let dir = temp_dir("critical-preempted");
    let (file, stdout) = record(
        &dir,
        &["-c", "kernel:sched,app"],
        &[env!("CARGO_BIN_EXE_preempted")],
    );
    let m = numbers(&stdout);
    let p = critical_path(&file, "work", &[]);
    assert_eq!(p["target"]["tid"], m["victim"], "{p}");
    let v = &p["path"];
    let (running, runnable) = (
        v["running_ns"].as_u64().unwrap(),
        v["runnable_ns"].as_u64().unwrap(),
    );
    assert!(near(running, m["cpu_ns"]), "running {running}: {stdout}");
    assert!(
        near(runnable, m["wall_ns"] - m["cpu_ns"]),
        "runnable {runnable}: {stdout}"
    );
    // Two spinning threads shared the CPU with it: each held it for about
    // as long as it ran.
    let behind: Vec<&str> = v["runnable_behind"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(behind[0].starts_with("hog-"), "{behind:?}");
    assert!(behind[1].starts_with("hog-"), "{behind:?}");
    let hogs = v["runnable_behind"][0]["ns"].as_u64().unwrap()
        + v["runnable_behind"][1]["ns"].as_u64().unwrap();
    // Other work of a busy machine that took the CPU is outside the
    // recording (filtered by process): named as such, not as the hogs.
    let outside: u64 = v["runnable_behind"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("tasks outside"))
        .map(|s| s["ns"].as_u64().unwrap())
        .sum();
    assert!(hogs * 10 >= (runnable - outside) * 9, "{v}");
    // In SQL: the victim's preemptions, by the thread that took its CPU,
    // add up to the same runnable time, nearly all behind the hogs (a task
    // outside the recording is written as idle).
    let rows = tests::query(
        &file,
        &format!(
            "SELECT coalesce(t.name, 'idle') AS by, sum(w.dur) AS ns FROM waits w \
             LEFT JOIN threads t ON t.trace_id = w.trace_id AND t.tid = w.next_tid \
             WHERE w.tid = {} AND w.state = 'R' GROUP BY 1 ORDER BY ns DESC",
            m["victim"]
        ),
    );
    let total: u64 = rows.iter().map(|r| r["ns"].as_u64().unwrap()).sum();
    let by_hogs: u64 = rows
        .iter()
        .filter(|r| r["by"].as_str().unwrap().starts_with("hog-"))
        .map(|r| r["ns"].as_u64().unwrap())
        .sum();
    let hidden: u64 = rows
        .iter()
        .filter(|r| r["by"] == "idle")
        .map(|r| r["ns"].as_u64().unwrap())
        .sum();
    assert!(near(total, runnable), "{rows:?} vs {runnable}");
    assert!(by_hogs * 10 >= (total - hidden) * 9, "{rows:?}");
}

#[test]
fn threads_contending_on_a_kernel_lock_wait_in_named_lock_waits() {
    require_root();
    let dir = temp_dir("critical-storm");
    let (file, stdout) = record(
        &dir,
        &["-c", "kernel:sched,kernel:syscall,kernel:lock,app"],
        &[env!("CARGO_BIN_EXE_mmap_storm")],
    );
    assert_eq!(numbers(&stdout)["threads"], 4, "{stdout}");
    // The maps and unmaps of four threads contend on their process's
    // mmap_lock (a read-write semaphore): lock waits named by kind.
    let rows = tests::query(
        &file,
        "SELECT name, count(*) AS n FROM slices WHERE category = 'kernel:lock' GROUP BY name",
    );
    assert!(
        rows.iter()
            .any(|r| r["name"].as_str().is_some_and(|n| n.starts_with("rwsem "))),
        "{rows:?}"
    );
    // The critical path of each thread's span names its waits by the lock.
    let mut named = 0;
    for nth in 1..=4 {
        let p = critical_path(&file, "storm", &["--nth", &nth.to_string()]);
        let blocked = p["path"]["blocked_in"].as_array().unwrap();
        if blocked
            .iter()
            .any(|s| s["name"].as_str().unwrap().starts_with("rwsem "))
        {
            named += 1;
        }
    }
    assert!(named > 0, "no span waited on the mmap_lock by name");
}
