//! Two reports compared: each table that names its rows (its key columns)
//! becomes a table of the rows of either trace, with the compared values
//! of both (A and B) and their change, sorted by the largest change of
//! the first compared column. Processes and threads are matched by name,
//! those of a name summed and counted on each side (pids differ from one
//! recording to the next), or, when asked, by pid.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::table::{Cell, Column, Kind, Section, Table};
use super::{Report, TraceInfo};

/// Two traces compared.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Diff {
    /// The first trace (A).
    pub a: TraceInfo,
    /// The second trace (B).
    pub b: TraceInfo,
    /// How processes and threads were matched.
    pub by: DiffBy,
    /// The compared sections, in the order of A's.
    pub sections: Vec<Section>,
}

impl Diff {
    /// The section `id`.
    pub fn section(&self, id: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.id == id)
    }
}

/// How the rows of a table of processes or threads are matched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffBy {
    /// By command name (a process's; a thread's and its process's): the
    /// rows of one name are summed on each side and counted, as pids differ
    /// from one recording to the next.
    #[default]
    Name,
    /// By pid (and tid) and name: one process against the same process, for
    /// two reports of one recording (a time range against another).
    Pid,
}

/// The text naming a row by a key column; numbers as text.
fn key_text(cell: &Cell) -> String {
    match cell {
        Cell::Text(s) => s.clone(),
        Cell::Empty => String::new(),
        other => other
            .integer()
            .map(|v| v.to_string())
            .or_else(|| other.number().map(|v| v.to_string()))
            .unwrap_or_default(),
    }
}

/// `a` and `b` combined: summed, or the larger when `peak`; an empty cell
/// gives way to the other.
fn combine(a: &Cell, b: &Cell, peak: bool) -> Cell {
    let pick = |x: f64, y: f64| if peak { x.max(y) } else { x + y };
    match (a, b) {
        (Cell::Empty, other) | (other, Cell::Empty) => other.clone(),
        (Cell::Count(x), Cell::Count(y)) => Cell::Count(if peak {
            *x.max(y)
        } else {
            x.saturating_add(*y)
        }),
        (Cell::Ns(x), Cell::Ns(y)) => Cell::Ns(if peak {
            *x.max(y)
        } else {
            x.saturating_add(*y)
        }),
        (Cell::Int(x), Cell::Int(y)) => Cell::Int(if peak {
            *x.max(y)
        } else {
            x.saturating_add(*y)
        }),
        (Cell::NsChange(x), Cell::NsChange(y)) => Cell::NsChange(if peak {
            *x.max(y)
        } else {
            x.saturating_add(*y)
        }),
        (Cell::Percent(x), Cell::Percent(y)) => Cell::Percent(pick(*x, *y)),
        (Cell::Float(x), Cell::Float(y)) => Cell::Float(pick(*x, *y)),
        (x, _) => x.clone(),
    }
}

/// The rows of one key on one side: how many, and their compared values
/// combined.
struct Group {
    count: u64,
    values: Vec<Cell>,
}

/// The rows of `t` grouped by the columns `key` (ids), in the order of
/// their first row, with the columns `compare` (ids) combined.
fn grouped(t: &Table, key: &[&str], compare: &[&str]) -> Vec<(Vec<String>, Group)> {
    let key: Vec<Option<usize>> = key.iter().map(|k| t.column(k)).collect();
    let compare: Vec<(Option<usize>, bool)> = compare
        .iter()
        .map(|c| {
            let i = t.column(c);
            (i, i.is_some_and(|i| t.peaks.contains(&i)))
        })
        .collect();
    let mut index: HashMap<Vec<String>, usize> = HashMap::new();
    let mut out: Vec<(Vec<String>, Group)> = Vec::new();
    for row in &t.rows {
        let cell = |i: Option<usize>| i.and_then(|i| row.get(i)).unwrap_or(&Cell::Empty);
        let k: Vec<String> = key.iter().map(|&i| key_text(cell(i))).collect();
        let at = *index.entry(k.clone()).or_insert_with(|| {
            out.push((
                k,
                Group {
                    count: 0,
                    values: vec![Cell::Empty; compare.len()],
                },
            ));
            out.len() - 1
        });
        let g = &mut out[at].1;
        g.count += 1;
        for (v, &(i, peak)) in g.values.iter_mut().zip(&compare) {
            *v = combine(v, cell(i), peak);
        }
    }
    out
}

/// The change from `a` to `b` in a column of `kind`, missing values
/// counting as zero.
fn change(kind: Kind, a: Option<&Cell>, b: Option<&Cell>) -> Cell {
    let int = |c: Option<&Cell>| c.and_then(Cell::integer).unwrap_or(0);
    let num = |c: Option<&Cell>| c.and_then(Cell::number).unwrap_or(0.0);
    let clamp = |v: i128| i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX });
    match kind {
        Kind::Duration | Kind::DurationChange | Kind::Time | Kind::Offset => {
            Cell::NsChange(clamp(int(b) - int(a)))
        }
        Kind::Count | Kind::Int | Kind::Bytes | Kind::Change | Kind::BytesChange => {
            Cell::Int(clamp(int(b) - int(a)))
        }
        Kind::Percent => Cell::Percent(num(b) - num(a)),
        Kind::Float => Cell::Float(num(b) - num(a)),
        Kind::Text => Cell::Empty,
    }
}

fn change_kind(kind: Kind) -> Kind {
    match kind {
        Kind::Duration | Kind::DurationChange | Kind::Time | Kind::Offset => Kind::DurationChange,
        Kind::Count | Kind::Int | Kind::Change => Kind::Change,
        Kind::Bytes | Kind::BytesChange => Kind::BytesChange,
        other => other,
    }
}

/// The titles of columns `ids` of `t`, joined.
fn titles(t: &Table, ids: &[usize]) -> String {
    ids.iter()
        .map(|&i| t.columns[i].title.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Table `a` (or `b`, when only B has it) compared with `b`, rows matched
/// `by` name or pid; `None` for a table that does not name its rows.
pub fn table(a: Option<&Table>, b: Option<&Table>, top: usize, by: DiffBy) -> Option<Table> {
    let shape = a.or(b)?;
    if shape.key.is_empty() || shape.compare.is_empty() {
        return None;
    }
    let per_instance = by == DiffBy::Pid && !shape.instance.is_empty();
    let counted = by == DiffBy::Name && !shape.instance.is_empty();
    let key: Vec<usize> = if per_instance {
        shape.instance.iter().chain(&shape.key).copied().collect()
    } else {
        shape.key.clone()
    };
    let key_ids: Vec<&str> = key.iter().map(|&i| shape.columns[i].id.as_str()).collect();
    let compare_ids: Vec<&str> = shape
        .compare
        .iter()
        .map(|&i| shape.columns[i].id.as_str())
        .collect();
    let mut columns: Vec<Column> = key.iter().map(|&i| shape.columns[i].clone()).collect();
    let what = &shape.instance_name;
    if counted {
        columns.push(Column::new(
            &format!("{what}_a"),
            &format!("{what} A"),
            Kind::Count,
        ));
        columns.push(Column::new(
            &format!("{what}_b"),
            &format!("{what} B"),
            Kind::Count,
        ));
    }
    let first = columns.len();
    for &i in &shape.compare {
        let c = &shape.columns[i];
        columns.push(Column::new(
            &format!("{}_a", c.id),
            &format!("{} A", c.title),
            c.kind,
        ));
        columns.push(Column::new(
            &format!("{}_b", c.id),
            &format!("{} B", c.title),
            c.kind,
        ));
        columns.push(Column::new(
            &format!("{}_change", c.id),
            &format!("{} change", c.title),
            change_kind(c.kind),
        ));
    }
    let mut out = Table::new(&shape.id, &format!("{} (A → B)", shape.title), columns);
    let nkey = key.len();
    let ncompare = shape.compare.len();
    out.key = (0..nkey).collect();
    out.compare = (0..ncompare).map(|j| first + 3 * j + 2).collect();
    // A narrow terminal keeps the key and the first compared column's A, B
    // and change longest; before them it leaves out the counts, before
    // those the others' changes, and first the others' A and B.
    out.optional = (1..ncompare)
        .rev()
        .flat_map(|j| [first + 3 * j, first + 3 * j + 1])
        .chain((1..ncompare).rev().map(|j| first + 3 * j + 2))
        .chain((nkey..first).rev())
        .collect();

    let groups_a = a
        .map(|t| grouped(t, &key_ids, &compare_ids))
        .unwrap_or_default();
    let groups_b = b
        .map(|t| grouped(t, &key_ids, &compare_ids))
        .unwrap_or_default();
    let mut index_b: HashMap<&Vec<String>, usize> = groups_b
        .iter()
        .enumerate()
        .map(|(i, (k, _))| (k, i))
        .collect();
    let mut pairs: Vec<(&Vec<String>, Option<&Group>, Option<&Group>)> = Vec::new();
    for (k, g) in &groups_a {
        let other = index_b.remove(k).map(|i| &groups_b[i].1);
        pairs.push((k, Some(g), other));
    }
    for (k, g) in &groups_b {
        if index_b.contains_key(k) {
            pairs.push((k, None, Some(g)));
        }
    }
    let mut rows: Vec<(f64, &Vec<String>, Vec<Cell>)> = pairs
        .into_iter()
        .map(|(k, ga, gb)| {
            let mut cells: Vec<Cell> = k.iter().map(|k| Cell::Text(k.clone())).collect();
            if counted {
                cells.push(Cell::Count(ga.map_or(0, |g| g.count)));
                cells.push(Cell::Count(gb.map_or(0, |g| g.count)));
            }
            let mut largest = 0.0;
            for (j, &i) in shape.compare.iter().enumerate() {
                let va = ga.map(|g| &g.values[j]).filter(|c| **c != Cell::Empty);
                let vb = gb.map(|g| &g.values[j]).filter(|c| **c != Cell::Empty);
                let ch = change(shape.columns[i].kind, va, vb);
                if j == 0 {
                    largest = ch.number().unwrap_or(0.0).abs();
                }
                cells.push(va.cloned().unwrap_or(Cell::Empty));
                cells.push(vb.cloned().unwrap_or(Cell::Empty));
                cells.push(ch);
            }
            (largest, k, cells)
        })
        .collect();
    rows.sort_by(|x, y| y.0.total_cmp(&x.0).then_with(|| x.1.cmp(y.1)));
    for (_, _, cells) in rows {
        out.push(cells);
    }
    out.truncate(top);
    let mut note = format!(
        "Rows are matched by {} and sorted by the largest change of {}; a row missing from one trace counts as zero there.",
        titles(shape, &key),
        shape.columns[shape.compare[0]].title
    );
    if counted {
        let peaks: Vec<usize> = shape
            .compare
            .iter()
            .copied()
            .filter(|i| shape.peaks.contains(i))
            .collect();
        let _ = write!(
            note,
            " The {what} of a name are summed ({what} A and B count them; --diff-by pid matches them one by one)"
        );
        if peaks.is_empty() {
            note.push('.');
        } else {
            let _ = write!(
                note,
                ", but for {}: the largest of any.",
                titles(shape, &peaks)
            );
        }
    }
    out.note(note);
    Some(out)
}

/// Report `a` compared with report `b`, `top` rows per table, the rows of
/// processes and threads matched `by` name or pid. The reports should keep
/// all their rows ([`super::Options::all_rows`]), so that those of a name
/// are all summed.
pub fn diff(a: &Report, b: &Report, top: usize, by: DiffBy) -> Diff {
    let mut sections = Vec::new();
    let ids: Vec<&str> = a
        .sections
        .iter()
        .chain(&b.sections)
        .map(|s| s.id.as_str())
        .fold(Vec::new(), |mut v, id| {
            if !v.contains(&id) {
                v.push(id);
            }
            v
        });
    for id in ids {
        let sa = a.section(id);
        let sb = b.section(id);
        let Some(shape) = sa.or(sb) else { continue };
        let mut out = Section::new(&shape.id, &shape.title);
        let mut table_ids: Vec<&str> = Vec::new();
        for t in sa.iter().chain(sb.iter()).flat_map(|s| &s.tables) {
            if !table_ids.contains(&t.id.as_str()) {
                table_ids.push(&t.id);
            }
        }
        for tid in table_ids {
            let ta = sa.and_then(|s| s.table(tid));
            let tb = sb.and_then(|s| s.table(tid));
            if let Some(t) = table(ta, tb, top, by) {
                out.tables.push(t);
            }
        }
        for (which, s) in [("A", sa), ("B", sb)] {
            for n in s.map(|s| s.notes.as_slice()).unwrap_or_default() {
                out.notes.push(format!("{which}: {n}"));
            }
        }
        sections.push(out);
    }
    Diff {
        a: a.trace.clone(),
        b: b.trace.clone(),
        by,
        sections,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testing::Fxt;
    use crate::report::{Options, SectionId};

    fn calls(rows: &[(&str, u64, u64)]) -> Table {
        let mut t = Table::new(
            "calls",
            "Calls",
            vec![
                Column::new("call", "call", Kind::Text),
                Column::new("count", "count", Kind::Count),
                Column::new("total", "total", Kind::Duration),
            ],
        )
        .diffed(&["call"], &["total", "count"]);
        for (c, n, d) in rows {
            t.push(vec![Cell::Text((*c).into()), Cell::Count(*n), Cell::Ns(*d)]);
        }
        t
    }

    #[test]
    fn rows_are_matched_by_key_and_sorted_by_the_largest_change() {
        let a = calls(&[
            ("read", 10, 1_000),
            ("nanosleep", 1, 50_000_000),
            ("gone", 1, 10),
        ]);
        let b = calls(&[
            ("nanosleep", 2, 350_000_000),
            ("read", 12, 900),
            ("new", 3, 2_000_000),
        ]);
        let t = table(Some(&a), Some(&b), 10, DiffBy::Name).unwrap();
        assert_eq!(t.columns.len(), 1 + 2 * 3);
        assert_eq!(t.cell(0, "call"), Some(&Cell::Text("nanosleep".into())));
        assert_eq!(t.cell(0, "total_a"), Some(&Cell::Ns(50_000_000)));
        assert_eq!(t.cell(0, "total_b"), Some(&Cell::Ns(350_000_000)));
        assert_eq!(
            t.cell(0, "total_change"),
            Some(&Cell::NsChange(300_000_000))
        );
        assert_eq!(t.cell(0, "count_change"), Some(&Cell::Int(1)));
        assert_eq!(t.cell(1, "call"), Some(&Cell::Text("new".into())));
        assert_eq!(t.cell(1, "total_a"), Some(&Cell::Empty));
        assert_eq!(t.cell(2, "total_change"), Some(&Cell::NsChange(-100)));
        assert_eq!(t.cell(3, "call"), Some(&Cell::Text("gone".into())));
        assert_eq!(t.cell(3, "total_change"), Some(&Cell::NsChange(-10)));
        // Repeated keys are summed; unkeyed tables are not compared.
        let dup = calls(&[("x", 1, 5), ("x", 1, 7)]);
        let t = table(Some(&dup), Some(&calls(&[("x", 1, 2)])), 10, DiffBy::Name).unwrap();
        assert_eq!(t.rows.len(), 1);
        assert_eq!(t.cell(0, "total_a"), Some(&Cell::Ns(12)));
        assert_eq!(t.cell(0, "count_change"), Some(&Cell::Int(-1)));
        let plain = Table::new("h", "h", vec![Column::new("n", "n", Kind::Count)]);
        assert!(table(Some(&plain), None, 10, DiffBy::Name).is_none());
    }

    #[test]
    fn byte_and_duration_changes_keep_their_kind() {
        let mut a = Table::new(
            "devices",
            "Devices",
            vec![
                Column::new("device", "device", Kind::Text),
                Column::new("bytes", "bytes", Kind::Bytes),
                Column::new("total", "total", Kind::Duration),
            ],
        )
        .diffed(&["device"], &["bytes", "total"]);
        let mut b = a.clone();
        a.push(vec!["sda".into(), Cell::Count(1 << 20), Cell::Ns(500)]);
        b.push(vec!["sda".into(), Cell::Count(5 << 19), Cell::Ns(200)]);
        let t = table(Some(&a), Some(&b), 10, DiffBy::Name).unwrap();
        let kind = |id: &str| t.columns[t.column(id).unwrap()].kind;
        assert_eq!(kind("bytes_change"), Kind::BytesChange);
        assert_eq!(kind("bytes_a"), Kind::Bytes);
        assert_eq!(kind("total_change"), Kind::DurationChange);
        assert_eq!(t.cell(0, "bytes_change"), Some(&Cell::Int(3 << 19)));
        assert_eq!(t.cell(0, "total_change"), Some(&Cell::NsChange(-300)));
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(json["columns"][3]["unit"], "bytes");
    }

    #[test]
    fn reports_compare_section_by_section() {
        let section = |t: Table| Section {
            id: "syscalls".into(),
            title: "System calls".into(),
            tables: vec![t],
            notes: vec![],
        };
        let a = Report {
            sections: vec![section(calls(&[("read", 1, 10)]))],
            ..Report::default()
        };
        let b = Report {
            sections: vec![section(calls(&[("read", 1, 30)]))],
            ..Report::default()
        };
        let d = diff(&a, &b, 5, DiffBy::Name);
        let t = d.section("syscalls").unwrap().table("calls").unwrap();
        assert_eq!(t.cell(0, "total_change"), Some(&Cell::NsChange(20)));
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(
            json["sections"][0]["tables"][0]["rows"][0]["total_change"],
            20
        );
    }

    /// A build-like trace: `n` processes `cc1` (pids from `first_pid`),
    /// the i-th on CPU for 100 × (i + 1) ns, and one `make` on CPU 1000 ns.
    fn build(first_pid: u64, n: u64) -> Report {
        let mut t = Fxt::new();
        t.process(5, "make").thread(5, 5, "make");
        for i in 0..n {
            let pid = first_pid + 7 * i;
            t.process(pid, "cc1").thread(pid, pid, "cc1");
        }
        let mut ts = 0;
        t.switch(ts, 0, 0, 3, 5);
        ts += 1000;
        let mut prev = 5;
        for i in 0..n {
            let pid = first_pid + 7 * i;
            t.switch(ts, 0, prev, 3, pid);
            ts += 100 * (i + 1);
            prev = pid;
        }
        t.switch(ts, 0, prev, 3, 0);
        t.report(Options {
            sections: vec![SectionId::Cpu, SectionId::Sched],
            top: 3,
            all_rows: true,
            ..Options::default()
        })
    }

    #[test]
    fn processes_of_a_name_are_summed_and_counted_on_each_side() {
        let (a, b) = (build(100, 4), build(3000, 6));
        // A's report keeps every process though --top is 3.
        assert_eq!(
            a.section("cpu")
                .unwrap()
                .table("processes")
                .unwrap()
                .rows
                .len(),
            5
        );
        let d = diff(&a, &b, 3, DiffBy::Name);
        let cpu = d.section("cpu").unwrap();
        let p = cpu.table("processes").unwrap();
        assert_eq!(p.rows.len(), 2, "{p:?}");
        assert_eq!(p.cell(0, "process"), Some(&Cell::Text("cc1".into())));
        assert_eq!(p.cell(0, "processes_a"), Some(&Cell::Count(4)));
        assert_eq!(p.cell(0, "processes_b"), Some(&Cell::Count(6)));
        // 100 + 200 + 300 + 400 against 100 + ... + 600.
        assert_eq!(p.cell(0, "on_cpu_a"), Some(&Cell::Ns(1000)));
        assert_eq!(p.cell(0, "on_cpu_b"), Some(&Cell::Ns(2100)));
        assert_eq!(p.cell(0, "on_cpu_change"), Some(&Cell::NsChange(1100)));
        assert_eq!(p.cell(0, "voluntary_a"), Some(&Cell::Count(4)));
        assert_eq!(p.cell(0, "voluntary_change"), Some(&Cell::Int(2)));
        assert_eq!(p.cell(1, "process"), Some(&Cell::Text("make".into())));
        assert_eq!(p.cell(1, "on_cpu_change"), Some(&Cell::NsChange(0)));
        assert!(p.column("pid").is_none());
        // Threads by process and thread name, counted.
        let th = cpu.table("threads").unwrap();
        assert_eq!(th.cell(0, "thread"), Some(&Cell::Text("cc1".into())));
        assert_eq!(th.cell(0, "threads_a"), Some(&Cell::Count(4)));
        assert_eq!(th.cell(0, "threads_b"), Some(&Cell::Count(6)));
        assert_eq!(th.cell(0, "on_cpu_b"), Some(&Cell::Ns(2100)));
        // The JSON keeps every column.
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["by"], "name");
        let row = &json["sections"][0]["tables"][1]["rows"][0];
        assert_eq!(row["processes_b"], 6);
        assert_eq!(row["migrations_change"], 0);
        // By pid: each process its own row, none matched across the two.
        let d = diff(&a, &b, 100, DiffBy::Pid);
        let p = d.section("cpu").unwrap().table("processes").unwrap();
        assert_eq!(p.rows.len(), 1 + 4 + 6);
        assert!(p.column("pid").is_some() && p.column("processes_a").is_none());
    }

    #[test]
    fn percentiles_of_a_name_are_the_largest_not_the_sum() {
        let mut a = calls(&[("read", 1, 10), ("read", 2, 30)]).per(&["call"], "calls");
        a.peaks = vec![2];
        let b = a.clone();
        let t = table(Some(&a), Some(&b), 10, DiffBy::Name).unwrap();
        assert_eq!(t.cell(0, "total_a"), Some(&Cell::Ns(30)));
        assert_eq!(t.cell(0, "count_a"), Some(&Cell::Count(3)));
        assert!(
            t.notes[0].contains("but for total: the largest"),
            "{:?}",
            t.notes
        );
    }
}
