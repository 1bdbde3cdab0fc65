//! A session's configuration mapped to what the manager sets up: the
//! kernel provider's ([`RecordConfig`]), the userspace providers'
//! ([`UserspaceConfig`]), and what the kernel's buffers take out of the
//! session's memory budget.

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use trace_common::controller::{MAX_CATEGORIES, TraceConfig};

use super::Sink;
use crate::kernel::translate::{Condition, Trigger};
use crate::limits::mib;
use crate::session::{RecordConfig, Session};
use crate::userspace::UserspaceConfig;

/// The session `config` asks for, recording what `record` says (see
/// [`record_config`]), writing to `output`.
pub(super) fn new_session(
    mut record: RecordConfig,
    config: &TraceConfig,
    output: OwnedFd,
    kernel: KernelMemory,
) -> Result<Session<Sink>, String> {
    record.backlog_bytes = usize::try_from(kernel.backlog).unwrap_or(usize::MAX);
    let sink = Sink::new(output, config.defer_transfer)
        .map_err(|e| format!("setting up the output: {e}"))?;
    // The sink batches records itself, in whole records.
    Session::new(record, sink).map_err(|e| e.to_string())
}

/// What the kernel provider records for `config`, its probes resolved with
/// the rights of the client `creds` describes, by `deadline` if one is
/// given (this reads the program files of every process named: it is done
/// off the manager's loop).
pub(super) fn record_config(
    config: &TraceConfig,
    creds: Option<&crate::creds::ClientCreds>,
    deadline: Option<Instant>,
) -> Result<RecordConfig, String> {
    let mut config = config.clone();
    // A process named twice is one process.
    if let Some(pids) = config.pids.as_mut() {
        pids.sort_unstable();
        pids.dedup();
    }
    let config = &config;
    let cgroups = resolve_cgroups(config)?;
    let (uprobes, usdt) = resolve_probes(config, creds, deadline)?;
    check_attachments(&uprobes, &usdt, config.pids.as_deref())?;
    let triggers = kernel_triggers(config)?;
    // The tracepoints of the signal and out-of-memory triggers, filtered.
    let mut specs = config.tracepoints.clone();
    specs.extend(lock_contention(config));
    specs.extend(
        triggers
            .iter()
            .filter_map(|t| t.tracepoint_spec().map(str::to_owned)),
    );
    in_time(deadline)?;
    let tracepoints = std::sync::Arc::new(resolve_tracepoints(&specs)?);
    in_time(deadline)?;
    Ok(RecordConfig {
        categories: config.categories.clone(),
        buffer_bytes: usize::try_from(kernel_buffer_bytes(config)).unwrap_or(usize::MAX),
        pids: config.pids.clone(),
        cgroups,
        uprobes,
        usdt,
        tracepoints,
        kernel_mode: config.kernel_buffering_mode,
        stacks: config.stacks.clone(),
        triggers,
        backlog_bytes: crate::kernel::DEFAULT_BACKLOG_BYTES,
    })
}

/// The cgroups `config` selects, as paths from the cgroup v2 hierarchy's
/// root, each checked to exist; empty without a cgroup filter.
fn resolve_cgroups(config: &TraceConfig) -> Result<Vec<String>, String> {
    use trace_common::kernel::CGROUPS_MAX;
    if config.cgroups.is_empty() {
        return Ok(Vec::new());
    }
    if config.pids.is_some() {
        return Err(
            "a pid filter (-p, a command) and a cgroup filter (--cgroup, --unit, --container) \
             each select the processes recorded: use one of them"
                .to_owned(),
        );
    }
    if config.cgroups.len() > CGROUPS_MAX as usize {
        return Err(crate::cgroup::CgroupError::TooMany {
            count: config.cgroups.len(),
            max: CGROUPS_MAX as usize,
        }
        .to_string());
    }
    let hierarchy = crate::cgroup::Hierarchy::find().map_err(|e| e.to_string())?;
    let mut paths = Vec::new();
    for c in &config.cgroups {
        let path = hierarchy.resolve(c).map_err(|e| e.to_string())?;
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
    Ok(paths)
}

/// The kernel triggers of `config`, parsed, each with what it needs
/// recorded.
fn kernel_triggers(config: &TraceConfig) -> Result<Vec<Trigger>, String> {
    let categories = crate::session::kernel_categories(&config.categories);
    let mut list = Vec::new();
    for spec in &config.triggers {
        let t = Trigger::parse(spec)?;
        match &t.condition {
            Condition::SlowSyscall { .. }
                if !categories
                    .iter()
                    .any(|c| c == trace_common::category::KERNEL_SYSCALL) =>
            {
                return Err(format!(
                    "trigger {spec:?} watches system calls: record kernel:syscall too"
                ));
            }
            Condition::Tracepoint(name)
                if t.tracepoint_spec().is_none()
                    && !config.tracepoints.iter().any(|s| s.contains(name.as_str())) =>
            {
                return Err(format!(
                    "trigger {spec:?}: select the tracepoint with -e {name}"
                ));
            }
            Condition::Uprobe(name)
                if !config.uprobes.iter().any(|s| s.contains(name.as_str())) =>
            {
                return Err(format!(
                    "trigger {spec:?}: probe the function with --uprobe"
                ));
            }
            Condition::Usdt(name) if !config.usdt.iter().any(|s| s.contains(name.as_str())) => {
                return Err(format!("trigger {spec:?}: record the site with --usdt"));
            }
            _ => {}
        }
        list.push(t);
    }
    Ok(list)
}

/// The memory the kernel side of `config` takes, when it is within the
/// session's `budget` (its buffers and, out of what they leave, its
/// backlog: see [`backlog_within`]); else why not. Returns both figures.
pub(super) fn kernel_within_budget(
    config: &TraceConfig,
    budget: u64,
) -> Result<KernelMemory, String> {
    let kernel_bytes = kernel_memory(config);
    if kernel_bytes > budget {
        return Err(format!(
            "a kernel buffer of {} is more than the session's memory budget of {} \
             (trace-manager --session-memory-budget; by default a quarter of the \
             machine's memory)",
            mib(kernel_bytes),
            mib(budget)
        ));
    }
    let backlog = if kernel_bytes == 0 {
        0
    } else {
        backlog_within(budget - kernel_bytes)
    };
    Ok(KernelMemory {
        total: kernel_bytes + backlog,
        backlog,
    })
}

/// What the kernel side of a session takes out of its memory budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct KernelMemory {
    /// Buffers, maps and backlog together.
    pub total: u64,
    /// The backlog's limit ([`crate::kernel::KernelConfig::backlog_bytes`]).
    pub backlog: u64,
}

/// The most the kernel events read and not yet translated may take, out of
/// the `left` bytes of a budget the buffers leave: a quarter of it (the
/// providers' buffers share the rest), within
/// [`MIN_BACKLOG_BYTES`](crate::kernel::MIN_BACKLOG_BYTES) (which a budget
/// smaller than the buffers plus that exceeds by at most that much) and
/// [`DEFAULT_BACKLOG_BYTES`](crate::kernel::DEFAULT_BACKLOG_BYTES).
pub(super) fn backlog_within(left: u64) -> u64 {
    (left / 4).clamp(
        crate::kernel::MIN_BACKLOG_BYTES as u64,
        crate::kernel::DEFAULT_BACKLOG_BYTES as u64,
    )
}

/// The memory the kernel provider's ring buffers will take for `config`:
/// none without a kernel category or probe, else each online CPU's ring
/// (rounded up to a power of two pages, as the kernel wants), and the stack
/// maps when stacks are recorded.
pub(super) fn kernel_memory(config: &TraceConfig) -> u64 {
    let kernel = !crate::session::kernel_categories(&config.categories).is_empty()
        || !config.uprobes.is_empty()
        || !config.usdt.is_empty()
        || !config.tracepoints.is_empty();
    if !kernel {
        return 0;
    }
    let cpus = aya::util::online_cpus().map_or(1, |c| c.len().max(1));
    let bytes = usize::try_from(kernel_buffer_bytes(config)).unwrap_or(usize::MAX);
    let rings = (crate::kernel::ring_size(bytes / cpus) as u64).saturating_mul(cpus as u64);
    // The stack maps are allocated whole: the off-CPU programs' table of
    // blocked threads, the scratch slots and the set of processes seen.
    use trace_common::category::{KERNEL_OFFCPU, KERNEL_PROFILE};
    use trace_common::kernel::stack as st;
    let categories = crate::session::kernel_categories(&config.categories);
    let offcpu = categories.iter().any(|c| c == KERNEL_OFFCPU);
    let stacks = offcpu
        || categories.iter().any(|c| c == KERNEL_PROFILE)
        || !config.stacks.probe_stacks.is_empty();
    let mut maps = 0u64;
    if offcpu {
        maps += u64::from(st::OFFCPU_MAX) * (size_of::<st::OffCpuEntry>() as u64 + 64);
    }
    if stacks {
        maps += u64::from(st::STACK_SLOTS) * st::STACK_EVENT_MAX as u64 * cpus as u64
            + u64::from(st::STACK_SEEN_MAX) * 64;
    }
    rings.saturating_add(maps)
}

/// The kernel ring buffers' bytes `config` asks for, within what the
/// kernel provider accepts.
fn kernel_buffer_bytes(config: &TraceConfig) -> u64 {
    config.kernel_buffer_bytes.clamp(4096, 4 << 30)
}

/// What userspace providers get from `config`, sharing `budget` bytes.
pub(super) fn userspace_config(config: &TraceConfig, budget: u64) -> UserspaceConfig {
    let mb = |m: u32| u64::from(m.clamp(1, 4096)) << 20;
    UserspaceConfig {
        mode: config.buffering_mode,
        buffer_bytes: mb(config.buffer_size_megabytes_hint),
        overrides: config
            .provider_specs
            .iter()
            .filter(|s| s.buffer_size_megabytes_hint > 0)
            .map(|s| (s.name.clone(), mb(s.buffer_size_megabytes_hint)))
            .collect(),
        category_overrides: config
            .provider_specs
            .iter()
            .filter(|s| !s.categories.is_empty())
            .map(|s| (s.name.clone(), userspace_categories(&s.categories)))
            .collect(),
        categories: userspace_categories(&config.categories),
        budget,
        // Checked by `record_config` already: a cgroup that cannot be
        // resolved here stops the session before providers are asked.
        cgroups: resolve_cgroups(config).unwrap_or_default(),
    }
}

/// Whether providers accept `category` as a name (kernel categories are
/// not theirs).
pub(super) fn usable_category(category: &str) -> bool {
    if category.starts_with("kernel:") {
        return false;
    }
    let ok =
        !category.is_empty() && category.len() <= trace_common::provider::MAX_CATEGORY_NAME_LEN;
    if !ok {
        log::warn!("category {category:?} is not a name providers accept; discarded");
    }
    ok
}

/// The categories of `all` that go to userspace providers, at most
/// [`MAX_CATEGORIES`] of them; extras are discarded.
fn userspace_categories(all: &[String]) -> Vec<String> {
    let mut list: Vec<String> = all.iter().filter(|c| usable_category(c)).cloned().collect();
    if list.len() > MAX_CATEGORIES {
        log::warn!(
            "{} categories past the limit of {MAX_CATEGORIES} discarded",
            list.len() - MAX_CATEGORIES
        );
        list.truncate(MAX_CATEGORIES);
    }
    list
}

/// The pair of tracepoints `kernel:lock` adds, when the recording asks for
/// it, the kernel has it, and `-e` does not select it already.
fn lock_contention(config: &TraceConfig) -> Option<String> {
    use crate::kernel::translate::LOCK_CONTENTION_PAIR;
    let wanted = crate::kernel::recorder::kernel_categories(&config.categories)
        .iter()
        .any(|c| c == trace_common::category::KERNEL_LOCK);
    if !wanted
        || config
            .tracepoints
            .iter()
            .any(|s| s.contains("lock:contention"))
    {
        return None;
    }
    let root = crate::kernel::tracefs::tracefs_root().ok()?;
    root.join("events/lock/contention_begin")
        .is_dir()
        .then(|| LOCK_CONTENTION_PAIR.to_owned())
}

/// The tracepoints `specs` (`-e`) select, resolved against tracefs.
fn resolve_tracepoints(specs: &[String]) -> Result<crate::kernel::tracepoints::Selection, String> {
    if specs.is_empty() {
        return Ok(Default::default());
    }
    let root = crate::kernel::tracefs::tracefs_root()
        .map_err(|e| format!("-e needs tracefs, which is not available: {e}"))?;
    crate::kernel::tracepoints::select(&root, specs).map_err(|e| e.to_string())
}

/// A session's resolved `--uprobe` probes and `--usdt` sites.
type Probes = (
    Vec<crate::kernel::uprobes::ResolvedProbe>,
    Vec<crate::kernel::usdt::UsdtSite>,
);

/// Every `--uprobe` and `--usdt` probe of `config`, resolved with the
/// rights of the client `creds` describes (on a thread that took them, see
/// [`crate::creds`]): its files are opened as the client would open them,
/// and a file it cannot read is only said to be unreadable.
fn resolve_probes(
    config: &TraceConfig,
    creds: Option<&crate::creds::ClientCreds>,
    deadline: Option<Instant>,
) -> Result<Probes, String> {
    if config.uprobes.is_empty() && config.usdt.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let creds = creds.ok_or("probes are refused: who the client is is unknown")?;
    // Under a cgroup filter, paths are looked up in the selected processes'
    // own mount namespaces (a container's files), and the probes placed
    // in every process that maps the file: the kernel keeps the events of
    // the selected cgroups, including processes started later.
    let cgroups = resolve_cgroups(config)?;
    let pids = match (&config.pids, cgroups.is_empty()) {
        (Some(pids), _) => pids.clone(),
        (None, false) => crate::cgroup::Hierarchy::find()
            .map(|h| cgroups.iter().flat_map(|c| h.processes(c)).collect())
            .unwrap_or_default(),
        (None, true) => Vec::new(),
    };
    let anywhere = config.pids.is_none();
    let (mut uprobes, mut usdt): Probes = crate::creds::run_as(creds, || {
        let uprobes = config
            .uprobes
            .iter()
            .map(|spec| {
                in_time(deadline)?;
                crate::kernel::uprobes::resolve_in(spec, &pids).map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .flatten()
            .collect();
        Ok::<Probes, String>((uprobes, resolve_usdt(&config.usdt, &pids, deadline)?))
    })
    .map_err(|e| format!("probes are refused: {e}"))??;
    if anywhere {
        uprobes.iter_mut().for_each(|p| p.pids.clear());
        usdt.iter_mut().for_each(|s| s.pids.clear());
    }
    Ok((uprobes, usdt))
}

/// Every site of every `--usdt` probe in the `pids` processes (every
/// process when empty), each spec matching at least one.
fn resolve_usdt(
    specs: &[String],
    pids: &[u32],
    deadline: Option<Instant>,
) -> Result<Vec<crate::kernel::usdt::UsdtSite>, String> {
    let mut sites: Vec<crate::kernel::usdt::UsdtSite> = Vec::new();
    for spec in specs {
        in_time(deadline)?;
        let found = crate::kernel::usdt::resolve_in(spec, pids).map_err(|e| e.to_string())?;
        log::info!("--usdt {spec}: {} sites", found.len());
        for site in found {
            // A site two specs match is placed once (else each pass would
            // be recorded twice), as the first spec says.
            if let Some(first) = sites
                .iter()
                .find(|s| s.file == site.file && s.offset == site.offset && s.pids == site.pids)
            {
                log::warn!(
                    "--usdt {spec}: {} is already recorded as --usdt {}",
                    site.event_name(),
                    first.spec
                );
                continue;
            }
            sites.push(site);
        }
    }
    Ok(sites)
}

/// The most probes one session places: each `--uprobe` (entry and return)
/// and `--usdt` site counts once per process it is placed in. Each is a
/// perf event and a link, a descriptor or two the manager holds, and the
/// kernel takes a while to attach and detach each.
pub(super) const MAX_PROBE_PLACES: usize = 4096;

/// Refuses a session whose probes would be placed more than
/// [`MAX_PROBE_PLACES`] times.
fn check_attachments(
    uprobes: &[crate::kernel::uprobes::ResolvedProbe],
    usdt: &[crate::kernel::usdt::UsdtSite],
    pids: Option<&[u32]>,
) -> Result<(), String> {
    let filtered = pids.map_or(0, <[u32]>::len).max(1);
    let places = |own: usize| if own == 0 { filtered } else { own };
    let total: usize = uprobes
        .iter()
        .map(|p| 2 * places(p.pids.len()))
        .sum::<usize>()
        + usdt.iter().map(|s| places(s.pids.len())).sum::<usize>();
    if total > MAX_PROBE_PLACES {
        return Err(format!(
            "the probes would be placed {total} times (each --uprobe twice, entry and return, \
             and each probe once in each process); at most {MAX_PROBE_PLACES}: name fewer \
             probes or processes"
        ));
    }
    Ok(())
}

/// The longest one request's setup may take: resolving its probes and
/// tracepoints, then loading and attaching them, each.
pub(super) const SETUP_LIMIT: Duration = Duration::from_secs(60);

/// An error once `deadline` has passed.
fn in_time(deadline: Option<Instant>) -> Result<(), String> {
    match deadline {
        Some(d) if Instant::now() > d => Err(format!(
            "resolving the probes and tracepoints took longer than {} s, the most one request \
             may take: name fewer probes, tracepoints or processes",
            SETUP_LIMIT.as_secs()
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_placed_too_often_are_refused() {
        let exe = std::env::current_exe().unwrap();
        let probe =
            crate::kernel::uprobes::resolve(&format!("{}:0x1000", exe.display()), None).unwrap();
        let probes = [probe];
        // Entry and return in each of 2 048 processes: 4 096 places.
        let pids: Vec<u32> = (1..=2048).collect();
        assert!(check_attachments(&probes, &[], Some(&pids)).is_ok());
        let pids: Vec<u32> = (1..=2049).collect();
        let e = check_attachments(&probes, &[], Some(&pids)).unwrap_err();
        assert!(e.contains("4098 times"), "{e}");
        // Without a pid filter a probe is placed once, for every process.
        assert!(check_attachments(&probes, &[], None).is_ok());
    }
}
