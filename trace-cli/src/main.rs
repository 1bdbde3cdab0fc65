//! `trace-cli`: record what the kernel and instrumented programs did into one
//! Fuchsia Trace Format file, and inspect or convert such files.

mod categories;
mod check;
mod completions;
mod convert;
mod critical_path;
mod damage;
mod doctor;
mod dump;
mod events;
mod export;
mod flamegraph;
mod hosts;
mod providers;
mod query;
mod record;
mod records;
mod report;
mod samples;
mod snapshot;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// What `--version` prints: the version, the commit it was built from and
/// the optional features built in (see build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("TRACE_CLI_COMMIT"),
    "; features: ",
    env!("TRACE_CLI_FEATURES"),
    ")"
);

/// Record and inspect Fuchsia Trace Format (FXT) traces on Linux.
#[derive(Parser)]
#[command(name = "trace-cli", version = VERSION, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Record a trace (through the trace-manager daemon if one runs: root or
    /// the `tracing` group; else needs root, or CAP_BPF and CAP_PERFMON).
    Record(Box<record::RecordArgs>),
    /// Write what the daemon's flight recorder holds now (the last
    /// `--window` of events) to a complete trace file, without stopping it;
    /// without a flight recorder, what a recording in the circular mode
    /// keeps now.
    Snapshot(snapshot::SnapshotArgs),
    /// List the sessions the daemon runs: its flight recorder and the
    /// recording of a client.
    Sessions(snapshot::SessionsArgs),
    /// Check what this kernel and machine allow a recording (BTF, tracefs,
    /// the eBPF programs, uprobes, perf events, lockdown, kernel symbols,
    /// cgroup v2, the daemon and the caller's rights), and say which
    /// categories and options therefore work.
    Doctor(doctor::DoctorArgs),
    /// List the userspace providers that register with a manager.
    Providers(providers::ProvidersArgs),
    /// List the categories `record -c` can select, with what each records.
    Categories(categories::CategoriesArgs),
    /// List the kernel tracepoints `record -e` can select, with their fields.
    Events(events::EventsArgs),
    /// Print every record of a trace file, one per line; stack samples as
    /// `perf script` prints them, a line for the sample and then one per
    /// frame, leaf first.
    Dump(dump::DumpArgs),
    /// Convert a trace file to Chrome trace-event JSON (stack samples as its
    /// `stackFrames` and `samples`).
    Convert(convert::ConvertArgs),
    /// Draw the stack samples of a trace file as a flame graph (an SVG to
    /// open in a browser), or write them as folded stacks: the CPU profile
    /// by default, or where threads blocked (`--offcpu`), what woke them
    /// (`--wakeup`), or a probe's calling stacks (`--timebase`).
    Flamegraph(flamegraph::FlamegraphArgs),
    /// Answer the usual questions about a trace file as tables: CPU time,
    /// scheduling latency, system calls, block I/O, memory, interrupts,
    /// userspace durations and counters, probes, stack samples, losses;
    /// with two files, what changed from the first to the second.
    Report(report::ReportArgs),
    /// Check a trace file as Perfetto's importer reads it: what it imports,
    /// what it ignores, and every record it would lose or draw wrongly
    /// (exit status 1 when there are such violations).
    Check(check::CheckArgs),
    /// Run SQL over the tables of a trace file, or of a directory of
    /// Parquet exports (processes, threads, slices, instants, counters,
    /// async spans, context switches, wake-ups, system calls, block
    /// requests, samples, losses; docs/SQL.md): the SQL given, or
    /// statements read from an interactive prompt.
    Query(query::QueryArgs),
    /// Write the SQL tables of trace files as Parquet
    /// (`DIR/<table>/<trace id>.parquet`), for `query` over a directory of
    /// many traces or for any engine that reads Parquet.
    Export(export::ExportArgs),
    /// Print a shell completion script (e.g. `trace-cli completions bash >
    /// /etc/bash_completion.d/trace-cli`): subcommands, options, categories
    /// and report sections; in bash also the tracepoint names of `record
    /// -e`, read from the running kernel when completing.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// The clock of this machine, for `record --host` on another machine
    /// (an ssh session's standard input and output).
    #[command(hide = true)]
    ClockServer,
    /// Print the manual page, in roff (e.g. `trace-cli man | man -l -`).
    Man {
        /// Write one page per command into this folder instead
        /// (`trace-cli.1`, `trace-cli-record.1`, ...), as a package installs
        /// them.
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
}

/// The trace file `path`, or standard input for `-`, to be read as a
/// stream ([`trace_common::fxt::stream::RecordStream`]).
fn open_trace(path: &std::path::Path) -> anyhow::Result<Box<dyn std::io::Read>> {
    use anyhow::Context as _;
    if path.as_os_str() == "-" {
        return Ok(Box::new(std::io::stdin().lock()));
    }
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(Box::new(file))
}

/// Writes the manual page of `trace-cli` and of each of its commands: to
/// standard output, or one file per page into `dir`.
fn man(dir: Option<&std::path::Path>) -> anyhow::Result<ExitCode> {
    use anyhow::Context as _;
    let cmd = Cli::command();
    let mut pages = vec![("trace-cli".to_owned(), cmd.clone())];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("trace-cli-{}", sub.get_name());
        pages.push((name.clone(), sub.clone().display_name(name)));
    }
    let mut all = Vec::new();
    for (name, page) in pages {
        let mut roff = Vec::new();
        clap_mangen::Man::new(page).render(&mut roff)?;
        match dir {
            Some(dir) => {
                let path = dir.join(format!("{name}.1"));
                std::fs::write(&path, roff)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            None => all.extend(roff),
        }
    }
    if dir.is_some() {
        return Ok(ExitCode::SUCCESS);
    }
    print_all(&all)
}

/// Writes `bytes` to standard output; a reader that went away (`| head`)
/// is no error.
fn print_all(bytes: &[u8]) -> anyhow::Result<ExitCode> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// Why `command` cannot run in a build without the `sql` feature, and how
/// to get it.
#[cfg(not(feature = "sql"))]
fn without_sql(command: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "`trace-cli {command}` needs the SQL engine (DataFusion), which this trace-cli was built \
         without (`cargo xtask record` leaves it out to build in minutes): build the full binary \
         with `cargo build --release -p trace-cli` (the `sql` feature is on by default; about 20 \
         more minutes on 2 cores), or install the Debian package"
    )
}

/// Warns that the trace `what` has more distinct names than are kept, when
/// `refused` of them were not.
fn warn_names_refused(refused: u64, what: &std::path::Path) {
    if refused > 0 {
        eprintln!(
            "trace-cli: {} has more distinct names than are kept: {refused} read as \"{}\" and their rows are merged",
            what.display(),
            trace_analysis::strings::TOO_MANY_TEXT
        );
    }
}

fn main() -> ExitCode {
    // A command started by `record`, waiting to become itself.
    if let Some(fd) = std::env::var_os(record::RELEASE_FD_ENV) {
        let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        return record::wait_and_exec(&fd.to_string_lossy(), &args);
    }
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .format_timestamp(None)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Record(args) => record::run(*args),
        Command::Dump(args) => dump::run(args),
        Command::Providers(args) => providers::run(args),
        Command::Snapshot(args) => snapshot::snapshot(args),
        Command::Sessions(args) => snapshot::sessions(args),
        Command::Convert(args) => convert::run(args),
        Command::Flamegraph(args) => flamegraph::run(args),
        Command::Check(args) => check::run(args),
        Command::Report(args) => report::run(args),
        Command::Categories(args) => categories::run(args),
        Command::Events(args) => events::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Query(args) => query::run(args),
        Command::Export(args) => export::run(args),
        Command::Completions { shell } => {
            print_all(&completions::script(shell, &mut Cli::command()))
        }
        Command::Man { dir } => man(dir.as_deref()),
        Command::ClockServer => hosts::clock_server(),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("trace-cli: {e:#}");
            ExitCode::FAILURE
        }
    }
}
