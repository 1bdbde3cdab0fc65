//! Process labels: the cgroup each process is in, the container that
//! cgroup belongs to, and the process's id in its own PID namespace.
//!
//! They go where readers look: as arguments of the process's name record
//! (`cgroup`, `container_runtime`, `container_id`, `container_name`,
//! `ns_pid`), which `report`, `query` and the Parquet export read; and as a
//! Perfetto process descriptor (a blob of blob type 3; see
//! [`trace_perfetto::process_labels`]), which ui.perfetto.dev shows under
//! the process's name, since its FXT importer keeps nothing of a process
//! record but the name.
//!
//! A process created or executed during the recording is placed by the
//! cgroup id its fork or exec event carries (read in the kernel when it
//! happened, so a process that is gone by the time its events are
//! translated is still placed); the id is turned into a path by walking
//! the cgroup v2 hierarchy (once per id not seen yet). Processes of the
//! starting snapshot, and any the events did not place, are placed from
//! `/proc/PID/cgroup`. The namespace id comes from `/proc/PID/status`
//! while the process lives.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::os::unix::fs::MetadataExt as _;

use trace_common::fxt::{Arg, ArgValue, Record, StringRef};

use crate::cgroup::{Hierarchy, ProcessLabels, container, of_process};
use crate::output::{FxtStream, OutputError, StringTable};

/// What the translator knows to label processes with.
#[derive(Debug, Default)]
pub(super) struct Labels {
    /// Whether processes are labelled (a live recording; not a replay,
    /// whose processes are not this machine's).
    on: bool,
    hierarchy: Option<Hierarchy>,
    /// Cgroup id → its path from the hierarchy's root.
    paths: HashMap<u64, String>,
    /// Ids looked for in a walk and not found (removed since).
    missing: HashSet<u64>,
    /// Process → the cgroup id its latest fork or exec event carried.
    noted: HashMap<u32, u64>,
    /// Container names by id, as the runtime's state gave them.
    names: HashMap<String, Option<String>>,
    /// Process → the labels last written for it.
    written: HashMap<u32, ProcessLabels>,
    /// Processes written whose cgroup was noted again since.
    dirty: HashSet<u32>,
}

impl Labels {
    /// Turns labelling on or off.
    pub(super) fn set(&mut self, on: bool) {
        self.on = on;
        if on && self.hierarchy.is_none() {
            self.hierarchy = Hierarchy::find().ok();
        }
    }

    /// Notes that process `pid` was in cgroup `id` (0: unknown) at a fork
    /// or exec.
    pub(super) fn note(&mut self, pid: u32, id: u64) {
        if self.on && id != 0 {
            self.noted.insert(pid, id);
            self.dirty.insert(pid);
        }
    }

    /// The process `pid` exited: what was noted of it no longer holds.
    pub(super) fn forget(&mut self, pid: u32) {
        self.noted.remove(&pid);
        self.written.remove(&pid);
        self.dirty.remove(&pid);
    }

    /// The labels of process `pid` when they are to be written (labelling
    /// is on and they differ from what was written for it).
    pub(super) fn changed(&mut self, pid: u32) -> Option<ProcessLabels> {
        if !self.on || (self.written.contains_key(&pid) && !self.dirty.remove(&pid)) {
            return None;
        }
        let labels = self.of(pid);
        if labels.cgroup.is_empty() || self.written.get(&pid) == Some(&labels) {
            return None;
        }
        self.written.insert(pid, labels.clone());
        Some(labels)
    }

    fn of(&mut self, pid: u32) -> ProcessLabels {
        let cgroup = self
            .noted
            .get(&pid)
            .copied()
            .and_then(|id| self.path(id))
            .or_else(|| of_process(pid))
            .unwrap_or_default();
        let names = &mut self.names;
        ProcessLabels::placed(pid, cgroup, |c| {
            names
                .entry(c.id.clone())
                .or_insert_with(|| container::name_of(c.runtime, &c.id))
                .clone()
        })
    }

    /// The path of cgroup `id`, walking the hierarchy when it is new.
    fn path(&mut self, id: u64) -> Option<String> {
        if let Some(p) = self.paths.get(&id) {
            return Some(p.clone());
        }
        if self.missing.contains(&id) {
            return None;
        }
        let hierarchy = self.hierarchy.as_ref()?;
        for path in hierarchy.all() {
            if let Ok(meta) = std::fs::metadata(hierarchy.dir(&path)) {
                self.paths.insert(meta.ino(), path);
            }
        }
        let found = self.paths.get(&id).cloned();
        if found.is_none() {
            self.missing.insert(id);
        }
        found
    }
}

/// The name record's arguments for `labels`, their strings in `strings`.
pub(super) fn args<'a, W: Write>(
    strings: &mut StringTable,
    out: &mut FxtStream<W>,
    labels: &'a ProcessLabels,
) -> Result<Vec<Arg<'a>>, OutputError> {
    let mut texts = vec![("cgroup", labels.cgroup.as_str())];
    if let Some(c) = &labels.container {
        texts.push(("container_runtime", c.runtime.name()));
        texts.push(("container_id", &c.id));
        if let Some(name) = &c.name {
            texts.push(("container_name", name));
        }
    }
    let mut args = Vec::new();
    for (key, text) in texts {
        args.push(Arg {
            name: strings.intern(out, key)?,
            value: ArgValue::String(strings.intern(out, text)?),
        });
    }
    if let Some(ns) = labels.ns_pid {
        args.push(Arg {
            name: strings.intern(out, "ns_pid")?,
            value: ArgValue::Uint64(u64::from(ns)),
        });
    }
    Ok(args)
}

/// Writes `labels` of process `pid` as a Perfetto process descriptor.
pub(super) fn write_perfetto<W: Write>(
    out: &mut FxtStream<W>,
    pid: u32,
    labels: &ProcessLabels,
) -> Result<(), OutputError> {
    out.write(&Record::Blob {
        name: StringRef::inline(""),
        blob_type: trace_perfetto::BLOB_TYPE_PERFETTO,
        payload: trace_perfetto::process_labels(pid, &perfetto_labels(labels)).into(),
    })
}

/// The labels as Perfetto shows them under a process's name.
fn perfetto_labels(labels: &ProcessLabels) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(c) = &labels.container {
        out.push(format!("container={}", c.label()));
    }
    out.push(format!("cgroup={}", labels.cgroup));
    if let Some(ns) = labels.ns_pid {
        out.push(format!("ns_pid={ns}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_writes_nothing_and_on_labels_this_process_once() {
        let mut l = Labels::default();
        let me = std::process::id();
        assert_eq!(l.changed(me), None);
        l.set(true);
        let Some(labels) = l.changed(me) else {
            // No cgroup v2 here: nothing to say.
            assert!(Hierarchy::find().is_err() || of_process(me).is_none());
            return;
        };
        assert!(labels.cgroup.starts_with('/'));
        assert_eq!(l.changed(me), None, "written once");
        l.forget(me);
        assert!(l.changed(me).is_some(), "a new process of the same pid");
        assert!(
            perfetto_labels(&labels)
                .iter()
                .any(|s| s.starts_with("cgroup=/"))
        );
    }

    #[test]
    fn an_event_cgroup_id_names_the_cgroup_by_its_inode() {
        let Ok(h) = Hierarchy::find() else {
            return;
        };
        let mut l = Labels::default();
        l.set(true);
        let mine = of_process(std::process::id()).unwrap();
        let id = std::fs::metadata(h.dir(&mine)).unwrap().ino();
        // A pid that is not this process: only the noted id can place it.
        l.note(u32::MAX - 1, id);
        assert_eq!(l.of(u32::MAX - 1).cgroup, mine);
        l.note(u32::MAX - 2, 1 << 62);
        assert_eq!(l.of(u32::MAX - 2).cgroup, "");
    }
}
