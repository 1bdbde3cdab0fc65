//! The daemon's flight recorder: a session the manager itself owns, started
//! with the daemon and never stopped, whose output is a [`Window`] of the
//! newest records instead of a client's file. `Snapshot` writes what it
//! holds, as a whole trace, to a client's descriptor while it goes on.
//!
//! It has its own kernel provider (its own programs and rings), so a
//! client's recording runs beside it with its own categories and buffers.
//! Userspace providers speak to one trace at a time: while no recording
//! holds them, they write in streaming mode into the flight recorder; a
//! recording that begins takes them only if the flight recorder does not
//! record any userspace category.

use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::time::{Duration, Instant};

use trace_common::controller::{
    Reply, SessionInfo, SessionKind, SessionState, SnapshotResult, TraceConfig, fail,
};
use trace_common::provider::{BufferDisposition, BufferingMode};

use super::Manager;
use super::config::{backlog_within, kernel_memory, record_config, userspace_config};
use super::event::Event;
use crate::clock::boottime_ns;
use crate::limits::mib;
use crate::session::Session;
use crate::window::{Window, Written};

/// Snapshots one client may have in flight at once (written and not yet
/// read).
const SNAPSHOTS_PER_CLIENT: usize = 1;

/// Snapshots in flight at once, all clients together.
const SNAPSHOTS_IN_FLIGHT: usize = 2;

/// Most time a snapshot spends translating what the kernel wrote until
/// it was asked for (one drain is time-sliced; a flood keeps more coming).
const SNAPSHOT_DRAIN: std::time::Duration = std::time::Duration::from_millis(500);

/// What the flight recorder keeps.
#[derive(Clone, Debug)]
pub struct FlightConfig {
    /// Categories (kernel and userspace; globs work; empty: every kernel
    /// category recorded by default).
    pub categories: Vec<String>,
    /// How long events are kept after they arrived.
    pub window: Duration,
    /// Bytes of records kept at most.
    pub window_bytes: u64,
    /// Bytes of kernel ring buffers, all CPUs together.
    pub kernel_buffer_bytes: u64,
    /// Each userspace provider's buffer, in bytes.
    pub provider_buffer_bytes: u64,
    /// Kernel conditions that take a snapshot when they fire (see
    /// [`crate::kernel::translate::Trigger`]).
    pub triggers: Vec<String>,
    /// A trigger's snapshot holds at least this long before it fired...
    pub pre: Duration,
    /// ...and is taken this long after.
    pub post: Duration,
    /// Where triggers' snapshots go (`trigger-NNN-CONDITION.fxt`).
    pub trigger_dir: std::path::PathBuf,
    /// The least time between two triggers' snapshots: a trigger that
    /// fires sooner after the last one is counted, not snapshotted.
    pub trigger_interval: Duration,
    /// Bytes the snapshots in `trigger_dir` may take together (every
    /// `trigger-*.fxt`, earlier runs' too): a snapshot that would take
    /// more is not taken (and counted).
    pub trigger_space: u64,
    /// Empty: every process. Else only the tasks (and providers) in these
    /// cgroups or below them (paths from the cgroup v2 hierarchy's root).
    pub cgroups: Vec<String>,
}

/// Triggers that fired and got no snapshot of their own, since the last
/// snapshot taken.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Refused {
    /// Sooner than `trigger_interval` after the last snapshot (or while it
    /// was still being written).
    soon: u64,
    /// Their snapshot would have taken more than `trigger_space` leaves.
    space: u64,
}

impl Refused {
    fn any(&self) -> bool {
        self.soon + self.space > 0
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if self.soon > 0 {
            parts.push(format!("{} too soon after a snapshot", self.soon));
        }
        if self.space > 0 {
            parts.push(format!("{} with no space left for it", self.space));
        }
        write!(f, "{}", parts.join(", "))
    }
}

/// A trigger that fired, waiting for its `post` time.
#[derive(Debug)]
pub(super) struct PendingTrigger {
    spec: String,
    fired_ns: u64,
    due: Instant,
    /// Triggers that fired while this one waited (not snapshotted apart).
    more: u64,
}

/// The flight recorder while it runs.
pub(super) struct Flight {
    pub(super) config: FlightConfig,
    pub(super) session: Session<Window>,
    pub(super) started: Instant,
    /// Userspace providers write into it.
    pub(super) providers: bool,
    /// Reading the kernel failed: it records nothing more (said once).
    pub(super) failed: Option<String>,
    /// Snapshots taken.
    pub(super) snapshots: u64,
    /// What a reader of the providers' records it collected knows (their
    /// declarations, names, threads): a recording that takes them too
    /// begins with it.
    pub(super) provider_state: trace_split::StreamState,
    /// A trigger that fired, whose snapshot is still to be taken.
    pub(super) pending: Option<PendingTrigger>,
    /// Triggers' snapshots taken.
    pub(super) trigger_snapshots: u32,
    /// When the last trigger's snapshot was taken (or found no space).
    pub(super) last_trigger: Option<Instant>,
    /// Triggers not snapshotted since the last snapshot.
    pub(super) refused: Refused,
    /// Triggers not snapshotted in all.
    pub(super) refused_total: u64,
    /// A trigger's snapshot is being written.
    pub(super) trigger_writing: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Whether a recording of `config` wants userspace providers' records: all
/// categories, or some that are not the kernel's.
fn wants_providers(config: &TraceConfig) -> bool {
    config.categories.is_empty() || config.categories.iter().any(|c| !c.starts_with("kernel"))
}

/// Writes provider records the flight recorder collected (`bytes`, whole
/// records) into a recording's output too; the first time, after what a
/// reader must know of them (`state`).
pub(super) fn tee(
    active: &mut super::state::Active,
    state: &trace_split::StreamState,
    bytes: &[u8],
) -> Result<(), crate::output::OutputError> {
    if !active.tee_declared {
        let preamble = state.preamble();
        // Without its magic number record: the output has its own.
        let preamble = preamble.get(8..).unwrap_or_default();
        active
            .session
            .out()
            .write_foreign(preamble, crate::window::count(preamble))?;
        active.tee_declared = true;
    }
    active
        .session
        .out()
        .write_foreign(bytes, crate::window::count(bytes))
}

impl Manager {
    /// Starts the flight recorder: its kernel provider now, and the
    /// providers registered (and those that register later) in streaming
    /// mode. Its memory (rings, providers' buffers, the window) comes out
    /// of the daemon's memory budget, and sessions get at most what is left.
    pub fn start_flight_recorder(&mut self, config: FlightConfig) -> Result<(), String> {
        let trace = TraceConfig {
            categories: config.categories.clone(),
            buffer_size_megabytes_hint: (config.provider_buffer_bytes >> 20).clamp(1, 4096) as u32,
            buffering_mode: BufferingMode::Streaming,
            kernel_buffer_bytes: config.kernel_buffer_bytes,
            kernel_buffering_mode: BufferingMode::Streaming,
            cgroups: config.cgroups.clone(),
            ..TraceConfig::default()
        };
        let kernel = kernel_memory(&trace);
        let userspace: Vec<String> = config
            .categories
            .iter()
            .filter(|c| !c.starts_with("kernel"))
            .cloned()
            .collect();
        let providers = !userspace.is_empty();
        let provider_budget = if providers {
            (self.limits.memory_budget / 4).min(64 << 20)
        } else {
            0
        };
        let total = kernel + config.window_bytes + provider_budget;
        if total > self.limits.memory_budget {
            return Err(format!(
                "the flight recorder needs {} (kernel buffers {}, window {}, providers {}); the \
                 memory budget is {} (--memory-budget)",
                mib(total),
                mib(kernel),
                mib(config.window_bytes),
                mib(provider_budget),
                mib(self.limits.memory_budget)
            ));
        }
        let trace = TraceConfig {
            triggers: config.triggers.clone(),
            ..trace
        };
        if !config.triggers.is_empty() {
            // A system-wide trace is root's to read: the directory made
            // for it is root's alone, and so is every file in it.
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&config.trigger_dir)
                .map_err(|e| format!("creating {}: {e}", config.trigger_dir.display()))?;
        }
        let mut record = record_config(&trace, None, None)?;
        // What a burst the translation cannot follow may hold, out of what
        // the rest leaves of the budget.
        let backlog = if kernel == 0 {
            0
        } else {
            backlog_within(self.limits.memory_budget - total)
        };
        record.backlog_bytes = usize::try_from(backlog).unwrap_or(usize::MAX);
        let total = total + backlog;
        let window = Window::new(
            config.window.as_nanos().min(u128::from(u64::MAX)) as u64,
            usize::try_from(config.window_bytes).unwrap_or(usize::MAX),
        );
        let mut session = Session::new(record, window).map_err(|e| e.to_string())?;
        session
            .start(BufferDisposition::ClearEntire, &[])
            .map_err(|e| format!("starting the flight recorder's kernel provider: {e}"))?;
        self.limits.memory_budget = self.limits.memory_budget.saturating_sub(total);
        self.limits.session_memory_budget = self
            .limits
            .session_memory_budget
            .min(self.limits.memory_budget);
        if providers {
            self.registry
                .initialize_all(userspace_config(&trace, provider_budget));
            self.registry.start_all(BufferDisposition::ClearEntire, &[]);
        }
        log::info!(
            "flight recorder: {} kept for {:.1} s, at most {} ({}{})",
            if config.categories.is_empty() {
                "kernel events".to_owned()
            } else {
                config.categories.join(",")
            },
            config.window.as_secs_f64(),
            mib(config.window_bytes),
            session.categories_enabled().join(","),
            if providers {
                "; userspace providers in streaming mode"
            } else {
                ""
            }
        );
        self.flight = Some(Flight {
            config,
            session,
            started: Instant::now(),
            providers,
            failed: None,
            snapshots: 0,
            provider_state: trace_split::StreamState::new(),
            pending: None,
            trigger_snapshots: 0,
            last_trigger: None,
            refused: Refused::default(),
            refused_total: 0,
            trigger_writing: Default::default(),
        });
        Ok(())
    }

    /// Whether the flight recorder holds the userspace providers (a
    /// recording then leaves them alone).
    pub(super) fn flight_holds_providers(&self) -> bool {
        self.flight.as_ref().is_some_and(|f| f.providers)
    }

    /// Hands what a provider said to the registry, which collects into the
    /// flight recorder; what it collects goes into a recording that wants
    /// providers' records too.
    pub(super) fn flight_provider_note(&mut self, note: crate::userspace::Note) {
        let Some(f) = self.flight.as_mut() else {
            return;
        };
        f.session.out().get_mut().start_tap();
        // The window takes everything (it drops what is old itself).
        let mut room = u64::MAX;
        let handled = self.registry.handle(note, Some(f.session.out()), &mut room);
        let collected = f.session.out().get_mut().take_tap();
        if let Err(e) = handled {
            log::error!("flight recorder: writing a provider's records: {e}");
        }
        if collected.is_empty() {
            return;
        }
        let mut failed = None;
        if let Some(a) = self.active.as_mut()
            && a.aborted.is_none()
            && matches!(a.state, SessionState::Started | SessionState::Stopping)
            && wants_providers(&a.config)
            && let Err(e) = tee(a, &f.provider_state, &collected)
        {
            failed = Some(format!("writing providers' records: {e}"));
        }
        let mut records = trace_split::RecordReader::new(collected.as_slice());
        while let Ok(Some(record)) = records.next_record() {
            f.provider_state.observe(record);
        }
        if let Some(why) = failed {
            self.abort_session(&why);
        }
    }

    /// At a recording's stop, while the flight recorder holds the
    /// providers: what they have not handed over yet goes into the
    /// recording (the flight recorder gets it when they do).
    pub(super) fn tee_unsaved(&mut self) -> Result<(), String> {
        let Some(f) = self.flight.as_ref() else {
            return Ok(());
        };
        let Some(a) = self.active.as_mut() else {
            return Ok(());
        };
        if !(f.providers && wants_providers(&a.config)) || a.aborted.is_some() {
            return Ok(());
        }
        let unsaved = self.registry.peek().map_err(|e| e.to_string())?;
        if unsaved.is_empty() {
            return Ok(());
        }
        a.session
            .out()
            .write_foreign(&unsaved, crate::window::count(&unsaved))
            .map_err(|e| format!("writing providers' records: {e}"))
    }

    /// The flight recorder read the kernel; on failure it stops recording.
    /// A trigger that fired is noted, its snapshot taken `post` after it.
    pub(super) fn flight_drained(&mut self, result: Result<(), crate::session::RecordError>) {
        let Some(f) = self.flight.as_mut() else {
            return;
        };
        if let Err(e) = result {
            log::error!("flight recorder: reading the kernel provider failed: {e}");
            f.failed = Some(e.to_string());
        }
        for fired in f.session.take_fired() {
            match f.pending.as_mut() {
                Some(p) => p.more += 1,
                None if f
                    .last_trigger
                    .is_some_and(|t| t.elapsed() < f.config.trigger_interval)
                    || f.trigger_writing.load(std::sync::atomic::Ordering::Acquire) =>
                {
                    if !f.refused.any() {
                        log::info!(
                            "flight recorder: trigger {} fired (thread {}) too soon after the \
                             last snapshot: none taken (one every {:.0} s at most, \
                             --trigger-interval); counted",
                            fired.spec,
                            fired.tid,
                            f.config.trigger_interval.as_secs_f64()
                        );
                    }
                    f.refused.soon += 1;
                    f.refused_total += 1;
                }
                None => {
                    log::info!(
                        "flight recorder: trigger {} fired (thread {}); snapshot in {:.1} s",
                        fired.spec,
                        fired.tid,
                        f.config.post.as_secs_f64()
                    );
                    f.pending = Some(PendingTrigger {
                        spec: fired.spec,
                        fired_ns: fired.ts,
                        due: Instant::now() + f.config.post,
                        more: 0,
                    });
                }
            }
        }
    }

    /// Takes the snapshot of a trigger whose `post` time has come: what the
    /// window holds from `pre` before it fired, into the trigger folder.
    fn flight_trigger_snapshot(&mut self) {
        let peek = self.flight_holds_providers();
        let Some(f) = self.flight.as_mut() else {
            return;
        };
        if f.pending.as_ref().is_none_or(|p| Instant::now() < p.due) {
            return;
        }
        let Some(pending) = f.pending.take() else {
            return;
        };
        if f.failed.is_none()
            && let Err(e) = f
                .session
                .drain_due(SNAPSHOT_DRAIN)
                .and_then(|()| f.session.flush())
        {
            f.failed = Some(e.to_string());
        }
        let since = pending
            .fired_ns
            .saturating_sub(f.config.pre.as_nanos() as u64);
        let contents = f
            .session
            .out()
            .get_mut()
            .contents(boottime_ns())
            .since(since);
        let tail = if peek {
            self.registry.peek().unwrap_or_default()
        } else {
            Vec::new()
        };
        f.last_trigger = Some(Instant::now());
        let dir = f.config.trigger_dir.clone();
        let needs = contents.bytes() + tail.len() as u64;
        let used = snapshots_size(&dir);
        if used + needs > f.config.trigger_space {
            log::warn!(
                "flight recorder: trigger {} snapshot not taken: it needs about {}, and the \
                 snapshots in {} take {} of the {} they may (--trigger-space); remove some to \
                 make room",
                pending.spec,
                mib(needs),
                dir.display(),
                mib(used),
                mib(f.config.trigger_space)
            );
            f.refused.space += 1;
            f.refused_total += 1;
            return;
        }
        let refused = std::mem::take(&mut f.refused);
        let name: String = pending
            .spec
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        // The next number free in the folder: an earlier run's snapshots
        // are kept.
        let first = f.trigger_snapshots + 1;
        let writing = std::sync::Arc::clone(&f.trigger_writing);
        writing.store(true, std::sync::atomic::Ordering::Release);
        tokio::task::spawn_blocking(move || {
            let written = write_trigger_snapshot(&dir, first, &name, contents, &tail);
            writing.store(false, std::sync::atomic::Ordering::Release);
            let more = match (pending.more, refused.any()) {
                (0, false) => String::new(),
                (0, true) => format!(" (not snapshotted since the last: {refused})"),
                (n, false) => format!(" ({n} more fired meanwhile)"),
                (n, true) => format!(
                    " ({n} more fired meanwhile; not snapshotted since the last: {refused})"
                ),
            };
            match written {
                Ok((path, w)) => log::info!(
                    "flight recorder: trigger {} snapshot: {} records, {} -> {}{more}",
                    pending.spec,
                    w.records,
                    mib(w.bytes),
                    path.display(),
                ),
                Err(e) => log::error!(
                    "flight recorder: the snapshot of trigger {}: {e}{more}",
                    pending.spec,
                ),
            }
        });
        f.trigger_snapshots = first;
    }

    /// The manager's tick: what arrived is handed to the window, and what
    /// is older than the window dropped.
    pub(super) fn flight_tick(&mut self) {
        let Some(f) = self.flight.as_mut() else {
            return;
        };
        let _ = f.session.flush();
        f.session.out().get_mut().expire(boottime_ns());
        self.flight_trigger_snapshot();
    }

    /// `Snapshot`: writes what the flight recorder holds now to the
    /// descriptor in `fds`, on a thread of its own; the answer comes when
    /// it is written.
    pub(super) fn snapshot(&mut self, id: u64, txid: u32, mut fds: Vec<OwnedFd>) {
        if fds.len() != 1 {
            self.fail(
                id,
                txid,
                true,
                fail::MALFORMED,
                format!("Snapshot carries one output descriptor, not {}", fds.len()),
            );
            return;
        }
        if let Err(message) = self.may_snapshot(id) {
            self.fail(id, txid, false, fail::DENIED, message);
            return;
        }
        if let Err(message) = self.snapshot_room(id) {
            self.fail(id, txid, false, fail::OTHER, message);
            return;
        }
        let peek = self.flight_holds_providers();
        let Some(f) = self.flight.as_mut() else {
            self.snapshot_circular(id, txid, fds);
            return;
        };
        // What the rings hold now, as far as its order is settled.
        if f.failed.is_none() {
            let drained = f
                .session
                .drain_due(SNAPSHOT_DRAIN)
                .and_then(|()| f.session.flush());
            if let Err(e) = drained {
                f.failed = Some(e.to_string());
            }
        }
        let contents = f.session.out().get_mut().contents(boottime_ns());
        f.snapshots += 1;
        // What providers wrote into buffers they have not handed over yet.
        let tail = if peek {
            self.registry.peek().unwrap_or_else(|e| {
                log::warn!("snapshot: reading the providers' buffers: {e}");
                Vec::new()
            })
        } else {
            Vec::new()
        };
        let Some(fd) = fds.pop() else {
            return;
        };
        self.answer_snapshot(id, txid, fd, move |mut out| {
            contents.write_to(&mut out, &tail)
        });
    }

    /// Whether client `id` may read what a snapshot would hold: the flight
    /// recorder records the whole system, every provider and every probe,
    /// so only root may read it; a circular recording, its owner's user
    /// and root. (A member of the tracing group may record the system, but
    /// not read a recording another user made, whose probes and providers
    /// it may have been refused.)
    fn may_snapshot(&self, id: u64) -> Result<(), String> {
        let Some(uid) = self
            .clients
            .get(&id)
            .and_then(|c| c.creds.as_ref())
            .map(|c| c.uid)
        else {
            return Err("snapshot refused: who the client is is unknown".into());
        };
        if uid == 0 {
            return Ok(());
        }
        if self.flight.is_some() {
            return Err(
                "snapshot refused: the flight recorder records the whole system; only root may read it"
                    .into(),
            );
        }
        let owner = self.active.as_ref().and_then(|a| {
            self.clients
                .get(&a.owner)
                .and_then(|c| c.creds.as_ref())
                .map(|c| c.uid)
        });
        match owner {
            Some(o) if o != uid => Err(format!(
                "snapshot refused: the recording running belongs to user {o}; only it and root may read it"
            )),
            _ => Ok(()),
        }
    }

    /// Whether client `id` may have another snapshot written now: each
    /// holds what it writes (the window's chunks, which the window may
    /// drop meanwhile, and copies) until its reader has read it, so a
    /// client gets [`SNAPSHOTS_PER_CLIENT`] at a time and all together
    /// [`SNAPSHOTS_IN_FLIGHT`].
    fn snapshot_room(&self, id: u64) -> Result<(), String> {
        let mine = self.snapshots.get(&id).copied().unwrap_or(0);
        let all: usize = self.snapshots.values().sum();
        if mine >= SNAPSHOTS_PER_CLIENT {
            return Err(format!(
                "a snapshot is already being written for this client ({SNAPSHOTS_PER_CLIENT} \
                 at a time): read it first"
            ));
        }
        if all >= SNAPSHOTS_IN_FLIGHT {
            return Err(format!(
                "{all} snapshots are being written already, the most at once: try again when \
                 they are read"
            ));
        }
        Ok(())
    }

    /// A snapshot for client `id` was written (or given up).
    pub(super) fn snapshot_done(&mut self, id: u64) {
        if let Some(n) = self.snapshots.get_mut(&id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.snapshots.remove(&id);
            }
        }
    }

    /// Writes a snapshot to `fd` with `write`, on a blocking thread, and
    /// answers request `txid` of client `id` when it is written. A reader
    /// that takes nothing for [`super::paced::READER_STALL`] is cut off.
    fn answer_snapshot(
        &mut self,
        id: u64,
        txid: u32,
        fd: OwnedFd,
        write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<Written> + Send + 'static,
    ) {
        *self.snapshots.entry(id).or_insert(0) += 1;
        let tx = self.events_tx.clone();
        tokio::task::spawn_blocking(move || {
            let began = Instant::now();
            let file = super::paced::PacedWriter::new(fd, super::paced::READER_STALL);
            let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
            let reply = match write(&mut out) {
                Ok(w) => {
                    log::info!(
                        "snapshot: {} records, {} in {:.0} ms",
                        w.records,
                        mib(w.bytes),
                        began.elapsed().as_secs_f64() * 1000.0
                    );
                    Reply::Snapshot(SnapshotResult {
                        bytes: w.bytes,
                        records: w.records,
                    })
                }
                Err(e) => Reply::Failed {
                    fatal: false,
                    code: fail::OTHER,
                    message: format!("writing the snapshot: {e}"),
                },
            };
            let _ = tx.send(Event::SnapshotWritten { id, txid, reply });
        });
    }

    /// `Snapshot` without a flight recorder: what a running recording in
    /// the circular mode keeps now (its kernel events and its providers'
    /// buffers), written to the descriptor in `fds` while it goes on.
    fn snapshot_circular(&mut self, id: u64, txid: u32, mut fds: Vec<OwnedFd>) {
        let circular = self.active.as_ref().filter(|a| {
            matches!(a.state, SessionState::Started | SessionState::Stopping)
                && a.aborted.is_none()
                && (a.session.is_circular() || a.config.buffering_mode == BufferingMode::Circular)
        });
        let Some(a) = circular else {
            self.fail(
                id,
                txid,
                false,
                fail::OTHER,
                "nothing to snapshot: no flight recorder runs (trace-manager \
                 --flight-recorder), and no recording in the circular mode"
                    .into(),
            );
            return;
        };
        let kernel = match a.session.kept_as_trace() {
            Ok(bytes) => bytes,
            Err(e) => {
                self.fail(
                    id,
                    txid,
                    false,
                    fail::OTHER,
                    format!("the snapshot's kernel events: {e}"),
                );
                return;
            }
        };
        let providers = self.registry.peek().unwrap_or_else(|e| {
            log::warn!("snapshot: reading the providers' buffers: {e}");
            Vec::new()
        });
        let Some(fd) = fds.pop() else {
            return;
        };
        self.answer_snapshot(id, txid, fd, move |out| {
            out.write_all(&kernel)?;
            out.write_all(&providers)?;
            out.flush()?;
            Ok(Written {
                bytes: (kernel.len() + providers.len()) as u64,
                records: crate::window::count(&kernel) + crate::window::count(&providers),
                flows_cut: 0,
            })
        });
    }

    /// `GetSessions`: the flight recorder and the recording, if they run.
    pub(super) fn sessions(&self) -> Vec<SessionInfo> {
        let mut list = Vec::new();
        if let Some(f) = &self.flight {
            let p = f.session.progress();
            list.push(SessionInfo {
                kind: SessionKind::FlightRecorder,
                owner_pid: 0,
                state: if f.failed.is_some() {
                    "failed".into()
                } else {
                    "started".into()
                },
                categories: f.config.categories.clone(),
                elapsed_ns: f.started.elapsed().as_nanos() as u64,
                bytes: f.session.out_ref().get_ref().bytes() as u64,
                dropped: p.dropped,
                window_ns: f.config.window.as_nanos() as u64,
            });
        }
        if let Some(a) = &self.active {
            let p = a.session.progress();
            list.push(SessionInfo {
                kind: SessionKind::Recording,
                owner_pid: self.clients.get(&a.owner).map_or(0, |c| c.pid),
                state: a.state.name().to_owned(),
                categories: a.config.categories.clone(),
                elapsed_ns: p.elapsed.as_nanos() as u64,
                bytes: p.bytes,
                dropped: p.dropped,
                window_ns: 0,
            });
        }
        if let Some(owner) = self.preparing {
            // Its probes and tracepoints are being resolved.
            list.push(SessionInfo {
                kind: SessionKind::Recording,
                owner_pid: self.clients.get(&owner).map_or(0, |c| c.pid),
                state: "setting up".into(),
                categories: Vec::new(),
                elapsed_ns: 0,
                bytes: 0,
                dropped: 0,
                window_ns: 0,
            });
        }
        list
    }
}

/// Bytes the triggers' snapshots in `dir` take (`trigger-*.fxt`).
fn snapshots_size(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("trigger-") && name.ends_with(".fxt")
        })
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// Writes a trigger's snapshot to a new file `trigger-NNN-NAME.fxt` in
/// `dir` (the first number from `first` on that is free), root's alone.
/// Whatever fails (a full disk), the file ends on its last whole record,
/// and one left with nothing recorded is removed.
fn write_trigger_snapshot(
    dir: &std::path::Path,
    first: u32,
    name: &str,
    contents: crate::window::Contents,
    tail: &[u8],
) -> Result<(std::path::PathBuf, Written), String> {
    let mut number = first;
    let (path, file) = loop {
        let path = dir.join(format!("trigger-{number:03}-{name}.fxt"));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(file) => break (path, file),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && number < first + 10_000 => {
                number += 1;
            }
            Err(e) => return Err(format!("creating {}: {e}", path.display())),
        }
    };
    // Units of 256 KiB (or a chunk of the window): on a full disk, what
    // fits is kept.
    let mut out = trace_split::WholeFile::new(file, 256 << 10);
    match contents.write_to(&mut out, tail) {
        Ok(w) => Ok((path, w)),
        Err(e) => {
            // The preamble alone, or less: nothing the file would show.
            let kept = out.len();
            if out.writes_kept() <= 1 {
                let _ = std::fs::remove_file(&path);
                Err(format!(
                    "writing {}: {e}; the file is removed",
                    path.display()
                ))
            } else {
                Err(format!(
                    "writing {}: {e}; it keeps the {} of whole records written before",
                    path.display(),
                    mib(kept)
                ))
            }
        }
    }
}
