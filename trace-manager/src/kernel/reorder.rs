//! Puts the events of the CPUs' ring buffers back into one time order.
//!
//! Each CPU writes its own ring buffer, so reading them one after the other
//! yields, say, a block request's completion (an interrupt on CPU 1) before
//! its issue (CPU 0), or a migrated thread's system call return before its
//! entry. Events are held here and handed on in timestamp order once no
//! earlier event can still arrive: every event stamped before the
//! *watermark* the reader passes (the time it started reading, less a window
//! for events stamped but not yet committed, and never past what a ring
//! left unread may still hold).

/// Byte offset of the timestamp in every event (`EventHeader::ts`).
const TS_OFFSET: usize = 8;

/// Arena bytes kept once a backlog is worked off (a steady load's drains
/// reuse them); anything beyond is freed.
const RETAINED_BYTES: usize = 4 << 20;

/// One held event: where its bytes are in the arena.
#[derive(Clone, Copy, Debug)]
struct Held {
    ts: u64,
    start: usize,
    len: usize,
}

/// Events held until their turn: their bytes back to back in an arena,
/// and where each is, in time order from `done` on once sorted.
#[derive(Debug, Default)]
pub struct Reorder {
    held: Vec<Held>,
    arena: Vec<u8>,
    /// Events before it have been handed on.
    done: usize,
    /// Events from here on were pushed since the last sort.
    unsorted: usize,
    /// Bytes of the events from `done` on.
    bytes: usize,
    /// Where the events pushed since the last [`Reorder::end_run`] begin.
    run_start: usize,
    /// The arena before the last compaction, kept for the next one.
    spare: Vec<u8>,
}

impl Reorder {
    /// Holds a copy of `event` (an undecoded ring-buffer entry; one too
    /// short to carry a timestamp is handed on first, where decoding will
    /// reject it).
    pub fn push(&mut self, event: &[u8]) {
        let ts = event
            .get(TS_OFFSET..TS_OFFSET + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_ne_bytes);
        self.held.push(Held {
            ts,
            start: self.arena.len(),
            len: event.len(),
        });
        self.arena.extend_from_slice(event);
        self.bytes += event.len();
    }

    /// Says that the events pushed since the last call came from one
    /// source in the order it wrote them (one CPU's ring): they are put in
    /// time order among themselves now, cheaply, as such a stream is
    /// nearly ordered already, so that the merge with the other sources'
    /// events later finds long sorted runs.
    pub fn end_run(&mut self) {
        let from = self.run_start.max(self.done);
        self.run_start = self.held.len();
        let run = &mut self.held[from..];
        // Insertion sort, as long as the events are only slightly out of
        // order (a system call's entry written after a few later events);
        // a stable sort otherwise.
        let mut budget = 8 * run.len() + 64;
        for i in 1..run.len() {
            let mut j = i;
            while j > 0 && run[j - 1].ts > run[j].ts {
                if budget == 0 {
                    run.sort_by_key(|h| h.ts);
                    return;
                }
                run.swap(j - 1, j);
                budget -= 1;
                j -= 1;
            }
        }
    }

    /// Events held now.
    pub fn len(&self) -> usize {
        self.held.len() - self.done
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the events held now.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes of memory held: the arenas' and the index's whole allocations,
    /// which grow by doubling and are kept between compactions; what a
    /// backlog costs, and what its limit is measured in.
    pub fn footprint(&self) -> usize {
        self.arena.capacity() + self.spare.capacity() + self.held.capacity() * size_of::<Held>()
    }

    /// The timestamp of the oldest event held.
    pub fn oldest(&mut self) -> Option<u64> {
        self.sort();
        self.held.get(self.done).map(|h| h.ts)
    }

    /// Whether an event stamped before `watermark` is held.
    pub fn has_before(&mut self, watermark: u64) -> bool {
        self.sort();
        self.held.get(self.done).is_some_and(|h| h.ts < watermark)
    }

    /// Hands every held event stamped before `watermark` to `f`, oldest
    /// first, and keeps the rest; returns how many were handed on.
    pub fn release(&mut self, watermark: u64, f: &mut dyn FnMut(&[u8])) -> usize {
        self.release_at_most(watermark, usize::MAX, f)
    }

    /// [`Reorder::release`], handing on at most `limit` events (the oldest).
    pub fn release_at_most(
        &mut self,
        watermark: u64,
        limit: usize,
        f: &mut dyn FnMut(&[u8]),
    ) -> usize {
        self.sort();
        let from = self.done;
        let end = from
            + self.held[from..]
                .partition_point(|h| h.ts < watermark)
                .min(limit);
        for h in &self.held[from..end] {
            f(&self.arena[h.start..h.start + h.len]);
            self.bytes -= h.len;
        }
        self.done = end;
        self.compact();
        end - from
    }

    /// Sorts what was pushed since the last sort in among the rest. Each
    /// CPU's events come mostly in time order, so the events are a few
    /// sorted runs, which the stable sort finds and merges in about linear
    /// time; it keeps equal timestamps in the order they came in.
    fn sort(&mut self) {
        if self.unsorted < self.held.len() {
            self.held[self.done..].sort_by_key(|h| h.ts);
        }
        self.unsorted = self.held.len();
    }

    /// Forgets what was handed on: at once when nothing is left, else once
    /// it is most of what is held (so each byte is moved about once).
    fn compact(&mut self) {
        if self.done == self.held.len() {
            self.held.clear();
            self.arena.clear();
            self.done = 0;
            self.unsorted = 0;
            self.run_start = 0;
            // A burst has been worked off: what it took beyond a steady
            // load's needs goes back to the system.
            self.arena.shrink_to(RETAINED_BYTES);
            self.spare = Vec::new();
            self.held.shrink_to(RETAINED_BYTES / size_of::<Held>() / 8);
            return;
        }
        if self.done < 1024 || self.done < self.held.len() / 2 {
            return;
        }
        // Into the spare arena, whose memory is kept from one compaction to
        // the next: a backlog that grows and shrinks does not make the
        // allocator map and fault in fresh pages each time.
        let mut arena = std::mem::take(&mut self.spare);
        arena.clear();
        for h in &mut self.held[self.done..] {
            let start = arena.len();
            arena.extend_from_slice(&self.arena[h.start..h.start + h.len]);
            h.start = start;
        }
        self.held.drain(..self.done);
        self.spare = std::mem::replace(&mut self.arena, arena);
        self.unsorted -= self.done;
        self.run_start = self.run_start.saturating_sub(self.done);
        self.done = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A fake entry: 8 bytes of kind/cpu, the timestamp, then `tag`.
    fn entry(ts: u64, tag: u32) -> Vec<u8> {
        let mut v = vec![0u8; 8];
        v.extend(ts.to_ne_bytes());
        v.extend(tag.to_ne_bytes());
        v
    }

    fn decode(b: &[u8]) -> (u64, u32) {
        (
            u64::from_ne_bytes(b[8..16].try_into().unwrap()),
            u32::from_ne_bytes(b[16..20].try_into().unwrap()),
        )
    }

    #[test]
    fn holds_what_is_not_yet_safe_and_keeps_arrival_order_on_ties() {
        let mut r = Reorder::default();
        r.push(&entry(30, 0));
        r.push(&entry(10, 1));
        r.push(&entry(20, 2));
        r.push(&entry(10, 3));
        let mut out = Vec::new();
        assert_eq!(r.release(21, &mut |b| out.push(decode(b))), 3);
        assert_eq!(out, [(10, 1), (10, 3), (20, 2)]);
        assert_eq!(r.len(), 1);
        r.push(&entry(25, 4));
        out.clear();
        r.release(u64::MAX, &mut |b| out.push(decode(b)));
        assert_eq!(out, [(25, 4), (30, 0)]);
        assert!(r.is_empty());
    }

    #[test]
    fn a_worked_off_burst_gives_its_memory_back() {
        let mut r = Reorder::default();
        for i in 0..400_000u32 {
            r.push(&entry(u64::from(i), i));
        }
        r.end_run();
        let burst = r.footprint();
        assert!(burst >= r.bytes(), "{burst} < {}", r.bytes());
        // Half handed on: compacted into the spare arena, both counted.
        let mut n = 0;
        r.release(200_000, &mut |_| n += 1);
        assert_eq!(n, 200_000);
        assert!(r.footprint() > burst, "the spare arena is counted");
        r.release(u64::MAX, &mut |_| {});
        assert!(r.is_empty());
        assert!(
            r.footprint() <= RETAINED_BYTES * 2,
            "{} bytes kept after the burst",
            r.footprint()
        );
    }

    #[test]
    fn a_short_entry_goes_first() {
        let mut r = Reorder::default();
        r.push(&entry(5, 0));
        r.push(&[1, 2, 3]);
        let mut out = Vec::new();
        r.release(1, &mut |b| out.push(b.to_vec()));
        assert_eq!(out, [vec![1, 2, 3]]);
    }

    #[test]
    fn hands_on_a_large_backlog_a_slice_at_a_time() {
        let mut r = Reorder::default();
        // Two CPUs' runs, interleaved in time.
        for i in 0..3000u64 {
            r.push(&entry(2 * i, i as u32));
        }
        for i in 0..3000u64 {
            r.push(&entry(2 * i + 1, 3000 + i as u32));
        }
        assert_eq!(r.len(), 6000);
        let mut out = Vec::new();
        while !r.is_empty() {
            let n = r.release_at_most(u64::MAX, 700, &mut |b| out.push(decode(b)));
            assert!(n > 0 && n <= 700);
            // More arrives while the backlog is worked off.
            if out.len() == 1400 {
                r.push(&entry(7000, 9999));
            }
            assert_eq!(r.bytes(), r.len() * 20);
        }
        assert_eq!(out.len(), 6001);
        assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
        assert_eq!(out[6000], (7000, 9999));
    }

    #[test]
    fn a_run_slightly_out_of_order_is_put_in_order() {
        let mut r = Reorder::default();
        for (i, ts) in [10u64, 20, 15, 30, 25, 5, 40].into_iter().enumerate() {
            r.push(&entry(ts, i as u32));
        }
        r.end_run();
        // A second run, far out of order: sorted all the same.
        for (i, ts) in (0..500u64).rev().enumerate() {
            r.push(&entry(ts * 3, 100 + i as u32));
        }
        r.end_run();
        let mut out = Vec::new();
        r.release(u64::MAX, &mut |b| out.push(decode(b)));
        assert_eq!(out.len(), 507);
        assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
        // Equal times keep the order they came in.
        let tens: Vec<u32> = out.iter().filter(|o| o.0 == 15).map(|o| o.1).collect();
        assert_eq!(tens, [2, 594]);
    }

    proptest! {
        /// Per-CPU streams, each in time order, read in arbitrary chunks
        /// with the watermark at the oldest time a stream may still add,
        /// and handed on a few at a time: everything comes out once, in
        /// time order.
        #[test]
        fn merges_per_cpu_streams_in_time_order(
            streams in prop::collection::vec(prop::collection::vec(0u64..1000, 0..40), 1..4),
            chunks in prop::collection::vec(1usize..7, 1..50),
            limits in prop::collection::vec(1usize..10, 1..20),
        ) {
            let mut limit = limits.iter().cycle();
            let mut streams: Vec<Vec<u64>> = streams;
            for s in &mut streams { s.sort(); }
            let total: usize = streams.iter().map(Vec::len).sum();
            let mut pos = vec![0usize; streams.len()];
            let mut r = Reorder::default();
            let mut out: Vec<(u64, u32)> = Vec::new();
            let mut chunk = chunks.iter().cycle();
            let mut tag = 0u32;
            while pos.iter().zip(&streams).any(|(p, s)| *p < s.len()) {
                for (cpu, s) in streams.iter().enumerate() {
                    let take = *chunk.next().unwrap();
                    for &ts in s.iter().skip(pos[cpu]).take(take) {
                        r.push(&entry(ts, tag));
                        tag += 1;
                    }
                    r.end_run();
                    pos[cpu] = (pos[cpu] + take).min(s.len());
                }
                // What a stream still holds is no older than its next entry.
                let watermark = streams
                    .iter()
                    .zip(&pos)
                    .filter_map(|(s, &p)| s.get(p).copied())
                    .min()
                    .unwrap_or(u64::MAX);
                r.release_at_most(watermark, *limit.next().unwrap(), &mut |b| out.push(decode(b)));
            }
            r.release(u64::MAX, &mut |b| out.push(decode(b)));
            prop_assert_eq!(out.len(), total);
            prop_assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
            let mut tags: Vec<u32> = out.iter().map(|&(_, t)| t).collect();
            tags.sort();
            prop_assert_eq!(tags, (0..total as u32).collect::<Vec<_>>());
        }
    }
}
