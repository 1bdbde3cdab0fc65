//! The kernel side of a session, whole: the provider of each start, the
//! translator that turns its entries into records, the buffering policy
//! ([`Keep`]), and the count of what was read, lost and malformed.
//!
//! Every entry the rings hand on takes one path: [`KernelRecorder::drain`]
//! gives it to [`Keep::entry`], which translates it at once (streaming,
//! oneshot) with [`KernelTranslator::entry`] or keeps it for the stop
//! (circular). A [`crate::session::Session`] holds one recorder beside the
//! output it writes into.

use std::io::Write;
use std::sync::Arc;

use trace_common::category::{
    self, KERNEL_CATEGORIES, KERNEL_LOCK, KERNEL_OFFCPU, KERNEL_PROC, KERNEL_PROFILE,
};
use trace_common::fxt::{Record, provider_event};
use trace_common::kernel::EventKind;
use trace_common::kernel::stack::{STACK_KIND, StackRecord};
use trace_common::provider::{BufferDisposition, BufferingMode};

use super::keep::Keep;
use super::tracepoints::Selection;
use super::translate::{Fired, KernelTranslator, UsdtSiteInfo};
use super::{KernelConfig, KernelError, KernelProvider};
use crate::clock::boottime_ns;
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
    /// [`KernelConfig::pids`]); [`Session::follow`](crate::session::Session::follow) adds more.
    pub pids: Option<Vec<u32>>,
    /// Empty: no cgroup filter. Else kernel events only of the tasks in
    /// these cgroups or below them (paths from the cgroup v2 hierarchy's
    /// root; see [`KernelConfig::cgroups`]). Not with `pids`.
    pub cgroups: Vec<String>,
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
    /// [`crate::kernel::translate::Trigger`]); [`Session::take_fired`](crate::session::Session::take_fired)
    /// says which fired.
    pub triggers: Vec<crate::kernel::translate::Trigger>,
    /// Most memory the kernel events read and not yet translated may take
    /// (see [`KernelConfig::backlog_bytes`]).
    pub backlog_bytes: usize,
}

impl RecordConfig {
    /// Whether a pid or cgroup filter selects the processes recorded.
    pub fn filtered(&self) -> bool {
        self.pids.is_some() || !self.cgroups.is_empty()
    }

    /// Whether process `pid` is among those recorded, now.
    pub fn selects(&self, pid: u32) -> bool {
        if let Some(pids) = &self.pids {
            return pids.contains(&pid);
        }
        self.cgroups.is_empty()
            || crate::cgroup::of_process(pid)
                .is_some_and(|c| self.cgroups.iter().any(|s| crate::cgroup::within(&c, s)))
    }

    /// Whether probes or tracepoints selected by name are to be placed.
    pub(crate) fn probes(&self) -> bool {
        !self.uprobes.is_empty() || !self.usdt.is_empty() || !self.tracepoints.is_empty()
    }
}

/// The kernel categories `patterns` select.
pub fn kernel_categories(patterns: &[String]) -> Vec<String> {
    KERNEL_CATEGORIES
        .iter()
        .filter(|(name, _)| category::kernel_enabled(patterns, name))
        .map(|(name, _)| (*name).to_owned())
        .collect()
}

/// Why the kernel side failed.
#[derive(Debug, thiserror::Error)]
pub enum RecorderError {
    /// The kernel provider could not be started or read.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// The output could not be written.
    #[error(transparent)]
    Output(#[from] OutputError),
}

/// What the kernel side read and lost so far.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Entries handed on by the rings.
    pub events: u64,
    /// Entries that could not be decoded.
    pub malformed: u64,
    /// Entries lost: rings full, runs the kernel skipped, the oneshot
    /// budget spent.
    pub dropped: u64,
    /// Of `dropped`, those lost on each CPU, as `(cpu, lost)`.
    pub dropped_per_cpu: Vec<(u32, u64)>,
}

/// The kernel provider of a session across its starts, and what becomes
/// of its events.
pub struct KernelRecorder {
    kernel: Option<KernelProvider>,
    translator: KernelTranslator,
    keep: Keep,
    /// The kernel provider's sections in the output.
    section: ProviderSections,
    events: u64,
    malformed: u64,
    /// Drops of the kernel providers of earlier starts, per CPU.
    dropped_before: Vec<(u32, u64)>,
    /// Drops of earlier starts not on a CPU's ring.
    other_dropped_before: u64,
    /// How many processes were followed when [`KernelRecorder::begin_start`]
    /// said what to load: those added since are followed once it is
    /// attached.
    followed_at_start: usize,
    /// The last stop wrote the kept events: the next start begins afresh
    /// whatever its disposition, so nothing is written twice.
    written_at_stop: bool,
}

/// A translator for the events `config` records, starting now.
pub(crate) fn translator_for(config: &RecordConfig) -> KernelTranslator {
    let mut translator = KernelTranslator::new();
    translator.set_start(boottime_ns());
    translator.set_proc_instants(
        kernel_categories(&config.categories)
            .iter()
            .any(|c| c == KERNEL_PROC),
    );
    translator.set_lock_waits(
        kernel_categories(&config.categories)
            .iter()
            .any(|c| c == KERNEL_LOCK),
    );
    translator.set_followed_only(config.filtered());
    translator.set_labels(true);
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

impl KernelRecorder {
    /// A recorder of what `config` asks, not started.
    pub fn new(config: &RecordConfig) -> Self {
        let mut translator = translator_for(config);
        translator.set_triggers(config.triggers.clone());
        KernelRecorder {
            kernel: None,
            translator,
            keep: Keep::new(config.kernel_mode, config.buffer_bytes as u64),
            section: ProviderSections::new(KERNEL_PROVIDER_ID, KERNEL_PROVIDER_NAME),
            events: 0,
            malformed: 0,
            dropped_before: Vec::new(),
            other_dropped_before: 0,
            followed_at_start: 0,
            written_at_stop: false,
        }
    }

    /// Whether a kernel provider runs.
    pub fn running(&self) -> bool {
        self.kernel.is_some()
    }

    /// Whether its events are kept to be written at the stop.
    pub fn is_circular(&self) -> bool {
        self.keep.is_circular()
    }

    /// Before a start: `disposition` says whether events kept from an
    /// earlier start and not yet written are forgotten.
    pub fn ready(&mut self, disposition: BufferDisposition) {
        if disposition != BufferDisposition::Retain || self.written_at_stop {
            self.keep.clear();
        }
        self.written_at_stop = false;
    }

    /// Readies a start of the kernel `categories` (every one named
    /// exactly) and says what to load.
    pub fn begin_start(&mut self, config: &RecordConfig, categories: Vec<String>) -> KernelConfig {
        self.translator
            .set_proc_instants(categories.iter().any(|c| c == KERNEL_PROC));
        self.translator
            .set_lock_waits(categories.iter().any(|c| c == KERNEL_LOCK));
        if categories
            .iter()
            .any(|c| c == KERNEL_PROFILE || c == KERNEL_OFFCPU)
            || !config.stacks.probe_stacks.is_empty()
        {
            self.translator.prepare_stacks();
        }
        self.followed_at_start = config.pids.as_ref().map_or(0, Vec::len);
        KernelConfig {
            categories,
            ring_buffer_bytes: config.buffer_bytes,
            pids: config.pids.clone(),
            cgroups: config.cgroups.clone(),
            uprobes: config.uprobes.clone(),
            usdt: config.usdt.clone(),
            tracepoints: Arc::clone(&config.tracepoints),
            classic_tracepoints: false,
            separate_syscall_events: false,
            stacks: config.stacks.clone(),
            backlog_bytes: config.backlog_bytes,
            deadline: None,
        }
    }

    /// Completes [`KernelRecorder::begin_start`] with the provider it asked
    /// for, loaded and attached: follows the processes of `config.pids` added since,
    /// and names what exists.
    pub fn attached<W: Write>(
        &mut self,
        mut kernel: KernelProvider,
        config: &RecordConfig,
        out: &mut FxtStream<W>,
    ) -> Result<(), OutputError> {
        let added = config.pids.as_deref().unwrap_or_default();
        for &pid in added.get(self.followed_at_start..).unwrap_or_default() {
            if let Err(e) = kernel.follow(pid) {
                log::info!("process {pid}, followed while the programs were loaded: {e}");
            }
        }
        // The translator tells the programs which processes run Python as it
        // finds them.
        if let Some(procs) = kernel.take_python_procs() {
            self.translator.set_python_procs(procs);
        }
        self.kernel = Some(kernel);
        // The programs are attached: a call that ends without its entry
        // began before this.
        let now = boottime_ns();
        self.translator.restart(now);
        self.translator.set_start(now);
        self.section.begin(out)?;
        // The programs are attached already: whatever is created from now
        // on is reported by events, whatever existed before is in the
        // snapshot (with a pid filter, of the followed processes).
        let mut snapshot = procfs::snapshot();
        if config.filtered() {
            snapshot.retain(|p| config.selects(p.pid));
        }
        self.translator.write_snapshot(out, &snapshot)
    }

    /// Follows process `pid` too, if a provider runs, and names it.
    pub fn follow<W: Write>(
        &mut self,
        pid: u32,
        out: &mut FxtStream<W>,
    ) -> Result<(), RecorderError> {
        if let Some(k) = self.kernel.as_mut() {
            k.follow(pid)?;
            out.enter_provider(KERNEL_PROVIDER_ID)?;
            let mut snapshot = procfs::snapshot();
            snapshot.retain(|p| p.pid == pid);
            self.translator.write_snapshot(out, &snapshot)?;
        }
        Ok(())
    }

    /// Kernel events lost so far.
    pub fn dropped(&self) -> u64 {
        let now = self
            .kernel
            .as_ref()
            .and_then(|k| k.dropped().ok())
            .unwrap_or(0);
        now + self.dropped_before.iter().map(|&(_, n)| n).sum::<u64>()
            + self.other_dropped_before
            + self.keep.refused()
    }

    /// How full the fullest CPU's ring is, from 0 to 1.
    pub fn fill(&self) -> f64 {
        self.kernel.as_ref().map_or(0.0, KernelProvider::fill)
    }

    /// Entries handed on so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// What was read, lost and malformed so far.
    pub fn tally(&self) -> Tally {
        let mut dropped_per_cpu = self.dropped_before.clone();
        if let Some(now) = self.kernel.as_ref().and_then(|k| k.dropped_per_cpu().ok()) {
            for (cpu, n) in now {
                match dropped_per_cpu.iter_mut().find(|(c, _)| *c == cpu) {
                    Some((_, m)) => *m += n,
                    None => dropped_per_cpu.push((cpu, n)),
                }
            }
        }
        Tally {
            events: self.events,
            malformed: self.malformed,
            dropped: self.dropped(),
            dropped_per_cpu,
        }
    }

    /// The translator, for what it counted.
    pub fn translator(&self) -> &KernelTranslator {
        &self.translator
    }

    /// Waits until the provider has events; never, while none runs.
    pub async fn readable(&mut self) -> Result<(), KernelError> {
        match self.kernel.as_mut() {
            Some(k) => k.readable().await,
            None => std::future::pending().await,
        }
    }

    /// Whether events read from the rings wait for their order to settle.
    pub fn has_pending(&self) -> bool {
        self.kernel
            .as_ref()
            .is_some_and(KernelProvider::has_pending)
    }

    /// Drains every event available now into `out`, as the buffering
    /// policy says.
    pub fn drain<W: Write>(&mut self, out: &mut FxtStream<W>) -> Result<(), OutputError> {
        let Some(kernel) = self.kernel.as_mut() else {
            return Ok(());
        };
        let mut result = Ok(());
        // Shared by the two callbacks below, which never run at once.
        let translator = std::cell::RefCell::new(&mut self.translator);
        let keep = &mut self.keep;
        let mut n = 0u64;
        let mut malformed = 0u64;
        // Userspace providers' sections may have come in between.
        out.enter_provider(KERNEL_PROVIDER_ID)?;
        // A stack needs its process's mappings while the process lives,
        // however much later it is translated: they are read as the stack
        // arrives (the program wakes the reader at a process's first one).
        // A process that executes a program has new mappings: the stacks
        // after its exec read them again.
        let mut arrived = |bytes: &[u8]| match entry_process(bytes) {
            Some((STACK_KIND, _)) => {
                if let Ok(record) = StackRecord::parse(bytes) {
                    translator.borrow_mut().observe_stack_process(&record);
                }
            }
            Some((kind, pid)) if kind == EventKind::Exec as u32 => {
                let ts = bytes
                    .get(8..16)
                    .and_then(|b| b.try_into().ok())
                    .map_or(0, u64::from_ne_bytes);
                translator.borrow_mut().forget_stack_process(pid, ts);
            }
            _ => {}
        };
        let mut release = |bytes: &[u8]| {
            n += 1;
            if result.is_err() {
                return;
            }
            match keep.entry(bytes, &mut translator.borrow_mut(), out) {
                Ok(true) => {}
                Ok(false) => malformed += 1,
                Err(e) => result = Err(e),
            }
        };
        kernel.drain_raw_seeing(&mut arrived, &mut release);
        kernel.add_malformed(malformed);
        self.events += n;
        self.malformed += malformed;
        result
    }

    /// Detaches the provider, drains what is left, closes what is still
    /// open and unloads the programs; with `write_results`, writes the
    /// events the circular mode kept.
    pub fn stop<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        write_results: bool,
    ) -> Result<(), RecorderError> {
        if let Some(k) = self.kernel.as_mut() {
            // Every program stops at one instant; detaching them one by one
            // takes a while.
            let stop = k.cut()?;
            self.translator.set_stop(stop);
            k.detach();
            // Events already in the ring buffers are still collected.
            self.drain(out)?;
            // Threads still blocked (or not yet back in user space) at the
            // cut are written as ending there.
            if let Some(k) = self.kernel.as_mut() {
                let pending = k.offcpu_pending(stop);
                if !pending.is_empty() {
                    out.enter_provider(KERNEL_PROVIDER_ID)?;
                }
                for bytes in pending {
                    if let Ok(record) = StackRecord::parse(&bytes) {
                        self.translator.observe_stack_process(&record);
                        self.translator.stack(out, &record)?;
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
            out.enter_provider(KERNEL_PROVIDER_ID)?;
            self.translator.finish_open(out)?;
        }
        if write_results {
            if self.keep.holds() {
                out.enter_provider(KERNEL_PROVIDER_ID)?;
                self.malformed += self.keep.write(&mut self.translator, out)?;
                self.translator.finish_open(out)?;
            }
            self.written_at_stop = true;
        }
        Ok(())
    }

    /// What the circular mode keeps now, as a whole trace of its own (see
    /// [`crate::session::Session::kept_as_trace`]).
    pub fn kept_as_trace(&self, config: &RecordConfig) -> Result<Vec<u8>, OutputError> {
        let mut out = FxtStream::new(Vec::new())?;
        let mut translator = translator_for(config);
        ProviderSections::new(KERNEL_PROVIDER_ID, KERNEL_PROVIDER_NAME).begin(&mut out)?;
        let mut snapshot = procfs::snapshot();
        if config.filtered() {
            snapshot.retain(|p| config.selects(p.pid));
        }
        translator.write_snapshot(&mut out, &snapshot)?;
        self.keep.replay(&mut translator, &mut out)?;
        translator.finish_open(&mut out)?;
        out.finish()
    }

    /// The triggers that fired since the last call.
    pub fn take_fired(&mut self) -> Vec<Fired> {
        self.translator.take_fired()
    }

    /// After the last stop: writes what was lost, where, when anything
    /// was.
    pub fn write_drops<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        dropped: u64,
        dropped_per_cpu: &[(u32, u64)],
    ) -> Result<(), OutputError> {
        if dropped == 0 {
            return Ok(());
        }
        let on_cpus: u64 = dropped_per_cpu.iter().map(|&(_, n)| n).sum();
        out.enter_provider(KERNEL_PROVIDER_ID)?;
        let at = self.translator.stop_ts().unwrap_or_else(boottime_ns);
        self.translator
            .drops(out, at, dropped_per_cpu, dropped.saturating_sub(on_cpus))?;
        out.write(&Record::ProviderEvent {
            id: KERNEL_PROVIDER_ID,
            event: provider_event::BUFFER_OVERFLOW,
        })
    }
}
