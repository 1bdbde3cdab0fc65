//! The trace manager as a service: one socket that providers register on
//! and clients drive sessions through (the controller protocol,
//! [`trace_common::controller`]).
//!
//! [`Manager`] owns the registry of userspace providers, which outlives
//! sessions, and at most one session at a time. It runs as the
//! `trace-manager` daemon, or embedded in `trace-cli record`, which then
//! talks to it over a socket pair ([`Manager::local_client`]) with the
//! same protocol. Every connection is read by a task of its own; the
//! manager's loop owns all state, so requests are handled one at a time,
//! in order. A connection's first message says whether it is a provider
//! or a client. A client that sends something undecodable or out of order
//! gets a fatal [`Reply::Failed`] and is disconnected; if it owned the
//! session, the session is aborted. Nothing a client or provider sends
//! stops the manager.

mod sink;
mod throttle;

use crate::limits::{Connections, Limits, Slot, mib};
use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::Duration;

use nix::sys::socket::{
    AddressFamily, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg, send, socketpair,
};
use thiserror::Error;
use tokio::sync::mpsc;
use trace_common::category::KERNEL_CATEGORIES;
use trace_common::controller::{
    Envelope, FXT_VERSION, MAX_CATEGORIES, MAX_MESSAGE_BYTES, ProviderInfo, Reply, Request,
    SessionState, StartError, StartOptions, Status, StopError, StopResult, TraceConfig, fail,
    is_controller_message,
};
use trace_common::provider::control::{ControlError, ProviderMessage};

use crate::session::{RecordConfig, RecordError, Session};
pub use crate::userspace::Listener;
use crate::userspace::{Registry, UserspaceConfig, UserspaceError, async_fd};
pub use sink::{OutputFailure, Sink};

/// How long a connection may take to say what it is.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// How long providers get to confirm a stop.
const STOP_TIMEOUT: Duration = Duration::from_secs(1);
/// How often the output is flushed and the start timeout looked at.
const TICK: Duration = Duration::from_millis(250);
/// How long a terminated session waits for its client to read the rest
/// of its output before the manager gives up on it.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);
/// The most alerts (and WatchAlert requests) a session queues.
const MAX_QUEUED_ALERTS: usize = 1024;

/// Why the manager could not run.
#[derive(Debug, Error)]
pub enum ManagerError {
    /// The socket could not be set up.
    #[error(transparent)]
    Socket(#[from] UserspaceError),
    /// A socket pair for the local client could not be made.
    #[error("creating the local client's socket pair: {0}")]
    LocalClient(std::io::Error),
}

/// What the loop hears from connection tasks.
enum Event {
    /// A provider registered on a new connection.
    Provider {
        fd: OwnedFd,
        pid: i32,
        register: ProviderMessage,
        slot: Slot,
    },
    /// A new client: its id and a descriptor to answer on.
    Client { id: u64, fd: OwnedFd, pid: i32 },
    /// A client's message and the descriptors that came with it.
    Request {
        id: u64,
        bytes: Vec<u8>,
        fds: Vec<OwnedFd>,
    },
    /// A client's connection closed.
    Closed { id: u64 },
    /// A terminated session's output has been written out.
    Drained { id: u64, txid: u32, reply: Reply },
}

struct Client {
    fd: OwnedFd,
    pid: i32,
    /// Who it is, as the kernel saw it connect: the files of its probes
    /// are opened with its rights (see [`crate::creds`]).
    creds: Option<crate::creds::ClientCreds>,
    /// Every provider's stats of the last stop result sent to it, for
    /// GetProviderStats (the result holds those that fit in a message).
    results: Vec<trace_common::controller::ProviderStats>,
}

/// The one session, and who owns it.
struct Active {
    owner: u64,
    state: SessionState,
    config: TraceConfig,
    session: Session<Sink>,
    /// The output failed or the kernel could not be read: stops report it.
    aborted: Option<String>,
    /// A StartTracing waiting for providers: its txid and deadline.
    pending_start: Option<(u32, tokio::time::Instant)>,
    /// Alerts not yet asked for, and WatchAlert requests not yet answered.
    alerts: VecDeque<(String, String)>,
    watchers: VecDeque<u32>,
    /// The state before the current start, to go back to if it fails.
    before_start: SessionState,
    /// The categories of the session's configuration.
    categories: Vec<String>,
    /// A stop waiting for providers to confirm.
    pending_stop: Option<PendingStop>,
}

/// A stop in progress: providers were told to stop.
struct PendingStop {
    /// The StopTracing to answer (none when a termination stops).
    txid: Option<u32>,
    write_results: bool,
    deadline: tokio::time::Instant,
    /// A TerminateTracing to carry out once stopped.
    terminate: Option<u32>,
}

/// The trace manager: the provider registry and at most one session.
pub struct Manager {
    listener: Option<Listener>,
    embedded: bool,
    registry: Registry,
    clients: HashMap<u64, Client>,
    next_client: u64,
    active: Option<Active>,
    events_tx: mpsc::UnboundedSender<Event>,
    events_rx: mpsc::UnboundedReceiver<Event>,
    /// The client whose disconnection ends an embedded manager.
    local: Option<u64>,
    /// A session whose output is still being written out: it is
    /// TERMINATING, and no other can begin.
    terminating: Option<Terminating>,
    /// Memory and connection limits.
    limits: Limits,
    /// The connections open, by user.
    connections: Connections,
    /// Connections refused since the last log line about it.
    refused: u64,
    /// The most connections open since memory was last handed back.
    peak_connections: usize,
}

/// A terminated session whose output a thread is still writing.
struct Terminating {
    owner: u64,
    txid: u32,
    /// When to give up waiting for the client to read its output.
    deadline: tokio::time::Instant,
    cancel: sink::Cancel,
}

impl Manager {
    /// A manager listening on `socket` (none: no provider can register,
    /// only [`Manager::local_client`] can connect). An `embedded` manager
    /// serves its local client only and refuses other clients.
    pub fn bind(socket: Option<PathBuf>, embedded: bool) -> Result<Manager, ManagerError> {
        let listener = socket.map(|p| Listener::bind(&p)).transpose()?;
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        Ok(Manager {
            listener,
            embedded,
            registry: Registry::new(),
            clients: HashMap::new(),
            next_client: 1,
            active: None,
            events_tx,
            events_rx,
            local: None,
            terminating: None,
            limits: Limits::for_this_machine(),
            connections: Connections::default(),
            refused: 0,
            peak_connections: 0,
        })
    }

    /// Replaces the limits ([`Limits::for_this_machine`] by default).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// A client connection inside this process; an embedded manager's
    /// [`Manager::run`] returns when it closes.
    pub fn local_client(&mut self) -> Result<OwnedFd, ManagerError> {
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        )
        .map_err(|e| ManagerError::LocalClient(e.into()))?;
        let id = self.next_client;
        self.next_client += 1;
        self.local = Some(id);
        let tx = self.events_tx.clone();
        tokio::spawn(read_client(id, ours, std::process::id() as i32, tx));
        Ok(theirs)
    }

    /// Serves providers and clients; returns only when the local client of
    /// an embedded manager has gone (a daemon runs until killed).
    pub async fn run(mut self) {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let listener = self.listener.as_ref();
            let accept = async {
                match listener {
                    Some(l) => l.accept().await,
                    None => std::future::pending().await,
                }
            };
            let kernel = async {
                match self.active.as_mut() {
                    Some(a)
                        if matches!(a.state, SessionState::Started | SessionState::Stopping)
                            && a.aborted.is_none() =>
                    {
                        a.session.readable().await
                    }
                    _ => std::future::pending().await,
                }
            };
            // Unbiased: a busy source (a chatty client, a flooded kernel
            // ring) cannot starve the others.
            tokio::select! {
                Some(event) = self.events_rx.recv() => {
                    if self.on_event(event) {
                        return;
                    }
                }
                r = kernel => {
                    let r = r.and_then(|()| match self.active.as_mut() {
                        Some(a) => a.session.drain(),
                        None => Ok(()),
                    });
                    if let Err(e) = r {
                        self.abort_session(&format!("reading the kernel provider: {e}"));
                    }
                }
                note = self.registry.next_note() => {
                    let out = self.active.as_mut().map(|a| a.session.out());
                    if let Err(e) = self.registry.handle(note, out) {
                        self.abort_session(&format!("writing a provider's records: {e}"));
                    }
                    self.after_provider_news();
                }
                conn = accept => match conn {
                    Ok((fd, pid)) => {
                        let uid = nix::sys::socket::getsockopt(
                            &fd,
                            nix::sys::socket::sockopt::PeerCredentials,
                        )
                        .map_or(u32::MAX, |c| c.uid());
                        match self.connections.admit(uid, &self.limits) {
                            Ok(slot) => {
                                let id = self.next_client;
                                self.next_client += 1;
                                tokio::spawn(hello(id, fd, pid, slot, self.events_tx.clone()));
                            }
                            Err(why) => {
                                // Closed at once; said once a tick at most.
                                if self.refused == 0 {
                                    log::warn!("connection from pid {pid} (uid {uid}) refused: {why}");
                                }
                                self.refused += 1;
                            }
                        }
                    }
                    Err(e) => {
                        // Out of descriptors, say: do not spin on it.
                        log::warn!("accepting a connection failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                _ = tick.tick() => self.on_tick(),
            }
        }
    }

    /// Alerts to watchers, and a pending start that may now be complete.
    fn after_provider_news(&mut self) {
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

    fn on_tick(&mut self) {
        // How many bad or idle connections were not logged one by one.
        throttle::flush();
        if self.refused > 1 {
            log::warn!(
                "{} more connections refused (limits: {} in all, {} per user)",
                self.refused - 1,
                self.limits.max_connections,
                self.limits.max_connections_per_uid
            );
        }
        self.refused = 0;
        // Many connections closed since the last look: hand their memory
        // back to the system (the allocator keeps freed memory otherwise).
        let open = self.connections.total();
        if open + 256 <= self.peak_connections {
            // SAFETY: malloc_trim only releases free memory of the heap.
            unsafe { libc::malloc_trim(0) };
            self.peak_connections = open;
        }
        self.peak_connections = self.peak_connections.max(open);
        if let Some(t) = &self.terminating
            && tokio::time::Instant::now() >= t.deadline
        {
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
        if let Some(a) = self.active.as_mut()
            && a.aborted.is_none()
            && let Err(e) = a.session.flush()
        {
            self.abort_session(&format!("writing the trace: {e}"));
        }
        self.finish_start(false);
        self.finish_stop();
    }

    /// Acknowledges a pending start when every provider started, or when
    /// `force`d or the start timeout passed.
    fn finish_start(&mut self, force: bool) {
        let Some(a) = self.active.as_mut() else {
            return;
        };
        let Some((txid, deadline)) = a.pending_start else {
            return;
        };
        let timed_out = tokio::time::Instant::now() >= deadline;
        if !(force || timed_out || self.registry.all_started()) {
            return;
        }
        if timed_out {
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

    /// Handles one event; true when an embedded manager is done.
    fn on_event(&mut self, event: Event) -> bool {
        match event {
            Event::Provider {
                fd,
                pid,
                register,
                slot,
            } => self.registry.add(fd, pid, register, Some(slot)),
            Event::Client { id, fd, pid } => {
                log::debug!("client {id} (pid {pid}) connected");
                let creds = crate::creds::ClientCreds::of_peer(&fd)
                    .inspect_err(|e| log::warn!("client {id}: who it is is unknown: {e}"))
                    .ok();
                self.clients.insert(
                    id,
                    Client {
                        fd,
                        pid,
                        creds,
                        results: Vec::new(),
                    },
                );
                if self.embedded && Some(id) != self.local {
                    self.fail(
                        id,
                        0,
                        true,
                        fail::EMBEDDED,
                        format!(
                            "this manager runs inside `trace-cli record` (pid {}) and serves no \
                             other client",
                            std::process::id()
                        ),
                    );
                }
            }
            Event::Request { id, bytes, fds } => {
                if !self.clients.contains_key(&id) {
                    return false;
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
            Event::Closed { id } => {
                self.drop_client(id);
                if Some(id) == self.local {
                    return true;
                }
            }
            Event::Drained { id, txid, reply } => {
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
                if Some(id) == self.local && !self.clients.contains_key(&id) {
                    return true;
                }
            }
        }
        false
    }

    /// Forgets a client; the session it owned is aborted and ended.
    fn drop_client(&mut self, id: u64) {
        if let Some(c) = self.clients.remove(&id) {
            log::debug!("client {id} went away");
            // Its reader task ends, and the client sees the connection end.
            let _ = nix::sys::socket::shutdown(c.fd.as_raw_fd(), nix::sys::socket::Shutdown::Both);
        }
        if self.active.as_ref().is_some_and(|a| a.owner == id) {
            log::info!("the session's client went away; aborting the session");
            self.set_state(SessionState::Terminating);
            self.registry.end();
            // Dropping the output abandons what it has not written.
            self.active = None;
            log::info!("session state READY");
        }
        if self.terminating.as_ref().is_some_and(|t| t.owner == id) {
            self.terminating = None;
            log::info!("session state READY");
        }
    }

    fn send(&mut self, id: u64, txid: u32, body: Reply) -> bool {
        let Some(c) = self.clients.get_mut(&id) else {
            return false;
        };
        // A stop result holds the providers' stats that fit in a message;
        // the client asks for the rest (GetProviderStats).
        let body = match body {
            Reply::StopResult(Ok(r)) => {
                let (first, all) = r.paged();
                c.results = all;
                Reply::StopResult(Ok(first))
            }
            Reply::Terminated(r) => {
                let (first, all) = r.paged();
                c.results = all;
                Reply::Terminated(first)
            }
            other => other,
        };
        let c = &*c;
        let bytes = match (Envelope { txid, body }).encode() {
            Ok(b) => b,
            Err(e) => {
                log::warn!("encoding a reply to client {id}: {e}");
                let failed = Envelope {
                    txid,
                    body: Reply::Failed {
                        fatal: false,
                        code: fail::OTHER,
                        message: format!("the answer does not fit in a message ({e})"),
                    },
                };
                match failed.encode() {
                    Ok(b) => b,
                    Err(_) => return false,
                }
            }
        };
        match send(
            c.fd.as_raw_fd(),
            &bytes,
            MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
        ) {
            Ok(_) => true,
            Err(e) => {
                log::warn!(
                    "client {id} (pid {}) is not reading ({e}); dropping it",
                    c.pid
                );
                false
            }
        }
    }

    /// Answers a client; one that cannot be answered is dropped.
    fn reply(&mut self, id: u64, txid: u32, body: Reply) {
        if !self.send(id, txid, body) {
            self.drop_client(id);
        }
    }

    /// Tells client `id`, which speaks controller protocol `version`, that
    /// this manager does not, and closes its connection. A client of an
    /// older version is told in a message it can read.
    fn refuse_version(&mut self, id: u64, version: u16) {
        let pid = self.clients.get(&id).map_or(0, |c| c.pid);
        throttle::BAD_REQUEST.warn(format_args!(
            "client {id} (pid {pid}) speaks controller protocol version {version}, not {}; \
             disconnecting it",
            trace_common::controller::VERSION
        ));
        let message = format!(
            "bad request: this trace manager speaks controller protocol version {}, the client \
             version {version}: use the trace-cli built with the trace-manager that runs (after \
             an upgrade, restart the daemon)",
            trace_common::controller::VERSION
        );
        let failed = Envelope {
            txid: 0,
            body: Reply::Failed {
                fatal: true,
                code: fail::MALFORMED,
                message,
            },
        };
        match (failed.encode_failed_as(version), self.clients.get(&id)) {
            (Some(bytes), Some(c)) => {
                let _ = send(
                    c.fd.as_raw_fd(),
                    &bytes,
                    MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
                );
                self.drop_client(id);
            }
            _ => {
                let Reply::Failed { message, .. } = failed.body else {
                    return;
                };
                self.fail(id, 0, true, fail::MALFORMED, message);
            }
        }
    }

    fn fail(&mut self, id: u64, txid: u32, fatal: bool, code: u32, mut message: String) {
        if message.len() > trace_common::controller::MAX_STRING_LEN {
            let mut end = trace_common::controller::MAX_STRING_LEN - 3;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push_str("...");
        }
        let sent = self.send(
            id,
            txid,
            Reply::Failed {
                fatal,
                code,
                message,
            },
        );
        if fatal || !sent {
            if let Some(c) = self.clients.get(&id) {
                let _ =
                    nix::sys::socket::shutdown(c.fd.as_raw_fd(), nix::sys::socket::Shutdown::Both);
            }
            self.drop_client(id);
        }
    }

    /// Moves the session to `state` and tells its owner.
    fn set_state(&mut self, state: SessionState) {
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
    fn abort_session(&mut self, why: &str) {
        let Some(a) = self.active.as_mut() else {
            return;
        };
        if a.aborted.is_some() {
            return;
        }
        let why = match a.session.out().get_ref().failure() {
            Some(e) => e.to_string(),
            None => why.to_owned(),
        };
        log::error!("session aborted: {why}");
        a.aborted = Some(why.clone());
        let owner = a.owner;
        self.fail(owner, 0, false, fail::ABORTED, why);
    }

    fn is_terminating(&self, id: u64) -> bool {
        self.terminating.as_ref().is_some_and(|t| t.owner == id)
    }

    fn owns_session(&self, id: u64) -> bool {
        self.active.as_ref().is_some_and(|a| a.owner == id)
    }

    fn on_request(&mut self, id: u64, txid: u32, req: Request, fds: Vec<OwnedFd>) {
        if !fds.is_empty() && !matches!(req, Request::InitializeTracing(_)) {
            self.fail(
                id,
                txid,
                true,
                fail::MALFORMED,
                "only InitializeTracing carries a descriptor".into(),
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
                        let providers = self.registry.stats();
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

    fn initialize(&mut self, id: u64, txid: u32, config: TraceConfig, mut fds: Vec<OwnedFd>) {
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
        if let Some(owner) = self.active.as_ref().map(|a| a.owner).or(terminating) {
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
        let kernel_bytes = kernel_memory(&config);
        if kernel_bytes > budget {
            self.fail(
                id,
                txid,
                false,
                fail::BAD_CONFIG,
                format!(
                    "a kernel buffer of {} is more than the session's memory budget of {} \
                     (trace-manager --session-memory-budget; by default a quarter of the \
                     machine's memory)",
                    mib(kernel_bytes),
                    mib(budget)
                ),
            );
            return;
        }
        let output = fds.pop().expect("one descriptor, checked above");
        let creds = self.clients.get(&id).and_then(|c| c.creds.clone());
        match self.new_session(&config, output, creds.as_ref()) {
            Ok(session) => {
                let userspace = userspace_config(&config, budget - kernel_bytes);
                let categories = userspace.categories.clone();
                self.registry.initialize_all(userspace);
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
                });
                self.set_state(SessionState::Initialized);
                self.reply(id, txid, Reply::Initialized);
            }
            Err(message) => self.fail(id, txid, false, fail::BAD_CONFIG, message),
        }
    }

    /// The session `config` asks for, writing to `output`, for the client
    /// `creds` describes.
    fn new_session(
        &self,
        config: &TraceConfig,
        output: OwnedFd,
        creds: Option<&crate::creds::ClientCreds>,
    ) -> Result<Session<Sink>, String> {
        let (uprobes, usdt) = resolve_probes(config, creds)?;
        let sink = Sink::new(output, config.defer_transfer)
            .map_err(|e| format!("setting up the output: {e}"))?;
        Session::new(
            RecordConfig {
                categories: config.categories.clone(),
                buffer_bytes: usize::try_from(kernel_buffer_bytes(config)).unwrap_or(usize::MAX),
                pids: config.pids.clone(),
                uprobes,
                usdt,
                kernel_mode: config.kernel_buffering_mode,
            },
            // The sink batches records itself, in whole records.
            sink,
        )
        .map_err(|e| e.to_string())
    }

    fn start(&mut self, id: u64, txid: u32, options: StartOptions) {
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
        if let Err(e) = a.session.start(options.buffer_disposition, &additional) {
            let before = a.before_start;
            let message = match e {
                RecordError::Kernel(k @ crate::kernel::KernelError::Permission { .. }) => {
                    format!("{k}; the trace manager needs root (or CAP_BPF and CAP_PERFMON)")
                }
                other => other.to_string(),
            };
            self.set_state(before);
            self.fail(id, txid, false, fail::START_FAILED, message);
            return;
        }
        self.registry
            .start_all(options.buffer_disposition, &additional);
        if let Some(a) = self.active.as_mut() {
            a.pending_start = Some((txid, tokio::time::Instant::now() + timeout));
        }
        self.finish_start(false);
    }

    fn stop(&mut self, id: u64, txid: u32, write_results: bool) {
        let state = match self.active.as_ref() {
            Some(a) if a.owner == id => a.state,
            _ if self.is_terminating(id) => SessionState::Terminating,
            _ => {
                self.reply(id, txid, Reply::StopResult(Err(StopError::NotInitialized)));
                return;
            }
        };
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
    fn begin_stop(&mut self, txid: Option<u32>, write_results: bool, terminate: Option<u32>) {
        self.set_state(SessionState::Stopping);
        self.registry.begin_stop();
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
    fn finish_stop(&mut self) {
        let Some(a) = self.active.as_mut() else {
            return;
        };
        let Some(pending) = &a.pending_stop else {
            return;
        };
        if !(self.registry.all_stopped() || tokio::time::Instant::now() >= pending.deadline) {
            return;
        }
        let Some(pending) = a.pending_stop.take() else {
            return;
        };
        let mut failed = None;
        if let Err(e) = self
            .registry
            .finish_stop(a.session.out(), pending.write_results)
        {
            failed = Some(format!("writing providers' records: {e}"));
        }
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
    fn results(&mut self) -> StopResult {
        let providers = self.registry.stats();
        self.results_with(&providers)
    }

    /// The session's numbers, with `providers`' numbers.
    fn results_with(&mut self, providers: &[crate::userspace::ProviderStats]) -> StopResult {
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

    fn terminate(&mut self, id: u64, txid: u32) {
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
    fn finish_terminate(&mut self, id: u64, txid: u32) {
        self.set_state(SessionState::Terminating);
        let Some(mut a) = self.active.take() else {
            return;
        };
        let mut providers_failed = None;
        let providers = match self.registry.terminate(a.session.out()) {
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

/// The memory the kernel provider's ring buffers will take for `config`:
/// none without a kernel category or probe, else each online CPU's ring
/// (rounded up to a power of two pages, as the kernel wants).
fn kernel_memory(config: &TraceConfig) -> u64 {
    let kernel = !crate::session::kernel_categories(&config.categories).is_empty()
        || !config.uprobes.is_empty()
        || !config.usdt.is_empty();
    if !kernel {
        return 0;
    }
    let cpus = aya::util::online_cpus().map_or(1, |c| c.len().max(1));
    let bytes = usize::try_from(kernel_buffer_bytes(config)).unwrap_or(usize::MAX);
    (crate::kernel::ring_size(bytes / cpus) as u64).saturating_mul(cpus as u64)
}

/// The kernel ring buffers' bytes `config` asks for, within what the
/// kernel provider accepts.
fn kernel_buffer_bytes(config: &TraceConfig) -> u64 {
    config.kernel_buffer_bytes.clamp(4096, 4 << 30)
}

/// What userspace providers get from `config`, sharing `budget` bytes.
fn userspace_config(config: &TraceConfig, budget: u64) -> UserspaceConfig {
    let mb = |m: u32| u64::from(m.clamp(1, 4096)) << 20;
    UserspaceConfig {
        mode: config.buffering_mode,
        buffer_bytes: mb(config.buffer_size_megabytes_hint),
        overrides: config
            .provider_specs
            .iter()
            .filter(|s| s.buffer_size_megabytes_hint > 0)
            .map(|s| (s.name.clone(), mb(s.buffer_size_megabytes_hint)))
            .collect(),
        category_overrides: config
            .provider_specs
            .iter()
            .filter(|s| !s.categories.is_empty())
            .map(|s| (s.name.clone(), userspace_categories(&s.categories)))
            .collect(),
        categories: userspace_categories(&config.categories),
        budget,
    }
}

/// Whether providers accept `category` as a name (kernel categories are
/// not theirs).
fn usable_category(category: &str) -> bool {
    if category.starts_with("kernel:") {
        return false;
    }
    let ok =
        !category.is_empty() && category.len() <= trace_common::provider::MAX_CATEGORY_NAME_LEN;
    if !ok {
        log::warn!("category {category:?} is not a name providers accept; discarded");
    }
    ok
}

/// The categories of `all` that go to userspace providers, at most
/// [`MAX_CATEGORIES`] of them; extras are discarded.
fn userspace_categories(all: &[String]) -> Vec<String> {
    let mut list: Vec<String> = all.iter().filter(|c| usable_category(c)).cloned().collect();
    if list.len() > MAX_CATEGORIES {
        log::warn!(
            "{} categories past the limit of {MAX_CATEGORIES} discarded",
            list.len() - MAX_CATEGORIES
        );
        list.truncate(MAX_CATEGORIES);
    }
    list
}

/// A session's resolved `--uprobe` probes and `--usdt` sites.
type Probes = (
    Vec<crate::kernel::uprobes::ResolvedProbe>,
    Vec<crate::kernel::usdt::UsdtSite>,
);

/// Every `--uprobe` and `--usdt` probe of `config`, resolved with the
/// rights of the client `creds` describes (on a thread that took them, see
/// [`crate::creds`]): its files are opened as the client would open them,
/// and a file it cannot read is only said to be unreadable.
fn resolve_probes(
    config: &TraceConfig,
    creds: Option<&crate::creds::ClientCreds>,
) -> Result<Probes, String> {
    if config.uprobes.is_empty() && config.usdt.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let creds = creds.ok_or("probes are refused: who the client is is unknown")?;
    let pids = config.pids.clone().unwrap_or_default();
    crate::creds::run_as(creds, || {
        let uprobes = config
            .uprobes
            .iter()
            .map(|spec| crate::kernel::uprobes::resolve_in(spec, &pids))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?
            .into_iter()
            .flatten()
            .collect();
        Ok((uprobes, resolve_usdt(&config.usdt, &pids)?))
    })
    .map_err(|e| format!("probes are refused: {e}"))?
}

/// Every site of every `--usdt` probe in the `pids` processes (every
/// process when empty), each spec matching at least one.
fn resolve_usdt(
    specs: &[String],
    pids: &[u32],
) -> Result<Vec<crate::kernel::usdt::UsdtSite>, String> {
    let mut sites: Vec<crate::kernel::usdt::UsdtSite> = Vec::new();
    for spec in specs {
        let found = crate::kernel::usdt::resolve_in(spec, pids).map_err(|e| e.to_string())?;
        log::info!("--usdt {spec}: {} sites", found.len());
        for site in found {
            // A site two specs match is placed once (else each pass would
            // be recorded twice), as the first spec says.
            if let Some(first) = sites
                .iter()
                .find(|s| s.file == site.file && s.offset == site.offset && s.pids == site.pids)
            {
                log::warn!(
                    "--usdt {spec}: {} is already recorded as --usdt {}",
                    site.event_name(),
                    first.spec
                );
                continue;
            }
            sites.push(site);
        }
    }
    Ok(sites)
}

/// One datagram and the descriptors that came with it; `None` at the end.
fn receive(fd: &OwnedFd, buf: &mut [u8]) -> nix::Result<Option<(usize, Vec<OwnedFd>)>> {
    let mut cmsg = nix::cmsg_space!([std::os::fd::RawFd; 4]);
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let msg = recvmsg::<()>(
        fd.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT,
    )?;
    let mut fds = Vec::new();
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(raw) = c {
            // SAFETY: SCM_RIGHTS gave us these descriptors; we own them now.
            fds.extend(
                raw.into_iter()
                    .map(|f| unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(f) }),
            );
        }
    }
    let truncated = msg.flags.contains(MsgFlags::MSG_TRUNC);
    match msg.bytes {
        0 => Ok(None),
        // Too long for the protocol: handed on truncated, refused there.
        n if truncated => Ok(Some((n.min(buf.len()), fds))),
        n => Ok(Some((n, fds))),
    }
}

/// Reads a new connection's first message and hands the connection on as
/// a provider or a client.
///
/// `slot` holds the connection's place among the manager's connections
/// until it closes. Nothing is allocated for the message until the
/// connection is readable, so a connection that says nothing costs only
/// its task and descriptor.
async fn hello(id: u64, fd: OwnedFd, pid: i32, slot: Slot, tx: mpsc::UnboundedSender<Event>) {
    let Ok(afd) = async_fd(fd) else { return };
    let mut buf = Vec::new();
    let first = tokio::time::timeout(HELLO_TIMEOUT, async {
        loop {
            let mut g = afd.readable().await?;
            if buf.is_empty() {
                buf.resize(MAX_MESSAGE_BYTES, 0);
            }
            match g.try_io(|a| receive(a.get_ref(), &mut buf).map_err(std::io::Error::from)) {
                Ok(r) => return r,
                Err(_would_block) => continue,
            }
        }
    })
    .await;
    let fd = afd.into_inner();
    let (n, fds) = match first {
        Ok(Ok(Some(m))) => m,
        Ok(Ok(None)) => return,
        _ => {
            throttle::IDLE.warn(format_args!(
                "connection from pid {pid} said nothing in time; closing it"
            ));
            return;
        }
    };
    if is_controller_message(&buf[..n]) {
        let Ok(reply_fd) = fd.try_clone() else { return };
        let _ = tx.send(Event::Client {
            id,
            fd: reply_fd,
            pid,
        });
        let _ = tx.send(Event::Request {
            id,
            bytes: buf[..n].to_vec(),
            fds,
        });
        drop(buf);
        read_client_loop(id, fd, tx).await;
        drop(slot);
        return;
    }
    match ProviderMessage::decode(&buf[..n]) {
        Ok(register) => {
            let _ = tx.send(Event::Provider {
                fd,
                pid,
                register,
                slot,
            });
        }
        Err(e) => {
            throttle::BAD_HELLO.warn(format_args!("connection from pid {pid}: {e}; closing it"))
        }
    }
}

/// Announces a client connected through a socket pair, then reads it.
async fn read_client(id: u64, fd: OwnedFd, pid: i32, tx: mpsc::UnboundedSender<Event>) {
    let Ok(reply_fd) = fd.try_clone() else {
        let _ = tx.send(Event::Closed { id });
        return;
    };
    let _ = tx.send(Event::Client {
        id,
        fd: reply_fd,
        pid,
    });
    read_client_loop(id, fd, tx).await;
}

/// Hands every message of client `id` to the loop, then its closing.
async fn read_client_loop(id: u64, fd: OwnedFd, tx: mpsc::UnboundedSender<Event>) {
    if let Ok(afd) = async_fd(fd) {
        // Taken only while a message is read: an idle client holds none.
        let mut buf = Vec::new();
        loop {
            let Ok(mut g) = afd.readable().await else {
                break;
            };
            if buf.is_empty() {
                buf.resize(MAX_MESSAGE_BYTES, 0);
            }
            match g.try_io(|a| receive(a.get_ref(), &mut buf).map_err(std::io::Error::from)) {
                Ok(Ok(Some((n, fds)))) => {
                    let event = Event::Request {
                        id,
                        bytes: buf[..n].to_vec(),
                        fds,
                    };
                    buf = Vec::new();
                    if tx.send(event).is_err() {
                        return;
                    }
                }
                Ok(Ok(None)) | Ok(Err(_)) => break,
                Err(_would_block) => continue,
            }
        }
    }
    let _ = tx.send(Event::Closed { id });
}
