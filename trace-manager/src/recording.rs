//! A recording session run inside the calling process (the embedded manager).
//!
//! [`Recording::start`] loads the kernel provider for the enabled kernel
//! categories, writes the head of the FXT stream (magic number, provider
//! info, initialization) and names every process and thread that already
//! exists. [`Recording::run_until`] drains the ring buffers into the stream
//! until a future completes; [`Recording::finish`] drains what is left,
//! reports drops as a provider event and flushes.

use std::future::Future;
use std::io::Write;
use std::time::{Duration, Instant};

use thiserror::Error;
use trace_common::category::{self, KERNEL_CATEGORIES};
use trace_common::fxt::{Record, provider_event};
use trace_common::kernel::{ABSENT_ID, KernelEvent};
use trace_common::provider::BufferingMode;

use crate::kernel::{FollowHook, KernelConfig, KernelError, KernelProvider};
use crate::kernel_records::{KernelRecordCounts, KernelTranslator, UsdtSiteInfo, comm_str};
use crate::output::{FxtStream, OutputError};
use crate::procfs;
use crate::userspace::{ProviderStats, Registry, UserspaceConfig, UserspaceError};

/// The provider id of the kernel provider in the output.
pub const KERNEL_PROVIDER_ID: u32 = 1;
/// The provider name of the kernel provider in the output.
pub const KERNEL_PROVIDER_NAME: &str = "kernel";

/// What to record.
#[derive(Clone, Debug)]
pub struct RecordConfig {
    /// Category names or globs (`kernel:*`); empty selects every category.
    pub categories: Vec<String>,
    /// Size of the kernel provider's ring buffer in bytes.
    pub buffer_bytes: usize,
    /// Userspace providers to collect, if any.
    pub userspace: Option<UserspaceConfig>,
    /// `None`: kernel events of every process. `Some(pids)`: only of these
    /// processes and what they create during the recording (see
    /// [`KernelConfig::pids`]); [`Recording::follow`] adds more.
    pub pids: Option<Vec<u32>>,
    /// Functions to probe (`--uprobe`), resolved.
    pub uprobes: Vec<crate::uprobes::ResolvedProbe>,
    /// USDT probe sites (`--usdt`), resolved.
    pub usdt: Vec<crate::usdt::UsdtSite>,
    /// What happens to kernel events: written as they come (streaming),
    /// the first `buffer_bytes` of them kept (oneshot), or the newest
    /// `buffer_bytes` of them kept and written at the end (circular).
    pub kernel_mode: BufferingMode,
}

impl RecordConfig {
    /// Whether dynamic or static probes are to be placed.
    fn probes(&self) -> bool {
        !self.uprobes.is_empty() || !self.usdt.is_empty()
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
}

/// Why a recording failed.
#[derive(Debug, Error)]
pub enum RecordError {
    /// The category list selects no category this recorder knows.
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
    /// The userspace provider registry failed.
    #[error(transparent)]
    Userspace(#[from] UserspaceError),
}

/// The outcome of a recording.
#[derive(Clone, Debug, Default)]
pub struct RecordStats {
    /// Kernel events received from the ring buffers.
    pub kernel_events: u64,
    /// Records written, the magic number record included.
    pub records: u64,
    /// Bytes written.
    pub bytes: u64,
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
    /// How long events were collected.
    pub duration: Duration,
    /// The kernel categories that were enabled.
    pub categories: Vec<String>,
    /// What each userspace provider contributed.
    pub providers: Vec<ProviderStats>,
}

/// A running recording writing FXT into `W`.
pub struct Recording<W: Write> {
    kernel: Option<KernelProvider>,
    kernel_mode: BufferingMode,
    keep: KernelKeep,
    budget: u64,
    registry: Option<Registry>,
    out: FxtStream<W>,
    translator: KernelTranslator,
    stats: RecordStats,
    started: Instant,
}

/// How a recording is going, for a progress display.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Progress {
    /// Time since the recording started.
    pub elapsed: Duration,
    /// Kernel events received so far.
    pub kernel_events: u64,
    /// Bytes written so far.
    pub bytes: u64,
    /// Kernel events lost so far.
    pub dropped: u64,
    /// How full the fullest CPU's kernel ring buffer is, from 0 to 1.
    pub kernel_fill: f64,
    /// Userspace providers registered, and how many of them are tracing.
    pub providers: (usize, usize),
}

/// The kernel categories `patterns` select.
pub fn kernel_categories(patterns: &[String]) -> Vec<String> {
    KERNEL_CATEGORIES
        .iter()
        .filter(|(name, _)| category::is_enabled(patterns, name))
        .map(|(name, _)| (*name).to_owned())
        .collect()
}

impl<W: Write> Recording<W> {
    /// Loads the kernel provider and writes the head of the trace to `out`.
    pub fn start(config: &RecordConfig, out: W) -> Result<Self, RecordError> {
        let categories = kernel_categories(&config.categories);
        let unknown_kernel = config.categories.iter().find(|c| {
            c.starts_with("kernel:") && kernel_categories(std::slice::from_ref(c)).is_empty()
        });
        if unknown_kernel.is_some()
            || (categories.is_empty() && config.userspace.is_none() && !config.probes())
        {
            return Err(RecordError::NoCategory {
                patterns: config.categories.clone(),
                known: KERNEL_CATEGORIES
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let mut registry = match &config.userspace {
            Some(u) => match Registry::bind(u.clone()) {
                Ok(r) => Some(r),
                // Another manager owns the providers; the kernel is still ours.
                Err(e @ UserspaceError::Busy(_)) if !categories.is_empty() || config.probes() => {
                    log::warn!("{e}; recording without userspace providers");
                    None
                }
                Err(e) => return Err(e.into()),
            },
            None => None,
        };
        let kernel = if categories.is_empty() && !config.probes() {
            None
        } else {
            Some(KernelProvider::start(&KernelConfig {
                categories: categories.clone(),
                ring_buffer_bytes: config.buffer_bytes,
                pids: config.pids.clone(),
                uprobes: config.uprobes.clone(),
                usdt: config.usdt.clone(),
                classic_tracepoints: false,
            })?)
        };
        let mut out = FxtStream::new(out)?;
        let mut translator = KernelTranslator::new();
        translator.set_start(monotonic_ns());
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
        if kernel.is_some() {
            out.write(&Record::ProviderInfo {
                id: KERNEL_PROVIDER_ID,
                name: KERNEL_PROVIDER_NAME.into(),
            })?;
            out.write(&Record::Initialization {
                ticks_per_second: 1_000_000_000,
            })?;
            // The programs are attached already: whatever is created from now
            // on is reported by events, whatever existed before is in the
            // snapshot (with a pid filter, of the followed processes).
            let mut snapshot = procfs::snapshot();
            if let Some(pids) = &config.pids {
                snapshot.retain(|p| pids.contains(&p.pid));
            }
            translator.write_snapshot(&mut out, &snapshot)?;
        }
        if let Some(r) = registry.as_mut() {
            r.start_tracing();
        }
        Ok(Recording {
            kernel,
            kernel_mode: config.kernel_mode,
            keep: KernelKeep::default(),
            budget: config.buffer_bytes as u64,
            registry,
            out,
            translator,
            stats: RecordStats {
                categories,
                ..Default::default()
            },
            started: Instant::now(),
        })
    }

    /// A hook for a command started for this recording to call between fork
    /// and exec, so the pid filter follows it (see
    /// [`KernelProvider::follow_hook`]); `None` without a filter.
    pub fn follow_hook(&self) -> Option<FollowHook> {
        self.kernel.as_ref()?.follow_hook()
    }

    /// Records process `pid` too (with a pid filter; see
    /// [`KernelProvider::follow`]) and names it in the output.
    pub fn follow(&mut self, pid: u32) -> Result<(), RecordError> {
        if let Some(k) = self.kernel.as_mut() {
            k.follow(pid)?;
            self.out.enter_provider(KERNEL_PROVIDER_ID)?;
            let mut snapshot = procfs::snapshot();
            snapshot.retain(|p| p.pid == pid);
            self.translator.write_snapshot(&mut self.out, &snapshot)?;
        }
        Ok(())
    }

    /// How the recording is going.
    pub fn progress(&self) -> Progress {
        let providers = self
            .registry
            .as_ref()
            .map(|r| r.providers())
            .unwrap_or_default();
        Progress {
            elapsed: self.started.elapsed(),
            kernel_events: self.stats.kernel_events,
            bytes: self.out.bytes(),
            dropped: self
                .kernel
                .as_ref()
                .and_then(|k| k.dropped().ok())
                .unwrap_or(0)
                + self.keep.refused,
            kernel_fill: self.kernel.as_ref().map_or(0.0, KernelProvider::fill),
            providers: (
                providers.len(),
                providers.iter().filter(|p| p.state == "started").count(),
            ),
        }
    }

    /// Hands the records written so far to the output (for a reader at the
    /// other end of a pipe).
    pub fn flush(&mut self) -> Result<(), RecordError> {
        Ok(self.out.flush()?)
    }

    /// The alerts userspace providers raised since the last call, oldest
    /// first, as (provider name, alert name).
    pub fn take_alerts(&mut self) -> Vec<(String, String)> {
        self.registry
            .as_mut()
            .map(Registry::take_alerts)
            .unwrap_or_default()
    }

    /// Collects events until `stop` completes, and returns its output.
    pub async fn run_until<F: Future>(&mut self, stop: F) -> Result<F::Output, RecordError> {
        tokio::pin!(stop);
        loop {
            let (kernel, registry, out) = (&mut self.kernel, &mut self.registry, &mut self.out);
            let kernel = async {
                match kernel.as_mut() {
                    Some(k) => k.readable().await,
                    None => std::future::pending().await,
                }
            };
            let users = async {
                match registry.as_mut() {
                    Some(r) => r.serve_once(out).await,
                    None => std::future::pending().await,
                }
            };
            let woke = tokio::select! {
                biased;
                v = &mut stop => return Ok(v),
                r = kernel => r.map_err(RecordError::from),
                r = users => r.map(|_| ()).map_err(RecordError::from).map(|_| ()),
            };
            woke?;
            self.drain()?;
        }
    }

    /// Drains every event available now into the output.
    fn drain(&mut self) -> Result<(), RecordError> {
        let mut result = Ok(());
        let translator = &mut self.translator;
        let out = &mut self.out;
        let keep = &mut self.keep;
        let (mode, budget) = (self.kernel_mode, self.budget);
        let mut n = 0u64;
        let mut malformed = 0u64;
        let Some(kernel) = self.kernel.as_mut() else {
            return Ok(());
        };
        // Userspace providers' sections may have come in between.
        out.enter_provider(KERNEL_PROVIDER_ID)?;
        kernel.drain_raw(&mut |bytes| {
            n += 1;
            match mode {
                BufferingMode::Circular => {
                    let len = bytes.len().min(usize::from(u16::MAX));
                    keep.ring.extend((len as u16).to_le_bytes());
                    keep.ring.extend(&bytes[..len]);
                    // Forget the oldest whole events beyond the budget.
                    while keep.ring.len() as u64 > budget {
                        let old = usize::from(u16::from_le_bytes([keep.ring[0], keep.ring[1]]));
                        keep.ring.drain(..(2 + old).min(keep.ring.len()));
                    }
                }
                BufferingMode::Oneshot if keep.used + bytes.len() as u64 > budget => {
                    keep.refused += 1;
                }
                _ => {
                    keep.used += bytes.len() as u64;
                    match trace_common::kernel::parse(bytes) {
                        Ok(event) if result.is_ok() => {
                            result = translate(translator, out, &event);
                        }
                        Ok(_) => {}
                        Err(_) => malformed += 1,
                    }
                }
            }
        });
        kernel.add_malformed(malformed);
        self.stats.kernel_events += n;
        self.stats.malformed += malformed;
        result.map_err(RecordError::from)
    }

    /// Stops the providers, writes what is left and flushes.
    pub async fn finish(mut self) -> Result<(RecordStats, W), RecordError> {
        self.stats.duration = self.started.elapsed();
        // Providers stop first, so every userspace record falls inside the
        // time the kernel's events cover.
        if let Some(r) = self.registry.take() {
            self.stats.providers = r.finish(&mut self.out, Duration::from_secs(1)).await?;
        }
        if let Some(k) = self.kernel.as_mut() {
            k.detach();
            self.out.enter_provider(KERNEL_PROVIDER_ID)?;
        }
        // Events already in the ring buffer are still collected.
        self.drain()?;
        // Circular: the newest window, oldest first.
        let ring = std::mem::take(&mut self.keep.ring);
        let mut at = 0;
        while at + 2 <= ring.len() {
            let len = usize::from(u16::from_le_bytes([ring[at], ring[at + 1]]));
            let bytes: Vec<u8> = ring
                .range(at + 2..(at + 2 + len).min(ring.len()))
                .copied()
                .collect();
            at += 2 + len;
            match trace_common::kernel::parse(&bytes) {
                Ok(event) => translate(&mut self.translator, &mut self.out, &event)?,
                Err(_) => self.stats.malformed += 1,
            }
        }
        self.translator.finish_syscalls(&mut self.out)?;
        self.translator.finish_irqs(&mut self.out)?;
        self.translator.finish_probes(&mut self.out)?;
        self.stats.dropped = match self.kernel.as_ref() {
            Some(k) => k.dropped()?,
            None => 0,
        } + self.keep.refused;
        self.stats.dropped_per_cpu = match self.kernel.as_ref() {
            Some(k) => k.dropped_per_cpu()?,
            None => Vec::new(),
        };
        if self.stats.dropped > 0 {
            let on_cpus: u64 = self.stats.dropped_per_cpu.iter().map(|&(_, n)| n).sum();
            self.translator.drops(
                &mut self.out,
                monotonic_ns(),
                &self.stats.dropped_per_cpu,
                self.stats.dropped.saturating_sub(on_cpus),
            )?;
            self.out.write(&Record::ProviderEvent {
                id: KERNEL_PROVIDER_ID,
                event: provider_event::BUFFER_OVERFLOW,
            })?;
        }
        self.stats.counts = self.translator.counts();
        self.stats.records = self.out.records();
        self.stats.bytes = self.out.bytes();
        let stats = self.stats.clone();
        let w = self.out.finish()?;
        Ok((stats, w))
    }
}

/// Writes the records for one kernel event.
fn translate<W: Write>(
    t: &mut KernelTranslator,
    out: &mut FxtStream<W>,
    event: &KernelEvent,
) -> Result<(), OutputError> {
    match event {
        KernelEvent::Switch(e) => t.context_switch(
            out,
            e.header.ts,
            e.header.cpu as u16,
            e.prev_pid,
            e.header.tgid,
            e.prev_prio,
            e.prev_state,
            &comm_str(&e.prev_comm),
            e.next_pid,
            e.next_prio,
            &comm_str(&e.next_comm),
        ),
        KernelEvent::Wakeup(e) => t.wakeup(
            out,
            e.header.ts,
            e.target_cpu as u16,
            e.pid,
            e.prio,
            &comm_str(&e.comm),
            e.header.tid,
        ),
        KernelEvent::NewTask(e) => {
            let child_tgid = if e.child_tgid != ABSENT_ID {
                e.child_tgid
            } else {
                // Without clone flags the thread group is unknown here; /proc
                // knows it while the task lives.
                procfs::thread(e.pid).map_or(e.pid, |(g, _)| g)
            };
            t.new_task(
                out,
                e.header.ts,
                e.header.tid,
                e.header.tgid,
                e.pid,
                child_tgid,
                &comm_str(&e.comm),
                e.clone_flags,
            )
        }
        KernelEvent::Exec(e) => t.exec(
            out,
            e.header.ts,
            e.pid,
            e.header.tgid,
            e.old_pid,
            &comm_str(e.filename()),
            &comm_str(&e.comm),
        ),
        KernelEvent::Exit(e) => t.exit(
            out,
            e.header.ts,
            e.pid,
            e.header.tgid,
            &comm_str(&e.comm),
            e.group_dead(),
        ),
        KernelEvent::Rename(e) => t.rename(
            out,
            e.header.ts,
            e.pid,
            e.header.tgid,
            &comm_str(&e.oldcomm),
            &comm_str(&e.newcomm),
        ),
        KernelEvent::SysEnter(e) => {
            t.sys_enter(out, e.header.ts, e.header.tid, e.header.tgid, e.id, e.args)
        }
        KernelEvent::SysExit(e) => {
            t.sys_exit(out, e.header.ts, e.header.tid, e.header.tgid, e.id, e.ret)
        }
        KernelEvent::IrqEntry(e) => {
            t.irq_entry(out, e.header.ts, e.header.cpu, e.irq, &comm_str(&e.name))
        }
        KernelEvent::IrqExit(e) => t.irq_exit(out, e.header.ts, e.header.cpu, e.irq, e.ret),
        KernelEvent::Softirq(e) => t.softirq(
            out,
            e.header.ts,
            e.header.cpu,
            e.vec,
            e.exit == trace_common::kernel::SOFTIRQ_EXIT,
        ),
        KernelEvent::BlockIssue(e) => t.block_issue(
            out,
            e.header.ts,
            e.header.tid,
            e.dev,
            e.sector,
            e.nr_sector,
            e.bytes_or_error,
            &comm_str(&e.rwbs),
        ),
        KernelEvent::BlockComplete(e) => {
            t.block_complete(out, e.header.ts, e.dev, e.sector, e.bytes_or_error)
        }
        KernelEvent::PageFault(e) => t.page_fault(
            out,
            e.header.ts,
            e.header.tid,
            e.header.tgid,
            e.address,
            e.ip,
            e.error_code,
        ),
        KernelEvent::RssStat(e) => t.rss_stat(
            out,
            e.header.ts,
            e.header.tgid,
            e.curr != 0,
            e.mm_id,
            e.member,
            e.size,
        ),
        KernelEvent::Uprobe(e) => t.probe(
            out,
            e.header.ts,
            e.header.tid,
            e.header.tgid,
            e.probe,
            e.ret == trace_common::kernel::UPROBE_RETURN,
        ),
        KernelEvent::Usdt(e) => {
            let n = (e.nargs as usize).min(e.args.len());
            let strings: Vec<String> = e.strings.iter().map(crate::usdt::slot_text).collect();
            t.usdt(
                out,
                e.header.ts,
                e.header.tid,
                e.header.tgid,
                e.site,
                &e.args[..n],
                e.unreadable,
                &strings,
            )
        }
        KernelEvent::Power(e) => t.cpu_power(
            out,
            e.header.ts,
            e.cpu_id,
            e.what == trace_common::kernel::POWER_FREQUENCY,
            e.state,
        ),
        // Fork is reported through the new-task event, which knows whether
        // the child is a thread or a process.
        KernelEvent::Fork(_) => Ok(()),
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of the kernel's events.
fn monotonic_ns() -> u64 {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64);
    ts.unwrap_or(0)
}
