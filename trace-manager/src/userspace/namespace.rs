//! A provider in another PID namespace (a container): its records name
//! its process and threads by the ids its namespace gives them, which on
//! the host are other processes' ids. They are mapped to the host's ids
//! before they are written, so its spans lie on the same tracks as the
//! kernel's events of the same threads.
//!
//! The provider's host pid comes from `SO_PEERCRED`; each thread's ids in
//! every namespace from the `NSpid` line of `/proc/PID/task/TID/status`.
//! Threads are looked up when the provider's trace begins, when a thread
//! says it started writing (the provider sends `NEW_THREAD` on the FIFO
//! with the first record of each thread, so the thread is alive when it is
//! looked up, however soon it ends), and whenever a record names a thread
//! not seen yet.
//! A thread that ended before the manager saw it cannot be found any more:
//! it gets an id of its own above every host id,
//! [`UNMAPPED_THREAD_BASE`] + its namespace's id, rather than the id of
//! whichever host thread has that number.

use std::collections::HashMap;

use trace_common::fxt::{ArgValue, Record, StringRef, ThreadRef, obj_type};

use crate::cgroup::{ns_pids, thread_ids_in_namespace};

/// Ids given to threads of a namespaced provider that ended before they
/// could be mapped: this plus the id in their namespace (host ids stay
/// below 2^22, the kernel's largest `pid_max`).
pub const UNMAPPED_THREAD_BASE: u64 = 1 << 30;

/// The id map of one provider in a PID namespace other than the manager's.
#[derive(Clone, Debug)]
pub struct NsIds {
    /// The process's id on the host.
    host_pid: u32,
    /// Its id in its own namespace.
    ns_pid: u32,
    /// Thread ids, its namespace's to the host's.
    tids: HashMap<u32, u32>,
    /// Threads looked up and not found (ended before being seen).
    unmapped: u64,
}

impl NsIds {
    /// The map for provider process `host_pid`; `None` when it lives in the
    /// manager's own PID namespace (nothing to map) or is gone.
    pub fn of(host_pid: u32) -> Option<NsIds> {
        let ids = ns_pids(host_pid);
        let ns_pid = *ids.last()?;
        (ids.len() > 1).then(|| NsIds {
            host_pid,
            ns_pid,
            tids: thread_ids_in_namespace(host_pid).into_iter().collect(),
            unmapped: 0,
        })
    }

    /// The process's id in its own namespace.
    pub fn ns_pid(&self) -> u32 {
        self.ns_pid
    }

    /// Threads whose records named them after they had ended, unmapped.
    pub fn unmapped(&self) -> u64 {
        self.unmapped
    }

    /// The host's id of the provider's process koid `koid` (any other value
    /// is left as it is: the provider names only its own process).
    fn process(&self, koid: u64) -> u64 {
        if koid == u64::from(self.ns_pid) {
            u64::from(self.host_pid)
        } else {
            koid
        }
    }

    /// Looks thread `ns` (its namespace's id) up now, if not known yet.
    pub fn learn(&mut self, ns: u32) {
        if !self.tids.contains_key(&ns) {
            self.tids.extend(thread_ids_in_namespace(self.host_pid));
        }
    }

    /// The host's id of the provider's thread koid `koid`.
    fn thread(&mut self, koid: u64) -> u64 {
        let Ok(ns) = u32::try_from(koid) else {
            return koid;
        };
        if let Some(&host) = self.tids.get(&ns) {
            return u64::from(host);
        }
        self.tids.extend(thread_ids_in_namespace(self.host_pid));
        match self.tids.get(&ns) {
            Some(&host) => u64::from(host),
            None => {
                self.unmapped += 1;
                // Remembered, so that every record of it agrees.
                let id = UNMAPPED_THREAD_BASE + koid;
                if let Ok(id32) = u32::try_from(id) {
                    self.tids.insert(ns, id32);
                }
                id
            }
        }
    }

    fn thread_ref(&mut self, r: &mut ThreadRef) {
        if let ThreadRef::Inline { process, thread } = r {
            *process = self.process(*process);
            *thread = self.thread(*thread);
        }
    }

    /// Maps the ids `record` holds; returns whether it has any (and so
    /// must be written anew).
    pub fn map(&mut self, record: &mut Record<'_>) -> bool {
        match record {
            Record::Thread {
                process, thread, ..
            } => {
                *process = self.process(*process);
                *thread = self.thread(*thread);
                true
            }
            Record::Event { thread, .. } => {
                let inline = matches!(thread, ThreadRef::Inline { .. });
                self.thread_ref(thread);
                inline
            }
            Record::UserspaceObject {
                process: ThreadRef::Inline { process: p, .. },
                ..
            } => {
                *p = self.process(*p);
                true
            }
            Record::KernelObject {
                koid,
                obj_type,
                args,
                ..
            } => {
                match *obj_type {
                    obj_type::PROCESS => *koid = self.process(*koid),
                    obj_type::THREAD => *koid = self.thread(*koid),
                    _ => return false,
                }
                for a in args.to_mut() {
                    if matches!(&a.name, StringRef::Inline(n) if n == "process")
                        && let ArgValue::Koid(k) = &mut a.value
                    {
                        *k = self.process(*k);
                    }
                }
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_common::fxt::Arg;

    fn ids() -> NsIds {
        NsIds {
            host_pid: 4242,
            ns_pid: 1,
            tids: [(1, 4242), (2, 4250)].into_iter().collect(),
            unmapped: 0,
        }
    }

    #[test]
    fn maps_thread_records_inline_refs_and_names() {
        let mut m = ids();
        let mut r = Record::Thread {
            index: 1,
            process: 1,
            thread: 2,
        };
        assert!(m.map(&mut r));
        assert_eq!(
            r,
            Record::Thread {
                index: 1,
                process: 4242,
                thread: 4250
            }
        );
        let mut r = Record::KernelObject {
            koid: 2,
            obj_type: obj_type::THREAD,
            name: StringRef::inline("worker"),
            args: vec![Arg::new("process", ArgValue::Koid(1))].into(),
        };
        assert!(m.map(&mut r));
        let Record::KernelObject { koid, args, .. } = &r else {
            panic!()
        };
        assert_eq!(*koid, 4250);
        assert_eq!(args[0].value, ArgValue::Koid(4242));
        let mut r = Record::Event {
            ts: 1,
            thread: ThreadRef::Index(3),
            category: StringRef::inline("c"),
            name: StringRef::inline("n"),
            args: Vec::new().into(),
            kind: trace_common::fxt::EventKind::Instant,
        };
        assert!(
            !m.map(&mut r),
            "an indexed thread is mapped in its thread record"
        );
    }

    #[test]
    fn a_thread_gone_before_it_was_seen_gets_an_id_of_its_own() {
        let mut m = ids();
        // No process has this pid on the host, so nothing is found.
        m.host_pid = u32::MAX;
        assert_eq!(m.thread(7), UNMAPPED_THREAD_BASE + 7);
        assert_eq!(m.thread(7), UNMAPPED_THREAD_BASE + 7);
        assert_eq!(m.unmapped(), 1);
    }

    #[test]
    fn no_map_in_the_managers_own_namespace() {
        assert!(NsIds::of(std::process::id()).is_none());
    }
}
