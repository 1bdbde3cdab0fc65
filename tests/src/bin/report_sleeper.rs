//! `report_sleeper`: a thread that sleeps 10 times 20 ms and does nothing
//! else, for the scheduling figures of `trace-cli report`.
//!
//! Prints `pid=P sleeper=T`; the sleeper thread spins (yielding, never
//! blocking, so it is never woken) until a line arrives on standard input,
//! then sleeps 10 x 20 ms and ends. The main thread then prints `done`.
//! Recorded with `-p` once it runs, the sleeper's only wake-ups are the ten
//! ends of its sleeps.

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Sleeps of the sleeper thread.
const SLEEPS: u32 = 10;
/// How long each lasts.
const SLEEP: Duration = Duration::from_millis(20);

fn main() {
    let go = Arc::new(AtomicBool::new(false));
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let flag = Arc::clone(&go);
    let sleeper = std::thread::Builder::new()
        .name("sleeper".into())
        .spawn(move || {
            tid_tx.send(tests::workload::gettid()).expect("main waits");
            while !flag.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            for _ in 0..SLEEPS {
                std::thread::sleep(SLEEP);
            }
        })
        .expect("spawning the sleeper");
    let tid = tid_rx.recv().expect("the sleeper's tid");
    println!("pid={} sleeper={tid}", std::process::id());
    std::io::stdout().flush().expect("writing standard output");
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .expect("reading standard input");
    go.store(true, Ordering::Release);
    sleeper.join().expect("the sleeper");
    println!("done");
}
