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
//!
//! The work is split by role: [`uprobes`] and [`usdt`] find where probes
//! go; `load` checks privileges, reads the tracepoint formats, patches
//! and loads the object and creates the rings; `attach` loads and attaches
//! the programs; `drain` waits for the per-CPU rings and merges them
//! in time order (`reorder`); `follow` keeps the pid filter;
//! `stats` reads the drop counters; `stop` cuts the recording at one
//! instant and detaches; [`translate`] turns the events into FXT records.

mod attach;
pub mod btf;
mod drain;
mod error;
pub mod floor;
mod follow;
pub mod format;
pub mod keep;
mod load;
mod patch;
pub mod perf_probe;
pub mod privileges;
pub mod profile;
pub mod python;
pub mod recorder;
pub mod reorder;
mod stats;
mod stop;
pub mod syscalls;
pub mod tracefs;
pub mod tracepoints;
pub mod translate;
pub mod uprobes;
pub mod usdt;
pub mod verify;

#[cfg(test)]
mod tests;

use aya::Ebpf;
use aya::maps::{ArrayOfMaps, HashMap as BpfHashMap, MapData};
use trace_common::category::KERNEL_CATEGORIES;
use trace_common::kernel::KernelLayout;

pub use self::error::KernelError;
pub(crate) use self::load::raise_memlock_limit;

use self::drain::{CpuRing, Readiness};
use self::reorder::Reorder;

/// Default size of the kernel ring buffers, all CPUs together.
pub const DEFAULT_RING_BUFFER_BYTES: usize = 8 << 20;

/// How long after it happened an event is handed on at the latest: the
/// CPUs' ring buffers are merged in time order, and an event stamped on one
/// CPU may be committed to its ring a little after a later event on
/// another (a virtual CPU can be paused in between).
pub const REORDER_WINDOW: std::time::Duration = std::time::Duration::from_millis(50);

/// Most events a drain hands on ([`KernelProvider::drain`]): about ten
/// milliseconds of translation, after which the rings are read again.
pub const RELEASE_SLICE: usize = 65_536;

/// Most time one drain spends reading the rings (checked every
/// `DRAIN_STEP` entries) before it translates what is due: the loop that
/// calls it gets its turn at other work that often however fast the kernel
/// writes, and however slow the build.
pub const DRAIN_SLICE: std::time::Duration = std::time::Duration::from_millis(20);

/// Entries read or handed on between two looks at the clock in a drain.
pub(crate) const DRAIN_STEP: usize = 4096;

/// Memory that events read from the rings and not yet translated may take
/// at most, unless a session's memory budget leaves less
/// ([`KernelConfig::backlog_bytes`]): what absorbs a burst the translation
/// cannot follow at once.
pub const DEFAULT_BACKLOG_BYTES: usize = 256 << 20;
/// The smallest backlog limit: below it a backlog could not hold one
/// drain's reading of the rings.
pub const MIN_BACKLOG_BYTES: usize = 16 << 20;

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
    /// Empty: no cgroup filter. Else record only the tasks in these cgroup
    /// v2 cgroups or below them (paths from the hierarchy's root, at most
    /// [`CGROUPS_MAX`](trace_common::kernel::CGROUPS_MAX)), whenever they
    /// enter them. Not with `pids`.
    pub cgroups: Vec<String>,
    /// Functions to probe (entry and return), resolved; their events carry
    /// their index in this list.
    pub uprobes: Vec<crate::kernel::uprobes::ResolvedProbe>,
    /// USDT probe sites, resolved; their events carry their index in this
    /// list.
    pub usdt: Vec<crate::kernel::usdt::UsdtSite>,
    /// Tracepoints selected by name (`-e`), resolved.
    pub tracepoints: std::sync::Arc<tracepoints::Selection>,
    /// Use the classic tracepoint programs even where the kernel's BTF
    /// allows the cheaper BTF tracepoint ones (they write the same events).
    pub classic_tracepoints: bool,
    /// Write every system call as two events, its entry and its return,
    /// instead of one event for a call whose caller stayed on its CPU
    /// ([`PAIR_SYSCALLS`](trace_common::kernel::PAIR_SYSCALLS) off). Both
    /// give the same records; one event costs the traced program less.
    /// Tracepoint pairs selected by name (`tracepoints.pairs`) imply it:
    /// keeping them inside the system call slices needs each entry first.
    pub separate_syscall_events: bool,
    /// How stacks are recorded (`kernel:profile`, `kernel:offcpu`, probes).
    pub stacks: trace_common::controller::StackOptions,
    /// Most memory the backlog of events read from the rings and not yet
    /// translated may take (its allocations, counted whole; at least
    /// [`MIN_BACKLOG_BYTES`]): past it the rings are left to fill, and the
    /// kernel counts what it drops.
    pub backlog_bytes: usize,
    /// When loading and attaching must be done by ([`KernelError::TooSlow`]
    /// past it, everything attached so far detached again); `None`: no
    /// limit.
    pub deadline: Option<std::time::Instant>,
}

impl Default for KernelConfig {
    /// Every known kernel category, [`DEFAULT_RING_BUFFER_BYTES`].
    fn default() -> Self {
        KernelConfig {
            categories: KERNEL_CATEGORIES
                .iter()
                .filter(|(name, _)| !trace_common::category::KERNEL_OPT_IN.contains(name))
                .map(|(name, _)| (*name).to_owned())
                .collect(),
            ring_buffer_bytes: DEFAULT_RING_BUFFER_BYTES,
            pids: None,
            cgroups: Vec::new(),
            uprobes: Vec::new(),
            usdt: Vec::new(),
            tracepoints: Default::default(),
            classic_tracepoints: false,
            separate_syscall_events: false,
            stacks: Default::default(),
            backlog_bytes: DEFAULT_BACKLOG_BYTES,
            deadline: None,
        }
    }
}

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
    /// The last drain left entries in a ring, or events due in the
    /// backlog.
    pending: bool,
    /// [`KernelProvider::backlog_limit`].
    backlog_limit: usize,
    /// When [`KernelProvider::readable`] returns at the latest.
    next_tick: Option<tokio::time::Instant>,
    /// Recursion misses of the programs when they were detached.
    detached_misses: u64,
    malformed: u64,
    /// The layout the programs read (kept to set its stop time).
    layout: KernelLayout,
    /// When the recording was cut ([`KernelProvider::cut`]).
    stop_ts: Option<u64>,
    /// [`KernelConfig::deadline`], while starting.
    deadline: Option<std::time::Instant>,
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
