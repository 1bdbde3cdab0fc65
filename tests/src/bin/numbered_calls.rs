//! `numbered_calls SECONDS INTERVAL_US [segv | fsync:PATH]`: makes numbered
//! system calls, for the flight recorder's tests: every INTERVAL_US
//! microseconds a `close` of descriptor 1 000 000 + N (it fails with EBADF;
//! the number is in the call's `fd` argument), N from 0, until SECONDS
//! have passed. Prints `pid=P` first and `calls=N` after the calls. Then,
//! with `segv`, it dies of a segmentation fault; with `fsync:PATH`, it
//! writes 32 MiB to PATH, calls `fsync` on it (a slow call) and removes it.

use std::io::Write;
use std::time::{Duration, Instant};

/// The descriptor of call number 0.
pub const BASE: u64 = 1_000_000;

fn main() {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(5.0);
    let interval = Duration::from_micros(args.next().and_then(|a| a.parse().ok()).unwrap_or(500));
    let then = args.next().unwrap_or_default();
    println!("pid={}", std::process::id());
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let mut n = 0u64;
    while Instant::now() < until {
        // SAFETY: closing a descriptor that is not open only fails.
        unsafe { libc::syscall(libc::SYS_close, BASE + n) };
        n += 1;
        std::thread::sleep(interval);
    }
    println!("calls={n}");
    let _ = std::io::stdout().flush();
    if then == "segv" {
        // SAFETY: none: this is the crash the test wants, a write through a
        // null pointer, which the kernel answers with SIGSEGV.
        unsafe { std::ptr::write_volatile(std::ptr::null_mut::<u64>(), 1) };
    } else if let Some(path) = then.strip_prefix("fsync:") {
        let mut file = std::fs::File::create(path).expect("creating the file");
        let block = vec![0x5au8; 1 << 20];
        for _ in 0..32 {
            file.write_all(&block).expect("writing the file");
        }
        file.sync_all().expect("fsync");
        drop(file);
        let _ = std::fs::remove_file(path);
    }
}
