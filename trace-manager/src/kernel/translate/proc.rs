//! Processes and threads: fork and clone, exec, exit and renames as
//! instants in `kernel:proc`, and the names they give.

use std::io::Write;

use trace_common::fxt::{ArgValue, EventKind, StringRef};
use trace_common::kernel::{
    ABSENT_ID, ProcessExecEvent, ProcessExitEvent, TaskNewtaskEvent, TaskRenameEvent,
};

use super::syscall::CallEnd;
use super::{EventRecord, KernelTranslator, comm_str};
use crate::output::{FxtStream, OutputError};
use crate::procfs;

impl KernelTranslator {
    /// An instant in `kernel:proc` on thread `tid` of `tgid`, when
    /// `kernel:proc` is recorded.
    fn proc_instant<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        ts: u64,
        tgid: u32,
        tid: u32,
        name: &str,
        args: &[(&str, ArgValue<'_>)],
    ) -> Result<(), OutputError> {
        if !self.proc_instants {
            return Ok(());
        }
        self.event(
            out,
            EventRecord {
                ts,
                category: trace_common::category::KERNEL_PROC,
                thread: (tgid, tid),
                name,
                args,
                kind: EventKind::Instant,
            },
        )?;
        self.counts.proc_events += 1;
        Ok(())
    }

    /// The current task created task `pid`, which belongs to `child_tgid`
    /// (the parent's group for a new thread, its own for a new process; from
    /// /proc when the event could not tell).
    pub fn new_task<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &TaskNewtaskEvent,
    ) -> Result<(), OutputError> {
        let (ts, parent_tid, parent_tgid, child_tid) =
            (e.header.ts, e.header.tid, e.header.tgid, e.pid);
        let child_tgid = if e.child_tgid != ABSENT_ID {
            e.child_tgid
        } else {
            // Without clone flags the thread group is unknown here; /proc
            // knows it while the task lives.
            procfs::thread(e.pid).map_or(e.pid, |(g, _)| g)
        };
        let (clone_flags, child_comm) = (e.clone_flags, comm_str(&e.comm));
        let child_comm: &str = &child_comm;
        self.created.insert(child_tid, ts);
        self.sched.threads.entry(child_tid).or_default().first_seen = Some(ts);
        let is_thread = child_tgid == parent_tgid && child_tid != child_tgid;
        if !is_thread {
            self.labels.note(child_tgid, e.cgroup);
            self.name_process(out, child_tgid, child_comm)?;
        }
        self.name_thread(out, child_tid, child_tgid, child_comm)?;
        let (name, key) = if is_thread {
            ("thread_create", "tid")
        } else {
            ("fork", "child_pid")
        };
        self.proc_instant(
            out,
            ts,
            parent_tgid,
            parent_tid,
            name,
            &[
                (key, ArgValue::Koid(u64::from(child_tid))),
                ("clone_flags", ArgValue::Uint64(clone_flags)),
            ],
        )
    }

    /// Thread `pid` executed `filename` and is now called `comm`.
    pub fn exec<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &ProcessExecEvent,
    ) -> Result<(), OutputError> {
        let (ts, tid, tgid, old_tid) = (e.header.ts, e.pid, e.header.tgid, e.old_pid);
        let (filename, comm) = (comm_str(e.filename()), comm_str(&e.comm));
        let (filename, comm): (&str, &str) = (&filename, &comm);
        self.labels.note(tgid, e.cgroup);
        self.name_process(out, tgid, comm)?;
        self.name_thread(out, tid, tgid, comm)?;
        let mut args = vec![("filename", ArgValue::String(StringRef::inline(filename)))];
        if old_tid != tid {
            args.push(("old_tid", ArgValue::Koid(u64::from(old_tid))));
        }
        self.proc_instant(out, ts, tgid, tid, "exec", &args)
    }

    /// Thread `pid` exited; `group_dead` when it was its process's last.
    pub fn exit<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &ProcessExitEvent,
    ) -> Result<(), OutputError> {
        let (ts, tid, tgid, group_dead) = (e.header.ts, e.pid, e.header.tgid, e.group_dead());
        let comm = comm_str(&e.comm);
        let comm: &str = &comm;
        if let Some(call) = self.syscall.calls.remove(&tid).and_then(|c| c.call) {
            // `exit` or `exit_group`: the call ends with the thread.
            self.write_syscall(out, tid, call, CallEnd::Exited { ts })?;
        }
        // Its id may be given to a new thread.
        self.at_start.remove(&tid);
        self.created.remove(&tid);
        if let Some(t) = self.sched.threads.get_mut(&tid) {
            t.first_seen = None;
        }
        self.name_thread(out, tid, tgid, comm)?;
        let mut args = Vec::new();
        if let Some(g) = group_dead {
            args.push(("process_exit", ArgValue::Bool(g)));
        }
        if group_dead == Some(true) {
            self.labels.forget(tgid);
        }
        self.proc_instant(out, ts, tgid, tid, "exit", &args)
    }

    /// Thread `pid` was renamed from `oldcomm` to `newcomm`.
    pub fn rename<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &TaskRenameEvent,
    ) -> Result<(), OutputError> {
        let (ts, tid, tgid) = (e.header.ts, e.pid, e.header.tgid);
        let (old, new) = (comm_str(&e.oldcomm), comm_str(&e.newcomm));
        let (old, new): (&str, &str) = (&old, &new);
        if tid == tgid {
            self.name_process(out, tgid, new)?;
        }
        self.name_thread(out, tid, tgid, new)?;
        self.proc_instant(
            out,
            ts,
            tgid,
            tid,
            "rename",
            &[
                ("old_name", ArgValue::String(StringRef::inline(old))),
                ("new_name", ArgValue::String(StringRef::inline(new))),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::translate::testing::{ev, records};
    use trace_common::fxt::{Record, obj_type};

    #[test]
    fn fork_exec_exit_are_instants_on_the_right_threads() {
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::new();
        t.new_task(&mut out, &ev::new_task(10, 100, 100, 200, 200, "sh", 0x11))
            .unwrap();
        t.new_task(
            &mut out,
            &ev::new_task(11, 200, 200, 201, 200, "sh", 0x10000),
        )
        .unwrap();
        t.exec(&mut out, &ev::exec(20, 200, 200, 200, "/bin/true", "true"))
            .unwrap();
        t.rename(&mut out, &ev::rename(25, 201, 200, "sh", "helper"))
            .unwrap();
        t.exit(&mut out, &ev::exit(30, 200, 200, "true", Some(true)))
            .unwrap();
        let bytes = out.finish().unwrap();
        let (st, recs) = records(&bytes);
        let instants: Vec<_> = recs
            .iter()
            .filter_map(|r| match r {
                Record::Event {
                    ts, thread, name, ..
                } => Some((
                    *ts,
                    st.thread(*thread).unwrap(),
                    st.string(name).unwrap().to_owned(),
                )),
                _ => None,
            })
            .collect();
        assert_eq!(
            instants,
            vec![
                (10, (100, 100), "fork".to_owned()),
                (11, (200, 200), "thread_create".to_owned()),
                (20, (200, 200), "exec".to_owned()),
                (25, (200, 201), "rename".to_owned()),
                (30, (200, 200), "exit".to_owned()),
            ]
        );
        // The process was renamed by exec, and thread 201 by its rename.
        let last_name = |koid: u64, ty: u8| {
            recs.iter()
                .rev()
                .find_map(|r| match r {
                    Record::KernelObject {
                        koid: k,
                        obj_type: o,
                        name,
                        ..
                    } if *k == koid && *o == ty => st.string(name).map(str::to_owned),
                    _ => None,
                })
                .unwrap()
        };
        assert_eq!(last_name(200, obj_type::PROCESS), "true");
        assert_eq!(last_name(201, obj_type::THREAD), "helper");
    }
}
