//! `preempted`: a provider (`preempted`, category `app`) whose `victim`
//! thread, pinned to the last CPU, does 150 ms of CPU work inside a `work`
//! span while two CPU-bound threads, `hog-1` and `hog-2`, pinned to the
//! same CPU, spin.
//!
//! It waits (up to 10 s) for a trace to enable `app`, then prints
//! `victim=TID cpu_ns=N wall_ns=N`: the victim's CPU time and wall time
//! in the span, as it measured them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// CPU time the victim spends in its span.
const WORK: Duration = Duration::from_millis(150);

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) {
    tests::workload::pin(cpu).expect("sched_setaffinity");
}

/// The calling thread's CPU time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn main() {
    let _provider = trace_provider::init_with_categories("preempted", &["app"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !trace_provider::category_enabled!("app") {
        assert!(Instant::now() < deadline, "no trace enabled category app");
        std::thread::sleep(Duration::from_millis(5));
    }
    let cpu = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
    let stop = Arc::new(AtomicBool::new(false));
    let hogs: Vec<_> = (1..=2)
        .map(|i| {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name(format!("hog-{i}"))
                .spawn(move || {
                    pin(cpu);
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                    }
                })
                .expect("a hog")
        })
        .collect();
    let victim = std::thread::Builder::new()
        .name("victim".into())
        .spawn(move || {
            pin(cpu);
            // Let the hogs settle on the CPU.
            std::thread::sleep(Duration::from_millis(50));
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            let (wall, cpu0) = (Instant::now(), thread_cpu());
            {
                trace_provider::duration!("app", "work");
                let mut x = 0u64;
                while thread_cpu() - cpu0 < WORK {
                    for _ in 0..1000 {
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                    }
                }
            }
            (
                tid,
                (thread_cpu() - cpu0).as_nanos(),
                wall.elapsed().as_nanos(),
            )
        })
        .expect("the victim");
    let (tid, cpu_ns, wall_ns) = victim.join().expect("the victim");
    stop.store(true, Ordering::Relaxed);
    for h in hogs {
        h.join().expect("a hog");
    }
    println!("victim={tid} cpu_ns={cpu_ns} wall_ns={wall_ns}");
}
