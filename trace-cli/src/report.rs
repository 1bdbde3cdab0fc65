//! `trace-cli report`: the questions people open a trace to answer, as
//! aligned tables on the terminal (or JSON): CPU time, scheduling latency,
//! system calls, block I/O, memory, interrupts, userspace providers,
//! probes, stack samples and losses; with two files, the change from the
//! first to the second.
//!
//! The files are read as streams, once each: memory grows with the
//! threads, calls and functions of a trace, not with its length.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use comfy_table::{CellAlignment, Color, ContentArrangement};
use trace_analysis::report::diff::{Diff, DiffBy, diff};
use trace_analysis::report::filter::Bound;
use trace_analysis::report::{
    Cell, HostSelection, Kind, Options, Report, Section, SectionId, Selection, Table, TimeRange,
    first_timestamp, groups::GroupBy, report, units,
};
use unicode_width::UnicodeWidthStr;

use crate::damage::{DamageArgs, Skipped};

/// Arguments of `trace-cli report`.
#[derive(Args)]
pub struct ReportArgs {
    /// The FXT file (`-` for standard input); with a second file, the two
    /// are compared (A the first, B the second), each table's rows sorted
    /// by what changed most, processes and threads matched by name (see
    /// --diff-by).
    #[arg(required = true, num_args = 1..=2, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Sections to show, comma-separated: groups (with --by), cpu, sched,
    /// syscalls, block, memory, irq, userspace, probes, samples, loss
    /// (default: all).
    #[arg(
        long = "section",
        value_name = "LIST",
        value_delimiter = ',',
        value_parser = crate::completions::Suggested(crate::completions::section_names),
        hide_possible_values = true
    )]
    sections: Vec<String>,
    /// Only these processes (repeat the option, or separate pids with
    /// commas).
    #[arg(short = 'p', long = "pid", value_name = "PID", value_delimiter = ',')]
    pids: Vec<u64>,
    /// Only processes or threads whose name matches this pattern (`*`
    /// matches any run of characters).
    #[arg(long, value_name = "GLOB")]
    comm: Option<String>,
    /// Only processes in this cgroup or below it (its path from the cgroup
    /// v2 root, as `record` labelled them: `/system.slice/nginx.service`).
    #[arg(long, value_name = "PATH")]
    cgroup: Option<String>,
    /// Only processes of this container: its name, its id or a prefix of
    /// its id (as `record` labelled them).
    #[arg(long, value_name = "ID|NAME")]
    container: Option<String>,
    /// Only processes of this machine, in a trace recorded on several
    /// (`record --host`): its name.
    #[arg(long, value_name = "NAME")]
    host: Option<String>,
    /// Add the section `groups`: time on CPU, time waiting for a CPU,
    /// wake-up latency and system calls of each container, of each
    /// cgroup, or of each machine of a trace recorded on several.
    #[arg(long, value_name = "BY", value_enum)]
    by: Option<GroupByArg>,
    /// Only this time range: START..END in seconds from the trace's start,
    /// its earliest timestamp, as ui.perfetto.dev counts (`1.5..3`, `2..`,
    /// `..0.5`; from standard input, which is read once, the first
    /// timestamp of the stream), or absolute CLOCK_BOOTTIME nanoseconds
    /// after `@` (`@1234567890..@1334567890`), the file's own timestamps.
    #[arg(long, value_name = "START..END")]
    time: Option<TimeRange>,
    /// Write the report as JSON (durations and times in ns, every column)
    /// instead of tables, which fit the output's width (COLUMNS if set, else
    /// the terminal's, else 100) by leaving out the columns they name.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    damage: DamageArgs,
    /// Rows per table (the busiest, slowest, most changed).
    #[arg(long, value_name = "N", default_value_t = 20)]
    top: usize,
    /// With two files, how processes and threads are matched: `name`, the
    /// rows of a command name (a thread's: its process's and its own)
    /// summed on each side, with how many processes or threads they are;
    /// `pid`, one process (thread) against the same pid (tid) and name,
    /// for two reports of one recording (two --time ranges of one file).
    #[arg(long, value_name = "BY", value_enum)]
    diff_by: Option<DiffByArg>,
    /// Explain why one thing took as long as it did instead of the tables:
    /// `NAME` or `span:NAME` (a userspace duration, the longest unless
    /// --nth), `syscall:NAME` (a system call), `thread:TID` (over
    /// --time), or `task:NAME` (an async span: a `tracing` span polled more
    /// than once, a tokio task, split into its polls and its awaits).
    /// Prints its wall time as running, waiting for a CPU (behind whom) and
    /// blocked (in what), each wait followed to the thread that ended it,
    /// as a tree.
    #[arg(long, value_name = "TARGET", conflicts_with_all = ["sections", "by", "diff_by"])]
    critical_path: Option<trace_analysis::critical_path::Target>,
    /// With --critical-path: the Nth instance of the target in order of
    /// start (1 is the first), not the longest.
    #[arg(long, value_name = "N", requires = "critical_path")]
    nth: Option<usize>,
    /// With --critical-path: follow waits of at least this many
    /// microseconds (default: 1% of the target's time); sum shorter ones.
    #[arg(long, value_name = "US", requires = "critical_path")]
    min_wait_us: Option<u64>,
    /// With --critical-path: how many wake-ups deep to follow waits.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 8,
        requires = "critical_path"
    )]
    depth: usize,
    /// Colour the tables: `auto` on a terminal (unless NO_COLOR is set).
    #[arg(long, value_name = "WHEN", default_value = "auto", value_parser = ["auto", "always", "never"])]
    color: String,
}

/// What `--by` groups processes by.
#[derive(Clone, Copy, ValueEnum)]
enum GroupByArg {
    /// Their container (runtime and name, or id).
    Container,
    /// Their cgroup.
    Cgroup,
    /// Their machine (`record --host`).
    Host,
}

/// How `--diff-by` matches rows.
#[derive(Clone, Copy, ValueEnum)]
enum DiffByArg {
    /// By command name, summed.
    Name,
    /// By pid (tid) and name.
    Pid,
}

/// The width of text output when neither COLUMNS nor a terminal gives one.
const DEFAULT_WIDTH: usize = 100;

/// The narrowest width tables are fitted to.
const MIN_WIDTH: usize = 40;

/// The width to fit the output to: COLUMNS if set, else the terminal's
/// when standard output is one, else [`DEFAULT_WIDTH`].
fn output_width() -> usize {
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

/// The sections named in `names`.
fn sections(names: &[String]) -> Result<Vec<SectionId>> {
    let mut out = Vec::new();
    for n in names {
        let n = n.trim();
        if n == "all" {
            return Ok(Vec::new());
        }
        match SectionId::from_name(n) {
            Some(s) if !out.contains(&s) => out.push(s),
            Some(_) => {}
            None => {
                let known: Vec<&str> = SectionId::ALL.iter().map(|s| s.name()).collect();
                bail!("no section {n:?}; there are: {}", known.join(", "))
            }
        }
    }
    Ok(out)
}

/// Reads the trace at `path` (`-`: standard input) into a report; `host`
/// selects that machine's processes.
fn read(path: &Path, options: &Options, host: Option<&str>, damage: DamageArgs) -> Result<Report> {
    let relative = |b: Option<Bound>| matches!(b, Some(Bound::Relative(_)));
    let time = &options.selection.time;
    let mut options = options.clone();
    if path.as_os_str() != "-" {
        options.machines = machines(path)?;
    }
    if let Some(name) = host {
        options.selection.host = Some(host_selection(name, &options.machines, path)?);
    }
    if (relative(time.start) || relative(time.end)) && path.as_os_str() != "-" {
        // Relative times count from the earliest timestamp, which may come
        // late in the file: one more read of it finds it.
        let file =
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        options.origin =
            first_timestamp(file).with_context(|| format!("reading {}", path.display()))?;
    }
    let r = if path.as_os_str() == "-" {
        report(std::io::stdin().lock(), options.clone()).context("reading standard input")?
    } else {
        let file =
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        report(file, options.clone()).with_context(|| format!("reading {}", path.display()))?
    };
    crate::warn_names_refused(r.trace.names_refused, path);
    damage.warn(
        skipped(&r),
        path,
        r.trace.malformed.first().map(String::as_str),
    );
    Ok(r)
}

pub fn run(args: ReportArgs) -> Result<ExitCode> {
    if args.files.len() == 2 && args.files.iter().all(|f| f.as_os_str() == "-") {
        bail!("only one of the two files can be standard input");
    }
    if args.files.len() == 1 && args.diff_by.is_some() {
        bail!("--diff-by applies to two files compared");
    }
    if let Some(target) = args.critical_path.clone() {
        if args.files.len() == 2 {
            bail!("--critical-path explains one file");
        }
        let mut selection = selection(&args);
        if let Some(name) = &args.host {
            let machines = machines(&args.files[0])?;
            selection.host = Some(host_selection(name, &machines, &args.files[0])?);
        }
        let options = trace_analysis::critical_path::Options {
            target,
            selection,
            nth: args.nth,
            min_wait: args.min_wait_us.map(|us| us.saturating_mul(1000)),
            max_depth: args.depth,
            origin: None,
        };
        let text = crate::critical_path::run(&args.files[0], &options, args.json)?;
        crate::print_all(text.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let by = match args.diff_by {
        Some(DiffByArg::Pid) => DiffBy::Pid,
        Some(DiffByArg::Name) | None => DiffBy::Name,
    };
    let options = Options {
        sections: sections(&args.sections)?,
        selection: selection(&args),
        top: args.top,
        // A diff sums the rows of a name before keeping the top ones.
        all_rows: args.files.len() == 2,
        origin: None,
        group_by: args.by.map(|b| match b {
            GroupByArg::Container => GroupBy::Container,
            GroupByArg::Cgroup => GroupBy::Cgroup,
            GroupByArg::Host => GroupBy::Host,
        }),
        machines: Vec::new(),
    };
    let color = match args.color.as_str() {
        "always" => true,
        "never" => false,
        _ => std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    let width = output_width();
    let host = args.host.as_deref();
    let a = read(&args.files[0], &options, host, args.damage)?;
    let mut skip = skipped(&a);
    let text = match args.files.get(1) {
        None if args.json => json(serde_json::to_string_pretty(&a))?,
        None => render_report(&a, &args.files[0], color, width),
        Some(second) => {
            let b = read(second, &options, host, args.damage)?;
            skip.records += skipped(&b).records;
            let d = diff(&a, &b, args.top, by);
            if args.json {
                json(serde_json::to_string_pretty(&d))?
            } else {
                render_diff(&d, &args.files[0], second, color, width)
            }
        }
    };
    crate::print_all(text.as_bytes())?;
    Ok(args.damage.status(skip))
}

/// The processes, threads and time the arguments select.
fn selection(args: &ReportArgs) -> Selection {
    Selection {
        pids: args.pids.clone(),
        comm: args.comm.clone(),
        time: args.time.unwrap_or_default(),
        cgroup: args.cgroup.clone(),
        container: args.container.clone(),
        // Resolved against each file's machines.
        host: None,
    }
}

/// What reading a report's file skipped.
fn skipped(r: &Report) -> Skipped {
    Skipped {
        records: r.trace.malformed_records,
        packets: 0,
    }
}

/// JSON text and a line end.
fn json(value: serde_json::Result<String>) -> Result<String> {
    let mut s = value.context("writing JSON")?;
    s.push('\n');
    Ok(s)
}

/// `text` in bold, when colouring.
fn bold(text: &str, color: bool) -> String {
    if color {
        format!("\x1b[1m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

fn describe(info: &trace_analysis::report::TraceInfo, file: &Path) -> String {
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

/// The machines of the trace at `path`, if it was recorded on several
/// (`record --host`); none for one (or standard input, which is read once).
fn machines(path: &Path) -> Result<Vec<trace_hosts::Machine>> {
    if path.as_os_str() == "-" {
        return Ok(Vec::new());
    }
    let f = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    Ok(trace_hosts::read_machines(std::io::BufReader::new(f)))
}

/// The machine named `name` among `machines`, those of the trace at
/// `path`; an error that names them when there is none of that name.
fn host_selection(
    name: &str,
    machines: &[trace_hosts::Machine],
    path: &Path,
) -> Result<HostSelection> {
    if path.as_os_str() == "-" {
        bail!("--host reads the trace's machines first: give a file, not standard input");
    }
    let Some(m) = machines.iter().find(|m| m.name == name) else {
        if machines.is_empty() {
            bail!(
                "{} was recorded on one machine (without --host): there is no host {name:?}",
                path.display()
            );
        }
        let names: Vec<&str> = machines.iter().map(|m| m.name.as_str()).collect();
        bail!(
            "{} has no host {name:?}; its machines: {}",
            path.display(),
            names.join(", ")
        );
    };
    Ok(HostSelection {
        name: m.name.clone(),
        index: m.index,
        machines: machines.len() as u32,
    })
}

/// A line per machine of a trace recorded on several (`record --host`):
/// which CPUs and ids are its, and how well its clock is known.
fn machines_of(file: &Path) -> Vec<String> {
    machines(file)
        .unwrap_or_default()
        .iter()
        .map(|m| {
            let cpus = format!("CPUs {}-{}", m.cpu_base, m.cpu_base + m.cpus.max(1) - 1);
            if m.index == 0 {
                format!(
                    "machine {} (the recording one): {cpus}, pids as they are",
                    m.name
                )
            } else {
                let map = trace_hosts::ClockMap::new(m.clock.clone());
                format!(
                    "machine {} ({}): {cpus}, pids {}+N, clock mapped within {}",
                    m.name,
                    m.destination,
                    m.ids().pid_base(),
                    if map.is_empty() {
                        "(unknown)".to_owned()
                    } else {
                        units::duration(map.bound_ns())
                    }
                )
            }
        })
        .collect()
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

fn render_report(r: &Report, file: &Path, color: bool, width: usize) -> String {
    let mut out = String::new();
    wrap(&mut out, &describe(&r.trace, file), width, "", "    ");
    for s in &r.sections {
        render_section(&mut out, s, color, width);
    }
    out
}

fn render_diff(d: &Diff, a: &Path, b: &Path, color: bool, width: usize) -> String {
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

    #[test]
    fn sections_are_named() {
        assert_eq!(
            sections(&["sched".into(), "cpu".into(), "sched".into()]).unwrap(),
            vec![SectionId::Sched, SectionId::Cpu]
        );
        assert!(sections(&["all".into()]).unwrap().is_empty());
        let e = sections(&["cpus".into()]).unwrap_err().to_string();
        assert!(
            e.contains("no section \"cpus\"") && e.contains("syscalls"),
            "{e}"
        );
    }

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
