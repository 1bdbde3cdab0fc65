//! Durations, times and sizes as people read them: `850 ns`, `12.3 µs`,
//! `4.05 ms`, `1.23 s`; `12.0 KiB`; `1234.567890123` s.

/// Three significant digits of `v` (at least one decimal below 10, ...).
fn three(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.2}")
    } else if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// A duration in ns, in the largest unit that keeps it at or above one.
pub fn duration(ns: u64) -> String {
    let v = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{} µs", three(v / 1e3))
    } else if ns < 1_000_000_000 {
        format!("{} ms", three(v / 1e6))
    } else {
        format!("{} s", three(v / 1e9))
    }
}

/// A signed change of a duration: `+300 ms`, `-1.20 µs`, `0`.
pub fn duration_change(ns: i64) -> String {
    match ns.signum() {
        0 => "0".to_owned(),
        1 => format!("+{}", duration(ns.unsigned_abs())),
        _ => format!("-{}", duration(ns.unsigned_abs())),
    }
}

/// A size in bytes, in binary units.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{} {}", three(v), UNITS[unit])
}

/// A time in ns as seconds, without trailing zeros: `99`, `3.2`,
/// `0.0000191`.
pub fn seconds_short(ns: u64) -> String {
    let s = seconds(ns);
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// A signed change of a size: `+1.50 MiB`, `-132 KiB`, `0`.
pub fn bytes_change(n: i64) -> String {
    match n.signum() {
        0 => "0".to_owned(),
        1 => format!("+{}", bytes(n.unsigned_abs())),
        _ => format!("-{}", bytes(n.unsigned_abs())),
    }
}

/// A time in ns as seconds with every digit (as Perfetto shows them).
pub fn seconds(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(0), "0 ns");
        assert_eq!(duration(999), "999 ns");
        assert_eq!(duration(1_000), "1.00 µs");
        assert_eq!(duration(12_345), "12.3 µs");
        assert_eq!(duration(4_050_000), "4.05 ms");
        assert_eq!(duration(200_000_000), "200 ms");
        assert_eq!(duration(1_234_000_000), "1.23 s");
        assert_eq!(duration(u64::MAX), "18446744074 s");
        assert_eq!(duration_change(300_000_000), "+300 ms");
        assert_eq!(duration_change(-1_200), "-1.20 µs");
        assert_eq!(duration_change(i64::MIN), "-9223372037 s");
        assert_eq!(duration_change(0), "0");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(4096), "4.00 KiB");
        assert_eq!(bytes(3 << 30), "3.00 GiB");
        assert_eq!(seconds(12_000_000_345), "12.000000345");
        assert_eq!(seconds_short(99_000_000_000), "99");
        assert_eq!(seconds_short(3_200_000_000), "3.2");
        assert_eq!(seconds_short(0), "0");
        assert_eq!(bytes_change(1_572_864), "+1.50 MiB");
        assert_eq!(bytes_change(-135_168), "-132 KiB");
        assert_eq!(bytes_change(0), "0");
    }
}
