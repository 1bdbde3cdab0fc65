//! Starting the kernel provider: privileges, tracefs, the tracepoints' field
//! layout, the object (patched with BTF offsets for the BTF tracepoint
//! programs), the per-CPU rings, then the programs of the enabled categories.

use std::io;
use std::os::fd::AsFd as _;

use aya::EbpfLoader;
use aya::maps::{ArrayOfMaps, CgroupArray, HashMap as BpfHashMap, Map, MapData, MapError, RingBuf};
use trace_common::category::{KERNEL_CATEGORIES, KERNEL_OFFCPU, KERNEL_PROFILE};
use trace_common::controller::StackOptions;
use trace_common::kernel::stack::{
    CALL_GRAPH_DWARF, CALL_GRAPH_FP, MAP_OFFCPU, MAP_STACK_SCRATCH, MAP_STACK_SEEN, OFFCPU_MAX,
    SOURCE_SYSCALL, SOURCE_TRACEPOINT, SOURCE_UPROBE, SOURCE_USDT, STACK_SEEN_MAX, STACK_SLOTS,
    StackConfig, USER_STACK_CHUNK, USER_STACK_MAX,
};
use trace_common::kernel::{
    BTF_VARIANTS, FILTER_CGROUPS, FILTER_PIDS, KernelLayout, MAP_CGROUPS, MAP_EVENTS, MAP_FOLLOWED,
    MAP_LAYOUT, MAP_USDT_SPECS, NAMING_CATEGORY, PAIR_SYSCALLS, TRACEPOINTS, TracepointSpec,
};

use super::attach::fill_array;
use super::drain::{CpuRing, Readiness, RingPositions};
use super::error::is_eperm;
use super::follow::open_cgroups;
use super::format::{fill_layout, parse_format};
use super::reorder::Reorder;
use super::{
    KernelConfig, KernelError, KernelProvider, MIN_BACKLOG_BYTES, btf, patch, ring_size, tracefs,
};
use crate::procfs::process_exists;

/// The eBPF object built from `trace-ebpf` by this crate's build script.
pub(super) static EBPF_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/trace-ebpf"));

/// The `Pod` wrapper through which the layout goes into its map (the layout
/// type lives in `trace-common`, which does not depend on aya).
#[repr(transparent)]
#[derive(Clone, Copy)]
pub(super) struct LayoutValue(pub(super) KernelLayout);

// SAFETY: `KernelLayout` is `#[repr(C)]` plain data made only of integer
// fields with no padding (its size is asserted in trace-common) and no
// pointers, so any bytes are a valid value and its bytes may be copied to
// and from the kernel.
unsafe impl aya::Pod for LayoutValue {}

impl KernelProvider {
    /// Loads the eBPF programs of the enabled categories and attaches them.
    ///
    /// Needs root (or CAP_BPF and CAP_PERFMON, and CAP_SYS_ADMIN when tracefs
    /// must be mounted). No runtime is needed until
    /// [`KernelProvider::readable`].
    pub fn start(config: &KernelConfig) -> Result<Self, KernelError> {
        let categories = check_categories(&config.categories)?;
        let filtering = config.pids.is_some() || !config.cgroups.is_empty();
        let cgroups = open_cgroups(&config.cgroups)?;
        if filtering
            && categories
                .iter()
                .any(|c| c == trace_common::category::KERNEL_IRQ)
        {
            // The client says it to the user who named the category.
            log::info!(
                "kernel:irq records nothing with a pid filter: interrupts belong to no process"
            );
        }
        // The programs that name processes and threads are attached
        // whatever the categories.
        let specs: Vec<&'static TracepointSpec> = TRACEPOINTS
            .iter()
            .filter(|t| t.category == NAMING_CATEGORY || categories.iter().any(|c| c == t.category))
            .collect();
        check_privileges()?;
        if let Some(pids) = &config.pids
            && let Some(&pid) = pids.iter().find(|&&p| !process_exists(p))
        {
            return Err(KernelError::NoSuchProcess { pid });
        }

        let root = tracefs::tracefs_root().map_err(|source| {
            if source.kind() == io::ErrorKind::PermissionDenied {
                KernelError::Permission {
                    detail: format!("cannot mount tracefs at {}: {source}", tracefs::TRACEFS),
                }
            } else {
                KernelError::Tracefs {
                    path: tracefs::TRACEFS.into(),
                    source,
                }
            }
        })?;

        let mut layout = KernelLayout {
            version: KernelLayout::VERSION,
            wakeup_bytes: wakeup_bytes(ring_size(
                config.ring_buffer_bytes / aya::util::online_cpus().map_or(1, |c| c.len().max(1)),
            )),
            filter: if config.pids.is_some() {
                FILTER_PIDS
            } else if !cgroups.is_empty() {
                FILTER_CGROUPS
            } else {
                0
            }
                // Pairs of tracepoints selected by name are kept inside the
                // system call slices they begin or end in, which the
                // translator can do only when it sees each call's entry
                // before what happens inside the call.
                | if config.separate_syscall_events || !config.tracepoints.pairs.is_empty() {
                    0
                } else {
                    PAIR_SYSCALLS
                },
            self_tgid: std::process::id(),
            cgroups: cgroups.len() as u32,
            stop_ts: u64::MAX,
            stacks: stack_config(&config.stacks)?,
            ..KernelLayout::default()
        };
        // A tracepoint some kernels lack (architecture, configuration) is
        // left out with a warning; any other missing one is an error.
        let mut specs = specs;
        specs.retain(|spec| {
            let there = tracefs::format_path(&root, spec.group, spec.event).exists();
            if !there && spec.optional {
                log::warn!(
                    "tracepoint {}:{} does not exist on this kernel: {} records without it",
                    spec.group,
                    spec.event,
                    spec.category
                );
            }
            there || !spec.optional
        });
        for spec in &specs {
            let path = tracefs::format_path(&root, spec.group, spec.event);
            let text = std::fs::read_to_string(&path).map_err(|source| {
                if source.kind() == io::ErrorKind::PermissionDenied {
                    KernelError::Permission {
                        detail: format!("cannot read {}: {source}", path.display()),
                    }
                } else {
                    KernelError::TracepointMissing {
                        group: spec.group,
                        event: spec.event,
                        path: path.clone(),
                        source,
                    }
                }
            })?;
            let format = parse_format(&text).map_err(|source| KernelError::Format {
                group: spec.group,
                event: spec.event,
                source,
            })?;
            let known = fill_layout(&mut layout, spec, &format);
            debug_assert!(known, "no layout for {}:{}", spec.group, spec.event);
        }

        raise_memlock_limit();
        // The BTF tracepoint programs get the running kernel's field offsets
        // written into a copy of the object; without BTF (or asked not to)
        // the classic programs serve alone.
        let wants_btf = !config.classic_tracepoints
            && specs
                .iter()
                .any(|s| BTF_VARIANTS.iter().any(|v| v.classic == s.program));
        let object = if wants_btf {
            match btf_field_offsets().and_then(|map| {
                let mut object = ObjectBytes::copy(EBPF_OBJECT);
                patch::patch_offsets(object.bytes_mut(), &map).map_err(|e| e.to_string())?;
                Ok(object)
            }) {
                Ok(object) => object,
                Err(why) => {
                    log::info!("using classic tracepoints only: {why}");
                    ObjectBytes::Embedded
                }
            }
        } else {
            ObjectBytes::Embedded
        };
        let use_btf = matches!(object, ObjectBytes::Patched(_));
        let object = without_missing_helpers(object);
        let cpus = aya::util::online_cpus().map_err(|(path, source)| KernelError::Cpus {
            path: path.into(),
            source,
        })?;
        let possible = aya::util::nr_cpus().map_err(|(path, source)| KernelError::Cpus {
            path: path.into(),
            source,
        })?;
        let per_cpu_bytes = ring_size(config.ring_buffer_bytes / cpus.len().max(1));
        let offcpu = categories.iter().any(|c| c == KERNEL_OFFCPU);
        let stacks = offcpu
            || categories.iter().any(|c| c == KERNEL_PROFILE)
            || layout.stacks.probe_sources != 0;
        let ring_buffer_bytes = per_cpu_bytes * cpus.len();
        let mut ebpf = EbpfLoader::new()
            .map_max_entries(MAP_EVENTS, possible as u32)
            .map_max_entries(MAP_USDT_SPECS, config.usdt.len().max(1) as u32)
            // The stack maps take memory only when stacks are recorded.
            .map_max_entries(MAP_OFFCPU, if offcpu { OFFCPU_MAX } else { 1 })
            .map_max_entries(MAP_STACK_SEEN, if stacks { STACK_SEEN_MAX } else { 1 })
            .map_max_entries(MAP_STACK_SCRATCH, if stacks { STACK_SLOTS } else { 1 })
            .load(object.bytes())
            .map_err(super::error::load_error)?;

        fill_array(&mut ebpf, MAP_LAYOUT, [LayoutValue(layout)])?;
        if !cgroups.is_empty() {
            let cgroup_err = |e: MapError| KernelError::Map {
                name: MAP_CGROUPS,
                source: Box::new(e),
            };
            let map = ebpf
                .map_mut(MAP_CGROUPS)
                .ok_or(KernelError::MissingInObject {
                    what: "map",
                    name: MAP_CGROUPS,
                })?;
            let mut array = CgroupArray::try_from(map).map_err(cgroup_err)?;
            for (i, (_, dir)) in cgroups.iter().enumerate() {
                array.set(i as u32, dir.as_fd(), 0).map_err(cgroup_err)?;
            }
        }

        let events = ebpf
            .take_map(MAP_EVENTS)
            .ok_or(KernelError::MissingInObject {
                what: "map",
                name: MAP_EVENTS,
            })?;
        let map_err = |e: MapError| KernelError::Map {
            name: MAP_EVENTS,
            source: Box::new(e),
        };
        let mut ring_array: ArrayOfMaps<MapData, MapData> =
            ArrayOfMaps::try_from(events).map_err(map_err)?;
        let epoll = nix::sys::epoll::Epoll::new(nix::sys::epoll::EpollCreateFlags::EPOLL_CLOEXEC)
            .map_err(io::Error::from)?;
        let mut rings = Vec::with_capacity(cpus.len());
        for &cpu in &cpus {
            let definition = aya_obj::Map::new_from_params(
                aya_obj::generated::bpf_map_type::BPF_MAP_TYPE_RINGBUF as u32,
                0,
                0,
                per_cpu_bytes as u32,
                0,
            );
            let data = MapData::create(definition, "trace_events", None).map_err(|e| {
                if is_eperm(&e) {
                    KernelError::Permission {
                        detail: format!("creating the ring buffer of CPU {cpu}: {e}"),
                    }
                } else {
                    map_err(e)
                }
            })?;
            ring_array.set(cpu, &data, 0).map_err(map_err)?;
            let ring = RingBuf::try_from(Map::RingBuf(data)).map_err(map_err)?;
            epoll
                .add(
                    &ring,
                    nix::sys::epoll::EpollEvent::new(
                        nix::sys::epoll::EpollFlags::EPOLLIN,
                        u64::from(cpu),
                    ),
                )
                .map_err(io::Error::from)?;
            let positions = RingPositions::map(&ring)
                .inspect_err(|e| log::debug!("no fill level for CPU {cpu}'s ring: {e}"))
                .ok();
            rings.push(CpuRing {
                cpu,
                ring,
                positions,
                newest: 0,
            });
        }

        let followed = match filtering {
            true => {
                let map = ebpf
                    .take_map(MAP_FOLLOWED)
                    .ok_or(KernelError::MissingInObject {
                        what: "map",
                        name: MAP_FOLLOWED,
                    })?;
                let map = BpfHashMap::try_from(map).map_err(|e| KernelError::Map {
                    name: MAP_FOLLOWED,
                    source: Box::new(e),
                })?;
                Some(map)
            }
            false => None,
        };

        let mut provider = KernelProvider {
            ebpf,
            rings,
            _ring_array: ring_array,
            readiness: Readiness::Plain(epoll.0),
            reorder: Reorder::default(),
            detached: false,
            followed,
            attached: Vec::new(),
            probe_links: Vec::new(),
            categories,
            ring_buffer_bytes,
            drain_limit: (per_cpu_bytes / 32).max(1024),
            pending: false,
            backlog_limit: config.backlog_bytes.max(MIN_BACKLOG_BYTES),
            next_tick: None,
            detached_misses: 0,
            malformed: 0,
            layout,
            stop_ts: None,
            deadline: config.deadline,
        };
        let pids = config.pids.as_deref().unwrap_or_default();
        for &pid in pids {
            provider.follow(pid)?;
        }
        provider.follow_cgroups(&cgroups)?;
        let mut kernel_btf = None;
        for spec in specs {
            let variant = BTF_VARIANTS.iter().find(|v| v.classic == spec.program);
            if let Some(variant) = variant.filter(|_| use_btf) {
                match provider.attach_btf(variant, &mut kernel_btf) {
                    Ok(()) => continue,
                    Err(e) => log::warn!(
                        "BTF tracepoint {} unusable, using the classic one: {e}",
                        variant.tracepoint
                    ),
                }
            }
            provider.attach(spec)?;
            provider.in_time()?;
        }
        if !config.uprobes.is_empty() {
            provider.attach_uprobes(&config.uprobes, pids)?;
        }
        if !config.usdt.is_empty() {
            provider.attach_usdt(&config.usdt, pids)?;
        }
        if !config.tracepoints.is_empty() {
            provider.attach_tracepoints(&config.tracepoints)?;
        }
        if provider.categories.iter().any(|c| c == KERNEL_PROFILE) {
            provider.attach_profile(&cpus, config.stacks.sample_hz)?;
        }
        // Threads created between the first look and the attachment.
        for &pid in pids {
            provider.follow(pid)?;
        }
        provider.follow_cgroups(&cgroups)?;
        provider.in_time()?;
        provider.deadline = None;
        log::info!(
            "kernel provider started: categories {:?}, programs {:?}, ring buffers {} x {} KiB",
            provider.categories,
            provider.attached,
            provider.rings.len(),
            per_cpu_bytes >> 10
        );
        Ok(provider)
    }
}

/// What the stack programs are to do, from `options`.
fn stack_config(options: &StackOptions) -> Result<StackConfig, KernelError> {
    let mut probe_sources = 0u32;
    for name in &options.probe_stacks {
        let source = match name.as_str() {
            "uprobe" => SOURCE_UPROBE,
            "usdt" => SOURCE_USDT,
            "syscall" => SOURCE_SYSCALL,
            "tracepoint" => SOURCE_TRACEPOINT,
            other => {
                return Err(KernelError::Stacks(format!(
                    "no probe kind {other:?} has stacks (known: {})",
                    StackOptions::PROBE_SOURCES.join(", ")
                )));
            }
        };
        probe_sources |= 1 << source;
    }
    let bytes = options.stack_bytes as usize;
    if !(USER_STACK_CHUNK..=USER_STACK_MAX).contains(&bytes) {
        return Err(KernelError::Stacks(format!(
            "the user stack copy must be {USER_STACK_CHUNK} to {USER_STACK_MAX} bytes, not {bytes}"
        )));
    }
    if options.sample_hz == 0 || options.sample_hz > super::profile::MAX_SAMPLE_HZ {
        return Err(KernelError::Stacks(format!(
            "the sampling frequency must be 1 to {} Hz, not {}",
            super::profile::MAX_SAMPLE_HZ,
            options.sample_hz
        )));
    }
    Ok(StackConfig {
        call_graph: if options.frame_pointers {
            CALL_GRAPH_FP
        } else {
            CALL_GRAPH_DWARF
        },
        // Whole pieces: the program copies the stack a piece at a time.
        user_stack_bytes: (bytes - bytes % USER_STACK_CHUNK) as u32,
        probe_sources,
        reserved: 0,
        offcpu_min_ns: options.offcpu_min_us.saturating_mul(1000),
    })
}

/// The eBPF object: as embedded, or a copy with field offsets patched in.
pub(super) enum ObjectBytes {
    /// [`EBPF_OBJECT`] as built.
    Embedded,
    /// A patched copy, in 8-byte words so that it is as aligned as the
    /// embedded one.
    Patched(Vec<u64>),
}

impl ObjectBytes {
    /// A copy of `bytes` (the embedded object) to patch.
    pub(super) fn copy(bytes: &[u8]) -> ObjectBytes {
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        for (word, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            *word = u64::from_ne_bytes(b);
        }
        ObjectBytes::Patched(words)
    }

    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            ObjectBytes::Embedded => EBPF_OBJECT,
            ObjectBytes::Patched(words) => {
                // SAFETY: a `[u64]` is valid as bytes: same memory, no padding,
                // and every bit pattern is a valid `u8`.
                let all = unsafe {
                    std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), words.len() * 8)
                };
                &all[..EBPF_OBJECT.len()]
            }
        }
    }

    pub(super) fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            ObjectBytes::Embedded => &mut [],
            ObjectBytes::Patched(words) => {
                // SAFETY: as in `bytes`; the borrow of `words` is exclusive.
                let all = unsafe {
                    std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), words.len() * 8)
                };
                &mut all[..EBPF_OBJECT.len()]
            }
        }
    }
}

/// Whether the running kernel has the `bpf_loop` helper (5.17 on, and
/// backported by some distributions): its function is in the kernel's
/// symbols. `TRACE_EBPF_WITHOUT_BPF_LOOP=1` makes it say no, so that the
/// object for older kernels can be tried on this one.
fn has_bpf_loop() -> bool {
    if std::env::var_os("TRACE_EBPF_WITHOUT_BPF_LOOP").is_some_and(|v| v == "1") {
        return false;
    }
    match std::fs::read_to_string("/proc/kallsyms") {
        Ok(symbols) => symbols.lines().any(|l| l.ends_with(" bpf_loop")),
        // Without the symbols, the version says.
        Err(_) => std::fs::read_to_string("/proc/sys/kernel/osrelease").is_ok_and(|r| {
            let mut parts = r.trim().split(|c: char| !c.is_ascii_digit());
            let mut next = || parts.next().and_then(|p| p.parse::<u32>().ok());
            next().zip(next()).is_some_and(|v| v >= (5, 17))
        }),
    }
}

/// `object`, with the calls of `bpf_loop` taken out when the kernel lacks
/// it: the stack programs then write no Python frames, and everything else
/// loads as before (but the program of `-e`, whose filters need it).
pub(super) fn without_missing_helpers(object: ObjectBytes) -> ObjectBytes {
    if has_bpf_loop() {
        return object;
    }
    let mut object = match object {
        ObjectBytes::Embedded => ObjectBytes::copy(EBPF_OBJECT),
        patched => patched,
    };
    // The filter machine of `-e` cannot do without it: that program is left
    // to be refused whole.
    let keep = [trace_common::kernel::tracepoint::TRACEPOINT_PROGRAM];
    match patch::remove_helper_calls(object.bytes_mut(), patch::BPF_FUNC_LOOP, &keep) {
        Ok(n) => log::info!(
            "this kernel has no bpf_loop helper (Linux 5.17 on): stacks are written without \
             Python frames ({n} calls taken out)"
        ),
        Err(e) => log::info!("bpf_loop calls not taken out: {e}"),
    }
    object
}

/// The real offsets of every `MARK_*` field in the running kernel, from its
/// BTF, for [`patch::patch_offsets`].
pub(super) fn btf_field_offsets() -> Result<Vec<(i16, u32)>, String> {
    use trace_common::kernel::{
        MARK_REGS_ARGS, MARK_REGS_NR, MARK_TASK_COMM, MARK_TASK_CPU, MARK_TASK_EXIT_STATE,
        MARK_TASK_PID, MARK_TASK_PRIO, MARK_TASK_TGID,
    };
    let btf = btf::Btf::from_kernel()
        .map_err(|e| format!("no kernel BTF at {}: {e}", btf::VMLINUX_BTF))?
        .map_err(|e| e.to_string())?;
    let task = |f: &str| {
        btf.member_offset("task_struct", f)
            .map_err(|e| e.to_string())
    };
    let regs = |f: &str| btf.member_offset("pt_regs", f).map_err(|e| e.to_string());
    let comm = task("comm")?;
    let cpu = task("cpu").or_else(|_| task("thread_info.cpu"))?;
    let mut map = vec![
        (MARK_TASK_PID, task("pid")?),
        (MARK_TASK_TGID, task("tgid")?),
        (MARK_TASK_PRIO, task("prio")?),
        (MARK_TASK_COMM, comm),
        (MARK_TASK_COMM + 8, comm + 8),
        (MARK_TASK_CPU, cpu),
        (MARK_TASK_EXIT_STATE, task("exit_state")?),
    ];
    let (args, nr): ([u32; 6], u32) = if cfg!(target_arch = "x86_64") {
        (
            [
                regs("di")?,
                regs("si")?,
                regs("dx")?,
                regs("r10")?,
                regs("r8")?,
                regs("r9")?,
            ],
            regs("orig_ax")?,
        )
    } else if cfg!(target_arch = "aarch64") {
        let r = regs("regs")?;
        (
            [regs("orig_x0")?, r + 8, r + 16, r + 24, r + 32, r + 40],
            regs("syscallno")?,
        )
    } else {
        return Err("system call registers are not known on this CPU".to_owned());
    };
    map.extend(MARK_REGS_ARGS.iter().copied().zip(args));
    map.push((MARK_REGS_NR, nr));
    Ok(map)
}

/// The enabled categories, deduplicated, or an error naming an unknown one.
pub(super) fn check_categories(requested: &[String]) -> Result<Vec<String>, KernelError> {
    let mut out: Vec<String> = Vec::new();
    for name in requested {
        if !KERNEL_CATEGORIES.iter().any(|(known, _)| known == name) {
            return Err(KernelError::UnknownCategory {
                name: name.clone(),
                known: KERNEL_CATEGORIES
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        if !out.contains(name) {
            out.push(name.clone());
        }
    }
    Ok(out)
}

/// How full the ring buffer gets before the programs wake the reader: a
/// quarter of it, leaving room for the events written while it wakes up.
fn wakeup_bytes(ring_buffer_bytes: usize) -> u32 {
    u32::try_from(ring_buffer_bytes / 4).unwrap_or(u32::MAX)
}

/// Fails with [`KernelError::Permission`] unless this process may load
/// tracing programs ([`super::privileges`]).
fn check_privileges() -> Result<(), KernelError> {
    match super::privileges::missing() {
        None => Ok(()),
        Some(detail) => Err(KernelError::Permission { detail }),
    }
}

/// Lifts RLIMIT_MEMLOCK for kernels that still charge BPF memory to it
/// (before 5.11); harmless elsewhere.
pub(crate) fn raise_memlock_limit() {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads the valid rlimit struct passed by reference.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) } != 0 {
        log::debug!(
            "cannot raise RLIMIT_MEMLOCK: {}",
            io::Error::last_os_error()
        );
    }
}

/// [`KernelError::TooSlow`] once `deadline` has passed.
pub(super) fn in_time(deadline: Option<std::time::Instant>) -> Result<(), KernelError> {
    match deadline {
        Some(d) if std::time::Instant::now() > d => Err(KernelError::TooSlow),
        _ => Ok(()),
    }
}

impl KernelProvider {
    /// [`in_time`] with the deadline the provider was started with.
    pub(super) fn in_time(&self) -> Result<(), KernelError> {
        in_time(self.deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_common::category::KERNEL_SCHED;

    #[test]
    fn categories_are_deduplicated() {
        let c = check_categories(&[KERNEL_SCHED.into(), KERNEL_SCHED.into()]).unwrap();
        assert_eq!(c, vec![KERNEL_SCHED.to_owned()]);
    }
}
