//! `provider_bench [ITERATIONS]`: what the `trace-provider` engine costs per
//! event, against the floor of reading the same clock and copying the same
//! bytes, with one and two writing threads. Run by `cargo xtask bench`.
//!
//! The engine is attached to a 64 MiB buffer in this process (circular mode,
//! so long loops never drop); the numbers are medians of 7 runs.

use std::sync::Barrier;
use std::time::Instant;

use trace_common::provider::{BufferDisposition, BufferingMode};
use trace_provider::engine;

const RUNS: usize = 7;

fn pin(cpu: usize) {
    // SAFETY: sched_setaffinity on this thread with a cpu_set_t we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
    }
}

#[inline(always)]
fn timestamp() -> u64 {
    trace_common::provider::clock::read_tsc().unwrap_or_else(|| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec we own.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        ts.tv_nsec as u64
    })
}

#[derive(Clone, Copy)]
enum Case {
    Disabled,
    Instant,
    Duration2,
    Counter,
    /// Clock reads (1 or 2) plus a copy of this many words.
    Floor(usize, usize),
}

fn body(case: Case, n: u64) {
    match case {
        Case::Disabled => {
            for i in 0..n {
                trace_provider::instant!("off", "ev", "i" => std::hint::black_box(i));
            }
        }
        Case::Instant => {
            for _ in 0..n {
                trace_provider::instant!("bench", "ev");
            }
        }
        Case::Duration2 => {
            for i in 0..n {
                trace_provider::duration!("bench", "dur", "a" => i, "b" => i ^ 7);
                std::hint::black_box(i);
            }
        }
        Case::Counter => {
            for i in 0..n {
                trace_provider::counter!("bench", "ctr", 1, "v" => i as i64);
            }
        }
        Case::Floor(clocks, words) => {
            let mut buf = vec![0u64; 1 << 20];
            let mut pos = 0usize;
            for i in 0..n {
                let mut t = timestamp();
                if clocks == 2 {
                    t ^= timestamp();
                }
                let rec = [t, i, t ^ i, i, t, i, t];
                if pos + words > buf.len() {
                    pos = 0;
                }
                buf[pos..pos + words].copy_from_slice(&rec[..words]);
                pos += words;
            }
            std::hint::black_box(&buf);
        }
    }
}

/// Nanoseconds per event over `threads` threads writing `n` events each.
fn run(case: Case, threads: usize, n: u64) -> f64 {
    let barrier = Barrier::new(threads);
    let start = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    pin(t);
                    barrier.wait();
                    let t0 = Instant::now();
                    body(case, n);
                    t0
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread"))
            .min()
            .expect("at least one thread")
    });
    start.elapsed().as_nanos() as f64 / (n as f64 * threads as f64)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let mut buffer = vec![0u64; (64 << 20) / 8];
    // SAFETY: `buffer` outlives the trace; the engine is terminated below.
    unsafe {
        engine::initialize(
            buffer.as_mut_ptr().cast(),
            buffer.len() * 8,
            BufferingMode::Circular,
            vec!["bench".to_owned()],
            None,
        )
    }
    .expect("a 64 MiB buffer fits the layout");
    engine::start(BufferDisposition::ClearEntire, Vec::new());

    println!("trace-provider engine, {n} events per thread per run, median of {RUNS} runs");
    println!(
        "{:<34} {:>7} {:>10} {:>10} {:>12}",
        "case", "threads", "ns/event", "floor ns", "2T/1T thrpt"
    );
    let cases = [
        ("disabled category check", Case::Disabled, 0, 0),
        ("instant, no args", Case::Instant, 1, 2),
        ("duration complete, 2 u64 args", Case::Duration2, 2, 7),
        ("counter, 1 i64 arg", Case::Counter, 1, 5),
    ];
    for (name, case, clocks, words) in cases {
        let mut one = 0.0;
        for threads in [1, 2] {
            let ns = median((0..RUNS).map(|_| run(case, threads, n)).collect());
            let floor = if words > 0 {
                median(
                    (0..RUNS)
                        .map(|_| run(Case::Floor(clocks, words), threads, n))
                        .collect(),
                )
            } else {
                0.0
            };
            let floor_s = if words > 0 {
                format!("{floor:.2}")
            } else {
                "-".to_owned()
            };
            if threads == 1 {
                one = ns;
                println!(
                    "{name:<34} {threads:>7} {ns:>10.2} {floor_s:>10} {:>12}",
                    ""
                );
            } else {
                // Per-event time over both threads: throughput ratio = 1T / 2T.
                println!(
                    "{name:<34} {threads:>7} {ns:>10.2} {floor_s:>10} {:>11.2}x",
                    one / ns
                );
            }
        }
    }
    let stats = engine::stop();
    engine::terminate();
    println!(
        "targets: enabled <= 15 ns, disabled <= 0.5 ns, 2 threads >= 1.8x; dropped {}",
        stats.dropped
    );
    drop(buffer);
}
