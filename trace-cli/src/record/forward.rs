//! What another machine of `--host` is asked to record: this recording's
//! options, as `trace-cli record` arguments.

use super::RecordArgs;

/// The options every machine shares: categories, buffers and modes,
/// probes, tracepoints, stacks, triggers. Not the output, the duration,
/// the rotation or window, `-p` or the COMMAND: those stay here (this
/// machine decides when every machine stops).
fn options(args: &RecordArgs) -> Vec<String> {
    let mut out = Vec::new();
    let mut opt = |name: &str, value: String| {
        out.push(name.to_owned());
        out.push(value);
    };
    if !args.categories.is_empty() {
        opt("-c", args.categories.join(","));
    }
    opt("-b", args.buffer_megabytes.to_string());
    opt("--buffering-mode", args.buffering_mode.clone());
    opt(
        "--kernel-buffering-mode",
        args.kernel_buffering_mode.clone(),
    );
    opt(
        "--provider-buffer-size",
        args.provider_buffer_size.to_string(),
    );
    for p in &args.provider_buffers {
        opt("--provider-buffer", p.clone());
    }
    for u in &args.uprobes {
        opt("--uprobe", u.clone());
    }
    for u in &args.usdt {
        opt("--usdt", u.clone());
    }
    for e in &args.events {
        opt("-e", e.clone());
    }
    opt("--sample-hz", args.sample_hz.to_string());
    opt("--offcpu-min-us", args.offcpu_min_us.to_string());
    opt("--call-graph", args.call_graph.clone());
    opt("--stack-size", args.stack_size.to_string());
    if !args.probe_stacks.is_empty() {
        opt("--stacks", args.probe_stacks.join(","));
    }
    for t in &args.triggers {
        opt("--trigger", t.clone());
    }
    if !args.triggers.is_empty() {
        opt("--post", args.post.to_string());
    }
    opt("--start-timeout", args.start_timeout.to_string());
    out
}

/// The `trace-cli` words another machine runs: `record` with
/// [`options`], its own selection or [`selection`], its trace to standard
/// output, and stopped when its standard input ends.
pub(super) fn remote_command(args: &RecordArgs) -> impl Fn(Option<&[String]>) -> Vec<String> {
    let (options, select) = (options(args), selection(args));
    move |own| {
        let mut words = vec!["record".to_owned()];
        words.extend(options.iter().cloned());
        words.extend(own.unwrap_or(&select).iter().cloned());
        words.extend(["-o", "-", "--stop-on-stdin-eof"].map(str::to_owned));
        words
    }
}

/// The selection a machine without one of its own records: the same
/// cgroups, units and containers (none: every process).
fn selection(args: &RecordArgs) -> Vec<String> {
    let mut out = Vec::new();
    for (flag, values) in [
        ("--cgroup", &args.cgroups),
        ("--unit", &args.units),
        ("--container", &args.containers),
    ] {
        for v in values {
            out.push(flag.to_owned());
            out.push(v.clone());
        }
    }
    out
}
