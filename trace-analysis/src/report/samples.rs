//! The `samples` section: from the stack samples, the functions the CPU
//! profile (`cpu-clock`) found most often, by self (the leaf frame) and
//! total (anywhere in the stack), and the same for time off CPU
//! (`off-cpu`), weighted by the time blocked.

use foldhash::{HashMap, HashSet};

use super::Finish;
use super::filter::Filter;
use super::table::{Cell, Column, Kind, Section, Table};
use crate::event::{Event, Frame};
use crate::reader::Context;
use crate::strings::Sym;

/// A function: its name and the file it is in.
type Function = (Sym, Sym);

#[derive(Debug, Default)]
struct Profile {
    samples: u64,
    weight: u64,
    self_: HashMap<Function, u64>,
    total: HashMap<Function, u64>,
}

impl Profile {
    fn add(&mut self, frames: &[Frame], w: u64, seen: &mut HashSet<Function>) {
        self.samples += 1;
        self.weight = self.weight.saturating_add(w);
        if let Some(leaf) = frames.first() {
            let e = self.self_.entry((leaf.function, leaf.mapping)).or_default();
            *e = e.saturating_add(w);
        }
        // A function recursing counts once per sample in its total.
        seen.clear();
        for f in frames {
            if seen.insert((f.function, f.mapping)) {
                let e = self.total.entry((f.function, f.mapping)).or_default();
                *e = e.saturating_add(w);
            }
        }
    }
}

/// Stack samples of a trace.
#[derive(Debug, Default)]
pub struct Samples {
    cpu: Profile,
    offcpu: Profile,
    timebases: HashMap<Sym, u64>,
    seen: HashSet<Function>,
}

impl Samples {
    /// Takes one event.
    pub fn event(&mut self, e: &Event, cx: &Context, f: &mut Filter) {
        let Event::Sample(s) = e else { return };
        if !f.at(s.ts) || !f.thread(s.pid, s.tid, cx) {
            return;
        }
        *self.timebases.entry(s.timebase).or_default() += 1;
        match cx.strings.get(s.timebase) {
            "cpu-clock" => self.cpu.add(&s.frames, 1, &mut self.seen),
            "off-cpu" => self
                .offcpu
                .add(&s.frames, s.weight.unwrap_or(0), &mut self.seen),
            _ => {}
        }
    }

    /// The section.
    pub fn finish(self, end: &Finish<'_>) -> Section {
        let mut section = Section::new("samples", "Stack samples");
        if self.timebases.is_empty() {
            section.notes.push(
                "The trace has no stack samples (record kernel:profile or kernel:offcpu to take them).".into(),
            );
            return section;
        }
        let name = |(function, mapping): Function| -> (String, String) {
            let f = end.cx.strings.get(function);
            let m = end.cx.strings.get(mapping);
            let base = m.rsplit('/').next().unwrap_or(m).to_owned();
            if f.is_empty() || f == "[unknown]" {
                let f = if base.is_empty() {
                    "[unknown]".to_owned()
                } else if base.starts_with('[') {
                    base.clone()
                } else {
                    format!("[{base}]")
                };
                (f, base)
            } else {
                (f.to_owned(), base)
            }
        };
        let profile = |id: &str, title: &str, p: &Profile, ns: bool| {
            let mut rows: Vec<(Function, u64, u64)> = p
                .total
                .iter()
                .map(|(k, t)| (*k, p.self_.get(k).copied().unwrap_or(0), *t))
                .collect();
            rows.sort_by(|a, b| {
                b.1.cmp(&a.1)
                    .then(b.2.cmp(&a.2))
                    .then_with(|| name(a.0).cmp(&name(b.0)))
            });
            let kind = if ns { Kind::Duration } else { Kind::Count };
            let mut t = Table::new(
                id,
                title,
                vec![
                    Column::new("function", "function", Kind::Text),
                    Column::new("module", "module", Kind::Text),
                    Column::new("self", "self", kind),
                    Column::new("self_pct", "self %", Kind::Percent),
                    Column::new("total", "total", kind),
                    Column::new("total_pct", "total %", Kind::Percent),
                ],
            )
            .diffed(&["function", "module"], &["self", "total"]);
            let whole = p.weight.max(1) as f64;
            let cell = |v: u64| if ns { Cell::Ns(v) } else { Cell::Count(v) };
            for (k, own, total) in rows {
                let (f, m) = name(k);
                t.push(vec![
                    Cell::Text(f),
                    Cell::Text(m),
                    cell(own),
                    Cell::Percent(own as f64 * 100.0 / whole),
                    cell(total),
                    Cell::Percent(total as f64 * 100.0 / whole),
                ]);
            }
            t.truncate(end.top);
            t
        };
        if self.cpu.samples > 0 {
            let mut t = profile("cpu", "CPU profile: functions by samples", &self.cpu, false);
            t.note(format!(
                "{} cpu-clock samples; self counts the samples in the function itself, total those with it anywhere on the stack.",
                self.cpu.samples
            ));
            section.tables.push(t);
        }
        if self.offcpu.samples > 0 {
            let mut t = profile(
                "offcpu",
                "Off-CPU time: functions by time blocked",
                &self.offcpu,
                true,
            );
            t.note(format!(
                "{} off-CPU samples, weighted by the time their thread was blocked.",
                self.offcpu.samples
            ));
            section.tables.push(t);
        }
        let mut rows: Vec<(String, u64)> = self
            .timebases
            .iter()
            .map(|(t, n)| (end.cx.strings.get(*t).to_owned(), *n))
            .collect();
        rows.sort();
        let mut t = Table::new(
            "timebases",
            "Samples per stream",
            vec![
                Column::new("timebase", "timebase", Kind::Text),
                Column::new("samples", "samples", Kind::Count),
            ],
        )
        .diffed(&["timebase"], &["samples"]);
        for (tb, n) in rows {
            t.push(vec![Cell::Text(tb), Cell::Count(n)]);
        }
        section.tables.push(t);
        section
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Sample;
    use crate::report::{Options, Selection, TraceInfo};

    #[test]
    fn self_and_total_by_function_and_off_cpu_by_time() {
        let mut cx = Context::default();
        let mut sample = |timebase: &str, weight: Option<u64>, stack: &[&str]| {
            let frames = stack
                .iter()
                .map(|f| Frame {
                    function: cx.strings.intern(f),
                    mapping: cx.strings.intern("/usr/bin/app"),
                })
                .collect();
            Event::Sample(Sample {
                ts: 1,
                pid: 5,
                tid: 5,
                cpu: 0,
                timebase: cx.strings.intern(timebase),
                weight,
                frames,
            })
        };
        let events = [
            sample("cpu-clock", None, &["spin", "work", "main"]),
            sample("cpu-clock", None, &["spin", "work", "main"]),
            sample("cpu-clock", None, &["work", "work", "main"]),
            sample("cpu-clock", None, &[""]),
            sample("off-cpu", Some(5_000), &["read", "main"]),
            sample("off-cpu", Some(1_000), &["poll", "main"]),
        ];
        let mut s = Samples::default();
        let mut f = Filter::default();
        for e in &events {
            s.event(e, &cx, &mut f);
        }
        let info = TraceInfo::default();
        let selection = Selection::default();
        let end = Finish {
            cx: &cx,
            info: &info,
            top: Options::default().top,
            selection: &selection,
        };
        let section = s.finish(&end);
        let cpu = section.table("cpu").unwrap();
        assert_eq!(cpu.cell(0, "function"), Some(&Cell::Text("spin".into())));
        assert_eq!(cpu.cell(0, "self"), Some(&Cell::Count(2)));
        assert_eq!(cpu.cell(0, "self_pct"), Some(&Cell::Percent(50.0)));
        let work = cpu
            .rows
            .iter()
            .position(|r| r[0] == Cell::Text("work".into()))
            .unwrap();
        assert_eq!(cpu.rows[work][2], Cell::Count(1));
        assert_eq!(cpu.rows[work][4], Cell::Count(3), "recursion counts once");
        assert!(cpu.rows.iter().any(|r| r[0] == Cell::Text("[app]".into())));
        let off = section.table("offcpu").unwrap();
        assert_eq!(off.cell(0, "function"), Some(&Cell::Text("read".into())));
        assert_eq!(off.cell(0, "self"), Some(&Cell::Ns(5_000)));
        let main = off
            .rows
            .iter()
            .position(|r| r[0] == Cell::Text("main".into()))
            .unwrap();
        assert_eq!(off.rows[main][4], Cell::Ns(6_000));
    }
}
