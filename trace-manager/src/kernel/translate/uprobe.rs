//! `--uprobe` functions, paired entry to return per thread as a stack.

use std::io::Write;

use trace_common::fxt::{ArgValue, EventKind};
use trace_common::kernel::{UPROBE_RETURN, UprobeEvent};

use super::{EventRecord, KernelTranslator, Map};
use crate::output::{FxtStream, OutputError};

/// A probed function entered and not yet returned.
#[derive(Clone, Copy, Debug)]
pub(super) struct ProbeCall {
    /// The probe's index.
    probe: u64,
    /// The calling thread's process.
    tgid: u32,
    /// When it was entered.
    start: u64,
}

/// A thread's probed functions entered and not yet returned.
#[derive(Clone, Debug, Default)]
pub(super) struct ProbeThread {
    calls: Vec<ProbeCall>,
    /// Where the last call written ended: an entry stamped before it came
    /// out of time order (the CPUs' events merge late), and a duration from
    /// it could overlap one written, which Perfetto cannot draw.
    written_to: u64,
}

/// What the uprobe translation keeps.
#[derive(Default)]
pub(super) struct UprobeState {
    /// Names of the probed functions, by probe index.
    pub(super) names: Vec<String>,
    /// Probed functions entered and not returned, by thread, innermost
    /// last.
    pub(super) stacks: Map<u32, ProbeThread>,
}

impl KernelTranslator {
    /// Names the probes: `names[i]` is probe `i`'s function.
    pub fn set_probe_names(&mut self, names: Vec<String>) {
        self.uprobe.names = names;
    }

    /// The current task entered or returned (`UPROBE_RETURN`) from probed
    /// function `probe`.
    pub fn probe<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &UprobeEvent,
    ) -> Result<(), OutputError> {
        let (ts, tid, tgid, probe) = (e.header.ts, e.header.tid, e.header.tgid, e.probe);
        let ret = e.ret == UPROBE_RETURN;
        let thread = self.uprobe.stacks.entry(tid).or_default();
        if !ret {
            if ts < thread.written_to {
                log::debug!("thread {tid}: probe {probe} entered at {ts}, out of order: left out");
                return Ok(());
            }
            thread.calls.push(ProbeCall {
                probe,
                tgid,
                start: ts,
            });
            return Ok(());
        }
        // The innermost call of this function (returns of others in between
        // were lost).
        let Some(at) = thread.calls.iter().rposition(|c| c.probe == probe) else {
            return Ok(());
        };
        let call = thread.calls[at];
        thread.calls.truncate(at);
        thread.written_to = thread.written_to.max(ts);
        self.write_probe(out, tid, call, ts, false)
    }

    /// Writes the probed functions still running as durations that end
    /// where the recording ended, marked `unfinished`.
    pub(super) fn finish_probes<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
    ) -> Result<(), OutputError> {
        let mut left: Vec<(u32, ProbeCall)> = self
            .uprobe
            .stacks
            .drain()
            .flat_map(|(tid, s)| s.calls.into_iter().map(move |c| (tid, c)))
            .collect();
        left.sort_by_key(|(_, c)| c.start);
        let end = self.end_ts();
        for (tid, call) in left {
            self.write_probe(out, tid, call, end.max(call.start), true)?;
        }
        Ok(())
    }

    /// One probed function call of thread `tid`, from its entry to `end`:
    /// its return, or (`unfinished`) where the recording ended.
    fn write_probe<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        tid: u32,
        call: ProbeCall,
        end: u64,
        unfinished: bool,
    ) -> Result<(), OutputError> {
        let ProbeCall { probe, tgid, start } = call;
        let name = usize::try_from(probe)
            .ok()
            .and_then(|i| self.uprobe.names.get(i).cloned())
            .unwrap_or_else(|| format!("probe {probe}"));
        let kind = EventKind::DurationComplete { end_ts: end };
        let marked = [("unfinished", ArgValue::Bool(true))];
        let args: &[(&str, ArgValue<'_>)] = if unfinished { &marked } else { &[] };
        self.event(
            out,
            EventRecord {
                ts: start,
                category: "uprobe",
                thread: (tgid, tid),
                name: &name,
                args,
                kind,
            },
        )?;
        self.counts.probes += 1;
        if !unfinished && self.has_triggers() {
            self.check_event(
                out,
                |c| matches!(c, super::Condition::Uprobe(n) if *n == name),
                end,
                (tgid, tid),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::syscalls::SyscallTable;
    use crate::kernel::translate::testing::{ev, records};
    use trace_common::fxt::Record;

    #[test]
    fn probe_hits_pair_as_a_stack_per_thread() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        t.set_probe_names(vec!["f".into(), "g".into()]);
        let (pid, tid) = (4_000_030_u32, 4_000_031_u32);
        // A return whose entry came before the recording: left out.
        t.probe(&mut out, &ev::probe(5, tid, pid, 0, true)).unwrap();
        // f → f → g, returns in reverse.
        t.probe(&mut out, &ev::probe(10, tid, pid, 0, false))
            .unwrap();
        t.probe(&mut out, &ev::probe(20, tid, pid, 0, false))
            .unwrap();
        t.probe(&mut out, &ev::probe(30, tid, pid, 1, false))
            .unwrap();
        t.probe(&mut out, &ev::probe(40, tid, pid, 1, true))
            .unwrap();
        t.probe(&mut out, &ev::probe(50, tid, pid, 0, true))
            .unwrap();
        t.probe(&mut out, &ev::probe(60, tid, pid, 0, true))
            .unwrap();
        // Still inside f at the end.
        t.probe(&mut out, &ev::probe(70, tid, pid, 0, false))
            .unwrap();
        t.set_stop(90);
        t.finish_probes(&mut out).unwrap();
        assert_eq!(t.counts().probes, 4);
        let bytes = out.finish().unwrap();
        let (st, recs) = records(&bytes);
        let ev: Vec<_> = recs
            .iter()
            .filter_map(|r| match r {
                Record::Event { ts, name, kind, .. } => {
                    Some((*ts, st.string(name).unwrap().to_owned(), *kind))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            ev,
            [
                (30, "g".into(), EventKind::DurationComplete { end_ts: 40 }),
                (20, "f".into(), EventKind::DurationComplete { end_ts: 50 }),
                (10, "f".into(), EventKind::DurationComplete { end_ts: 60 }),
                (70, "f".into(), EventKind::DurationComplete { end_ts: 90 }),
            ]
        );
    }

    #[test]
    fn an_entry_out_of_time_order_is_left_out_and_nothing_overlaps() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        t.set_probe_names(vec!["main".into(), "main".into()]);
        let (pid, tid) = (4_000_040_u32, 4_000_041_u32);
        // Probe 0 entered at 10 and returned at 30; probe 1's entry at 20
        // (inside it) is handed on late, after that return, and returns at
        // 40: as [20, 40] it would overlap [10, 30].
        t.probe(&mut out, &ev::probe(10, tid, pid, 0, false))
            .unwrap();
        t.probe(&mut out, &ev::probe(30, tid, pid, 0, true))
            .unwrap();
        t.probe(&mut out, &ev::probe(20, tid, pid, 1, false))
            .unwrap();
        t.probe(&mut out, &ev::probe(40, tid, pid, 1, true))
            .unwrap();
        // Later calls pair as ever.
        t.probe(&mut out, &ev::probe(50, tid, pid, 1, false))
            .unwrap();
        t.probe(&mut out, &ev::probe(60, tid, pid, 1, true))
            .unwrap();
        t.set_stop(90);
        t.finish_probes(&mut out).unwrap();
        let bytes = out.finish().unwrap();
        let (_, recs) = records(&bytes);
        let spans: Vec<_> = recs
            .iter()
            .filter_map(|r| match r {
                Record::Event {
                    ts,
                    kind: EventKind::DurationComplete { end_ts },
                    ..
                } => Some((*ts, *end_ts)),
                _ => None,
            })
            .collect();
        assert_eq!(spans, [(10, 30), (50, 60)]);
    }
}
