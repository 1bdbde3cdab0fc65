//! Interrupts: hard IRQ handlers and softirqs paired per CPU into
//! complete durations in `kernel:irq` on per-CPU tracks.

use std::io::Write;

use trace_common::fxt::{ArgValue, EventKind};
use trace_common::kernel::{IrqEntryEvent, IrqExitEvent, SOFTIRQ_EXIT, SoftirqEvent};

use super::{EventRecord, KernelTranslator, Map, comm_str};
use crate::output::{FxtStream, OutputError};

/// Koid of the pseudo-process holding the per-CPU interrupt tracks: above
/// any Linux pid (at most 2^22), inside 31 bits.
pub const IRQ_PROCESS_KOID: u32 = 0x7FFF_0000;

/// Koid of CPU `cpu`'s interrupt track.
pub fn irq_thread_koid(cpu: u32) -> u32 {
    IRQ_PROCESS_KOID + 1 + cpu.min(0xFFFE)
}

/// A hard IRQ handler or softirq running on a CPU.
#[derive(Clone, Debug)]
pub(super) struct PendingIrq {
    ts: u64,
    name: String,
    args: Vec<(&'static str, ArgValue<'static>)>,
    /// The IRQ number or softirq vector, to match the exit.
    number: i64,
}

/// The interrupts running on one CPU.
#[derive(Clone, Debug, Default)]
pub(super) struct CpuIrqs {
    hard: Option<PendingIrq>,
    soft: Option<PendingIrq>,
}

/// What the interrupt translation keeps.
#[derive(Default)]
pub(super) struct IrqState {
    /// Interrupts running, by CPU.
    pub(super) cpus: Map<u32, CpuIrqs>,
}

impl KernelTranslator {
    /// The koid of `cpu`'s interrupt track, named on first use.
    pub(super) fn irq_track<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        cpu: u32,
    ) -> Result<u32, OutputError> {
        let tid = irq_thread_koid(cpu);
        if !self.processes.contains_key(&IRQ_PROCESS_KOID) {
            self.name_process(out, IRQ_PROCESS_KOID, "kernel interrupts")?;
        }
        if !self.threads.contains_key(&tid) {
            self.name_thread(out, tid, IRQ_PROCESS_KOID, &format!("CPU {cpu} interrupts"))?;
        }
        Ok(tid)
    }

    /// A hard IRQ handler started on the event's CPU.
    pub fn irq_entry<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &IrqEntryEvent,
    ) -> Result<(), OutputError> {
        let (ts, cpu, irq) = (e.header.ts, e.header.cpu, e.irq);
        let name = comm_str(&e.name);
        let name: &str = &name;
        let name = if name.is_empty() {
            format!("irq {irq}")
        } else {
            name.to_owned()
        };
        let pending = PendingIrq {
            ts,
            name,
            args: vec![("irq", ArgValue::Int32(irq))],
            number: i64::from(irq),
        };
        if let Some(lost) = self.irq.cpus.entry(cpu).or_default().hard.replace(pending) {
            // Its exit was lost (a full ring buffer).
            self.write_irq(out, cpu, lost, ts, &[("exit_lost", ArgValue::Bool(true))])?;
        }
        Ok(())
    }

    /// A hard IRQ handler ended on the event's CPU; `ret` non-zero when it
    /// handled the interrupt.
    pub fn irq_exit<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &IrqExitEvent,
    ) -> Result<(), OutputError> {
        let (ts, cpu, irq, ret) = (e.header.ts, e.header.cpu, e.irq, e.ret);
        let slot = &mut self.irq.cpus.entry(cpu).or_default().hard;
        match slot.take() {
            Some(p) if p.number == i64::from(irq) => {
                self.write_irq(out, cpu, p, ts, &[("handled", ArgValue::Bool(ret != 0))])
            }
            other => {
                *slot = other;
                Ok(())
            }
        }
    }

    /// A softirq started or ended (`SOFTIRQ_EXIT`) on the event's CPU.
    pub fn softirq<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &SoftirqEvent,
    ) -> Result<(), OutputError> {
        let (ts, cpu, vec, exit) = (e.header.ts, e.header.cpu, e.vec, e.exit == SOFTIRQ_EXIT);
        // Softirqs never run inside a hard IRQ's handler, and a handler that
        // interrupts a softirq returns before it: a handler still running
        // at a softirq's start, or begun inside the softirq and running at
        // its end, had its exit lost. Ended here, so the two nest.
        let irqs = self.irq.cpus.entry(cpu).or_default();
        let soft_start = irqs.soft.as_ref().map(|p| p.ts);
        let lost_hard = match &irqs.hard {
            Some(hard) if !exit || soft_start.is_some_and(|s| hard.ts >= s) => irqs.hard.take(),
            _ => None,
        };
        if let Some(lost) = lost_hard {
            self.write_irq(out, cpu, lost, ts, &[("exit_lost", ArgValue::Bool(true))])?;
        }
        let slot = &mut self.irq.cpus.entry(cpu).or_default().soft;
        if !exit {
            let name = match trace_common::kernel::softirq_name(vec) {
                Some(n) => format!("softirq {n}"),
                None => format!("softirq {vec}"),
            };
            let pending = PendingIrq {
                ts,
                name,
                args: vec![("vec", ArgValue::Uint32(vec))],
                number: i64::from(vec),
            };
            if let Some(lost) = slot.replace(pending) {
                self.write_irq(out, cpu, lost, ts, &[("exit_lost", ArgValue::Bool(true))])?;
            }
            return Ok(());
        }
        match slot.take() {
            Some(p) if p.number == i64::from(vec) => self.write_irq(out, cpu, p, ts, &[]),
            other => {
                *slot = other;
                Ok(())
            }
        }
    }

    /// Writes the interrupts still running as durations that end where the
    /// recording ended, marked `unfinished`.
    pub(super) fn finish_irqs<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
    ) -> Result<(), OutputError> {
        let mut left: Vec<(u32, PendingIrq)> = Vec::new();
        for (cpu, irqs) in self.irq.cpus.iter_mut() {
            left.extend(irqs.soft.take().map(|p| (*cpu, p)));
            left.extend(irqs.hard.take().map(|p| (*cpu, p)));
        }
        left.sort_by_key(|(_, p)| p.ts);
        let end = self.end_ts();
        for (cpu, p) in left {
            let at = end.max(p.ts);
            self.write_irq(out, cpu, p, at, &[("unfinished", ArgValue::Bool(true))])?;
        }
        Ok(())
    }

    /// The start of the innermost interrupt handler running on `cpu`, if
    /// any (a hard IRQ's handler may interrupt a softirq, never the other
    /// way round).
    pub(super) fn irq_in_progress(&self, cpu: u32) -> Option<u64> {
        let irqs = self.irq.cpus.get(&cpu)?;
        let hard = irqs.hard.as_ref().map(|p| p.ts);
        let soft = irqs.soft.as_ref().map(|p| p.ts);
        hard.max(soft)
    }

    /// Writes one interrupt on `cpu`'s track, from its start to `end_ts`.
    fn write_irq<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        cpu: u32,
        p: PendingIrq,
        end_ts: u64,
        extra: &[(&str, ArgValue<'_>)],
    ) -> Result<(), OutputError> {
        let tid = self.irq_track(out, cpu)?;
        self.irq_ended(cpu, p.ts, end_ts);
        let mut args: Vec<(&str, ArgValue<'_>)> = p.args;
        args.extend(extra.iter().cloned());
        let kind = EventKind::DurationComplete { end_ts };
        self.event(
            out,
            EventRecord {
                ts: p.ts,
                category: trace_common::category::KERNEL_IRQ,
                thread: (IRQ_PROCESS_KOID, tid),
                name: &p.name,
                args: &args,
                kind,
            },
        )?;
        self.counts.interrupts += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::syscalls::SyscallTable;
    use crate::kernel::translate::testing::{ev, records};
    use std::collections::HashMap;
    use trace_common::fxt::Record;

    #[test]
    fn interrupts_become_durations_on_per_cpu_tracks() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        // CPU 1: a softirq interrupted by a hard IRQ.
        t.softirq(&mut out, &ev::softirq(100, 1, 1, false)).unwrap();
        t.irq_entry(&mut out, &ev::irq_entry(110, 1, 36, "virtio1-req.0"))
            .unwrap();
        t.irq_exit(&mut out, &ev::irq_exit(120, 1, 36, 1)).unwrap();
        t.softirq(&mut out, &ev::softirq(150, 1, 1, true)).unwrap();
        // CPU 0: an exit without its entry (left out), then a handler
        // still running at the end.
        t.irq_exit(&mut out, &ev::irq_exit(200, 0, 5, 1)).unwrap();
        t.softirq(&mut out, &ev::softirq(210, 0, 9, true)).unwrap();
        t.irq_entry(&mut out, &ev::irq_entry(300, 0, 7, ""))
            .unwrap();
        t.set_stop(400);
        t.finish_irqs(&mut out).unwrap();
        assert_eq!(t.counts().interrupts, 3);
        let bytes = out.finish().unwrap();
        let (st, recs) = records(&bytes);
        let mut events = Vec::new();
        let mut names = HashMap::new();
        for r in &recs {
            match r {
                Record::Event {
                    ts,
                    thread,
                    name,
                    kind,
                    ..
                } => {
                    let (p, tid) = st.thread(*thread).unwrap();
                    assert_eq!(p, u64::from(IRQ_PROCESS_KOID));
                    events.push((*ts, tid, st.string(name).unwrap().to_owned(), *kind));
                }
                Record::KernelObject { koid, name, .. } => {
                    names.insert(*koid, st.string(name).unwrap().to_owned());
                }
                _ => {}
            }
        }
        let cpu1 = u64::from(irq_thread_koid(1));
        let cpu0 = u64::from(irq_thread_koid(0));
        assert_eq!(
            events,
            [
                (
                    110,
                    cpu1,
                    "virtio1-req.0".to_owned(),
                    EventKind::DurationComplete { end_ts: 120 }
                ),
                (
                    100,
                    cpu1,
                    "softirq TIMER".to_owned(),
                    EventKind::DurationComplete { end_ts: 150 }
                ),
                (
                    300,
                    cpu0,
                    "irq 7".to_owned(),
                    EventKind::DurationComplete { end_ts: 400 }
                ),
            ]
        );
        assert_eq!(names[&cpu1], "CPU 1 interrupts");
        assert_eq!(names[&cpu0], "CPU 0 interrupts");
        assert_eq!(names[&u64::from(IRQ_PROCESS_KOID)], "kernel interrupts");
        assert!(cpu0 > 4_194_304 && cpu1 < i32::MAX as u64);
    }
    #[test]
    fn a_hard_irq_whose_exit_was_lost_ends_inside_its_softirq() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        // A handler inside a softirq, its exit lost: it ends with the
        // softirq, not at a later exit of the same IRQ.
        t.softirq(&mut out, &ev::softirq(100, 0, 9, false)).unwrap();
        t.irq_entry(&mut out, &ev::irq_entry(110, 0, 36, "virtio1-req.0"))
            .unwrap();
        t.softirq(&mut out, &ev::softirq(150, 0, 9, true)).unwrap();
        t.irq_exit(&mut out, &ev::irq_exit(160, 0, 36, 1)).unwrap();
        // A handler running when a softirq starts: its exit was lost too.
        t.irq_entry(&mut out, &ev::irq_entry(200, 0, 36, "virtio1-req.0"))
            .unwrap();
        t.softirq(&mut out, &ev::softirq(220, 0, 1, false)).unwrap();
        t.softirq(&mut out, &ev::softirq(230, 0, 1, true)).unwrap();
        t.irq_exit(&mut out, &ev::irq_exit(240, 0, 36, 1)).unwrap();
        t.set_stop(400);
        t.finish_irqs(&mut out).unwrap();
        let spans = crate::kernel::translate::testing::spans(&out.finish().unwrap());
        assert_eq!(
            spans
                .iter()
                .map(|(a, n, b)| (*a, n.as_str(), *b))
                .collect::<Vec<_>>(),
            [
                (110, "virtio1-req.0", 150),
                (100, "softirq RCU", 150),
                (200, "virtio1-req.0", 220),
                (220, "softirq TIMER", 230),
            ]
        );
    }
}
