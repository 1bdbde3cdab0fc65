//! Containers, cgroups and PID namespaces, end to end: real cgroups made
//! under the cgroup v2 hierarchy (each test makes and removes its own, and
//! touches no other), real PID namespaces (`unshare`), real eBPF.
//!
//! - `--cgroup` records the tasks of a cgroup tree (the parent, a child
//!   cgroup, a task that enters after the recording began) and nothing of
//!   a task outside: system calls, stack samples and provider records;
//! - a provider in a PID namespace (and in a nested one) has its spans on
//!   its host threads, inside the kernel's records of the same threads;
//! - a cgroup named as Docker names its containers is selected by
//!   `--container` with an id prefix, its processes labelled (SQL
//!   columns), and `report --by container` gives its figures;
//! - `--unit` finds a service's cgroup; unknown names list what is there.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use tests::cgroup::Tree;
use tests::{
    assert_durations_on_cpu, bin_dir, check, parse, query, report_json, report_rows, require_root,
    samples, temp_dir, trace_cli,
};
use trace_common::fxt::EventKind;

/// Runs `trace-cli record ARGS -o FILE` with the manager's socket at
/// `socket` until it ends by itself (`-d`); returns its standard error.
fn record(args: &[&str], file: &Path, socket: &Path) -> String {
    let out = Command::new(trace_cli())
        .arg("record")
        .arg("-o")
        .arg(file)
        .args(args)
        .env("TRACE_MANAGER_SOCKET", socket)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {err}");
    err
}

fn program(name: &str) -> String {
    bin_dir().join(name).to_string_lossy().into_owned()
}

/// A busy program: it computes, with a system call every 100 µs or so
/// (some ten thousand a second, not millions: a debug build's recorder
/// keeps up, and the trace stays small).
const BUSY: &str = "import os\nwhile True:\n    [0 for _ in range(2000)]\n    os.getppid()\n";

/// Processes with system calls, samples and `app` records in a trace.
fn pids_seen(file: &Path) -> (HashSet<u64>, HashSet<u64>, HashSet<u64>) {
    let t = parse(file);
    let syscalls = t
        .events
        .iter()
        .filter(|e| e.category == "kernel:syscall")
        .map(|e| e.pid)
        .collect();
    let app = t
        .events
        .iter()
        .filter(|e| e.category == "app")
        .map(|e| e.pid)
        .collect();
    let sampled = samples(file).iter().map(|s| u64::from(s.pid)).collect();
    (syscalls, sampled, app)
}

#[test]
fn root_a_cgroup_tree_is_recorded_whole_and_nothing_outside_it() {
    require_root();
    let dir = temp_dir("cgroup-tree");
    let socket = dir.join("manager.sock");
    let mut tree = Tree::new("trace-test-tree");
    let top = tree.root.clone();
    let child = tree.cgroup("child");
    let (spin, forever) = ("/usr/bin/python3", ["-c", BUSY]);
    let a = tree.start_in(Some(&top), spin, &forever);
    let b = tree.start_in(Some(&child), spin, &forever);
    let outside = tree.start_in(None, spin, &forever);
    let app = program("provider_app");
    let app_in = tree.start_with(
        Some(&child),
        &app,
        &["30", "2000"],
        &[("TRACE_MANAGER_SOCKET", &socket)],
    );
    let app_out = tree.start_with(
        None,
        &app,
        &["30", "2000"],
        &[("TRACE_MANAGER_SOCKET", &socket)],
    );
    let file = dir.join("trace.fxt");
    let name = tree.name.clone();
    // A task that enters the tree once the recording runs.
    let late = std::thread::scope(|s| {
        let recorder = s.spawn(|| {
            record(
                &[
                    "--cgroup",
                    &name,
                    "-c",
                    "kernel:syscall,kernel:sched,kernel:profile,app",
                    "--sample-hz",
                    "199",
                    "-d",
                    "3",
                ],
                &file,
                &socket,
            )
        });
        std::thread::sleep(Duration::from_millis(1500));
        let late = tree.start_in(Some(&top), spin, &forever);
        let log = recorder.join().unwrap();
        assert!(log.contains("1 userspace provider"), "{log}");
        late
    });
    let (ok, out) = check(&file);
    assert!(ok, "{out}");
    let (syscalls, sampled, app_pids) = pids_seen(&file);
    for (what, pid) in [("parent", a), ("child", b), ("late", late)] {
        let pid = u64::from(pid);
        assert!(
            syscalls.contains(&pid),
            "{what} {pid}: no system calls in {syscalls:?}"
        );
        assert!(
            sampled.contains(&pid),
            "{what} {pid}: no samples in {sampled:?}"
        );
    }
    assert!(
        !syscalls.contains(&u64::from(outside)),
        "outside: {syscalls:?}"
    );
    assert!(
        !sampled.contains(&u64::from(outside)),
        "outside sampled: {sampled:?}"
    );
    assert!(app_pids.contains(&u64::from(app_in)), "{app_pids:?}");
    assert!(!app_pids.contains(&u64::from(app_out)), "{app_pids:?}");
    // Every process with a system call is in the tree.
    let inside: HashSet<u64> = [a, b, late, app_in].into_iter().map(u64::from).collect();
    assert!(
        syscalls.is_subset(&inside),
        "{syscalls:?} beyond {inside:?}"
    );
    // The labels place them.
    let rows = query(
        &file,
        &format!("SELECT pid, cgroup FROM processes WHERE pid IN ({a}, {b}, {late})"),
    );
    let cgroups: HashMap<u64, String> = rows
        .iter()
        .map(|r| {
            (
                r["pid"].as_u64().unwrap(),
                r["cgroup"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(cgroups[&u64::from(a)], name, "{rows:?}");
    assert_eq!(cgroups[&u64::from(b)], format!("{name}/child"), "{rows:?}");
}

/// A provider in `unshare --pid --fork --mount-proc` (`depth` namespaces
/// deep) records its spans on its host threads.
fn provider_in_namespaces(depth: usize) {
    require_root();
    let dir = temp_dir(&format!("pid-ns-{depth}"));
    let socket = dir.join("manager.sock");
    let file = dir.join("trace.fxt");
    let mut args: Vec<String> = ["-c", "kernel:syscall,kernel:sched,app", "--"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for _ in 0..depth {
        args.extend(["unshare", "--pid", "--fork", "--mount-proc"].map(String::from));
    }
    args.extend([program("provider_app"), "1.5".into(), "2000".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let summary = record(&args, &file, &socket);
    let (ok, out) = check(&file);
    assert!(ok, "{out}");
    let t = parse(&file);
    let work: Vec<_> = t
        .events
        .iter()
        .filter(|e| e.category == "app" && e.name == "work")
        .collect();
    assert!(work.len() > 100, "{} work spans", work.len());
    let tids: HashSet<u64> = work.iter().map(|e| e.tid).collect();
    assert_eq!(tids.len(), 2, "main and worker: {tids:?}");
    // Not the namespace's own ids (1, and a small one), but the host's:
    // threads the kernel's records name, with the provider's names.
    for &tid in &tids {
        assert!(tid > 3, "thread {tid} is a namespace id");
        let (pid, name) = t.thread(tid).expect("named");
        assert!(name == "provider_app" || name == "worker", "{name}");
        assert!(work.iter().all(|e| e.tid != tid || e.pid == *pid));
        assert!(
            t.events
                .iter()
                .any(|e| e.category == "kernel:syscall" && e.tid == tid),
            "no system call of thread {tid}"
        );
    }
    // Each span lies inside its thread's time on a CPU.
    assert_durations_on_cpu(&t, &work, &summary);
    let pid = work[0].pid;
    let rows = query(
        &file,
        &format!("SELECT ns_pid FROM processes WHERE pid = {pid}"),
    );
    assert_eq!(rows[0]["ns_pid"], 1, "{rows:?}");
    assert!(t.events.iter().all(|e| e.category != "app"
        || matches!(e.kind, EventKind::DurationComplete { .. })
        || tids.contains(&e.tid)));
}

#[test]
fn root_a_provider_in_a_pid_namespace_lands_on_its_host_threads() {
    provider_in_namespaces(1);
}

#[test]
fn root_a_provider_in_nested_pid_namespaces_lands_on_its_host_threads() {
    provider_in_namespaces(2);
}

/// A Docker-like container id.
const ID: &str = "7e1d5c3b9a8f6e4d2c0b1a9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b";

#[test]
fn root_a_runtime_scope_is_selected_by_id_prefix_labelled_and_reported() {
    require_root();
    let dir = temp_dir("container-scope");
    let socket = dir.join("manager.sock");
    let mut tree = Tree::new("trace-test-ctr.slice");
    let scope = tree.cgroup(&format!("docker-{ID}.scope"));
    let service = tree.cgroup(&format!("trace-test-unit-{}.service", std::process::id()));
    // Its init in a PID namespace of its own, as a container's.
    let init = tree.start_in(
        Some(&scope),
        "unshare",
        // Its child, the namespace's init, dies with it.
        &[
            "--pid",
            "--fork",
            "--mount-proc",
            "--kill-child",
            "/usr/bin/python3",
            "-c",
            BUSY,
        ],
    );
    let beside = tree.start_in(Some(&service), "/usr/bin/python3", &["-c", BUSY]);
    std::thread::sleep(Duration::from_millis(200));

    let file = dir.join("trace.fxt");
    record(
        &[
            "--container",
            &ID[..10],
            "-c",
            "kernel:syscall,kernel:sched",
            "-d",
            "1.5",
        ],
        &file,
        &socket,
    );
    let (ok, out) = check(&file);
    assert!(ok, "{out}");
    let rows = query(
        &file,
        "SELECT pid, name, cgroup, container_runtime, container_id, ns_pid FROM processes \
         WHERE container_id IS NOT NULL",
    );
    assert!(!rows.is_empty());
    for r in &rows {
        assert_eq!(r["container_runtime"], "docker", "{r:?}");
        assert_eq!(r["container_id"], ID, "{r:?}");
        assert!(
            r["cgroup"]
                .as_str()
                .unwrap()
                .ends_with(&format!("docker-{ID}.scope")),
            "{r:?}"
        );
    }
    // The program inside is pid 1 of its namespace (unshare forked it).
    let inner = rows
        .iter()
        .find(|r| r["name"] == "python3")
        .unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(inner["ns_pid"], 1, "{inner:?}");
    let inner_pid = inner["pid"].as_u64().unwrap();
    assert_ne!(inner_pid, u64::from(init));
    // Nothing of the service beside it.
    let t = parse(&file);
    assert!(t.events.iter().all(|e| e.pid != u64::from(beside)));
    // The report's figures are the trace's.
    let calls = query(
        &file,
        &format!("SELECT count(*) AS n FROM syscalls WHERE pid = {inner_pid}"),
    )[0]["n"]
        .as_u64()
        .unwrap();
    assert!(calls > 500, "{calls}");
    let report = report_json(&["--by", "container", "--section", "groups"], &[&file]);
    let groups = report_rows(&report, "groups", "groups");
    let label = format!("docker {}", &ID[..12]);
    let row = groups
        .iter()
        .find(|r| r["container"] == label.as_str())
        .unwrap_or_else(|| panic!("{groups:?}"));
    let all_calls = query(
        &file,
        "SELECT count(*) AS n FROM syscalls s JOIN processes p ON s.pid = p.pid \
         WHERE p.container_id IS NOT NULL",
    )[0]["n"]
        .as_u64()
        .unwrap();
    assert_eq!(row["syscalls"], all_calls, "{row}");
    assert!(row["on_cpu"].as_u64().unwrap() > 100_000_000, "{row}");
    // Filtering by the container gives the same calls.
    let filtered = report_json(
        &["--container", &ID[..8], "--section", "syscalls"],
        &[&file],
    );
    let per_call = report_rows(&filtered, "syscalls", "calls");
    let total: u64 = per_call.iter().map(|r| r["count"].as_u64().unwrap()).sum();
    assert_eq!(total, all_calls);

    // The service by its unit name.
    let unit = format!("trace-test-unit-{}", std::process::id());
    let file2 = dir.join("unit.fxt");
    record(
        &["--unit", &unit, "-c", "kernel:syscall", "-d", "0.5"],
        &file2,
        &socket,
    );
    let t = parse(&file2);
    let pids: HashSet<u64> = t
        .events
        .iter()
        .filter(|e| e.category == "kernel:syscall")
        .map(|e| e.pid)
        .collect();
    assert_eq!(pids, HashSet::from([u64::from(beside)]));

    // Names not there are errors that say what is.
    let err = tests::record_fails(
        &["--container", "no-such-container", "-d", "1"],
        &dir.join("x.fxt"),
    );
    assert!(err.contains("no container \"no-such-container\""), "{err}");
    assert!(err.contains(&ID[..12]), "{err}");
    let err = tests::record_fails(
        &["--unit", "no-such-unit-here", "-d", "1"],
        &dir.join("x.fxt"),
    );
    assert!(err.contains("no unit \"no-such-unit-here\""), "{err}");
    assert!(err.contains(&format!("{unit}.service")), "{err}");
    let err = tests::record_fails(
        &["--cgroup", "/no/such/cgroup", "-d", "1"],
        &dir.join("x.fxt"),
    );
    assert!(err.contains("no cgroup /no/such/cgroup"), "{err}");
}

#[test]
fn root_the_daemon_and_its_flight_recorder_select_by_cgroup() {
    let mut tree = Tree::new("trace-test-daemon");
    let top = tree.root.clone();
    let inside = tree.start_in(Some(&top), "/usr/bin/python3", &["-c", BUSY]);
    let outside = tree.start_in(None, "/usr/bin/python3", &["-c", BUSY]);
    let name = tree.name.clone();
    let d = tests::Daemon::start_with(
        "cgroup-daemon",
        &[
            "--flight-recorder",
            "-c",
            "kernel:syscall,kernel:sched",
            "--window",
            "10s",
            "--cgroup",
            &name,
        ],
    );
    // A recording through the daemon, beside its flight recorder.
    let file = d.dir.join("recorded.fxt");
    let out = d
        .record(
            &file,
            &["--cgroup", &name, "-c", "kernel:syscall", "-d", "1"],
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let snap = d.dir.join("snapshot.fxt");
    let out = d.cli(&["snapshot", "-o"]).arg(&snap).output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        d.log()
    );
    for f in [&file, &snap] {
        let (ok, text) = check(f);
        assert!(ok, "{}: {text}", f.display());
        let (syscalls, _, _) = pids_seen(f);
        assert!(
            syscalls.contains(&u64::from(inside)),
            "{}: {syscalls:?}",
            f.display()
        );
        assert!(
            !syscalls.contains(&u64::from(outside)),
            "{}: {syscalls:?}",
            f.display()
        );
    }
}
