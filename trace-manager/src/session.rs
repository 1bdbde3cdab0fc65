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

use std::io::Write;
use std::time::{Duration, Instant};

use thiserror::Error;
use trace_common::category::KERNEL_CATEGORIES;
use trace_common::controller::{KernelCount, KernelStats};
use trace_common::provider::BufferDisposition;

pub use crate::kernel::recorder::{
    KERNEL_PROVIDER_ID, KERNEL_PROVIDER_NAME, RecordConfig, kernel_categories,
};

use crate::kernel::recorder::{KernelRecorder, RecorderError};
use crate::kernel::translate::KernelRecordCounts;
use crate::kernel::{KernelConfig, KernelError, KernelProvider};
use crate::output::{FxtStream, OutputError};
use crate::procfs;

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

impl From<RecorderError> for RecordError {
    fn from(e: RecorderError) -> Self {
        match e {
            RecorderError::Kernel(e) => RecordError::Kernel(e),
            RecorderError::Output(e) => RecordError::Output(e),
        }
    }
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
            counts: KernelCount::FIXED
                .into_iter()
                .map(|kind| {
                    let n = c.of(&kind);
                    (kind, n)
                })
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

/// One session's output and the kernel side writing into it.
pub struct Session<W: Write> {
    config: RecordConfig,
    categories: Vec<String>,
    kernel: KernelRecorder,
    out: FxtStream<W>,
    /// The kernel categories enabled at some start.
    enabled: Vec<String>,
    /// Time spent tracing, every start-to-stop before the current one.
    traced: Duration,
    started: Option<Instant>,
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
        Ok(Session {
            kernel: KernelRecorder::new(&config),
            config,
            enabled: categories.clone(),
            categories,
            out,
            traced: Duration::ZERO,
            started: None,
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
        self.kernel.ready(disposition);
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
        if self.kernel.running() || (categories.is_empty() && !self.config.probes()) {
            self.started = Some(Instant::now());
            return None;
        }
        for c in &categories {
            if !self.enabled.contains(c) {
                self.enabled.push(c.clone());
            }
        }
        Some(self.kernel.begin_start(&self.config, categories))
    }

    /// Completes [`Session::begin_start`] with the kernel provider it asked
    /// for, loaded and attached: names what exists.
    pub fn attached(&mut self, kernel: KernelProvider) -> Result<(), RecordError> {
        self.started = Some(Instant::now());
        self.kernel.attached(kernel, &self.config, &mut self.out)?;
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
        Ok(self.kernel.follow(pid, &mut self.out)?)
    }

    /// How the session is going.
    pub fn progress(&self) -> Progress {
        Progress {
            elapsed: self.traced + self.started.map_or(Duration::ZERO, |s| s.elapsed()),
            kernel_events: self.kernel.events(),
            bytes: self.out.bytes(),
            dropped: self.kernel.dropped(),
            kernel_fill: self.kernel.fill(),
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
        Ok(self.kernel.readable().await?)
    }

    /// Drains every event available now into the output.
    pub fn drain(&mut self) -> Result<(), RecordError> {
        Ok(self.kernel.drain(&mut self.out)?)
    }

    /// Drains until nothing read from the kernel is due any more, or for
    /// `limit` at most (a flood keeps events coming): what a snapshot
    /// takes then reaches up to now, but for the events still waiting for
    /// their order to be settled.
    pub fn drain_due(&mut self, limit: std::time::Duration) -> Result<(), RecordError> {
        let until = Instant::now() + limit;
        loop {
            self.drain()?;
            if !self.kernel.has_pending() || Instant::now() >= until {
                return Ok(());
            }
        }
    }

    /// Detaches the kernel provider, drains what is left, closes what is
    /// still open and unloads the programs; with `write_results`, writes
    /// the events the circular mode kept.
    pub fn stop(&mut self, write_results: bool) -> Result<(), RecordError> {
        if let Some(s) = self.started.take() {
            self.traced += s.elapsed();
        }
        Ok(self.kernel.stop(&mut self.out, write_results)?)
    }

    /// Whether the kernel's events are kept in the circular mode.
    pub fn is_circular(&self) -> bool {
        self.kernel.is_circular()
    }

    /// What the circular mode keeps now, as a whole trace of its own: the
    /// magic number record, the kernel provider, the processes and threads
    /// that exist, and the kept events translated afresh (whatever is
    /// still open is ended where the events end). Nothing changes here:
    /// the events are still written at the stop. Stack samples are left
    /// out (their processes' mappings belong to this session's resolver).
    pub fn kept_as_trace(&self) -> Result<Vec<u8>, RecordError> {
        Ok(self.kernel.kept_as_trace(&self.config)?)
    }

    /// The triggers that fired since the last call (each is marked in the
    /// output where it fired).
    pub fn take_fired(&mut self) -> Vec<crate::kernel::translate::Fired> {
        self.kernel.take_fired()
    }

    /// The kernel provider's numbers so far.
    pub fn stats(&self) -> RecordStats {
        let tally = self.kernel.tally();
        let translator = self.kernel.translator();
        let (tracepoints, unpaired) = translator.tracepoint_counts();
        RecordStats {
            kernel_events: tally.events,
            dropped: tally.dropped,
            dropped_per_cpu: tally.dropped_per_cpu,
            malformed: tally.malformed,
            counts: translator.counts(),
            tracepoints,
            unpaired,
            duration: self.traced + self.started.map_or(Duration::ZERO, |s| s.elapsed()),
            categories: self.enabled.clone(),
        }
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
        self.kernel
            .write_drops(&mut self.out, stats.dropped, &stats.dropped_per_cpu)?;
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_common::provider::BufferingMode;

    #[test]
    fn following_a_process_that_does_not_exist_is_refused() {
        let mut s = Session::new(
            RecordConfig {
                categories: vec!["app".into()],
                buffer_bytes: 1 << 20,
                pids: Some(vec![]),
                cgroups: Vec::new(),
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
