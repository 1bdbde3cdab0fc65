//! End-to-end: the files named in `--uprobe` / `--usdt` are opened with the
//! client's rights, not the daemon's.
//!
//! A `trace-manager` daemon runs as root on a socket of the test's own,
//! made connectable by anyone (as the `tracing` group's mode would make it
//! for its members), and `trace-cli` runs as nobody (uid and gid 65534, no
//! supplementary group). A probe on a program in a root-only (0700)
//! directory, or on a root-only (0700) file, fails before recording with
//! "cannot read PATH: Permission denied" — and the very same message for a
//! file that does not exist there, or a symbol that is not there: nothing
//! says whether a file nobody cannot see exists, is ELF or has the symbol.
//! So does a bare function or USDT probe in a root process given with `-p`.
//! The same probe on a world-readable copy records.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use tests::{Event, parse, require_root, start_daemon, trace_cli, wait_for_recording};
use trace_common::fxt::EventKind;

/// nobody / nogroup.
const NOBODY: u32 = 65534;

fn uprobe_target() -> &'static str {
    env!("CARGO_BIN_EXE_uprobe_target")
}

fn usdt_target() -> &'static str {
    env!("CARGO_BIN_EXE_usdt_target")
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A root `trace-manager` daemon on a socket anyone may connect to, and
/// the files of one test: `public/` (anyone may read), `secret/` (0700,
/// root's), `out/` (anyone may write). Killed and removed on drop.
struct Setup {
    daemon: Child,
    dir: PathBuf,
    socket: PathBuf,
}

impl Setup {
    fn new(name: &str) -> Setup {
        require_root();
        let dir = std::env::temp_dir().join(format!(
            "trace-e2e-privileges-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["public", "secret", "out"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        chmod(&dir, 0o755);
        chmod(&dir.join("public"), 0o755);
        chmod(&dir.join("secret"), 0o700);
        chmod(&dir.join("out"), 0o777);
        let socket = dir.join("manager.sock");
        let daemon = start_daemon(&socket, &dir.join("daemon.log"), &[]);
        // The daemon makes its socket 0660 root:tracing (0600 without that
        // group); anyone may connect to this one, as members of `tracing`
        // may to the real one.
        chmod(&socket, 0o666);
        Setup {
            daemon,
            dir,
            socket,
        }
    }

    /// A copy of `program` at `rel` in the test's directory, with `mode`.
    fn copy(&self, program: &str, rel: &str, mode: u32) -> PathBuf {
        let path = self.dir.join(rel);
        tests::copy_program(program, &path);
        chmod(&path, mode);
        path
    }

    /// `trace-cli record -o out/NAME ARGS` as nobody, on the daemon.
    fn record_as_nobody(&self, name: &str, args: &[&str]) -> Command {
        let mut c = Command::new(trace_cli());
        c.arg("record")
            .arg("-o")
            .arg(self.dir.join("out").join(name))
            .args(args)
            .env("TRACE_MANAGER_SOCKET", &self.socket)
            .current_dir(self.dir.join("out"))
            .uid(NOBODY)
            .gid(NOBODY);
        c
    }

    /// Runs `record_as_nobody`, which must fail before recording; returns
    /// its standard error.
    fn fails_as_nobody(&self, args: &[&str]) -> String {
        // A short recording, should it start after all.
        let args = [&["-c", "kernel:proc", "-d", "1"], args].concat();
        let out = self.record_as_nobody("never.fxt", &args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{args:?} was accepted: {err}");
        assert!(!err.contains("trace-cli: recording"), "{err}");
        // It was the probe the daemon refused, not the connection.
        assert!(
            err.contains("--uprobe \"") || err.contains("--usdt \""),
            "{args:?}: {err}\ndaemon log:\n{}",
            self.log()
        );
        err
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("daemon.log")).unwrap_or_default()
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `err` with `path` written `PATH`, for comparing messages about
/// different files.
fn without(err: &str, path: &Path) -> String {
    err.replace(&path.display().to_string(), "PATH")
}

#[test]
fn files_the_client_cannot_read_cannot_be_probed_and_say_nothing_more() {
    let s = Setup::new("unreadable");
    let hidden = s.copy(uprobe_target(), "secret/uprobe_target", 0o755);
    let missing = s.dir.join("secret/no_such_program");
    let private = s.copy(uprobe_target(), "public/private_target", 0o700);

    // In a directory nobody cannot enter: cannot read, nothing else.
    let err = s.fails_as_nobody(&["--uprobe", &format!("{}:c_recurse", hidden.display())]);
    let expected = format!("cannot read {}: Permission denied", hidden.display());
    assert!(err.contains(&expected), "{err}");
    assert!(!err.contains("no function"), "{err}");
    // A file that is not there, and a symbol that is not there: the same
    // message, word for word.
    let absent = s.fails_as_nobody(&["--uprobe", &format!("{}:c_recurse", missing.display())]);
    assert_eq!(without(&absent, &missing), without(&err, &hidden));
    let no_symbol = s.fails_as_nobody(&[
        "--uprobe",
        &format!("{}:no_such_function_here", hidden.display()),
    ]);
    assert_eq!(no_symbol.replace("no_such_function_here", "c_recurse"), err);
    // An offset needs no symbol: refused all the same.
    let offset = s.fails_as_nobody(&["--uprobe", &format!("{}:0x1000", hidden.display())]);
    assert!(offset.contains(&expected), "{offset}");

    // A root-only file nobody can see but not read.
    let err = s.fails_as_nobody(&["--uprobe", &format!("{}:c_recurse", private.display())]);
    assert!(
        err.contains(&format!(
            "cannot read {}: Permission denied",
            private.display()
        )),
        "{err}"
    );

    // USDT probes alike.
    let hidden_usdt = s.copy(usdt_target(), "secret/usdt_target", 0o755);
    let err = s.fails_as_nobody(&[
        "--usdt",
        &format!("{}:trace_c:constant", hidden_usdt.display()),
    ]);
    assert!(
        err.contains(&format!(
            "cannot read {}: Permission denied",
            hidden_usdt.display()
        )),
        "{err}"
    );
    assert!(!err.contains("no probe"), "{err}");
    let absent = s.fails_as_nobody(&["--usdt", &format!("{}:trace_c:constant", missing.display())]);
    assert_eq!(without(&absent, &missing), without(&err, &hidden_usdt));

    // Root still reads them all (as before): the same probe resolves, and
    // only fails for the symbol that is not there.
    let out = Command::new(trace_cli())
        .arg("record")
        .arg("-o")
        .arg(s.dir.join("out/root.fxt"))
        .args([
            "--uprobe",
            &format!("{}:no_such_function_here", hidden.display()),
        ])
        .env("TRACE_MANAGER_SOCKET", &s.socket)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("no function `no_such_function_here`"), "{err}");
}

#[test]
fn another_users_process_is_looked_into_only_as_that_user_could() {
    let s = Setup::new("other-process");
    // A process of root's, running a program anyone may read.
    let mut target = Command::new(uprobe_target())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(target.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid = line.trim().strip_prefix("pid=").unwrap().to_owned();

    // Its program, through /proc/PID/exe: nobody may not follow that link.
    let err = s.fails_as_nobody(&["--uprobe", "c_recurse", "-p", &pid]);
    assert!(
        err.contains(&format!("cannot read /proc/{pid}/exe: Permission denied")),
        "{err}"
    );
    // Its libraries, through /proc/PID/maps: nothing of them is said.
    let err = s.fails_as_nobody(&["--uprobe", "libc:malloc", "-p", &pid]);
    assert!(err.contains("cannot read libc:"), "{err}");
    assert!(!err.contains(".so"), "{err}");
    let err = s.fails_as_nobody(&["--usdt", "trace_c:constant", "-p", &pid]);
    assert!(err.contains("Permission denied"), "{err}");
    assert!(!err.contains(".so") && !err.contains("it has"), "{err}");

    let _ = target.kill();
    let _ = target.wait();
}

/// The complete `c_recurse` durations of `events`.
fn c_recurse_spans(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| e.category == "uprobe" && e.name == "c_recurse")
        .filter(|e| matches!(e.kind, EventKind::DurationComplete { .. }))
        .count()
}

#[test]
fn a_program_the_client_can_read_is_probed() {
    let s = Setup::new("readable");
    let public = s.copy(uprobe_target(), "public/uprobe_target", 0o755);
    let file = s.dir.join("out/probed.fxt");
    let mut recorder = s
        .record_as_nobody(
            "probed.fxt",
            &[
                "-c",
                "kernel:proc",
                "-d",
                "3",
                "--uprobe",
                &format!("{}:c_recurse", public.display()),
            ],
        )
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(recorder.stderr.take().unwrap());
    wait_for_recording(&mut err);
    // Probed in every process running the file: 2 top-level calls, 3 deep.
    let mut target = Command::new(&public)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(target.stdout.take().unwrap());
    let mut stdin = target.stdin.take().unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    stdin.write_all(b"0 2\n").unwrap();
    stdin.flush().unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "done 6");
    drop(stdin);
    assert!(target.wait().unwrap().success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(
        recorder.wait().unwrap().success(),
        "{rest}\ndaemon log:\n{}",
        s.log()
    );

    let trace = parse(&file);
    assert!(trace.errors.is_empty(), "{:?}", trace.errors);
    assert_eq!(c_recurse_spans(&trace.events), 6);
}
