//! End-to-end: every timestamp is on CLOCK_BOOTTIME, the kernel's
//! `bpf_ktime_get_boot_ns` timeline.
//!
//! A machine that never suspended has CLOCK_BOOTTIME equal to
//! CLOCK_MONOTONIC, so the recording runs in a time namespace whose
//! CLOCK_MONOTONIC is 1000 s ahead (`unshare --time --monotonic 1000`):
//! CLOCK_BOOTTIME and the kernel's BPF clocks are not shifted. `trace-cli`
//! (with its own manager) and the provider it starts both run in it; a
//! userspace clock read that used CLOCK_MONOTONIC would put the provider's
//! records 1000 s away from the kernel's.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

use tests::{Trace, boottime_ns, parse, require_root, trace_cli};
use trace_common::fxt::EventKind;

/// How far the namespace's CLOCK_MONOTONIC is ahead, in seconds.
const SHIFT_S: u64 = 1000;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("trace-e2e-boot-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The `key=N` fields of the line starting with `pid=` in `stdout`.
fn ids(stdout: &str) -> HashMap<String, u64> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("pid="))
        .unwrap_or_else(|| panic!("provider_app output missing: {stdout}"));
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .filter_map(|(k, v)| Some((k.to_owned(), v.parse().ok()?)))
        .collect()
}

#[test]
fn userspace_and_kernel_agree_with_monotonic_shifted_in_a_time_namespace() {
    require_root();
    // The namespace works: CLOCK_MONOTONIC shifted, CLOCK_BOOTTIME not.
    let probe = Command::new("unshare")
        .args(["--time", "--monotonic", &SHIFT_S.to_string()])
        .arg("true")
        .output()
        .expect("unshare (util-linux) must be installed");
    assert!(
        probe.status.success(),
        "unshare --time failed (a kernel without time namespaces?): {}",
        String::from_utf8_lossy(&probe.stderr)
    );

    let dir = temp_dir("ns");
    let socket = dir.join("provider.sock");
    let out = dir.join("trace.fxt");
    let t0 = boottime_ns();
    // A socket of our own: `trace-cli` runs its own manager, in the
    // namespace, rather than use a daemon outside it.
    let rec = Command::new("unshare")
        .args(["--time", "--monotonic", &SHIFT_S.to_string()])
        .arg(trace_cli())
        .args(["record", "-c", "kernel:sched,app", "-o"])
        .arg(&out)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_provider_app"))
        .args(["2", "2000"])
        .env("TRACE_MANAGER_SOCKET", &socket)
        .output()
        .unwrap();
    let t1 = boottime_ns();
    let stderr = String::from_utf8_lossy(&rec.stderr);
    assert!(rec.status.success(), "record failed: {stderr}");
    assert!(stderr.contains("1 userspace provider"), "{stderr}");
    let ids = ids(&String::from_utf8_lossy(&rec.stdout));
    let (pid, main_tid) = (ids["pid"], ids["main"]);

    let t: Trace = parse(&out);
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    assert!(
        t.providers.iter().any(|(_, n)| n == "provider-app"),
        "{:?}",
        t.providers
    );
    let work: Vec<_> = t
        .events
        .iter()
        .filter(|e| e.pid == pid && e.category == "app" && e.name == "work")
        .collect();
    assert!(work.len() > 200, "{} work events", work.len());
    assert!(work.iter().any(|e| e.tid == main_tid));

    // The kernel's events are on this process's CLOCK_BOOTTIME, outside
    // the namespace.
    let first_switch = t.switches.iter().map(|s| s.ts).min().expect("switches");
    let last_switch = t.switches.iter().map(|s| s.ts).max().unwrap();
    assert!(
        t0 <= first_switch && last_switch <= t1,
        "kernel switches [{first_switch}, {last_switch}] outside the recording [{t0}, {t1}]"
    );
    // Every userspace event lies within the kernel's record of the
    // recording (1000 s off with a MONOTONIC clock read anywhere).
    let app: Vec<_> = t
        .events
        .iter()
        .filter(|e| e.pid == pid && e.category == "app")
        .collect();
    for e in &app {
        let end = match e.kind {
            EventKind::DurationComplete { end_ts } => end_ts,
            _ => e.ts,
        };
        assert!(
            first_switch <= e.ts && end <= last_switch,
            "{} at [{}, {end}] outside the kernel's [{first_switch}, {last_switch}] \
             (off by {:.3} s)",
            e.name,
            e.ts,
            (e.ts as f64 - last_switch as f64) / 1e9
        );
    }

    // And, as in record_userspace: every duration starts and ends while its
    // thread is on a CPU, within 1 µs.
    tests::assert_durations_on_cpu(&t, &work, &stderr);
}
