//! `report_durations`: a provider (`report-durations`, category `app`)
//! that writes 100 `step` durations of known lengths, the i-th around a
//! sleep of i x 100 µs, for the userspace figures of `trace-cli report`.
//!
//! It waits (up to 10 s) for a trace to enable `app`, so that every
//! duration is recorded, then prints `count=100 p50_ns=P max_ns=M`: the
//! median (the 50th shortest) and the longest of the durations as it
//! measured them around each `step`.

use std::time::{Duration, Instant};

/// Durations written.
const STEPS: u64 = 100;

fn step(i: u64) {
    trace_provider::duration!("app", "step", "i" => i);
    std::thread::sleep(Duration::from_micros(i * 100));
}

fn main() {
    let _provider = trace_provider::init_with_categories("report-durations", &["app"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !trace_provider::category_enabled!("app") {
        assert!(Instant::now() < deadline, "no trace enabled category app");
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut took: Vec<u64> = (1..=STEPS)
        .map(|i| {
            let t = Instant::now();
            step(i);
            t.elapsed().as_nanos() as u64
        })
        .collect();
    took.sort_unstable();
    println!(
        "count={} p50_ns={} max_ns={}",
        took.len(),
        took[took.len() / 2 - 1],
        took[took.len() - 1]
    );
}
