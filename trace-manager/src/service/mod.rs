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
//! gets a fatal [`Reply::Failed`](trace_common::controller::Reply::Failed)
//! and is disconnected; if it owned the
//! session, the session is aborted. Nothing a client or provider sends
//! stops the manager.
//!
//! - `connections`: accepting within the limits, telling providers from
//!   clients, reading and answering clients.
//! - `requests`: the controller's requests, alerts and their watchers.
//! - `state`: the session state machine (initialize, start, stop,
//!   terminate).
//! - `flight`: the daemon's flight recorder and its snapshots.
//! - `config`: a session's configuration mapped to the kernel and
//!   userspace providers', within the memory budget.
//! - `sink`: the output thread.
//! - `throttle`: warnings about misbehaving connections, at most one a
//!   tick.

mod config;
mod connections;
mod event;
mod flight;
mod paced;
mod requests;
mod setup;
mod sink;
mod state;
pub(crate) mod throttle;

use crate::limits::{Connections, Limits};
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::time::Duration;

use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
use thiserror::Error;
use tokio::sync::mpsc;
use trace_common::controller::SessionState;

pub use crate::userspace::Listener;
use crate::userspace::{Registry, UserspaceError};
use connections::{Client, read_client};
use event::Event;
pub use flight::FlightConfig;
pub use sink::{OutputFailure, Sink};
use state::{Active, Terminating};

/// How often the output is flushed and the start timeout looked at.
const TICK: Duration = Duration::from_millis(250);

/// How long the kernel is left unread when the session's reader is far
/// behind ([`Sink::behind`]), before looking again.
const READER_WAIT: Duration = Duration::from_millis(10);

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

/// The trace manager: the provider registry and at most one session.
pub struct Manager {
    listener: Option<Listener>,
    embedded: bool,
    registry: Registry,
    clients: HashMap<u64, Client>,
    next_client: u64,
    active: Option<Active>,
    /// The daemon's flight recorder, beside any session.
    flight: Option<flight::Flight>,
    events_tx: mpsc::UnboundedSender<Event>,
    events_rx: mpsc::UnboundedReceiver<Event>,
    /// The client whose disconnection ends an embedded manager.
    local: Option<u64>,
    /// A session whose output is still being written out: it is
    /// TERMINATING, and no other can begin.
    terminating: Option<Terminating>,
    /// The client whose InitializeTracing is being set up on a thread
    /// ([`setup`]): the session's place is taken.
    preparing: Option<u64>,
    /// Snapshots being written, by client.
    snapshots: HashMap<u64, usize>,
    /// Memory and connection limits.
    limits: Limits,
    /// The connections open, by user.
    connections: Connections,
    /// Connections refused since the last log line about it.
    refused: u64,
    /// The most connections open since memory was last handed back.
    peak_connections: usize,
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
            flight: None,
            events_tx,
            events_rx,
            local: None,
            terminating: None,
            preparing: None,
            snapshots: HashMap::new(),
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
                        // A reader far behind gets time to catch up: the
                        // kernel is not read meanwhile (its rings fill and
                        // it counts what it drops).
                        if a.session.out_ref().get_ref().behind() {
                            tokio::time::sleep(READER_WAIT).await;
                            return Ok(false);
                        }
                        a.session.readable().await.map(|()| true)
                    }
                    _ => std::future::pending().await,
                }
            };
            let flight = async {
                match self.flight.as_mut() {
                    Some(f) if f.failed.is_none() => f.session.readable().await,
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
                    let r = r.and_then(|read| match self.active.as_mut() {
                        Some(a) if read => a.session.drain(),
                        _ => Ok(()),
                    });
                    if let Err(e) = r {
                        self.abort_session(&format!("reading the kernel provider: {e}"));
                    }
                    self.kernel_triggers_fired();
                }
                r = flight => {
                    let r = r.and_then(|()| match self.flight.as_mut() {
                        Some(f) => f.session.drain(),
                        None => Ok(()),
                    });
                    self.flight_drained(r);
                }
                note = self.registry.next_note() => {
                    if self.flight_holds_providers() {
                        self.flight_provider_note(note);
                        self.after_provider_news();
                        continue;
                    }
                    let mut room = self
                        .active
                        .as_ref()
                        .map_or(u64::MAX, |a| a.session.out_ref().get_ref().room());
                    let out = self.active.as_mut().map(|a| a.session.out());
                    if let Err(e) = self.registry.handle(note, out, &mut room) {
                        self.abort_session(&format!("writing a provider's records: {e}"));
                    }
                    self.after_provider_news();
                }
                conn = accept => self.on_connection(conn).await,
                _ = tick.tick() => self.on_tick(),
            }
        }
    }

    fn on_tick(&mut self) {
        // How many bad or idle connections were not logged one by one.
        throttle::flush();
        self.log_refused();
        // Many connections closed since the last look: hand their memory
        // back to the system (the allocator keeps freed memory otherwise).
        let open = self.connections.total();
        if open + 256 <= self.peak_connections {
            // glibc's allocator only; musl's returns freed memory itself.
            #[cfg(target_env = "gnu")]
            // SAFETY: malloc_trim only releases free memory of the heap.
            unsafe {
                libc::malloc_trim(0)
            };
            self.peak_connections = open;
        }
        self.peak_connections = self.peak_connections.max(open);
        self.give_up_draining();
        if let Some(a) = self.active.as_mut()
            && a.aborted.is_none()
            && let Err(e) = a.session.flush()
        {
            self.abort_session(&format!("writing the trace: {e}"));
        }
        // Providers' saves that waited for the reader, now it has caught up.
        if let Some(a) = self.active.as_mut()
            && a.aborted.is_none()
            && self.registry.saves_waiting()
        {
            let mut room = a.session.out_ref().get_ref().room();
            if room > 0
                && let Err(e) = self.registry.resume_saves(Some(a.session.out()), &mut room)
            {
                self.abort_session(&format!("writing a provider's records: {e}"));
            }
        }
        self.flight_tick();
        self.finish_start(false);
        self.finish_stop();
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
            Event::Client { id, fd, pid } => self.add_client(id, fd, pid),
            Event::Request { id, bytes, fds } => self.on_message(id, bytes, fds),
            Event::Closed { id } => {
                self.drop_client(id);
                if Some(id) == self.local {
                    return true;
                }
            }
            Event::Drained { id, txid, reply } => return self.on_drained(id, txid, reply),
            Event::SnapshotWritten { id, txid, reply } => {
                self.snapshot_done(id);
                self.reply(id, txid, reply);
            }
            Event::Prepared { id, txid, prepared } => self.prepared(id, txid, prepared),
            Event::Loaded { id, txid, kernel } => self.loaded(id, txid, kernel),
        }
        false
    }
}
