//! `cpu_time_workload [--threads N] [--spin-ms M] [--sleep-ms S]
//! [--wait-stdin]`: CPU time a recording must account exactly, for the
//! tests that `report` agrees with the process's own clock.
//!
//! Starts `N` threads (default 8) that each spin until they have used `M`
//! ms of CPU (default 20) and end, joins them, then sleeps `S` ms (default
//! 1000): a thread that ended must not be charged for what its CPU did
//! afterwards. Prints `pid=P cpu_ns=C total_cpu_ns=T`: the CPU time the
//! whole process used, ended threads included (CLOCK_PROCESS_CPUTIME_ID),
//! from its first instruction of `main` (after the handshake with
//! `--wait-stdin`) to the end of the sleep, and from its creation (the
//! fork, and the exec and loading before `main`). With `--wait-stdin` it prints `pid=P` and
//! waits for a line on standard input first, and waits for the end of
//! standard input before it exits.

use std::io::Read;
use std::time::Duration;

use tests::workload::{announce_and_wait, flags_or_exit, process_cpu_ns, thread_cpu_ns};

fn main() {
    let flags = flags_or_exit(
        &[("threads", 8), ("spin-ms", 20), ("sleep-ms", 1000)],
        &["wait-stdin"],
        "[--threads N] [--spin-ms M] [--sleep-ms S] [--wait-stdin]",
    );
    let wait = flags.given("wait-stdin");
    if wait {
        announce_and_wait();
    }
    let start = process_cpu_ns();
    let spin_ns = flags.number("spin-ms") * 1_000_000;
    let threads: Vec<_> = (0..flags.number("threads"))
        .map(|i| {
            std::thread::Builder::new()
                .name(format!("spinner-{i}"))
                .spawn(move || {
                    let mut x = 0u64;
                    while thread_cpu_ns() < spin_ns {
                        for _ in 0..10_000 {
                            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                        }
                    }
                    x
                })
                .expect("starting a thread")
        })
        .collect();
    for t in threads {
        t.join().expect("a spinning thread panicked");
    }
    std::thread::sleep(Duration::from_millis(flags.number("sleep-ms")));
    let total = process_cpu_ns();
    println!(
        "pid={} cpu_ns={} total_cpu_ns={total}",
        std::process::id(),
        total - start
    );
    if wait {
        let mut rest = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut rest);
    }
}
