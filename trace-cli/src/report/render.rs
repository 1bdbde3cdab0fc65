//! A report, or the diff of two, as text: each section's tables fitted to
//! the output's width (columns left out in their drop order and named, then
//! cells wrapped), the trace described above them.

use std::fmt::Write as _;
use std::path::Path;

use comfy_table::{CellAlignment, Color, ContentArrangement};
use trace_analysis::report::diff::Diff;
use trace_analysis::report::{Cell, Kind, Report, Section, Table, units};
use unicode_width::UnicodeWidthStr;

use super::machines::machines_of;

/// The width of text output when neither COLUMNS nor a terminal gives one.
const DEFAULT_WIDTH: usize = 100;

/// The narrowest width tables are fitted to.
const MIN_WIDTH: usize = 40;

/// The width to fit the output to: COLUMNS if set, else the terminal's
/// when standard output is one, else [`DEFAULT_WIDTH`].
pub(super) fn output_width() -> usize {
    if let Some(w) = std::env::var("COLUMNS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&w| w > 0)
    {
        return w.max(MIN_WIDTH);
    }
    comfy_table::Table::new()
        .width()
        .map(usize::from)
        .filter(|&w| w > 0)
        .unwrap_or(DEFAULT_WIDTH)
        .max(MIN_WIDTH)
}

/// A comfy-table style: no borders, a line under the header.
const HEADER_LINE: &str = "     ──            ";

/// [`HEADER_LINE`] in ASCII, for files and pipes.
const HEADER_LINE_ASCII: &str = "     --            ";

/// `text` in bold, when colouring.
pub(super) fn bold(text: &str, color: bool) -> String {
    if color {
        format!("\x1b[1m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

pub(super) fn describe(info: &trace_analysis::report::TraceInfo, file: &Path) -> String {
    let mut s = format!(
        "{}: {} in {} records, {} from {} s (CLOCK_BOOTTIME)",
        file.display(),
        units::bytes(info.bytes),
        info.records,
        units::duration(
            info.end_ns
                .unwrap_or(0)
                .saturating_sub(info.start_ns.unwrap_or(0))
        ),
        units::seconds(info.start_ns.unwrap_or(0))
    );
    if let (Some(start), Some(seen)) = (info.start_ns, info.observed_ns)
        && seen.saturating_sub(start) >= 1_000_000
    {
        let _ = write!(
            s,
            " (events from {} s on; spans before it were open when the file began)",
            units::seconds(seen - start)
        );
    }
    if let Some((from, to)) = info.window_ns {
        let start = info.start_ns.unwrap_or(0);
        let _ = write!(
            s,
            "; figures of {}..{} s from its start",
            units::seconds(from.saturating_sub(start)),
            if to == u64::MAX {
                "end".to_owned()
            } else {
                units::seconds(to.saturating_sub(start))
            }
        );
    }
    let providers: Vec<String> = info
        .providers
        .iter()
        .map(|(id, n)| format!("{n} ({id})"))
        .collect();
    if !providers.is_empty() {
        let _ = write!(s, "; providers: {}", providers.join(", "));
    }
    for m in machines_of(file) {
        let _ = write!(s, "\n  {m}");
    }
    for n in &info.notes {
        let _ = write!(s, "\n  {n}");
    }
    s
}

/// `text` wrapped at spaces to lines of at most `width` columns, the
/// first after `first`, the others after `more`; a word longer than a line
/// is cut.
fn wrap(out: &mut String, text: &str, width: usize, first: &str, more: &str) {
    for (n, paragraph) in text.lines().enumerate() {
        let mut line = String::from(if n == 0 { first } else { more });
        let mut empty = true;
        for word in paragraph.split(' ').filter(|w| !w.is_empty()) {
            let sep = usize::from(!empty);
            if !empty && line.width() + sep + word.width() > width {
                out.push_str(line.trim_end());
                out.push('\n');
                line = more.to_owned();
                empty = true;
            }
            if !empty {
                line.push(' ');
            }
            for c in word.chars() {
                let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
                if line.width() + w > width && line.width() > more.width() {
                    out.push_str(&line);
                    out.push('\n');
                    line = more.to_owned();
                }
                line.push(c);
            }
            empty = false;
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

pub(super) fn render_report(r: &Report, file: &Path, color: bool, width: usize) -> String {
    let mut out = String::new();
    wrap(&mut out, &describe(&r.trace, file), width, "", "    ");
    for s in &r.sections {
        render_section(&mut out, s, color, width);
    }
    out
}

pub(super) fn render_diff(d: &Diff, a: &Path, b: &Path, color: bool, width: usize) -> String {
    let mut out = String::new();
    wrap(
        &mut out,
        &format!("A = {}", describe(&d.a, a)),
        width,
        "",
        "    ",
    );
    wrap(
        &mut out,
        &format!("B = {}", describe(&d.b, b)),
        width,
        "",
        "    ",
    );
    for s in &d.sections {
        render_section(&mut out, s, color, width);
    }
    out
}

fn render_section(out: &mut String, s: &Section, color: bool, width: usize) {
    let _ = writeln!(out, "\n{}", bold(&format!("━━ {} ━━", s.title), color));
    for t in &s.tables {
        render_table(out, t, color, width);
    }
    for n in &s.notes {
        wrap(out, n, width, "", "  ");
    }
}

/// A cell as text, as its column's kind says.
fn text(cell: &Cell, kind: Kind) -> String {
    match (cell, kind) {
        (Cell::Empty, _) => String::new(),
        (Cell::Text(s), _) => s.clone(),
        (Cell::Count(v), Kind::Bytes) => units::bytes(*v),
        (Cell::Count(v), _) => v.to_string(),
        (Cell::Int(v), Kind::Change) if *v > 0 => format!("+{v}"),
        (Cell::Int(v), Kind::BytesChange) => units::bytes_change(*v),
        (Cell::Int(v), _) => v.to_string(),
        (Cell::Ns(v), Kind::Time) => v.to_string(),
        (Cell::Ns(v), Kind::Offset) => units::seconds(*v),
        (Cell::Ns(v), _) => units::duration(*v),
        (Cell::NsChange(v), _) => units::duration_change(*v),
        (Cell::Percent(v), _) => format!("{v:.1}"),
        (Cell::Float(v), _) if v.fract() == 0.0 && v.abs() < 1e15 => format!("{v:.0}"),
        (Cell::Float(v), _) => format!("{v:.3}"),
    }
}

/// The widest line of `text`, in terminal columns.
fn widest(text: &str) -> usize {
    text.lines().map(UnicodeWidthStr::width).max().unwrap_or(0)
}

/// Table `t`'s columns `shown` as a comfy-table, wrapping cells to fit
/// `fit` columns when given.
fn comfy(t: &Table, shown: &[usize], color: bool, fit: Option<usize>) -> comfy_table::Table {
    let mut table = comfy_table::Table::new();
    table.load_preset(if color {
        HEADER_LINE
    } else {
        HEADER_LINE_ASCII
    });
    match fit {
        Some(w) => {
            table
                .set_content_arrangement(ContentArrangement::Dynamic)
                .set_width(u16::try_from(w).unwrap_or(u16::MAX));
        }
        None => {
            table.set_content_arrangement(ContentArrangement::Disabled);
        }
    }
    if color {
        table.enforce_styling();
    } else {
        table.force_no_tty();
    }
    table.set_header(shown.iter().map(|&i| {
        let cell = comfy_table::Cell::new(&t.columns[i].title);
        if color {
            cell.add_attribute(comfy_table::Attribute::Bold)
        } else {
            cell
        }
    }));
    for row in &t.rows {
        table.add_row(shown.iter().map(|&i| {
            let (cell, col) = (&row[i], &t.columns[i]);
            let mut c = comfy_table::Cell::new(text(cell, col.kind));
            if col.kind != Kind::Text {
                c = c.set_alignment(CellAlignment::Right);
            }
            if color {
                let change = matches!(
                    col.kind,
                    Kind::Change | Kind::BytesChange | Kind::DurationChange
                ) || col.id.ends_with("_change");
                match cell.number() {
                    Some(v) if change && v > 0.0 => c = c.fg(Color::Red),
                    Some(v) if change && v < 0.0 => c = c.fg(Color::Green),
                    _ if col.id == "bar" => c = c.fg(Color::Cyan),
                    _ => {}
                }
            }
            c
        }));
    }
    table
}

/// The titles of columns `dropped` of `t`, those of a compared column's A,
/// B and change together (`off CPU (A, B, change)`).
fn dropped_names(t: &Table, dropped: &[usize]) -> Vec<String> {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for &i in dropped {
        let title = t.columns[i].title.as_str();
        let (base, part) = match title.rsplit_once(' ') {
            Some((base, part)) if ["A", "B", "change"].contains(&part) => (base, Some(part)),
            _ => (title, None),
        };
        match groups.iter_mut().find(|(b, _)| *b == base) {
            Some((_, parts)) => parts.extend(part),
            None => groups.push((base, part.into_iter().collect())),
        }
    }
    groups
        .into_iter()
        .map(|(base, mut parts)| {
            parts.sort_by_key(|p| ["A", "B", "change"].iter().position(|x| x == p));
            if parts.is_empty() {
                base.to_owned()
            } else {
                format!("{base} ({})", parts.join(", "))
            }
        })
        .collect()
}

/// Table `t` within `width` columns: the columns of its drop order left
/// out, the first first, until it fits (a note says which), then its
/// cells wrapped if it still does not.
fn render_table(out: &mut String, t: &Table, color: bool, width: usize) {
    const INDENT: &str = "  ";
    let _ = writeln!(out);
    let mut title = String::new();
    wrap(&mut title, &t.title, width, "", "  ");
    for line in title.lines() {
        let _ = writeln!(out, "{}", bold(line, color));
    }
    if t.rows.is_empty() {
        let _ = writeln!(out, "{INDENT}(nothing)");
    } else {
        let room = width.saturating_sub(INDENT.len());
        let mut shown: Vec<usize> = (0..t.columns.len()).collect();
        let mut dropped: Vec<usize> = Vec::new();
        let mut order = t.drop_order().into_iter();
        let mut fit = None;
        while widest(&comfy(t, &shown, false, None).to_string()) > room {
            match order.next() {
                Some(i) if shown.len() > 2 => {
                    shown.retain(|&c| c != i);
                    dropped.push(i);
                }
                _ => {
                    fit = Some(room);
                    break;
                }
            }
        }
        for line in comfy(t, &shown, color, fit).to_string().lines() {
            let _ = writeln!(out, "{INDENT}{line}");
        }
        if !dropped.is_empty() {
            let names = dropped_names(t, &dropped);
            wrap(
                out,
                &format!(
                    "(left out to fit {width} columns: {}; --json has every column, COLUMNS=N sets the width)",
                    names.join(", ")
                ),
                width,
                INDENT,
                INDENT,
            );
        }
    }
    if t.omitted > 0 {
        let _ = writeln!(
            out,
            "{INDENT}... {} more rows (--top N shows more)",
            t.omitted
        );
    }
    for n in &t.notes {
        wrap(out, n, width, INDENT, INDENT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_analysis::report::Column;
    use trace_analysis::report::diff::DiffBy;

    #[test]
    fn cells_print_by_kind_and_tables_align() {
        assert_eq!(text(&Cell::Ns(4_050_000), Kind::Duration), "4.05 ms");
        assert_eq!(text(&Cell::Ns(1_500_000_000), Kind::Offset), "1.500000000");
        assert_eq!(text(&Cell::Ns(42), Kind::Time), "42");
        assert_eq!(text(&Cell::Count(4096), Kind::Bytes), "4.00 KiB");
        assert_eq!(text(&Cell::Int(3), Kind::Change), "+3");
        assert_eq!(text(&Cell::Int(1_572_864), Kind::BytesChange), "+1.50 MiB");
        assert_eq!(text(&Cell::Int(-135_168), Kind::BytesChange), "-132 KiB");
        assert_eq!(
            text(&Cell::NsChange(-2_000), Kind::DurationChange),
            "-2.00 µs"
        );
        assert_eq!(text(&Cell::Percent(12.345), Kind::Percent), "12.3");
        assert_eq!(text(&Cell::Float(7.0), Kind::Float), "7");
        let mut t = Table::new(
            "calls",
            "Calls",
            vec![
                Column::new("call", "call", Kind::Text),
                Column::new("total", "total", Kind::Duration),
            ],
        );
        t.push(vec!["getppid".into(), Cell::Ns(1_000)]);
        t.push(vec!["read".into(), Cell::Ns(123_456_789)]);
        let mut out = String::new();
        render_table(&mut out, &t, false, 100);
        assert!(!out.contains('\x1b'), "{out}");
        let lines: Vec<&str> = out.lines().collect();
        let row = |name: &str| *lines.iter().find(|l| l.contains(name)).unwrap();
        // Numbers are right-aligned: the rows end at the same column.
        assert_eq!(
            row("getppid").trim_end().chars().count(),
            row("read").trim_end().chars().count(),
            "{out}"
        );
        assert!(row("read").contains("123 ms"));
        let mut coloured = String::new();
        render_table(&mut coloured, &t, true, 100);
        assert!(coloured.contains('\x1b'));
    }

    /// A thread table as wide as the CPU section's, compared.
    fn wide_diff(name: &str) -> Table {
        let ids = ["on_cpu", "off_cpu", "runnable", "voluntary", "involuntary"];
        let mut columns = vec![
            Column::new("tid", "tid", Kind::Int),
            Column::new("thread", "thread", Kind::Text),
            Column::new("pid", "pid", Kind::Int),
            Column::new("process", "process", Kind::Text),
        ];
        for id in ids {
            columns.push(Column::new(id, id, Kind::Duration));
        }
        let mut t = Table::new("threads", "Threads", columns)
            .diffed(&["process", "thread"], &ids)
            .per(&["pid", "tid"], "threads");
        for i in 0..5u64 {
            let mut row = vec![Cell::Int(i as i64), name.into(), Cell::Int(1), "cc1".into()];
            row.extend(ids.iter().map(|_| Cell::Ns(123_456_789 * (i + 1))));
            t.push(row);
        }
        t.note("a note long enough to need more than one line of a hundred columns, ".repeat(4));
        trace_analysis::report::diff::table(Some(&t), Some(&t), 10, DiffBy::Name).unwrap()
    }

    #[test]
    fn tables_fit_the_width_leaving_out_columns_then_wrapping() {
        for color in [false, true] {
            for (name, width) in [("main", 100), ("main", 60), (&*"long".repeat(40), 100)] {
                let t = wide_diff(name);
                let mut out = String::new();
                render_table(&mut out, &t, color, width);
                let plain: String = if color {
                    // Without the colours' escape sequences.
                    let mut s = String::new();
                    let mut escape = false;
                    for c in out.chars() {
                        match c {
                            '\x1b' => escape = true,
                            'm' if escape => escape = false,
                            _ if escape => {}
                            c => s.push(c),
                        }
                    }
                    s
                } else {
                    out.clone()
                };
                for line in plain.lines() {
                    assert!(
                        line.width() <= width,
                        "{} > {width}: {line}\n{plain}",
                        line.width()
                    );
                }
                // The key and the first compared column stay, the others
                // are named as left out.
                assert!(plain.contains("on_cpu change"), "{plain}");
                assert!(plain.contains("--json has every column"), "{plain}");
                assert!(plain.contains("left out to fit"), "{plain}");
            }
        }
        // A table that fits is shown whole.
        let mut out = String::new();
        let mut t = wide_diff("main");
        t.columns.truncate(5);
        for r in &mut t.rows {
            r.truncate(5);
        }
        render_table(&mut out, &t, false, 200);
        assert!(!out.contains("left out"), "{out}");
    }
}
