//! The `groups` section (`--by container` or `--by cgroup`): time on CPU,
//! time waiting for a CPU, wake-up latency and system calls of each
//! container or cgroup, from the labels the recorder gave each process.

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
}

/// The group of processes without a container.
pub const NO_CONTAINER: &str = "(no container)";
/// The group of processes the trace does not place.
pub const UNLABELLED: &str = "(not labelled)";

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

/// The section.
pub fn section(
    by: GroupBy,
    sched: Option<&Sched>,
    syscalls: Option<&Syscalls>,
    end: &Finish<'_>,
) -> Section {
    let (id_title, what) = match by {
        GroupBy::Container => ("By container", "container"),
        GroupBy::Cgroup => ("By cgroup", "cgroup"),
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
    table.note(format!(
        "Processes are placed by the labels the recorder gave them (their cgroup when they were \
         created, executed or found at the start); {UNLABELLED} holds those it could not place \
         (gone before it looked, or recorded without labels). Latency is from a wake-up to \
         running, of the wake-ups the trace has."
    ));
    section.tables.push(table);
    section
}
