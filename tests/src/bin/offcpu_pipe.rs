//! `offcpu_pipe [--delay-ms N] [--rounds K] [--wait-stdin]`: a thread that
//! blocks and the thread that wakes it, with known stacks and known blocked
//! times, for the off-CPU tests (`-c kernel:offcpu`).
//!
//! K times (default 3): the thread named `reader` blocks in
//! `offcpu_pipe::blocked_reader`, reading one byte from a pipe; the thread
//! named `writer`, in `offcpu_pipe::waking_writer`, sleeps N ms (default
//! 200) and writes that byte, which wakes the reader. With `--wait-stdin`
//! the program prints `pid=P` (its threads already started) and waits for a
//! line on standard input before the first round.
//!
//! At the end it prints `reader_tid=R writer_tid=W pid=P delay_ms=N`, then
//! one line per round, `round=I blocked_ns=B` (I from 0): how long the
//! reader's `read` took, as the reader measured it.

use std::hint::black_box;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use tests::workload::{announce_and_wait, flags_or_exit, gettid};

/// Reads one byte from `pipe`, blocking until the writer sends it.
#[inline(never)]
fn blocked_reader(pipe: &OwnedFd) -> u8 {
    let mut byte = 0u8;
    // SAFETY: reads at most one byte into `byte`, alive for the call.
    let n = unsafe { libc::read(pipe.as_raw_fd(), (&raw mut byte).cast(), 1) };
    assert_eq!(
        n,
        1,
        "reading the pipe: {}",
        std::io::Error::last_os_error()
    );
    black_box(byte)
}

/// Sleeps `delay`, then writes one byte to `pipe`, waking the reader.
#[inline(never)]
fn waking_writer(pipe: &OwnedFd, delay: Duration, byte: u8) {
    std::thread::sleep(delay);
    // SAFETY: writes one byte from `byte`, alive for the call.
    let n = unsafe { libc::write(pipe.as_raw_fd(), (&raw const byte).cast(), 1) };
    assert_eq!(
        n,
        1,
        "writing the pipe: {}",
        std::io::Error::last_os_error()
    );
    black_box(n);
}

/// A pipe: its read end and its write end.
fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: pipe2 returned two new descriptors that nothing else owns.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

fn main() {
    let flags = flags_or_exit(
        &[("delay-ms", 200), ("rounds", 3)],
        &["wait-stdin"],
        "[--delay-ms N] [--rounds K] [--wait-stdin]",
    );
    let (delay_ms, rounds) = (flags.number("delay-ms"), flags.number("rounds"));
    let (read_end, write_end) = pipe();
    let start = Arc::new(Barrier::new(3));

    let reader = {
        let start = Arc::clone(&start);
        std::thread::Builder::new()
            .name("reader".to_owned())
            .spawn(move || {
                start.wait();
                let blocked: Vec<u64> = (0..rounds)
                    .map(|_| {
                        let from = Instant::now();
                        blocked_reader(&read_end);
                        from.elapsed().as_nanos() as u64
                    })
                    .collect();
                (gettid(), blocked)
            })
            .expect("starting the reader")
    };
    let writer = {
        let start = Arc::clone(&start);
        std::thread::Builder::new()
            .name("writer".to_owned())
            .spawn(move || {
                start.wait();
                for round in 0..rounds {
                    waking_writer(&write_end, Duration::from_millis(delay_ms), round as u8);
                }
                gettid()
            })
            .expect("starting the writer")
    };
    if flags.given("wait-stdin") {
        announce_and_wait();
    }
    start.wait();
    let (reader_tid, blocked) = reader.join().expect("the reader");
    let writer_tid = writer.join().expect("the writer");
    println!(
        "reader_tid={reader_tid} writer_tid={writer_tid} pid={} delay_ms={delay_ms}",
        std::process::id()
    );
    for (round, ns) in blocked.iter().enumerate() {
        println!("round={round} blocked_ns={ns}");
    }
}
