//! End-to-end: `trace-cli record` as users of perf, strace and `time`
//! expect it — the command's exit status passed on (and a command that
//! cannot be run said as a shell says it), `-p` stopping when its processes
//! are gone, one plain warning where one is due, errors that say what is
//! wrong once; and shell completions that offer categories, sections and
//! tracepoint names rather than file names.
//!
//! Every recording uses a socket of its own (no daemon listens on it), so
//! a manager that another recording runs is not met.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use tests::{check, parse, require_root, temp_dir, trace_cli};

/// `trace-cli ARGS` with the manager socket in `dir`.
fn cli(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(trace_cli());
    c.args(args)
        .env("TRACE_MANAGER_SOCKET", dir.join("manager.sock"))
        .env_remove("RUST_LOG");
    c
}

/// Standard error of `out`.
fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `record -o DIR/NAME ARGS`: its output and the trace's path.
fn record(dir: &Path, name: &str, args: &[&str]) -> (Output, PathBuf) {
    let trace = dir.join(name);
    let mut all = vec!["record", "-o", trace.to_str().unwrap()];
    all.extend_from_slice(args);
    (cli(dir, &all).output().unwrap(), trace)
}

#[test]
fn record_exits_with_the_status_of_its_command() {
    require_root();
    let dir = temp_dir("status");
    let (out, trace) = record(&dir, "exit3.fxt", &["--", "sh", "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("exited with status 3"),
        "{}",
        stderr(&out)
    );
    assert!(parse(&trace).errors.is_empty());

    // Killed by a signal: 128 + its number, and the trace is whole.
    let (out, trace) = record(&dir, "segv.fxt", &["--", "sh", "-c", "kill -SEGV $$"]);
    assert_eq!(out.status.code(), Some(128 + 11), "{}", stderr(&out));
    assert!(stderr(&out).contains("SIGSEGV"), "{}", stderr(&out));
    let (ok, report) = check(&trace);
    assert!(ok, "{report}");
    let t = parse(&trace);
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    assert!(
        t.events.iter().any(|e| e.name == "exit"),
        "the command's exit is in the trace"
    );

    let (out, _) = record(&dir, "true.fxt", &["--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_command_that_cannot_run_is_said_as_a_shell_says_it() {
    let dir = temp_dir("unrunnable");
    let (out, trace) = record(&dir, "missing.fxt", &["--", "no-such-command-here"]);
    assert_eq!(out.status.code(), Some(127), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no-such-command-here: command not found"),
        "{}",
        stderr(&out)
    );
    assert!(!trace.exists(), "nothing was recorded");

    let plain = dir.join("not-executable");
    std::fs::write(&plain, "#!/bin/sh\n").unwrap();
    let (out, _) = record(&dir, "plain.fxt", &["--", plain.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(126), "{}", stderr(&out));
    assert!(stderr(&out).contains("not executable"), "{}", stderr(&out));

    let (out, _) = record(&dir, "missing-path.fxt", &["--", "/no/such/program"]);
    assert_eq!(out.status.code(), Some(127), "{}", stderr(&out));
}

#[test]
fn recording_a_pid_stops_when_it_exits() {
    use std::io::{BufReader, Write as _};
    use std::process::Stdio;
    require_root();
    let dir = temp_dir("pid-exit");
    // A process that exits when told, once the recording runs.
    let mut target = Command::new("sh")
        .args(["-c", "read x"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = target.id().to_string();
    let trace = dir.join("pid.fxt");
    let mut rec = cli(&dir, &["record", "-o", trace.to_str().unwrap(), "-p", &pid])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(rec.stderr.take().unwrap());
    tests::wait_for_recording(&mut err);
    target.stdin.take().unwrap().write_all(b"\n").unwrap();
    target.wait().unwrap();
    // Generous: only that it stops by itself is asserted.
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = rec.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = rec.kill();
            panic!("record -p {pid} went on after the process exited");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(status.success(), "{rest}");
    assert!(rest.contains(&format!("process {pid} exited")), "{rest}");
    let (ok, report) = check(&trace);
    assert!(ok, "{report}");

    // --keep-going: the recording outlives the process, to its duration.
    let mut target = Command::new("sleep").arg("0.2").spawn().unwrap();
    let pid = target.id().to_string();
    let (out, _) = record(&dir, "keep.fxt", &["-p", &pid, "--keep-going", "-d", "2"]);
    target.wait().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("exited:"), "{}", stderr(&out));
}

#[test]
fn irq_with_a_pid_filter_is_told_once_and_only_when_asked_for() {
    require_root();
    let dir = temp_dir("irq-warning");
    // Every category by default: nothing is said of kernel:irq.
    let (out, _) = record(&dir, "default.fxt", &["--", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(!err.contains("[WARN"), "{err}");
    assert!(!err.contains("kernel:irq"), "{err}");
    // A glob takes it in without naming it.
    let (out, _) = record(&dir, "glob.fxt", &["-c", "kernel:*", "--", "true"]);
    assert!(!stderr(&out).contains("kernel:irq"), "{}", stderr(&out));
    // Named: said once, plainly.
    let (out, _) = record(&dir, "named.fxt", &["-c", "kernel:irq", "--", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("kernel:irq")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with("trace-cli: warning: "), "{err}");
    assert!(!err.contains("[WARN"), "{err}");
}

/// Runs `args` as user nobody (uid and gid 65534, no groups).
fn as_nobody(dir: &Path, socket: &Path, args: &[&str]) -> Output {
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(trace_cli())
        .args(args)
        .env("TRACE_MANAGER_SOCKET", socket)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("setpriv:"),
        "setpriv failed: {}",
        stderr(&out)
    );
    out
}

#[test]
fn without_root_or_a_daemon_record_says_that_no_daemon_runs() {
    require_root();
    let dir = temp_dir("no-daemon");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out_file =
        std::env::temp_dir().join(format!("trace-e2e-nobody-{}.fxt", std::process::id()));
    let out_arg = out_file.to_str().unwrap();

    // No socket at all.
    let out = as_nobody(
        &dir,
        &dir.join("none.sock"),
        &["record", "-d", "1", "-o", out_arg],
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("no trace-manager daemon runs"), "{err}");
    assert!(err.contains("root"), "{err}");

    // The socket file of a daemon that stopped, in a folder only root may
    // enter (as the daemon leaves it): no daemon either, not a refusal.
    let private = dir.join("private");
    std::fs::create_dir_all(&private).unwrap();
    std::fs::set_permissions(
        &private,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let stale = private.join("provider.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let out = as_nobody(&dir, &stale, &["record", "-d", "1", "-o", out_arg]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("no trace-manager daemon runs"), "{err}");
    assert!(!err.contains("refused the connection"), "{err}");
    let _ = std::fs::remove_file(&out_file);
}

#[test]
fn without_a_daemon_sessions_and_snapshot_say_the_cause_once() {
    let dir = temp_dir("no-daemon-cause");
    for args in [vec!["sessions"], vec!["snapshot", "-o", "/dev/null"]] {
        let out = cli(&dir, &args).output().unwrap();
        assert!(!out.status.success());
        let err = stderr(&out);
        assert_eq!(
            err.matches("No such file or directory").count(),
            1,
            "{args:?}: {err}"
        );
        assert!(err.contains("no trace manager daemon runs"), "{err}");
    }
}

#[test]
fn a_refused_recording_leaves_its_output_path_as_it_was() {
    let d = tests::Daemon::start("refused-output");
    // A session that holds the daemon.
    let first = d.dir.join("first.fxt");
    let mut holder = d
        .cli(&["record", "-c", "kernel:sched", "-d", "30", "-o"])
        .arg(&first)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::metadata(&first).map_or(0, |m| m.len()) == 0 {
        assert!(Instant::now() < deadline, "the first recording never began");
        std::thread::sleep(Duration::from_millis(50));
    }
    let earlier = d.dir.join("earlier.fxt");
    std::fs::write(&earlier, b"an earlier trace").unwrap();
    let never = d.dir.join("never.fxt");
    for path in [&earlier, &never] {
        let out = d
            .cli(&["record", "-c", "kernel:sched", "-d", "1", "-o"])
            .arg(path)
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("try again when it ends"), "{err}");
    }
    assert_eq!(std::fs::read(&earlier).unwrap(), b"an earlier trace");
    assert!(!never.exists(), "a file was left for a refused recording");
    let names: Vec<String> = std::fs::read_dir(&d.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.contains(".recording-")),
        "{names:?}"
    );
    holder.kill().ok();
    holder.wait().ok();
}

#[test]
fn a_trigger_cut_by_the_shell_is_shown_whole_with_how_to_quote_it() {
    let dir = temp_dir("trigger-quote");
    // Quoted: the whole argument is in the error.
    let out = cli(
        &dir,
        &[
            "record",
            "--trigger",
            "syscall:fsync>5xs",
            "-d",
            "1",
            "-o",
            "t.fxt",
        ],
    )
    .current_dir(&dir)
    .output()
    .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("\"syscall:fsync>5xs\""),
        "{}",
        stderr(&out)
    );
    // Unquoted, the shell took `>5xs` as a redirection: the error says so.
    let line = format!(
        "{} record --trigger syscall:fsync>5xs -d 1 -o t.fxt",
        trace_cli().display()
    );
    let out = Command::new("sh")
        .args(["-c", &line])
        .env("TRACE_MANAGER_SOCKET", dir.join("manager.sock"))
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("'syscall:fsync>50ms'"), "{err}");
    assert!(err.contains("redirection"), "{err}");
}

/// What the bash completion offers for the line `line` (the cursor at its
/// end), with the script `trace-cli completions bash` prints.
fn bash_completes(script: &Path, line: &str) -> Vec<String> {
    let program = trace_cli();
    let driver = format!(
        r#"source {script}
COMP_LINE={line:?}
COMP_POINT=${{#COMP_LINE}}
read -ra COMP_WORDS <<< "$COMP_LINE"
COMP_WORDS[0]={program:?}
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
[[ "$COMP_LINE" =~ [[:space:]]$ ]] && COMP_CWORD=${{#COMP_WORDS[@]}}
_trace__cli__values "${{COMP_WORDS[0]}}" "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}"
"#,
        script = script.display(),
        program = program.display().to_string(),
    );
    let out = Command::new("bash").args(["-c", &driver]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn completions_offer_categories_sections_and_tracepoints_not_files() {
    let dir = temp_dir("completions");
    for shell in ["bash", "zsh", "fish"] {
        let out = cli(&dir, &["completions", shell]).output().unwrap();
        assert!(out.status.success());
        let script = String::from_utf8_lossy(&out.stdout);
        // zsh writes `:` as `\:`.
        assert!(
            script.contains("kernel:sched") || script.contains("kernel\\:sched"),
            "{shell}: no categories"
        );
        assert!(script.contains("syscalls"), "{shell}: no sections");
    }
    let out = cli(&dir, &["completions", "bash"]).output().unwrap();
    let script = dir.join("trace-cli.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    // Bash completes the word after the last `:`; a comma list goes on.
    assert_eq!(
        bash_completes(&script, "trace-cli record -c kernel:sc"),
        ["sched"]
    );
    assert_eq!(
        bash_completes(&script, "trace-cli record -c kernel:sched,kernel:sys"),
        ["syscall"]
    );
    assert_eq!(
        bash_completes(&script, "trace-cli report --section sysc"),
        ["syscalls"]
    );
    // The generated part still completes subcommands' options.
    assert_eq!(
        bash_completes(&script, "trace-cli record --start-de"),
        ["--start-delay"]
    );
    // Tracepoint names come from the running kernel (tracefs: root).
    if runs_as_root() {
        let offered = bash_completes(&script, "trace-cli record -e sched:sched_swi");
        assert!(offered.iter().any(|w| w == "sched_switch"), "{offered:?}");
    }
}

/// Whether this runs as root (reading tracefs needs it).
fn runs_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(2))
            == Some("0")
    })
}

/// Ctrl-C stops a recording at once even while the kernel floods it: the
/// recording covers the time until the interrupt (its own figure, "in N
/// s"), not until the flood ends, and the file passes `check`. (A flood
/// once kept the recorder's loop from ever reading the interrupt while
/// events were left to translate.)
#[test]
fn ctrl_c_stops_a_flooded_recording_at_once() {
    require_root();
    let dir = temp_dir("interrupt-flood");
    let trace = dir.join("flood.fxt");
    // getppid as fast as one thread per CPU can, for longer than the test.
    let storm = Command::new(env!("CARGO_BIN_EXE_syscall_rate"))
        .args(["0", "60"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let storms = tests::Killed(vec![storm]);
    let mut rec = cli(
        &dir,
        &["record", "-a", "-c", "kernel:syscall,kernel:sched", "-o"],
    )
    .arg(&trace)
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let mut err = std::io::BufReader::new(rec.stderr.take().unwrap());
    tests::wait_for_recording(&mut err);
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    let interrupted = started.elapsed();
    // SAFETY: kill(2) with a pid we spawned has no memory effects.
    unsafe { libc::kill(rec.id() as libc::pid_t, libc::SIGINT) };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(rec.wait().unwrap().success(), "{rest}");
    drop(storms);
    // "... in 3.1 s, ..."
    let covered: f64 = rest
        .split(" in ")
        .find_map(|s| s.split_once(" s,")?.0.parse().ok())
        .unwrap_or_else(|| panic!("no duration in {rest}"));
    eprintln!("interrupted after {interrupted:?}; the recording covers {covered} s");
    // Within a few seconds in a debug build (0.15 s in a release one);
    // the flood used to hold the stop off until it ended.
    assert!(
        covered < interrupted.as_secs_f64() + 4.0,
        "interrupted after {interrupted:?}, recorded {covered} s: {rest}"
    );
    let (ok, findings) = check(&trace);
    assert!(ok, "{findings}");
}
