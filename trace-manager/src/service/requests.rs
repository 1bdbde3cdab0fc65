//! The controller's requests: each decoded and checked, the queries
//! answered at once, the session's requests handed to its state machine
//! ([`super::state`]); alerts paired with the requests watching for them.

use std::os::fd::OwnedFd;

use trace_common::category::KERNEL_CATEGORIES;
use trace_common::controller::{
    Envelope, ProviderInfo, Reply, Request, SessionState, Status, fail,
};
use trace_common::provider::control::ControlError;

use super::{Manager, throttle};
use crate::session::RecordError;

/// The most alerts (and WatchAlert requests) a session queues.
const MAX_QUEUED_ALERTS: usize = 1024;

impl Manager {
    /// Decodes and handles a message of client `id`.
    pub(super) fn on_message(&mut self, id: u64, bytes: Vec<u8>, fds: Vec<OwnedFd>) {
        if !self.clients.contains_key(&id) {
            return;
        }
        match Envelope::<Request>::decode(&bytes) {
            Ok(m) => self.on_request(id, m.txid, m.body, fds),
            Err(ControlError::UnsupportedVersion(v)) => self.refuse_version(id, v),
            Err(e) => {
                let pid = self.clients.get(&id).map_or(0, |c| c.pid);
                throttle::BAD_REQUEST.warn(format_args!(
                    "client {id} (pid {pid}): {e}; disconnecting it"
                ));
                self.fail(id, 0, true, fail::MALFORMED, format!("bad request: {e}"));
            }
        }
    }

    /// The kernel triggers that fired in the session: alerts named by their
    /// condition, from provider `kernel`.
    pub(super) fn kernel_triggers_fired(&mut self) {
        let Some(a) = self.active.as_mut() else {
            return;
        };
        let fired = a.session.take_fired();
        if fired.is_empty() {
            return;
        }
        for f in fired {
            a.alerts
                .push_back((crate::session::KERNEL_PROVIDER_NAME.to_owned(), f.spec));
        }
        self.after_provider_news();
    }

    /// Alerts to watchers, and a pending start that may now be complete.
    pub(super) fn after_provider_news(&mut self) {
        let alerts = self.registry.take_alerts();
        if let Some(a) = self.active.as_mut() {
            a.alerts.extend(alerts);
            if a.alerts.len() > MAX_QUEUED_ALERTS {
                let n = a.alerts.len() - MAX_QUEUED_ALERTS;
                log::warn!("{n} alerts nobody asked for dropped");
                a.alerts.drain(..n);
            }
        }
        // Alerts and watchers are paired in the order they came.
        loop {
            let Some(a) = self.active.as_mut() else {
                return;
            };
            if a.alerts.is_empty() || a.watchers.is_empty() {
                break;
            }
            let (Some((provider, name)), Some(txid)) =
                (a.alerts.pop_front(), a.watchers.pop_front())
            else {
                break;
            };
            let owner = a.owner;
            self.reply(owner, txid, Reply::Alert { name, provider });
        }
        self.finish_start(false);
        self.finish_stop();
    }

    pub(super) fn on_request(&mut self, id: u64, txid: u32, req: Request, fds: Vec<OwnedFd>) {
        if !fds.is_empty() && !matches!(req, Request::InitializeTracing(_) | Request::Snapshot) {
            self.fail(
                id,
                txid,
                true,
                fail::MALFORMED,
                "only InitializeTracing and Snapshot carry a descriptor".into(),
            );
            return;
        }
        match req {
            Request::GetProviders => {
                // Within one message: declared categories are left out once
                // the list grows long.
                let mut budget = trace_common::controller::MAX_MESSAGE_BYTES / 2;
                let list = self
                    .registry
                    .providers()
                    .into_iter()
                    .take(trace_common::controller::MAX_PROVIDERS)
                    .map(|p| {
                        let size: usize = p.categories.iter().map(|c| c.len() + 2).sum();
                        let categories = if size <= budget {
                            budget -= size;
                            p.categories
                        } else {
                            Vec::new()
                        };
                        ProviderInfo {
                            id: p.id,
                            name: p.name,
                            pid: p.pid,
                            state: p.state.to_owned(),
                            categories,
                        }
                    })
                    .collect();
                self.reply(id, txid, Reply::Providers(list));
            }
            Request::GetKnownCategories => {
                let mut list: Vec<(String, String)> = KERNEL_CATEGORIES
                    .iter()
                    .map(|(n, d)| ((*n).to_owned(), (*d).to_owned()))
                    .collect();
                // Declared ones come deduplicated from the registry.
                for c in self.registry.categories() {
                    if list.len() >= trace_common::controller::MAX_LIST_LEN {
                        break;
                    }
                    if !c.starts_with("kernel:") {
                        list.push((c, "declared by a userspace provider".to_owned()));
                    }
                }
                self.reply(id, txid, Reply::KnownCategories(list));
            }
            Request::InitializeTracing(config) => self.initialize(id, txid, config, fds),
            Request::Snapshot => self.snapshot(id, txid, fds),
            Request::GetSessions => {
                let list = self.sessions();
                self.reply(id, txid, Reply::Sessions(list));
            }
            Request::StartTracing(options) => self.start(id, txid, options),
            Request::StopTracing { write_results } => self.stop(id, txid, write_results),
            Request::TerminateTracing => self.terminate(id, txid),
            Request::WatchAlert => {
                let Some(a) = self.active.as_mut().filter(|a| a.owner == id) else {
                    self.fail(
                        id,
                        txid,
                        true,
                        fail::OUT_OF_ORDER,
                        "WatchAlert without a session".into(),
                    );
                    return;
                };
                if a.watchers.len() >= MAX_QUEUED_ALERTS {
                    self.fail(
                        id,
                        txid,
                        false,
                        fail::OTHER,
                        format!("already {MAX_QUEUED_ALERTS} WatchAlert requests waiting"),
                    );
                    return;
                }
                a.watchers.push_back(txid);
                self.after_provider_news();
            }
            Request::Follow { pid } => {
                let Some(a) = self.active.as_mut().filter(|a| a.owner == id) else {
                    self.fail(
                        id,
                        txid,
                        true,
                        fail::OUT_OF_ORDER,
                        "Follow without a session".into(),
                    );
                    return;
                };
                match a.session.follow(pid) {
                    Ok(()) => self.reply(id, txid, Reply::Followed),
                    Err(RecordError::Kernel(crate::kernel::KernelError::NoSuchProcess {
                        ..
                    })) => self.fail(
                        id,
                        txid,
                        false,
                        fail::NO_SUCH_PROCESS,
                        format!(
                            "cannot follow process {pid}: no such process (it may have exited)"
                        ),
                    ),
                    Err(e) => self.fail(
                        id,
                        txid,
                        false,
                        fail::OTHER,
                        format!("following process {pid}: {e}"),
                    ),
                }
            }
            Request::GetProviderStats { offset } => {
                let page = self.clients.get(&id).and_then(|c| {
                    trace_common::controller::provider_stats_page(&c.results, offset)
                });
                match page {
                    Some(page) => self.reply(id, txid, page),
                    None => self.fail(
                        id,
                        txid,
                        false,
                        fail::OUT_OF_ORDER,
                        format!(
                            "no provider stats from {offset} on: the last stop result on this \
                             connection had {}",
                            self.clients.get(&id).map_or(0, |c| c.results.len())
                        ),
                    ),
                }
            }
            Request::GetStatus => {
                let status = match self.active.as_ref().filter(|a| a.owner == id) {
                    // Another client's session, or none: its state only.
                    None => Status {
                        state: Some(match &self.active {
                            Some(a) => a.state,
                            None if self.terminating.is_some() => SessionState::Terminating,
                            None => SessionState::Ready,
                        }),
                        ..Status::default()
                    },
                    Some(a) => {
                        let p = a.session.progress();
                        let providers = if self.flight_holds_providers() {
                            Vec::new()
                        } else {
                            self.registry.stats()
                        };
                        Status {
                            state: Some(a.state),
                            elapsed_ns: p.elapsed.as_nanos() as u64,
                            kernel_events: p.kernel_events,
                            bytes: p.bytes,
                            dropped: p.dropped,
                            kernel_fill_permille: (p.kernel_fill * 1000.0).round() as u16,
                            providers: providers.len() as u32,
                            providers_started: providers.iter().filter(|p| p.started).count()
                                as u32,
                            provider_progress: self
                                .registry
                                .progress()
                                .into_iter()
                                .take(trace_common::controller::MAX_PROVIDERS)
                                .collect(),
                        }
                    }
                };
                self.reply(id, txid, Reply::Status(status));
            }
        }
    }
}
