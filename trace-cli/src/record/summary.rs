//! What a recording says when it ends.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use trace_common::controller::{Reply, fail};

use super::command::Outcome;
use super::failed;
use super::run_loop::StopReason;

/// Says how the recording ended for `reason`, `ended` being the
/// termination's answer, then what became of the `command`; a recording
/// that failed says what `destination` holds, and why: `cause` (taken)
/// when this side failed first (the manager's writes into the pipe then
/// fail). The exit status is the
/// command's when it ended the recording, else 0; 1 when the recording
/// failed.
pub(super) fn report(
    reason: &StopReason,
    ended: Reply,
    destination: &str,
    output_is_file: bool,
    command: Outcome,
    cause: &mut Option<String>,
) -> Result<ExitCode> {
    let why = match (&reason, ended) {
        // Said the moment it happened; the termination's answer repeats it.
        (StopReason::Aborted(why), _) => why.clone(),
        (_, Reply::Terminated(stats)) => {
            print_summary(&stats, destination);
            if let Some(line) = command.line {
                eprintln!("{line}");
            }
            return Ok(ExitCode::from(command.code.unwrap_or(0)));
        }
        // Writing the last records failed (the disk filled, say).
        (
            _,
            Reply::Failed {
                code: fail::ABORTED,
                message,
                ..
            },
        ) => message,
        (_, other) => return Err(failed("ending the recording", other)),
    };
    // What failed on this side first (the rotation, say) made the
    // manager's writes fail after it: the cause is said, not its effect.
    let why = cause.take().unwrap_or(why);
    eprintln!("trace-cli: recording failed: {why}");
    if output_is_file {
        eprintln!("trace-cli: {destination} holds what was recorded until then, in whole records");
    }
    if let Some(line) = command.line {
        eprintln!("{line}");
    }
    Ok(ExitCode::FAILURE)
}

/// The summary of a recording that ended well.
fn print_summary(stats: &trace_common::controller::StopResult, destination: &str) {
    use trace_common::controller::KernelCount;
    let k = &stats.kernel;
    // The kinds a summary shows, in their order (tests read it).
    let shown = KernelCount::FIXED
        .into_iter()
        .filter(KernelCount::in_summary)
        // Python's only where there was Python.
        .chain(
            [KernelCount::PythonStacks, KernelCount::PythonUnreadable]
                .into_iter()
                .filter(|kind| k.count(kind) > 0),
        );
    let counts: Vec<String> = shown
        .map(|kind| format!("{} {}", k.count(&kind), kind.label()))
        .collect();
    eprintln!(
        "trace-cli: {} kernel events ({}) in {:.1} s, {} records, {} bytes, {} dropped{}{}{} -> {}",
        k.events,
        counts.join(", "),
        Duration::from_nanos(stats.traced_ns).as_secs_f64(),
        stats.records,
        stats.bytes,
        k.dropped,
        per_cpu_drops(&k.dropped_per_cpu, k.dropped),
        if k.malformed > 0 {
            format!(", {} malformed", k.malformed)
        } else {
            String::new()
        },
        providers_summary(&stats.provider_stats),
        destination
    );
    // Tracepoints selected by name (`-e`), on a line of their own.
    let named: Vec<String> = k
        .counts
        .iter()
        .filter(|(kind, _)| matches!(kind, KernelCount::Tracepoint(_)))
        .map(|(kind, n)| format!("{n} {}", kind.label()))
        .collect();
    if !named.is_empty() {
        eprintln!("trace-cli: tracepoints: {}", named.join(", "));
    }
}

/// ` (cpu0 N, cpu1 M, other K)` when anything was dropped: where.
fn per_cpu_drops(per_cpu: &[(u32, u64)], total: u64) -> String {
    if total == 0 {
        return String::new();
    }
    let mut parts: Vec<String> = per_cpu
        .iter()
        .map(|(cpu, n)| format!("cpu{cpu} {n}"))
        .collect();
    let other = total.saturating_sub(per_cpu.iter().map(|&(_, n)| n).sum());
    if other > 0 {
        parts.push(format!("other {other}"));
    }
    format!(" ({})", parts.join(", "))
}

/// `; N userspace providers (...)` when any took part: their records and
/// drops, and how many did not start in time.
fn providers_summary(p: &[trace_common::controller::ProviderStats]) -> String {
    let p: Vec<_> = p
        .iter()
        .filter(|s| s.id != trace_manager::KERNEL_PROVIDER_ID)
        .collect();
    if p.is_empty() {
        return String::new();
    }
    let records: u64 = p.iter().map(|s| s.records_written).sum();
    let dropped: u64 = p.iter().map(|s| s.records_dropped).sum();
    let late = p.iter().filter(|s| !s.started).count();
    format!(
        "; {} userspace provider{} ({} records, {} dropped{})",
        p.len(),
        if p.len() == 1 { "" } else { "s" },
        records,
        dropped,
        if late > 0 {
            format!(", {late} did not start in time")
        } else {
            String::new()
        }
    )
}
