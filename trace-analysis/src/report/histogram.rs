//! Distributions of durations: exact count, sum, minimum and maximum, with
//! percentiles exact up to [`EXACT`] values and from an HDR histogram
//! (within 1 %) beyond, and the power-of-two buckets bpftrace's `hist()`
//! prints.
//!
//! A report keeps a distribution per thread, per call and per process and
//! call, most of which see a handful of values: those keep their values (a
//! few hundred bytes), and only the busy ones pay for a histogram (tens of
//! kilobytes).

use hdrhistogram::Histogram;

use super::table::Cell;

/// Significant decimal digits the percentiles keep (1 %).
const SIGFIG: u8 = 2;
/// Values kept as they are before a histogram takes over.
pub const EXACT: usize = 64;

/// A distribution of durations (ns).
#[derive(Clone, Debug)]
pub struct Latency {
    /// Values recorded.
    pub count: u64,
    /// Their sum (saturating).
    pub sum: u64,
    /// The smallest.
    pub min: u64,
    /// The largest.
    pub max: u64,
    /// The values, while there are at most [`EXACT`].
    values: Vec<u64>,
    hist: Option<Histogram<u64>>,
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
            values: Vec::new(),
            hist: None,
        }
    }
}

impl Latency {
    /// Records `v`.
    pub fn record(&mut self, v: u64) {
        self.count += 1;
        self.sum = self.sum.saturating_add(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        if let Some(h) = &mut self.hist {
            // Past its range (over 2^63) a value is only in the exact
            // figures.
            let _ = h.record(v);
        } else if self.values.len() < EXACT {
            self.values.push(v);
        } else if let Ok(mut h) = Histogram::new(SIGFIG) {
            for x in self.values.drain(..).chain([v]) {
                let _ = h.record(x);
            }
            self.values = Vec::new();
            self.hist = Some(h);
        }
    }

    /// The value `q` (0 to 1) of the values lie at or below, within 1 %,
    /// never above the exact maximum; `None` without values.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        if q >= 1.0 {
            return Some(self.max);
        }
        let Some(h) = self.hist.as_ref() else {
            // Exact: the smallest value at least a fraction q of the values
            // lie at or below (nearest rank, as the histogram counts).
            let mut sorted = self.values.clone();
            sorted.sort_unstable();
            let rank = ((q.max(0.0) * sorted.len() as f64).ceil() as usize).max(1);
            return sorted.get(rank - 1).copied();
        };
        let v = h.lowest_equivalent(h.value_at_quantile(q));
        Some(v.clamp(self.min, self.max))
    }

    /// Adds the values of `other` (figures of a group from its members').
    pub fn merge(&mut self, other: &Latency) {
        if other.count == 0 {
            return;
        }
        match &other.hist {
            None => other.values.iter().for_each(|&v| self.record(v)),
            Some(theirs) => {
                if self.hist.is_none() {
                    let Ok(mut h) = Histogram::new(SIGFIG) else {
                        return;
                    };
                    for x in self.values.drain(..) {
                        let _ = h.record(x);
                    }
                    self.values = Vec::new();
                    self.hist = Some(h);
                }
                if let Some(h) = &mut self.hist {
                    let _ = h.add(theirs);
                }
                self.count += other.count;
                self.sum = self.sum.saturating_add(other.sum);
                self.min = self.min.min(other.min);
                self.max = self.max.max(other.max);
            }
        }
    }

    /// [`Latency::quantile`] as a cell.
    pub fn cell(&self, q: f64) -> Cell {
        self.quantile(q).map_or(Cell::Empty, Cell::Ns)
    }

    /// The maximum as a cell.
    pub fn max_cell(&self) -> Cell {
        if self.count == 0 {
            Cell::Empty
        } else {
            Cell::Ns(self.max)
        }
    }
}

/// Counts of values by power of two: bucket 0 holds 0, bucket `k` holds
/// `[2^(k-1), 2^k)`.
#[derive(Clone, Debug)]
pub struct Log2 {
    buckets: [u64; 65],
}

impl Default for Log2 {
    fn default() -> Self {
        Log2 { buckets: [0; 65] }
    }
}

impl Log2 {
    /// Records `v`.
    pub fn record(&mut self, v: u64) {
        let k = (64 - v.leading_zeros()) as usize;
        self.buckets[k] += 1;
    }

    /// The buckets from the lowest to the highest one used: (from, to
    /// (exclusive, `None` past 2^64), count).
    pub fn buckets(&self) -> Vec<(u64, Option<u64>, u64)> {
        let Some(first) = self.buckets.iter().position(|&n| n > 0) else {
            return Vec::new();
        };
        let last = self.buckets.iter().rposition(|&n| n > 0).unwrap_or(first);
        (first..=last)
            .map(|k| {
                let from = if k == 0 { 0 } else { 1u64 << (k - 1) };
                let to = if k == 0 {
                    Some(1)
                } else {
                    1u64.checked_shl(k as u32).filter(|_| k < 64)
                };
                (from, to, self.buckets[k])
            })
            .collect()
    }
}

/// A power of two as bpftrace writes it: `512`, `1K`, `4M`, `2G`.
pub fn power_label(v: u64) -> String {
    const UNITS: [(u64, &str); 6] = [
        (1 << 60, "E"),
        (1 << 50, "P"),
        (1 << 40, "T"),
        (1 << 30, "G"),
        (1 << 20, "M"),
        (1 << 10, "K"),
    ];
    for (size, unit) in UNITS {
        if v >= size && v.is_multiple_of(size) {
            return format!("{}{unit}", v / size);
        }
    }
    v.to_string()
}

/// A bar of `@` for `n` of `max`, at most `width` long, as bpftrace draws.
pub fn bar(n: u64, max: u64, width: usize) -> String {
    if max == 0 {
        return String::new();
    }
    let len = (u128::from(n) * width as u128 / u128::from(max)) as usize;
    "@".repeat(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_distributions_are_the_distribution_of_all_values() {
        let (mut few, mut many, mut all) =
            (Latency::default(), Latency::default(), Latency::default());
        for v in [5u64, 7, 9] {
            few.record(v);
            all.record(v);
        }
        for v in 1..=1000u64 {
            many.record(v * 10);
            all.record(v * 10);
        }
        let mut merged = Latency::default();
        merged.merge(&few);
        merged.merge(&many);
        merged.merge(&Latency::default());
        assert_eq!(
            (merged.count, merged.sum, merged.min, merged.max),
            (all.count, all.sum, 5, 10_000)
        );
        for q in [0.5, 0.99] {
            assert_eq!(merged.quantile(q), all.quantile(q), "q {q}");
        }
        let mut small = Latency::default();
        small.merge(&few);
        assert_eq!((small.count, small.quantile(0.5)), (3, Some(7)));
    }

    #[test]
    fn percentiles_are_within_one_percent_and_exact_at_the_ends() {
        let mut l = Latency::default();
        assert_eq!(l.quantile(0.5), None);
        for i in 1..=100u64 {
            l.record(i * 100_000);
        }
        assert_eq!((l.count, l.min, l.max), (100, 100_000, 10_000_000));
        assert_eq!(l.sum, 5050 * 100_000);
        let p50 = l.quantile(0.5).unwrap();
        assert!(p50.abs_diff(5_000_000) <= 50_000, "{p50}");
        let p99 = l.quantile(0.99).unwrap();
        assert!(p99.abs_diff(9_900_000) <= 99_000, "{p99}");
        assert_eq!(l.quantile(1.0), Some(10_000_000));
        assert_eq!(l.max_cell(), Cell::Ns(10_000_000));
        // Huge values keep exact figures.
        l.record(u64::MAX);
        assert_eq!(l.max, u64::MAX);
    }

    #[test]
    fn few_values_give_exact_percentiles() {
        let mut l = Latency::default();
        for v in [30, 10, 20, 40] {
            l.record(v);
        }
        assert_eq!(l.quantile(0.5), Some(20));
        assert_eq!(l.quantile(0.75), Some(30));
        assert_eq!(l.quantile(0.99), Some(40));
        assert_eq!(l.quantile(0.0), Some(10));
        // Past EXACT values the histogram answers, within 1 %.
        for v in 0..1000u64 {
            l.record(1_000_000 + v);
        }
        let p50 = l.quantile(0.5).unwrap();
        assert!(p50.abs_diff(1_000_480) <= 10_000, "{p50}");
    }

    #[test]
    fn log2_buckets_are_powers_of_two() {
        let mut h = Log2::default();
        for v in [0, 1, 3, 3, 1000, 1023, 1024] {
            h.record(v);
        }
        let b = h.buckets();
        assert_eq!(b[0], (0, Some(1), 1));
        assert_eq!(b[1], (1, Some(2), 1));
        assert_eq!(b[2], (2, Some(4), 2));
        assert_eq!(b.last(), Some(&(1024, Some(2048), 1)));
        assert_eq!(b[b.len() - 2], (512, Some(1024), 2));
        let mut top = Log2::default();
        top.record(u64::MAX);
        assert_eq!(top.buckets(), vec![(1 << 63, None, 1)]);
        assert_eq!(power_label(1024), "1K");
        assert_eq!(power_label(3 << 20), "3M");
        assert_eq!(power_label(512), "512");
        assert_eq!(bar(5, 10, 20), "@".repeat(10));
    }
}
