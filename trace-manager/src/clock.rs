//! The manager's clock: CLOCK_BOOTTIME, the timeline of every trace.

/// CLOCK_BOOTTIME now, in nanoseconds: the clock the kernel provider's
/// programs stamp events with (`bpf_ktime_get_boot_ns`), and onto which
/// userspace providers' timestamps are mapped.
pub fn boottime_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME).map_or(0, |t| {
        t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
    })
}
