//! Work too slow for the manager's loop, done on a thread of its own so that
//! other clients keep getting answers and the flight recorder keeps
//! draining meanwhile: resolving a new session's probes and tracepoints
//! (InitializeTracing), and loading and attaching its kernel provider
//! (StartTracing). Each ends in an event back to the loop
//! ([`Event::Prepared`], [`Event::Loaded`]) and is limited in time
//! ([`SETUP_LIMIT`](super::config::SETUP_LIMIT)). There is one session, so at most one such thread.
//! Detaching many probes is done in the background too
//! ([`crate::kernel::perf_probe::detach_all`]).

use std::os::fd::OwnedFd;
use std::time::Instant;

use trace_common::controller::{TraceConfig, fail};
use trace_common::provider::BufferDisposition;

use super::Manager;
use super::config::{KernelMemory, SETUP_LIMIT, new_session, record_config};
use super::event::{Event, Prepared};
use crate::kernel::{KernelConfig, KernelError, KernelProvider};

/// A StartTracing whose kernel provider a thread is loading, and what the
/// owner asked for meanwhile.
pub(super) struct Loading {
    /// The StartTracing.
    pub(super) txid: u32,
    disposition: BufferDisposition,
    additional: Vec<String>,
    /// A StopTracing (its txid and `write_results`) or TerminateTracing
    /// that came meanwhile, carried out once the start is done.
    pub(super) then: Vec<Then>,
}

/// A request that waits for a start in progress.
pub(super) enum Then {
    Stop { txid: u32, write_results: bool },
    Terminate { txid: u32 },
}

impl Manager {
    /// Resolves the probes and tracepoints of the session `config` asks for
    /// on a thread; [`Manager::prepared`] goes on with the result. The
    /// session's place is taken meanwhile.
    pub(super) fn prepare(
        &mut self,
        id: u64,
        txid: u32,
        config: TraceConfig,
        output: OwnedFd,
        kernel: KernelMemory,
    ) {
        let creds = self.clients.get(&id).and_then(|c| c.creds.clone());
        let tx = self.events_tx.clone();
        let spawned = std::thread::Builder::new()
            .name("session-setup".into())
            .spawn(move || {
                let deadline = Instant::now() + SETUP_LIMIT;
                let record = record_config(&config, creds.as_ref(), Some(deadline));
                let prepared = Box::new(Prepared {
                    config,
                    output,
                    kernel,
                    record,
                });
                let _ = tx.send(Event::Prepared { id, txid, prepared });
            });
        match spawned {
            Ok(_) => self.preparing = Some(id),
            Err(e) => self.fail(
                id,
                txid,
                false,
                fail::OTHER,
                format!("setting the session up: {e}"),
            ),
        }
    }

    /// Completes an InitializeTracing whose probes and tracepoints were
    /// resolved, unless its client went away meanwhile.
    pub(super) fn prepared(&mut self, id: u64, txid: u32, prepared: Box<Prepared>) {
        if self.preparing != Some(id) {
            return;
        }
        self.preparing = None;
        let Prepared {
            config,
            output,
            kernel,
            record,
        } = *prepared;
        let session = record.and_then(|record| new_session(record, &config, output, kernel));
        match session {
            Ok(session) => self.begin_session(id, txid, config, session, kernel),
            Err(message) => self.fail(id, txid, false, fail::BAD_CONFIG, message),
        }
    }

    /// Loads and attaches the kernel provider `config` describes on a
    /// thread, for the StartTracing `txid` of the session's owner `id`;
    /// [`Manager::loaded`] goes on with it.
    pub(super) fn load_kernel(
        &mut self,
        id: u64,
        txid: u32,
        mut config: KernelConfig,
        disposition: BufferDisposition,
        additional: Vec<String>,
    ) {
        let tx = self.events_tx.clone();
        let spawned = std::thread::Builder::new()
            .name("kernel-setup".into())
            .spawn(move || {
                config.deadline = Some(Instant::now() + SETUP_LIMIT);
                let kernel = Box::new(KernelProvider::start(&config));
                // A manager gone drops it here, off any loop.
                let _ = tx.send(Event::Loaded { id, txid, kernel });
            });
        match spawned {
            Ok(_) => {
                if let Some(a) = self.active.as_mut() {
                    a.loading = Some(Loading {
                        txid,
                        disposition,
                        additional,
                        then: Vec::new(),
                    });
                }
            }
            Err(e) => self.start_failed(id, txid, format!("loading the kernel provider: {e}")),
        }
    }

    /// Completes a StartTracing whose kernel provider was loaded (or could
    /// not be), then whatever its owner asked for meanwhile. A session gone
    /// meanwhile has its provider detached on a thread.
    pub(super) fn loaded(
        &mut self,
        id: u64,
        txid: u32,
        kernel: Box<Result<KernelProvider, KernelError>>,
    ) {
        let loading = match self.active.as_mut() {
            Some(a) if a.owner == id && a.loading.as_ref().is_some_and(|l| l.txid == txid) => {
                a.loading.take()
            }
            _ => None,
        };
        let Some(loading) = loading else {
            // Detaching takes a while: not on the loop.
            let _ = std::thread::Builder::new()
                .name("kernel-detach".into())
                .spawn(move || drop(kernel));
            return;
        };
        let attached = match *kernel {
            Ok(kernel) => match self.active.as_mut() {
                Some(a) => match a.session.attached(kernel) {
                    Ok(()) => Ok(()),
                    // The output failed (meanwhile, say): the session is
                    // aborted, as by any output failure, and its stop
                    // says so; the start itself went through.
                    Err(e) if a.session.out().get_ref().failure().is_some() => {
                        self.abort_session(&e.to_string());
                        Ok(())
                    }
                    Err(e) => Err(e.to_string()),
                },
                None => Ok(()),
            },
            Err(e) => Err(start_error(e)),
        };
        match attached {
            Ok(()) => self.kernel_started(txid, loading.disposition, &loading.additional),
            Err(message) => self.start_failed(id, txid, message),
        }
        for then in loading.then {
            match then {
                Then::Stop {
                    txid,
                    write_results,
                } => self.stop(id, txid, write_results),
                Then::Terminate { txid } => self.terminate(id, txid),
            }
        }
    }

    /// A start that failed: the session goes back to where it was, and its
    /// owner is told why.
    pub(super) fn start_failed(&mut self, id: u64, txid: u32, message: String) {
        if let Some(before) = self.active.as_ref().map(|a| a.before_start) {
            self.set_state(before);
        }
        self.fail(id, txid, false, fail::START_FAILED, message);
    }

    /// Whether the session's StartTracing is still loading its kernel
    /// provider.
    pub(super) fn loading(&self) -> bool {
        self.active.as_ref().is_some_and(|a| a.loading.is_some())
    }

    /// Keeps `then` for when the start in progress is done.
    pub(super) fn after_loading(&mut self, then: Then) {
        if let Some(l) = self.active.as_mut().and_then(|a| a.loading.as_mut()) {
            l.then.push(then);
        }
    }
}

/// What a client is told when its kernel provider could not start.
pub(super) fn start_error(e: KernelError) -> String {
    match e {
        k @ KernelError::Permission { .. } => {
            format!("{k}; the trace manager needs root (or CAP_BPF and CAP_PERFMON)")
        }
        KernelError::TooSlow => format!(
            "setting up the kernel provider took longer than {} s, the most one request may \
             take: select fewer tracepoints, probes or processes",
            SETUP_LIMIT.as_secs()
        ),
        other => other.to_string(),
    }
}
