//! `processes`: every process the trace names, with its last name and
//! where it ran (cgroup, container, PID-namespace id).

use std::collections::BTreeMap;

use datafusion::arrow::array::{StringBuilder, UInt64Builder};
use trace_analysis::{Context, Event, Sym, Wants};

use super::Table;
use super::declare::table;

table! {
    /// Builds `processes` at the end of the trace from the names it gave (one
    /// entry per process while reading).
    pub struct Processes as "processes" {
        /// Process id.
        pid: UInt64Builder,
        /// Its last name.
        name: StringBuilder,
        /// Its cgroup (v2) path, when the recorder labelled it.
        cgroup: StringBuilder nullable,
        /// The runtime of its container (`docker`, `podman`, `containerd`, `cri-o`, `nspawn`).
        container_runtime: StringBuilder nullable,
        /// Its container's id (64 hexadecimal digits; an nspawn machine's name).
        container_id: StringBuilder nullable,
        /// Its container's name, where the runtime's state said it.
        container_name: StringBuilder nullable,
        /// Its pid in its own PID namespace, when that is not the host's.
        ns_pid: UInt64Builder nullable,
    }
    state {
        /// The last name of each process, by pid.
        names: BTreeMap<u64, Sym>,
    }
}

impl Table for Processes {
    fn wants(&self) -> Wants {
        Wants::default()
    }

    fn event(&mut self, event: &Event, _cx: &Context) {
        if let Event::Process { pid, name } = event {
            self.names.insert(*pid, *name);
        }
    }

    fn end(&mut self, cx: &Context) {
        for (pid, name) in std::mem::take(&mut self.names) {
            self.pid.append_value(pid);
            self.name.append_value(cx.strings.get(name));
            let labels = cx.labels(pid).copied().unwrap_or_default();
            let text = |s: Option<trace_analysis::Sym>| s.map(|s| cx.strings.get(s));
            self.cgroup.append_option(text(labels.cgroup));
            self.container_runtime
                .append_option(text(labels.container_runtime));
            self.container_id.append_option(text(labels.container_id));
            self.container_name
                .append_option(text(labels.container_name));
            self.ns_pid.append_option(labels.ns_pid);
            self.rows += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::testing::{build, column, cx, sym};

    #[test]
    fn last_names_by_pid() {
        let mut cx = cx();
        let events: Vec<Event> = [(20u64, "b"), (10, "a"), (20, "b2")]
            .into_iter()
            .map(|(pid, name)| Event::Process {
                pid,
                name: sym(&mut cx, name),
            })
            .collect();
        let batch = build(&mut Processes::default(), &cx, &events);
        assert_eq!(column(&batch, "pid"), ["10", "20"]);
        assert_eq!(column(&batch, "name"), ["a", "b2"]);
        assert_eq!(column(&batch, "host"), ["test-host", "test-host"]);
        assert_eq!(column(&batch, "trace_id")[0], "0123456789abcdef");
    }
}
