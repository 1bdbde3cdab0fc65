//! `uprobe_target`: prints `pid=P`, then for each line on stdin `R C`
//! makes R top-level calls of `uprobe_target::recurse(3)` (a Rust function,
//! 4 nested calls each) and C top-level calls of the C function
//! `c_recurse(2)` (3 nested calls each), prints `done`, and waits for the
//! next line. For the `--uprobe` end-to-end test.

use std::hint::black_box;
use std::io::{BufRead, Write};

#[link(name = "uprobe_target_c", kind = "static")]
unsafe extern "C" {
    fn c_recurse(depth: i32) -> i32;
}

/// Recurses `depth` levels; returns the number of calls made.
#[inline(never)]
pub fn recurse(depth: u32) -> u32 {
    if black_box(depth) == 0 {
        return 1;
    }
    1 + black_box(recurse(depth - 1))
}

fn main() {
    println!("pid={}", std::process::id());
    std::io::stdout().flush().unwrap();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let mut n = line
            .split_whitespace()
            .map(|v| v.parse::<u32>().unwrap_or(0));
        let (rust, c) = (n.next().unwrap_or(0), n.next().unwrap_or(0));
        let mut calls = 0;
        for _ in 0..rust {
            calls += recurse(3);
        }
        for _ in 0..c {
            // SAFETY: a plain C function without preconditions.
            calls += unsafe { c_recurse(2) } as u32;
        }
        println!("done {calls}");
        std::io::stdout().flush().unwrap();
    }
}
