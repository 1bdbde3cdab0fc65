//! `syscall_workload [ROUNDS]`: a process that makes a known sequence of
//! system calls on two threads when told to, for the `kernel:syscall` and
//! pid-filter end-to-end tests.
//!
//! It prints `pid=P main=T worker=W` and waits for a line on stdin; then
//! each thread makes ROUNDS (default 5) rounds of: `getpid`, `write` of
//! 5 bytes to /dev/null, `nanosleep` of 1 ms; the main thread also makes one
//! `close` of a bad descriptor (which fails with EBADF). It prints `done`
//! and waits for stdin to close before exiting, so it can be triggered
//! again by another line.

use std::io::{BufRead, Write};
use std::os::fd::AsRawFd;

fn gettid() -> u64 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u64 }
}

/// One round of the known sequence, with the raw system calls (no libc
/// caching or wrapping in between).
fn round(devnull: i32) {
    // SAFETY: plain system calls on a descriptor this process owns and a
    // buffer that outlives the calls.
    unsafe {
        libc::syscall(libc::SYS_getpid);
        libc::syscall(libc::SYS_write, devnull, b"hello".as_ptr(), 5usize);
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 1_000_000,
        };
        libc::syscall(
            libc::SYS_nanosleep,
            &ts as *const libc::timespec,
            std::ptr::null_mut::<libc::timespec>(),
        );
    }
}

fn main() {
    let rounds: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    let devnull = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .expect("opening /dev/null");
    let fd = devnull.as_raw_fd();
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("sc-worker".into())
        .spawn(move || {
            tid_tx.send(gettid()).unwrap();
            for () in go_rx {
                for _ in 0..rounds {
                    round(fd);
                }
                done_tx.send(()).unwrap();
            }
        })
        .unwrap();
    let worker = tid_rx.recv().unwrap();
    println!(
        "pid={} main={} worker={worker}",
        std::process::id(),
        gettid()
    );
    std::io::stdout().flush().unwrap();

    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        if line.is_err() {
            break;
        }
        go_tx.send(()).unwrap();
        for _ in 0..rounds {
            round(fd);
        }
        // SAFETY: closing a descriptor number no file uses fails with EBADF
        // and changes nothing.
        unsafe { libc::syscall(libc::SYS_close, 100_000) };
        done_rx.recv().unwrap();
        println!("done");
        std::io::stdout().flush().unwrap();
    }
    drop(devnull);
}
