//! Block I/O: requests paired by device and sector into complete
//! durations in `kernel:block` on per-device lanes.

use std::collections::VecDeque;
use std::io::Write;

use trace_common::fxt::{ArgValue, EventKind, StringRef};
use trace_common::kernel::BlockRqEvent;

use super::{EventRecord, KernelTranslator, Map, comm_str};
use crate::output::{FxtStream, OutputError};

/// Koid of the pseudo-process holding the per-device block tracks.
pub const BLOCK_PROCESS_KOID: u32 = 0x7FFE_0000;

/// A block request issued and not yet completed.
#[derive(Clone, Debug)]
pub(super) struct PendingBlock {
    ts: u64,
    name: &'static str,
    sector: u64,
    sectors: u32,
    bytes: u32,
    rwbs: String,
    issuer: u32,
    /// Times the kernel took it back from the device to issue it again.
    requeues: u32,
}

/// A device's block tracks: requests overlap on a device, so each track
/// (lane) holds requests that do not, the first free lane taking the next.
#[derive(Clone, Debug, Default)]
pub(super) struct BlockDevice {
    name: String,
    /// Each lane's koid and the end of its last request.
    lanes: Vec<(u32, u64)>,
}

/// The name of block device `dev` (a `dev_t` as the block tracepoints
/// give it: major in the upper 12 bits, minor in the lower 20), from sysfs
/// (`vda`, `nvme0n1p2`), else `major:minor`.
pub fn block_device_name(dev: u32) -> String {
    let number = format!("{}:{}", dev >> 20, dev & 0xF_FFFF);
    std::fs::read_to_string(format!("/sys/dev/block/{number}/uevent"))
        .ok()
        .and_then(|u| {
            u.lines()
                .find_map(|l| l.strip_prefix("DEVNAME=").map(str::to_owned))
        })
        .unwrap_or(number)
}

/// The operation a block request's `rwbs` flags describe.
pub fn block_op(rwbs: &str) -> &'static str {
    let op = rwbs.trim_start_matches('F');
    match op.chars().next() {
        Some('R') => "read",
        Some('W') => "write",
        Some('D') => "discard",
        Some('E') => "secure erase",
        Some('N') => "other",
        _ if rwbs.starts_with('F') => "flush",
        _ => "block I/O",
    }
}

/// What the block request translation keeps.
pub(super) struct BlockState {
    /// Block requests in flight by (device, sector), oldest first.
    pub(super) pending: Map<(u32, u64), VecDeque<PendingBlock>>,
    /// Block requests taken back from their device, until issued again.
    pub(super) requeued: Map<(u32, u64), VecDeque<PendingBlock>>,
    /// Block devices by `dev_t`, with their tracks.
    pub(super) devices: Map<u32, BlockDevice>,
    /// The next block track's koid.
    pub(super) next_koid: u32,
}

impl Default for BlockState {
    fn default() -> Self {
        BlockState {
            pending: Map::default(),
            requeued: Map::default(),
            devices: Map::default(),
            next_koid: BLOCK_PROCESS_KOID + 1,
        }
    }
}

impl KernelTranslator {
    /// The current task issued a block request (`block_rq_issue`): held
    /// until its completion.
    pub fn block_issue(&mut self, e: &BlockRqEvent) {
        let (ts, tid, dev, sector, nr_sector, bytes) = (
            e.header.ts,
            e.header.tid,
            e.dev,
            e.sector,
            e.nr_sector,
            e.bytes_or_error,
        );
        let rwbs = comm_str(&e.rwbs);
        let rwbs: &str = &rwbs;
        let key = (dev, sector);
        let again = self
            .blocks
            .requeued
            .get_mut(&key)
            .and_then(|q| q.pop_front());
        if self.blocks.requeued.get(&key).is_some_and(|q| q.is_empty()) {
            self.blocks.requeued.remove(&key);
        }
        let request = match again {
            // Issued again (often by a kernel worker): still the request its
            // first issuer made, in flight from now.
            Some(p) => PendingBlock { ts, ..p },
            None => PendingBlock {
                ts,
                name: block_op(rwbs),
                sector,
                sectors: nr_sector,
                bytes: bytes as u32,
                rwbs: rwbs.to_owned(),
                issuer: tid,
                requeues: 0,
            },
        };
        self.blocks
            .pending
            .entry(key)
            .or_default()
            .push_back(request);
    }

    /// The kernel took the request at a sector back from the device
    /// (`block_rq_requeue`): out of flight until it is issued again.
    pub fn block_requeue(&mut self, e: &BlockRqEvent) {
        let key = (e.dev, e.sector);
        let Some(queue) = self.blocks.pending.get_mut(&key) else {
            // Issued before the recording (or not followed).
            return;
        };
        let Some(mut p) = queue.pop_front() else {
            return;
        };
        if queue.is_empty() {
            self.blocks.pending.remove(&key);
        }
        p.requeues = p.requeues.saturating_add(1);
        self.counts.block_requeues += 1;
        self.blocks.requeued.entry(key).or_default().push_back(p);
    }

    /// A device completed the request at a sector (`block_rq_complete`;
    /// `bytes_or_error` is the error, 0 on success).
    pub fn block_complete<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &BlockRqEvent,
    ) -> Result<(), OutputError> {
        let (ts, dev, sector, error) = (e.header.ts, e.dev, e.sector, e.bytes_or_error);
        // A request issued again where the recording did not see it (by a
        // kernel worker, under a pid filter) completes from its first issue.
        let key = (dev, sector);
        let map = if self.blocks.pending.contains_key(&key) {
            &mut self.blocks.pending
        } else {
            &mut self.blocks.requeued
        };
        let Some(queue) = map.get_mut(&key) else {
            // Issued before the recording (or not followed).
            return Ok(());
        };
        let Some(p) = queue.pop_front() else {
            return Ok(());
        };
        if queue.is_empty() {
            map.remove(&key);
        }
        self.write_block(out, dev, p, ts, Some(error))
    }

    /// Writes the block requests still in flight as durations that end
    /// where the recording ended, marked `unfinished`.
    pub(super) fn finish_block<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
    ) -> Result<(), OutputError> {
        let requeued: Vec<_> = self.blocks.requeued.drain().collect();
        let mut left: Vec<(u32, PendingBlock)> = self
            .blocks
            .pending
            .drain()
            .chain(requeued)
            .flat_map(|((dev, _), q)| q.into_iter().map(move |p| (dev, p)))
            .collect();
        left.sort_by_key(|(_, p)| p.ts);
        let end = self.end_ts();
        for (dev, p) in left {
            let at = end.max(p.ts);
            self.write_block(out, dev, p, at, None)?;
        }
        Ok(())
    }

    /// Writes one block request, issued at `p.ts` and completed at `end`
    /// (with `error`; `None`: unfinished), as a complete duration on the
    /// first of its device's tracks that is free since it was issued.
    fn write_block<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        dev: u32,
        p: PendingBlock,
        end: u64,
        error: Option<i32>,
    ) -> Result<(), OutputError> {
        if !self.processes.contains_key(&BLOCK_PROCESS_KOID) {
            self.name_process(out, BLOCK_PROCESS_KOID, "kernel block I/O")?;
        }
        let device = self
            .blocks
            .devices
            .entry(dev)
            .or_insert_with(|| BlockDevice {
                name: block_device_name(dev),
                lanes: Vec::new(),
            });
        let name = device.name.clone();
        let lane = match device.lanes.iter().position(|&(_, last)| last <= p.ts) {
            Some(i) => {
                device.lanes[i].1 = end;
                device.lanes[i].0
            }
            None => {
                let koid = self.blocks.next_koid;
                self.blocks.next_koid = self.blocks.next_koid.saturating_add(1).min(0x7FFE_FFFF);
                device.lanes.push((koid, end));
                let label = match device.lanes.len() {
                    1 => name.clone(),
                    n => format!("{name} ({n})"),
                };
                self.name_thread(out, koid, BLOCK_PROCESS_KOID, &label)?;
                koid
            }
        };
        let number = format!("{}:{}", dev >> 20, dev & 0xF_FFFF);
        let mut args = vec![
            ("device", ArgValue::String(StringRef::inline(&name))),
            ("dev", ArgValue::String(StringRef::inline(&number))),
            ("sector", ArgValue::Uint64(p.sector)),
            ("sectors", ArgValue::Uint32(p.sectors)),
            ("bytes", ArgValue::Uint32(p.bytes)),
            ("rwbs", ArgValue::String(StringRef::inline(&p.rwbs))),
            ("issuer", ArgValue::Koid(u64::from(p.issuer))),
        ];
        if p.requeues > 0 {
            args.push(("requeued", ArgValue::Uint32(p.requeues)));
        }
        match error {
            Some(e) => args.push(("error", ArgValue::Int32(e))),
            None => args.push(("unfinished", ArgValue::Bool(true))),
        }
        self.counts.block_requests += 1;
        self.event(
            out,
            EventRecord {
                ts: p.ts,
                category: trace_common::category::KERNEL_BLOCK,
                thread: (BLOCK_PROCESS_KOID, lane),
                name: p.name,
                args: &args,
                kind: EventKind::DurationComplete { end_ts: end },
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::syscalls::SyscallTable;
    use crate::kernel::translate::testing::{ev, events_and_names};

    #[test]
    fn a_requeued_request_is_in_flight_from_its_last_issue_and_keeps_its_issuer() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        let dev = (4000 << 20) | 16;
        // Issued by 42, taken back, issued again by a kernel worker (7).
        t.block_issue(&ev::block_issue(100, 42, dev, 8, 8, 4096, "R"));
        t.block_requeue(&ev::block_complete(150, dev, 8, 0));
        t.block_issue(&ev::block_issue(1_000, 7, dev, 8, 8, 4096, "R"));
        t.block_complete(&mut out, &ev::block_complete(1_040, dev, 8, 0))
            .unwrap();
        // Taken back and issued again where the recording did not see it:
        // in flight from its first issue.
        t.block_issue(&ev::block_issue(2_000, 42, dev, 16, 8, 4096, "W"));
        t.block_requeue(&ev::block_complete(2_010, dev, 16, 0));
        t.block_complete(&mut out, &ev::block_complete(2_500, dev, 16, 0))
            .unwrap();
        t.finish_block(&mut out).unwrap();
        assert_eq!(t.counts().block_requeues, 2);
        assert_eq!(t.counts().block_requests, 2);
        let bytes = out.finish().unwrap();
        let (events, _) = events_and_names(&bytes);
        let got: Vec<(u64, String, EventKind)> = events
            .iter()
            .map(|(ts, _, _, name, kind)| (*ts, name.clone(), *kind))
            .collect();
        assert_eq!(
            got,
            [
                (
                    1_000,
                    "read".to_owned(),
                    EventKind::DurationComplete { end_ts: 1_040 }
                ),
                (
                    2_000,
                    "write".to_owned(),
                    EventKind::DurationComplete { end_ts: 2_500 }
                ),
            ]
        );
    }

    #[test]
    fn block_requests_pair_by_device_and_sector_on_lanes_per_device() {
        assert_eq!(block_op("R"), "read");
        assert_eq!(block_op("RA"), "read");
        assert_eq!(block_op("WS"), "write");
        assert_eq!(block_op("FWS"), "write");
        assert_eq!(block_op("FF"), "flush");
        assert_eq!(block_op("D"), "discard");
        assert_eq!(block_op(""), "block I/O");
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        // A device number no machine has: named by its numbers.
        let dev = (4000 << 20) | 16;
        // Completed before it was seen issued: left out.
        t.block_complete(&mut out, &ev::block_complete(50, dev, 8, 0))
            .unwrap();
        // Two requests at the same sector complete in order; they overlap,
        // so they go on two tracks of the device.
        t.block_issue(&ev::block_issue(100, 42, dev, 8, 8, 4096, "W"));
        t.block_issue(&ev::block_issue(110, 43, dev, 8, 8, 4096, "R"));
        t.block_complete(&mut out, &ev::block_complete(200, dev, 8, 0))
            .unwrap();
        t.block_complete(&mut out, &ev::block_complete(210, dev, 8, -5))
            .unwrap();
        // A later one fits on the first track again.
        t.block_issue(&ev::block_issue(300, 42, dev, 16, 8, 4096, "W"));
        t.block_complete(&mut out, &ev::block_complete(320, dev, 16, 0))
            .unwrap();
        // Still in flight when the recording stops: ends there.
        t.block_issue(&ev::block_issue(400, 42, dev, 24, 8, 4096, "FF"));
        t.set_stop(500);
        t.finish_block(&mut out).unwrap();
        assert_eq!(t.counts().block_requests, 4);
        let bytes = out.finish().unwrap();
        let (ev, names) = events_and_names(&bytes);
        let p = u64::from(BLOCK_PROCESS_KOID);
        let (a, b) = (p + 1, p + 2);
        assert_eq!(names[&a], "4000:16");
        assert_eq!(names[&b], "4000:16 (2)");
        // Complete durations, never async events (Perfetto keys those by id
        // alone, across every process, and files them at the top level).
        assert_eq!(
            ev,
            [
                (
                    100,
                    p,
                    a,
                    "write".to_owned(),
                    EventKind::DurationComplete { end_ts: 200 }
                ),
                (
                    110,
                    p,
                    b,
                    "read".to_owned(),
                    EventKind::DurationComplete { end_ts: 210 }
                ),
                (
                    300,
                    p,
                    a,
                    "write".to_owned(),
                    EventKind::DurationComplete { end_ts: 320 }
                ),
                (
                    400,
                    p,
                    a,
                    "flush".to_owned(),
                    EventKind::DurationComplete { end_ts: 500 }
                ),
            ]
        );
    }
}
