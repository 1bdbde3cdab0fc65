//! `provider_bench [--iterations N | N] [--runs R]`: what a `trace-provider`
//! macro costs per event, with one and with two writing threads, next to the
//! floor of reading the same timestamp source and copying the same bytes.
//! Run by `cargo xtask bench provider`.
//!
//! The engine is attached to a 64 MiB buffer in this process (circular mode,
//! so a long loop never drops) with the category `bench` enabled. Each case
//! runs R times (default 7) N iterations (default 3 million) per thread,
//! alternating with its floor, and reports medians. With two threads each
//! writes N events at once; the time per event is the wall time over all
//! 2N events, and the throughput ratio is events per second with two threads
//! over events per second with one.
//!
//! The main thread is pinned to CPU 0 and the second writer to CPU 1.

use std::hint::black_box;
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use trace_common::provider::{BufferDisposition, BufferingMode};
use trace_provider::engine;

/// The engine's buffer.
const BUFFER_BYTES: usize = 64 << 20;
/// Each floor thread's destination buffer, as large as the engine's.
const FLOOR_WORDS: usize = BUFFER_BYTES / 8;

/// Pins the calling thread to `cpu`; failure (fewer CPUs, a cpuset) is fine.
fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; sched_setaffinity only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// The engine's timestamp source: the TSC on x86-64, else CLOCK_MONOTONIC.
#[inline(always)]
fn timestamp() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no memory effects and exists on every x86-64 CPU.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec we own.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
}

/// Writes to every page of `words` so that no run pays for page faults.
fn prefault(words: &mut [u64]) {
    for w in words.iter_mut().step_by(512) {
        // SAFETY: `w` is a valid, aligned, exclusive reference.
        unsafe { std::ptr::write_volatile(w, 0) };
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    /// `instant!` of a category the trace does not enable, one per loop
    /// iteration (the loop's own compare and branch included).
    Disabled,
    /// The same, four call sites per loop iteration (n events in n/4).
    Disabled4,
    /// `instant!` without arguments.
    Instant,
    /// `duration!` with two u64 arguments, one scope per iteration.
    Duration,
    /// `counter!` with an id and one i64 argument.
    Counter,
    /// Timestamp reads and copies of an instant's 2 words.
    FloorInstant,
    /// Two timestamp reads (begin and end) and copies of 7 words.
    FloorDuration,
    /// Timestamp reads and copies of a counter's 5 words.
    FloorCounter,
}

impl Case {
    /// The floor measured next to this case.
    fn floor(self) -> Option<Case> {
        match self {
            Case::Instant => Some(Case::FloorInstant),
            Case::Duration => Some(Case::FloorDuration),
            Case::Counter => Some(Case::FloorCounter),
            _ => None,
        }
    }
}

/// The floor loop: per iteration, `READS` timestamp reads and a copy of a
/// `W`-word record into `buf` at a moving, wrapping offset.
#[inline(never)]
fn floor<const W: usize, const READS: usize>(buf: &mut [u64], n: u64) {
    let mut pos = 0usize;
    for i in 0..n {
        let mut rec = [0u64; W];
        // Header, then the timestamp, then argument / trailer words.
        rec[0] = black_box(0x0004_0000_0011_0044 | (W as u64) << 4);
        rec[1] = timestamp();
        for (k, w) in rec.iter_mut().enumerate().skip(2) {
            *w = i ^ k as u64;
        }
        if READS == 2 {
            rec[W - 1] = timestamp();
        }
        if pos + W > buf.len() {
            pos = 0;
        }
        buf[pos..pos + W].copy_from_slice(&rec);
        pos += W;
    }
    black_box(buf);
}

/// One thread's loop of `n` iterations of `case`.
#[inline(never)]
fn body(case: Case, n: u64, floor_buf: &mut [u64]) {
    match case {
        Case::Disabled => {
            for i in 0..n {
                trace_provider::instant!("off", "disabled");
                black_box(i);
            }
        }
        Case::Disabled4 => {
            for i in 0..n / 4 {
                trace_provider::instant!("off", "disabled-1");
                trace_provider::instant!("off", "disabled-2");
                trace_provider::instant!("off", "disabled-3");
                trace_provider::instant!("off", "disabled-4");
                black_box(i);
            }
        }
        Case::Instant => {
            for i in 0..n {
                trace_provider::instant!("bench", "instant");
                black_box(i);
            }
        }
        Case::Duration => {
            for i in 0..n {
                trace_provider::duration!("bench", "duration", "a" => black_box(i), "b" => black_box(i ^ 7));
            }
        }
        Case::Counter => {
            for i in 0..n {
                trace_provider::counter!("bench", "counter", 1, "v" => black_box(i) as i64);
            }
        }
        Case::FloorInstant => floor::<2, 1>(floor_buf, n),
        Case::FloorDuration => floor::<7, 2>(floor_buf, n),
        Case::FloorCounter => floor::<5, 1>(floor_buf, n),
    }
}

/// A job for the second writer: run `case` `n` times after the barrier, send
/// back when it started and ended.
struct Job {
    case: Case,
    n: u64,
}

/// The second writing thread, kept for the whole bench so that the engine
/// registers it once.
struct Worker {
    jobs: mpsc::Sender<Job>,
    done: mpsc::Receiver<(Instant, Instant)>,
    barrier: Arc<Barrier>,
}

impl Worker {
    fn spawn() -> (Worker, std::thread::JoinHandle<()>) {
        let (jobs, job_rx) = mpsc::channel::<Job>();
        let (done_tx, done) = mpsc::channel();
        let barrier = Arc::new(Barrier::new(2));
        let b = barrier.clone();
        let handle = std::thread::Builder::new()
            .name("bench-writer-2".into())
            .spawn(move || {
                pin(1);
                let mut floor_buf = vec![0u64; FLOOR_WORDS];
                prefault(&mut floor_buf);
                for job in job_rx {
                    b.wait();
                    let t0 = Instant::now();
                    body(job.case, job.n, &mut floor_buf);
                    let t1 = Instant::now();
                    if done_tx.send((t0, t1)).is_err() {
                        break;
                    }
                }
            })
            .expect("spawning the second writer");
        (
            Worker {
                jobs,
                done,
                barrier,
            },
            handle,
        )
    }
}

struct Bench {
    n: u64,
    floor_buf: Vec<u64>,
    worker: Worker,
}

impl Bench {
    /// Nanoseconds of wall time per event of `case` with `threads` writers.
    fn run(&mut self, case: Case, threads: usize, n: u64) -> f64 {
        if threads == 1 {
            let t0 = Instant::now();
            body(case, n, &mut self.floor_buf);
            return t0.elapsed().as_nanos() as f64 / n as f64;
        }
        self.worker
            .jobs
            .send(Job { case, n })
            .expect("the second writer runs");
        self.worker.barrier.wait();
        let t0 = Instant::now();
        body(case, n, &mut self.floor_buf);
        let t1 = Instant::now();
        let (w0, w1) = self.worker.done.recv().expect("the second writer answers");
        let wall = t1.max(w1).duration_since(t0.min(w0));
        wall.as_nanos() as f64 / (2 * n) as f64
    }

    /// Medians of `runs` runs of `case` and of its floor, alternated.
    fn measure(&mut self, case: Case, threads: usize, runs: usize) -> (f64, Option<f64>) {
        // Warm up: interns the strings, registers the thread, warms caches.
        self.run(case, threads, 100_000);
        if let Some(f) = case.floor() {
            self.run(f, threads, 100_000);
        }
        let mut ns = Vec::with_capacity(runs);
        let mut floor_ns = Vec::with_capacity(runs);
        for _ in 0..runs {
            ns.push(self.run(case, threads, self.n));
            if let Some(f) = case.floor() {
                floor_ns.push(self.run(f, threads, self.n));
            }
        }
        (median(ns), case.floor().map(|_| median(floor_ns)))
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn usage() -> ! {
    eprintln!("usage: provider_bench [--iterations N | N] [--runs R]");
    std::process::exit(2);
}

fn parse_args() -> (u64, usize) {
    let mut iterations = 3_000_000u64;
    let mut runs = 7usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        // A bare number is the iteration count (`provider_bench 2000000`).
        if let Ok(v) = a.parse() {
            iterations = v;
            continue;
        }
        let (flag, value) = match a.split_once('=') {
            Some((f, v)) => (f.to_owned(), Some(v.to_owned())),
            None => (a, None),
        };
        let value = value.or_else(|| args.next()).unwrap_or_else(|| usage());
        match flag.as_str() {
            "--iterations" | "-n" => iterations = value.parse().unwrap_or_else(|_| usage()),
            "--runs" => runs = value.parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    if iterations < 4 || runs == 0 {
        usage();
    }
    // A multiple of 4, for the case with four events per loop iteration.
    (iterations / 4 * 4, runs)
}

fn main() {
    let (n, runs) = parse_args();
    pin(0);

    let mut buffer = vec![0u64; BUFFER_BYTES / 8];
    prefault(&mut buffer);
    // SAFETY: `buffer` is 8-aligned, BUFFER_BYTES long, and outlives the
    // trace: the engine is terminated before it is dropped.
    unsafe {
        engine::initialize(
            buffer.as_mut_ptr().cast(),
            BUFFER_BYTES,
            BufferingMode::Circular,
            vec!["bench".to_owned()],
            None,
        )
    }
    .expect("a 64 MiB buffer fits the layout");
    engine::start(BufferDisposition::ClearEntire, Vec::new());
    assert!(trace_provider::category_enabled!("bench"));
    assert!(!trace_provider::category_enabled!("off"));

    let (worker, handle) = Worker::spawn();
    let mut floor_buf = vec![0u64; FLOOR_WORDS];
    prefault(&mut floor_buf);
    let mut bench = Bench {
        n,
        floor_buf,
        worker,
    };

    let clock = if cfg!(target_arch = "x86_64") {
        "rdtsc"
    } else {
        "clock_gettime(CLOCK_MONOTONIC)"
    };
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "load average before: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "trace-provider engine: {n} iterations per thread per run, median of {runs} runs; \
         circular 64 MiB buffer; floor = {clock} + copy of the record's bytes"
    );
    println!(
        "{:<32} {:>7} {:>9} {:>9} {:>8} {:>12}",
        "case", "threads", "ns/event", "floor ns", "x floor", "2T/1T thrpt"
    );
    let cases = [
        ("(a) disabled instant", Case::Disabled),
        ("(a) disabled, 4 per loop iter", Case::Disabled4),
        ("(b) instant, no args [16 B]", Case::Instant),
        ("(c) duration, 2 u64 args [56 B]", Case::Duration),
        ("(d) counter, 1 i64 arg [40 B]", Case::Counter),
    ];
    let mut floor_scaling = Vec::new();
    for (name, case) in cases {
        let (one, one_floor) = bench.measure(case, 1, runs);
        let (two, two_floor) = bench.measure(case, 2, runs);
        let fmt_floor = |f: Option<f64>| f.map_or("-".to_owned(), |f| format!("{f:.2}"));
        let fmt_ratio =
            |ns: f64, f: Option<f64>| f.map_or("-".to_owned(), |f| format!("{:.2}", ns / f));
        println!(
            "{name:<32} {:>7} {one:>9.2} {:>9} {:>8} {:>12}",
            1,
            fmt_floor(one_floor),
            fmt_ratio(one, one_floor),
            ""
        );
        println!(
            "{:<32} {:>7} {two:>9.2} {:>9} {:>8} {:>11.2}x",
            "",
            2,
            fmt_floor(two_floor),
            fmt_ratio(two, two_floor),
            one / two
        );
        if let (Some(f1), Some(f2)) = (one_floor, two_floor) {
            floor_scaling.push(format!("{:.2}x", f1 / f2));
        }
    }

    let stats = engine::stop();
    engine::terminate();
    drop(bench);
    handle.join().expect("the second writer exits");
    drop(buffer);
    println!(
        "floor 2T/1T throughput (b, c, d): {}; engine dropped {} records, wrapped {} times",
        floor_scaling.join(", "),
        stats.dropped,
        stats.wrapped
    );
    println!(
        "targets: enabled <= 15 ns/event, disabled <= 0.5 ns/event, 2 threads >= 1.8x throughput"
    );
}
