//! The `cpu` section: busy time per CPU; per process and per thread, time
//! on CPU, its share, switches (voluntary and involuntary), migrations and
//! time off CPU.

use foldhash::HashMap;

use super::sched::Sched;
use super::table::{Cell, Column, Kind, Section, Table};
use super::{Finish, units};

fn percent(part: u64, whole: u64) -> Cell {
    if whole == 0 {
        Cell::Empty
    } else {
        Cell::Percent(part as f64 * 100.0 / whole as f64)
    }
}

/// The section, from the trace's scheduling state.
pub fn section(s: &Sched, end: &Finish<'_>) -> Section {
    let mut section = Section::new("cpu", "CPU time");
    if s.switches == 0 {
        section.notes.push(
            "The trace has no context switches (record kernel:sched to see CPU time).".into(),
        );
        return section;
    }
    let span = end.info.span();
    let total: u64 = s
        .threads
        .values()
        .fold(0u64, |a, t| a.saturating_add(t.on_cpu));

    let mut cpus = Table::new(
        "cpus",
        "Busy time per CPU",
        vec![
            Column::new("cpu", "CPU", Kind::Int),
            Column::new("busy", "busy", Kind::Duration),
            Column::new("busy_pct", "busy %", Kind::Percent),
            Column::new("switches", "switches", Kind::Count),
        ],
    )
    .diffed(&["cpu"], &["busy", "switches"]);
    for (cpu, c) in s.cpus() {
        cpus.push(vec![
            Cell::Int(i64::from(cpu)),
            Cell::Ns(c.busy),
            percent(c.busy, span),
            Cell::Count(c.switches),
        ]);
    }
    cpus.note(format!(
        "busy % is of the {} the trace covers{}.",
        units::duration(span),
        if end.selection.by_thread() {
            "; busy time and switches count the selected threads only (their time on CPU, and switches in or out of them)"
        } else {
            ""
        }
    ));
    section.tables.push(cpus);

    // Processes.
    #[derive(Default)]
    struct Proc {
        threads: u64,
        on_cpu: u64,
        voluntary: u64,
        involuntary: u64,
        migrations: u64,
    }
    // A thread of no known process has pid 0 here.
    let pid_of = |tid: u64, t: &super::sched::ThreadStats| {
        if t.pid != 0 {
            t.pid
        } else {
            end.cx.process_of(tid).unwrap_or(0)
        }
    };
    let mut procs: HashMap<u64, Proc> = HashMap::default();
    for (tid, t) in &s.threads {
        let p = procs.entry(pid_of(*tid, t)).or_default();
        p.threads += 1;
        p.on_cpu = p.on_cpu.saturating_add(t.on_cpu);
        p.voluntary += t.voluntary;
        p.involuntary += t.involuntary;
        p.migrations += t.migrations;
    }
    let mut procs: Vec<(u64, Proc)> = procs.into_iter().collect();
    procs.sort_by(|a, b| b.1.on_cpu.cmp(&a.1.on_cpu).then(a.0.cmp(&b.0)));
    let mut table = Table::new(
        "processes",
        "Processes by time on CPU",
        vec![
            Column::new("pid", "pid", Kind::Int),
            Column::new("process", "process", Kind::Text),
            Column::new("threads", "threads", Kind::Count),
            Column::new("on_cpu", "on CPU", Kind::Duration),
            Column::new("share", "share %", Kind::Percent),
            Column::new("voluntary", "voluntary sw", Kind::Count),
            Column::new("involuntary", "involuntary sw", Kind::Count),
            Column::new("migrations", "migrations", Kind::Count),
        ],
    )
    .diffed(
        &["process"],
        &["on_cpu", "voluntary", "involuntary", "migrations"],
    )
    .per(&["pid"], "processes");
    for (pid, p) in &procs {
        let (pid, process) = end.process_of(*pid, 0);
        table.push(vec![
            pid,
            process,
            Cell::Count(p.threads),
            Cell::Ns(p.on_cpu),
            percent(p.on_cpu, total),
            Cell::Count(p.voluntary),
            Cell::Count(p.involuntary),
            Cell::Count(p.migrations),
        ]);
    }
    table.truncate(end.top);
    table.note("share % is of the time every thread shown here ran; voluntary switches are those out blocked or sleeping, involuntary those out still runnable (preempted).");
    section.tables.push(table);

    // Threads.
    let mut threads: Vec<(&u64, &super::sched::ThreadStats)> = s.threads.iter().collect();
    threads.sort_by(|a, b| b.1.on_cpu.cmp(&a.1.on_cpu).then(a.0.cmp(b.0)));
    let mut table = Table::new(
        "threads",
        "Threads by time on CPU",
        vec![
            Column::new("tid", "tid", Kind::Int),
            Column::new("thread", "thread", Kind::Text),
            Column::new("pid", "pid", Kind::Int),
            Column::new("process", "process", Kind::Text),
            Column::new("on_cpu", "on CPU", Kind::Duration),
            Column::new("share", "share %", Kind::Percent),
            Column::new("voluntary", "voluntary sw", Kind::Count),
            Column::new("involuntary", "involuntary sw", Kind::Count),
            Column::new("migrations", "migrations", Kind::Count),
            Column::new("off_cpu", "off CPU (blocked)", Kind::Duration),
            Column::new("runnable", "runnable wait", Kind::Duration),
            Column::new("traced", "traced", Kind::Text),
        ],
    )
    .diffed(
        &["process", "thread"],
        &["on_cpu", "off_cpu", "runnable", "voluntary", "involuntary"],
    )
    .per(&["pid", "tid"], "threads");
    for (tid, t) in threads {
        let (pid, process) = end.process_of(pid_of(*tid, t), *tid);
        table.push(vec![
            Cell::Int(*tid as i64),
            end.thread(*tid).into(),
            pid,
            process,
            Cell::Ns(t.on_cpu),
            percent(t.on_cpu, total),
            Cell::Count(t.voluntary),
            Cell::Count(t.involuntary),
            Cell::Count(t.migrations),
            Cell::Ns(t.blocked),
            Cell::Ns(t.runnable),
            Cell::Text(if t.incomplete { "partly" } else { "" }.into()),
        ]);
    }
    table.truncate(end.top);
    table.note("off CPU (blocked) is the time from switching out blocked or sleeping to running again; runnable wait the time from being preempted to running again.");
    section.tables.push(table);
    if s.inferred > 0 {
        section.notes.push(format!(
            "{} of the {} switches were inferred by the recorder (a switch it did not see): their voluntary or involuntary kind is not known and not counted.",
            s.inferred, s.switches
        ));
    }
    let partly = s.incomplete();
    if partly > 0 {
        section.notes.push(format!(
            "{partly} threads were traced partly (traced: partly; the recording followed some processes only, or lost events): some of their switches are missing, so their time on CPU runs to the next recorded switch of their CPU and may be too long, and their times off CPU may be too short."
        ));
    }
    if s.backwards > 0 {
        section.notes.push(format!(
            "{} intervals ran backwards in time (events out of order) and were left out.",
            s.backwards
        ));
    }
    section
}

#[cfg(test)]
mod tests {
    use crate::report::testing::Fxt;
    use crate::report::{Cell, Options, SectionId};

    #[test]
    fn processes_and_threads_are_sorted_by_time_on_cpu() {
        let mut t = Fxt::new();
        t.process(10, "app")
            .thread(10, 11, "main")
            .thread(10, 12, "worker");
        t.process(20, "other").thread(20, 20, "other");
        t.switch(0, 0, 0, 3, 11)
            .switch(100, 0, 11, 1, 12)
            .switch(400, 0, 12, 3, 20)
            .switch(1000, 0, 20, 3, 0);
        let r = t.report(Options {
            sections: vec![SectionId::Cpu],
            ..Options::default()
        });
        let cpu = r.section("cpu").unwrap();
        let p = cpu.table("processes").unwrap();
        assert_eq!(p.cell(0, "process"), Some(&Cell::Text("other".into())));
        assert_eq!(p.cell(0, "on_cpu"), Some(&Cell::Ns(600)));
        assert_eq!(p.cell(1, "on_cpu"), Some(&Cell::Ns(400)));
        assert_eq!(p.cell(1, "threads"), Some(&Cell::Count(2)));
        assert_eq!(p.cell(1, "share"), Some(&Cell::Percent(40.0)));
        let th = cpu.table("threads").unwrap();
        assert_eq!(th.cell(1, "thread"), Some(&Cell::Text("worker".into())));
        assert_eq!(th.cell(2, "involuntary"), Some(&Cell::Count(1)));
        let cpus = cpu.table("cpus").unwrap();
        assert_eq!(cpus.cell(0, "busy"), Some(&Cell::Ns(1000)));
        assert_eq!(cpus.cell(0, "busy_pct"), Some(&Cell::Percent(100.0)));
        // Only the selected process.
        let r = t.report(Options {
            sections: vec![SectionId::Cpu],
            selection: crate::report::Selection {
                comm: Some("ap*".into()),
                ..Default::default()
            },
            ..Options::default()
        });
        let p = r.section("cpu").unwrap().table("processes").unwrap();
        assert_eq!(p.rows.len(), 1);
        assert_eq!(p.cell(0, "pid"), Some(&Cell::Int(10)));
    }

    #[test]
    fn threads_of_no_known_process_are_not_shown_as_pid_0() {
        let mut t = Fxt::new();
        t.process(10, "app").thread(10, 11, "main");
        // Thread 50 has no thread record: its process is not known.
        t.switch(0, 0, 0, 3, 11)
            .switch(100, 0, 11, 3, 50)
            .switch(400, 0, 50, 3, 0);
        let r = t.report(Options {
            sections: vec![SectionId::Cpu],
            ..Options::default()
        });
        let cpu = r.section("cpu").unwrap();
        let p = cpu.table("processes").unwrap();
        assert_eq!(
            p.cell(0, "process"),
            Some(&Cell::Text("(unknown process)".into()))
        );
        assert_eq!(p.cell(0, "pid"), Some(&Cell::Empty));
        assert_eq!(p.cell(1, "pid"), Some(&Cell::Int(10)));
        let th = cpu.table("threads").unwrap();
        assert_eq!(th.cell(0, "tid"), Some(&Cell::Int(50)));
        assert_eq!(th.cell(0, "pid"), Some(&Cell::Empty));
        assert_eq!(
            th.cell(0, "process"),
            Some(&Cell::Text("(unknown process)".into()))
        );
        // A diff matches them by that name.
        let d = crate::report::diff::diff(&r, &r, 10, crate::report::diff::DiffBy::Name);
        let p = d.section("cpu").unwrap().table("processes").unwrap();
        assert_eq!(
            p.cell(0, "process"),
            Some(&Cell::Text("(unknown process)".into()))
        );
        assert_eq!(p.cell(0, "on_cpu_change"), Some(&Cell::NsChange(0)));
        assert_eq!(p.rows.len(), 2);
    }

    #[test]
    fn with_a_selection_the_switches_column_says_it_counts_selected_threads() {
        let mut t = Fxt::new();
        t.process(10, "app").thread(10, 11, "a");
        t.process(20, "other").thread(20, 20, "other");
        t.switch(0, 0, 0, 3, 11)
            .switch(100, 0, 11, 3, 20)
            .switch(200, 0, 20, 3, 0)
            .switch(300, 0, 0, 3, 20)
            .switch(400, 0, 20, 3, 0);
        let r = t.report(Options {
            sections: vec![SectionId::Cpu],
            selection: crate::report::Selection {
                comm: Some("ap*".into()),
                ..Default::default()
            },
            ..Options::default()
        });
        let cpus = r.section("cpu").unwrap().table("cpus").unwrap();
        assert_eq!(cpus.cell(0, "switches"), Some(&Cell::Count(2)));
        assert_eq!(cpus.cell(0, "busy"), Some(&Cell::Ns(100)));
        assert!(cpus.notes[0].contains("switches count the selected threads only"));
    }
}
