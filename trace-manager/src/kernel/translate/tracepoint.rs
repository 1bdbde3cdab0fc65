//! Tracepoints selected by name: an instant per event on the thread it
//! happened on (a CPU's interrupt track when it ran no task), or, for an
//! `ENTRY..EXIT` pair, one duration from each entry to the next exit on the
//! same thread; every field decoded into a typed argument.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use trace_common::category::KERNEL_LOCK;
use trace_common::fxt::{ArgValue, EventKind, StringRef};
use trace_common::kernel::tracepoint::TracepointRecord;

use super::irq::{IRQ_PROCESS_KOID, irq_thread_koid};
use super::locks::lock_wait_name;
use super::{EventRecord, KernelTranslator};
use crate::kernel::tracepoints::{Decoded, Role, Selection, decode};
use crate::output::{FxtStream, OutputError};

/// An entry waiting for its exit.
#[derive(Clone, Debug)]
struct Open {
    ts: u64,
    thread: (u32, u32),
    args: Vec<(String, Decoded)>,
    /// The start of the system call the thread was in at the entry.
    in_call: Option<u64>,
    /// Where that call ended, once it has: the duration may not outlast it
    /// (Perfetto drops a slice that partly overlaps another on its track).
    call_end: Option<u64>,
    /// The CPU of the entry.
    cpu: u32,
    /// For an entry on a CPU's interrupt track (no task ran), the start of
    /// the interrupt handler it came in, if any.
    in_irq: Option<u64>,
    /// Where that handler ended, once it has: the duration may not outlast
    /// it (its exit was lost, or was seen in another context).
    irq_end: Option<u64>,
}

/// The translator's state for selected tracepoints.
#[derive(Debug, Default)]
pub(super) struct Tracepoints {
    selection: Arc<Selection>,
    /// Entries not exited yet, by thread and pair, innermost last.
    open: HashMap<((u32, u32), usize), Vec<Open>>,
    /// Records written per tracepoint id (a pair's under its entry).
    written: HashMap<u32, u64>,
    /// Exits without an entry on their thread (the entry came before the
    /// recording, or its filter left it out).
    unpaired: u64,
    /// Events of ids the selection does not have.
    unknown: u64,
}

/// A decoded value as an FXT argument.
fn arg(value: &Decoded) -> ArgValue<'_> {
    match value {
        Decoded::I32(v) => ArgValue::Int32(*v),
        Decoded::U32(v) => ArgValue::Uint32(*v),
        Decoded::I64(v) => ArgValue::Int64(*v),
        Decoded::U64(v) => ArgValue::Uint64(*v),
        Decoded::Bool(v) => ArgValue::Bool(*v),
        Decoded::Pointer(v) => ArgValue::Pointer(*v),
        Decoded::Text(s) => ArgValue::String(StringRef::inline(s)),
    }
}

/// Fields as an event's arguments: an event carries at most 15 (FXT), so
/// past the 14th the rest go into a 15th, `more`, as `name=value` text
/// (`-e '*:*'` selects tracepoints with 20 fields and more).
fn fit(mut list: Vec<(String, Decoded)>) -> Vec<(String, Decoded)> {
    const MAX: usize = trace_common::fxt::wire::MAX_ARGS;
    /// Room for the text (an inline string holds less than 32 KiB).
    const MORE_BYTES: usize = 16 << 10;
    if list.len() <= MAX {
        return list;
    }
    let rest = list.split_off(MAX - 1);
    let mut text = String::new();
    for (k, v) in rest {
        if !text.is_empty() {
            text.push(' ');
        }
        match v {
            Decoded::I32(v) => text.push_str(&format!("{k}={v}")),
            Decoded::U32(v) => text.push_str(&format!("{k}={v}")),
            Decoded::I64(v) => text.push_str(&format!("{k}={v}")),
            Decoded::U64(v) => text.push_str(&format!("{k}={v}")),
            Decoded::Bool(v) => text.push_str(&format!("{k}={v}")),
            Decoded::Pointer(v) => text.push_str(&format!("{k}={v:#x}")),
            Decoded::Text(v) => text.push_str(&format!("{k}={v:?}")),
        }
    }
    if text.len() > MORE_BYTES {
        let mut end = MORE_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    list.push(("more".to_owned(), Decoded::Text(text)));
    list
}

impl Tracepoints {
    /// `group:event` of the tracepoint with id `id`.
    pub(super) fn name_of(&self, id: u32) -> Option<String> {
        self.selection
            .get(id)
            .map(|t| format!("{}:{}", t.group, t.event))
    }
}

impl KernelTranslator {
    /// Sets the tracepoints selected by name, whose events
    /// [`KernelTranslator::tracepoint`] translates.
    pub fn set_tracepoints(&mut self, selection: Arc<Selection>) {
        self.tracepoints = Tracepoints {
            selection,
            ..Tracepoints::default()
        };
    }

    /// Per selected tracepoint (`group:event`, or a pair's name), the
    /// records written; then exits that had no entry.
    pub fn tracepoint_counts(&self) -> (Vec<(String, u64)>, u64) {
        let tp = &self.tracepoints;
        let mut list: Vec<(String, u64)> = tp
            .selection
            .tracepoints
            .iter()
            .filter(|t| !matches!(t.role, Role::Exit(_)))
            .map(|t| {
                let name = match t.role {
                    Role::Entry(n) => tp.selection.pairs[n].name.clone(),
                    _ => t.name(),
                };
                (name, tp.written.get(&t.id).copied().unwrap_or(0))
            })
            .collect();
        list.sort();
        (list, tp.unpaired)
    }

    /// One event of a selected tracepoint (none stamped after the stop).
    pub fn tracepoint<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        record: &TracepointRecord<'_>,
    ) -> Result<(), OutputError> {
        let selection = Arc::clone(&self.tracepoints.selection);
        let h = record.event.header;
        if !self.wants(h.ts) {
            return Ok(());
        }
        // Not evidence of which task a CPU runs (no `current_task`): without
        // the scheduler's events, switches inferred from these would draw
        // tasks running through idle time.
        self.last_ts = self.last_ts.max(h.ts);
        let Some(tp) = selection.get(record.event.id) else {
            self.tracepoints.unknown += 1;
            return Ok(());
        };
        let mut args = decode(tp, record);
        if record.event.cut > 0 {
            args.push((
                "cut_bytes".to_owned(),
                Decoded::U32(record.event.cut.into()),
            ));
        }
        let thread = if h.tid == 0 {
            (IRQ_PROCESS_KOID, self.irq_track(out, h.cpu)?)
        } else {
            self.know_thread(out, h.tid, h.tgid)?;
            (h.tgid, h.tid)
        };
        match tp.role {
            Role::Instant => {
                let args = fit(args);
                let list: Vec<(&str, ArgValue<'_>)> =
                    args.iter().map(|(k, v)| (k.as_str(), arg(v))).collect();
                self.event(
                    out,
                    EventRecord {
                        ts: h.ts,
                        category: &tp.group,
                        thread,
                        name: &tp.event,
                        args: &list,
                        kind: EventKind::Instant,
                    },
                )?;
                *self.tracepoints.written.entry(tp.id).or_default() += 1;
            }
            Role::Entry(n) => {
                let in_call = self.call_in_progress(h.tid);
                let in_irq = if thread.0 == IRQ_PROCESS_KOID {
                    self.irq_in_progress(h.cpu)
                } else {
                    None
                };
                self.tracepoints
                    .open
                    .entry((thread, n))
                    .or_default()
                    .push(Open {
                        ts: h.ts,
                        thread,
                        args,
                        in_call,
                        call_end: None,
                        cpu: h.cpu,
                        in_irq,
                        irq_end: None,
                    });
            }
            Role::Exit(n) => {
                let open = self
                    .tracepoints
                    .open
                    .get_mut(&(thread, n))
                    .and_then(Vec::pop);
                match open {
                    Some(open) => {
                        let end = self.pair_end(&open, h.tid, h.ts);
                        if end < h.ts {
                            args.push(("end_clamped_ns".to_owned(), Decoded::U64(h.ts - end)));
                        }
                        self.write_pair(out, n, open, end, Some(args))?
                    }
                    None => self.tracepoints.unpaired += 1,
                }
            }
        }
        if self.has_triggers() {
            let name = format!("{}:{}", tp.group, tp.event);
            self.check_event(
                out,
                |c| matches!(c, super::Condition::Tracepoint(n) if *n == name),
                h.ts,
                thread,
            )?;
        }
        Ok(())
    }

    /// The start of the system call thread `tid` is in, if any.
    fn call_in_progress(&self, tid: u32) -> Option<u64> {
        self.syscall
            .calls
            .get(&tid)
            .and_then(|c| c.call.as_ref())
            .map(|c| c.ts)
    }

    /// Notes that thread `tid`'s system call from `start` ended at `end`,
    /// for the pairs that began inside it.
    pub(super) fn call_ended(&mut self, tid: u32, start: u64, end: u64) {
        if self.tracepoints.open.is_empty() {
            return;
        }
        for (((_, t), _), opens) in self.tracepoints.open.iter_mut() {
            if *t != tid {
                continue;
            }
            for o in opens.iter_mut() {
                if o.in_call == Some(start) && o.call_end.is_none() {
                    o.call_end = Some(end);
                }
            }
        }
    }

    /// Notes that the interrupt handler that started at `start` on `cpu`
    /// ended at `end`, for the pairs on that CPU's interrupt track that
    /// began inside it.
    pub(super) fn irq_ended(&mut self, cpu: u32, start: u64, end: u64) {
        if self.tracepoints.open.is_empty() {
            return;
        }
        let track = (IRQ_PROCESS_KOID, irq_thread_koid(cpu));
        for n in 0..self.tracepoints.selection.pairs.len() {
            let Some(opens) = self.tracepoints.open.get_mut(&(track, n)) else {
                continue;
            };
            for o in opens.iter_mut() {
                if o.in_irq == Some(start) && o.irq_end.is_none() {
                    o.irq_end = Some(end);
                }
            }
        }
    }

    /// Where a pair begun at `open` and exited at `exit` on thread `tid`
    /// ends on the timeline: at the exit, unless that would cross a slice
    /// on the same track, which Perfetto would then drop. On a thread's
    /// track, a system call it began in and that ended first (the per-call
    /// tracepoints fire just after the raw ones), or one begun after it and
    /// still running; on a CPU's interrupt track, likewise an interrupt
    /// handler (an entry inside a handler whose exit was not recorded stays
    /// open past it).
    fn pair_end(&self, open: &Open, tid: u32, exit: u64) -> u64 {
        let mut end = exit;
        if let Some(call_end) = open.call_end {
            end = end.min(call_end.max(open.ts));
        }
        if let Some(start) = self.call_in_progress(tid)
            && start > open.ts
            && open.in_call != Some(start)
        {
            end = end.min(start);
        }
        if open.thread.0 == IRQ_PROCESS_KOID {
            if let Some(irq_end) = open.irq_end {
                end = end.min(irq_end.max(open.ts));
            }
            if let Some(start) = self.irq_in_progress(open.cpu)
                && start > open.ts
                && open.in_irq != Some(start)
            {
                end = end.min(start);
            }
        }
        end
    }

    /// Pair `n`'s duration from `open` to `end`; `exit_args` are the exit's
    /// fields (`None`: still open when the recording stopped).
    fn write_pair<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        n: usize,
        open: Open,
        end: u64,
        exit_args: Option<Vec<(String, Decoded)>>,
    ) -> Result<(), OutputError> {
        let selection = Arc::clone(&self.tracepoints.selection);
        let pair = &selection.pairs[n];
        let entry = selection.get(pair.entry);
        let group = entry.map_or("tracepoint", |t| t.group.as_str());
        // `kernel:lock`'s pair: a lock wait, named by the lock.
        let lock_wait = self.lock_waits()
            && entry.is_some_and(|t| t.group == "lock" && t.event == "contention_begin");
        let (category, name) = if lock_wait {
            (KERNEL_LOCK, lock_wait_name(&open.args))
        } else {
            (group, pair.name.clone())
        };
        let mut list: Vec<(String, Decoded)> = open.args;
        match exit_args {
            Some(exit) => {
                for (k, v) in exit {
                    // The exit's fields keep their names unless the entry
                    // has them too.
                    let k = if list.iter().any(|(e, _)| *e == k) {
                        format!("exit_{k}")
                    } else {
                        k
                    };
                    list.push((k, v));
                }
            }
            None => list.push(("unfinished".to_owned(), Decoded::Bool(true))),
        }
        let list = fit(list);
        let args: Vec<(&str, ArgValue<'_>)> =
            list.iter().map(|(k, v)| (k.as_str(), arg(v))).collect();
        let kind = EventKind::DurationComplete {
            end_ts: end.max(open.ts),
        };
        self.event(
            out,
            EventRecord {
                ts: open.ts,
                category,
                thread: open.thread,
                name: &name,
                args: &args,
                kind,
            },
        )?;
        *self.tracepoints.written.entry(pair.entry).or_default() += 1;
        Ok(())
    }

    /// Ends every pair still open where the recording stopped.
    pub(super) fn finish_tracepoints<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
    ) -> Result<(), OutputError> {
        let mut left: Vec<(usize, Open)> = self
            .tracepoints
            .open
            .drain()
            .flat_map(|((_, n), opens)| opens.into_iter().map(move |o| (n, o)))
            .collect();
        left.sort_by_key(|(_, o)| o.ts);
        let stop = self.end_ts();
        for (n, mut open) in left {
            // The calls and handlers still running were ended (at the stop)
            // first.
            let end = self.pair_end(&open, open.thread.1, stop);
            if end < stop {
                open.args
                    .push(("end_clamped_ns".to_owned(), Decoded::U64(stop - end)));
            }
            self.write_pair(out, n, open, end, None)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::syscalls::SyscallTable;
    use crate::kernel::tracepoints::select;
    use crate::kernel::tracepoints::testing::{FakeTracefs, event_at};
    use crate::kernel::translate::testing::{ev, spans};

    #[test]
    fn a_pair_on_an_interrupt_track_never_crosses_a_handler() {
        let fs = FakeTracefs::new("pair-in-irq");
        let spec = ["irq:softirq_entry..irq:softirq_exit".to_owned()];
        let selection = Arc::new(select(&fs.0, &spec).unwrap());
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        t.set_tracepoints(Arc::clone(&selection));
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let pair = &selection.pairs[0];
        // On CPU 0 with no task running (tid 0): the pair's entry and exit.
        let tracepoint = |t: &mut KernelTranslator, out: &mut FxtStream<Vec<u8>>, ts, id| {
            let tp = selection.get(id).unwrap();
            let bytes = event_at(tp, ev::header(ts, 0, 0, 0), &[0u8; 12], &[]);
            let record = TracepointRecord::parse(&bytes).unwrap();
            t.tracepoint(out, &record).unwrap();
        };
        // An entry inside a softirq whose exit never comes.
        t.softirq(&mut out, &ev::softirq(100, 0, 1, false)).unwrap();
        tracepoint(&mut t, &mut out, 110, pair.entry);
        t.softirq(&mut out, &ev::softirq(200, 0, 1, true)).unwrap();
        // An entry outside any handler, exited inside a later one.
        tracepoint(&mut t, &mut out, 300, pair.entry);
        t.irq_entry(&mut out, &ev::irq_entry(400, 0, 5, "virtio0"))
            .unwrap();
        tracepoint(&mut t, &mut out, 450, pair.exit);
        t.irq_exit(&mut out, &ev::irq_exit(500, 0, 5, 1)).unwrap();
        t.set_stop(1000);
        t.finish_open(&mut out).unwrap();
        let spans = spans(&out.finish().unwrap());
        // Each pair ends inside the handler it began in, or before the one
        // its exit came in began: no two slices partly overlap.
        assert_eq!(
            spans
                .iter()
                .map(|(a, n, b)| (*a, n.as_str(), *b))
                .collect::<Vec<_>>(),
            [
                (100, "softirq TIMER", 200),
                (300, "softirq", 400),
                (400, "virtio0", 500),
                (110, "softirq", 200),
            ]
        );
    }

    #[test]
    fn fields_past_the_fourteenth_go_into_one_argument() {
        let few: Vec<(String, Decoded)> = (0..15)
            .map(|i| (format!("f{i}"), Decoded::U32(i)))
            .collect();
        assert_eq!(fit(few.clone()), few);
        let mut many = few;
        many.push(("p".into(), Decoded::Pointer(0x1000)));
        many.push(("s".into(), Decoded::Text("a b".into())));
        let fitted = fit(many);
        assert_eq!(fitted.len(), 15);
        assert_eq!(fitted[13], ("f13".to_owned(), Decoded::U32(13)));
        assert_eq!(
            fitted[14],
            (
                "more".to_owned(),
                Decoded::Text("f14=14 p=0x1000 s=\"a b\"".to_owned())
            )
        );
    }
}
