//! A busy program for the end-to-end timeline test, instrumented with
//! `trace-provider` (registers as `busy-workload`, category `busy`).
//!
//! `busy_workload SECONDS DIR`: until SECONDS have passed, every round
//! starts three threads that make system calls, fault pages in and write an
//! async span each (ids unique in the process) and end; starts a child
//! process and waits for it; sends itself SIGUSR1 three times (a handler
//! that returns); appends 64 KiB to a file in DIR and fsyncs it; and writes
//! a burst of instants, so that a small provider buffer drops records.
//! Prints its pid and main thread id on its first line.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

static SIGNALS: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALS.fetch_add(1, Ordering::Relaxed);
}

fn tid() -> i64 {
    // SAFETY: gettid has no preconditions.
    i64::from(unsafe { libc::gettid() })
}

fn thread_work(id: u64) {
    trace_provider::duration!("busy", "thread_work", "id" => id);
    trace_provider::async_begin!("busy", "request", id, "id" => id);
    for _ in 0..100 {
        // SAFETY: getppid has no preconditions.
        std::hint::black_box(unsafe { libc::getppid() });
    }
    // Fresh pages, each touched once: page faults.
    let mut pages = vec![0u8; 32 * 4096];
    for p in pages.chunks_mut(4096) {
        p[0] = 1;
    }
    std::hint::black_box(&pages);
    trace_provider::async_end!("busy", "request", id);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(5.0);
    let dir = std::path::PathBuf::from(args.next().unwrap_or_else(|| ".".into()));
    let _provider = trace_provider::init_with_categories("busy-workload", &["busy"]);
    // SAFETY: installs a handler that only touches an atomic.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
    println!("pid={} main={}", std::process::id(), tid());
    std::io::stdout().flush().ok();
    let pid = u64::from(std::process::id());
    let path = dir.join(format!("busy-{pid}.dat"));
    let mut file = std::fs::File::create(&path).expect("creating the data file");
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let mut round = 0u64;
    while Instant::now() < until {
        let threads: Vec<_> = (0..3u64)
            .map(|i| {
                let id = (pid << 32) | (round * 4 + i);
                std::thread::spawn(move || thread_work(id))
            })
            .collect();
        for t in threads {
            t.join().expect("worker");
        }
        std::process::Command::new("/bin/true")
            .status()
            .expect("running /bin/true");
        for _ in 0..3 {
            // SAFETY: sends a signal whose handler is installed.
            unsafe { libc::kill(libc::getpid(), libc::SIGUSR1) };
        }
        file.write_all(&[round as u8; 65536]).expect("writing");
        file.sync_all().expect("fsync");
        for k in 0..2000u64 {
            trace_provider::instant!("busy", "burst", "k" => k);
        }
        round += 1;
        // Busy, but within what a debug build of the manager keeps up with.
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(file);
    let _ = std::fs::remove_file(&path);
    println!("rounds={round} signals={}", SIGNALS.load(Ordering::Relaxed));
}
