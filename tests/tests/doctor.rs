//! `trace-cli doctor` with features made unavailable for real: another
//! user, `perf_event_paranoid` raised, tracefs unmounted and the kernel's
//! BTF hidden (in a mount namespace of the test's own), the daemon's socket
//! absent or refusing; and recordings that go on without BTF and without a
//! tracepoint.

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;

use serde_json::Value;
use tests::{Daemon, require_root, temp_dir, trace_cli};

const NOBODY: u32 = 65534;

/// Tests that change `perf_event_paranoid`, which every process sees, take
/// this; the others read it.
static PARANOID: Mutex<()> = Mutex::new(());

/// `trace-cli doctor --json` with the daemon's socket at `socket`.
fn doctor(socket: &Path, as_nobody: bool) -> (Value, Output) {
    let mut cmd = Command::new(trace_cli());
    cmd.args(["doctor", "--json"])
        .env("TRACE_MANAGER_SOCKET", socket);
    if as_nobody {
        cmd.uid(NOBODY).gid(NOBODY);
    }
    parse(cmd.output().unwrap())
}

fn parse(out: Output) -> (Value, Output) {
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor printed no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (json, out)
}

/// The finding of `check`.
fn finding<'a>(doc: &'a Value, check: &str) -> &'a Value {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == check)
        .unwrap_or_else(|| panic!("no finding {check} in {doc:#}"))
}

fn status<'a>(doc: &'a Value, check: &str) -> &'a str {
    finding(doc, check)["status"].as_str().unwrap()
}

/// Whether the ability `what` works (`None`: cannot be told).
fn works(doc: &Value, what: &str) -> Option<bool> {
    doc["abilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["what"] == what)
        .unwrap_or_else(|| panic!("no ability {what} in {doc:#}"))["works"]
        .as_bool()
}

/// Restores `perf_event_paranoid` when dropped.
struct Paranoid(String);

impl Paranoid {
    const PATH: &str = "/proc/sys/kernel/perf_event_paranoid";

    fn set(level: &str) -> Paranoid {
        let old = std::fs::read_to_string(Self::PATH).unwrap();
        std::fs::write(Self::PATH, level).unwrap();
        Paranoid(old.trim().to_owned())
    }
}

impl Drop for Paranoid {
    fn drop(&mut self) {
        let _ = std::fs::write(Self::PATH, &self.0);
    }
}

#[test]
fn as_root_every_check_passes_and_every_program_loads_within_the_limit() {
    require_root();
    let _shared = PARANOID.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("doctor-root");
    let (doc, out) = doctor(&dir.join("no-daemon.sock"), false);
    assert!(out.status.success(), "{doc:#}");
    for check in [
        "kernel",
        "rights",
        "BTF",
        "tracefs",
        "BPF ring buffers",
        "eBPF programs",
        "uprobes",
        "perf events",
        "lockdown",
        "kernel symbols",
        "cgroup v2",
    ] {
        assert_eq!(status(&doc, check), "ok", "{:#}", finding(&doc, check));
    }
    // No daemon on that socket: said, with what to do.
    let daemon = finding(&doc, "daemon");
    assert_eq!(daemon["status"], "missing");
    assert!(
        daemon["fix"]
            .as_str()
            .unwrap()
            .contains("systemctl start trace-manager")
    );

    let programs = doc["programs"].as_array().unwrap();
    assert!(programs.len() >= 30, "{programs:#?}");
    for p in programs {
        assert!(p["refused"].is_null(), "{p}");
        let walked = p["verified_instructions"].as_u64().unwrap();
        // The verifier of every kernel since 5.2 walks at most a million;
        // older verifiers prune less well, hence the margin.
        assert!(walked < 250_000, "{p}");
    }
    for a in doc["abilities"].as_array().unwrap() {
        assert_eq!(a["works"], true, "{a}");
    }

    // The text form: one line per check, and what to do about the daemon.
    let text = Command::new(trace_cli())
        .arg("doctor")
        .env("TRACE_MANAGER_SOCKET", dir.join("no-daemon.sock"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("to do: `sudo systemctl start trace-manager`"),
        "{text}"
    );
    assert!(text.contains("yes  kernel:sched"), "{text}");
}

#[test]
fn as_another_user_the_rights_and_a_raised_paranoid_level_are_named() {
    require_root();
    let _exclusive = PARANOID.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("doctor-nobody");
    let socket = dir.join("no-daemon.sock");
    let _paranoid = Paranoid::set("3");
    let (doc, out) = doctor(&socket, true);
    // Nothing can be recorded: no rights, no daemon.
    assert_eq!(out.status.code(), Some(1), "{doc:#}");
    let rights = finding(&doc, "rights");
    assert_eq!(rights["status"], "missing", "{rights}");
    assert!(
        rights["detail"].as_str().unwrap().contains("uid 65534"),
        "{rights}"
    );
    assert!(rights["fix"].as_str().unwrap().contains("sudo"), "{rights}");
    let perf = finding(&doc, "perf events");
    assert_eq!(perf["status"], "limited", "{perf}");
    assert!(
        perf["detail"]
            .as_str()
            .unwrap()
            .contains("perf_event_paranoid 3: users may not open perf events at all"),
        "{perf}"
    );
    // Without the rights the programs and ring buffers are not tried.
    assert_eq!(status(&doc, "eBPF programs"), "unknown");
    assert_eq!(status(&doc, "BPF ring buffers"), "unknown");
    assert!(
        finding(&doc, "eBPF programs")["fix"]
            .as_str()
            .unwrap()
            .contains("sudo trace-cli doctor")
    );
    // paranoid above 1 hides kernel addresses from this user.
    assert_eq!(status(&doc, "kernel symbols"), "limited");
    assert_eq!(works(&doc, "kernel:sched"), Some(false));

    // `record` says the same, and points at doctor.
    let out = Command::new(trace_cli())
        .args(["record", "-d", "1", "-o"])
        .arg(dir.join("never.fxt"))
        .env("TRACE_MANAGER_SOCKET", &socket)
        .uid(NOBODY)
        .gid(NOBODY)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("`trace-cli doctor`"), "{stderr}");
}

#[test]
fn a_daemon_that_refuses_this_user_is_told_apart_from_no_daemon() {
    require_root();
    let _shared = PARANOID.lock().unwrap_or_else(|e| e.into_inner());
    let d = Daemon::start("doctor-daemon");
    let (doc, _) = doctor(&d.socket, false);
    assert_eq!(status(&doc, "daemon"), "ok", "{doc:#}");
    let (doc, _) = doctor(&d.socket, true);
    let daemon = finding(&doc, "daemon");
    assert_eq!(daemon["status"], "missing", "{daemon}");
    let detail = daemon["detail"].as_str().unwrap();
    assert!(detail.contains("refuses this user"), "{daemon}");
    assert!(
        daemon["fix"].as_str().unwrap().contains("`tracing` group"),
        "{daemon}"
    );
}

/// `trace-cli ARGS` in a mount namespace of its own where `setup` (shell
/// commands) ran first: unmounting tracefs or hiding a file there changes
/// nothing for the rest of the machine.
fn in_mount_namespace(setup: &str, args: &[&str], socket: &Path) -> Output {
    let script = format!("set -e; {setup}; exec \"$0\" \"$@\"");
    Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg(script)
        .arg(trace_cli())
        .args(args)
        .env("TRACE_MANAGER_SOCKET", socket)
        .output()
        .unwrap()
}

#[test]
fn tracefs_unmounted_and_btf_hidden_are_named_and_the_rest_still_works() {
    require_root();
    let _shared = PARANOID.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("doctor-namespace");
    let socket = dir.join("no-daemon.sock");
    let out = in_mount_namespace(
        // Every tracefs goes, and debugfs with it: its `tracing` directory
        // would mount tracefs again the moment the doctor looked there.
        "for m in $(awk '$3 == \"tracefs\" || $3 == \"debugfs\" { print $2 }' /proc/self/mounts \
            | sort -r); do umount \"$m\"; done; \
         mount --bind /dev/null /sys/kernel/btf/vmlinux",
        &["doctor", "--json"],
        &socket,
    );
    let (doc, _) = parse(out);
    let tracefs = finding(&doc, "tracefs");
    assert_eq!(tracefs["status"], "limited", "{tracefs}");
    assert!(
        tracefs["fix"]
            .as_str()
            .unwrap()
            .contains("mount -t tracefs"),
        "{tracefs}"
    );
    let btf = finding(&doc, "BTF");
    assert_eq!(btf["status"], "limited", "{btf}");
    assert!(
        btf["detail"]
            .as_str()
            .unwrap()
            .contains("classic tracepoints"),
        "{btf}"
    );
    // The classic programs are loaded instead, and all pass.
    let programs = finding(&doc, "eBPF programs");
    assert_eq!(programs["status"], "ok", "{programs}");
    assert!(
        programs["detail"]
            .as_str()
            .unwrap()
            .contains("not tried (no BTF)")
    );
    assert!(
        doc["programs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["kind"] != "tp_btf")
    );
    assert_eq!(works(&doc, "kernel:syscall"), Some(true));
    assert_eq!(
        works(
            &doc,
            "BTF tracepoints (cheaper kernel:sched and kernel:syscall)"
        ),
        Some(false)
    );
}

#[test]
fn a_recording_goes_on_without_btf_and_without_an_optional_tracepoint() {
    require_root();
    let _shared = PARANOID.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("doctor-degraded");
    let out_file = dir.join("degraded.fxt");
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    // The `power` group (cpu_idle, cpu_frequency: optional in kernel:sched)
    // looks empty, and there is no kernel BTF.
    let setup = format!(
        "mount --bind {} /sys/kernel/tracing/events/power; \
         mount --bind /dev/null /sys/kernel/btf/vmlinux",
        empty.display()
    );
    let out_arg = out_file.to_str().unwrap();
    let out = in_mount_namespace(
        &setup,
        &[
            "record",
            "-c",
            "kernel:sched,kernel:syscall,kernel:proc",
            "-d",
            "1",
            "-o",
            out_arg,
            "--",
            "sh",
            "-c",
            "for i in 1 2 3; do /bin/true; done",
        ],
        &dir.join("no-daemon.sock"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("power:cpu_idle does not exist on this kernel"),
        "the missing tracepoint is said: {stderr}"
    );
    assert!(!stderr.contains("verifier"), "no verifier dump: {stderr}");
    let (ok, report) = tests::check(&out_file);
    assert!(ok, "{report}");
    let trace = tests::parse(&out_file);
    assert!(!trace.switches.is_empty(), "context switches recorded");
    assert!(
        trace.events.iter().any(|e| e.category == "kernel:syscall"),
        "system calls recorded with the classic tracepoints"
    );
}
