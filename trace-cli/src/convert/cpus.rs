//! Context switches as one track per CPU: each CPU's switches, put in time
//! order within a bounded window, become complete events named after the
//! thread that ran.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

/// Switches held per CPU to put them in time order; one arriving after a
/// later one of its CPU has been placed is counted as late and left out.
const WINDOW: usize = 4096;

/// A thread's time on a CPU.
pub(super) struct CpuSlice {
    pub cpu: u16,
    pub tid: u64,
    pub start: u64,
    pub end: u64,
}

#[derive(Default)]
struct Cpu {
    /// (ns, order of arrival, incoming tid), earliest first.
    pending: BinaryHeap<Reverse<(u64, u64, u64)>>,
    /// The thread running and since when.
    running: Option<(u64, u64)>,
    /// Time of the last switch placed.
    placed: u64,
}

/// The CPU tracks of a conversion.
#[derive(Default)]
pub(super) struct CpuTracks {
    cpus: BTreeMap<u16, Cpu>,
    seq: u64,
    /// Switches that came too late to be placed.
    pub late: u64,
}

impl CpuTracks {
    /// Whether `cpu` has had a switch yet.
    pub fn known(&self, cpu: u16) -> bool {
        self.cpus.contains_key(&cpu)
    }

    /// Whether any CPU has.
    pub fn is_empty(&self) -> bool {
        self.cpus.is_empty()
    }

    /// A switch to `incoming` (0: idle) on `cpu` at `ts`; `emit` gets each
    /// slice it ends.
    pub fn switch<E>(
        &mut self,
        cpu: u16,
        ts: u64,
        incoming: u64,
        emit: &mut impl FnMut(CpuSlice) -> Result<(), E>,
    ) -> Result<(), E> {
        let c = self.cpus.entry(cpu).or_default();
        if ts < c.placed {
            self.late += 1;
            return Ok(());
        }
        self.seq += 1;
        c.pending.push(Reverse((ts, self.seq, incoming)));
        if c.pending.len() > WINDOW {
            place(cpu, c, emit)?;
        }
        Ok(())
    }

    /// Places every switch still held.
    pub fn finish<E>(&mut self, emit: &mut impl FnMut(CpuSlice) -> Result<(), E>) -> Result<(), E> {
        for (cpu, c) in &mut self.cpus {
            while !c.pending.is_empty() {
                place(*cpu, c, emit)?;
            }
        }
        Ok(())
    }
}

/// Places the earliest switch held for `cpu`.
fn place<E>(
    cpu: u16,
    c: &mut Cpu,
    emit: &mut impl FnMut(CpuSlice) -> Result<(), E>,
) -> Result<(), E> {
    let Some(Reverse((ts, _, incoming))) = c.pending.pop() else {
        return Ok(());
    };
    c.placed = ts;
    if let Some((tid, start)) = c.running.take() {
        emit(CpuSlice {
            cpu,
            tid,
            start,
            end: ts,
        })?;
    }
    if incoming != 0 {
        c.running = Some((incoming, ts));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slices(switches: &[(u16, u64, u64)]) -> (Vec<(u16, u64, u64, u64)>, u64) {
        let mut t = CpuTracks::default();
        let mut out = Vec::new();
        let mut emit = |s: CpuSlice| -> Result<(), ()> {
            out.push((s.cpu, s.tid, s.start, s.end));
            Ok(())
        };
        for &(cpu, ts, tid) in switches {
            t.switch(cpu, ts, tid, &mut emit).unwrap();
        }
        t.finish(&mut emit).unwrap();
        (out, t.late)
    }

    #[test]
    fn switches_out_of_order_within_the_window_make_the_same_slices() {
        let (a, _) = slices(&[(0, 10, 5), (0, 20, 6), (1, 15, 7), (0, 30, 0)]);
        let (b, late) = slices(&[(0, 20, 6), (1, 15, 7), (0, 10, 5), (0, 30, 0)]);
        assert_eq!(a, vec![(0, 5, 10, 20), (0, 6, 20, 30)]);
        assert_eq!(b, a);
        assert_eq!(late, 0);
    }

    #[test]
    fn a_switch_behind_the_window_is_counted_not_drawn() {
        let mut s: Vec<(u16, u64, u64)> =
            (1..=WINDOW as u64 + 10).map(|i| (0, i * 10, i)).collect();
        s.push((0, 5, 99));
        let (out, late) = slices(&s);
        assert_eq!(late, 1);
        assert_eq!(out.len(), WINDOW + 9);
        assert!(out.windows(2).all(|w| w[0].3 == w[1].2));
    }
}
