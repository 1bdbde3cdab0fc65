//! `syscall_loop N [PAUSE_MS]`: makes N `getppid` system calls as fast as
//! it can, then pauses PAUSE_MS milliseconds (default 0: the recorder may
//! catch up on its buffers before the last calls), and prints `pid=P
//! calls=N`. For the end-to-end tests of drop accounting and kernel
//! buffering modes.

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let pause_ms: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    for _ in 0..n {
        // SAFETY: getppid has no preconditions.
        unsafe { libc::syscall(libc::SYS_getppid) };
    }
    std::thread::sleep(std::time::Duration::from_millis(pause_ms));
    println!("pid={} calls={n}", std::process::id());
}
