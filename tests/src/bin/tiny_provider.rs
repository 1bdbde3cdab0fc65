//! The smallest trace provider, for tests that start many:
//! `tiny_provider SECONDS [INTERVAL_US]` registers as `tiny` (category
//! `app`), prints `pid=P main=T`, then writes one `tick` instant every
//! INTERVAL_US (default one second) on its only thread until SECONDS have
//! passed. Idle between ticks.

use std::time::{Duration, Instant};

fn main() {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(60.0);
    let interval = Duration::from_micros(
        args.next()
            .and_then(|a| a.parse().ok())
            .unwrap_or(1_000_000),
    );
    let _provider = trace_provider::init_with_categories("tiny", &["app"]);
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    println!("pid={} main={tid}", std::process::id());
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let mut seq = 0u64;
    while Instant::now() < until {
        trace_provider::instant!("app", "tick", "seq" => seq);
        seq += 1;
        std::thread::sleep(interval);
    }
}
