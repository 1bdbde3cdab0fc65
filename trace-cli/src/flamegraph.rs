//! `trace-cli flamegraph`: the stack samples of a trace file as a flame
//! graph (an interactive SVG, drawn by `inferno`) or as folded stacks.
//!
//! Folded stacks are what `stackcollapse-perf.pl` and
//! `inferno-collapse-perf` write, and what `flamegraph.pl` and
//! `inferno-flamegraph` read: one line per distinct stack, its frames root
//! first and joined by `;`, then a space and its count. The first frame is
//! the process's name (the `comm` of `perf script`), so that each process
//! is a tower of its own.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use inferno::flamegraph::color::{BasicPalette, MultiPalette, Palette};
use trace_common::category::glob_matches;
use trace_perfetto::DecodedSample;

use crate::damage::{DamageArgs, Skipped};
use crate::samples::{self, CPU_CLOCK, Names, OFF_CPU, Scan, WAKEUP};

/// Arguments of `trace-cli flamegraph`.
#[derive(Args)]
pub struct FlamegraphArgs {
    /// The FXT file (`-` for standard input).
    file: PathBuf,
    /// Only samples of these processes (repeat the option, or separate
    /// pids with commas).
    #[arg(short = 'p', long = "pid", value_name = "PID", value_delimiter = ',')]
    pids: Vec<u32>,
    /// Only samples of these threads (with `--pid` too, a sample must match
    /// both).
    #[arg(long = "tid", value_name = "TID", value_delimiter = ',')]
    tids: Vec<u32>,
    /// Where threads blocked (timebase "off-cpu"), weighted by the time they
    /// spent off CPU.
    #[arg(long, group = "which")]
    offcpu: bool,
    /// The stacks that woke blocked threads (timebase "wakeup"), weighted
    /// by how long the woken threads had been blocked.
    #[arg(long, group = "which")]
    wakeup: bool,
    /// Samples of this timebase (default "cpu-clock", the CPU profile): a
    /// name as `dump` shows it ("uprobe:malloc", "syscall:read",
    /// "tracepoint:sched:sched_switch", ...) or a pattern with `*`
    /// ("uprobe:*").
    #[arg(long, value_name = "NAME", group = "which")]
    timebase: Option<String>,
    /// Write folded stacks (`stack count` lines, for `flamegraph.pl` or
    /// `inferno-flamegraph`) instead of an SVG; to standard output without
    /// `-o`.
    #[arg(long)]
    folded: bool,
    /// Where to write (`-` for standard output; default `flamegraph.svg`,
    /// or standard output with `--folded`).
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    #[command(flatten)]
    damage: DamageArgs,
}

impl FlamegraphArgs {
    fn pattern(&self) -> &str {
        if self.offcpu {
            OFF_CPU
        } else if self.wakeup {
            WAKEUP
        } else {
            self.timebase.as_deref().unwrap_or(CPU_CLOCK)
        }
    }
}

/// Which samples go into a flame graph.
#[derive(Clone, Copy)]
pub struct Selection<'a> {
    /// The timebase: a name, or a pattern with `*`.
    pub timebase: &'a str,
    /// Only these processes, if any are given.
    pub pids: &'a [u32],
    /// Only these threads, if any are given.
    pub tids: &'a [u32],
}

impl Selection<'_> {
    fn timebase_matches(&self, s: &DecodedSample) -> bool {
        glob_matches(self.timebase, &s.timebase)
    }

    fn thread_matches(&self, s: &DecodedSample) -> bool {
        (self.pids.is_empty() || self.pids.contains(&s.pid))
            && (self.tids.is_empty() || self.tids.contains(&s.tid))
    }
}

/// Samples being folded, before the processes are named.
pub struct Folder<'a> {
    selection: Selection<'a>,
    /// Per (pid, tid), per stack below the root frame: (samples, ns).
    stacks: HashMap<(u32, u32), HashMap<String, (u64, u64)>>,
    /// Whether every sample selected is of a timebase counted in ns.
    all_ns: bool,
    /// Samples of the timebase by process, whatever the pid and tid filters.
    by_pid: BTreeMap<u32, u64>,
    /// Scratch: the stack being folded.
    stack: String,
}

impl<'a> Folder<'a> {
    /// Folds the samples `selection` selects.
    pub fn new(selection: Selection<'a>) -> Self {
        Folder {
            selection,
            stacks: HashMap::new(),
            all_ns: true,
            by_pid: BTreeMap::new(),
            stack: String::new(),
        }
    }

    /// Adds `s` if it is selected.
    pub fn add(&mut self, s: &DecodedSample) {
        if !self.selection.timebase_matches(s) {
            return;
        }
        *self.by_pid.entry(s.pid).or_default() += 1;
        if !self.selection.thread_matches(s) {
            return;
        }
        self.all_ns &= samples::counts_ns(&s.timebase);
        self.stack.clear();
        for frame in s.frames.iter().rev() {
            self.stack.push(';');
            self.stack.push_str(&samples::frame_name(frame));
        }
        let stacks = self.stacks.entry((s.pid, s.tid)).or_default();
        let counts = match stacks.get_mut(self.stack.as_str()) {
            Some(c) => c,
            None => stacks.entry(self.stack.clone()).or_default(),
        };
        // Weights come from the file: they saturate rather than wrap.
        counts.0 += 1;
        counts.1 = counts.1.saturating_add(samples::weight(s));
    }

    /// The folded stacks, each under its process's name. When every
    /// selected sample is of a timebase counted in ns ("off-cpu", "wakeup"),
    /// each weighs its count; otherwise each counts 1.
    pub fn finish(self, names: &Names) -> Folded {
        let ns = self.all_ns && !self.stacks.is_empty();
        let mut folded = Folded {
            ns,
            ..Folded::default()
        };
        for ((pid, tid), stacks) in self.stacks {
            let root = names.root(pid, tid);
            for (stack, (n, weight)) in stacks {
                let w = if ns { weight } else { n };
                folded.samples += n;
                folded.total = folded.total.saturating_add(w);
                let at = folded.stacks.entry(format!("{root}{stack}")).or_default();
                *at = at.saturating_add(w);
            }
        }
        folded
    }
}

/// Samples folded into stacks.
#[derive(Debug, Default, PartialEq)]
pub struct Folded {
    /// Each stack (root first, `;`-joined, the process name first) and its
    /// count, in the stacks' order.
    pub stacks: BTreeMap<String, u64>,
    /// Samples folded.
    pub samples: u64,
    /// The sum of the counts.
    pub total: u64,
    /// Whether the counts are ns (every timebase folded is counted in ns)
    /// rather than samples.
    pub ns: bool,
}

impl Folded {
    /// The folded text: one `stack count` line per stack with a count.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (stack, n) in &self.stacks {
            if *n > 0 {
                let _ = writeln!(out, "{stack} {n}");
            }
        }
        out
    }
}

/// `100 "spin"`: a pid and its process's name, if known.
fn describe_pid(names: &Names, pid: u32) -> String {
    match names.process(pid) {
        Some(n) => format!("{pid} {n:?}"),
        None => pid.to_string(),
    }
}

/// Why nothing was selected, with what the file has instead: the samples of
/// each timebase, or of the timebase by process (`by_pid`).
fn nothing_selected(
    file: &Path,
    scan: &Scan,
    timebase: &str,
    by_pid: &BTreeMap<u32, u64>,
) -> anyhow::Error {
    let file = file.display();
    if scan.timebases.is_empty() {
        let mut msg = format!("{file} has no stack samples");
        if scan.packet_errors > 0 {
            let _ = write!(
                msg,
                " that decode ({} problem(s) in its Perfetto packets; `trace-cli check` lists them)",
                scan.packet_errors
            );
        }
        return anyhow::anyhow!(msg);
    }
    if by_pid.is_empty() {
        let has: Vec<String> = scan
            .timebases
            .iter()
            .map(|(t, n)| format!("{t} ({n})"))
            .collect();
        return anyhow::anyhow!(
            "{file} has no samples of timebase {timebase:?}; it has: {} (choose with --timebase NAME, --offcpu or --wakeup)",
            has.join(", ")
        );
    }
    let mut busiest: Vec<(u32, u64)> = by_pid.iter().map(|(p, n)| (*p, *n)).collect();
    busiest.sort_by_key(|(pid, n)| (std::cmp::Reverse(*n), *pid));
    let shown: Vec<String> = busiest
        .iter()
        .take(10)
        .map(|(pid, n)| format!("{} ({n})", describe_pid(&scan.names, *pid)))
        .collect();
    anyhow::anyhow!(
        "{file} has {} samples of timebase {timebase:?}, none of the processes and threads selected; by process: {}{}",
        by_pid.values().sum::<u64>(),
        shown.join(", "),
        if busiest.len() > 10 { ", ..." } else { "" }
    )
}

/// The SVG's title: what the graph shows, and how much.
fn title(pattern: &str, folded: &Folded) -> String {
    let ms = folded.total as f64 / 1e6;
    match pattern {
        CPU_CLOCK => format!("CPU profile: {} samples", folded.samples),
        OFF_CPU => format!("Off-CPU time: {ms:.3} ms"),
        WAKEUP => format!(
            "Wakeups: {ms:.3} ms blocked, ended by {} wakeups",
            folded.samples
        ),
        _ if folded.ns => format!("{pattern}: {ms:.3} ms"),
        _ => format!("{pattern} stacks: {} samples", folded.samples),
    }
}

/// The SVG's palette: red-yellow for CPU time, blue for time off CPU, aqua
/// on blue for wakeups (as in Brendan Gregg's off-CPU and wakeup graphs).
fn palette(pattern: &str) -> Palette {
    match pattern {
        OFF_CPU => Palette::Basic(BasicPalette::Io),
        WAKEUP => Palette::Multi(MultiPalette::Wakeup),
        _ => Palette::Basic(BasicPalette::Hot),
    }
}

/// Draws `folded` as an SVG on `out`.
pub fn svg(
    folded: &Folded,
    title: String,
    subtitle: String,
    palette: Palette,
    out: impl Write,
) -> Result<()> {
    let mut options = inferno::flamegraph::Options::default();
    options.title = title;
    options.subtitle = Some(subtitle);
    options.count_name = if folded.ns { "ns" } else { "samples" }.to_owned();
    options.colors = palette;
    // The same function gets the same colour in every graph.
    options.hash = true;
    let text = folded.text();
    inferno::flamegraph::from_lines(&mut options, text.lines(), out)
        .context("drawing the flame graph")
}

pub fn run(args: FlamegraphArgs) -> Result<ExitCode> {
    let input = crate::open_trace(&args.file)?;
    let pattern = args.pattern();
    let mut folder = Folder::new(Selection {
        timebase: pattern,
        pids: &args.pids,
        tids: &args.tids,
    });
    let scan = Scan::read(input, |s| folder.add(&s))?;
    let skipped = Skipped {
        records: scan.malformed,
        packets: scan.packet_errors,
    };
    let first_packet = scan
        .first_packet_error
        .as_ref()
        .map(|(offset, e)| format!("in the blob at {offset:#x}: {e}"));
    args.damage.warn(
        skipped,
        &args.file,
        if skipped.records > 0 {
            None
        } else {
            first_packet.as_deref()
        },
    );
    let by_pid = std::mem::take(&mut folder.by_pid);
    let folded = folder.finish(&scan.names);
    if folded.samples == 0 {
        return Err(nothing_selected(&args.file, &scan, pattern, &by_pid));
    }
    if folded.total == 0 {
        bail!(
            "the {} samples of timebase {pattern:?} selected carry no durations",
            folded.samples
        );
    }
    let output = match (&args.output, args.folded) {
        (Some(o), _) => o.clone(),
        (None, true) => PathBuf::from("-"),
        (None, false) => PathBuf::from("flamegraph.svg"),
    };
    let to_stdout = output.as_os_str() == "-";
    let out: Box<dyn Write> = if to_stdout {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(
            File::create(&output).with_context(|| format!("cannot create {}", output.display()))?,
        )
    };
    let mut out = BufWriter::new(out);
    let written = if args.folded {
        out.write_all(folded.text().as_bytes())
            .map_err(anyhow::Error::from)
    } else {
        let mut subtitle = args.file.display().to_string();
        if !args.pids.is_empty() {
            let pids: Vec<String> = args
                .pids
                .iter()
                .map(|p| describe_pid(&scan.names, *p))
                .collect();
            let _ = write!(subtitle, ", process {}", pids.join(", "));
        }
        if !args.tids.is_empty() {
            let tids: Vec<String> = args.tids.iter().map(u32::to_string).collect();
            let _ = write!(subtitle, ", thread {}", tids.join(", "));
        }
        svg(
            &folded,
            title(pattern, &folded),
            subtitle,
            palette(pattern),
            &mut out,
        )
    };
    match written.and_then(|()| out.flush().map_err(anyhow::Error::from)) {
        // A reader that went away (`| head`) is no error.
        Err(e)
            if to_stdout
                && e.downcast_ref::<std::io::Error>()
                    .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) => {}
        Err(e) => return Err(e.context(format!("writing {}", output.display()))),
        Ok(()) => {}
    }
    if !to_stdout {
        let unit = if folded.ns {
            format!("{:.3} ms", folded.total as f64 / 1e6)
        } else {
            format!("{} samples", folded.total)
        };
        eprintln!(
            "trace-cli: {} stacks ({unit} of {pattern}) -> {}",
            folded.stacks.len(),
            output.display()
        );
    }
    Ok(args.damage.status(skipped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samples::testing::sample;
    use trace_common::fxt::read::TraceState;
    use trace_common::fxt::{Arg, ArgValue, Record, StringRef, obj_type};

    fn names() -> Names {
        let mut names = Names::default();
        let state = TraceState::new();
        names.apply(
            &state,
            &Record::KernelObject {
                koid: 100,
                obj_type: obj_type::PROCESS,
                name: StringRef::inline("spin"),
                args: vec![].into(),
            },
        );
        names.apply(
            &state,
            &Record::KernelObject {
                koid: 201,
                obj_type: obj_type::THREAD,
                name: StringRef::inline("worker"),
                args: vec![Arg::new("process", ArgValue::Koid(200))].into(),
            },
        );
        names
    }

    fn fold(samples: &[DecodedSample], names: &Names, selection: &Selection<'_>) -> Folded {
        let mut folder = Folder::new(*selection);
        for s in samples {
            folder.add(s);
        }
        folder.finish(names)
    }

    /// Every sample of `timebase`.
    fn every(timebase: &str) -> Selection<'_> {
        Selection {
            timebase,
            pids: &[],
            tids: &[],
        }
    }

    #[test]
    fn stacks_are_root_first_under_the_process_name_with_counts_summed() {
        let samples = [
            sample(CPU_CLOCK, 100, 100, None, &["main", "a", "b", "c"]),
            sample(CPU_CLOCK, 100, 101, None, &["main", "d"]),
            sample(CPU_CLOCK, 100, 100, None, &["main", "a", "b", "c"]),
            sample(CPU_CLOCK, 200, 201, None, &["start", "run"]),
            sample(CPU_CLOCK, 300, 300, None, &["x"]),
            sample(OFF_CPU, 100, 100, Some(5_000), &["main", "wait"]),
        ];
        let folded = fold(&samples, &names(), &every(CPU_CLOCK));
        assert_eq!(
            folded.text(),
            "[pid 300];x 1\nspin;main;a;b;c 2\nspin;main;d 1\nworker;start;run 1\n"
        );
        assert_eq!((folded.samples, folded.total, folded.ns), (5, 5, false));
    }

    #[test]
    fn off_cpu_stacks_weigh_their_time() {
        let samples = [
            sample(OFF_CPU, 100, 100, Some(1_500), &["main", "read"]),
            sample(OFF_CPU, 100, 100, Some(2_500), &["main", "read"]),
            sample(OFF_CPU, 100, 100, Some(7), &["main", "poll"]),
            sample(CPU_CLOCK, 100, 100, None, &["main", "read"]),
        ];
        let folded = fold(&samples, &names(), &every(OFF_CPU));
        assert_eq!(folded.text(), "spin;main;poll 7\nspin;main;read 4000\n");
        assert_eq!((folded.samples, folded.total, folded.ns), (3, 4_007, true));
        assert_eq!(title(OFF_CPU, &folded), "Off-CPU time: 0.004 ms");
        // Probe stacks count samples, whatever their count says.
        let probes = [
            sample("uprobe:malloc", 100, 100, Some(9), &["main", "malloc"]),
            sample("uprobe:free", 100, 100, None, &["main", "free"]),
            sample("usdt:app:start", 100, 100, None, &["main"]),
        ];
        let folded = fold(&probes, &names(), &every("uprobe:*"));
        assert_eq!(folded.text(), "spin;main;free 1\nspin;main;malloc 1\n");
        assert_eq!(title("uprobe:*", &folded), "uprobe:* stacks: 2 samples");
    }

    #[test]
    fn pid_and_tid_filters_select_samples() {
        let samples = [
            sample(CPU_CLOCK, 100, 100, None, &["main", "a"]),
            sample(CPU_CLOCK, 100, 101, None, &["main", "b"]),
            sample(CPU_CLOCK, 200, 201, None, &["start"]),
        ];
        let select = |pids: &[u32], tids: &[u32]| {
            fold(
                &samples,
                &names(),
                &Selection {
                    timebase: CPU_CLOCK,
                    pids,
                    tids,
                },
            )
            .text()
        };
        assert_eq!(select(&[100], &[]), "spin;main;a 1\nspin;main;b 1\n");
        assert_eq!(select(&[200], &[]), "worker;start 1\n");
        assert_eq!(select(&[], &[101]), "spin;main;b 1\n");
        assert_eq!(select(&[100], &[201]), "");
        assert_eq!(select(&[100, 200], &[]).lines().count(), 3);
    }

    #[test]
    fn nothing_selected_says_what_the_file_has() {
        let samples = [
            sample(OFF_CPU, 100, 100, Some(1), &["main"]),
            sample(OFF_CPU, 100, 100, Some(1), &["main"]),
            sample("uprobe:malloc", 100, 100, None, &["main"]),
        ];
        let mut scan = Scan {
            names: names(),
            ..Scan::default()
        };
        for s in &samples {
            *scan.timebases.entry(s.timebase.clone()).or_default() += 1;
        }
        let why = |selection: Selection<'_>| {
            let timebase = selection.timebase;
            let mut folder = Folder::new(selection);
            for s in &samples {
                folder.add(s);
            }
            nothing_selected(Path::new("t.fxt"), &scan, timebase, &folder.by_pid).to_string()
        };
        let e = why(every(CPU_CLOCK));
        assert!(
            e.contains("no samples of timebase \"cpu-clock\"")
                && e.contains("off-cpu (2), uprobe:malloc (1)"),
            "{e}"
        );
        let e = why(Selection {
            timebase: OFF_CPU,
            pids: &[5],
            tids: &[],
        });
        assert!(
            e.contains("has 2 samples of timebase \"off-cpu\"")
                && e.contains("by process: 100 \"spin\" (2)"),
            "{e}"
        );
        let e = nothing_selected(
            Path::new("t.fxt"),
            &Scan::default(),
            CPU_CLOCK,
            &BTreeMap::new(),
        );
        assert_eq!(e.to_string(), "t.fxt has no stack samples");
    }

    #[test]
    fn the_svg_names_its_frames_and_unit() {
        let samples = [
            sample(CPU_CLOCK, 100, 100, None, &["main", "spin_c"]),
            sample(CPU_CLOCK, 100, 100, None, &["main", "spin_d"]),
        ];
        let folded = fold(&samples, &names(), &every(CPU_CLOCK));
        let mut out = Vec::new();
        svg(
            &folded,
            title(CPU_CLOCK, &folded),
            "t.fxt".into(),
            palette(CPU_CLOCK),
            &mut out,
        )
        .unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(svg.starts_with("<?xml"), "{svg}");
        for text in ["CPU profile: 2 samples", "spin_c", "spin_d", "samples"] {
            assert!(svg.contains(text), "{text} missing");
        }
    }
}
