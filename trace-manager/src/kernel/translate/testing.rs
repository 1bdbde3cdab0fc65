//! What the translator's tests share: reading what was written back, and
//! kernel events made from a few numbers.

use std::collections::HashMap;

use trace_common::fxt::read::{Reader, TraceState};
use trace_common::fxt::{EventKind, Record, obj_type};

pub(super) fn records(bytes: &[u8]) -> (TraceState, Vec<Record<'static>>) {
    let mut st = TraceState::new();
    let mut v = Vec::new();
    for r in Reader::new(bytes) {
        let (_, r) = r.expect("valid record");
        st.apply(&r);
        v.push(r.into_owned());
    }
    (st, v)
}

/// An event of a stream: (ts, process, thread, name, kind).
pub(super) type Ev = (u64, u64, u64, String, EventKind);

/// The events of a stream: (ts, process, thread, name, kind), and the
/// thread names by koid.
pub(super) fn events_and_names(bytes: &[u8]) -> (Vec<Ev>, HashMap<u64, String>) {
    let mut st = TraceState::new();
    let mut ev = Vec::new();
    let mut names = HashMap::new();
    for r in Reader::new(bytes) {
        let (_, r) = r.unwrap();
        st.apply(&r);
        match &r {
            Record::Event {
                ts,
                name,
                kind,
                thread,
                ..
            } => {
                let (p, t) = st.thread(*thread).unwrap();
                ev.push((*ts, p, t, st.string(name).unwrap().to_owned(), *kind));
            }
            Record::KernelObject {
                koid,
                obj_type: o,
                name,
                ..
            } if *o == obj_type::THREAD => {
                names.insert(*koid, st.string(name).unwrap().to_owned());
            }
            _ => {}
        }
    }
    (ev, names)
}

/// The complete durations of a stream, in the order written: (start,
/// name, end).
pub(super) fn spans(bytes: &[u8]) -> Vec<(u64, String, u64)> {
    events_and_names(bytes)
        .0
        .into_iter()
        .filter_map(|(ts, _, _, name, kind)| match kind {
            EventKind::DurationComplete { end_ts } => Some((ts, name, end_ts)),
            _ => None,
        })
        .collect()
}

/// Kernel events as the programs write them, from a few numbers.
pub(super) mod ev {
    use trace_common::kernel::*;

    /// `s` as a NUL-padded name field.
    pub fn name<const N: usize>(s: &str) -> [u8; N] {
        let mut b = [0u8; N];
        let n = s.len().min(N - 1);
        b[..n].copy_from_slice(&s.as_bytes()[..n]);
        b
    }

    /// A header: on `cpu` at `ts`, the current task `tid` of `tgid`.
    pub fn header(ts: u64, cpu: u32, tid: u32, tgid: u32) -> EventHeader {
        EventHeader {
            kind: 0,
            cpu,
            ts,
            tid,
            tgid,
        }
    }

    /// `prev`: (tid, tgid, prio, state, comm); `next`: (tid, prio, comm).
    pub fn switch(
        ts: u64,
        cpu: u32,
        prev: (u32, u32, i32, i32, &str),
        next: (u32, i32, &str),
    ) -> SchedSwitchEvent {
        SchedSwitchEvent {
            header: header(ts, cpu, prev.0, prev.1),
            prev_comm: name(prev.4),
            next_comm: name(next.2),
            prev_pid: prev.0,
            prev_prio: prev.2,
            next_pid: next.0,
            next_prio: next.1,
            prev_state: prev.3,
            next_tgid: ABSENT_ID,
        }
    }

    pub fn wakeup(
        ts: u64,
        target_cpu: u16,
        tid: u32,
        prio: i32,
        comm: &str,
        waker_tid: u32,
        waker_cpu: u32,
    ) -> SchedWakeupEvent {
        SchedWakeupEvent {
            header: header(ts, waker_cpu, waker_tid, waker_tid),
            comm: name(comm),
            pid: tid,
            prio,
            tgid: ABSENT_ID,
            target_cpu,
            flags: 0,
        }
    }

    pub fn new_task(
        ts: u64,
        parent_tid: u32,
        parent_tgid: u32,
        child_tid: u32,
        child_tgid: u32,
        comm: &str,
        clone_flags: u64,
    ) -> TaskNewtaskEvent {
        TaskNewtaskEvent {
            header: header(ts, 0, parent_tid, parent_tgid),
            pid: child_tid,
            child_tgid,
            clone_flags,
            comm: name(comm),
            cgroup: 0,
        }
    }

    pub fn exec(
        ts: u64,
        tid: u32,
        tgid: u32,
        old_tid: u32,
        filename: &str,
        comm: &str,
    ) -> ProcessExecEvent {
        ProcessExecEvent {
            header: header(ts, 0, tid, tgid),
            pid: tid,
            old_pid: old_tid,
            comm: name(comm),
            filename_len: filename.len() as u32,
            reserved: 0,
            filename: name(filename),
            cgroup: 0,
        }
    }

    pub fn exit(
        ts: u64,
        tid: u32,
        tgid: u32,
        comm: &str,
        group_dead: Option<bool>,
    ) -> ProcessExitEvent {
        ProcessExitEvent {
            header: header(ts, 0, tid, tgid),
            comm: name(comm),
            pid: tid,
            prio: 120,
            group_dead: match group_dead {
                Some(true) => GROUP_DEAD_YES,
                Some(false) => GROUP_DEAD_NO,
                None => GROUP_DEAD_UNKNOWN,
            },
            reserved: [0; 7],
        }
    }

    pub fn rename(ts: u64, tid: u32, tgid: u32, old: &str, new: &str) -> TaskRenameEvent {
        TaskRenameEvent {
            header: header(ts, 0, tid, tgid),
            pid: tid,
            reserved: 0,
            oldcomm: name(old),
            newcomm: name(new),
        }
    }

    pub fn sys_enter(
        ts: u64,
        tid: u32,
        tgid: u32,
        nr: i64,
        args: [u64; SYSCALL_ARGS],
    ) -> SysEnterEvent {
        SysEnterEvent {
            header: header(ts, 0, tid, tgid),
            id: nr,
            args,
        }
    }

    pub fn sys_exit(ts: u64, tid: u32, tgid: u32, nr: i64, ret: i64) -> SysExitEvent {
        SysExitEvent {
            header: header(ts, 0, tid, tgid),
            id: nr,
            ret,
        }
    }

    pub fn irq_entry(ts: u64, cpu: u32, irq: i32, handler: &str) -> IrqEntryEvent {
        IrqEntryEvent {
            header: header(ts, cpu, 0, 0),
            irq,
            reserved: 0,
            name: name(handler),
        }
    }

    pub fn irq_exit(ts: u64, cpu: u32, irq: i32, ret: i32) -> IrqExitEvent {
        IrqExitEvent {
            header: header(ts, cpu, 0, 0),
            irq,
            ret,
        }
    }

    pub fn softirq(ts: u64, cpu: u32, vec: u32, exit: bool) -> SoftirqEvent {
        SoftirqEvent {
            header: header(ts, cpu, 0, 0),
            vec,
            exit: if exit { SOFTIRQ_EXIT } else { 0 },
        }
    }

    pub fn block_issue(
        ts: u64,
        tid: u32,
        dev: u32,
        sector: u64,
        nr_sector: u32,
        bytes: i32,
        rwbs: &str,
    ) -> BlockRqEvent {
        BlockRqEvent {
            header: header(ts, 0, tid, tid),
            sector,
            dev,
            nr_sector,
            bytes_or_error: bytes,
            reserved: 0,
            rwbs: name(rwbs),
        }
    }

    pub fn block_complete(ts: u64, dev: u32, sector: u64, error: i32) -> BlockRqEvent {
        BlockRqEvent {
            header: header(ts, 0, 0, 0),
            sector,
            dev,
            nr_sector: 0,
            bytes_or_error: error,
            reserved: 0,
            rwbs: [0; RWBS_LEN],
        }
    }

    pub fn page_fault(
        ts: u64,
        tid: u32,
        tgid: u32,
        address: u64,
        ip: u64,
        error_code: u64,
    ) -> PageFaultEvent {
        PageFaultEvent {
            header: header(ts, 0, tid, tgid),
            address,
            ip,
            error_code,
        }
    }

    pub fn rss_stat(
        ts: u64,
        tgid: u32,
        curr: bool,
        mm_id: u32,
        member: i32,
        size: i64,
    ) -> RssStatEvent {
        RssStatEvent {
            header: header(ts, 0, tgid, tgid),
            size,
            mm_id,
            curr: u32::from(curr),
            member,
            reserved: 0,
        }
    }

    pub fn cpu_power(ts: u64, cpu: u32, frequency: bool, state: u32) -> PowerEvent {
        PowerEvent {
            header: header(ts, cpu, 0, 0),
            what: if frequency {
                POWER_FREQUENCY
            } else {
                POWER_IDLE
            },
            cpu_id: cpu,
            state,
            reserved: 0,
        }
    }

    pub fn probe(ts: u64, tid: u32, tgid: u32, probe: u64, ret: bool) -> UprobeEvent {
        UprobeEvent {
            header: header(ts, 0, tid, tgid),
            probe,
            ret: if ret { UPROBE_RETURN } else { 0 },
            reserved: 0,
        }
    }
}
