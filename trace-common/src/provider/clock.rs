//! Provider clocks and their mapping onto CLOCK_BOOTTIME.
//!
//! A provider stamps records with the cheapest counter it can read: the
//! x86-64 time-stamp counter when it is invariant, CLOCK_BOOTTIME
//! nanoseconds otherwise. The manager samples both clocks together when a
//! trace starts and whenever it collects, and maps TSC timestamps onto
//! nanoseconds with [`TimeMap`], the same timeline the kernel provider uses
//! (`bpf_ktime_get_boot_ns`). CLOCK_BOOTTIME, not CLOCK_MONOTONIC: it keeps
//! counting through a suspend, and Perfetto's FXT importer takes FXT
//! timestamps as BOOTTIME.

/// CLOCK_BOOTTIME now, in nanoseconds: the timeline of every trace, the
/// clock the kernel provider's programs stamp events with
/// (`bpf_ktime_get_boot_ns`). 0 if the clock cannot be read.
#[cfg(feature = "std")]
pub fn boottime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The clock a provider's timestamps come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClockKind {
    /// CLOCK_BOOTTIME in nanoseconds (10^9 ticks per second). Protocol
    /// value 0, which meant CLOCK_MONOTONIC before the move to BOOTTIME: a
    /// provider built before it stamps MONOTONIC under the same value, off
    /// by the time the machine spent suspended.
    Boottime,
    /// The invariant time-stamp counter (x86-64 `rdtsc`).
    Tsc,
}

impl ClockKind {
    /// The protocol value.
    pub const fn value(self) -> u8 {
        match self {
            ClockKind::Boottime => 0,
            ClockKind::Tsc => 1,
        }
    }

    /// The clock of a protocol value.
    pub const fn from_value(v: u8) -> Option<Self> {
        match v {
            0 => Some(ClockKind::Boottime),
            1 => Some(ClockKind::Tsc),
            _ => None,
        }
    }
}

/// One reading of a counter and of CLOCK_BOOTTIME taken together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeAnchor {
    /// The counter.
    pub ticks: u64,
    /// CLOCK_BOOTTIME nanoseconds.
    pub ns: u64,
}

/// A linear map from counter ticks to CLOCK_BOOTTIME nanoseconds through
/// two anchors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeMap {
    a: TimeAnchor,
    b: TimeAnchor,
}

impl TimeMap {
    /// The map through `a` and `b`, if both clocks advanced between them.
    pub fn new(a: TimeAnchor, b: TimeAnchor) -> Option<TimeMap> {
        (b.ticks > a.ticks && b.ns > a.ns).then_some(TimeMap { a, b })
    }

    /// The map through `a` at `ticks_per_second`.
    pub fn with_rate(a: TimeAnchor, ticks_per_second: u64) -> Option<TimeMap> {
        (ticks_per_second > 0).then_some(TimeMap {
            a,
            b: TimeAnchor {
                ticks: a.ticks.wrapping_add(ticks_per_second),
                ns: a.ns.wrapping_add(1_000_000_000),
            },
        })
    }

    /// Nanoseconds at `ticks`, clamped to the `u64` range.
    pub fn ns(&self, ticks: u64) -> u64 {
        let dt = i128::from(ticks) - i128::from(self.a.ticks);
        let span_ns = i128::from(self.b.ns) - i128::from(self.a.ns);
        let span_ticks = i128::from(self.b.ticks) - i128::from(self.a.ticks);
        if span_ticks == 0 {
            return self.a.ns;
        }
        let ns = i128::from(self.a.ns) + dt * span_ns / span_ticks;
        ns.clamp(0, i128::from(u64::MAX)) as u64
    }

    /// The counter's rate in ticks per second.
    pub fn ticks_per_second(&self) -> u64 {
        let span_ns = u128::from(self.b.ns.wrapping_sub(self.a.ns)).max(1);
        let span_ticks = u128::from(self.b.ticks.wrapping_sub(self.a.ticks));
        (span_ticks * 1_000_000_000 / span_ns) as u64
    }
}

/// Reads the time-stamp counter, where there is one.
#[inline(always)]
pub fn read_tsc() -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no memory effects and exists on every x86-64 CPU.
        Some(unsafe { core::arch::x86_64::_rdtsc() })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_ticks_linearly_through_the_anchors() {
        let m = TimeMap::new(
            TimeAnchor {
                ticks: 3_000,
                ns: 1_000,
            },
            TimeAnchor {
                ticks: 9_000,
                ns: 3_000,
            },
        )
        .unwrap();
        assert_eq!(m.ns(3_000), 1_000);
        assert_eq!(m.ns(9_000), 3_000);
        assert_eq!(m.ns(6_000), 2_000);
        assert_eq!(m.ns(0), 0);
        assert_eq!(m.ns(12_000), 4_000);
        assert_eq!(m.ticks_per_second(), 3_000_000_000);
        let r = TimeMap::with_rate(TimeAnchor { ticks: 10, ns: 5 }, 2_000_000_000).unwrap();
        assert_eq!(r.ns(2_000_000_010), 1_000_000_005);
        assert!(
            TimeMap::new(
                TimeAnchor { ticks: 1, ns: 1 },
                TimeAnchor { ticks: 1, ns: 2 }
            )
            .is_none()
        );
    }
}
