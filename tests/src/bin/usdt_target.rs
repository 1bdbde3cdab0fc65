//! `usdt_target`: a program with USDT probes, for the `--usdt` end-to-end
//! test. Prints `pid=P`, then for each line `N` on stdin passes its probes
//! `N` times and prints `done lazy=L guarded=G`: how often the probes that
//! fire only while traced (a semaphore raised) were enabled. With
//! `--once N` it does that once and exits.
//!
//! Rust probes (`probe` crate): `trace_rs:tick` (`i`, `-3i`, in registers)
//! and `trace_rs:lazy` (`i`, behind a semaphore). C probes (`sys/sdt.h`,
//! `c/usdt_target.c`): `trace_c:point` (`i` as int, `-i` as short, `-10^12
//! i` as long long, `200 + i` as unsigned char, in memory),
//! `trace_c:constant` (42), `trace_c:greet` (the string `hello i`, `i`)
//! and `trace_c:guarded` (`i`, behind a semaphore).

use std::io::{BufRead, Write};

#[link(name = "usdt_target_c", kind = "static")]
unsafe extern "C" {
    fn c_usdt_run(n: i32) -> i32;
}

/// Passes every probe `n` times; returns (lazy, guarded) enabled counts.
fn run(n: u32) -> (u32, i32) {
    let mut lazy = 0;
    for i in 0..n {
        let i = i as isize;
        probe::probe!(trace_rs, tick, i, -3 * i);
        if probe::probe_lazy!(trace_rs, lazy, i) {
            lazy += 1;
        }
    }
    // SAFETY: a plain C function without preconditions.
    let guarded = unsafe { c_usdt_run(n as i32) };
    (lazy, guarded)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(n) = args.iter().position(|a| a == "--once") {
        let n = args.get(n + 1).and_then(|v| v.parse().ok()).unwrap_or(1);
        let (lazy, guarded) = run(n);
        println!("done lazy={lazy} guarded={guarded}");
        return;
    }
    println!("pid={}", std::process::id());
    std::io::stdout().flush().unwrap();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let (lazy, guarded) = run(line.trim().parse().unwrap_or(0));
        println!("done lazy={lazy} guarded={guarded}");
        std::io::stdout().flush().unwrap();
    }
}
