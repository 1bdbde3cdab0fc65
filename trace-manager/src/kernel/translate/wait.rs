//! Waits inside system calls: a futex wait that blocked becomes a slice
//! (`kernel:lock`, `futex 0x…`, from the block to the wake-up, with the
//! thread that woke it) inside its call, and a wake-up from one thread's
//! call of another thread blocked in a call becomes a flow (`kernel:sched`
//! `wakeup`) from the waker's call to the woken thread's, which Perfetto
//! draws as an arrow.

use std::io::Write;

use trace_common::category::{KERNEL_LOCK, KERNEL_SCHED};
use trace_common::fxt::{ArgValue, EventKind};

use super::syscall::{CallWait, PendingSyscall};
use super::{EventRecord, KernelTranslator};
use crate::output::{FxtStream, OutputError};

/// A wake-up by a thread not known to be in a system call yet: its call
/// comes whole at its return, when the flow is written if the wake-up lay
/// inside it.
#[derive(Clone, Copy, Debug)]
struct PendingFlow {
    ts: u64,
    tid: u32,
    tgid: u32,
}

/// The kernel's flow ids have the top bit set: Perfetto matches a flow's
/// end in another process than its begin by the id alone, so the ids the
/// kernel gives (a waker's process to the woken one's) must be no
/// provider's.
pub const KERNEL_FLOW_IDS: u64 = 1 << 63;

/// How many wake-ups one waker keeps waiting for its call.
const PENDING_FLOWS: usize = 16;
/// How many wakers keep wake-ups waiting for their calls.
const PENDING_WAKERS: usize = 4096;

/// What the wait translation keeps.
#[derive(Debug, Default)]
pub(super) struct WaitState {
    /// Whether futex waits are written (`kernel:lock`).
    pub(super) lock_waits: bool,
    /// The last flow id given.
    flow_id: u64,
    /// Wake-ups by wakers whose call has not come yet, by waker.
    pending: super::Map<u32, Vec<PendingFlow>>,
}

/// `futex` commands that wait (`FUTEX_WAIT`, `FUTEX_LOCK_PI`,
/// `FUTEX_WAIT_BITSET`, `FUTEX_WAIT_REQUEUE_PI`, `FUTEX_LOCK_PI2`).
const FUTEX_WAIT_COMMANDS: [u64; 5] = [0, 6, 9, 11, 13];
/// `FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME`, around the command.
const FUTEX_FLAGS: u64 = 128 | 256;

/// Whether wake-ups become flows: unless `TRACE_WAKE_FLOWS=0` (for the
/// benchmark that measures what they cost).
fn wake_flows_wanted() -> bool {
    static WANTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WANTED.get_or_init(|| std::env::var_os("TRACE_WAKE_FLOWS").is_none_or(|v| v != "0"))
}

impl KernelTranslator {
    /// Sets whether futex waits are written as `kernel:lock` slices inside
    /// their system calls.
    pub fn set_lock_waits(&mut self, on: bool) {
        self.wait.lock_waits = on;
    }

    /// Whether lock waits are written (`kernel:lock`).
    pub(super) fn lock_waits(&self) -> bool {
        self.wait.lock_waits
    }

    /// Thread `tid` blocked at `ts`: so did its call in progress.
    pub(super) fn call_blocked(&mut self, tid: u32, ts: u64) {
        if let Some(call) = self
            .syscall
            .calls
            .get_mut(&tid)
            .and_then(|c| c.call.as_mut())
            && call.wait.blocked_at == 0
        {
            call.wait.blocked_at = ts;
        }
    }

    /// Thread `tid` was woken at `ts` by `waker` (a koid: the thread
    /// `waker_tid` of `waker_tgid`, or an interrupt track): its call's
    /// wait, if it blocked in one, ends; and when the waker is a thread in
    /// a call too, a flow goes from that call to this one.
    pub(super) fn call_woken<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        tid: u32,
        waker: u32,
        (waker_tid, waker_tgid): (u32, u32),
    ) -> Result<(), OutputError> {
        let Some(call) = self
            .syscall
            .calls
            .get_mut(&tid)
            .and_then(|c| c.call.as_mut())
            .filter(|c| c.wait.blocked_at != 0 && c.wait.blocked_at <= ts)
        else {
            return Ok(());
        };
        call.wait.woken = Some((ts, waker));
        let tgid = call.tgid;
        let waker_call = self
            .syscall
            .calls
            .get(&waker_tid)
            .and_then(|c| c.call)
            .filter(|w| w.ts <= ts);
        if waker_tid == 0 || waker_tid == tid || !wake_flows_wanted() {
            return Ok(());
        }
        if waker_call.is_some() {
            return self.write_flow(out, ts, (waker_tgid, waker_tid), (tgid, tid));
        }
        // A call that did not block comes whole at its return. Wakers that
        // never make one (kernel threads) would keep theirs for good: past
        // `PENDING_WAKERS` wakers, all are forgotten (their flows not drawn).
        if self.wait.pending.len() >= PENDING_WAKERS && !self.wait.pending.contains_key(&waker_tid)
        {
            self.wait.pending.clear();
        }
        let pending = self.wait.pending.entry(waker_tid).or_default();
        if pending.len() == PENDING_FLOWS {
            pending.remove(0);
        }
        pending.push(PendingFlow { ts, tid, tgid });
        Ok(())
    }

    /// `tid`'s `call`, which ended at `to`, was written: the wake-ups it
    /// made in that time become flows; those before it are dropped.
    pub(super) fn call_written<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        (tgid, tid): (u32, u32),
        call: &PendingSyscall,
        to: u64,
    ) -> Result<(), OutputError> {
        let from = call.ts;
        if let Some(mut pending) = self.wait.pending.remove(&tid) {
            for p in pending.iter().filter(|p| from <= p.ts && p.ts <= to) {
                self.write_flow(out, p.ts, (tgid, tid), (p.tgid, p.tid))?;
            }
            pending.retain(|p| p.ts > to);
            if !pending.is_empty() {
                self.wait.pending.insert(tid, pending);
            }
        }
        Ok(())
    }

    /// A flow at `ts` from thread `from` to thread `to` (each `(tgid, tid)`).
    ///
    /// Perfetto binds a flow to the innermost slice on its thread at its
    /// time, ended or not: an instant or a lock wait written inside the
    /// call since would take it, and a file cut (a snapshot, a rotated
    /// file) can hold the flow without the call. So each end has a slice of
    /// its own, `wakeup`, from 1 to 3 ns after the wake-up, the flow at 2 ns
    /// inside it, all written together.
    fn write_flow<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        from: (u32, u32),
        to: (u32, u32),
    ) -> Result<(), OutputError> {
        self.wait.flow_id += 1;
        let id = KERNEL_FLOW_IDS | self.wait.flow_id;
        for (thread, kind) in [
            (from, EventKind::FlowBegin { id }),
            (to, EventKind::FlowEnd { id }),
        ] {
            for (at, kind) in [
                (ts + 1, EventKind::DurationComplete { end_ts: ts + 3 }),
                (ts + 2, kind),
            ] {
                self.event(
                    out,
                    EventRecord {
                        ts: at,
                        category: KERNEL_SCHED,
                        thread,
                        name: "wakeup",
                        args: &[],
                        kind,
                    },
                )?;
            }
        }
        self.counts.wake_flows += 1;
        Ok(())
    }

    /// Writes the wait of `call` of `tid`, when it is a futex wait that
    /// blocked and was woken, as a slice inside it.
    pub(super) fn write_call_wait<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        tid: u32,
        call: &PendingSyscall,
    ) -> Result<(), OutputError> {
        let CallWait {
            blocked_at,
            woken: Some((woken_at, waker)),
            ..
        } = call.wait
        else {
            return Ok(());
        };
        if !self.wait.lock_waits || blocked_at == 0 || woken_at <= blocked_at {
            return Ok(());
        }
        let info = self.syscall.table.get(call.nr);
        let addr = match info.name.as_str() {
            "futex" if FUTEX_WAIT_COMMANDS.contains(&(call.args[1] & !FUTEX_FLAGS)) => call.args[0],
            "futex_wait" => call.args[0],
            _ => return Ok(()),
        };
        let name = format!("futex {addr:#x}");
        self.event(
            out,
            EventRecord {
                ts: blocked_at,
                category: KERNEL_LOCK,
                thread: (call.tgid, tid),
                name: &name,
                args: &[
                    ("addr", ArgValue::Pointer(addr)),
                    ("woken_by", ArgValue::Koid(u64::from(waker))),
                ],
                kind: EventKind::DurationComplete { end_ts: woken_at },
            },
        )?;
        self.counts.lock_waits += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use trace_common::fxt::EventKind;

    use super::KERNEL_FLOW_IDS;
    use crate::kernel::syscalls::SyscallTable;
    use crate::kernel::translate::KernelTranslator;
    use crate::kernel::translate::testing::{ev, events_and_names};
    use crate::output::FxtStream;

    const FUTEX: i64 = libc::SYS_futex;
    const WAIT_PRIVATE: u64 = 128;
    const WAKE_PRIVATE: u64 = 129;

    #[test]
    fn a_futex_wait_is_a_slice_and_its_wake_up_a_flow_between_the_calls() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::with_syscalls(SyscallTable::without_formats());
        t.set_lock_waits(true);
        let on = |t: &mut KernelTranslator, out: &mut FxtStream<Vec<u8>>, ts, cpu, tid| {
            t.switch(
                out,
                &ev::switch(ts, cpu, (0, 0, 120, 0, "swapper"), (tid, 120, "t")),
            )
            .unwrap();
        };
        on(&mut t, &mut out, 100, 0, 42);
        on(&mut t, &mut out, 100, 1, 7);
        // 42 waits on 0x1000 and blocks; 7's wake call wakes it.
        t.sys_enter(
            &mut out,
            &ev::sys_enter(1_000, 42, 40, FUTEX, [0x1000, WAIT_PRIVATE, 2, 0, 0, 0]),
        )
        .unwrap();
        t.switch(
            &mut out,
            &ev::switch(2_000, 0, (42, 40, 120, 1, "t"), (0, 120, "swapper")),
        )
        .unwrap();
        t.sys_enter(
            &mut out,
            &ev::sys_enter(5_000, 7, 7, FUTEX, [0x1000, WAKE_PRIVATE, 1, 0, 0, 0]),
        )
        .unwrap();
        t.wakeup(&mut out, &ev::wakeup(6_000, 0, 42, 120, "t", 7, 1))
            .unwrap();
        t.sys_exit(&mut out, &ev::sys_exit(7_000, 7, 7, FUTEX, 1))
            .unwrap();
        on(&mut t, &mut out, 8_000, 0, 42);
        t.sys_exit(&mut out, &ev::sys_exit(9_000, 42, 40, FUTEX, 0))
            .unwrap();
        // A wait that never blocked, and one woken by an interrupt, are
        // not flows; the second is still a wait.
        t.sys_enter(
            &mut out,
            &ev::sys_enter(10_000, 42, 40, FUTEX, [0x2000, WAIT_PRIVATE, 2, 0, 0, 0]),
        )
        .unwrap();
        t.sys_exit(&mut out, &ev::sys_exit(11_000, 42, 40, FUTEX, -11))
            .unwrap();
        t.sys_enter(
            &mut out,
            &ev::sys_enter(12_000, 42, 40, FUTEX, [0x3000, WAIT_PRIVATE, 2, 0, 0, 0]),
        )
        .unwrap();
        t.switch(
            &mut out,
            &ev::switch(13_000, 0, (42, 40, 120, 1, "t"), (0, 120, "swapper")),
        )
        .unwrap();
        t.wakeup(&mut out, &ev::wakeup(14_000, 0, 42, 120, "t", 0, 0))
            .unwrap();
        on(&mut t, &mut out, 15_000, 0, 42);
        t.sys_exit(&mut out, &ev::sys_exit(16_000, 42, 40, FUTEX, 0))
            .unwrap();
        // A waker's call that did not block comes whole after its wake-up.
        t.sys_enter(
            &mut out,
            &ev::sys_enter(20_000, 42, 40, FUTEX, [0x4000, WAIT_PRIVATE, 2, 0, 0, 0]),
        )
        .unwrap();
        t.switch(
            &mut out,
            &ev::switch(20_500, 0, (42, 40, 120, 1, "t"), (0, 120, "swapper")),
        )
        .unwrap();
        t.wakeup(&mut out, &ev::wakeup(22_000, 0, 42, 120, "t", 7, 1))
            .unwrap();
        t.sys_enter(
            &mut out,
            &ev::sys_enter(21_000, 7, 7, FUTEX, [0x4000, WAKE_PRIVATE, 1, 0, 0, 0]),
        )
        .unwrap();
        t.sys_exit(&mut out, &ev::sys_exit(23_000, 7, 7, FUTEX, 1))
            .unwrap();
        on(&mut t, &mut out, 24_000, 0, 42);
        t.sys_exit(&mut out, &ev::sys_exit(25_000, 42, 40, FUTEX, 0))
            .unwrap();
        assert_eq!(t.counts().wake_flows, 2);
        assert_eq!(t.counts().lock_waits, 3);
        let (events, _) = events_and_names(&out.finish().unwrap());
        let waits: Vec<(u64, u64, &str, EventKind)> = events
            .iter()
            .filter(|e| e.3.starts_with("futex "))
            .map(|e| (e.0, e.2, e.3.as_str(), e.4))
            .collect();
        assert_eq!(
            waits,
            [
                (
                    2_000,
                    42,
                    "futex 0x1000",
                    EventKind::DurationComplete { end_ts: 6_000 }
                ),
                (
                    13_000,
                    42,
                    "futex 0x3000",
                    EventKind::DurationComplete { end_ts: 14_000 }
                ),
                (
                    20_500,
                    42,
                    "futex 0x4000",
                    EventKind::DurationComplete { end_ts: 22_000 }
                ),
            ]
        );
        let wakeup: Vec<(u64, u64, EventKind)> = events
            .iter()
            .filter(|e| e.3 == "wakeup")
            .map(|e| (e.0, e.2, e.4))
            .collect();
        let at = |ts: u64, tid: u64, flow: EventKind| {
            [
                (ts + 1, tid, EventKind::DurationComplete { end_ts: ts + 3 }),
                (ts + 2, tid, flow),
            ]
        };
        let (one, two) = (KERNEL_FLOW_IDS | 1, KERNEL_FLOW_IDS | 2);
        let want: Vec<(u64, u64, EventKind)> = [
            at(6_000, 7, EventKind::FlowBegin { id: one }),
            at(6_000, 42, EventKind::FlowEnd { id: one }),
            at(22_000, 7, EventKind::FlowBegin { id: two }),
            at(22_000, 42, EventKind::FlowEnd { id: two }),
        ]
        .concat();
        assert_eq!(wakeup, want);
    }
}
