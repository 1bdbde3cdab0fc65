//! The names of processes and threads as the naming events left them at
//! one point of the stream: what the circular mode needs of the events it
//! forgets, so that the threads of the events it keeps are named as they
//! were then, even when they were created (or renamed) before the kept
//! window and are gone by the end.

use std::collections::HashMap;
use std::io::Write;

use trace_common::kernel::{ABSENT_ID, KernelEvent};

use super::{KernelTranslator, comm_str};
use crate::output::{FxtStream, OutputError};

/// Processes and threads named by the fork, exec, rename and exit events
/// applied so far ([`NameState::apply`]); a thread that exited is
/// forgotten, so the state holds no more than the threads alive at its
/// point.
#[derive(Debug, Default)]
pub struct NameState {
    /// Thread id → (thread group, name).
    threads: HashMap<u32, (u32, String)>,
    /// Process id → name.
    processes: HashMap<u32, String>,
}

impl NameState {
    /// Applies one event (events of other kinds change nothing).
    pub fn apply(&mut self, event: &KernelEvent) {
        let name = |comm: &[u8]| comm_str(comm).into_owned();
        match event {
            KernelEvent::NewTask(e) => {
                // Without clone flags the thread group is left to /proc
                // when the thread shows up.
                if e.child_tgid == ABSENT_ID {
                    return;
                }
                let comm = name(&e.comm);
                if e.child_tgid == e.pid {
                    self.processes.insert(e.pid, comm.clone());
                }
                self.threads.insert(e.pid, (e.child_tgid, comm));
            }
            KernelEvent::Exec(e) => {
                let comm = name(&e.comm);
                if e.old_pid != e.pid {
                    self.threads.remove(&e.old_pid);
                }
                self.processes.insert(e.header.tgid, comm.clone());
                self.threads.insert(e.pid, (e.header.tgid, comm));
            }
            KernelEvent::Rename(e) => {
                let comm = name(&e.newcomm);
                if e.pid == e.header.tgid {
                    self.processes.insert(e.pid, comm.clone());
                }
                self.threads.insert(e.pid, (e.header.tgid, comm));
            }
            KernelEvent::Exit(e) => {
                self.threads.remove(&e.pid);
                if e.group_dead() == Some(true) {
                    self.processes.remove(&e.header.tgid);
                }
            }
            _ => {}
        }
    }

    /// Whether nothing is known.
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty() && self.processes.is_empty()
    }
}

impl KernelTranslator {
    /// Names the processes and threads of `state` (where their names
    /// changed), processes first.
    pub fn write_names<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        state: &NameState,
    ) -> Result<(), OutputError> {
        let mut processes: Vec<_> = state.processes.iter().collect();
        processes.sort();
        for (&pid, name) in processes {
            self.name_process(out, pid, name)?;
        }
        let mut threads: Vec<_> = state.threads.iter().collect();
        threads.sort();
        for (&tid, (tgid, name)) in threads {
            self.name_thread(out, tid, *tgid, name)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::translate::testing::{ev, events_and_names};

    #[test]
    fn forgotten_events_leave_the_names_they_gave_and_forget_the_exited() {
        let mut state = NameState::default();
        let events = [
            KernelEvent::NewTask(ev::new_task(1, 100, 100, 200, 200, "sh", 0x11)),
            KernelEvent::NewTask(ev::new_task(2, 200, 200, 201, 200, "sh", 0x10000)),
            KernelEvent::Exec(ev::exec(3, 200, 200, 200, "/bin/worker", "worker")),
            KernelEvent::Rename(ev::rename(4, 201, 200, "sh", "pool-1")),
            KernelEvent::NewTask(ev::new_task(5, 100, 100, 300, 300, "sh", 0x11)),
            KernelEvent::Exit(ev::exit(6, 300, 300, "sh", Some(true))),
        ];
        for e in &events {
            state.apply(e);
        }
        let mut out = FxtStream::new(Vec::new()).unwrap();
        let mut t = KernelTranslator::new();
        t.write_names(&mut out, &state).unwrap();
        let bytes = out.finish().unwrap();
        let (_, names) = events_and_names(&bytes);
        assert_eq!(names.get(&200).map(String::as_str), Some("worker"));
        assert_eq!(names.get(&201).map(String::as_str), Some("pool-1"));
        assert!(!names.contains_key(&300), "{names:?}");
        assert_eq!(t.threads.get(&201).and_then(|e| e.tgid), Some(200));
    }
}
