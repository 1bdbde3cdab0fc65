//! The kernel trace provider: loads the eBPF programs of the enabled kernel
//! categories and drains their ring buffer.
//!
//! The eBPF object (crate `trace-ebpf`) is built by this crate's build script
//! and embedded in the binary. [`KernelProvider::start`]:
//!
//! 1. checks the process may load eBPF programs (root, or CAP_BPF and
//!    CAP_PERFMON);
//! 2. finds tracefs, mounting it at `/sys/kernel/tracing` if need be;
//! 3. parses the format file of every tracepoint of the enabled categories
//!    into a [`KernelLayout`] (field offsets of the running kernel);
//! 4. loads the object, creates one ring buffer per online CPU (together
//!    about the configured size) and puts them in the `EVENTS` array of
//!    maps, stores the layout in the `LAYOUT` map, and only then loads and
//!    attaches the programs of the enabled categories (a disabled category's
//!    programs are never loaded, so it costs nothing).
//!
//! With a pid filter ([`KernelConfig::pids`]) the threads of the given
//! processes go into the `FOLLOWED` map before the programs attach (and once
//! more after, for threads created in between); the programs follow every
//! task a followed task creates from then on, so a process tree is recorded
//! whole, and [`KernelProvider::follow`] adds a process later (a command
//! started for the recording).
//!
//! Events are then read with [`KernelProvider::readable`] (await data on any
//! CPU's ring, no spinning) and [`KernelProvider::drain`] (decode the
//! entries), which merges the CPUs' events into time order: an event is
//! handed on once nothing stamped earlier can still arrive, that is
//! [`REORDER_WINDOW`] after it happened, or at once after
//! [`KernelProvider::detach`]. Events the programs could not write (a CPU's
//! ring buffer full) are counted per CPU in the kernel and reported by
//! [`KernelProvider::dropped`] and [`KernelProvider::dropped_per_cpu`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), trace_manager::kernel::KernelError> {
//! use trace_manager::kernel::{KernelConfig, KernelProvider};
//! let mut kernel = KernelProvider::start(&KernelConfig::default())?;
//! for _ in 0..10 {
//!     kernel.readable().await?;
//!     kernel.drain(&mut |event| println!("{event:?}"));
//! }
//! kernel.detach();
//! kernel.drain(&mut |event| println!("{event:?}"));
//! println!("lost: {}", kernel.dropped()?);
//! # Ok(()) }
//! ```

pub mod btf;
pub mod format;
mod patch;
pub mod perf_probe;
mod reorder;
pub mod tracefs;
pub mod tracepoints;

#[cfg(test)]
mod tests;

use crate::clock::boottime_ns;
use std::io;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd};
use std::path::PathBuf;

use aya::maps::{
    Array, ArrayOfMaps, HashMap as BpfHashMap, Map, MapData, MapError, PerCpuArray, RingBuf,
};
use aya::programs::{BtfTracePoint, ProgramError, TracePoint};
use aya::{Ebpf, EbpfError, EbpfLoader};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use trace_common::category::{KERNEL_CATEGORIES, KERNEL_PROC};
use trace_common::kernel::{
    BTF_VARIANTS, BtfVariant, COUNTER_COUNT, COUNTER_FOLLOW_FULL, EMIT_PROC, FILTER_PIDS,
    FOLLOW_PROGRAMS, KernelEvent, KernelLayout, MAP_COUNTERS, MAP_EVENTS, MAP_FOLLOWED, MAP_LAYOUT,
    MAP_USDT_SPECS, TRACEPOINTS, TracepointSpec, USDT_PROGRAM, UsdtSpec, parse,
};

use self::format::{FormatError, fill_layout, parse_format};
use self::reorder::Reorder;

/// The eBPF object built from `trace-ebpf` by this crate's build script.
static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/trace-ebpf"));

/// Default size of the kernel ring buffers, all CPUs together.
pub const DEFAULT_RING_BUFFER_BYTES: usize = 8 << 20;

/// How long after it happened an event is handed on at the latest: the
/// CPUs' ring buffers are merged in time order, and an event stamped on one
/// CPU may be committed to its ring a little after a later event on
/// another (a virtual CPU can be paused in between).
pub const REORDER_WINDOW: std::time::Duration = std::time::Duration::from_millis(50);

/// Longest time events wait in the ring buffer before
/// [`KernelProvider::readable`] returns anyway.
pub const DRAIN_INTERVAL: std::time::Duration = std::time::Duration::from_millis(50);

/// What the kernel provider records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelConfig {
    /// Enabled kernel categories, by exact name (`kernel:sched`,
    /// `kernel:proc`; see [`KERNEL_CATEGORIES`]). Programs of other
    /// categories are not loaded.
    pub categories: Vec<String>,
    /// Size of the ring buffers, all CPUs together, in bytes: each online
    /// CPU gets an equal share, rounded up to a power of two times the page
    /// size.
    pub ring_buffer_bytes: usize,
    /// `None`: record every process. `Some(pids)`: record only these
    /// processes (all their threads) and every task they create from the
    /// start on; more can be added with [`KernelProvider::follow`].
    pub pids: Option<Vec<u32>>,
    /// Functions to probe (entry and return), resolved; their events carry
    /// their index in this list.
    pub uprobes: Vec<crate::uprobes::ResolvedProbe>,
    /// USDT probe sites, resolved; their events carry their index in this
    /// list.
    pub usdt: Vec<crate::usdt::UsdtSite>,
    /// Tracepoints selected by name (`-e`), resolved.
    pub tracepoints: std::sync::Arc<tracepoints::Selection>,
    /// Use the classic tracepoint programs even where the kernel's BTF
    /// allows the cheaper BTF tracepoint ones (they write the same events).
    pub classic_tracepoints: bool,
}

impl Default for KernelConfig {
    /// Every known kernel category, [`DEFAULT_RING_BUFFER_BYTES`].
    fn default() -> Self {
        KernelConfig {
            categories: KERNEL_CATEGORIES
                .iter()
                .map(|(name, _)| (*name).to_owned())
                .collect(),
            ring_buffer_bytes: DEFAULT_RING_BUFFER_BYTES,
            pids: None,
            uprobes: Vec::new(),
            usdt: Vec::new(),
            tracepoints: Default::default(),
            classic_tracepoints: false,
        }
    }
}

/// Why the kernel provider could not start or read.
///
/// Every message is one sentence a user can act on.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The process may not load eBPF programs or mount tracefs.
    #[error(
        "permission denied: loading kernel tracing programs needs root \
         (or the CAP_BPF and CAP_PERFMON capabilities): {detail}"
    )]
    Permission {
        /// What was refused.
        detail: String,
    },
    /// tracefs is neither mounted nor mountable.
    #[error("tracefs is not available at {path}: {source}")]
    Tracefs {
        /// Where it was looked for.
        path: PathBuf,
        /// Why it is not there.
        #[source]
        source: io::Error,
    },
    /// A tracepoint of an enabled category does not exist on this kernel.
    #[error("tracepoint {group}:{event} is not available on this kernel ({path}: {source})")]
    TracepointMissing {
        /// Tracepoint group.
        group: &'static str,
        /// Tracepoint name.
        event: &'static str,
        /// The format file that could not be read.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: io::Error,
    },
    /// A tracepoint's format file could not be understood.
    #[error("cannot understand the format of tracepoint {group}:{event}: {source}")]
    Format {
        /// Tracepoint group.
        group: &'static str,
        /// Tracepoint name.
        event: &'static str,
        /// What is wrong.
        #[source]
        source: FormatError,
    },
    /// A requested category is not a kernel category this provider knows.
    #[error("unknown kernel category `{name}` (known: {known})")]
    UnknownCategory {
        /// The requested name.
        name: String,
        /// The known categories, comma-separated.
        known: String,
    },
    /// The eBPF object could not be loaded (maps created).
    #[error("cannot load the kernel tracing eBPF object: {source}")]
    Load {
        /// The loader's error.
        #[source]
        source: Box<EbpfError>,
    },
    /// The object lacks a program or map this crate expects (a build mix-up).
    #[error("the kernel tracing eBPF object has no {what} `{name}`")]
    MissingInObject {
        /// `program` or `map`.
        what: &'static str,
        /// Its name.
        name: &'static str,
    },
    /// The kernel rejected a program (the verifier log is logged at error
    /// level).
    #[error("the kernel rejected eBPF program `{program}`: {reason}")]
    ProgramLoad {
        /// Program name.
        program: &'static str,
        /// The kernel's answer, without the verifier log.
        reason: String,
        /// The loader's error, verifier log included.
        #[source]
        source: Box<ProgramError>,
    },
    /// A program could not be attached to its tracepoint.
    #[error("cannot attach eBPF program `{program}` to tracepoint {tracepoint}: {source}")]
    Attach {
        /// Program name.
        program: &'static str,
        /// `group:event`.
        tracepoint: String,
        /// The loader's error.
        #[source]
        source: Box<ProgramError>,
    },
    /// A probe opened directly (a USDT site) could not be placed.
    #[error("cannot place probe {probe}: {source}")]
    ProbeAttach {
        /// What and where.
        probe: String,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
    /// A map operation failed.
    #[error("eBPF map `{name}`: {source}")]
    Map {
        /// Map name.
        name: &'static str,
        /// The map error.
        #[source]
        source: Box<MapError>,
    },
    /// The CPUs could not be counted.
    #[error("cannot tell which CPUs there are ({path}): {source}")]
    Cpus {
        /// The file read.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// A process to follow does not exist.
    #[error("no process with id {pid} (it may have exited)")]
    NoSuchProcess {
        /// The process id asked for.
        pid: u32,
    },
    /// Waiting for the ring buffer failed.
    #[error("waiting for kernel events: {0}")]
    Io(#[from] io::Error),
}

/// The descriptor that is readable when any CPU's ring buffer has data (an
/// epoll instance watching them all), before and after it is registered
/// with tokio.
enum Readiness {
    /// Not yet registered (no runtime needed until [`KernelProvider::readable`]).
    Plain(std::os::fd::OwnedFd),
    /// Registered with the tokio reactor.
    Async(AsyncFd<std::os::fd::OwnedFd>),
    /// Being registered.
    Moving,
}

/// One CPU's ring buffer.
struct CpuRing {
    cpu: u32,
    ring: RingBuf<MapData>,
    /// Its positions, to tell how full it is (`None` if they could not be
    /// mapped).
    positions: Option<RingPositions>,
}

/// A read-only mapping of a ring buffer's first two pages: the consumer
/// position (page 0) and the producer position (page 1).
struct RingPositions {
    base: std::ptr::NonNull<libc::c_void>,
    page: usize,
}

impl RingPositions {
    /// Maps the positions of `ring`.
    fn map(ring: &RingBuf<MapData>) -> io::Result<RingPositions> {
        let page = page_size();
        let len = std::num::NonZeroUsize::new(2 * page).ok_or(io::ErrorKind::InvalidInput)?;
        // SAFETY: a new read-only shared mapping of the ring buffer map's
        // first two pages, which the kernel allows for any reader; nothing
        // else refers to it, and `Drop` unmaps it.
        let base = unsafe {
            nix::sys::mman::mmap(
                None,
                len,
                nix::sys::mman::ProtFlags::PROT_READ,
                nix::sys::mman::MapFlags::MAP_SHARED,
                ring,
                0,
            )
        }
        .map_err(io::Error::from)?;
        Ok(RingPositions { base, page })
    }

    /// Bytes written and not yet consumed.
    fn backlog(&self) -> u64 {
        use std::sync::atomic::{AtomicU64, Ordering};
        // SAFETY: both positions are 8-aligned `u64`s at the start of their
        // pages, inside the mapping (which lives as long as `self`), and
        // the kernel and the consumer update them atomically.
        let (consumer, producer) = unsafe {
            let base = self.base.as_ptr().cast::<u8>();
            (
                (*base.cast::<AtomicU64>()).load(Ordering::Acquire),
                (*base.add(self.page).cast::<AtomicU64>()).load(Ordering::Acquire),
            )
        };
        producer.wrapping_sub(consumer)
    }
}

// SAFETY: the mapping belongs to the process, not to a thread, and is only
// read, with atomic loads; moving its owner to another thread is sound.
unsafe impl Send for RingPositions {}

impl Drop for RingPositions {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `map` made, used by no one else.
        if let Err(e) = unsafe { nix::sys::mman::munmap(self.base, 2 * self.page) } {
            log::debug!("unmapping ring buffer positions: {e}");
        }
    }
}

/// The system's page size.
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .ok()
        .filter(|&p| p > 0)
        .unwrap_or(4096)
}

/// The `Pod` wrapper through which the layout goes into its map (the layout
/// type lives in `trace-common`, which does not depend on aya).
#[repr(transparent)]
#[derive(Clone, Copy)]
struct LayoutValue(KernelLayout);

// SAFETY: `KernelLayout` is `#[repr(C)]` plain data made only of integer
// fields with no padding (its size is asserted in trace-common) and no
// pointers, so any bytes are a valid value and its bytes may be copied to
// and from the kernel.
unsafe impl aya::Pod for LayoutValue {}

/// The `Pod` wrapper through which a USDT site's argument spec goes into
/// its map.
#[repr(transparent)]
#[derive(Clone, Copy)]
struct UsdtSpecValue(UsdtSpec);

// SAFETY: `UsdtSpec` is `#[repr(C)]` plain data made of integers with no
// padding (its size is asserted in trace-common), so any bytes are a valid
// value.
unsafe impl aya::Pod for UsdtSpecValue {}

/// The loaded kernel provider. Dropping it detaches every program.
pub struct KernelProvider {
    ebpf: Ebpf,
    /// The online CPUs' ring buffers.
    rings: Vec<CpuRing>,
    /// The array of maps the programs find them in.
    _ring_array: ArrayOfMaps<MapData, MapData>,
    readiness: Readiness,
    /// Events read from the rings, waiting for their turn.
    reorder: Reorder,
    /// Everything read is handed on (the programs are detached).
    detached: bool,
    /// The followed threads, when a pid filter is set.
    followed: Option<BpfHashMap<MapData, u32, u8>>,
    /// Programs attached, by name.
    attached: Vec<&'static str>,
    /// Probes opened directly (USDT sites); dropping them removes them.
    probe_links: Vec<perf_probe::ProbeLink>,
    categories: Vec<String>,
    ring_buffer_bytes: usize,
    /// Most entries one [`KernelProvider::drain`] takes from one ring, so a
    /// flood cannot keep it looping forever.
    drain_limit: usize,
    /// The last drain stopped at `drain_limit` with entries left.
    pending: bool,
    /// When [`KernelProvider::readable`] returns at the latest.
    next_tick: Option<tokio::time::Instant>,
    /// Recursion misses of the programs when they were detached.
    detached_misses: u64,
    malformed: u64,
    /// The layout the programs read (kept to set its stop time).
    layout: KernelLayout,
    /// When the recording was cut ([`KernelProvider::cut`]).
    stop_ts: Option<u64>,
}

impl std::fmt::Debug for KernelProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelProvider")
            .field("attached", &self.attached)
            .field("categories", &self.categories)
            .field("ring_buffer_bytes", &self.ring_buffer_bytes)
            .field("malformed", &self.malformed)
            .finish_non_exhaustive()
    }
}

impl KernelProvider {
    /// Loads the eBPF programs of the enabled categories and attaches them.
    ///
    /// Needs root (or CAP_BPF and CAP_PERFMON, and CAP_SYS_ADMIN when tracefs
    /// must be mounted). No runtime is needed until
    /// [`KernelProvider::readable`].
    pub fn start(config: &KernelConfig) -> Result<Self, KernelError> {
        let categories = check_categories(&config.categories)?;
        let filtering = config.pids.is_some();
        if filtering
            && categories
                .iter()
                .any(|c| c == trace_common::category::KERNEL_IRQ)
        {
            log::warn!(
                "kernel:irq records nothing with a pid filter: interrupts belong to no process"
            );
        }
        // With a pid filter the programs that follow new and exiting tasks
        // are attached whatever the categories.
        let specs: Vec<&'static TracepointSpec> = TRACEPOINTS
            .iter()
            .filter(|t| {
                categories.iter().any(|c| c == t.category)
                    || (filtering && FOLLOW_PROGRAMS.contains(&t.program))
            })
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
            filter: if filtering { FILTER_PIDS } else { 0 }
                | if categories.iter().any(|c| c == KERNEL_PROC) {
                    EMIT_PROC
                } else {
                    0
                },
            self_tgid: std::process::id(),
            stop_ts: u64::MAX,
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
        let cpus = aya::util::online_cpus().map_err(|(path, source)| KernelError::Cpus {
            path: path.into(),
            source,
        })?;
        let possible = aya::util::nr_cpus().map_err(|(path, source)| KernelError::Cpus {
            path: path.into(),
            source,
        })?;
        let per_cpu_bytes = ring_size(config.ring_buffer_bytes / cpus.len().max(1));
        let ring_buffer_bytes = per_cpu_bytes * cpus.len();
        let mut ebpf = EbpfLoader::new()
            .map_max_entries(MAP_EVENTS, possible as u32)
            .map_max_entries(MAP_USDT_SPECS, config.usdt.len().max(1) as u32)
            .load(object.bytes())
            .map_err(|e| {
                if is_eperm(&e) {
                    KernelError::Permission {
                        detail: format!("creating eBPF maps: {e}"),
                    }
                } else {
                    KernelError::Load {
                        source: Box::new(e),
                    }
                }
            })?;

        fill_array(&mut ebpf, MAP_LAYOUT, [LayoutValue(layout)])?;

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
            });
        }

        let followed = match &config.pids {
            Some(_) => {
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
            None => None,
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
            next_tick: None,
            detached_misses: 0,
            malformed: 0,
            layout,
            stop_ts: None,
        };
        let pids = config.pids.as_deref().unwrap_or_default();
        for &pid in pids {
            provider.follow(pid)?;
        }
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
        // Threads created between the first look and the attachment.
        for &pid in pids {
            provider.follow(pid)?;
        }
        log::info!(
            "kernel provider started: categories {:?}, programs {:?}, ring buffers {} x {} KiB",
            provider.categories,
            provider.attached,
            provider.rings.len(),
            per_cpu_bytes >> 10
        );
        Ok(provider)
    }

    /// Attaches the entry and return programs to every probe, with its index
    /// as the cookie: to the `pids` processes only when given (a probe in a
    /// shared library would otherwise trap in every process using it), else
    /// to every process.
    fn attach_uprobes(
        &mut self,
        probes: &[crate::uprobes::ResolvedProbe],
        pids: &[u32],
    ) -> Result<(), KernelError> {
        use aya::programs::{UProbe, uprobe::UProbeAttachLocation, uprobe::UProbeAttachPoint};
        use trace_common::kernel::{UPROBE_ENTRY_PROGRAM, UPROBE_RETURN_PROGRAM};
        // A probe resolved for some processes goes into those; else into
        // the filtered processes, or every process.
        let scopes =
            |probe: &crate::uprobes::ResolvedProbe| -> Vec<aya::programs::uprobe::UProbeScope> {
                let pids = if probe.pids.is_empty() {
                    pids
                } else {
                    &probe.pids[..]
                };
                if pids.is_empty() {
                    vec![aya::programs::uprobe::UProbeScope::AllProcesses]
                } else {
                    pids.iter()
                        .filter_map(|&p| std::num::NonZeroU32::new(p))
                        .map(aya::programs::uprobe::UProbeScope::OneProcess)
                        .collect()
                }
            };
        for program in [UPROBE_ENTRY_PROGRAM, UPROBE_RETURN_PROGRAM] {
            let up: &mut UProbe = program_of(&mut self.ebpf, program)?;
            up.load().map_err(|e| program_error(program, e))?;
            for (index, probe) in probes.iter().enumerate() {
                for scope in scopes(probe) {
                    let location = match &probe.location {
                        crate::uprobes::ProbeLocation::Symbol(s) => {
                            UProbeAttachLocation::Symbol(s.as_str())
                        }
                        crate::uprobes::ProbeLocation::Offset(o) => {
                            UProbeAttachLocation::AbsoluteOffset(*o)
                        }
                    };
                    let point = UProbeAttachPoint {
                        location,
                        cookie: Some(index as u64),
                    };
                    // Through the file resolved, not its path (see
                    // `ProgramFile`).
                    up.attach(point, probe.file.attach_path(), scope)
                        .map_err(|e| KernelError::Attach {
                            program,
                            tracepoint: format!("uprobe {}", probe.spec),
                            source: Box::new(e),
                        })?;
                }
            }
            self.attached.push(program);
        }
        Ok(())
    }

    /// Attaches the USDT program at every site, with its index as the
    /// cookie, after storing where each site's arguments are: to the `pids`
    /// processes only when given, else to every process. A site with a
    /// semaphore gets it raised by the kernel while attached.
    fn attach_usdt(
        &mut self,
        sites: &[crate::usdt::UsdtSite],
        pids: &[u32],
    ) -> Result<(), KernelError> {
        use aya::programs::UProbe;
        fill_array(
            &mut self.ebpf,
            MAP_USDT_SPECS,
            sites.iter().map(|site| UsdtSpecValue(site.spec_value)),
        )?;
        let up: &mut UProbe = program_of(&mut self.ebpf, USDT_PROGRAM)?;
        up.load().map_err(|e| program_error(USDT_PROGRAM, e))?;
        let program = up
            .fd()
            .and_then(|fd| fd.try_clone().map_err(ProgramError::from))
            .map_err(|e| program_error(USDT_PROGRAM, e))?;
        self.attached.push(USDT_PROGRAM);
        for (index, site) in sites.iter().enumerate() {
            // A site resolved for some processes goes into those; else into
            // the filtered processes, or every process.
            let pids = if site.pids.is_empty() {
                pids
            } else {
                &site.pids[..]
            };
            let scopes: Vec<Option<u32>> = if pids.is_empty() {
                vec![None]
            } else {
                pids.iter().map(|&p| Some(p)).collect()
            };
            for &pid in &scopes {
                let link = perf_probe::attach_uprobe(
                    program.as_fd(),
                    &site.file.attach_path(),
                    site.offset,
                    site.semaphore,
                    pid,
                    index as u64,
                )
                .map_err(|source| KernelError::ProbeAttach {
                    probe: format!(
                        "--usdt {} ({} at {:#x} of {})",
                        site.spec,
                        site.event_name(),
                        site.offset,
                        site.binary.display()
                    ),
                    source,
                })?;
                self.probe_links.push(link);
            }
        }
        Ok(())
    }

    /// Loads BTF tracepoint program `variant` and attaches it; `btf` holds
    /// the kernel's BTF once read.
    fn attach_btf(
        &mut self,
        variant: &BtfVariant,
        btf: &mut Option<aya::Btf>,
    ) -> Result<(), KernelError> {
        let program = variant.program;
        if btf.is_none() {
            *btf = Some(
                aya::Btf::from_sys_fs().map_err(|e| KernelError::ProgramLoad {
                    program,
                    reason: format!("reading the kernel's BTF: {e}"),
                    source: Box::new(ProgramError::from(std::io::Error::other(e.to_string()))),
                })?,
            );
        }
        let Some(btf) = btf.as_ref() else {
            unreachable!("read just above")
        };
        let tp: &mut BtfTracePoint = program_of(&mut self.ebpf, program)?;
        tp.load(variant.tracepoint, btf).map_err(|e| {
            if let ProgramError::LoadError { verifier_log, .. } = &e {
                log::debug!("verifier log of eBPF program `{program}`:\n{verifier_log}");
            }
            program_error(program, e)
        })?;
        tp.attach().map_err(|e| KernelError::Attach {
            program,
            tracepoint: format!("btf:{}", variant.tracepoint),
            source: Box::new(e),
        })?;
        self.attached.push(program);
        Ok(())
    }

    /// Loads program `spec.program` and attaches it to its tracepoint.
    fn attach(&mut self, spec: &'static TracepointSpec) -> Result<(), KernelError> {
        let program = spec.program;
        let tracepoint = format!("{}:{}", spec.group, spec.event);
        let tp: &mut TracePoint = program_of(&mut self.ebpf, program)?;
        tp.load().map_err(|e| {
            if let ProgramError::LoadError { verifier_log, .. } = &e {
                log::error!("verifier log of eBPF program `{program}`:\n{verifier_log}");
            }
            program_error(program, e)
        })?;
        tp.attach(spec.group, spec.event).map_err(|e| {
            if is_eperm(&e) {
                KernelError::Permission {
                    detail: format!("attaching to tracepoint {tracepoint}: {e}"),
                }
            } else {
                KernelError::Attach {
                    program,
                    tracepoint,
                    source: Box::new(e),
                }
            }
        })?;
        self.attached.push(program);
        Ok(())
    }

    /// Follows process `pid`: records its threads' events and those of
    /// every task it creates from now on. Needs a pid filter
    /// ([`KernelConfig::pids`]); without one everything is recorded anyway
    /// and this does nothing.
    pub fn follow(&mut self, pid: u32) -> Result<(), KernelError> {
        let Some(map) = self.followed.as_mut() else {
            return Ok(());
        };
        let tids = thread_ids(pid).ok_or(KernelError::NoSuchProcess { pid })?;
        for tid in tids {
            map.insert(tid, 0, 0).map_err(|e| KernelError::Map {
                name: MAP_FOLLOWED,
                source: Box::new(e),
            })?;
        }
        Ok(())
    }

    /// New tasks of followed processes that could not be followed because
    /// the map of followed threads was full.
    pub fn unfollowed(&self) -> Result<u64, KernelError> {
        self.counter(COUNTER_FOLLOW_FULL)
    }

    /// The enabled categories.
    pub fn categories(&self) -> &[String] {
        &self.categories
    }

    /// Names of the attached programs.
    pub fn attached_programs(&self) -> &[&'static str] {
        &self.attached
    }

    /// The ring buffers' actual size in bytes, all CPUs together.
    pub fn ring_buffer_bytes(&self) -> usize {
        self.ring_buffer_bytes
    }

    /// How full the fullest CPU's ring buffer is, from 0 to 1 (0 when no
    /// fill level can be read).
    pub fn fill(&self) -> f64 {
        let size = (self.ring_buffer_bytes / self.rings.len().max(1)).max(1) as f64;
        self.rings
            .iter()
            .filter_map(|r| r.positions.as_ref())
            .map(|p| p.backlog() as f64 / size)
            .fold(0.0, f64::max)
            .min(1.0)
    }

    /// The CPUs that have a ring buffer.
    pub fn cpus(&self) -> Vec<u32> {
        self.rings.iter().map(|r| r.cpu).collect()
    }

    /// Waits until there may be entries to drain; call
    /// [`KernelProvider::drain`] after each return.
    ///
    /// The programs wake the reader only once a quarter of a CPU's ring
    /// buffer is used (a wake-up per event would cost an inter-processor
    /// interrupt each), so this also returns every [`DRAIN_INTERVAL`]:
    /// events wait at most that long in the rings. It never spins.
    ///
    /// Must run inside a tokio runtime with IO and time enabled (the first
    /// call registers the rings' epoll descriptor with it). Cancel-safe.
    pub async fn readable(&mut self) -> Result<(), KernelError> {
        if self.pending {
            return Ok(());
        }
        if let Readiness::Plain(_) = self.readiness {
            let Readiness::Plain(fd) = std::mem::replace(&mut self.readiness, Readiness::Moving)
            else {
                unreachable!("checked just above")
            };
            // SAFETY: the epoll descriptor is owned by the AsyncFd from here
            // on and stays open until the AsyncFd drops it.
            match unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) } {
                Ok(fd) => self.readiness = Readiness::Async(fd),
                Err(e) => {
                    let (fd, err) = e.into_parts();
                    self.readiness = Readiness::Plain(fd);
                    return Err(err.into());
                }
            }
        }
        let Readiness::Async(fd) = &mut self.readiness else {
            // Registration failed earlier: collect on the timer alone.
            let deadline = *self
                .next_tick
                .get_or_insert_with(|| tokio::time::Instant::now() + DRAIN_INTERVAL);
            tokio::time::sleep_until(deadline).await;
            self.next_tick = Some(tokio::time::Instant::now() + DRAIN_INTERVAL);
            return Ok(());
        };
        let deadline = *self
            .next_tick
            .get_or_insert_with(|| tokio::time::Instant::now() + DRAIN_INTERVAL);
        tokio::select! {
            ready = fd.readable_mut() => {
                // Readiness is cleared before the caller drains, so a wake-up
                // during the drain makes the next call return rather than
                // being lost. The epoll instance is level-triggered: it stays
                // readable while any ring holds data.
                ready?.clear_ready();
            }
            () = tokio::time::sleep_until(deadline) => {
                self.next_tick = Some(tokio::time::Instant::now() + DRAIN_INTERVAL);
            }
        }
        Ok(())
    }

    /// Decodes the entries whose turn has come and passes each event to
    /// `f`, in time order across CPUs; returns the number of events passed.
    /// Entries that fail to decode are skipped and counted
    /// ([`KernelProvider::malformed`]).
    ///
    /// A drain takes at most about one ring buffer's worth of entries from
    /// each CPU; when it stops with more left, the next
    /// [`KernelProvider::readable`] returns at once.
    pub fn drain(&mut self, f: &mut dyn FnMut(KernelEvent)) -> usize {
        let (mut delivered, mut malformed) = (0usize, 0u64);
        self.drain_raw(&mut |bytes| match parse(bytes) {
            Ok(event) => {
                f(event);
                delivered += 1;
            }
            Err(e) => {
                if malformed == 0 {
                    log::warn!("skipping malformed kernel event: {e}");
                }
                malformed += 1;
            }
        });
        self.malformed += malformed;
        delivered
    }

    /// [`KernelProvider::drain`] handing on the undecoded entries (decode
    /// them with `trace_common::kernel::parse`); returns how many.
    ///
    /// Every CPU's ring is read, and the entries stamped before the
    /// watermark are handed on oldest first: [`REORDER_WINDOW`] before the
    /// time reading began, and no later than the newest entry of a ring that
    /// had more than `drain_limit` entries (what it still holds may be
    /// older than what other rings gave). After [`KernelProvider::detach`]
    /// everything read is handed on.
    pub fn drain_raw(&mut self, f: &mut dyn FnMut(&[u8])) -> usize {
        let limit = self.drain_limit;
        let began = boottime_ns();
        let mut watermark = if self.detached {
            u64::MAX
        } else {
            began.saturating_sub(REORDER_WINDOW.as_nanos() as u64)
        };
        let mut pending = false;
        for cpu in &mut self.rings {
            let mut taken = 0usize;
            let mut newest = 0u64;
            while let Some(item) = cpu.ring.next() {
                self.reorder.push(&item);
                if let Some(ts) = item.get(8..16).and_then(|b| b.try_into().ok()) {
                    newest = newest.max(u64::from_ne_bytes(ts));
                }
                taken += 1;
                if taken >= limit {
                    pending = true;
                    watermark = watermark.min(newest);
                    break;
                }
            }
        }
        self.pending = pending;
        self.reorder.release(watermark, f)
    }

    /// Counts entries found malformed outside [`KernelProvider::drain`].
    pub fn add_malformed(&mut self, n: u64) {
        self.malformed += n;
    }

    /// Ring-buffer entries skipped so far because they did not decode.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// Events lost so far in the kernel on each CPU with a ring buffer (the
    /// programs' own counts: ring buffer full, layout not set), as `(cpu,
    /// lost)`. Runs the kernel skipped ([`KernelProvider::recursion_misses`])
    /// are not counted per CPU.
    pub fn dropped_per_cpu(&self) -> Result<Vec<(u32, u64)>, KernelError> {
        let mut lost: Vec<(u32, u64)> = self.rings.iter().map(|r| (r.cpu, 0)).collect();
        for index in (0..COUNTER_COUNT).filter(|&i| i != COUNTER_FOLLOW_FULL) {
            let values = self.counter_per_cpu(index)?;
            for (cpu, n) in &mut lost {
                *n += values.get(*cpu as usize).copied().unwrap_or(0);
            }
        }
        Ok(lost)
    }

    /// Events lost so far in the kernel, summed over every CPU: the
    /// programs' own counts (ring buffer full, layout not set) plus the runs
    /// the kernel skipped because another BPF program was running on that CPU
    /// (the programs' `recursion_misses`).
    pub fn dropped(&self) -> Result<u64, KernelError> {
        Ok(self.lost_in_programs()? + self.recursion_misses())
    }

    /// Runs of the attached programs the kernel skipped because another BPF
    /// program was running on the same CPU (each a lost event), including
    /// those of programs detached since.
    pub fn recursion_misses(&self) -> u64 {
        self.detached_misses
            + self
                .attached
                .iter()
                .filter_map(|name| self.ebpf.program(name)?.fd().ok())
                .map(|fd| recursion_misses_of(fd.as_fd()))
                .sum::<u64>()
    }

    /// Events the programs counted as lost (`COUNTERS`), over every CPU.
    fn lost_in_programs(&self) -> Result<u64, KernelError> {
        let mut total = 0u64;
        for index in (0..COUNTER_COUNT).filter(|&i| i != COUNTER_FOLLOW_FULL) {
            total += self.counter(index)?;
        }
        Ok(total)
    }

    /// Counter `index` of `COUNTERS`, summed over every CPU.
    fn counter(&self, index: u32) -> Result<u64, KernelError> {
        Ok(self.counter_per_cpu(index)?.iter().sum())
    }

    /// Counter `index` of `COUNTERS` of each possible CPU, by CPU id.
    fn counter_per_cpu(&self, index: u32) -> Result<Vec<u64>, KernelError> {
        let map = self
            .ebpf
            .map(MAP_COUNTERS)
            .ok_or(KernelError::MissingInObject {
                what: "map",
                name: MAP_COUNTERS,
            })?;
        let map_err = |e: MapError| KernelError::Map {
            name: MAP_COUNTERS,
            source: Box::new(e),
        };
        let counters: PerCpuArray<&MapData, u64> = PerCpuArray::try_from(map).map_err(map_err)?;
        Ok(counters.get(&index, 0).map_err(map_err)?.to_vec())
    }

    /// Ends the recording at one instant, for every program at once: no
    /// program writes an event stamped after the returned time
    /// (CLOCK_BOOTTIME ns), however long detaching them takes. Events
    /// already written can still be drained.
    pub fn cut(&mut self) -> Result<u64, KernelError> {
        if let Some(ts) = self.stop_ts {
            return Ok(ts);
        }
        let ts = boottime_ns();
        self.layout.stop_ts = ts;
        fill_array(&mut self.ebpf, MAP_LAYOUT, [LayoutValue(self.layout)])?;
        self.stop_ts = Some(ts);
        Ok(ts)
    }

    /// When [`KernelProvider::cut`] ended the recording, if it did.
    pub fn stop_ts(&self) -> Option<u64> {
        self.stop_ts
    }

    /// Detaches and unloads every program; events already in the ring buffer
    /// can still be drained, and [`KernelProvider::dropped`] still answers.
    pub fn detach(&mut self) {
        self.detached_misses = self.recursion_misses();
        self.detached = true;
        self.probe_links.clear();
        for name in std::mem::take(&mut self.attached) {
            let Some(program) = self.ebpf.program_mut(name) else {
                continue;
            };
            let result = match program {
                aya::programs::Program::UProbe(up) => up.unload(),
                aya::programs::Program::BtfTracePoint(tp) => tp.unload(),
                other => {
                    let tp: Result<&mut TracePoint, _> = other.try_into();
                    tp.and_then(|tp| tp.unload())
                }
            };
            if let Err(e) = result {
                log::warn!("detaching eBPF program `{name}`: {e}");
            }
        }
    }

    /// Detaches everything and frees the maps.
    pub fn stop(self) {
        drop(self);
    }
}

/// Program `name` of the object, as the program type `P` it must be.
pub(crate) fn program_of<'a, P>(
    ebpf: &'a mut Ebpf,
    name: &'static str,
) -> Result<&'a mut P, KernelError>
where
    &'a mut P: TryFrom<&'a mut aya::programs::Program, Error = ProgramError>,
{
    ebpf.program_mut(name)
        .ok_or(KernelError::MissingInObject {
            what: "program",
            name,
        })?
        .try_into()
        .map_err(|e| program_error(name, e))
}

/// Writes `values` into array map `name` from index 0.
fn fill_array<V: aya::Pod>(
    ebpf: &mut Ebpf,
    name: &'static str,
    values: impl IntoIterator<Item = V>,
) -> Result<(), KernelError> {
    let map = ebpf
        .map_mut(name)
        .ok_or(KernelError::MissingInObject { what: "map", name })?;
    let map_err = |e: MapError| KernelError::Map {
        name,
        source: Box::new(e),
    };
    let mut array: Array<&mut MapData, V> = Array::try_from(map).map_err(map_err)?;
    for (index, value) in values.into_iter().enumerate() {
        array.set(index as u32, value, 0).map_err(map_err)?;
    }
    Ok(())
}

/// The eBPF object: as embedded, or a copy with field offsets patched in.
enum ObjectBytes {
    /// [`EBPF_OBJECT`] as built.
    Embedded,
    /// A patched copy, in 8-byte words so that it is as aligned as the
    /// embedded one.
    Patched(Vec<u64>),
}

impl ObjectBytes {
    /// A copy of `bytes` (the embedded object) to patch.
    fn copy(bytes: &[u8]) -> ObjectBytes {
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        for (word, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            *word = u64::from_ne_bytes(b);
        }
        ObjectBytes::Patched(words)
    }

    fn bytes(&self) -> &[u8] {
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

    fn bytes_mut(&mut self) -> &mut [u8] {
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

/// The real offsets of every `MARK_*` field in the running kernel, from its
/// BTF, for [`patch::patch_offsets`].
fn btf_field_offsets() -> Result<Vec<(i16, u32)>, String> {
    use trace_common::kernel::{
        MARK_REGS_ARGS, MARK_REGS_NR, MARK_TASK_COMM, MARK_TASK_CPU, MARK_TASK_EXIT_STATE,
        MARK_TASK_PID, MARK_TASK_PRIO,
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

/// Whether process `pid` exists now.
pub fn process_exists(pid: u32) -> bool {
    pid != 0 && std::path::Path::new(&format!("/proc/{pid}/task")).is_dir()
}

/// The thread ids of process `pid`, `None` if it does not exist.
fn thread_ids(pid: u32) -> Option<Vec<u32>> {
    if pid == 0 {
        return None;
    }
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    Some(
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
    )
}

/// The enabled categories, deduplicated, or an error naming an unknown one.
fn check_categories(requested: &[String]) -> Result<Vec<String>, KernelError> {
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

/// `bytes` rounded up to a power of two times the page size (as the kernel
/// requires of a ring buffer), at least one page and at most 2 GiB.
pub fn ring_size(bytes: usize) -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = usize::try_from(page)
        .ok()
        .filter(|&p| p > 0)
        .unwrap_or(4096);
    let pages = bytes.div_ceil(page).max(1).next_power_of_two();
    pages.saturating_mul(page).min(1 << 31)
}

/// How full the ring buffer gets before the programs wake the reader: a
/// quarter of it, leaving room for the events written while it wakes up.
fn wakeup_bytes(ring_buffer_bytes: usize) -> u32 {
    u32::try_from(ring_buffer_bytes / 4).unwrap_or(u32::MAX)
}

/// Fails with [`KernelError::Permission`] unless the effective capabilities
/// allow loading tracing programs (CAP_SYS_ADMIN, or CAP_BPF with
/// CAP_PERFMON).
fn check_privileges() -> Result<(), KernelError> {
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let Some(caps) = effective_capabilities() else {
        // Cannot tell; let the kernel decide.
        return Ok(());
    };
    let has = |cap: u32| caps & (1u64 << cap) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        Ok(())
    } else {
        Err(KernelError::Permission {
            detail: format!(
                "this process (uid {}) lacks them",
                nix::unistd::geteuid().as_raw()
            ),
        })
    }
}

/// The effective capability set of this process, from /proc.
fn effective_capabilities() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line["CapEff:".len()..].trim(), 16).ok()
}

/// Lifts RLIMIT_MEMLOCK for kernels that still charge BPF memory to it
/// (before 5.11); harmless elsewhere.
fn raise_memlock_limit() {
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

/// The `recursion_misses` the kernel reports for the program behind `fd`
/// (0 when it does not say, as before Linux 5.12).
fn recursion_misses_of(fd: BorrowedFd<'_>) -> u64 {
    let path = format!("/proc/self/fdinfo/{}", fd.as_raw_fd());
    std::fs::read_to_string(path)
        .ok()
        .and_then(|info| parse_recursion_misses(&info))
        .unwrap_or(0)
}

/// The `recursion_misses:` value of a BPF program's fdinfo text.
fn parse_recursion_misses(fdinfo: &str) -> Option<u64> {
    fdinfo
        .lines()
        .find_map(|line| line.strip_prefix("recursion_misses:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Whether an error (or one of its sources) is the kernel saying EPERM.
fn is_eperm(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<io::Error>()
            && io.raw_os_error() == Some(libc::EPERM)
        {
            return true;
        }
        current = e.source();
    }
    false
}

/// A program load failure as a [`KernelError`].
pub(crate) fn program_error(program: &'static str, e: ProgramError) -> KernelError {
    if is_eperm(&e) {
        return KernelError::Permission {
            detail: format!("loading eBPF program `{program}`: {e}"),
        };
    }
    let reason = match &e {
        ProgramError::LoadError { io_error, .. } => {
            format!("{io_error} (the verifier log is in the error log)")
        }
        other => other.to_string(),
    };
    KernelError::ProgramLoad {
        program,
        reason,
        source: Box::new(e),
    }
}
