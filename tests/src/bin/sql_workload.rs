//! `sql_workload FILE`: a process with known figures in every SQL table,
//! for the `trace-cli query` and `export` end-to-end tests.
//!
//! It registers as provider `sql-app` (category `app`) and waits until a
//! trace enables the category, then prints `pid=P tid=T enabled=0|1` and
//! on its main thread:
//! - makes 1000 `getppid` and 10 `openat` of a missing file (ENOENT);
//! - sleeps 10 x 20 ms (switches and wake-ups), and waits 20 ms for a
//!   thread's message (a futex wait, woken by that thread);
//! - writes 100 `step` durations, each enclosing one `inner` duration,
//!   5 `mark` instants, 10 samples of counter `queue` (series `depth`,
//!   values 0 to 9) and 3 `request` async spans;
//! - spins 300 ms in `sql_spin` (CPU profile samples);
//! - spins 30 ms more with a `sql-rival` thread pinned to its CPU, which
//!   preempt each other (waits in state `R`);
//! - writes 4 MiB to FILE with direct I/O, so that the block requests are
//!   its own whatever the page cache's writeback does, flushes it to disk
//!   and removes it.
//!
//! Then it prints `done`.

use std::io::Write;
use std::time::{Duration, Instant};

/// Writes 4 MiB to `file` and flushes it: with `O_DIRECT` where the file
/// system takes it (each write then issues its block requests from this
/// process, not from a writeback thread that a recording of this process
/// leaves out), buffered otherwise.
fn write_to_disk(file: &std::path::Path) {
    use std::os::unix::fs::OpenOptionsExt;
    const MIB: usize = 1 << 20;
    let layout = std::alloc::Layout::from_size_align(MIB, 4096).expect("a valid layout");
    // SAFETY: the layout has a non-zero size.
    let buf = unsafe { std::alloc::alloc(layout) };
    assert!(!buf.is_null(), "allocating the write buffer");
    // SAFETY: `buf` was just allocated with MIB bytes and is not aliased.
    let chunk = unsafe {
        buf.write_bytes(0x5a, MIB);
        std::slice::from_raw_parts(buf, MIB)
    };
    let open = |direct: bool| {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(if direct { libc::O_DIRECT } else { 0 })
            .open(file)
    };
    let mut f = open(true)
        .or_else(|_| open(false))
        .expect("creating the file");
    for _ in 0..4 {
        if f.write_all(chunk).is_err() {
            // Direct I/O refused at the first write: buffered instead.
            f = open(false).expect("creating the file");
            for _ in 0..4 {
                f.write_all(chunk).unwrap();
            }
            break;
        }
    }
    f.sync_all().unwrap();
    drop(f);
    // SAFETY: `buf` came from `alloc` with `layout`; `chunk` is not used
    // after this.
    unsafe { std::alloc::dealloc(buf, layout) };
}

fn gettid() -> i64 {
    // SAFETY: gettid has no preconditions.
    i64::from(unsafe { libc::gettid() })
}

/// The raw system calls, so no C library caching or wrapping changes
/// their number.
fn syscalls() {
    let missing = c"/nonexistent-sql-workload/missing-file";
    for _ in 0..1000 {
        // SAFETY: getppid has no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_getppid) };
    }
    for _ in 0..10 {
        // SAFETY: a valid NUL-terminated path; the call fails (ENOENT).
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                missing.as_ptr(),
                libc::O_RDONLY,
            )
        };
        assert_eq!(fd, -1, "the missing file exists");
    }
}

fn inner(seq: u64) -> u64 {
    trace_provider::duration!("app", "inner", "seq" => seq);
    std::hint::black_box(seq.wrapping_mul(31))
}

fn step(seq: u64) -> u64 {
    trace_provider::duration!("app", "step", "seq" => seq);
    inner(seq)
}

#[inline(never)]
fn sql_spin(until: Instant) -> u64 {
    let mut x = 1u64;
    while Instant::now() < until {
        for i in 0..10_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
    }
    std::hint::black_box(x)
}

/// Spins for `wall` on this thread's CPU with a `sql-rival` thread pinned
/// to it, so that each preempts the other.
fn contend(wall: Duration) {
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = usize::try_from(unsafe { libc::sched_getcpu() }).unwrap_or(0);
    tests::workload::pin(cpu).expect("sched_setaffinity");
    let until = Instant::now() + wall;
    let rival = std::thread::Builder::new()
        .name("sql-rival".into())
        .spawn(move || {
            tests::workload::pin(cpu).expect("sched_setaffinity");
            sql_spin(until)
        })
        .expect("the rival thread");
    sql_spin(until);
    rival.join().expect("the rival");
}

fn main() {
    let file = std::env::args().nth(1).expect("usage: sql_workload FILE");
    let _provider = trace_provider::init_with_categories("sql-app", &["app"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !trace_provider::category_enabled!("app") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let enabled = trace_provider::category_enabled!("app");
    println!(
        "pid={} tid={} enabled={}",
        std::process::id(),
        gettid(),
        u8::from(enabled)
    );
    std::io::stdout().flush().unwrap();

    syscalls();
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        tx.send(()).expect("the receiver");
    });
    rx.recv().expect("the message");
    sender.join().expect("the sender");
    for seq in 0..100 {
        step(seq);
    }
    for seq in 0..5u64 {
        trace_provider::instant!("app", "mark", "seq" => seq);
    }
    for depth in 0..10u64 {
        trace_provider::counter!("app", "queue", 0, "depth" => depth);
    }
    for id in 0..3u64 {
        trace_provider::async_begin!("app", "request", id);
        std::thread::sleep(Duration::from_millis(1));
        trace_provider::async_end!("app", "request", id);
    }
    sql_spin(Instant::now() + Duration::from_millis(300));
    contend(Duration::from_millis(30));

    write_to_disk(std::path::Path::new(&file));
    std::fs::remove_file(&file).ok();
    println!("done");
}
