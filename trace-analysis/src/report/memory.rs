//! The `memory` section: per process, user page faults and resident set
//! size (peak and last, in all and per kind: anonymous, file, shared).

use foldhash::HashMap;

use super::filter::Filter;
use super::table::{Cell, Column, Kind, Section, Table};
use super::{Finish, Name};
use crate::event::Event;
use crate::reader::Context;

/// The resident set kinds `kmem:rss_stat` counts.
const KINDS: [&str; 4] = ["file", "anon", "swap", "shmem"];

#[derive(Debug, Default)]
struct Process {
    faults: u64,
    write_faults: u64,
    /// Current size of each kind (bytes).
    now: [Option<u64>; 4],
    peak: [u64; 4],
    /// Resident (file + anon + shmem) peak.
    rss_peak: u64,
    samples: u64,
}

impl Process {
    fn rss(&self) -> u64 {
        [0, 1, 3]
            .iter()
            .map(|&k| self.now[k].unwrap_or(0))
            .fold(0u64, u64::saturating_add)
    }
}

/// Memory events of a trace.
#[derive(Debug)]
pub struct Memory {
    category: Name,
    page_fault: Name,
    rss: Name,
    access: Name,
    kinds: [Name; 4],
    processes: HashMap<u64, Process>,
    seen: u64,
}

impl Default for Memory {
    fn default() -> Self {
        Memory {
            category: Name::new(trace_common::category::KERNEL_VM),
            page_fault: Name::new("page_fault"),
            rss: Name::new("rss"),
            access: Name::new("access"),
            kinds: KINDS.map(Name::new),
            processes: HashMap::default(),
            seen: 0,
        }
    }
}

impl Memory {
    /// Takes one event.
    pub fn event(&mut self, e: &Event, cx: &Context, f: &mut Filter) {
        match e {
            Event::Instant(i)
                if self.category.is(i.category, cx) && self.page_fault.is(i.name, cx) =>
            {
                self.seen += 1;
                if !f.at(i.ts) || !f.thread(i.track.pid, i.track.tid, cx) {
                    return;
                }
                let write = super::arg(&i.args, &mut self.access, cx)
                    .and_then(|v| v.as_str())
                    .is_some_and(|a| a == "write");
                let p = self.processes.entry(i.track.pid).or_default();
                p.faults += 1;
                p.write_faults += u64::from(write);
            }
            Event::Counter(c) if self.category.is(c.category, cx) && self.rss.is(c.name, cx) => {
                self.seen += 1;
                // Sizes before the window still make the level it starts at.
                if c.ts >= f.window().1 || !f.process(c.track.pid, cx) {
                    return;
                }
                let in_window = f.at(c.ts);
                let p = self.processes.entry(c.track.pid).or_default();
                for (k, kind) in self.kinds.iter_mut().enumerate() {
                    let Some(sym) = kind.get(cx) else { continue };
                    let Some(v) = crate::event::arg(&c.args, sym).and_then(|v| v.as_i64()) else {
                        continue;
                    };
                    let v = u64::try_from(v).unwrap_or(0);
                    p.now[k] = Some(v);
                    if in_window {
                        p.peak[k] = p.peak[k].max(v);
                    }
                }
                if in_window {
                    p.samples += 1;
                    p.rss_peak = p.rss_peak.max(p.rss());
                }
            }
            _ => {}
        }
    }

    /// The section.
    pub fn finish(self, end: &Finish<'_>) -> Section {
        let mut section = Section::new("memory", "Memory");
        if self.seen == 0 {
            section.notes.push(
                "The trace has no page faults or RSS counters (record kernel:vm to see them)."
                    .into(),
            );
            return section;
        }
        let mut procs: Vec<(u64, Process)> = self.processes.into_iter().collect();
        procs.sort_by(|a, b| {
            b.1.rss_peak
                .cmp(&a.1.rss_peak)
                .then(b.1.faults.cmp(&a.1.faults))
                .then(a.0.cmp(&b.0))
        });
        let mut table = Table::new(
            "processes",
            "Page faults and resident set per process",
            vec![
                Column::new("pid", "pid", Kind::Int),
                Column::new("process", "process", Kind::Text),
                Column::new("page_faults", "page faults", Kind::Count),
                Column::new("write_faults", "write faults", Kind::Count),
                Column::new("rss_peak", "RSS peak", Kind::Bytes),
                Column::new("rss_last", "RSS last", Kind::Bytes),
                Column::new("anon_peak", "anon peak", Kind::Bytes),
                Column::new("file_peak", "file peak", Kind::Bytes),
                Column::new("shmem_peak", "shmem peak", Kind::Bytes),
                Column::new("swap_peak", "swap peak", Kind::Bytes),
            ],
        )
        .diffed(&["process"], &["rss_peak", "page_faults", "anon_peak"])
        .per(&["pid"], "processes")
        .peaks(&["rss_peak", "anon_peak"]);
        for (pid, p) in &procs {
            let sized = p.samples > 0;
            let bytes = |v: u64| if sized { Cell::Count(v) } else { Cell::Empty };
            table.push(vec![
                Cell::Int(*pid as i64),
                Cell::Text(end.process(*pid)),
                Cell::Count(p.faults),
                Cell::Count(p.write_faults),
                bytes(p.rss_peak),
                bytes(p.rss()),
                bytes(p.peak[1]),
                bytes(p.peak[0]),
                bytes(p.peak[3]),
                bytes(p.peak[2]),
            ]);
        }
        table.truncate(end.top);
        table.note("RSS is file + anonymous + shared memory pages resident, as the kernel's rss_stat counts them; peaks are of the values the trace saw.");
        section.tables.push(table);
        section
    }
}

#[cfg(test)]
mod tests {
    use trace_common::fxt::{Arg, ArgValue, EventKind, StringRef};

    use crate::report::testing::Fxt;
    use crate::report::{Cell, Options, SectionId};

    #[test]
    fn faults_and_rss_peaks() {
        let mut t = Fxt::new();
        t.process(10, "app");
        for i in 0..5u64 {
            let access = if i < 2 { "write" } else { "read" };
            t.event(
                i,
                10,
                10,
                "kernel:vm",
                "page_fault",
                EventKind::Instant,
                vec![Arg::new(
                    "access",
                    ArgValue::String(StringRef::inline(access)),
                )],
            );
        }
        let rss = |t: &mut Fxt, ts, kind, v| {
            t.event(
                ts,
                10,
                10,
                "kernel:vm",
                "rss",
                EventKind::Counter { id: 0 },
                vec![Arg::new(kind, ArgValue::Int64(v))],
            );
        };
        rss(&mut t, 10, "anon", 1000);
        rss(&mut t, 11, "file", 500);
        rss(&mut t, 12, "anon", 4000);
        rss(&mut t, 13, "anon", 100);
        let r = t.report(Options {
            sections: vec![SectionId::Memory],
            ..Options::default()
        });
        let p = r.section("memory").unwrap().table("processes").unwrap();
        assert_eq!(p.cell(0, "page_faults"), Some(&Cell::Count(5)));
        assert_eq!(p.cell(0, "write_faults"), Some(&Cell::Count(2)));
        assert_eq!(p.cell(0, "rss_peak"), Some(&Cell::Count(4500)));
        assert_eq!(p.cell(0, "rss_last"), Some(&Cell::Count(600)));
        assert_eq!(p.cell(0, "anon_peak"), Some(&Cell::Count(4000)));
    }
}
