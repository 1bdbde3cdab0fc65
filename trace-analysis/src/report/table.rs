//! The neutral form every report section is given in: titled tables of
//! typed cells, with notes, which a terminal renderer, a JSON writer or a
//! diff can each take as they need.

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};

/// What a column holds, and so how its cells are printed and compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Words.
    Text,
    /// An exact count.
    Count,
    /// A signed integer (an id, a number that is not a count).
    Int,
    /// A duration, ns.
    Duration,
    /// A signed change of a duration, ns.
    DurationChange,
    /// An absolute time, CLOCK_BOOTTIME ns.
    Time,
    /// A time from the start of the trace, ns.
    Offset,
    /// A percentage (0 to 100).
    Percent,
    /// A number of bytes.
    Bytes,
    /// A signed change of a count.
    Change,
    /// A signed change of a number of bytes.
    BytesChange,
    /// A number (a counter's value).
    Float,
}

impl Kind {
    /// The unit of the column's JSON values, if it has one.
    pub fn unit(self) -> Option<&'static str> {
        match self {
            Kind::Duration | Kind::DurationChange | Kind::Time | Kind::Offset => Some("ns"),
            Kind::Percent => Some("%"),
            Kind::Bytes | Kind::BytesChange => Some("bytes"),
            Kind::Text | Kind::Count | Kind::Int | Kind::Change | Kind::Float => None,
        }
    }
}

/// A column of a table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Column {
    /// Its name in JSON (`snake_case`, unique in the table).
    pub id: String,
    /// Its heading on a terminal.
    pub title: String,
    /// What it holds.
    pub kind: Kind,
}

impl Column {
    /// A column `id` headed `title` of `kind`.
    pub fn new(id: &str, title: &str, kind: Kind) -> Self {
        Column {
            id: id.to_owned(),
            title: title.to_owned(),
            kind,
        }
    }
}

/// One value of a row.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// Nothing to say (no samples, not known).
    Empty,
    /// Words.
    Text(String),
    /// An exact count, or bytes.
    Count(u64),
    /// A signed integer, or a signed change.
    Int(i64),
    /// A duration or a time, ns.
    Ns(u64),
    /// A signed change of a duration, ns.
    NsChange(i64),
    /// A percentage.
    Percent(f64),
    /// A number.
    Float(f64),
}

impl Cell {
    /// The cell as a number, for sorting and comparing.
    pub fn number(&self) -> Option<f64> {
        match *self {
            Cell::Count(v) | Cell::Ns(v) => Some(v as f64),
            Cell::Int(v) | Cell::NsChange(v) => Some(v as f64),
            Cell::Percent(v) | Cell::Float(v) => Some(v),
            Cell::Empty | Cell::Text(_) => None,
        }
    }

    /// The cell as an exact integer, when it is one.
    pub fn integer(&self) -> Option<i128> {
        match *self {
            Cell::Count(v) | Cell::Ns(v) => Some(i128::from(v)),
            Cell::Int(v) | Cell::NsChange(v) => Some(i128::from(v)),
            _ => None,
        }
    }

    /// The text of a text cell.
    pub fn text(&self) -> Option<&str> {
        match self {
            Cell::Text(s) => Some(s),
            _ => None,
        }
    }
}

impl From<&str> for Cell {
    fn from(s: &str) -> Self {
        Cell::Text(s.to_owned())
    }
}

impl From<String> for Cell {
    fn from(s: String) -> Self {
        Cell::Text(s)
    }
}

impl Serialize for Cell {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Cell::Empty => s.serialize_none(),
            Cell::Text(t) => s.serialize_str(t),
            Cell::Count(v) | Cell::Ns(v) => s.serialize_u64(*v),
            Cell::Int(v) | Cell::NsChange(v) => s.serialize_i64(*v),
            Cell::Percent(v) => s.serialize_f64((v * 1000.0).round() / 1000.0),
            Cell::Float(v) => s.serialize_f64(*v),
        }
    }
}

/// A table of a report section.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// Its name in JSON, unique in the report (`syscalls`, ...).
    pub id: String,
    /// Its heading on a terminal.
    pub title: String,
    /// Its columns.
    pub columns: Vec<Column>,
    /// Its rows, each with a cell per column.
    pub rows: Vec<Vec<Cell>>,
    /// The columns that name a row: a diff matches rows of two traces by
    /// them. Empty for a table that is not compared.
    pub key: Vec<usize>,
    /// The columns a diff compares, the first the one it sorts by.
    pub compare: Vec<usize>,
    /// The columns naming one instance of a row's key (a process's pid, a
    /// thread's tid): a diff by name sums the rows of a key over them, a
    /// diff by pid matches rows by them too.
    pub instance: Vec<usize>,
    /// What one instance is called in a diff's count of them
    /// (`processes`, `threads`).
    pub instance_name: String,
    /// The compared columns whose rows combine by their largest value, not
    /// their sum (percentiles, maxima, peaks).
    pub peaks: Vec<usize>,
    /// The columns a narrow terminal leaves out first, in that order.
    /// Empty: the columns neither naming a row nor compared first, from
    /// the last.
    pub optional: Vec<usize>,
    /// What to know to read the figures.
    pub notes: Vec<String>,
    /// Rows left out (beyond `--top`).
    pub omitted: usize,
}

impl Table {
    /// An empty table `id` headed `title` with `columns`.
    pub fn new(id: &str, title: &str, columns: Vec<Column>) -> Self {
        Table {
            id: id.to_owned(),
            title: title.to_owned(),
            columns,
            ..Table::default()
        }
    }

    /// Names its key columns and the columns a diff compares (by id;
    /// unknown ids are ignored).
    pub fn diffed(mut self, key: &[&str], compare: &[&str]) -> Self {
        self.key = key.iter().filter_map(|k| self.column(k)).collect();
        self.compare = compare.iter().filter_map(|k| self.column(k)).collect();
        self
    }

    /// Names the columns telling apart instances of one key (see
    /// [`Table::instance`]) and what an instance is called.
    pub fn per(mut self, instance: &[&str], name: &str) -> Self {
        self.instance = instance.iter().filter_map(|k| self.column(k)).collect();
        self.instance_name = name.to_owned();
        self
    }

    /// Names the compared columns that combine by their largest value.
    pub fn peaks(mut self, peaks: &[&str]) -> Self {
        self.peaks = peaks.iter().filter_map(|k| self.column(k)).collect();
        self
    }

    /// The columns a narrow terminal may leave out, the first first: the
    /// `optional` ones if set, else every column neither in the key nor
    /// compared first, the columns not compared from the last, then the
    /// compared ones from the last.
    pub fn drop_order(&self) -> Vec<usize> {
        if !self.optional.is_empty() {
            return self.optional.clone();
        }
        let kept = |i: &usize| !self.key.contains(i) && self.compare.first() != Some(i);
        let mut order: Vec<usize> = (0..self.columns.len())
            .rev()
            .filter(|i| kept(i) && !self.compare.contains(i))
            .collect();
        order.extend(self.compare.iter().rev().filter(|i| kept(i)));
        order
    }

    /// The index of column `id`.
    pub fn column(&self, id: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.id == id)
    }

    /// Adds a row (cells missing at its end are empty, extra ones dropped).
    pub fn push(&mut self, mut row: Vec<Cell>) {
        row.resize(self.columns.len(), Cell::Empty);
        self.rows.push(row);
    }

    /// Keeps the first `n` rows, counting the rest as omitted.
    pub fn truncate(&mut self, n: usize) {
        if self.rows.len() > n {
            self.omitted += self.rows.len() - n;
            self.rows.truncate(n);
        }
    }

    /// Adds a note.
    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// The cell of `row` in column `id`.
    pub fn cell(&self, row: usize, id: &str) -> Option<&Cell> {
        self.rows.get(row)?.get(self.column(id)?)
    }
}

/// One row, as a JSON object of column id to value.
struct Row<'a>(&'a [Column], &'a [Cell]);

impl Serialize for Row<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (c, v) in self.0.iter().zip(self.1) {
            m.serialize_entry(&c.id, v)?;
        }
        m.end()
    }
}

/// A column in JSON, with its unit.
#[derive(Serialize)]
struct ColumnJson<'a> {
    id: &'a str,
    title: &'a str,
    kind: Kind,
    #[serde(skip_serializing_if = "Option::is_none")]
    unit: Option<&'static str>,
}

impl Serialize for Table {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_struct("Table", 7)?;
        t.serialize_field("id", &self.id)?;
        t.serialize_field("title", &self.title)?;
        let columns: Vec<ColumnJson<'_>> = self
            .columns
            .iter()
            .map(|c| ColumnJson {
                id: &c.id,
                title: &c.title,
                kind: c.kind,
                unit: c.kind.unit(),
            })
            .collect();
        t.serialize_field("columns", &columns)?;
        let key: Vec<&str> = self.key.iter().map(|&i| &*self.columns[i].id).collect();
        t.serialize_field("key", &key)?;
        let rows: Vec<Row<'_>> = self.rows.iter().map(|r| Row(&self.columns, r)).collect();
        t.serialize_field("rows", &rows)?;
        t.serialize_field("omitted", &self.omitted)?;
        t.serialize_field("notes", &self.notes)?;
        t.end()
    }
}

/// A section of a report: the tables answering one question.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Section {
    /// Its name (`cpu`, `sched`, ...), as `--section` takes it.
    pub id: String,
    /// Its heading.
    pub title: String,
    /// Its tables.
    pub tables: Vec<Table>,
    /// What to know to read them (what the trace lacked, what was lost).
    pub notes: Vec<String>,
}

impl Section {
    /// An empty section.
    pub fn new(id: &str, title: &str) -> Self {
        Section {
            id: id.to_owned(),
            title: title.to_owned(),
            ..Section::default()
        }
    }

    /// The table `id`.
    pub fn table(&self, id: &str) -> Option<&Table> {
        self.tables.iter().find(|t| t.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_json_objects_by_column_id() {
        let mut t = Table::new(
            "calls",
            "Calls",
            vec![
                Column::new("call", "call", Kind::Text),
                Column::new("count", "count", Kind::Count),
                Column::new("total", "total", Kind::Duration),
            ],
        )
        .diffed(&["call"], &["total", "count", "nothing"]);
        t.push(vec!["read".into(), Cell::Count(3), Cell::Ns(1500)]);
        t.push(vec!["write".into()]);
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(json["rows"][0]["call"], "read");
        assert_eq!(json["rows"][0]["total"], 1500);
        assert!(json["rows"][1]["count"].is_null());
        assert_eq!(json["columns"][2]["unit"], "ns");
        assert_eq!(json["key"][0], "call");
        assert_eq!(t.compare, vec![2, 1]);
        t.truncate(1);
        assert_eq!((t.rows.len(), t.omitted), (1, 1));
        assert_eq!(t.cell(0, "count"), Some(&Cell::Count(3)));
    }
}
