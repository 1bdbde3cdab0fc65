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
    Untraced,
    Weight,
    Waker,
}

impl SchedString {
    /// How many there are.
    pub(super) const COUNT: usize = 6;

    fn text(self) -> &'static str {
        match self {
            SchedString::IncomingWeight => "incoming_weight",
            SchedString::OutgoingWeight => "outgoing_weight",
            SchedString::Inferred => "inferred",
            SchedString::Untraced => "untraced",
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
                if let Some(unseen) = self.cpu_unseen.get_mut(usize::from(cpu)) {
                    *unseen = false;
                }
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
            self.cpu_unseen.resize(at + 1, false);
        }
        self.cpu_since[at] = self.cpu_since[at].max(ts);
        self.cpu_unseen[at] = false;
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
    /// `inferred` argument, and `untraced` when `from` was switched in by a
    /// recorded switch and showed no event of its own before it left (in a
    /// recording of every task: the kernel kept it out of tracing, or its
    /// switch out was lost). The outgoing thread's state is unknown; it is
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
        let untraced = from.tid != 0
            && self
                .cpu_unseen
                .get(usize::from(cpu))
                .copied()
                .unwrap_or(false);
        let mut args = vec![
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
        if untraced {
            args.push(Arg {
                name: self.sched_string(out, SchedString::Untraced)?,
                value: ArgValue::Bool(true),
            });
        }
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
        if e.prev_pid != 0 && thread_state(e.prev_state) == ThreadState::Dead {
            self.call_died(out, e.prev_pid, e.header.ts)?;
        }
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
        // Under a filter, a thread not followed shows no events of its own.
        if next_tid != 0 && !self.followed_only {
            self.cpu_unseen[usize::from(cpu)] = true;
        }
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
mod tests;
