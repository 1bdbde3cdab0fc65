//! `report_syscalls [--wait-stdin] [--sleep-ms N] [--extra-sleep-ms N]`:
//! exactly 1000 `getppid` and 10 `open`s of a file that does not exist
//! (each failing with ENOENT), then a sleep of N ms (default 50) and one
//! of the extra ms (default 0), for the system call figures and the diff
//! of `trace-cli report`.
//!
//! With `--wait-stdin` it prints `pid=P` and waits for a line on standard
//! input first (to be recorded with `-p`). Prints `done` at the end.

use std::time::Duration;

/// `getppid` calls.
const GETPPID: u32 = 1000;
/// Failing opens.
const OPENS: u32 = 10;

fn main() {
    let flags = tests::workload::flags_or_exit(
        &[("sleep-ms", 50), ("extra-sleep-ms", 0)],
        &["wait-stdin"],
        "[--wait-stdin] [--sleep-ms N] [--extra-sleep-ms N]",
    );
    if flags.given("wait-stdin") {
        tests::workload::announce_and_wait();
    }
    for _ in 0..GETPPID {
        // SAFETY: getppid has no preconditions.
        unsafe { libc::getppid() };
    }
    let missing = c"/nonexistent-report-workload/missing-file";
    for _ in 0..OPENS {
        // SAFETY: a valid NUL-terminated path; the call fails with ENOENT.
        let fd = unsafe { libc::open(missing.as_ptr(), libc::O_RDONLY) };
        assert_eq!(fd, -1, "the file must not exist");
    }
    std::thread::sleep(Duration::from_millis(flags.number("sleep-ms")));
    let extra = flags.number("extra-sleep-ms");
    if extra > 0 {
        std::thread::sleep(Duration::from_millis(extra));
    }
    println!("done");
}
