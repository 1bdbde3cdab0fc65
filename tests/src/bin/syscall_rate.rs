//! `syscall_rate RATE SECONDS [THREADS]`: THREADS threads (default: one per
//! online CPU, each pinned to its CPU) make `getppid` system calls at RATE
//! calls per second in all (0: as fast as they can) for SECONDS seconds,
//! in bursts every 100 µs, then print `calls=N seconds=S rate=R` (the rate
//! they reached). For `cargo xtask bench throughput`: the highest rate a
//! recording keeps up with, without a drop.

use std::time::{Duration, Instant};

fn main() {
    let mut args = std::env::args().skip(1);
    let rate: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0.0);
    let seconds: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1.0);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(cpus);
    let per_thread = rate / threads as f64;
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    let workers: Vec<_> = (0..threads)
        .map(|i| {
            std::thread::spawn(move || {
                pin(i % cpus);
                let mut calls = 0u64;
                loop {
                    let now = Instant::now();
                    if now >= end {
                        break;
                    }
                    let due = if per_thread > 0.0 {
                        (now.duration_since(start).as_secs_f64() * per_thread) as u64
                    } else {
                        calls + 1000
                    };
                    if calls >= due {
                        std::hint::spin_loop();
                        continue;
                    }
                    // Catch up in bursts of at most 100 µs worth.
                    let burst = (due - calls).min(if per_thread > 0.0 {
                        (per_thread / 10_000.0).max(1.0) as u64
                    } else {
                        1000
                    });
                    for _ in 0..burst {
                        // SAFETY: getppid has no preconditions.
                        unsafe { libc::syscall(libc::SYS_getppid) };
                    }
                    calls += burst;
                }
                calls
            })
        })
        .collect();
    let calls: u64 = workers.into_iter().map(|w| w.join().unwrap_or(0)).sum();
    let took = start.elapsed().as_secs_f64();
    println!(
        "calls={calls} seconds={took:.3} rate={:.0}",
        calls as f64 / took
    );
}

/// Pins the calling thread to `cpu` (best effort).
fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes inside it;
    // sched_setaffinity(0) applies to the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}
