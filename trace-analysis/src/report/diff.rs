//! Two reports compared: each table that names its rows (its key columns)
//! becomes a table of the rows of either trace, with the compared values
//! of both (A and B) and their change, sorted by the largest change of
//! the first compared column.

use std::collections::HashMap;

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
    /// The compared sections, in the order of A's.
    pub sections: Vec<Section>,
}

impl Diff {
    /// The section `id`.
    pub fn section(&self, id: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.id == id)
    }
}

/// The text naming a row by `key` columns; numbers as text.
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

/// Rows of `t` by their key; repeated keys get ` #2`, ` #3`, ... on their
/// last key column, in the order of the rows.
fn keyed(t: &Table) -> Vec<(Vec<String>, &Vec<Cell>)> {
    let mut seen: HashMap<Vec<String>, usize> = HashMap::new();
    t.rows
        .iter()
        .map(|row| {
            let mut key: Vec<String> = t.key.iter().map(|&i| key_text(&row[i])).collect();
            let n = seen.entry(key.clone()).or_default();
            *n += 1;
            if *n > 1
                && let Some(last) = key.last_mut()
            {
                last.push_str(&format!(" #{n}"));
            }
            (key, row)
        })
        .collect()
}

/// A row's key and its rows in A and B.
type Pair<'a> = (Vec<String>, Option<&'a Vec<Cell>>, Option<&'a Vec<Cell>>);

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

/// Table `a` (or `b`, when only B has it) compared with `b`; `None` for a
/// table that does not name its rows.
pub fn table(a: Option<&Table>, b: Option<&Table>, top: usize) -> Option<Table> {
    let shape = a.or(b)?;
    if shape.key.is_empty() || shape.compare.is_empty() {
        return None;
    }
    let mut columns: Vec<Column> = shape
        .key
        .iter()
        .map(|&i| shape.columns[i].clone())
        .collect();
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
    let nkey = shape.key.len();
    out.key = (0..nkey).collect();
    out.compare = (0..shape.compare.len()).map(|j| nkey + 3 * j + 2).collect();

    let rows_a = a.map(keyed).unwrap_or_default();
    let rows_b = b.map(keyed).unwrap_or_default();
    let index_b: HashMap<&Vec<String>, usize> = rows_b
        .iter()
        .enumerate()
        .map(|(i, (k, _))| (k, i))
        .collect();
    let mut used_b = vec![false; rows_b.len()];
    let mut pairs: Vec<Pair<'_>> = Vec::new();
    for (k, row) in &rows_a {
        let other = index_b.get(k).map(|&i| {
            used_b[i] = true;
            rows_b[i].1
        });
        pairs.push((k.clone(), Some(*row), other));
    }
    for (i, (k, row)) in rows_b.iter().enumerate() {
        if !used_b[i] {
            pairs.push((k.clone(), None, Some(*row)));
        }
    }
    let source_compare = |t: Option<&Table>, id: &str| t.and_then(|t| t.column(id));
    let mut rows: Vec<(f64, Vec<String>, Vec<Cell>)> = pairs
        .into_iter()
        .map(|(key, ra, rb)| {
            let mut cells: Vec<Cell> = key.iter().map(|k| Cell::Text(k.clone())).collect();
            let mut first = 0.0;
            for (j, &i) in shape.compare.iter().enumerate() {
                let c = &shape.columns[i];
                let va = ra.and_then(|r| source_compare(a, &c.id).and_then(|i| r.get(i)));
                let vb = rb.and_then(|r| source_compare(b, &c.id).and_then(|i| r.get(i)));
                let ch = change(c.kind, va, vb);
                if j == 0 {
                    first = ch.number().unwrap_or(0.0).abs();
                }
                cells.push(va.cloned().unwrap_or(Cell::Empty));
                cells.push(vb.cloned().unwrap_or(Cell::Empty));
                cells.push(ch);
            }
            (first, key, cells)
        })
        .collect();
    rows.sort_by(|x, y| y.0.total_cmp(&x.0).then_with(|| x.1.cmp(&y.1)));
    for (_, _, cells) in rows {
        out.push(cells);
    }
    out.truncate(top);
    out.note(format!(
        "Rows are matched by {} and sorted by the largest change of {}; a row missing from one trace counts as zero there.",
        shape.key.iter().map(|&i| shape.columns[i].title.as_str()).collect::<Vec<_>>().join(", "),
        shape.columns[shape.compare[0]].title
    ));
    Some(out)
}

/// Report `a` compared with report `b`, `top` rows per table.
pub fn diff(a: &Report, b: &Report, top: usize) -> Diff {
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
            if let Some(t) = table(ta, tb, top) {
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
        sections,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let t = table(Some(&a), Some(&b), 10).unwrap();
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
        // Repeated keys are told apart; unkeyed tables are not compared.
        let dup = calls(&[("x", 1, 5), ("x", 1, 7)]);
        let t = table(Some(&dup), Some(&dup), 10).unwrap();
        assert_eq!(t.rows.len(), 2);
        assert!(t.rows.iter().any(|r| r[0] == Cell::Text("x #2".into())));
        let plain = Table::new("h", "h", vec![Column::new("n", "n", Kind::Count)]);
        assert!(table(Some(&plain), None, 10).is_none());
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
        let t = table(Some(&a), Some(&b), 10).unwrap();
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
        let d = diff(&a, &b, 5);
        let t = d.section("syscalls").unwrap().table("calls").unwrap();
        assert_eq!(t.cell(0, "total_change"), Some(&Cell::NsChange(20)));
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(
            json["sections"][0]["tables"][0]["rows"][0]["total_change"],
            20
        );
    }
}
