//! A remote machine's clock mapped onto the local one.
//!
//! The local side sends a ping and notes its own clock before and after
//! the answer; the remote side answers with its clock as it read the ping.
//! If the two legs of the round trip took equally long, the remote read
//! its clock at the local midpoint, so `remote - midpoint` is the offset;
//! whatever the legs took, the true offset lies within half the round trip
//! of that. Queueing only ever adds delay, so the fastest exchanges are the
//! least disturbed (the filter NTP and PTP use). Within a burst, whose
//! pings are a few milliseconds apart, the offset is taken as constant and
//! each leg's fastest time is taken on its own: the outward leg bounds the
//! offset from above (`remote - sent` = its delay + offset), the return
//! leg from below (`received - remote` = its delay − offset), and the
//! middle of the two bounds is the estimate — never looser than the
//! fastest single exchange, often tighter. Bursts repeated through the
//! recording give points between which the offset is interpolated, so
//! that a drift between the clocks is followed.

/// One exchange, every time in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ping {
    /// The local clock just before the ping was sent.
    pub sent: u64,
    /// The remote clock when it answered.
    pub remote: u64,
    /// The local clock just after the answer arrived.
    pub received: u64,
}

impl Ping {
    /// The round trip.
    pub fn rtt(&self) -> u64 {
        self.received.saturating_sub(self.sent)
    }

    /// The local clock halfway through the round trip.
    pub fn midpoint(&self) -> u64 {
        self.sent + self.rtt() / 2
    }

    /// Remote minus local clock, were both legs equally long.
    pub fn offset(&self) -> i64 {
        let d = i128::from(self.remote) - i128::from(self.midpoint());
        d.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }
}

/// What one burst of pings says of the remote clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncPoint {
    /// When, on the local clock.
    pub local_ns: u64,
    /// Remote minus local clock then.
    pub offset_ns: i64,
    /// The true offset is within this of `offset_ns` (half the round trip).
    pub bound_ns: u64,
    /// The round trip of the ping it comes from.
    pub rtt_ns: u64,
}

impl SyncPoint {
    /// The point a burst of `pings` gives: the offset between the tightest
    /// bounds its outward and its return legs set, at the time of its
    /// fastest exchange.
    pub fn best_of(pings: &[Ping]) -> Option<SyncPoint> {
        let valid = || pings.iter().filter(|p| p.received >= p.sent);
        let best = valid().min_by_key(|p| p.rtt())?;
        // offset <= remote - sent; offset >= remote - received.
        let upper = valid()
            .map(|p| i128::from(p.remote) - i128::from(p.sent))
            .min()?;
        let lower = valid()
            .map(|p| i128::from(p.remote) - i128::from(p.received))
            .max()?;
        let clamp = |v: i128| v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
        let (offset_ns, bound_ns) = if lower <= upper {
            (
                clamp((upper + lower).div_euclid(2)),
                u64::try_from((upper - lower + 1) / 2).unwrap_or(u64::MAX),
            )
        } else {
            // The clocks moved within the burst: the fastest exchange alone.
            (best.offset(), best.rtt().div_ceil(2))
        };
        Some(SyncPoint {
            local_ns: best.midpoint(),
            offset_ns,
            bound_ns,
            rtt_ns: best.rtt(),
        })
    }

    /// The remote clock at this point.
    fn remote_ns(&self) -> i128 {
        i128::from(self.local_ns) + i128::from(self.offset_ns)
    }
}

/// A remote clock as a function of the local one: the offset interpolated
/// linearly between sync points, held constant before the first and after
/// the last.
///
/// Each point's offset is first smoothed: replaced by the value at that
/// point of a least-squares line through it and its neighbours (up to
/// [`SMOOTHING_NEIGHBOURS`] on each side), so that the noise of single
/// exchanges averages out while a drift that changes over tens of seconds
/// is still followed; and kept within the point's own bound, which the
/// true offset is known to lie in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClockMap {
    points: Vec<SyncPoint>,
}

/// Points whose round trip is past this many times the shortest one's are
/// left out: a slow exchange bounds the offset loosely, and the points
/// around it bound it better.
const SLOW_POINT_FACTOR: u64 = 3;

/// Neighbours on each side a point's offset is smoothed with.
pub const SMOOTHING_NEIGHBOURS: usize = 3;

impl ClockMap {
    /// The map through `points` (in any order). Points much slower than
    /// the fastest are left out when faster ones remain.
    pub fn new(mut points: Vec<SyncPoint>) -> Self {
        points.sort_by_key(|p| p.local_ns);
        if let Some(fastest) = points.iter().map(|p| p.rtt_ns).min() {
            let limit = fastest
                .saturating_mul(SLOW_POINT_FACTOR)
                .max(fastest + 20_000);
            points.retain(|p| p.rtt_ns <= limit);
        }
        let smoothed = (0..points.len())
            .map(|i| {
                let from = i.saturating_sub(SMOOTHING_NEIGHBOURS);
                let to = (i + SMOOTHING_NEIGHBOURS + 1).min(points.len());
                let p = points[i];
                let fitted = fit_at(&points[from..to], p.local_ns);
                let (lo, hi) = (
                    p.offset_ns.saturating_sub_unsigned(p.bound_ns),
                    p.offset_ns.saturating_add_unsigned(p.bound_ns),
                );
                SyncPoint {
                    offset_ns: fitted.clamp(lo, hi),
                    ..p
                }
            })
            .collect();
        ClockMap { points: smoothed }
    }

    /// A remote clock always `offset_ns` ahead of the local one.
    pub fn constant(offset_ns: i64) -> Self {
        ClockMap {
            points: vec![SyncPoint {
                local_ns: 0,
                offset_ns,
                bound_ns: 0,
                rtt_ns: 0,
            }],
        }
    }

    /// The points the map goes through, in time order.
    pub fn points(&self) -> &[SyncPoint] {
        &self.points
    }

    /// Whether no point is known (times are then left as they are).
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The largest error bound of the map's points.
    pub fn bound_ns(&self) -> u64 {
        self.points.iter().map(|p| p.bound_ns).max().unwrap_or(0)
    }

    /// The offset at the first point.
    pub fn first_offset_ns(&self) -> Option<i64> {
        self.points.first().map(|p| p.offset_ns)
    }

    /// How fast the remote clock ran against the local one from the first
    /// point to the last, in parts per million (`None` with fewer than two
    /// points).
    pub fn drift_ppm(&self) -> Option<f64> {
        let (a, b) = (self.points.first()?, self.points.last()?);
        let span = b.local_ns.checked_sub(a.local_ns).filter(|&s| s > 0)?;
        Some((b.offset_ns - a.offset_ns) as f64 / span as f64 * 1e6)
    }

    /// The local time of remote time `remote_ns`.
    pub fn to_local(&self, remote_ns: u64) -> u64 {
        let t = i128::from(remote_ns);
        let offset = match self.points.as_slice() {
            [] => 0,
            [only] => i128::from(only.offset_ns),
            points => {
                // The segment whose remote span holds t; the first or last
                // point's offset outside them all.
                let i = points.partition_point(|p| p.remote_ns() <= t);
                if i == 0 {
                    i128::from(points[0].offset_ns)
                } else if i == points.len() {
                    i128::from(points[i - 1].offset_ns)
                } else {
                    let (a, b) = (&points[i - 1], &points[i]);
                    let span = b.remote_ns() - a.remote_ns();
                    let (oa, ob) = (i128::from(a.offset_ns), i128::from(b.offset_ns));
                    if span <= 0 {
                        oa
                    } else {
                        oa + (ob - oa) * (t - a.remote_ns()) / span
                    }
                }
            }
        };
        (t - offset).clamp(0, i128::from(u64::MAX)) as u64
    }
}

/// The value at `at` of the least-squares line through `points`' offsets.
fn fit_at(points: &[SyncPoint], at: u64) -> i64 {
    let n = points.len() as f64;
    let x = |p: &SyncPoint| (p.local_ns as f64 - at as f64) / 1e9;
    let y = |p: &SyncPoint| p.offset_ns as f64;
    let (mx, my) = (
        points.iter().map(x).sum::<f64>() / n,
        points.iter().map(y).sum::<f64>() / n,
    );
    let sxx: f64 = points.iter().map(|p| (x(p) - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (x(p) - mx) * (y(p) - my)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    // At x = 0 (the point itself).
    (my - slope * mx).round() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ping whose legs took `out` and `back` ns, against a remote clock
    /// `offset` ahead, sent at local `at`.
    fn ping(at: u64, out: u64, back: u64, offset: i64) -> Ping {
        Ping {
            sent: at,
            remote: (at + out).wrapping_add_signed(offset),
            received: at + out + back,
        }
    }

    #[test]
    fn the_fastest_ping_of_a_burst_is_kept_and_bounds_the_offset() {
        let offset = 5_000_000;
        let pings = [
            ping(1_000, 400_000, 30_000, offset),
            ping(2_000, 50_000, 48_000, offset),
            ping(3_000, 90_000, 200_000, offset),
        ];
        let p = SyncPoint::best_of(&pings).unwrap();
        assert_eq!(p.rtt_ns, 98_000);
        // The fastest outward leg (50 µs) and return leg (30 µs) bound it.
        assert_eq!(p.bound_ns, 40_000);
        assert!((p.offset_ns - offset).unsigned_abs() <= p.bound_ns);
        assert_eq!(
            p.offset_ns - offset,
            10_000,
            "the fastest legs differ by 20 µs"
        );
        // One ping alone: half its round trip.
        let one = SyncPoint::best_of(&pings[1..2]).unwrap();
        assert_eq!((one.bound_ns, one.offset_ns - offset), (49_000, 1_000));
    }

    #[test]
    fn a_drift_between_the_clocks_is_followed() {
        // The remote clock runs 20 ppm fast and starts 3 ms ahead.
        let offset_at = |local: u64| 3_000_000 + (local as f64 * 20e-6) as i64;
        let points = (0..10u64)
            .map(|i| {
                let local = i * 1_000_000_000;
                SyncPoint {
                    local_ns: local,
                    offset_ns: offset_at(local),
                    bound_ns: 30_000,
                    rtt_ns: 60_000,
                }
            })
            .collect();
        let map = ClockMap::new(points);
        for local in [0u64, 1_500_000_000, 4_250_000_000, 9_000_000_000] {
            let remote = local.wrapping_add_signed(offset_at(local));
            let back = map.to_local(remote);
            assert!(back.abs_diff(local) <= 1, "{local} -> {remote} -> {back}");
        }
        assert!((map.drift_ppm().unwrap() - 20.0).abs() < 0.01);
        // Past the last point the last offset holds.
        let remote = 20_000_000_000u64.wrapping_add_signed(offset_at(9_000_000_000));
        assert_eq!(map.to_local(remote), 20_000_000_000);
    }

    #[test]
    fn slow_points_are_left_out_and_times_keep_their_order() {
        let fast = |local_ns, offset_ns| SyncPoint {
            local_ns,
            offset_ns,
            bound_ns: 40_000,
            rtt_ns: 80_000,
        };
        let slow = SyncPoint {
            local_ns: 1_500_000_000,
            offset_ns: 900_000,
            bound_ns: 2_000_000,
            rtt_ns: 4_000_000,
        };
        let map = ClockMap::new(vec![
            fast(2_000_000_000, 1_010),
            slow,
            fast(1_000_000_000, 1_000),
        ]);
        assert_eq!(map.points().len(), 2);
        assert_eq!(map.bound_ns(), 40_000);
        let mut last = 0;
        for remote in (900_000_000..2_100_000_000u64).step_by(7_000_001) {
            let local = map.to_local(remote);
            assert!(local >= last);
            last = local;
        }
    }

    #[test]
    fn noise_of_single_points_is_smoothed_within_their_bounds() {
        // A constant true offset of 1 ms; the estimates scatter ±8 µs.
        let noise = [
            8_000i64, -6_000, 4_000, -8_000, 7_000, -3_000, 5_000, -7_000, 2_000,
        ];
        let points = noise
            .iter()
            .enumerate()
            .map(|(i, n)| SyncPoint {
                local_ns: i as u64 * 1_000_000_000,
                offset_ns: 1_000_000 + n,
                bound_ns: 10_000,
                rtt_ns: 20_000,
            })
            .collect();
        let map = ClockMap::new(points);
        for (p, n) in map.points().iter().zip(noise) {
            let error = (p.offset_ns - 1_000_000).abs();
            assert!(error < n.abs().max(3_000), "{p:?} from noise {n}");
            assert!(error <= 10_000);
        }
    }

    #[test]
    fn no_point_leaves_times_as_they_are() {
        assert_eq!(ClockMap::default().to_local(42), 42);
        assert_eq!(ClockMap::constant(-10).to_local(42), 52);
    }
}
