//! A program instrumented with `trace-provider`, for the end-to-end tests.
//!
//! `provider_app SECONDS [INTERVAL_US]`: registers as `provider-app`, then
//! every INTERVAL_US (default 2000) microseconds writes a `work` duration
//! (with a sequence number) around a few microseconds of computation and a
//! `tick` instant, on its main thread and on a second thread named `worker`,
//! until SECONDS have passed; the main thread raises the alert `seq-500`
//! at its 500th round. Prints its pid and thread ids on stdout.

use std::time::{Duration, Instant};

fn work(seq: u64) -> u64 {
    trace_provider::duration!("app", "work", "seq" => seq);
    let mut x = seq;
    for i in 0..2_000u64 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    std::hint::black_box(x)
}

fn run(until: Instant, interval: Duration) -> u64 {
    let mut seq = 0u64;
    while Instant::now() < until {
        work(seq);
        trace_provider::instant!("app", "tick", "seq" => seq);
        if seq == 500 && std::thread::current().name() == Some("main") {
            // Only counts while a trace runs.
            let _ = trace_provider::alert("seq-500");
        }
        seq += 1;
        std::thread::sleep(interval);
    }
    seq
}

fn tid() -> i64 {
    // SAFETY: gettid has no preconditions.
    i64::from(unsafe { libc::gettid() })
}

fn main() {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(5.0);
    let interval = Duration::from_micros(args.next().and_then(|a| a.parse().ok()).unwrap_or(2000));
    let _provider = trace_provider::init_with_categories("provider-app", &["app"]);
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let worker = std::thread::Builder::new()
        .name("worker".into())
        .spawn(move || (tid(), run(until, interval)))
        .expect("spawning the worker");
    println!("pid={} main={}", std::process::id(), tid());
    let main_count = run(until, interval);
    let (worker_tid, worker_count) = worker.join().expect("worker");
    println!("worker={worker_tid} main_count={main_count} worker_count={worker_count}");
}
