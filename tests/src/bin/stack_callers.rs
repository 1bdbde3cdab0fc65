//! `stack_callers [--one N1] [--two N2] [--wait-stdin]`: one probed
//! function called from two places a known number of times, for the tests
//! of `--stacks` on probes: `--uprobe stack_probe_target` (with `-p`) or
//! `--uprobe BINARY:stack_probe_target`.
//!
//! The main thread calls `stack_probe_target` N1 times (default 300) from
//! `stack_callers::caller_one`, then N2 times (default 100) from
//! `stack_callers::caller_two`. With `--wait-stdin` it prints `pid=P` and
//! waits for a line on standard input first, so that a recorder can place
//! its probes. At the end it prints `one=N1 two=N2 pid=P`.

use std::hint::black_box;

use tests::workload::{announce_and_wait, flags_or_exit};

/// The probed function: a little arithmetic on `x`.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn stack_probe_target(x: u64) -> u64 {
    black_box(x.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17) ^ x)
}

/// Calls `stack_probe_target` `n` times.
#[inline(never)]
fn caller_one(n: u64) -> u64 {
    let mut sum = 0u64;
    for i in 0..n {
        sum = sum.wrapping_add(black_box(stack_probe_target(black_box(i))));
    }
    black_box(sum)
}

/// Calls `stack_probe_target` `n` times.
#[inline(never)]
fn caller_two(n: u64) -> u64 {
    let mut sum = 0u64;
    for i in 0..n {
        sum ^= black_box(stack_probe_target(black_box(i + 1)));
    }
    black_box(sum)
}

fn main() {
    let flags = flags_or_exit(
        &[("one", 300), ("two", 100)],
        &["wait-stdin"],
        "[--one N1] [--two N2] [--wait-stdin]",
    );
    let (one, two) = (flags.number("one"), flags.number("two"));
    if flags.given("wait-stdin") {
        announce_and_wait();
    }
    black_box(caller_one(one));
    black_box(caller_two(two));
    println!("one={one} two={two} pid={}", std::process::id());
}
