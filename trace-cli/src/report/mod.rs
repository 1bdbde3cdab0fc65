//! `trace-cli report`: the questions people open a trace to answer, as
//! aligned tables on the terminal (or JSON): CPU time, scheduling latency,
//! system calls, block I/O, memory, interrupts, userspace providers,
//! probes, stack samples and losses; with two files, the change from the
//! first to the second.
//!
//! The files are read as streams, once each (beside a look at the first
//! records of a trace recorded on several machines, which declare them):
//! memory grows with the threads, calls and functions of a trace, not with
//! its length.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use trace_analysis::report::diff::{DiffBy, diff};
use trace_analysis::report::filter::Bound;
use trace_analysis::report::{
    Options, Report, SectionId, Selection, TimeRange, first_timestamp, groups::GroupBy, report,
};

use crate::damage::{DamageArgs, Skipped};

mod machines;
mod render;

use machines::{host_selection, machines};
use render::{output_width, render_diff, render_report};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
