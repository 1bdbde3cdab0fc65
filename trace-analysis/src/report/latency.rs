//! The `sched` section: per thread, how long it took from being woken to
//! running (count, p50, p90, p99, max), and the longest waits with their
//! times, to find them on a timeline.

use super::sched::Sched;
use super::table::{Cell, Column, Kind, Section, Table};
use super::{Finish, units};

/// The section, from the trace's scheduling state.
pub fn section(s: &Sched, end: &Finish<'_>) -> Section {
    let mut section = Section::new("sched", "Scheduling latency (woken to running)");
    if s.wakeups == 0 {
        section.notes.push(
            "The trace has no wake-ups (record kernel:sched to see scheduling latency).".into(),
        );
        return section;
    }
    let mut threads: Vec<(&u64, &super::sched::ThreadStats)> = s
        .threads
        .iter()
        .filter(|(_, t)| !t.incomplete && (t.wakeups > 0 || t.latency.count > 0))
        .collect();
    threads.sort_by(|a, b| b.1.latency.max.cmp(&a.1.latency.max).then(a.0.cmp(b.0)));
    let mut table = Table::new(
        "latency",
        "Wake-up latency per thread",
        vec![
            Column::new("tid", "tid", Kind::Int),
            Column::new("thread", "thread", Kind::Text),
            Column::new("pid", "pid", Kind::Int),
            Column::new("process", "process", Kind::Text),
            Column::new("wakeups", "wake-ups", Kind::Count),
            Column::new("unseen", "unseen", Kind::Count),
            Column::new("p50", "p50", Kind::Duration),
            Column::new("p90", "p90", Kind::Duration),
            Column::new("p99", "p99", Kind::Duration),
            Column::new("max", "max", Kind::Duration),
            Column::new("total", "total", Kind::Duration),
        ],
    )
    .diffed(&["process", "thread"], &["max", "p99", "p50", "wakeups"])
    .per(&["pid", "tid"], "threads")
    .peaks(&["max", "p99", "p50"]);
    for (tid, t) in threads {
        let l = &t.latency;
        let (pid, process) = end.process_of(t.pid, *tid);
        table.push(vec![
            Cell::Int(*tid as i64),
            end.thread(*tid).into(),
            pid,
            process,
            Cell::Count(t.wakeups.max(l.count)),
            Cell::Count(t.wakeups.saturating_sub(l.count)),
            l.cell(0.5),
            l.cell(0.9),
            l.cell(0.99),
            l.max_cell(),
            Cell::Ns(l.sum),
        ]);
    }
    table.truncate(end.top);
    table.note("From each wake-up of a thread not running to its next switch-in; percentiles within 1 %, counts and max exact.");
    let unseen: u64 = s
        .threads
        .values()
        .filter(|t| !t.incomplete)
        .map(|t| t.wakeups.saturating_sub(t.latency.count))
        .sum();
    if unseen > 0 {
        table.note(format!(
            "{unseen} wake-ups (unseen) have no record in the trace: a thread ran again after blocking without one (woken from a context the kernel does not trace, or the record was lost). They count as wake-ups but have no latency."
        ));
    }
    let incomplete = s.incomplete();
    if incomplete > 0 {
        table.note(format!(
            "{incomplete} threads were not traced continuously (recording filtered by pid, or events lost): the trace lacks some of their switches, so their wake-up latencies are left out."
        ));
    }
    section.tables.push(table);

    let mut worst = Table::new(
        "worst",
        "Longest wake-up latencies",
        vec![
            Column::new("latency", "latency", Kind::Duration),
            Column::new("tid", "tid", Kind::Int),
            Column::new("thread", "thread", Kind::Text),
            Column::new("process", "process", Kind::Text),
            Column::new("cpu", "CPU", Kind::Int),
            Column::new("woken_at", "woken at (s from start)", Kind::Offset),
            Column::new("ran_at", "ran at (s from start)", Kind::Offset),
            Column::new("woken_ts", "woken at (BOOTTIME ns)", Kind::Time),
        ],
    );
    for w in s.worst() {
        worst.push(vec![
            Cell::Ns(w.latency),
            Cell::Int(w.tid as i64),
            end.thread(w.tid).into(),
            end.process_of(w.pid, w.tid).1,
            Cell::Int(i64::from(w.cpu)),
            end.offset(w.woken),
            end.offset(w.ran),
            Cell::Ns(w.woken),
        ]);
    }
    worst.truncate(end.top);
    worst.note(format!(
        "Times from the trace's start ({} s CLOCK_BOOTTIME), as ui.perfetto.dev shows them; the absolute time is the file's own timestamp.",
        units::seconds(end.info.start_ns.unwrap_or(0))
    ));
    section.tables.push(worst);
    section
}

#[cfg(test)]
mod tests {
    use crate::report::testing::Fxt;
    use crate::report::{Cell, Options, SectionId};

    #[test]
    fn latencies_and_the_worst_with_their_times() {
        let mut t = Fxt::new();
        t.process(10, "app").thread(10, 11, "sleeper");
        t.switch(1_000, 0, 0, 3, 11);
        let mut at = 1_000;
        for i in 1..=10u64 {
            t.switch(at + 10, 0, 11, 3, 0);
            at += 20_000;
            t.wakeup(at, 0, 11).switch(at + i * 100, 0, 0, 3, 11);
        }
        // Blocked, then running again with no wake-up in the trace.
        t.switch(at + 2_000, 0, 11, 3, 0)
            .switch(at + 50_000, 0, 0, 3, 11);
        let r = t.report(Options {
            sections: vec![SectionId::Sched],
            top: 3,
            ..Options::default()
        });
        let s = r.section("sched").unwrap();
        let l = s.table("latency").unwrap();
        assert_eq!(l.cell(0, "wakeups"), Some(&Cell::Count(11)));
        assert_eq!(l.cell(0, "unseen"), Some(&Cell::Count(1)));
        assert!(
            l.notes[1].starts_with("1 wake-ups (unseen)"),
            "{:?}",
            l.notes
        );
        assert_eq!(l.cell(0, "max"), Some(&Cell::Ns(1_000)));
        assert_eq!(l.cell(0, "p50"), Some(&Cell::Ns(500)));
        assert_eq!(l.cell(0, "total"), Some(&Cell::Ns(5_500)));
        let w = s.table("worst").unwrap();
        assert_eq!(w.rows.len(), 3);
        assert_eq!(w.omitted, 0);
        assert_eq!(w.cell(0, "latency"), Some(&Cell::Ns(1_000)));
        assert_eq!(w.cell(0, "woken_ts"), Some(&Cell::Ns(201_000)));
        assert_eq!(w.cell(0, "woken_at"), Some(&Cell::Ns(200_000)));
        assert_eq!(w.cell(2, "latency"), Some(&Cell::Ns(800)));
    }

    #[test]
    fn threads_not_traced_continuously_are_left_out_with_a_note() {
        let mut t = Fxt::new();
        t.process(10, "app").thread(10, 30, "followed");
        t.process(20, "rcu").thread(20, 21, "rcu_preempt");
        t.switch(100, 0, 0, 3, 30)
            .wakeup(1_000, 0, 21)
            .switch(1_500, 0, 30, 3, 0)
            .wakeup(300_000, 0, 30)
            .switch(300_200, 0, 0, 3, 30)
            .switch(400_000, 0, 30, 1, 21)
            .inferred_switch(500_000, 0, 21, 0)
            .switch(500_000, 0, 0, 3, 30);
        let r = t.report(Options {
            sections: vec![SectionId::Sched],
            ..Options::default()
        });
        let s = r.section("sched").unwrap();
        let l = s.table("latency").unwrap();
        assert_eq!(l.rows.len(), 1);
        assert_eq!(l.cell(0, "tid"), Some(&Cell::Int(30)));
        assert_eq!(l.cell(0, "max"), Some(&Cell::Ns(200)));
        assert!(
            l.notes
                .iter()
                .any(|n| n.starts_with("1 threads were not traced continuously")),
            "{:?}",
            l.notes
        );
        let w = s.table("worst").unwrap();
        assert_eq!(w.rows.len(), 1);
        assert_eq!(w.cell(0, "tid"), Some(&Cell::Int(30)));
    }
}
