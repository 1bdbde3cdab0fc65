//! The arguments of `trace-cli record` checked and mapped to the session's
//! configuration.

use anyhow::{Context, Result, bail};
use trace_common::category::KERNEL_CATEGORIES;
use trace_common::controller::{ProviderSpec, StackOptions, TraceConfig};
use trace_common::provider::BufferingMode;
use trace_manager::kernel_categories;

use super::RecordArgs;

/// Checks the arguments that need no manager to check; the categories to
/// record, trimmed. A kernel category that matches none is an error; a
/// userspace one that looks like a kernel category is warned about.
pub(super) fn check(args: &RecordArgs) -> Result<Vec<String>> {
    if let Some(d) = args.duration
        && !(d.is_finite() && d > 0.0)
    {
        bail!("the duration must be a positive number of seconds, not {d}");
    }
    if let Some(d) = args.start_delay
        && !(d.is_finite() && d >= 0.0)
    {
        bail!("the start delay must be a number of seconds, 0 or more, not {d}");
    }
    if !(args.start_timeout.is_finite() && args.start_timeout >= 0.0) {
        bail!("the start timeout must be a number of seconds, 0 or more");
    }
    if !(args.buffer_megabytes > 0.0 && args.buffer_megabytes <= 4096.0) {
        bail!("the buffer size must be more than 0 and at most 4096 megabytes");
    }
    let categories: Vec<String> = args
        .categories
        .iter()
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty())
        .collect();
    for pattern in &categories {
        let kernel = pattern.starts_with("kernel");
        if kernel && !kernel_categories(std::slice::from_ref(pattern)).is_empty() {
            continue;
        }
        let hint = crate::categories::suggest(pattern);
        if kernel {
            let known: Vec<_> = KERNEL_CATEGORIES.iter().map(|(n, _)| *n).collect();
            match hint {
                Some(meant) => bail!(
                    "category {pattern:?} matches no known category; did you mean {meant:?}? \
                     (`trace-cli categories` lists them)"
                ),
                None => bail!(
                    "category {pattern:?} matches no known category (known: {})",
                    known.join(", ")
                ),
            }
        }
        // Userspace providers name their own categories, so this is no
        // error; but a kernel category without its prefix likely is one.
        if let Some(meant) = hint {
            eprintln!(
                "trace-cli: warning: {pattern:?} is not a kernel category and goes to userspace \
                 providers only; did you mean {meant:?}?"
            );
        }
    }
    // Said once, and only to who named the category: a glob or the
    // default that takes it in asks for no interrupts in particular.
    let filtered = !args.pids.is_empty()
        || (!args.command.is_empty() && !args.all_processes)
        || selects_cgroups(args);
    if filtered
        && categories
            .iter()
            .any(|c| c == trace_common::category::KERNEL_IRQ)
    {
        eprintln!(
            "trace-cli: warning: kernel:irq records nothing when only some processes are \
             recorded (-p, --cgroup, --unit, --container, or a COMMAND without -a): interrupts \
             belong to no process"
        );
    }
    if let Some(&pid) = args
        .pids
        .iter()
        .find(|&&p| p == 0 || !std::path::Path::new(&format!("/proc/{p}")).is_dir())
    {
        bail!("no process with id {pid}");
    }
    Ok(categories)
}

/// The session's configuration the arguments ask for, with the checked
/// `categories`.
pub(super) fn trace_config(args: &RecordArgs, categories: &[String]) -> Result<TraceConfig> {
    let mut specs = Vec::new();
    for spec in &args.provider_buffers {
        let (name, size) = spec
            .split_once('=')
            .and_then(|(n, s)| Some((n.to_owned(), s.trim().parse::<u32>().ok()?)))
            .filter(|(_, s)| (1..=4096).contains(s))
            .with_context(|| {
                format!("--provider-buffer wants NAME=MEGABYTES (1-4096), not {spec:?}")
            })?;
        specs.push(ProviderSpec {
            name,
            buffer_size_megabytes_hint: size,
            categories: Vec::new(),
        });
    }
    if args.provider_buffer_size == 0 || args.provider_buffer_size > 4096 {
        bail!("the provider buffer size must be between 1 and 4096 megabytes");
    }
    Ok(TraceConfig {
        categories: categories.to_vec(),
        buffer_size_megabytes_hint: args.provider_buffer_size,
        start_timeout_milliseconds: (args.start_timeout * 1000.0) as u64,
        buffering_mode: BufferingMode::from_name(&args.buffering_mode)
            .unwrap_or(BufferingMode::Oneshot),
        provider_specs: specs,
        version: trace_common::controller::FXT_VERSION,
        defer_transfer: args.defer_transfer,
        kernel_buffer_bytes: (args.buffer_megabytes * 1024.0 * 1024.0) as u64,
        kernel_buffering_mode: BufferingMode::from_name(&args.kernel_buffering_mode)
            .unwrap_or(BufferingMode::Streaming),
        pids: if !args.pids.is_empty()
            || (!args.command.is_empty() && !args.all_processes && !selects_cgroups(args))
        {
            Some(args.pids.clone())
        } else {
            None
        },
        cgroups: cgroup_selection(args)?,
        uprobes: args.uprobes.iter().map(|s| absolute_spec(s)).collect(),
        usdt: args.usdt.iter().map(|s| absolute_spec(s)).collect(),
        tracepoints: args.events.clone(),
        stacks: stack_options(args, categories)?,
        triggers: args
            .triggers
            .iter()
            .filter(|t| trace_manager::is_kernel_trigger(t))
            .cloned()
            .collect(),
    })
}

/// How the arguments ask stacks to be recorded; a probe kind named in
/// `--stacks` that nothing records is warned about.
fn stack_options(args: &RecordArgs, categories: &[String]) -> Result<StackOptions> {
    let mut probe_stacks = Vec::new();
    for name in &args.probe_stacks {
        let name = name.trim();
        if name == "all" {
            probe_stacks.extend(StackOptions::PROBE_SOURCES.iter().map(|s| (*s).to_owned()));
        } else if StackOptions::PROBE_SOURCES.contains(&name) {
            probe_stacks.push(name.to_owned());
        } else {
            bail!(
                "--stacks takes {} or all, not {name:?}",
                StackOptions::PROBE_SOURCES.join(", ")
            );
        }
    }
    probe_stacks.sort();
    probe_stacks.dedup();
    let syscalls = kernel_categories(categories)
        .iter()
        .any(|c| c == trace_common::category::KERNEL_SYSCALL);
    for kind in &probe_stacks {
        let recorded = match kind.as_str() {
            "uprobe" => !args.uprobes.is_empty(),
            "usdt" => !args.usdt.is_empty(),
            "syscall" => syscalls,
            _ => !args.events.is_empty(),
        };
        if !recorded && !args.probe_stacks.iter().any(|n| n.trim() == "all") {
            eprintln!(
                "trace-cli: warning: --stacks {kind}: nothing records {kind} events \
                 ({})",
                match kind.as_str() {
                    "uprobe" => "add --uprobe",
                    "usdt" => "add --usdt",
                    "syscall" => "add -c kernel:syscall",
                    _ => "add -e",
                }
            );
        }
    }
    if args.sample_hz == 0 || args.sample_hz > trace_manager::MAX_SAMPLE_HZ {
        bail!("--sample-hz must be 1 to {}", trace_manager::MAX_SAMPLE_HZ);
    }
    if !(512..=16384).contains(&args.stack_size) {
        bail!("--stack-size must be 512 to 16384 bytes");
    }
    Ok(StackOptions {
        sample_hz: args.sample_hz,
        offcpu_min_us: args.offcpu_min_us,
        frame_pointers: args.call_graph == "fp",
        stack_bytes: args.stack_size,
        probe_stacks,
    })
}

/// Whether `config` asks for the kernel provider (no categories: all of
/// them).
pub(super) fn needs_kernel(config: &TraceConfig) -> bool {
    config.categories.is_empty()
        || !kernel_categories(&config.categories).is_empty()
        || !config.uprobes.is_empty()
        || !config.usdt.is_empty()
        || !config.tracepoints.is_empty()
}

/// A relative `BINARY` in a `BINARY:...` probe spec made absolute, so a
/// manager elsewhere finds the same file.
fn absolute_spec(spec: &str) -> String {
    let Some((binary, rest)) = spec.split_once(':') else {
        return spec.to_owned();
    };
    if binary.contains('/')
        && !binary.starts_with('/')
        && let Ok(abs) = std::path::absolute(binary)
    {
        return format!("{}:{rest}", abs.display());
    }
    spec.to_owned()
}

/// Whether the arguments select processes by cgroup.
fn selects_cgroups(args: &RecordArgs) -> bool {
    !args.cgroups.is_empty() || !args.units.is_empty() || !args.containers.is_empty()
}

/// The cgroups `--cgroup`, `--unit` and `--container` name, as paths from
/// the cgroup v2 hierarchy's root.
fn cgroup_selection(args: &RecordArgs) -> Result<Vec<String>> {
    if !selects_cgroups(args) {
        return Ok(Vec::new());
    }
    let hierarchy = trace_manager::CgroupHierarchy::find()?;
    let mut paths = Vec::new();
    for c in &args.cgroups {
        paths.push(hierarchy.resolve(c)?);
    }
    for unit in &args.units {
        paths.push(trace_manager::find_unit(&hierarchy, unit).context("--unit")?);
    }
    if !args.containers.is_empty() {
        let all = trace_manager::list_containers(&hierarchy);
        for wanted in &args.containers {
            let c = trace_manager::find_container(&all, wanted).context("--container")?;
            paths.push(c.cgroup.clone());
        }
    }
    paths.dedup();
    Ok(paths)
}
