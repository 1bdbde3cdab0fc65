//! The `groups` section (`--by container`, `--by cgroup` or `--by host`):
//! time on CPU, time waiting for a CPU, wake-up latency and system calls of
//! each container or cgroup, from the labels the recorder gave each
//! process, or of each machine of a trace recorded on several.

use foldhash::{HashMap, HashSet};

use super::Finish;
use super::histogram::Latency;
use super::sched::Sched;
use super::syscalls::Syscalls;
use super::table::{Cell, Column, Kind, Section, Table};

/// What the `groups` section groups processes by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupBy {
    /// Their container (`runtime name`), or none.
    Container,
    /// Their cgroup (v2) path.
    Cgroup,
    /// Their machine, in a trace recorded on several (`record --host`).
    Host,
}

/// The group of processes without a container.
pub const NO_CONTAINER: &str = "(no container)";
/// The group of processes the trace does not place.
pub const UNLABELLED: &str = "(not labelled)";
/// The one group by machine of a trace recorded on one.
pub const ONE_MACHINE: &str = "(the recording machine)";

/// Figures of one group.
#[derive(Default)]
struct Group {
    processes: HashSet<u64>,
    threads: u64,
    on_cpu: u64,
    runnable: u64,
    latency: Latency,
    syscalls: u64,
    errors: u64,
    syscall_time: u64,
}

/// The section; `machines` are the trace's, for [`GroupBy::Host`] (none:
/// it was recorded on one).
pub fn section(
    by: GroupBy,
    sched: Option<&Sched>,
    syscalls: Option<&Syscalls>,
    end: &Finish<'_>,
    machines: &[trace_hosts::Machine],
) -> Section {
    let (id_title, what) = match by {
        GroupBy::Container => ("By container", "container"),
        GroupBy::Cgroup => ("By cgroup", "cgroup"),
        GroupBy::Host => ("By host", "host"),
    };
    let mut section = Section::new("groups", id_title);
    let group_of = |pid: u64| -> String {
        let labelled = end.cx.labels(pid).is_some();
        match by {
            GroupBy::Container => end
                .cx
                .container_of(pid)
                .unwrap_or_else(|| if labelled { NO_CONTAINER } else { UNLABELLED }.to_owned()),
            GroupBy::Cgroup => end
                .cx
                .cgroup_of(pid)
                .map_or_else(|| UNLABELLED.to_owned(), str::to_owned),
            GroupBy::Host => trace_hosts::machine_of_pid(machines, pid)
                .map_or_else(|| ONE_MACHINE.to_owned(), |m| m.name.clone()),
        }
    };
    let mut groups: HashMap<String, Group> = HashMap::default();
    let mut total = 0u64;
    if let Some(s) = sched {
        for (tid, t) in &s.threads {
            let pid = if t.pid != 0 {
                t.pid
            } else {
                end.cx.process_of(*tid).unwrap_or(0)
            };
            let g = groups.entry(group_of(pid)).or_default();
            g.processes.insert(pid);
            g.threads += 1;
            g.on_cpu = g.on_cpu.saturating_add(t.on_cpu);
            g.runnable = g.runnable.saturating_add(t.runnable);
            g.latency.merge(&t.latency);
            total = total.saturating_add(t.on_cpu);
        }
    }
    if let Some(s) = syscalls {
        for (pid, (count, errors, time)) in s.per_process() {
            let g = groups.entry(group_of(pid)).or_default();
            g.processes.insert(pid);
            g.syscalls += count;
            g.errors += errors;
            g.syscall_time = g.syscall_time.saturating_add(time);
        }
    }
    if groups.is_empty() {
        section.notes.push(
            "The trace has no context switches or system calls (record kernel:sched and \
             kernel:syscall to see them)."
                .into(),
        );
        return section;
    }
    let mut rows: Vec<(String, Group)> = groups.into_iter().collect();
    rows.sort_by(|a, b| {
        b.1.on_cpu
            .cmp(&a.1.on_cpu)
            .then(b.1.syscalls.cmp(&a.1.syscalls))
            .then(a.0.cmp(&b.0))
    });
    let mut table = Table::new(
        "groups",
        &format!("Time on CPU, waiting for a CPU and system calls by {what}"),
        vec![
            Column::new(what, what, Kind::Text),
            Column::new("processes", "processes", Kind::Count),
            Column::new("threads", "threads", Kind::Count),
            Column::new("on_cpu", "on CPU", Kind::Duration),
            Column::new("share", "share %", Kind::Percent),
            Column::new("runnable", "runnable", Kind::Duration),
            Column::new("wakeups", "wake-ups", Kind::Count),
            Column::new("latency_p50", "latency p50", Kind::Duration),
            Column::new("latency_p99", "latency p99", Kind::Duration),
            Column::new("latency_max", "latency max", Kind::Duration),
            Column::new("syscalls", "syscalls", Kind::Count),
            Column::new("errors", "errors", Kind::Count),
            Column::new("syscall_time", "syscall time", Kind::Duration),
        ],
    )
    .diffed(
        &[what],
        &[
            "on_cpu",
            "runnable",
            "wakeups",
            "syscalls",
            "errors",
            "syscall_time",
        ],
    );
    for (name, g) in rows.into_iter().take(end.top) {
        table.push(vec![
            name.into(),
            Cell::Count(g.processes.len() as u64),
            Cell::Count(g.threads),
            Cell::Ns(g.on_cpu),
            if total == 0 {
                Cell::Empty
            } else {
                Cell::Percent(g.on_cpu as f64 * 100.0 / total as f64)
            },
            Cell::Ns(g.runnable),
            Cell::Count(g.latency.count),
            g.latency.cell(0.5),
            g.latency.cell(0.99),
            g.latency.max_cell(),
            Cell::Count(g.syscalls),
            Cell::Count(g.errors),
            Cell::Ns(g.syscall_time),
        ]);
    }
    let placed = match by {
        GroupBy::Host if machines.is_empty() => format!(
            "The trace was recorded on one machine (without record --host): {ONE_MACHINE} holds \
             everything."
        ),
        GroupBy::Host => "Processes are placed by their ids, which the merge kept apart per \
                          machine (machine k's are k x 10000000 + its own)."
            .to_owned(),
        GroupBy::Container | GroupBy::Cgroup => format!(
            "Processes are placed by the labels the recorder gave them (their cgroup when they \
             were created, executed or found at the start); {UNLABELLED} holds those it could \
             not place (gone before it looked, or recorded without labels)."
        ),
    };
    table.note(format!(
        "{placed} Latency is from a wake-up to running, of the wake-ups the trace has."
    ));
    section.tables.push(table);
    section
}

#[cfg(test)]
mod tests {
    use super::{GroupBy, ONE_MACHINE};
    use crate::report::testing::Fxt;
    use crate::report::{Cell, HostSelection, Options, SectionId, Selection};

    /// Two machines' processes, as a merge writes them: machine 1's ids
    /// are 10 000 000 + its own, on CPUs from 2.
    fn two_machines() -> (Fxt, Vec<trace_hosts::Machine>) {
        let mut t = Fxt::new();
        let far = trace_hosts::PID_STRIDE;
        t.process(10, "here").thread(10, 10, "here");
        t.process(far + 10, "there")
            .thread(far + 10, far + 10, "there");
        t.switch(0, 0, 0, 3, 10).switch(300, 0, 10, 1, 0);
        t.switch(0, 2, 0, 3, far + 10)
            .switch(700, 2, far + 10, 1, 0);
        let machines = vec![
            trace_hosts::Machine {
                name: "a".into(),
                index: 0,
                cpus: 2,
                ..Default::default()
            },
            trace_hosts::Machine {
                name: "b".into(),
                index: 1,
                cpus: 2,
                cpu_base: 2,
                ..Default::default()
            },
        ];
        (t, machines)
    }

    #[test]
    fn by_host_each_machine_is_a_row() {
        let (t, machines) = two_machines();
        let r = t.report(Options {
            sections: vec![SectionId::Groups],
            group_by: Some(GroupBy::Host),
            machines: machines.clone(),
            ..Options::default()
        });
        let g = r.section("groups").unwrap().table("groups").unwrap();
        assert_eq!(g.rows.len(), 2);
        assert_eq!(g.cell(0, "host"), Some(&Cell::Text("b".into())));
        assert_eq!(g.cell(0, "on_cpu"), Some(&Cell::Ns(700)));
        assert_eq!(g.cell(1, "host"), Some(&Cell::Text("a".into())));
        assert_eq!(g.cell(1, "on_cpu"), Some(&Cell::Ns(300)));
        // One machine: one row, named so.
        let r = t.report(Options {
            sections: vec![SectionId::Groups],
            group_by: Some(GroupBy::Host),
            ..Options::default()
        });
        let g = r.section("groups").unwrap().table("groups").unwrap();
        assert_eq!(g.rows.len(), 1);
        assert_eq!(g.cell(0, "host"), Some(&Cell::Text(ONE_MACHINE.into())));
    }

    #[test]
    fn a_host_selects_its_machines_processes() {
        let (t, machines) = two_machines();
        for (index, pid, on_cpu) in [(0, 10, 300), (1, trace_hosts::PID_STRIDE + 10, 700)] {
            let r = t.report(Options {
                sections: vec![SectionId::Cpu],
                selection: Selection {
                    host: Some(HostSelection {
                        name: machines[index as usize].name.clone(),
                        index,
                        machines: 2,
                    }),
                    ..Default::default()
                },
                machines: machines.clone(),
                ..Options::default()
            });
            let p = r.section("cpu").unwrap().table("processes").unwrap();
            assert_eq!(p.rows.len(), 1, "machine {index}");
            assert_eq!(p.cell(0, "pid"), Some(&Cell::Int(pid as i64)));
            assert_eq!(p.cell(0, "on_cpu"), Some(&Cell::Ns(on_cpu)));
        }
    }
}
