//! `stack_spin [--chain-ms N] [--direct-ms M] [--wait-stdin]`: burns CPU in
//! two threads with a known split and known stacks, for the CPU-profile
//! tests (`-c kernel:profile`) and `cargo xtask bench profile`.
//!
//! - The thread named `chain` spins in `stack_spin::spin_c`, called through
//!   `spin_a` → `spin_b` → `spin_c`, until it has used N ms of CPU time
//!   (default 300).
//! - The thread named `direct` spins in `stack_spin::spin_d` until it has
//!   used M ms (default 100).
//!
//! The spin loops call nothing, so samples of the spinning land in `spin_c`
//! and `spin_d` themselves. `--chain-batches N` / `--direct-batches M` ask
//! for a fixed amount of work instead of CPU time: N (M) calls of 2^18
//! iterations. With `--wait-stdin` the program prints `pid=P` (its threads
//! already started) and waits for a line on standard input before spinning.
//!
//! At the end it prints one line: `chain_cpu_ns=C direct_cpu_ns=D
//! chain_tid=T direct_tid=U pid=P wall_ns=W process_cpu_ns=Q`: the CPU time
//! each thread used while spinning, the thread and process ids, the wall
//! time of the spinning, and the process's CPU time from its start. Its C
//! twin, built without frame pointers, is `stack_spin_c`.

use std::hint::black_box;

use tests::workload::{SpinArgs, spin};

/// Calls `spin_b`, then does a little work of its own.
#[inline(never)]
pub fn spin_a(iterations: u64) -> u64 {
    black_box(spin_b(iterations)).wrapping_add(1)
}

/// Calls `spin_c`, then does a little work of its own.
#[inline(never)]
pub fn spin_b(iterations: u64) -> u64 {
    black_box(spin_c(iterations)).wrapping_add(1)
}

/// The spin loop, a xorshift `$n` times shifting by `$a`, `$b` and `$c`:
/// plain arithmetic, with an empty `asm!` as the optimisation barrier in
/// place of `black_box`, which an unoptimised build would call. A macro, not
/// a function, so that no inlined frame sits on top of the spinning
/// function; each user gives other shifts, so that no two are identical
/// code the compiler may merge into one.
macro_rules! spin_loop {
    ($n:expr, $a:literal, $b:literal, $c:literal) => {{
        let iterations: u64 = $n;
        let mut x = iterations | 1;
        let mut i = 0;
        while i < iterations {
            x ^= x << $a;
            x ^= x >> $b;
            x ^= x << $c;
            // SAFETY: an empty instruction sequence that only claims to read
            // and write `x`.
            unsafe {
                std::arch::asm!("/* {0} */", inout(reg) x, options(nomem, nostack, preserves_flags))
            };
            i += 1;
        }
        x
    }};
}

/// Spins `iterations` times; calls nothing.
#[inline(never)]
pub fn spin_c(iterations: u64) -> u64 {
    spin_loop!(iterations, 13, 7, 17)
}

/// Spins `iterations` times; calls nothing.
#[inline(never)]
pub fn spin_d(iterations: u64) -> u64 {
    spin_loop!(iterations, 12, 25, 27)
}

fn main() {
    let report = spin(SpinArgs::from_command_line(), spin_a, spin_d);
    println!("{report}");
}
