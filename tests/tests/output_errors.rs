//! End-to-end: a full disk never leaves half a record and never leaves the
//! user waiting.
//!
//! Each test mounts a tmpfs of 1 MiB of its own, records every kernel
//! category into it (with a thread of the test making system calls, so it
//! fills in a second or two) and checks that `trace-cli record` ends by
//! itself soon after the disk filled, with a non-zero status and the
//! operating system's error, leaving a file of whole records that
//! `trace-cli dump` and `trace-cli check` read without a truncated record.

use std::fs::File;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tests::{parse, require_root, trace_cli};

/// The tmpfs's size.
const DISK_BYTES: u64 = 1 << 20;

/// How long `trace-cli` may take to end once the disk is (nearly) full.
const ENDS_WITHIN: Duration = Duration::from_secs(10);

/// A tmpfs of [`DISK_BYTES`] on `dir/disk`, unmounted (and `dir` removed)
/// on drop, also when the test fails.
struct Tmpfs {
    dir: PathBuf,
    disk: PathBuf,
}

impl Tmpfs {
    fn mount(name: &str) -> Tmpfs {
        require_root();
        let dir =
            std::env::temp_dir().join(format!("trace-e2e-output-{}-{name}", std::process::id()));
        let disk = dir.join("disk");
        std::fs::create_dir_all(&disk).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={DISK_BYTES}")])
            .arg("tmpfs")
            .arg(&disk)
            .status()
            .expect("running mount");
        assert!(status.success(), "mounting a tmpfs on {}", disk.display());
        Tmpfs { dir, disk }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(&self.disk)
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            // Busy: detached now, gone when its last user is.
            let _ = Command::new("umount").arg("-l").arg(&self.disk).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A thread of the test making about 50 000 system calls a second (with
/// `-a`, each is recorded), until dropped.
struct Load {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start() -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                for _ in 0..500 {
                    // SAFETY: getppid has no preconditions.
                    unsafe { libc::getppid() };
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        Load {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A process killed on drop (the command `trace-cli` left running).
struct KillOnDrop(Option<i32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            // SAFETY: kill has no memory preconditions.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// How a recording into the tmpfs went.
struct Run {
    status: ExitStatus,
    stderr: String,
    /// When the file had (nearly) filled the disk, if it did while
    /// `trace-cli` ran.
    full_at: Option<Instant>,
    /// When `trace-cli` ended.
    ended_at: Instant,
    started_at: Instant,
}

/// Runs `trace-cli record ARGS -o DISK/trace.fxt`, with the test's load,
/// watching the file grow; fails the test if it does not end within 90 s.
/// Standard error goes to a file: a command left running keeps it open.
fn record(fs: &Tmpfs, args: &[&str]) -> Run {
    let out = fs.disk.join("trace.fxt");
    let stderr_path = fs.dir.join("stderr.txt");
    let _load = Load::start();
    let started_at = Instant::now();
    let mut child = Command::new(trace_cli())
        .arg("record")
        .args(["-c", "kernel:*", "-o"])
        .arg(&out)
        .args(args)
        // An embedded manager of its own, on a socket off the tmpfs.
        .env("TRACE_MANAGER_SOCKET", fs.dir.join("manager.sock"))
        .stdout(Stdio::null())
        .stderr(File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let deadline = started_at + Duration::from_secs(90);
    let mut full_at = None;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        let size = std::fs::metadata(&out).map_or(0, |m| m.size());
        if full_at.is_none() && size >= DISK_BYTES * 3 / 4 {
            full_at = Some(Instant::now());
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "trace-cli record {args:?} did not end within 90 s: {}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let ended_at = Instant::now();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    eprintln!(
        "trace-cli record {args:?}: {status} after {:.2} s{}; {} bytes\n{stderr}",
        (ended_at - started_at).as_secs_f64(),
        full_at.map_or(String::new(), |f| format!(
            ", {:.2} s after the disk filled",
            (ended_at - f).as_secs_f64()
        )),
        std::fs::metadata(&out).map_or(0, |m| m.size()),
    );
    Run {
        status,
        stderr,
        full_at,
        ended_at,
        started_at,
    }
}

/// The file is whole records and nothing else, which `dump` reads with
/// exit status 0 and `check` without a truncated record.
fn assert_whole_records(path: &Path) {
    let len = std::fs::metadata(path).unwrap().len();
    assert!(len > 0, "{} is empty", path.display());
    let t = parse(path);
    assert!(
        t.starts_with_magic,
        "{} does not start with FXT's magic",
        path.display()
    );
    assert!(
        t.errors.is_empty(),
        "{} ({len} bytes) has undecodable records: {:?}",
        path.display(),
        t.errors
    );
    assert!(
        t.records > 10,
        "{} holds {} records",
        path.display(),
        t.records
    );
    let dump = Command::new(trace_cli())
        .arg("dump")
        .arg(path)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(
        dump.status.success(),
        "trace-cli dump: {}",
        String::from_utf8_lossy(&dump.stderr)
    );
    let check = Command::new(trace_cli())
        .arg("check")
        .arg(path)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(
        !report.contains("truncated_record") && !report.contains("not_fxt"),
        "trace-cli check: {report}"
    );
}

/// Asserts the run failed because of the full disk, soon after it filled.
fn assert_failed_on_full_disk(run: &Run) {
    assert!(!run.status.success(), "trace-cli succeeded: {}", run.stderr);
    assert!(
        run.stderr.contains("No space left on device (os error 28)"),
        "the error does not say the disk is full: {}",
        run.stderr
    );
    let full_at = run.full_at.unwrap_or_else(|| {
        panic!(
            "the disk never filled while trace-cli ran ({:.1} s): {}",
            (run.ended_at - run.started_at).as_secs_f64(),
            run.stderr
        )
    });
    assert!(
        run.ended_at - full_at < ENDS_WITHIN,
        "trace-cli ended {:.1} s after the disk filled: {}",
        (run.ended_at - full_at).as_secs_f64(),
        run.stderr
    );
}

#[test]
fn a_full_disk_ends_the_recording_with_whole_records_and_the_os_error() {
    let fs = Tmpfs::mount("direct");
    // No duration, no command: before, it recorded on until Ctrl-C.
    let run = record(&fs, &[]);
    assert_failed_on_full_disk(&run);
    assert!(
        run.stderr.contains(&format!(
            "writing the trace to {}",
            fs.disk.join("trace.fxt").display()
        )),
        "the error does not name the file: {}",
        run.stderr
    );
    assert_whole_records(&fs.disk.join("trace.fxt"));
}

#[test]
fn a_command_is_not_waited_for_when_the_recording_fails() {
    let fs = Tmpfs::mount("command");
    let run = record(&fs, &["-a", "--", "sleep", "30"]);
    // The command is left running, and named.
    let pid: Option<i32> = run
        .stderr
        .split("the command (pid ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|p| p.parse().ok());
    let _sleep = KillOnDrop(pid);
    assert_failed_on_full_disk(&run);
    assert!(
        run.ended_at - run.started_at < Duration::from_secs(25),
        "trace-cli waited for the command: {}",
        run.stderr
    );
    let pid = pid.unwrap_or_else(|| panic!("no pid of the command: {}", run.stderr));
    assert!(
        run.stderr.contains("is still running"),
        "the user is not told the command still runs: {}",
        run.stderr
    );
    // SAFETY: kill with signal 0 only checks the process exists.
    assert_eq!(unsafe { libc::kill(pid, 0) }, 0, "the command was killed");
    assert_whole_records(&fs.disk.join("trace.fxt"));
}

#[test]
fn a_deferred_trace_copied_onto_a_full_disk_is_cut_back_to_whole_records() {
    let fs = Tmpfs::mount("deferred");
    // Recorded into the manager's staging file (not on the tmpfs), copied
    // to the tmpfs at the end: the copy fills it.
    let run = record(&fs, &["--defer-transfer", "-d", "3"]);
    assert!(!run.status.success(), "trace-cli succeeded: {}", run.stderr);
    assert!(
        run.stderr.contains("No space left on device (os error 28)"),
        "the error does not say the disk is full: {}",
        run.stderr
    );
    assert!(
        run.ended_at - run.started_at < Duration::from_secs(30),
        "trace-cli took {:.1} s: {}",
        (run.ended_at - run.started_at).as_secs_f64(),
        run.stderr
    );
    assert_whole_records(&fs.disk.join("trace.fxt"));
}

/// Every file in `dir`, sorted.
fn files_in(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

#[test]
fn rotated_files_on_a_full_disk_end_on_whole_records_and_none_is_left_empty() {
    let fs = Tmpfs::mount("rotate");
    let run = record(&fs, &["--rotate", "256K"]);
    assert!(!run.status.success(), "trace-cli succeeded: {}", run.stderr);
    assert!(
        run.stderr.contains("No space left on device (os error 28)"),
        "the error does not say the disk is full: {}",
        run.stderr
    );
    // The cause, not its effect on the manager's pipe.
    assert!(!run.stderr.contains("Broken pipe"), "{}", run.stderr);
    let files = files_in(&fs.disk);
    assert!(files.len() > 1, "{files:?}");
    for f in &files {
        assert_whole_records(f);
    }
}

#[test]
fn a_pre_window_written_onto_a_full_disk_ends_on_whole_records() {
    let fs = Tmpfs::mount("pre");
    let run = record(
        &fs,
        &["--pre", "2", "--trigger", "signal:SIGUSR2", "-d", "3"],
    );
    assert!(!run.status.success(), "trace-cli succeeded: {}", run.stderr);
    assert!(
        run.stderr.contains("No space left on device (os error 28)"),
        "the error does not say the disk is full: {}",
        run.stderr
    );
    assert_whole_records(&fs.disk.join("trace.fxt"));
}

#[test]
fn a_rotation_killed_leaves_no_empty_or_cut_file() {
    require_root();
    let dir = std::env::temp_dir().join(format!("trace-e2e-output-{}-killed", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let _load = Load::start();
    let mut child = Command::new(trace_cli())
        .arg("record")
        .args(["-c", "kernel:*", "--rotate", "64K", "-o"])
        .arg(dir.join("trace.fxt"))
        .env("TRACE_MANAGER_SOCKET", dir.join("manager.sock"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed while it cuts files as fast as the load fills them.
    let deadline = Instant::now() + Duration::from_secs(60);
    while tests::rotated_files(&dir).len() < 8 {
        assert!(
            Instant::now() < deadline,
            "no rotation: {:?}",
            files_in(&dir)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let files = tests::rotated_files(&dir);
    for f in &files {
        assert_whole_records(f);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
