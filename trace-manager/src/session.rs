//! The kernel side and the output of one tracing session.
//!
//! A [`Session`] owns the FXT output and, while tracing runs, the kernel
//! provider. [`Session::new`] checks what is asked and writes the magic
//! number; each [`Session::start`] loads the kernel provider for the enabled
//! kernel categories and names every process and thread that exists (the
//! first time with the kernel's provider info); [`Session::drain`] moves
//! ring-buffer events into the output; [`Session::stop`] detaches the
//! programs, drains what is left and, with `write_results`, writes the
//! events the circular mode kept; [`Session::finish`] reports drops and
//! flushes. Userspace providers are the [`crate::userspace::Registry`]'s.

use crate::clock::boottime_ns;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use thiserror::Error;
use trace_common::category::{self, KERNEL_CATEGORIES, KERNEL_OFFCPU, KERNEL_PROC, KERNEL_PROFILE};
use trace_common::controller::{KernelCount, KernelStats};
use trace_common::fxt::{Record, provider_event};
use trace_common::kernel::stack::STACK_KIND;
use trace_common::kernel::{Entry, EntryRef, EventKind, parse_entry, with_entry};
use trace_common::provider::{BufferDisposition, BufferingMode};

use crate::kernel::tracepoints::Selection;
use crate::kernel::translate::{KernelRecordCounts, KernelTranslator, NameState, UsdtSiteInfo};
use crate::kernel::{KernelConfig, KernelError, KernelProvider};
use crate::output::{FxtStream, OutputError, ProviderSections};
use crate::procfs;

/// The provider id of the kernel provider in the output.
pub const KERNEL_PROVIDER_ID: u32 = 1;
/// The provider name of the kernel provider in the output.
pub const KERNEL_PROVIDER_NAME: &str = "kernel";

/// What the kernel provider records.
#[derive(Clone, Debug)]
pub struct RecordConfig {
    /// Category names or globs (`kernel:*`); empty selects every category.
    pub categories: Vec<String>,
    /// Size of the kernel provider's ring buffers in bytes, all CPUs'
    /// together.
    pub buffer_bytes: usize,
    /// `None`: kernel events of every process. `Some(pids)`: only of these
    /// processes and what they create during the recording (see
    /// [`KernelConfig::pids`]); [`Session::follow`] adds more.
    pub pids: Option<Vec<u32>>,
    /// Functions to probe (`--uprobe`), resolved.
    pub uprobes: Vec<crate::kernel::uprobes::ResolvedProbe>,
    /// USDT probe sites (`--usdt`), resolved.
    pub usdt: Vec<crate::kernel::usdt::UsdtSite>,
    /// Tracepoints selected by name (`-e`), resolved.
    pub tracepoints: Arc<Selection>,
    /// What happens to kernel events: written as they come (streaming),
    /// the first `buffer_bytes` of them kept (oneshot), or the newest
    /// `buffer_bytes` of them kept and written at stop (circular).
    pub kernel_mode: BufferingMode,
    /// How stacks are recorded.
    pub stacks: trace_common::controller::StackOptions,
    /// Conditions checked on the kernel's events (see
    /// [`crate::kernel::translate::Trigger`]); [`Session::take_fired`]
    /// says which fired.
    pub triggers: Vec<crate::kernel::translate::Trigger>,
    /// Most memory the kernel events read and not yet translated may take
    /// (see [`KernelConfig::backlog_bytes`]).
    pub backlog_bytes: usize,
}

impl RecordConfig {
    /// Whether probes or tracepoints selected by name are to be placed.
    fn probes(&self) -> bool {
        !self.uprobes.is_empty() || !self.usdt.is_empty() || !self.tracepoints.is_empty()
    }
}

/// Kernel events held back by the oneshot and circular modes.
#[derive(Debug, Default)]
struct KernelKeep {
    /// Bytes of events written so far (oneshot).
    used: u64,
    /// Events refused because the oneshot budget was spent.
    refused: u64,
    /// The newest events (circular): each a little-endian `u16` length and
    /// the entry's bytes.
    ring: std::collections::VecDeque<u8>,
    /// The names the events forgotten from `ring` gave (circular): the
    /// kept events' processes and threads are named as they were when the
    /// first kept event happened.
    forgotten: NameState,
    /// Whether events were forgotten (circular): what is kept then begins
    /// at its first event, not where the recording began.
    forgot: bool,
}

impl KernelKeep {
    /// Forgets the oldest whole events until `ring` holds at most `budget`
    /// bytes, keeping the names they gave.
    fn forget_beyond(&mut self, budget: u64) {
        let mut bytes = Vec::new();
        while self.ring.len() as u64 > budget {
            let old = usize::from(u16::from_le_bytes([self.ring[0], self.ring[1]]));
            let end = (2 + old).min(self.ring.len());
            bytes.clear();
            bytes.extend(self.ring.range(2..end));
            if let Ok(Entry::Fixed(event)) = parse_entry(&bytes) {
                self.forgotten.apply(&event);
            }
            self.ring.drain(..end);
            self.forgot = true;
        }
    }
}

/// Translates the events a circular recording kept (`ring`: each a
/// little-endian `u16` length and the entry's bytes), oldest first; when
/// older ones were forgotten, `translator` starts at the first kept event
/// (what began before it is written as begun there). Returns the entries
/// that could not be read.
fn translate_kept<W: Write>(
    translator: &mut KernelTranslator,
    out: &mut FxtStream<W>,
    ring: &std::collections::VecDeque<u8>,
    forgot: bool,
    stacks: bool,
) -> Result<u64, RecordError> {
    let (mut at, mut malformed, mut first) = (0, 0, forgot);
    let mut bytes = Vec::new();
    while at + 2 <= ring.len() {
        let len = usize::from(u16::from_le_bytes([ring[at], ring[at + 1]]));
        bytes.clear();
        bytes.extend(ring.range(at + 2..(at + 2 + len).min(ring.len())));
        at += 2 + len;
        match parse_entry(&bytes) {
            Ok(Entry::Fixed(event)) => {
                if std::mem::take(&mut first) {
                    translator.set_start(event.header().ts);
                }
                translator.translate(out, &event)?
            }
            Ok(Entry::Tracepoint(record)) => translator.tracepoint(out, &record)?,
            Ok(Entry::Stack(record)) if stacks => translator.stack(out, &record)?,
            Ok(Entry::Stack(_)) => {}
            Err(_) => malformed += 1,
        }
    }
    Ok(malformed)
}

/// Why a session failed.
#[derive(Debug, Error)]
pub enum RecordError {
    /// A `kernel:` category pattern selects no kernel category.
    #[error("no known category matches {patterns:?}; known categories: {known}")]
    NoCategory {
        /// The patterns given.
        patterns: Vec<String>,
        /// The known categories, comma-separated.
        known: String,
    },
    /// The kernel provider could not be started or read.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// The output could not be written.
    #[error(transparent)]
    Output(#[from] OutputError),
}

/// The kernel provider's outcome.
#[derive(Clone, Debug, Default)]
pub struct RecordStats {
    /// Kernel events received from the ring buffers.
    pub kernel_events: u64,
    /// Kernel events lost: a CPU's ring buffer full, runs the kernel
    /// skipped, events beyond the oneshot budget.
    pub dropped: u64,
    /// Of `dropped`, those lost on each CPU (its ring buffer full), as
    /// `(cpu, lost)`.
    pub dropped_per_cpu: Vec<(u32, u64)>,
    /// Ring-buffer entries that could not be decoded.
    pub malformed: u64,
    /// Records written per kind.
    pub counts: KernelRecordCounts,
    /// Records written per tracepoint selected by name (`group:event`, or
    /// a pair's name).
    pub tracepoints: Vec<(String, u64)>,
    /// Exits of pairs that had no entry on their thread.
    pub unpaired: u64,
    /// How long events were collected, every start-to-stop summed.
    pub duration: Duration,
    /// The kernel categories that were enabled.
    pub categories: Vec<String>,
}

impl RecordStats {
    /// The numbers as the controller protocol carries them.
    pub fn to_controller(&self) -> KernelStats {
        let c = &self.counts;
        KernelStats {
            events: self.kernel_events,
            dropped: self.dropped,
            dropped_per_cpu: self.dropped_per_cpu.clone(),
            malformed: self.malformed,
            counts: [
                (KernelCount::Switches, c.context_switches),
                (KernelCount::Wakeups, c.wakeups),
                (KernelCount::ProcessEvents, c.proc_events),
                (KernelCount::Names, c.names),
                (KernelCount::SystemCalls, c.syscalls),
                (KernelCount::Interrupts, c.interrupts),
                (KernelCount::BlockRequests, c.block_requests),
                (KernelCount::MemoryEvents, c.memory_events),
                (KernelCount::CpuCounters, c.cpu_counters),
                (KernelCount::ProbeHits, c.probes),
                (KernelCount::UsdtEvents, c.usdt),
                (KernelCount::StackSamples, c.samples),
            ]
            .into_iter()
            .chain(
                self.tracepoints
                    .iter()
                    .map(|(name, n)| (KernelCount::Tracepoint(name.clone()), *n)),
            )
            .collect(),
            categories: self.categories.clone(),
        }
    }
}

/// How the kernel side of a session is going, for a progress display.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Progress {
    /// Time spent tracing.
    pub elapsed: Duration,
    /// Kernel events received so far.
    pub kernel_events: u64,
    /// Bytes written so far.
    pub bytes: u64,
    /// Kernel events lost so far.
    pub dropped: u64,
    /// How full the fullest CPU's kernel ring buffer is, from 0 to 1.
    pub kernel_fill: f64,
}

/// The kind of an entry (undecoded) and the process it happened in.
fn entry_process(bytes: &[u8]) -> Option<(u32, u32)> {
    let word = |at: usize| {
        bytes
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_ne_bytes)
    };
    // `EventHeader`: kind at 0, tgid at 20.
    Some((word(0)?, word(20)?))
}

/// The kernel categories `patterns` select.
pub fn kernel_categories(patterns: &[String]) -> Vec<String> {
    KERNEL_CATEGORIES
        .iter()
        .filter(|(name, _)| category::kernel_enabled(patterns, name))
        .map(|(name, _)| (*name).to_owned())
        .collect()
}

/// A translator for the events `config` records, starting now.
fn translator_for(config: &RecordConfig) -> KernelTranslator {
    let mut translator = KernelTranslator::new();
    translator.set_start(boottime_ns());
    translator.set_proc_instants(
        kernel_categories(&config.categories)
            .iter()
            .any(|c| c == KERNEL_PROC),
    );
    translator.set_followed_only(config.pids.is_some());
    translator.set_tracepoints(Arc::clone(&config.tracepoints));
    translator.set_sample_hz(config.stacks.sample_hz);
    translator.set_probe_names(config.uprobes.iter().map(|p| p.name.clone()).collect());
    translator.set_usdt_sites(
        config
            .usdt
            .iter()
            .map(|site| UsdtSiteInfo {
                name: site.event_name(),
                args: site.spec_value.args[..site.spec_value.nargs as usize]
                    .iter()
                    .map(|a| (a.signed != 0, a.format))
                    .collect(),
            })
            .collect(),
    );
    translator
}

/// One session's output and kernel provider.
pub struct Session<W: Write> {
    config: RecordConfig,
    categories: Vec<String>,
    kernel: Option<KernelProvider>,
    /// The kernel provider's sections in the output.
    section: ProviderSections,
    keep: KernelKeep,
    budget: u64,
    out: FxtStream<W>,
    translator: KernelTranslator,
    stats: RecordStats,
    /// Drops of the kernel providers of earlier starts.
    dropped_before: Vec<(u32, u64)>,
    other_dropped_before: u64,
    started: Option<Instant>,
    /// How many processes were followed when [`Session::begin_start`] said
    /// what to load: those added since are followed once it is attached.
    followed_at_start: usize,
    /// The last stop wrote the kept events: the next start begins afresh
    /// whatever its disposition, so nothing is written twice.
    written_at_stop: bool,
}

impl<W: Write> Session<W> {
    /// Checks `config` and writes the magic number to `out`.
    pub fn new(config: RecordConfig, out: W) -> Result<Self, RecordError> {
        let categories = kernel_categories(&config.categories);
        let unknown_kernel = config.categories.iter().find(|c| {
            c.starts_with("kernel:") && kernel_categories(std::slice::from_ref(c)).is_empty()
        });
        // No kernel category is no error: userspace providers may record.
        if unknown_kernel.is_some() {
            return Err(RecordError::NoCategory {
                patterns: config.categories.clone(),
                known: KERNEL_CATEGORIES
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let out = FxtStream::new(out)?;
        let mut translator = translator_for(&config);
        translator.set_triggers(config.triggers.clone());
        Ok(Session {
            budget: config.buffer_bytes as u64,
            config,
            stats: RecordStats {
                categories: categories.clone(),
                ..Default::default()
            },
            categories,
            kernel: None,
            section: ProviderSections::new(KERNEL_PROVIDER_ID, KERNEL_PROVIDER_NAME),
            keep: KernelKeep::default(),
            out,
            translator,
            dropped_before: Vec::new(),
            other_dropped_before: 0,
            started: None,
            followed_at_start: 0,
            written_at_stop: false,
        })
    }

    /// Whether this session records anything from the kernel.
    pub fn has_kernel(&self) -> bool {
        !self.categories.is_empty() || self.config.probes()
    }

    /// Loads and attaches the kernel provider, and names what exists.
    /// `disposition` says whether kernel events kept from an earlier start
    /// and not yet written are forgotten; the kernel categories among
    /// `additional` are recorded too, this time.
    pub fn start(
        &mut self,
        disposition: BufferDisposition,
        additional: &[String],
    ) -> Result<(), RecordError> {
        match self.begin_start(disposition, additional) {
            Some(config) => self.attached(KernelProvider::start(&config)?),
            None => Ok(()),
        }
    }

    /// [`Session::start`] in two steps, for a caller that loads the kernel
    /// provider elsewhere (it takes long: a thread of its own): readies the
    /// session and says what to load, `None` when nothing is (no kernel
    /// category, or the provider of an earlier start still runs: started
    /// already). The provider loaded goes to [`Session::attached`].
    pub fn begin_start(
        &mut self,
        disposition: BufferDisposition,
        additional: &[String],
    ) -> Option<KernelConfig> {
        if disposition != BufferDisposition::Retain || self.written_at_stop {
            self.keep.ring.clear();
            self.keep.forgotten = NameState::default();
            self.keep.forgot = false;
            self.keep.used = 0;
        }
        self.written_at_stop = false;
        let mut categories = self.categories.clone();
        // (No additional categories is not "all of them".)
        let extra = if additional.is_empty() {
            Vec::new()
        } else {
            kernel_categories(additional)
        };
        for c in extra {
            if !categories.contains(&c) {
                categories.push(c);
            }
        }
        if self.kernel.is_some() || (categories.is_empty() && !self.config.probes()) {
            self.started = Some(Instant::now());
            return None;
        }
        for c in &categories {
            if !self.stats.categories.contains(c) {
                self.stats.categories.push(c.clone());
            }
        }
        self.translator
            .set_proc_instants(categories.iter().any(|c| c == KERNEL_PROC));
        if categories
            .iter()
            .any(|c| c == KERNEL_PROFILE || c == KERNEL_OFFCPU)
            || !self.config.stacks.probe_stacks.is_empty()
        {
            self.translator.prepare_stacks();
        }
        self.followed_at_start = self.config.pids.as_ref().map_or(0, Vec::len);
        Some(KernelConfig {
            categories,
            ring_buffer_bytes: self.config.buffer_bytes,
            pids: self.config.pids.clone(),
            uprobes: self.config.uprobes.clone(),
            usdt: self.config.usdt.clone(),
            tracepoints: Arc::clone(&self.config.tracepoints),
            classic_tracepoints: false,
            separate_syscall_events: false,
            stacks: self.config.stacks.clone(),
            backlog_bytes: self.config.backlog_bytes,
            deadline: None,
        })
    }

    /// Completes [`Session::begin_start`] with the kernel provider it asked
    /// for, loaded and attached: names what exists.
    pub fn attached(&mut self, mut kernel: KernelProvider) -> Result<(), RecordError> {
        let added = self.config.pids.as_deref().unwrap_or_default();
        for &pid in added.get(self.followed_at_start..).unwrap_or_default() {
            if let Err(e) = kernel.follow(pid) {
                log::info!("process {pid}, followed while the programs were loaded: {e}");
            }
        }
        self.kernel = Some(kernel);
        // The programs are attached: a call that ends without its entry
        // began before this.
        let now = boottime_ns();
        self.translator.restart(now);
        self.translator.set_start(now);
        self.started = Some(Instant::now());
        self.section.begin(&mut self.out)?;
        // The programs are attached already: whatever is created from now
        // on is reported by events, whatever existed before is in the
        // snapshot (with a pid filter, of the followed processes).
        let mut snapshot = procfs::snapshot();
        if let Some(pids) = &self.config.pids {
            snapshot.retain(|p| pids.contains(&p.pid));
        }
        self.translator.write_snapshot(&mut self.out, &snapshot)?;
        Ok(())
    }

    /// Records process `pid` too (with a pid filter; see
    /// [`KernelProvider::follow`]), from now on and in later starts, and
    /// names it in the output.
    /// A process that does not exist is refused (`NoSuchProcess`), whether
    /// tracing runs or not: kept, it would make the next start fail.
    pub fn follow(&mut self, pid: u32) -> Result<(), RecordError> {
        if !procfs::process_exists(pid) {
            return Err(KernelError::NoSuchProcess { pid }.into());
        }
        if let Some(pids) = self.config.pids.as_mut()
            && !pids.contains(&pid)
        {
            pids.push(pid);
        }
        if let Some(k) = self.kernel.as_mut() {
            k.follow(pid)?;
            self.out.enter_provider(KERNEL_PROVIDER_ID)?;
            let mut snapshot = procfs::snapshot();
            snapshot.retain(|p| p.pid == pid);
            self.translator.write_snapshot(&mut self.out, &snapshot)?;
        }
        Ok(())
    }

    /// Kernel events lost so far.
    fn dropped_now(&self) -> u64 {
        let now = self
            .kernel
            .as_ref()
            .and_then(|k| k.dropped().ok())
            .unwrap_or(0);
        now + self.dropped_before.iter().map(|&(_, n)| n).sum::<u64>()
            + self.other_dropped_before
            + self.keep.refused
    }

    /// How the session is going.
    pub fn progress(&self) -> Progress {
        Progress {
            elapsed: self.stats.duration + self.started.map_or(Duration::ZERO, |s| s.elapsed()),
            kernel_events: self.stats.kernel_events,
            bytes: self.out.bytes(),
            dropped: self.dropped_now(),
            kernel_fill: self.kernel.as_ref().map_or(0.0, KernelProvider::fill),
        }
    }

    /// The output, for userspace providers' records.
    pub fn out(&mut self) -> &mut FxtStream<W> {
        &mut self.out
    }

    /// The output, to look at.
    pub fn out_ref(&self) -> &FxtStream<W> {
        &self.out
    }

    /// The kernel categories enabled (by exact name).
    pub fn categories_enabled(&self) -> &[String] {
        &self.categories
    }

    /// Hands the records written so far to the output (for a reader at the
    /// other end of a pipe).
    pub fn flush(&mut self) -> Result<(), RecordError> {
        Ok(self.out.flush()?)
    }

    /// Waits until the kernel provider has events; never, while not
    /// tracing.
    pub async fn readable(&mut self) -> Result<(), RecordError> {
        match self.kernel.as_mut() {
            Some(k) => Ok(k.readable().await?),
            None => std::future::pending().await,
        }
    }

    /// Drains every event available now into the output.
    pub fn drain(&mut self) -> Result<(), RecordError> {
        let mut result = Ok(());
        // Shared by the two callbacks below, which never run at once.
        let translator = std::cell::RefCell::new(&mut self.translator);
        let out = &mut self.out;
        let keep = &mut self.keep;
        let (mode, budget) = (self.config.kernel_mode, self.budget);
        let mut n = 0u64;
        let mut malformed = 0u64;
        let Some(kernel) = self.kernel.as_mut() else {
            return Ok(());
        };
        // Userspace providers' sections may have come in between.
        out.enter_provider(KERNEL_PROVIDER_ID)?;
        // A stack needs its process's mappings while the process lives,
        // however much later it is translated: they are read as the stack
        // arrives (the program wakes the reader at a process's first one).
        // A process that executes a program has new mappings: the stacks
        // after its exec read them again.
        let mut arrived = |bytes: &[u8]| match entry_process(bytes) {
            Some((STACK_KIND, _)) => {
                if let Ok(record) = trace_common::kernel::stack::StackRecord::parse(bytes) {
                    translator.borrow_mut().observe_stack_process(&record);
                }
            }
            Some((kind, pid)) if kind == EventKind::Exec as u32 => {
                translator.borrow_mut().forget_stack_process(pid);
            }
            _ => {}
        };
        let mut release = |bytes: &[u8]| {
            n += 1;
            let mut translator = translator.borrow_mut();
            match mode {
                BufferingMode::Circular => {
                    let len = bytes.len().min(usize::from(u16::MAX));
                    keep.ring.extend((len as u16).to_le_bytes());
                    keep.ring.extend(&bytes[..len]);
                    keep.forget_beyond(budget);
                }
                BufferingMode::Oneshot if keep.used + bytes.len() as u64 > budget => {
                    keep.refused += 1;
                }
                _ => {
                    keep.used += bytes.len() as u64;
                    let translated = with_entry(bytes, |entry| {
                        if result.is_err() {
                            return;
                        }
                        result = match entry {
                            EntryRef::Fixed(event) => translator.translate(out, event),
                            EntryRef::Tracepoint(record) => translator.tracepoint(out, &record),
                            EntryRef::Stack(record) => translator.stack(out, &record),
                        };
                    });
                    if translated.is_err() {
                        malformed += 1;
                    }
                }
            }
        };
        kernel.drain_raw_seeing(&mut arrived, &mut release);
        kernel.add_malformed(malformed);
        self.stats.kernel_events += n;
        self.stats.malformed += malformed;
        result.map_err(RecordError::from)
    }

    /// Drains until nothing read from the kernel is due any more, or for
    /// `limit` at most (a flood keeps events coming): what a snapshot
    /// takes then reaches up to now, but for the events still waiting for
    /// their order to be settled.
    pub fn drain_due(&mut self, limit: std::time::Duration) -> Result<(), RecordError> {
        let until = Instant::now() + limit;
        loop {
            self.drain()?;
            let pending = self
                .kernel
                .as_ref()
                .is_some_and(KernelProvider::has_pending);
            if !pending || Instant::now() >= until {
                return Ok(());
            }
        }
    }

    /// Detaches the kernel provider, drains what is left, closes what is
    /// still open and unloads the programs; with `write_results`, writes
    /// the events the circular mode kept.
    pub fn stop(&mut self, write_results: bool) -> Result<(), RecordError> {
        if let Some(s) = self.started.take() {
            self.stats.duration += s.elapsed();
        }
        if let Some(k) = self.kernel.as_mut() {
            // Every program stops at one instant; detaching them one by one
            // takes a while.
            let stop = k.cut()?;
            self.translator.set_stop(stop);
            k.detach();
            // Events already in the ring buffers are still collected.
            self.drain()?;
            // Threads still blocked (or not yet back in user space) at the
            // cut are written as ending there.
            if let Some(k) = self.kernel.as_mut() {
                let pending = k.offcpu_pending(stop);
                if !pending.is_empty() {
                    self.out.enter_provider(KERNEL_PROVIDER_ID)?;
                }
                for bytes in pending {
                    if let Ok(record) = trace_common::kernel::stack::StackRecord::parse(&bytes) {
                        self.translator.observe_stack_process(&record);
                        self.translator.stack(&mut self.out, &record)?;
                    }
                }
            }
        }
        if let Some(k) = self.kernel.take() {
            let per_cpu = k.dropped_per_cpu()?;
            let on_cpus: u64 = per_cpu.iter().map(|&(_, n)| n).sum();
            self.other_dropped_before += k.dropped()?.saturating_sub(on_cpus);
            for (cpu, n) in per_cpu {
                match self.dropped_before.iter_mut().find(|(c, _)| *c == cpu) {
                    Some((_, m)) => *m += n,
                    None => self.dropped_before.push((cpu, n)),
                }
            }
            k.stop();
            self.out.enter_provider(KERNEL_PROVIDER_ID)?;
            self.translator.finish_open(&mut self.out)?;
        }
        if write_results {
            self.write_kept()?;
            self.written_at_stop = true;
        }
        Ok(())
    }

    /// Whether the kernel's events are kept in the circular mode.
    pub fn is_circular(&self) -> bool {
        self.config.kernel_mode == BufferingMode::Circular
    }

    /// What the circular mode keeps now, as a whole trace of its own: the
    /// magic number record, the kernel provider, the processes and threads
    /// that exist, and the kept events translated afresh (whatever is
    /// still open is ended where the events end). Nothing changes here:
    /// the events are still written at the stop. Stack samples are left
    /// out (their processes' mappings belong to this session's resolver).
    pub fn kept_as_trace(&self) -> Result<Vec<u8>, RecordError> {
        let mut out = FxtStream::new(Vec::new())?;
        let mut translator = translator_for(&self.config);
        ProviderSections::new(KERNEL_PROVIDER_ID, KERNEL_PROVIDER_NAME).begin(&mut out)?;
        let mut snapshot = procfs::snapshot();
        if let Some(pids) = &self.config.pids {
            snapshot.retain(|p| pids.contains(&p.pid));
        }
        translator.write_snapshot(&mut out, &snapshot)?;
        // The names as they were at the first kept event, where the kept
        // events do not say them.
        translator.write_names(&mut out, &self.keep.forgotten)?;
        translate_kept(
            &mut translator,
            &mut out,
            &self.keep.ring,
            self.keep.forgot,
            false,
        )?;
        translator.finish_open(&mut out)?;
        Ok(out.finish()?)
    }

    /// Writes the kernel events the circular mode kept, oldest first.
    fn write_kept(&mut self) -> Result<(), RecordError> {
        let ring = std::mem::take(&mut self.keep.ring);
        let forgotten = std::mem::take(&mut self.keep.forgotten);
        let forgot = std::mem::take(&mut self.keep.forgot);
        if ring.is_empty() {
            return Ok(());
        }
        self.out.enter_provider(KERNEL_PROVIDER_ID)?;
        self.translator.write_names(&mut self.out, &forgotten)?;
        self.stats.malformed +=
            translate_kept(&mut self.translator, &mut self.out, &ring, forgot, true)?;
        self.translator.finish_open(&mut self.out)?;
        Ok(())
    }

    /// The triggers that fired since the last call (each is marked in the
    /// output where it fired).
    pub fn take_fired(&mut self) -> Vec<crate::kernel::translate::Fired> {
        self.translator.take_fired()
    }

    /// The kernel provider's numbers so far.
    pub fn stats(&self) -> RecordStats {
        let mut stats = self.stats.clone();
        stats.counts = self.translator.counts();
        (stats.tracepoints, stats.unpaired) = self.translator.tracepoint_counts();
        stats.dropped = self.dropped_now();
        stats.dropped_per_cpu = self.dropped_before.clone();
        if let Some(now) = self.kernel.as_ref().and_then(|k| k.dropped_per_cpu().ok()) {
            for (cpu, n) in now {
                match stats.dropped_per_cpu.iter_mut().find(|(c, _)| *c == cpu) {
                    Some((_, m)) => *m += n,
                    None => stats.dropped_per_cpu.push((cpu, n)),
                }
            }
        }
        stats.duration += self.started.map_or(Duration::ZERO, |s| s.elapsed());
        stats
    }

    /// Stops if needed, writes what was kept and not written, reports
    /// drops, flushes, and hands back the output.
    pub fn finish(self) -> Result<(RecordStats, W), RecordError> {
        let (w, finished) = self.finish_keeping_output();
        finished.map(|stats| (stats, w))
    }

    /// As [`Session::finish`], but the output comes back whatever failed,
    /// so what it holds can still be delivered.
    pub fn finish_keeping_output(mut self) -> (W, Result<RecordStats, RecordError>) {
        let finished = self.write_end().and_then(|stats| {
            self.out.flush()?;
            Ok(stats)
        });
        (self.out.into_inner(), finished)
    }

    /// What [`Session::finish`] writes.
    fn write_end(&mut self) -> Result<RecordStats, RecordError> {
        self.stop(true)?;
        let stats = self.stats();
        if stats.dropped > 0 {
            let on_cpus: u64 = stats.dropped_per_cpu.iter().map(|&(_, n)| n).sum();
            self.out.enter_provider(KERNEL_PROVIDER_ID)?;
            let at = self.translator.stop_ts().unwrap_or_else(boottime_ns);
            self.translator.drops(
                &mut self.out,
                at,
                &stats.dropped_per_cpu,
                stats.dropped.saturating_sub(on_cpus),
            )?;
            self.out.write(&Record::ProviderEvent {
                id: KERNEL_PROVIDER_ID,
                event: provider_event::BUFFER_OVERFLOW,
            })?;
        }
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn following_a_process_that_does_not_exist_is_refused() {
        let mut s = Session::new(
            RecordConfig {
                categories: vec!["app".into()],
                buffer_bytes: 1 << 20,
                pids: Some(vec![]),
                uprobes: vec![],
                usdt: vec![],
                tracepoints: Default::default(),
                kernel_mode: BufferingMode::Streaming,
                stacks: Default::default(),
                triggers: Vec::new(),
                backlog_bytes: crate::kernel::DEFAULT_BACKLOG_BYTES,
            },
            Vec::new(),
        )
        .unwrap();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        gone.wait().unwrap();
        for pid in [0, gone.id(), u32::MAX] {
            assert!(
                matches!(
                    s.follow(pid),
                    Err(RecordError::Kernel(KernelError::NoSuchProcess { pid: p })) if p == pid
                ),
                "{pid}"
            );
        }
        // Not kept either: the next start would fail on it.
        assert_eq!(s.config.pids, Some(vec![]));
        s.follow(std::process::id()).unwrap();
        assert_eq!(s.config.pids, Some(vec![std::process::id()]));
    }
}
