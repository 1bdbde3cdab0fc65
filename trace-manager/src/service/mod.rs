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

use std::collections::{HashMap, VecDeque};
use std::io::BufWriter;
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
use trace_common::provider::control::ProviderMessage;

use crate::session::{RecordConfig, RecordError, Session};
pub use crate::userspace::Listener;
use crate::userspace::{Registry, UserspaceConfig, UserspaceError, async_fd};
pub use sink::Sink;

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
}

/// The one session, and who owns it.
struct Active {
    owner: u64,
    state: SessionState,
    config: TraceConfig,
    session: Session<BufWriter<Sink>>,
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
        })
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
                        let id = self.next_client;
                        self.next_client += 1;
                        tokio::spawn(hello(id, fd, pid, self.events_tx.clone()));
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
            Event::Provider { fd, pid, register } => self.registry.add(fd, pid, register),
            Event::Client { id, fd, pid } => {
                log::debug!("client {id} (pid {pid}) connected");
                self.clients.insert(id, Client { fd, pid });
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
                    Err(e) => {
                        log::warn!("client {id}: {e}; disconnecting it");
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
        let Some(c) = self.clients.get(&id) else {
            return false;
        };
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

    /// Marks the session as failed: its stop reports ABORTED.
    fn abort_session(&mut self, why: &str) {
        if let Some(a) = self.active.as_mut()
            && a.aborted.is_none()
        {
            log::error!("session aborted: {why}");
            a.aborted = Some(why.to_owned());
        }
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
                    Err(e) => self.fail(
                        id,
                        txid,
                        false,
                        fail::OTHER,
                        format!("following process {pid}: {e}"),
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
        let output = fds.pop().expect("one descriptor, checked above");
        match self.new_session(&config, output) {
            Ok(session) => {
                let userspace = userspace_config(&config);
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

    /// The session `config` asks for, writing to `output`.
    fn new_session(
        &self,
        config: &TraceConfig,
        output: OwnedFd,
    ) -> Result<Session<BufWriter<Sink>>, String> {
        let resolve_pids = config.pids.clone().unwrap_or_default();
        let uprobes = config
            .uprobes
            .iter()
            .map(|spec| crate::uprobes::resolve_in(spec, &resolve_pids))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?
            .into_iter()
            .flatten()
            .collect();
        let usdt = resolve_usdt(&config.usdt, &resolve_pids)?;
        let sink = Sink::new(output, config.defer_transfer)
            .map_err(|e| format!("setting up the output: {e}"))?;
        Session::new(
            RecordConfig {
                categories: config.categories.clone(),
                buffer_bytes: usize::try_from(config.kernel_buffer_bytes)
                    .unwrap_or(usize::MAX)
                    .clamp(4096, 4 << 30),
                pids: config.pids.clone(),
                uprobes,
                usdt,
                kernel_mode: config.kernel_buffering_mode,
            },
            BufWriter::with_capacity(64 << 10, sink),
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
        provider_stats.extend(providers.iter().map(|p| p.to_controller()));
        provider_stats.truncate(trace_common::controller::MAX_PROVIDERS);
        StopResult {
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
        let mut failed = a.aborted.clone();
        let providers = match self.registry.terminate(a.session.out()) {
            Ok(p) => p,
            Err(e) => {
                failed = Some(format!("writing providers' records: {e}"));
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
        // writes them out while the manager goes on.
        let sink = a
            .session
            .finish()
            .map_err(|e| e.to_string())
            .and_then(|(_, w)| w.into_inner().map_err(|e| e.error().to_string()));
        if let Ok(sink) = &sink {
            self.terminating = Some(Terminating {
                owner: id,
                txid,
                deadline: tokio::time::Instant::now() + DRAIN_TIMEOUT,
                cancel: sink.canceller(),
            });
        }
        if let Err(e) = &sink {
            log::info!("session state READY");
            if self.send(id, 0, Reply::StateChanged(SessionState::Ready)) {
                self.reply(
                    id,
                    txid,
                    Reply::Failed {
                        fatal: false,
                        code: fail::OTHER,
                        message: format!("writing the trace: {e}"),
                    },
                );
            }
            return;
        }
        let tx = self.events_tx.clone();
        tokio::spawn(async move {
            let written = match sink {
                Ok(sink) => tokio::task::spawn_blocking(move || sink.close())
                    .await
                    .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())))
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e),
            };
            let reply = match (written, failed) {
                (Ok(_), None) => Reply::Terminated(result),
                (Err(e), _) => Reply::Failed {
                    fatal: false,
                    code: fail::OTHER,
                    message: format!("writing the trace: {e}"),
                },
                (Ok(_), Some(why)) => Reply::Failed {
                    fatal: false,
                    code: fail::OTHER,
                    message: format!("the session aborted ({why}); the trace is incomplete"),
                },
            };
            let _ = tx.send(Event::Drained { id, txid, reply });
        });
    }
}

/// What userspace providers get from `config`.
fn userspace_config(config: &TraceConfig) -> UserspaceConfig {
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

/// Every site of every `--usdt` probe in the `pids` processes (every
/// process when empty), each spec matching at least one.
fn resolve_usdt(specs: &[String], pids: &[u32]) -> Result<Vec<crate::usdt::UsdtSite>, String> {
    let mut sites: Vec<crate::usdt::UsdtSite> = Vec::new();
    for spec in specs {
        let found = crate::usdt::resolve_in(spec, pids).map_err(|e| e.to_string())?;
        log::info!("--usdt {spec}: {} sites", found.len());
        for site in found {
            // A site two specs match is placed once (else each pass would
            // be recorded twice), as the first spec says.
            if let Some(first) = sites
                .iter()
                .find(|s| s.binary == site.binary && s.offset == site.offset && s.pids == site.pids)
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
async fn hello(id: u64, fd: OwnedFd, pid: i32, tx: mpsc::UnboundedSender<Event>) {
    let Ok(afd) = async_fd(fd) else { return };
    let mut buf = vec![0u8; MAX_MESSAGE_BYTES];
    let first = tokio::time::timeout(HELLO_TIMEOUT, async {
        loop {
            let mut g = afd.readable().await?;
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
            log::warn!("connection from pid {pid} said nothing in time; closing it");
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
        read_client_loop(id, fd, tx).await;
        return;
    }
    match ProviderMessage::decode(&buf[..n]) {
        Ok(register) => {
            let _ = tx.send(Event::Provider { fd, pid, register });
        }
        Err(e) => log::warn!("connection from pid {pid}: {e}; closing it"),
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
        let mut buf = vec![0u8; MAX_MESSAGE_BYTES];
        loop {
            let Ok(mut g) = afd.readable().await else {
                break;
            };
            match g.try_io(|a| receive(a.get_ref(), &mut buf).map_err(std::io::Error::from)) {
                Ok(Ok(Some((n, fds)))) => {
                    let event = Event::Request {
                        id,
                        bytes: buf[..n].to_vec(),
                        fds,
                    };
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
