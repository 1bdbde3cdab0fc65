//! Wake-ups: a thread made runnable, by the thread or interrupt that
//! woke it.

use std::io::Write;

use trace_common::fxt::{Arg, ArgValue, Record};
use trace_common::kernel::{ABSENT_ID, SchedWakeupEvent};

use super::KernelTranslator;
use super::sched::{EarlyWake, SchedString, weight};
use crate::output::{FxtStream, OutputError};

impl KernelTranslator {
    /// Thread `e.pid` was woken by the current task (the header's) to run
    /// on `e.target_cpu`.
    ///
    /// A wake-up from a CPU's idle task (waker 0: an interrupt taken while
    /// idle) names that CPU's interrupt track (`CPU n interrupts`) as the
    /// waker. A wake-up of a thread that is running (it was woken before it
    /// got to sleep) changes nothing and is not written.
    pub fn wakeup<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &SchedWakeupEvent,
    ) -> Result<(), OutputError> {
        let (ts, target_cpu, tid, prio) = (e.header.ts, e.target_cpu, e.pid, e.prio);
        let (waker_tid, waker_cpu) = (e.header.tid, e.header.cpu as u16);
        let seen = self.sched.threads.entry(tid).or_default();
        seen.first_seen.get_or_insert(ts);
        if tid != 0 {
            seen.prio = Some(prio);
        }
        let wake = EarlyWake {
            ts,
            target_cpu,
            prio,
            waker_tid,
            waker_tgid: e.header.tgid,
            waker_cpu,
        };
        if seen.running_on.is_some() {
            seen.early_wake = Some(wake);
            self.counts.running_wakeups += 1;
            return Ok(());
        }
        if tid != 0 {
            let told = (e.tgid != ABSENT_ID).then_some(e.tgid);
            self.see_thread_comm(out, tid, told, &e.comm)?;
        }
        self.write_wakeup(out, ts, tid, wake)
    }

    /// Writes `tid`'s wake-up `w` at `ts`.
    pub(super) fn write_wakeup<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        tid: u32,
        w: EarlyWake,
    ) -> Result<(), OutputError> {
        let EarlyWake {
            target_cpu,
            prio,
            waker_tid,
            waker_tgid,
            waker_cpu,
            ..
        } = w;
        let waker_koid = if waker_tid == 0 {
            self.irq_track(out, u32::from(waker_cpu))?
        } else {
            // Perfetto looks the waker up by its id alone: it must be named.
            self.know_thread(out, waker_tid, waker_tgid)?;
            waker_tid
        };
        let args = [
            Arg {
                name: self.sched_string(out, SchedString::Weight)?,
                value: ArgValue::Int32(weight(tid, prio)),
            },
            Arg {
                name: self.sched_string(out, SchedString::Waker)?,
                value: ArgValue::Koid(u64::from(waker_koid)),
            },
        ];
        out.write(&Record::ThreadWakeup {
            ts,
            cpu: target_cpu,
            tid: u64::from(tid),
            args: (&args[..]).into(),
        })?;
        self.counts.wakeups += 1;
        self.call_woken(out, ts, tid, waker_koid, (waker_tid, waker_tgid))
    }
}

#[cfg(test)]
mod tests {
    use trace_common::fxt::{ArgValue, Record};

    use crate::kernel::syscalls::SyscallTable;
    use crate::kernel::translate::KernelTranslator;
    use crate::kernel::translate::irq::irq_thread_koid;
    use crate::kernel::translate::testing::{ev, events_and_names, records};
    use crate::output::FxtStream;

    #[test]
    fn wakeups_of_running_threads_are_left_out_and_idle_wakers_are_interrupts() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        t.switch(
            &mut out,
            &ev::switch(100, 0, (0, 0, 120, 0, "swapper/0"), (42, 120, "runner")),
        )
        .unwrap();
        // Woken while still running (before it got to sleep): nothing
        // changes, nothing is written.
        t.wakeup(&mut out, &ev::wakeup(150, 0, 42, 120, "runner", 7, 1))
            .unwrap();
        // Woken by an interrupt taken while CPU 1 was idle (waker 0).
        t.wakeup(&mut out, &ev::wakeup(160, 0, 43, 120, "sleeper", 0, 1))
            .unwrap();
        assert_eq!(t.counts().wakeups, 1);
        assert_eq!(t.counts().running_wakeups, 1);
        let bytes = out.finish().unwrap();
        let (st, recs) = records(&bytes);
        let wakers: Vec<u64> = recs
            .iter()
            .filter_map(|r| match r {
                Record::ThreadWakeup { tid, args, .. } => {
                    assert_eq!(*tid, 43);
                    match st.arg(args, "waker") {
                        Some(ArgValue::Koid(k)) => Some(*k),
                        _ => None,
                    }
                }
                _ => None,
            })
            .collect();
        assert_eq!(wakers, [u64::from(irq_thread_koid(1))]);
        let (_, names) = events_and_names(&bytes);
        assert_eq!(names[&u64::from(irq_thread_koid(1))], "CPU 1 interrupts");
    }

    /// The tids woken in `bytes`, with when and by whom.
    fn wakeups(bytes: &[u8]) -> Vec<(u64, u64, u64)> {
        let (st, recs) = records(bytes);
        recs.iter()
            .filter_map(|r| match r {
                Record::ThreadWakeup { ts, tid, args, .. } => match st.arg(args, "waker") {
                    Some(ArgValue::Koid(k)) => Some((*ts, *tid, *k)),
                    _ => None,
                },
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_wake_up_before_the_sleepers_switch_out_wakes_it_at_the_switch() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        let run = |t: &mut KernelTranslator, out: &mut FxtStream<Vec<u8>>, ts, tid, name| {
            t.switch(
                out,
                &ev::switch(ts, 0, (0, 0, 120, 0, "swapper/0"), (tid, 120, name)),
            )
            .unwrap();
        };
        // Thread 7 on CPU 1 wakes 42 (`sched_waking`) as 42, on CPU 0,
        // goes to sleep; 42's switch-out comes 2 µs later: woken there.
        run(&mut t, &mut out, 100, 42, "sleeper");
        t.wakeup(&mut out, &ev::wakeup(1_000, 0, 42, 120, "sleeper", 7, 1))
            .unwrap();
        t.switch(
            &mut out,
            &ev::switch(3_000, 0, (42, 42, 120, 1, "sleeper"), (0, 120, "swapper/0")),
        )
        .unwrap();
        // A wake-up while running that the thread then does not sleep
        // after (preempted), and one long before its block, wake nothing.
        run(&mut t, &mut out, 10_000, 43, "busy");
        t.wakeup(&mut out, &ev::wakeup(11_000, 0, 43, 120, "busy", 7, 1))
            .unwrap();
        t.switch(
            &mut out,
            &ev::switch(12_000, 0, (43, 43, 120, 0, "busy"), (44, 120, "late")),
        )
        .unwrap();
        t.wakeup(&mut out, &ev::wakeup(13_000, 0, 44, 120, "late", 7, 1))
            .unwrap();
        t.switch(
            &mut out,
            &ev::switch(200_000, 0, (44, 44, 120, 1, "late"), (0, 120, "swapper/0")),
        )
        .unwrap();
        assert_eq!(t.counts().running_wakeups, 3);
        assert_eq!(wakeups(&out.finish().unwrap()), [(3_000, 42, 7)]);
    }
}
