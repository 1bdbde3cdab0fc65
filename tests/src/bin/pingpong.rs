//! A known workload for the end-to-end tests: two named threads bounce a
//! byte over a pair of pipes a given number of times, both pinned to one CPU
//! so that the scheduler switches directly from one to the other.
//!
//! Usage: `pingpong ROUNDS [CPU]`. Prints `pid=<pid> ping=<tid> pong=<tid>`
//! on standard output before it starts, and `elapsed_ns=<n>` (the time the
//! rounds took) on standard error at the end.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::sync::mpsc;

fn pipe() -> (File, File) {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2 failed");
    // SAFETY: both descriptors were just created and are owned by nobody else.
    unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) }
}

fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and
    // sched_setaffinity only read and write that local set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn gettid() -> i64 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let cpu: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);

    // ping → pong, and pong → ping.
    let (mut to_pong_read, mut to_pong_write) = pipe();
    let (mut to_ping_read, mut to_ping_write) = pipe();
    let (tid_tx, tid_rx) = mpsc::channel();
    let started = std::time::Instant::now();

    let tx = tid_tx.clone();
    let ping = std::thread::Builder::new()
        .name("ping-a".into())
        .spawn(move || {
            pin_to(cpu);
            tx.send(("ping", gettid())).unwrap();
            let mut byte = [0u8; 1];
            for _ in 0..rounds {
                to_pong_write.write_all(b"x").unwrap();
                to_ping_read.read_exact(&mut byte).unwrap();
            }
        })
        .unwrap();
    let tx = tid_tx;
    let pong = std::thread::Builder::new()
        .name("pong-b".into())
        .spawn(move || {
            pin_to(cpu);
            tx.send(("pong", gettid())).unwrap();
            let mut byte = [0u8; 1];
            for _ in 0..rounds {
                to_pong_read.read_exact(&mut byte).unwrap();
                to_ping_write.write_all(b"y").unwrap();
            }
        })
        .unwrap();
    let mut tids = [0i64; 2];
    for _ in 0..2 {
        let (who, tid) = tid_rx.recv().unwrap();
        tids[usize::from(who == "pong")] = tid;
    }
    println!(
        "pid={} ping={} pong={}",
        std::process::id(),
        tids[0],
        tids[1]
    );
    std::io::stdout().flush().unwrap();
    ping.join().unwrap();
    pong.join().unwrap();
    eprintln!("elapsed_ns={}", started.elapsed().as_nanos());
}
