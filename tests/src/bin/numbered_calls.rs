//! `numbered_calls SECONDS INTERVAL_US`: makes numbered system calls, for
//! the flight recorder's tests: every INTERVAL_US microseconds a `close` of
//! descriptor 1 000 000 + N (it fails with EBADF; the number is in the
//! call's `fd` argument), N from 0, until SECONDS have passed. Prints
//! `pid=P` first and `calls=N` at the end.

use std::time::{Duration, Instant};

/// The descriptor of call number 0.
pub const BASE: u64 = 1_000_000;

fn main() {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(5.0);
    let interval = Duration::from_micros(args.next().and_then(|a| a.parse().ok()).unwrap_or(500));
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
}
