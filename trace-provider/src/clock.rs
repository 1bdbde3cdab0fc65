//! The timestamp source of the hot path.
//!
//! The invariant TSC when the CPU has one (x86-64 with `constant_tsc` and
//! `nonstop_tsc`), CLOCK_BOOTTIME otherwise. The manager maps TSC ticks onto
//! CLOCK_BOOTTIME (the kernel provider's `bpf_ktime_get_boot_ns`) when it
//! collects the buffer.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use trace_common::provider::clock::{ClockKind, read_tsc};

static USE_TSC: AtomicBool = AtomicBool::new(false);
static KIND: OnceLock<ClockKind> = OnceLock::new();

/// The clock this process stamps records with, chosen once.
pub fn kind() -> ClockKind {
    *KIND.get_or_init(|| {
        let tsc = read_tsc().is_some()
            && std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|s| {
                s.lines()
                    .find(|l| l.starts_with("flags"))
                    .is_some_and(|l| l.contains(" constant_tsc") && l.contains(" nonstop_tsc"))
            });
        USE_TSC.store(tsc, Ordering::Relaxed);
        if tsc {
            ClockKind::Tsc
        } else {
            ClockKind::Boottime
        }
    })
}

pub use trace_common::provider::clock::boottime_ns;

/// The current timestamp in the ticks of [`kind`].
#[inline(always)]
pub fn now() -> u64 {
    if USE_TSC.load(Ordering::Relaxed)
        && let Some(t) = read_tsc()
    {
        return t;
    }
    boottime_ns()
}

/// Ticks per second of [`kind`], measured against CLOCK_BOOTTIME for the TSC.
pub fn ticks_per_second() -> u64 {
    static RATE: OnceLock<u64> = OnceLock::new();
    *RATE.get_or_init(|| match kind() {
        ClockKind::Boottime => 1_000_000_000,
        ClockKind::Tsc => {
            let (t0, n0) = (now(), boottime_ns());
            std::thread::sleep(std::time::Duration::from_millis(5));
            let (t1, n1) = (now(), boottime_ns());
            ((u128::from(t1 - t0) * 1_000_000_000) / u128::from((n1 - n0).max(1))) as u64
        }
    })
}
