//! `trace-cli report --critical-path TARGET`: why one span, system call or
//! stretch of a thread took as long as it did, as an indented tree.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, bail};
use trace_analysis::critical_path::task::TaskTime;
use trace_analysis::critical_path::walk::{ThreadTime, Wait};
use trace_analysis::critical_path::{CriticalPath, Options, critical_path};
use trace_analysis::report::units;

/// Explains `options.target` in the file at `path`; the text (or JSON).
pub fn run(path: &Path, options: &Options, json: bool) -> Result<String> {
    if path.as_os_str() == "-" {
        bail!("--critical-path reads the file twice: give a file, not standard input");
    }
    let open = || std::fs::File::open(path).map(std::io::BufReader::new);
    open().with_context(|| format!("cannot open {}", path.display()))?;
    let (found, _) =
        critical_path(open, options).with_context(|| format!("reading {}", path.display()))?;
    if json {
        let mut s = serde_json::to_string_pretty(&found).context("writing JSON")?;
        s.push('\n');
        return Ok(s);
    }
    Ok(render(&found))
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "-".into();
    }
    format!("{:.1}%", part as f64 * 100.0 / whole as f64)
}

fn label(t: &ThreadTime) -> String {
    let thread = if t.thread.is_empty() {
        format!("thread {}", t.tid)
    } else {
        format!("{} ({})", t.thread, t.tid)
    };
    if t.process.is_empty() || t.pid == t.tid {
        thread
    } else {
        format!("{thread} of {} ({})", t.process, t.pid)
    }
}

/// The tree as text.
pub fn render(p: &CriticalPath) -> String {
    let mut s = String::new();
    let f = &p.target;
    let what = match f.kind {
        "thread" => format!("thread {} ({})", f.name, f.tid),
        kind => format!("{kind} {:?}", f.name),
    };
    let _ = writeln!(
        s,
        "Critical path of {what}: {} from {} s (+{} s in the trace)",
        units::duration(f.dur),
        units::seconds(f.ts),
        units::seconds(f.relative_ts),
    );
    if f.kind != "thread" {
        let which = match (f.instances, f.nth) {
            (1, _) => "the only instance".to_owned(),
            (n, i) => format!("instance {i} of {n} in order of start (--nth to pick another)"),
        };
        let _ = writeln!(s, "  {which}");
    }
    let _ = writeln!(
        s,
        "  waits of at least {} are followed to their waker; shorter ones are summed",
        units::duration(p.min_wait_ns)
    );
    s.push('\n');
    if let Some(path) = &p.path {
        thread(&mut s, path, 0, path.from);
    }
    if let Some(t) = &p.task {
        task(&mut s, p, t);
    }
    if !p.gaps.is_empty() {
        s.push('\n');
        for g in &p.gaps {
            let _ = writeln!(s, "note: {g}");
        }
    }
    s
}

fn shares(list: &[trace_analysis::critical_path::walk::Share]) -> String {
    list.iter()
        .map(|x| format!("{} {}", x.name, units::duration(x.ns)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn thread(s: &mut String, t: &ThreadTime, indent: usize, origin: u64) {
    let pad = " ".repeat(indent);
    let whole = t.to - t.from;
    let mut parts = vec![
        format!(
            "running {} ({})",
            units::duration(t.running_ns),
            percent(t.running_ns, whole)
        ),
        format!(
            "runnable {} ({})",
            units::duration(t.runnable_ns),
            percent(t.runnable_ns, whole)
        ),
        format!(
            "blocked {} ({})",
            units::duration(t.blocked_ns),
            percent(t.blocked_ns, whole)
        ),
    ];
    if t.unknown_ns > 0 {
        parts.push(format!("unknown {}", units::duration(t.unknown_ns)));
    }
    let _ = writeln!(
        s,
        "{pad}{}: {} — {}",
        label(t),
        units::duration(whole),
        parts.join(", ")
    );
    if !t.spans.is_empty() {
        let _ = writeln!(s, "{pad}  in spans: {}", shares(&t.spans));
    }
    if !t.syscalls.is_empty() {
        let _ = writeln!(s, "{pad}  in system calls: {}", shares(&t.syscalls));
    }
    if !t.runnable_behind.is_empty() {
        let _ = writeln!(
            s,
            "{pad}  waiting for a CPU behind: {}",
            shares(&t.runnable_behind)
        );
    }
    if !t.blocked_in.is_empty() {
        let _ = writeln!(s, "{pad}  blocked in: {}", shares(&t.blocked_in));
    }
    for w in &t.waits {
        wait(s, w, indent + 2, origin);
    }
    if t.short_waits > 0 {
        let _ = writeln!(
            s,
            "{pad}  {} shorter wait(s): {}",
            t.short_waits,
            units::duration(t.short_waits_ns)
        );
    }
}

fn wait(s: &mut String, w: &Wait, indent: usize, origin: u64) {
    let pad = " ".repeat(indent);
    let waker_in = w
        .waker_in
        .as_deref()
        .map(|c| format!(" in {c}"))
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "{pad}wait at +{}: {} in {}, woken by {}{waker_in}",
        units::duration(w.from.saturating_sub(origin)),
        units::duration(w.ns),
        w.reason,
        w.woken_by,
    );
    if !w.stack.is_empty() {
        let _ = writeln!(s, "{pad}  stack: {}", w.stack.join(" ← "));
    }
    if let Some(r) = &w.requests {
        let on = if r.devices.is_empty() {
            String::new()
        } else {
            format!(" on {}", r.devices.join(", "))
        };
        let _ = writeln!(
            s,
            "{pad}  block I/O: {} request(s) ({}){on}, {}, in flight {} of it (longest {})",
            r.count,
            r.ops.join(", "),
            units::bytes(r.bytes),
            units::duration(r.busy_ns),
            units::duration(r.longest_ns),
        );
    }
    if w.waker_above {
        let _ = writeln!(s, "{pad}  (its waker is explained above)");
    }
    if let Some(k) = &w.waker {
        thread(s, k, indent + 2, origin);
    }
}

/// A task's polls and awaits; each poll that did more than run (waited
/// for a CPU or blocked for at least the threshold) as its thread's tree.
fn task(s: &mut String, p: &CriticalPath, t: &TaskTime) {
    let f = &p.target;
    let recorded = match t.polls_recorded {
        Some(n) if n as usize != t.polls => format!(" (its span says {n})"),
        _ => String::new(),
    };
    let delay = match (t.sched_delay_ns, t.wakes) {
        (Some(d), Some(w)) => format!(
            ", of which woken and waiting to be polled {} ({w} wake(s))",
            units::duration(d)
        ),
        _ => String::new(),
    };
    let _ = writeln!(
        s,
        "task {:?} of process {}: {} — {} poll(s){recorded} on {} thread(s): polled {} ({}), awaiting {} ({}){delay}; longest await {}",
        f.name,
        f.pid,
        units::duration(f.dur),
        t.polls,
        t.threads.len(),
        units::duration(t.polled_ns),
        percent(t.polled_ns, f.dur),
        units::duration(t.awaiting_ns),
        percent(t.awaiting_ns, f.dur),
        units::duration(t.longest_await_ns),
    );
    if !t.threads.is_empty() {
        let _ = writeln!(s, "  polled on: {}", shares(&t.threads));
    }
    // Awaits and polls in order of time.
    let mut awaits = t.awaits.iter().peekable();
    let mut only_ran = (0, 0);
    for (i, poll) in t.poll_times.iter().enumerate() {
        while let Some(a) = awaits.next_if(|a| a.from <= poll.from) {
            let by = match &a.woken_by {
                Some(by) => format!("woken by {by}"),
                None if a.first => "from its creation to its first poll".to_owned(),
                None => "no waker recorded".to_owned(),
            };
            let _ = writeln!(
                s,
                "  await at +{}: {}, {by}",
                units::duration(a.from.saturating_sub(f.ts)),
                units::duration(a.ns)
            );
        }
        let off_cpu = poll.runnable_ns + poll.blocked_ns;
        if off_cpu < p.min_wait_ns && poll.waits.is_empty() {
            only_ran = (only_ran.0 + 1, only_ran.1 + (poll.to - poll.from));
            continue;
        }
        let _ = writeln!(
            s,
            "  poll {} at +{}:",
            i + 1,
            units::duration(poll.from.saturating_sub(f.ts))
        );
        thread(s, poll, 4, f.ts);
    }
    if t.short_awaits > 0 {
        let _ = writeln!(
            s,
            "  {} shorter await(s): {}",
            t.short_awaits,
            units::duration(t.short_awaits_ns)
        );
    }
    if only_ran.0 > 0 {
        let _ = writeln!(
            s,
            "  {} poll(s) ran on their CPU throughout (or waited less than {}): {}",
            only_ran.0,
            units::duration(p.min_wait_ns),
            units::duration(only_ran.1)
        );
    }
}
