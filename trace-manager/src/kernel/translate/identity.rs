//! The processes and threads the events name: their name records, each
//! written when a name or a thread group is new, and the thread groups
//! learned from the kernel's events and `/proc`.

use std::io::Write;

use trace_common::fxt::{Arg, ArgValue, Record, obj_type};

use super::{
    KNOWN_CACHE, KernelTranslator, ThreadEntry, UNKNOWN_TGID, comm_bytes, comm_str, labels,
};
use crate::output::{FxtStream, OutputError};
use crate::procfs;

impl KernelTranslator {
    /// Writes a process name record if `name` is new for `pid`.
    pub(super) fn name_process<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        pid: u32,
        name: &str,
    ) -> Result<(), OutputError> {
        if pid == 0 {
            return Ok(());
        }
        let same = self.processes.get(&pid).is_some_and(|n| n == name);
        let labels = self.labels.changed(pid);
        if same && labels.is_none() {
            return Ok(());
        }
        let name_ref = self.strings.intern(out, name)?;
        let args = match &labels {
            Some(l) => labels::args(&mut self.strings, out, l)?,
            None => Vec::new(),
        };
        out.write(&Record::KernelObject {
            koid: u64::from(pid),
            obj_type: obj_type::PROCESS,
            name: name_ref,
            args: args.into(),
        })?;
        if let Some(l) = &labels {
            labels::write_perfetto(out, pid, l)?;
        }
        self.counts.names += 1;
        self.processes.insert(pid, name.to_owned());
        Ok(())
    }

    /// Writes a thread name record (with its `"process"` argument) if the
    /// name or the thread group is new, and names the process first if
    /// nothing has.
    pub(super) fn name_thread<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        tid: u32,
        tgid: u32,
        name: &str,
    ) -> Result<(), OutputError> {
        if tid == 0 || tgid == UNKNOWN_TGID {
            return Ok(());
        }
        let entry = self.threads.entry(tid).or_insert(ThreadEntry {
            tgid: None,
            name: String::new(),
            written: false,
        });
        if entry.written && entry.tgid == Some(tgid) && entry.name == name {
            return Ok(());
        }
        entry.tgid = Some(tgid);
        entry.written = true;
        if entry.name != name {
            entry.name.clear();
            entry.name.push_str(name);
        }
        if !self.processes.contains_key(&tgid) {
            let pname = if tid == tgid {
                None
            } else {
                procfs::process_name(tgid)
            };
            self.name_process(out, tgid, pname.as_deref().unwrap_or(name))?;
        }
        let name_ref = self.strings.intern(out, name)?;
        let process = self.strings.intern(out, "process")?;
        out.write(&Record::KernelObject {
            koid: u64::from(tid),
            obj_type: obj_type::THREAD,
            name: name_ref,
            args: (&[Arg {
                name: process,
                value: ArgValue::Koid(u64::from(tgid)),
            }][..])
                .into(),
        })?;
        self.counts.names += 1;
        Ok(())
    }

    /// [`KernelTranslator::name_thread`] with a kernel `comm` field, which
    /// is only decoded when the thread's name or group changed.
    pub(super) fn name_thread_comm<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        tid: u32,
        tgid: u32,
        comm: &[u8],
    ) -> Result<(), OutputError> {
        if tid == 0 {
            return Ok(());
        }
        if let Some(e) = self.threads.get(&tid)
            && e.written
            && e.tgid == Some(tgid)
            && e.name.as_bytes() == comm_bytes(comm)
        {
            return Ok(());
        }
        self.name_thread(out, tid, tgid, &comm_str(comm))
    }

    /// [`KernelTranslator::see_thread`] with a kernel `comm` field, which is
    /// only decoded when the thread's name changed; returns the thread
    /// group, when known.
    pub(super) fn see_thread_comm<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        tid: u32,
        tgid: Option<u32>,
        comm: &[u8],
    ) -> Result<Option<u32>, OutputError> {
        if let Some(e) = self.threads.get(&tid)
            && e.written
            && tgid.is_none_or(|g| e.tgid == Some(g))
            && e.name.as_bytes() == comm_bytes(comm)
        {
            return Ok(e.tgid);
        }
        self.see_thread(out, tid, tgid, &comm_str(comm))?;
        Ok(self.threads.get(&tid).and_then(|e| e.tgid))
    }

    /// Makes sure a thread seen with `comm` is named: its thread group is
    /// `tgid` when the event said it, else the one known, else /proc's.
    /// Where none of them knows, the name is kept for when the group shows
    /// up ([`KernelTranslator::know_thread`]).
    pub(super) fn see_thread<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        tid: u32,
        tgid: Option<u32>,
        comm: &str,
    ) -> Result<(), OutputError> {
        if tid == 0 {
            return Ok(());
        }
        let tgid = match (tgid, self.threads.get(&tid)) {
            (Some(g), _) => Some(g),
            (None, Some(e)) if e.written && e.name == comm => return Ok(()),
            (None, Some(ThreadEntry { tgid: Some(g), .. })) => Some(*g),
            (None, Some(ThreadEntry { tgid: None, .. })) => None,
            // Asked once: an entry is left either way.
            (None, None) => procfs::thread(tid).map(|(g, _)| g),
        };
        match tgid {
            Some(g) => self.name_thread(out, tid, g, comm),
            None => {
                let e = self.threads.entry(tid).or_insert(ThreadEntry {
                    tgid: None,
                    name: String::new(),
                    written: false,
                });
                if e.name != comm {
                    e.name = comm.to_owned();
                }
                Ok(())
            }
        }
    }

    /// Makes sure thread `tid`, which an event shows running in process
    /// `tgid`, has a thread object naming that process before its record:
    /// with the name an event or the /proc snapshot gave it, else /proc's
    /// now, else its process's (a thread is named after its process when
    /// it is created). [`UNKNOWN_TGID`] writes nothing.
    pub(super) fn know_thread<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        tid: u32,
        tgid: u32,
    ) -> Result<(), OutputError> {
        let key = (u64::from(tgid) << 32) | u64::from(tid);
        let slot = tid as usize % KNOWN_CACHE;
        if tid == 0 || tgid == UNKNOWN_TGID || self.known[slot] == key {
            return Ok(());
        }
        let name = match self.threads.get(&tid) {
            Some(e) if e.written && e.tgid == Some(tgid) => {
                self.known[slot] = key;
                return Ok(());
            }
            // Seen with a name, its group unknown until now.
            Some(e) if !e.name.is_empty() && e.tgid.is_none_or(|g| g == tgid) => e.name.clone(),
            _ => match procfs::thread(tid) {
                Some((g, name)) if g == tgid => name,
                // Gone (or its id already given to another thread).
                _ => self
                    .processes
                    .get(&tgid)
                    .cloned()
                    .or_else(|| procfs::process_name(tgid))
                    .unwrap_or_else(|| format!("thread {tid}")),
            },
        };
        self.name_thread(out, tid, tgid, &name)?;
        self.known[slot] = key;
        Ok(())
    }

    /// The process of thread `tid`, as far as known (else the thread id).
    pub(super) fn tgid_of(&self, tid: u32) -> u32 {
        self.threads.get(&tid).and_then(|t| t.tgid).unwrap_or(tid)
    }
}
