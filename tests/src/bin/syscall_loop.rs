//! `syscall_loop N`: makes N `getppid` system calls as fast as it can and
//! prints `pid=P calls=N`. For the end-to-end test of drop accounting.

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    for _ in 0..n {
        // SAFETY: getppid has no preconditions.
        unsafe { libc::syscall(libc::SYS_getppid) };
    }
    println!("pid={} calls={n}", std::process::id());
}
