//! `tp_workload ROUNDS IDS_FILE MARKER`: hits known tracepoints a known
//! number of times, for the `-e` end-to-end tests.
//!
//! The main thread, named `tp_workload`, makes ROUNDS of each:
//! - `openat(AT_FDCWD, MARKER)` (`syscalls:sys_enter_openat`);
//! - `kill(self, SIGUSR1)`, handled (`signal:signal_generate`, sig 10);
//! - `sendmsg` with 1234 bytes of (invalid) control data, which the kernel
//!   copies into a `kmalloc` of exactly 1234 bytes before refusing it
//!   (`kmem:kmalloc`, bytes_req 1234);
//! - `getpid` (`syscalls:sys_enter_getpid` / `sys_exit_getpid`).
//!
//! A thread named `tp_migrate`, pinned to the CPU it runs on, then moves to
//! the other CPU and back, ROUNDS moves in all (`sched:sched_migrate_task`,
//! which the kernel's migration thread records; needs 2 CPUs).
//!
//! It writes `pid=P main=T migrate=M` to IDS_FILE before exiting.

use std::ffi::CString;

extern "C" fn on_usr1(_: libc::c_int) {}

fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

fn name_thread(name: &str) {
    let name = CString::new(name).unwrap();
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
}

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is an empty set; the calls only write it
    // and read it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set),
            0,
            "sched_setaffinity"
        );
    }
}

fn migrate(rounds: usize) -> i32 {
    name_thread("tp_migrate");
    // SAFETY: sched_getcpu has no preconditions.
    let here = unsafe { libc::sched_getcpu() } as usize;
    pin(here);
    let other = if here == 0 { 1 } else { 0 };
    for i in 0..rounds {
        pin(if i % 2 == 0 { other } else { here });
        // Runs on the new CPU before the next move.
        std::thread::yield_now();
    }
    gettid()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args[1].parse().unwrap();
    let ids_file = &args[2];
    let marker = CString::new(args[3].as_str()).unwrap();
    name_thread("tp_workload");

    let migrating = std::thread::spawn(move || migrate(rounds));

    // SAFETY: the handler is an `extern "C"` function that does nothing.
    unsafe {
        libc::signal(
            libc::SIGUSR1,
            on_usr1 as extern "C" fn(libc::c_int) as libc::sighandler_t,
        )
    };
    let mut socks = [0; 2];
    // SAFETY: `socks` has room for the two descriptors.
    let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM, 0, socks.as_mut_ptr()) };
    assert_eq!(r, 0, "socketpair");
    let mut control = vec![0u8; 1234];
    let mut byte = [0u8; 1];
    for _ in 0..rounds {
        // SAFETY: plain system calls on a path, descriptors and buffers
        // this process owns, alive for the calls.
        unsafe {
            let fd = libc::openat(libc::AT_FDCWD, marker.as_ptr(), libc::O_RDONLY);
            assert!(fd >= 0, "opening the marker");
            libc::close(fd);
            libc::kill(libc::getpid(), libc::SIGUSR1);
            let mut iov = libc::iovec {
                iov_base: byte.as_mut_ptr().cast(),
                iov_len: 1,
            };
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = control.len();
            // Fails (the control data is no valid cmsg) after the copy.
            libc::sendmsg(socks[0], &msg, 0);
            libc::syscall(libc::SYS_getpid);
        }
    }
    let migrate = migrating.join().unwrap();
    std::fs::write(
        ids_file,
        format!(
            "pid={} main={} migrate={migrate}\n",
            std::process::id(),
            gettid()
        ),
    )
    .unwrap();
}
