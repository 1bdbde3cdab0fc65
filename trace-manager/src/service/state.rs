//! The session state machine: READY, INITIALIZED, STARTING, STARTED,
//! STOPPING, STOPPED and TERMINATING, and the requests that move a session
//! between them (InitializeTracing, StartTracing, StopTracing,
//! TerminateTracing). Every change of state is told to the session's
//! owner; a failed session is aborted and says why.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::time::Duration;

use trace_common::controller::{
    FXT_VERSION, MAX_CATEGORIES, Reply, SessionState, StartError, StartOptions, StopError,
    StopResult, TraceConfig, fail,
};

use trace_common::provider::BufferDisposition;

use super::config::{KernelMemory, kernel_within_budget, usable_category, userspace_config};
use super::event::Event;
use super::setup::Then;
use super::{Manager, Sink, sink};
use crate::session::Session;

/// How long providers get to confirm a stop.
const STOP_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a terminated session waits for its client to read the rest
/// of its output before the manager gives up on it.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

/// The one session, and who owns it.
pub(super) struct Active {
    pub(super) owner: u64,
    pub(super) state: SessionState,
    pub(super) config: TraceConfig,
    pub(super) session: Session<Sink>,
    /// The output failed or the kernel could not be read: stops report it.
    pub(super) aborted: Option<String>,
    /// A StartTracing waiting for providers: its txid and deadline.
    pub(super) pending_start: Option<(u32, tokio::time::Instant)>,
    /// Alerts not yet asked for, and WatchAlert requests not yet answered.
    pub(super) alerts: VecDeque<(String, String)>,
    pub(super) watchers: VecDeque<u32>,
    /// The state before the current start, to go back to if it fails.
    pub(super) before_start: SessionState,
    /// How long the current start waits for providers.
    pub(super) start_timeout: Duration,
    /// The categories of the session's configuration.
    pub(super) categories: Vec<String>,
    /// A stop waiting for providers to confirm.
    pub(super) pending_stop: Option<PendingStop>,
    /// The providers' records the flight recorder collects are written
    /// into this session too, and what a reader must know of them was
    /// written first.
    pub(super) tee_declared: bool,
    /// A StartTracing loading the kernel provider on a thread.
    pub(super) loading: Option<super::setup::Loading>,
}

/// A stop in progress: providers were told to stop.
pub(super) struct PendingStop {
    /// The StopTracing to answer (none when a termination stops).
    pub(super) txid: Option<u32>,
    pub(super) write_results: bool,
    pub(super) deadline: tokio::time::Instant,
    /// A TerminateTracing to carry out once stopped.
    pub(super) terminate: Option<u32>,
}

/// A terminated session whose output a thread is still writing.
pub(super) struct Terminating {
    pub(super) owner: u64,
    pub(super) txid: u32,
    /// When to give up waiting for the client to read its output.
    pub(super) deadline: tokio::time::Instant,
    pub(super) cancel: sink::Cancel,
}

impl Manager {
    /// Acknowledges a pending start when every provider started, or when
    /// `force`d or the start timeout passed.
    pub(super) fn finish_start(&mut self, force: bool) {
        let Some(a) = self.active.as_mut() else {
            return;
        };
        let Some((txid, deadline)) = a.pending_start else {
            return;
        };
        let timed_out = tokio::time::Instant::now() >= deadline;
        let held = self.flight.as_ref().is_some_and(|f| f.providers);
        if !(force || timed_out || held || self.registry.all_started()) {
            return;
        }
        if timed_out && !held {
            let late: Vec<String> = self
                .registry
                .stats()
                .into_iter()
                .filter(|p| !p.started && !p.aborted)
                .map(|p| format!("{} (pid {})", p.name, p.pid))
                .collect();
            if !late.is_empty() {
                log::warn!("start timeout: {} did not start in time", late.join(", "));
            }
        }
        a.pending_start = None;
        let owner = a.owner;
        self.set_state(SessionState::Started);
        self.reply(owner, txid, Reply::StartResult(Ok(())));
    }

    /// A terminated session's output was written out: the session is over
    /// and its owner gets its answer. True when an embedded manager is done.
    pub(super) fn on_drained(&mut self, id: u64, txid: u32, reply: Reply) -> bool {
        // A session given up on (its client went away, or did not
        // read) is over already.
        if !self
            .terminating
            .as_ref()
            .is_some_and(|t| t.owner == id && t.txid == txid)
        {
            return false;
        }
        self.terminating = None;
        log::info!("session state READY");
        if self.send(id, 0, Reply::StateChanged(SessionState::Ready)) {
            self.reply(id, txid, reply);
        }
        Some(id) == self.local && !self.clients.contains_key(&id)
    }

    /// Gives up on a terminated session whose client has not read its
    /// output in [`DRAIN_TIMEOUT`].
    pub(super) fn give_up_draining(&mut self) {
        let Some(t) = &self.terminating else {
            return;
        };
        if tokio::time::Instant::now() < t.deadline {
            return;
        }
        let (owner, txid) = (t.owner, t.txid);
        t.cancel.cancel();
        self.terminating = None;
        log::warn!(
            "client {owner} did not read its trace for {} s; giving up on it",
            DRAIN_TIMEOUT.as_secs()
        );
        log::info!("session state READY");
        if self.send(owner, 0, Reply::StateChanged(SessionState::Ready)) {
            self.reply(
                owner,
                txid,
                Reply::Failed {
                    fatal: false,
                    code: fail::OTHER,
                    message: format!(
                        "the trace was not read for {} s; the rest of it is dropped",
                        DRAIN_TIMEOUT.as_secs()
                    ),
                },
            );
        }
    }

    /// Moves the session to `state` and tells its owner.
    pub(super) fn set_state(&mut self, state: SessionState) {
        let Some(a) = self.active.as_mut() else {
            return;
        };
        if a.state == state {
            return;
        }
        a.state = state;
        log::info!("session state {}", state.name());
        let owner = a.owner;
        if !self.send(owner, 0, Reply::StateChanged(state)) {
            self.drop_client(owner);
        }
    }

    /// Marks the session as failed: nothing more is recorded, its owner is
    /// told at once (a Failed event, code ABORTED, saying why), its stop
    /// reports ABORTED and its termination fails with the same cause. When
    /// the output failed, that failure is the cause (with the operating
    /// system's error), whichever writer met it first.
    pub(super) fn abort_session(&mut self, why: &str) {
        let Some(a) = self.active.as_mut() else {
            return;
        };
        if a.aborted.is_some() {
            return;
        }
        let failure = a.session.out().get_ref().failure();
        // A reader that went away is its client's doing, and the client
        // is told: not an error of the manager's.
        let reader_gone = failure.as_ref().is_some_and(|e| {
            matches!(
                e.kind(),
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
            )
        });
        let why = match failure {
            Some(e) => e.to_string(),
            None => why.to_owned(),
        };
        if reader_gone {
            log::info!("session aborted: {why}");
        } else {
            log::error!("session aborted: {why}");
        }
        a.aborted = Some(why.clone());
        let owner = a.owner;
        self.fail(owner, 0, false, fail::ABORTED, why);
    }

    pub(super) fn is_terminating(&self, id: u64) -> bool {
        self.terminating.as_ref().is_some_and(|t| t.owner == id)
    }

    pub(super) fn owns_session(&self, id: u64) -> bool {
        self.active.as_ref().is_some_and(|a| a.owner == id)
    }

    pub(super) fn initialize(
        &mut self,
        id: u64,
        txid: u32,
        config: TraceConfig,
        mut fds: Vec<OwnedFd>,
    ) {
        if self.owns_session(id) {
            self.fail(
                id,
                txid,
                true,
                fail::OUT_OF_ORDER,
                "InitializeTracing twice on one connection".into(),
            );
            return;
        }
        if fds.len() != 1 {
            self.fail(
                id,
                txid,
                true,
                fail::MALFORMED,
                format!(
                    "InitializeTracing carries one output descriptor, not {}",
                    fds.len()
                ),
            );
            return;
        }
        let terminating = self.terminating.as_ref().map(|t| t.owner);
        let busy = self.active.as_ref().map(|a| a.owner);
        if let Some(owner) = busy.or(terminating).or(self.preparing) {
            let owner = self.clients.get(&owner).map_or(0, |c| c.pid);
            self.fail(
                id,
                txid,
                false,
                fail::SESSION_ACTIVE,
                format!(
                    "a tracing session is already active (client pid {owner}); the manager \
                     runs one session at a time"
                ),
            );
            return;
        }
        if config.version < FXT_VERSION {
            self.fail(
                id,
                txid,
                false,
                fail::BAD_CONFIG,
                format!(
                    "the client reads trace format {}.{} at most; this manager writes {}.{}",
                    config.version.major,
                    config.version.minor,
                    FXT_VERSION.major,
                    FXT_VERSION.minor
                ),
            );
            return;
        }
        // The kernel's ring buffers come first out of the session's memory
        // budget; the providers share the rest.
        let budget = self.limits.session_budget(0);
        let kernel = match kernel_within_budget(&config, budget) {
            Ok(kernel) => kernel,
            Err(message) => {
                self.fail(id, txid, false, fail::BAD_CONFIG, message);
                return;
            }
        };
        let Some(output) = fds.pop() else {
            return;
        };
        // Resolving probes and tracepoints reads files: on a thread.
        self.prepare(id, txid, config, output, kernel);
    }

    /// Makes `session` the active one, owned by client `id`, and answers
    /// its InitializeTracing `txid`.
    pub(super) fn begin_session(
        &mut self,
        id: u64,
        txid: u32,
        config: TraceConfig,
        session: Session<Sink>,
        kernel: KernelMemory,
    ) {
        let budget = self.limits.session_budget(0);
        let userspace = userspace_config(&config, budget.saturating_sub(kernel.total));
        let categories = userspace.categories.clone();
        // Providers write into the flight recorder meanwhile.
        if !self.flight_holds_providers() {
            self.registry.initialize_all(userspace);
        }
        self.active = Some(Active {
            owner: id,
            state: SessionState::Ready,
            config,
            session,
            aborted: None,
            pending_start: None,
            alerts: VecDeque::new(),
            watchers: VecDeque::new(),
            before_start: SessionState::Initialized,
            categories,
            pending_stop: None,
            tee_declared: false,
            loading: None,
            start_timeout: Duration::ZERO,
        });
        self.set_state(SessionState::Initialized);
        self.reply(id, txid, Reply::Initialized);
    }

    pub(super) fn start(&mut self, id: u64, txid: u32, options: StartOptions) {
        let state = match self.active.as_ref() {
            Some(a) if a.owner == id => a.state,
            _ if self.is_terminating(id) => SessionState::Terminating,
            _ => {
                self.reply(
                    id,
                    txid,
                    Reply::StartResult(Err(StartError::NotInitialized)),
                );
                return;
            }
        };
        let refused = match state {
            SessionState::Starting | SessionState::Started => Some(StartError::AlreadyStarted),
            SessionState::Stopping => Some(StartError::Stopping),
            SessionState::Terminating => Some(StartError::Terminating),
            SessionState::Ready => Some(StartError::NotInitialized),
            SessionState::Initialized | SessionState::Stopped => None,
        };
        if let Some(e) = refused {
            self.reply(id, txid, Reply::StartResult(Err(e)));
            return;
        }
        let Some(a) = self.active.as_mut() else {
            return;
        };
        // The combined list is capped; extras are discarded, and so are
        // names longer than providers accept.
        let room = MAX_CATEGORIES.saturating_sub(a.categories.len());
        let mut additional: Vec<String> = options
            .additional_categories
            .into_iter()
            .filter(|c| c.starts_with("kernel:") || usable_category(c))
            .collect();
        if additional.len() > room {
            log::warn!(
                "{} additional categories past the limit of {MAX_CATEGORIES} discarded",
                additional.len() - room
            );
            additional.truncate(room);
        }
        a.before_start = state;
        let timeout = Duration::from_millis(a.config.start_timeout_milliseconds);
        self.set_state(SessionState::Starting);
        let Some(a) = self.active.as_mut() else {
            return;
        };
        a.start_timeout = timeout;
        a.session.out().get_mut().set_finishing(false);
        let disposition = options.buffer_disposition;
        match a.session.begin_start(disposition, &additional) {
            // Loading and attaching the programs takes long: on a thread.
            Some(kernel) => self.load_kernel(id, txid, kernel, disposition, additional),
            None => self.kernel_started(txid, disposition, &additional),
        }
    }

    /// Goes on with the StartTracing `txid` once the kernel provider runs:
    /// starts the userspace providers, and acknowledges when they did.
    pub(super) fn kernel_started(
        &mut self,
        txid: u32,
        disposition: BufferDisposition,
        additional: &[String],
    ) {
        if !self.flight_holds_providers() {
            self.registry.start_all(disposition, additional);
        }
        if let Some(a) = self.active.as_mut() {
            a.pending_start = Some((txid, tokio::time::Instant::now() + a.start_timeout));
        }
        self.finish_start(false);
    }

    pub(super) fn stop(&mut self, id: u64, txid: u32, write_results: bool) {
        let state = match self.active.as_ref() {
            Some(a) if a.owner == id => a.state,
            _ if self.is_terminating(id) => SessionState::Terminating,
            _ => {
                self.reply(id, txid, Reply::StopResult(Err(StopError::NotInitialized)));
                return;
            }
        };
        if self.loading() {
            self.after_loading(Then::Stop {
                txid,
                write_results,
            });
            return;
        }
        match state {
            // The start is acknowledged first, then undone.
            SessionState::Starting => self.finish_start(true),
            SessionState::Started => {}
            _ => {
                self.reply(id, txid, Reply::StopResult(Err(StopError::NotStarted)));
                return;
            }
        }
        self.begin_stop(Some(txid), write_results, None);
    }

    /// Tells providers to stop; [`Manager::finish_stop`] completes the stop
    /// when they all confirmed, or after [`STOP_TIMEOUT`].
    pub(super) fn begin_stop(
        &mut self,
        txid: Option<u32>,
        write_results: bool,
        terminate: Option<u32>,
    ) {
        self.set_state(SessionState::Stopping);
        if !self.flight_holds_providers() {
            self.registry.begin_stop();
        }
        if let Some(a) = self.active.as_mut() {
            a.pending_stop = Some(PendingStop {
                txid,
                write_results,
                deadline: tokio::time::Instant::now() + STOP_TIMEOUT,
                terminate,
            });
        }
        self.finish_stop();
    }

    /// Completes a pending stop once every provider confirmed or the time
    /// is up: providers first, then the kernel, so every userspace record
    /// falls inside the time the kernel's events cover.
    pub(super) fn finish_stop(&mut self) {
        let Some(a) = self.active.as_mut() else {
            return;
        };
        let Some(pending) = &a.pending_stop else {
            return;
        };
        let held = self.flight.as_ref().is_some_and(|f| f.providers);
        if !(held || self.registry.all_stopped() || tokio::time::Instant::now() >= pending.deadline)
        {
            return;
        }
        let Some(pending) = a.pending_stop.take() else {
            return;
        };
        let mut failed = None;
        if held
            && pending.write_results
            && let Err(e) = self.tee_unsaved()
        {
            failed = Some(e);
        }
        let Some(a) = self.active.as_mut() else {
            return;
        };
        if !held
            && let Err(e) = self
                .registry
                .finish_stop(a.session.out(), pending.write_results)
        {
            failed = Some(format!("writing providers' records: {e}"));
        }
        // The stop's last records (the kernel events read before the cut,
        // then the providers' at termination) are written however far
        // behind the reader is: they are bounded by the backlog's limit
        // and the providers' buffers. The next start puts the limit back.
        a.session.out().get_mut().set_finishing(true);
        if let Err(e) = a.session.stop(pending.write_results) {
            failed = Some(format!("stopping the kernel provider: {e}"));
        }
        if let Err(e) = a.session.flush() {
            failed = Some(format!("writing the trace: {e}"));
        }
        let owner = a.owner;
        if let Some(why) = failed {
            self.abort_session(&why);
        }
        self.set_state(SessionState::Stopped);
        let result = self.results();
        let aborted = self.active.as_ref().is_some_and(|a| a.aborted.is_some());
        if let Some(txid) = pending.txid {
            let reply = if aborted {
                Err(StopError::Aborted)
            } else {
                Ok(result)
            };
            self.reply(owner, txid, Reply::StopResult(reply));
        }
        if let Some(txid) = pending.terminate {
            self.finish_terminate(owner, txid);
        }
    }

    /// The session's numbers so far.
    pub(super) fn results(&mut self) -> StopResult {
        let providers = if self.flight_holds_providers() {
            Vec::new()
        } else {
            self.registry.stats()
        };
        self.results_with(&providers)
    }

    /// The session's numbers, with `providers`' numbers.
    pub(super) fn results_with(
        &mut self,
        providers: &[crate::userspace::ProviderStats],
    ) -> StopResult {
        let Some(a) = self.active.as_mut() else {
            return StopResult::default();
        };
        let kernel = a.session.stats();
        let progress = a.session.progress();
        let out = a.session.out();
        let (records, bytes) = (out.records(), out.bytes());
        let mut provider_stats = Vec::new();
        if a.session.has_kernel() {
            provider_stats.push(trace_common::controller::ProviderStats {
                id: crate::session::KERNEL_PROVIDER_ID,
                name: crate::session::KERNEL_PROVIDER_NAME.to_owned(),
                pid: 0,
                records_written: 0,
                bytes_written: 0,
                records_dropped: kernel.dropped,
                buffer_wrapped_count: 0,
                percentage_durable_buffer_used: (progress.kernel_fill * 100.0).round() as u8,
                started: true,
                aborted: false,
            });
        }
        // Every provider that took part: a reply holds those that fit, the
        // client asks for the rest (see `send`).
        provider_stats.extend(providers.iter().map(|p| p.to_controller()));
        StopResult {
            providers_total: provider_stats.len() as u32,
            provider_stats,
            kernel: kernel.to_controller(),
            records,
            bytes,
            traced_ns: kernel.duration.as_nanos() as u64,
        }
    }

    pub(super) fn terminate(&mut self, id: u64, txid: u32) {
        if self.is_terminating(id) {
            self.fail(
                id,
                txid,
                false,
                fail::OTHER,
                "the session is already being terminated".into(),
            );
            return;
        }
        if !self.owns_session(id) {
            self.fail(
                id,
                txid,
                true,
                fail::OUT_OF_ORDER,
                "TerminateTracing without a session".into(),
            );
            return;
        }
        if self.loading() {
            self.after_loading(Then::Terminate { txid });
            return;
        }
        let state = self.active.as_ref().map(|a| a.state);
        match state {
            Some(SessionState::Starting) => {
                self.finish_start(true);
                self.begin_stop(None, true, Some(txid));
            }
            Some(SessionState::Started) => self.begin_stop(None, true, Some(txid)),
            Some(SessionState::Stopping) => {
                let pending = self.active.as_mut().and_then(|a| a.pending_stop.as_mut());
                match pending {
                    Some(p) if p.terminate.is_none() => p.terminate = Some(txid),
                    _ => self.fail(
                        id,
                        txid,
                        false,
                        fail::OTHER,
                        "the session is already being terminated".into(),
                    ),
                }
            }
            _ => self.finish_terminate(id, txid),
        }
    }

    /// Writes whatever no stop wrote (nothing collected is lost), ends the
    /// providers' traces and hands the output to a thread that drains it
    /// to the client; the session is TERMINATING until that is done.
    pub(super) fn finish_terminate(&mut self, id: u64, txid: u32) {
        self.set_state(SessionState::Terminating);
        let Some(mut a) = self.active.take() else {
            return;
        };
        let mut providers_failed = None;
        let held = self.flight_holds_providers();
        let terminated = if held {
            Ok(Vec::new())
        } else {
            self.registry.terminate(a.session.out())
        };
        let providers = match terminated {
            Ok(p) => p,
            Err(e) => {
                providers_failed = Some(format!("writing providers' records: {e}"));
                Vec::new()
            }
        };
        self.active = Some(a);
        let result = self.results_with(&providers);
        let Some(mut a) = self.active.take() else {
            return;
        };
        for watcher in std::mem::take(&mut a.watchers) {
            self.send(
                id,
                watcher,
                Reply::Failed {
                    fatal: false,
                    code: fail::OTHER,
                    message: "the session ended before another alert came".into(),
                },
            );
        }
        // The last records go to the output thread's queue here; the thread
        // writes them out while the manager goes on. The output is closed
        // even after a failure: it holds whole records only, and a deferred
        // trace's staging file is still copied out.
        let (sink, finished) = a.session.finish_keeping_output();
        // The cause: the abort's, else the output's own failure (with the
        // operating system's error), else what failed here.
        let failed = a
            .aborted
            .take()
            .or_else(|| sink.failure().map(|e| e.to_string()))
            .or(providers_failed)
            .or_else(|| finished.err().map(|e| format!("ending the session: {e}")));
        self.terminating = Some(Terminating {
            owner: id,
            txid,
            deadline: tokio::time::Instant::now() + DRAIN_TIMEOUT,
            cancel: sink.canceller(),
        });
        let tx = self.events_tx.clone();
        tokio::spawn(async move {
            let written = tokio::task::spawn_blocking(move || sink.close())
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())));
            let reply = match (written, failed) {
                (Ok(_), None) => Reply::Terminated(result),
                (_, Some(why)) => Reply::Failed {
                    fatal: false,
                    code: fail::ABORTED,
                    message: format!("the session aborted: {why}; the trace is incomplete"),
                },
                // The sink's errors say what was written where.
                (Err(e), None) => Reply::Failed {
                    fatal: false,
                    code: fail::ABORTED,
                    message: e.to_string(),
                },
            };
            let _ = tx.send(Event::Drained { id, txid, reply });
        });
    }
}
