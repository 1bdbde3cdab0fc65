//! Scheduling: context switches (compact where they fit), the task each
//! CPU runs and the switches the kernel did not record, wake-ups.

use std::io::Write;

use trace_common::fxt::wire::IDLE_WEIGHT;
use trace_common::fxt::{Arg, ArgValue, Record, StringRef, ThreadRef, ThreadState};
use trace_common::kernel::{ABSENT_ID, EventHeader, SchedSwitchEvent};

use super::{Current, KernelTranslator, Map, UNKNOWN_TGID};
use crate::output::{FxtStream, OutputError};

/// The Linux previous-task state of `sched_switch` as an FXT thread state.
///
/// `prev_state` holds the TASK_REPORT bits (S=1, D=2, T=4, t=8, X=16, Z=32,
/// P=64, I=128) and a preemption marker above them; 0 means the task was
/// preempted while runnable.
pub fn thread_state(prev_state: i32) -> ThreadState {
    const REPORT_MASK: i32 = 0xff;
    let s = prev_state & REPORT_MASK;
    // Preemption is reported as TASK_REPORT_MAX, above the mask: no state bit.
    if s == 0 {
        return ThreadState::Running;
    }
    if s & 0x10 != 0 {
        ThreadState::Dead
    } else if s & 0x20 != 0 {
        ThreadState::Dying
    } else if s & (0x04 | 0x08) != 0 {
        ThreadState::Suspended
    } else {
        // S, D, P (parked) and I (idle kernel thread) are all "blocked".
        ThreadState::Blocked
    }
}

/// The constant strings of scheduling records (argument names).
#[derive(Clone, Copy, Debug)]
pub(super) enum SchedString {
    IncomingWeight,
    OutgoingWeight,
    Inferred,
    Weight,
    Waker,
}

impl SchedString {
    /// How many there are.
    pub(super) const COUNT: usize = 5;

    fn text(self) -> &'static str {
        match self {
            SchedString::IncomingWeight => "incoming_weight",
            SchedString::OutgoingWeight => "outgoing_weight",
            SchedString::Inferred => "inferred",
            SchedString::Weight => "weight",
            SchedString::Waker => "waker",
        }
    }
}

/// The weight argument for a thread: its priority, or [`IDLE_WEIGHT`] for
/// the idle task (tid 0).
pub fn weight(tid: u32, prio: i32) -> i32 {
    if tid == 0 { IDLE_WEIGHT } else { prio }
}

/// What the scheduling events showed of one thread.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SchedThread {
    /// The CPU it runs on (idle tasks are never recorded as running).
    pub(super) running_on: Option<u16>,
    /// Its priority, as last seen.
    pub(super) prio: Option<i32>,
    /// When it was first seen in an event (its creation for a thread
    /// created during the recording); cleared at its exit.
    pub(super) first_seen: Option<u64>,
    /// A wake-up that came while it was still on its CPU, kept for the
    /// block its switch-out may yet record ([`EARLY_WAKE_NS`]).
    pub(super) early_wake: Option<EarlyWake>,
}

/// A wake-up of a thread still on its CPU: its waker, as
/// [`KernelTranslator::wakeup`] would have written it.
#[derive(Clone, Copy, Debug)]
pub(super) struct EarlyWake {
    pub(super) ts: u64,
    pub(super) target_cpu: u16,
    pub(super) prio: i32,
    pub(super) waker_tid: u32,
    pub(super) waker_tgid: u32,
    pub(super) waker_cpu: u16,
}

/// How long after a wake-up of a thread still on its CPU a switch-out of
/// it as blocked is taken to be the block that wake-up ended: the waker
/// saw it going to sleep (`sched_waking` fires before the kernel waits for
/// the sleeper to be off its CPU), and the sleeper's own switch-out is
/// written a moment later.
pub const EARLY_WAKE_NS: u64 = 50_000;

/// What the scheduling translation keeps.
#[derive(Default)]
pub(super) struct SchedState {
    /// What scheduling events showed of each thread: one entry per thread,
    /// so that a switch or wake-up looks each of its threads up once.
    pub(super) threads: Map<u32, SchedThread>,
    /// Constant strings of scheduling records, each interned at its first
    /// use ([`SchedString`]).
    pub(super) strings: [Option<StringRef<'static>>; SchedString::COUNT],
}

impl KernelTranslator {
    /// Every event says which task was running on the CPU it was written
    /// on (its header's `tid` of `tgid`, at `ts`). Where that is not the
    /// task the CPU's last context switch switched in, the kernel switched
    /// without a record (a lost event, or a task the kernel keeps out of
    /// tracing): the switch is written here, marked `inferred`, so that
    /// every CPU's switches stay continuous.
    pub fn current_task<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        h: &EventHeader,
    ) -> Result<(), OutputError> {
        let now = Current {
            tid: h.tid,
            tgid: h.tgid,
        };
        self.runs(out, h.ts, h.cpu as u16, now)
    }

    /// `cpu` runs `now` at `ts`; a switch no event recorded is inferred
    /// when it ran another task.
    fn runs<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        cpu: u16,
        now: Current,
    ) -> Result<(), OutputError> {
        self.last_ts = self.last_ts.max(ts);
        match self.cpu_current.get(usize::from(cpu)).copied().flatten() {
            Some(c) if c.tid == now.tid => {
                if c.tgid != now.tgid && now.tgid != UNKNOWN_TGID {
                    // Switched in by a record that could not tell its process.
                    let at = usize::from(cpu);
                    self.cpu_current[at] = Some(now);
                }
                Ok(())
            }
            Some(_) if self.came_late(ts, cpu, now.tid) => {
                self.counts.late_events += 1;
                Ok(())
            }
            Some(c) => self.inferred_switch(out, ts, cpu, c, now),
            None => {
                self.set_current(cpu, now, ts);
                Ok(())
            }
        }
    }

    /// Whether an event of thread `tid` at `ts` on `cpu` came after what
    /// the CPUs' tracks already say of later times: a switch on `cpu`
    /// after `ts`, or `tid` switched in on another CPU after `ts`. (Calls
    /// staged on a CPU while their thread keeps running can reach the
    /// manager after the events of other CPUs that the reorder window has
    /// let through.) Such an event is written on its thread only: a switch
    /// inferred from it would go back in time and break the CPU's sequence.
    fn came_late(&self, ts: u64, cpu: u16, tid: u32) -> bool {
        let since = |cpu: u16| self.cpu_since.get(usize::from(cpu)).copied().unwrap_or(0);
        if ts < since(cpu) {
            return true;
        }
        tid != 0
            && self
                .sched
                .threads
                .get(&tid)
                .and_then(|t| t.running_on)
                .is_some_and(|other| other != cpu && ts < since(other))
    }

    /// Records that `cpu` runs `now` since `ts`.
    fn set_current(&mut self, cpu: u16, now: Current, ts: u64) {
        let at = usize::from(cpu);
        if self.cpu_current.len() <= at {
            self.cpu_current.resize(at + 1, None);
            self.cpu_since.resize(at + 1, 0);
        }
        self.cpu_since[at] = self.cpu_since[at].max(ts);
        if let Some(old) = self.cpu_current[at].replace(now)
            && old.tid != now.tid
            && let Some(t) = self.sched.threads.get_mut(&old.tid)
            && t.running_on == Some(cpu)
        {
            t.running_on = None;
        }
        if now.tid != 0 {
            self.sched.threads.entry(now.tid).or_default().running_on = Some(cpu);
        }
    }

    /// Constant string `which` of scheduling records, interned the first
    /// time it is used.
    pub(super) fn sched_string<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        which: SchedString,
    ) -> Result<StringRef<'static>, OutputError> {
        let slot = &mut self.sched.strings[which as usize];
        if let Some(s) = slot {
            return Ok(s.clone());
        }
        let s = self.strings.intern(out, which.text())?;
        self.sched.strings[which as usize] = Some(s.clone());
        Ok(s)
    }

    /// Writes a switch on `cpu` from `from` to `to` that no event recorded,
    /// at `ts`: a context switch record (8/1) with the weights and an
    /// `inferred` argument. The outgoing thread's state is unknown; it is
    /// written as blocked.
    fn inferred_switch<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        cpu: u16,
        from: Current,
        to: Current,
    ) -> Result<(), OutputError> {
        if to.tid != 0 {
            // The thread may still look as if it ran on another CPU.
            if let Some(other) = self.sched.threads.get(&to.tid).and_then(|t| t.running_on)
                && other != cpu
            {
                let idle = Current { tid: 0, tgid: 0 };
                self.inferred_switch(out, ts, other, to, idle)?;
            }
            self.know_thread(out, to.tid, to.tgid)?;
        }
        if from.tid != 0 {
            self.know_thread(out, from.tid, from.tgid)?;
        }
        let prio = |t: &Self, tid: u32| {
            if tid == 0 {
                IDLE_WEIGHT
            } else {
                t.sched
                    .threads
                    .get(&tid)
                    .and_then(|t| t.prio)
                    .unwrap_or(120)
            }
        };
        let (in_w, out_w) = (prio(self, to.tid), prio(self, from.tid));
        let args = [
            Arg {
                name: self.sched_string(out, SchedString::IncomingWeight)?,
                value: ArgValue::Int32(in_w),
            },
            Arg {
                name: self.sched_string(out, SchedString::OutgoingWeight)?,
                value: ArgValue::Int32(out_w),
            },
            Arg {
                name: self.sched_string(out, SchedString::Inferred)?,
                value: ArgValue::Bool(true),
            },
        ];
        out.write(&Record::ContextSwitch {
            ts,
            cpu,
            outgoing_state: ThreadState::Blocked as u8,
            outgoing_tid: u64::from(from.tid),
            incoming_tid: u64::from(to.tid),
            args: (&args[..]).into(),
        })?;
        self.counts.context_switches += 1;
        self.counts.inferred_switches += 1;
        self.set_current(cpu, to, ts);
        Ok(())
    }

    /// A context switch on the event's CPU from `prev` (the current task,
    /// of the header's thread group) to `next`.
    ///
    /// A thread switched out blocked after a wake-up that came while it was
    /// on its CPU, within `EARLY_WAKE_NS`, is woken at the switch, by
    /// that wake-up's waker.
    pub fn switch<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &SchedSwitchEvent,
    ) -> Result<(), OutputError> {
        self.write_switch(out, e)?;
        if e.prev_pid != 0 && thread_state(e.prev_state) == ThreadState::Blocked {
            self.call_blocked(e.prev_pid, e.header.ts);
        }
        let early = self
            .sched
            .threads
            .get_mut(&e.prev_pid)
            .and_then(|t| t.early_wake.take());
        if let Some(w) = early
            && e.prev_pid != 0
            && thread_state(e.prev_state) == ThreadState::Blocked
            && e.header.ts.saturating_sub(w.ts) <= EARLY_WAKE_NS
        {
            self.write_wakeup(out, e.header.ts, e.prev_pid, w)?;
        }
        Ok(())
    }

    fn write_switch<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &SchedSwitchEvent,
    ) -> Result<(), OutputError> {
        let (ts, cpu) = (e.header.ts, e.header.cpu as u16);
        let (prev_tid, prev_tgid, prev_prio, prev_state) =
            (e.prev_pid, e.header.tgid, e.prev_prio, e.prev_state);
        let (next_tid, next_prio) = (e.next_pid, e.next_prio);
        self.runs(
            out,
            ts,
            cpu,
            Current {
                tid: prev_tid,
                tgid: prev_tgid,
            },
        )?;
        if prev_tid != 0 {
            self.sched.threads.entry(prev_tid).or_default().prio = Some(prev_prio);
        }
        let next = self.sched.threads.entry(next_tid).or_default();
        next.first_seen.get_or_insert(ts);
        if next_tid != 0 {
            next.prio = Some(next_prio);
            // Switched in here while it looks as if it ran elsewhere: that
            // CPU switched away from it without a record.
            if let Some(other) = next.running_on
                && other != cpu
                && let Some(c) = self.cpu_current.get(usize::from(other)).copied().flatten()
                && !self.came_late(ts, other, 0)
            {
                self.inferred_switch(out, ts, other, c, Current { tid: 0, tgid: 0 })?;
            }
        }
        self.name_thread_comm(out, prev_tid, prev_tgid, &e.prev_comm)?;
        let next_tgid = if next_tid == 0 {
            Some(0)
        } else {
            let told = (e.next_tgid != ABSENT_ID).then_some(e.next_tgid);
            self.see_thread_comm(out, next_tid, told, &e.next_comm)?
        };
        self.set_current(
            cpu,
            Current {
                tid: next_tid,
                tgid: next_tgid.unwrap_or(UNKNOWN_TGID),
            },
            ts,
        );
        let priority = |tid: u32, prio: i32| {
            if tid == 0 {
                Some(0)
            } else {
                u8::try_from(prio).ok()
            }
        };
        if let (Some(next_tgid), Ok(cpu8), Some(out_prio), Some(in_prio)) = (
            next_tgid,
            u8::try_from(cpu),
            priority(prev_tid, prev_prio),
            priority(next_tid, next_prio),
        ) {
            let prev_tgid = if prev_tid == 0 { 0 } else { prev_tgid };
            let outgoing_thread = self.thread_ref(out, prev_tgid, prev_tid, None)?;
            let keep = match outgoing_thread {
                ThreadRef::Index(i) => Some(i),
                ThreadRef::Inline { .. } => None,
            };
            let incoming_thread = self.thread_ref(out, next_tgid, next_tid, keep)?;
            out.write(&Record::LegacyContextSwitch {
                ts,
                cpu: cpu8,
                outgoing_state: thread_state(prev_state) as u8,
                outgoing_thread,
                incoming_thread,
                outgoing_priority: out_prio,
                incoming_priority: in_prio,
            })?;
            self.counts.context_switches += 1;
            return Ok(());
        }
        let args = [
            Arg {
                name: self.sched_string(out, SchedString::IncomingWeight)?,
                value: ArgValue::Int32(weight(next_tid, next_prio)),
            },
            Arg {
                name: self.sched_string(out, SchedString::OutgoingWeight)?,
                value: ArgValue::Int32(weight(prev_tid, prev_prio)),
            },
        ];
        out.write(&Record::ContextSwitch {
            ts,
            cpu,
            outgoing_state: thread_state(prev_state) as u8,
            outgoing_tid: u64::from(prev_tid),
            incoming_tid: u64::from(next_tid),
            args: (&args[..]).into(),
        })?;
        self.counts.context_switches += 1;
        Ok(())
    }

    /// The thread table reference of `tid` of `tgid`, writing its thread
    /// record first when it gets an entry; entry `keep` is not replaced.
    fn thread_ref<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        tgid: u32,
        tid: u32,
        keep: Option<u8>,
    ) -> Result<ThreadRef, OutputError> {
        let (index, new) = self.thread_table.index(tgid, tid, keep);
        if new {
            out.write(&Record::Thread {
                index,
                process: u64::from(tgid),
                thread: u64::from(tid),
            })?;
        }
        Ok(ThreadRef::Index(index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::syscalls::SyscallTable;
    use crate::kernel::translate::testing::{ev, records};
    use trace_common::fxt::obj_type;
    use trace_common::fxt::read::TraceState;

    #[test]
    fn state_mapping() {
        assert_eq!(thread_state(0), ThreadState::Running);
        assert_eq!(thread_state(0x100), ThreadState::Running);
        assert_eq!(thread_state(1), ThreadState::Blocked);
        assert_eq!(thread_state(2), ThreadState::Blocked);
        assert_eq!(thread_state(4), ThreadState::Suspended);
        assert_eq!(thread_state(8), ThreadState::Suspended);
        assert_eq!(thread_state(0x10), ThreadState::Dead);
        assert_eq!(thread_state(0x20), ThreadState::Dying);
        assert_eq!(thread_state(0x80), ThreadState::Blocked);
    }

    #[test]
    fn idle_gets_idle_weight() {
        assert_eq!(weight(0, 120), i32::MIN);
        assert_eq!(weight(5, 120), 120);
    }

    #[test]
    fn a_switch_the_kernel_did_not_record_is_inferred_from_the_next_event_on_that_cpu() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        // CPU 0 switches from idle to thread 69, which the kernel keeps out
        // of tracing (or whose switch-out was lost): the next event on CPU
        // 0 comes from the idle task.
        t.current_task(&mut out, &ev::header(100, 0, 0, 0)).unwrap();
        t.switch(
            &mut out,
            &ev::switch(100, 0, (0, 0, 120, 0, "swapper/0"), (69, 110, "hidden")),
        )
        .unwrap();
        t.current_task(&mut out, &ev::header(400, 0, 0, 0)).unwrap();
        t.cpu_power(&mut out, &ev::cpu_power(400, 0, false, 1))
            .unwrap();
        t.current_task(&mut out, &ev::header(900, 0, 0, 0)).unwrap();
        t.switch(
            &mut out,
            &ev::switch(900, 0, (0, 0, 120, 0, "swapper/0"), (11, 120, "worker")),
        )
        .unwrap();
        assert_eq!(t.counts().inferred_switches, 1);
        let bytes = out.finish().unwrap();
        let (st, recs) = records(&bytes);
        let _ = st;
        let mut switches = Vec::new();
        let mut st = TraceState::new();
        for r in &recs {
            st.apply(r);
            match r {
                Record::LegacyContextSwitch {
                    ts,
                    outgoing_thread,
                    incoming_thread,
                    ..
                } => switches.push((
                    *ts,
                    st.thread(*outgoing_thread).unwrap().1,
                    st.thread(*incoming_thread).unwrap().1,
                    false,
                )),
                Record::ContextSwitch {
                    ts,
                    outgoing_tid,
                    incoming_tid,
                    args,
                    ..
                } => switches.push((
                    *ts,
                    *outgoing_tid,
                    *incoming_tid,
                    st.arg(args, "inferred") == Some(&ArgValue::Bool(true)),
                )),
                _ => {}
            }
        }
        assert_eq!(
            switches,
            [(100, 0, 69, false), (400, 69, 0, true), (900, 0, 11, false)]
        );
        // Every switch out is of the thread switched in before it.
        for w in switches.windows(2) {
            assert_eq!(w[0].2, w[1].1, "{switches:?}");
        }
    }

    #[test]
    fn an_event_that_comes_late_infers_no_switch_back_in_time() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        // Thread 100 runs on CPU 0, thread 200 on CPU 1.
        t.current_task(&mut out, &ev::header(10, 0, 100, 100))
            .unwrap();
        t.current_task(&mut out, &ev::header(50, 1, 200, 200))
            .unwrap();
        // 100 shows up on CPU 1 at 100: it left CPU 0 (idle there).
        t.current_task(&mut out, &ev::header(100, 1, 100, 100))
            .unwrap();
        // A call 100 made on CPU 0 at 60, staged there, arrives now: by
        // time it belongs before what CPU 0's track already says.
        t.current_task(&mut out, &ev::header(60, 0, 100, 100))
            .unwrap();
        // CPU 0 goes on at 150 with thread 300.
        t.current_task(&mut out, &ev::header(150, 0, 300, 300))
            .unwrap();
        assert_eq!(t.counts().late_events, 1);
        let bytes = out.finish().unwrap();
        let (_, recs) = records(&bytes);
        let mut by_cpu: std::collections::BTreeMap<u16, Vec<(u64, u64, u64)>> = Default::default();
        for r in &recs {
            if let Record::ContextSwitch {
                ts,
                cpu,
                outgoing_tid,
                incoming_tid,
                ..
            } = r
            {
                by_cpu
                    .entry(*cpu)
                    .or_default()
                    .push((*ts, *outgoing_tid, *incoming_tid));
            }
        }
        assert_eq!(by_cpu[&0], [(100, 100, 0), (150, 0, 300)]);
        assert_eq!(by_cpu[&1], [(100, 200, 100)]);
        // In time order, every switch out is of the thread switched in
        // before it on that CPU.
        for switches in by_cpu.values_mut() {
            switches.sort();
            for w in switches.windows(2) {
                assert_eq!(w[0].2, w[1].1, "{switches:?}");
            }
        }
    }

    #[test]
    fn with_a_pid_filter_a_wakeup_or_completion_by_another_task_infers_no_switch() {
        use trace_common::kernel::KernelEvent;
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        t.set_followed_only(true);
        // Followed thread 69 runs on CPU 0, then is switched out for a
        // task the filter does not follow (written as the idle task).
        t.translate(
            &mut out,
            &KernelEvent::Switch(ev::switch(100, 0, (0, 0, 120, 0, ""), (69, 120, "app"))),
        )
        .unwrap();
        t.translate(
            &mut out,
            &KernelEvent::Switch(ev::switch(200, 0, (69, 69, 120, 1, "app"), (0, 120, ""))),
        )
        .unwrap();
        // That task (500) wakes 69 and a request 69 issued completes in its
        // interrupt: neither says that 500 runs where the recording
        // follows only 69.
        t.translate(
            &mut out,
            &KernelEvent::Wakeup(ev::wakeup(300, 1, 69, 120, "app", 500, 0)),
        )
        .unwrap();
        t.translate(
            &mut out,
            &KernelEvent::BlockComplete(ev::block_complete(350, 8, 0, 0)),
        )
        .unwrap();
        t.translate(
            &mut out,
            &KernelEvent::Switch(ev::switch(400, 0, (0, 0, 120, 0, ""), (69, 120, "app"))),
        )
        .unwrap();
        assert_eq!(t.counts().inferred_switches, 0);
        assert_eq!(t.counts().context_switches, 3);
        // Without the filter the same wake-up is evidence of 500 on CPU 0.
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        t.translate(
            &mut out,
            &KernelEvent::Switch(ev::switch(200, 0, (69, 69, 120, 1, "app"), (0, 120, ""))),
        )
        .unwrap();
        t.translate(
            &mut out,
            &KernelEvent::Wakeup(ev::wakeup(300, 1, 69, 120, "app", 500, 0)),
        )
        .unwrap();
        assert_eq!(t.counts().inferred_switches, 1);
    }

    #[test]
    fn a_thread_switched_in_on_another_cpu_leaves_the_first_one() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        t.switch(
            &mut out,
            &ev::switch(100, 0, (0, 0, 120, 0, "swapper/0"), (69, 110, "hidden")),
        )
        .unwrap();
        t.switch(
            &mut out,
            &ev::switch(200, 1, (0, 0, 120, 0, "swapper/1"), (69, 110, "hidden")),
        )
        .unwrap();
        assert_eq!(t.counts().inferred_switches, 1);
        assert_eq!(t.sched.threads.get(&69).and_then(|t| t.running_on), Some(1));
        assert_eq!(t.cpu_current[0].map(|c| c.tid), Some(0));
    }

    #[test]
    fn switch_names_threads_and_writes_weights() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::new();
        // prev 4242 of group 4240 ("worker"); next is the idle task.
        t.switch(
            &mut out,
            &ev::switch(
                1000,
                1,
                (4242, 4240, 120, 1, "worker"),
                (0, 120, "swapper/1"),
            ),
        )
        .unwrap();
        // The same thread again: no second name record.
        t.switch(
            &mut out,
            &ev::switch(
                2000,
                1,
                (4242, 4240, 120, 0, "worker"),
                (0, 120, "swapper/1"),
            ),
        )
        .unwrap();
        let bytes = out.finish().unwrap();
        let (st, recs) = records(&bytes);
        let names: Vec<_> = recs
            .iter()
            .filter_map(|r| match r {
                Record::KernelObject {
                    koid,
                    obj_type,
                    name,
                    args,
                } => Some((
                    *koid,
                    *obj_type,
                    st.string(name).map(str::to_owned),
                    args.len(),
                )),
                _ => None,
            })
            .collect();
        assert!(names.contains(&(4242, obj_type::THREAD, Some("worker".into()), 1)));
        assert!(
            names
                .iter()
                .any(|n| n.0 == 4240 && n.1 == obj_type::PROCESS)
        );
        assert_eq!(names.iter().filter(|n| n.0 == 4242).count(), 1);
        // Compact switches: threads by table reference, idle as priority 0.
        let switches: Vec<_> = recs
            .iter()
            .filter_map(|r| match r {
                Record::LegacyContextSwitch {
                    ts,
                    cpu,
                    outgoing_state,
                    outgoing_thread,
                    incoming_thread,
                    outgoing_priority,
                    incoming_priority,
                } => Some((
                    *ts,
                    *cpu,
                    *outgoing_state,
                    *outgoing_thread,
                    *incoming_thread,
                    (*outgoing_priority, *incoming_priority),
                )),
                _ => None,
            })
            .collect();
        assert_eq!(switches.len(), 2);
        assert_eq!((switches[0].0, switches[0].1), (1000, 1));
        assert_eq!(switches[0].2, ThreadState::Blocked as u8);
        assert_eq!(switches[1].2, ThreadState::Running as u8);
        assert_eq!(st.thread(switches[0].3), Some((4240, 4242)));
        assert_eq!(st.thread(switches[0].4), Some((0, 0)));
        assert_eq!(switches[0].5, (120, 0));
        // The second switch reuses both entries: two thread records in all.
        assert_eq!(
            (switches[1].3, switches[1].4),
            (switches[0].3, switches[0].4)
        );
        let thread_records = recs
            .iter()
            .filter(|r| matches!(r, Record::Thread { .. }))
            .count();
        assert_eq!(thread_records, 2);
    }

    #[test]
    fn a_switch_that_does_not_fit_the_compact_form_carries_weights() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::new();
        // The incoming thread's process is unknown (no such thread in
        // /proc: above any pid), and a CPU above 255.
        let ghost = 4_194_305;
        t.switch(
            &mut out,
            &ev::switch(1000, 1, (4242, 4240, 120, 1, "w"), (ghost, 100, "x")),
        )
        .unwrap();
        t.switch(
            &mut out,
            &ev::switch(2000, 300, (4242, 4240, 120, 1, "w"), (0, 120, "i")),
        )
        .unwrap();
        let bytes = out.finish().unwrap();
        let (st, recs) = records(&bytes);
        let switches: Vec<_> = recs
            .iter()
            .filter_map(|r| match r {
                Record::ContextSwitch {
                    cpu,
                    outgoing_tid,
                    incoming_tid,
                    args,
                    ..
                } => Some((*cpu, *outgoing_tid, *incoming_tid, args.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(switches.len(), 2);
        assert_eq!((switches[0].1, switches[0].2), (4242, u64::from(ghost)));
        assert_eq!(switches[1].0, 300);
        let args = &switches[1].3;
        assert_eq!(st.string(&args[0].name), Some("incoming_weight"));
        assert_eq!(args[0].value, ArgValue::Int32(i32::MIN));
        assert_eq!(st.string(&args[1].name), Some("outgoing_weight"));
        assert_eq!(args[1].value, ArgValue::Int32(120));
    }
}
