//! The registry of providers: registration, and what their sockets say.

use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::sys::socket::{MsgFlags, recv, send};
use tokio::sync::mpsc;
use trace_common::provider::control::{ManagerMessage, ProviderMessage};
use trace_common::provider::fifo::{FromManager, FromProvider, PACKET_BYTES, Packet};
use trace_common::provider::{BufferDisposition, BufferingMode};

use super::collect::{self, Rolling};
use super::provider::{Phase, Provider, abort, start_one};
use super::{
    Note, NoteKind, PROVIDER_QUOTA, ProviderInfo, ProviderStats, UserspaceConfig, UserspaceError,
    async_fd,
};
use crate::limits::Slot;
use crate::output::FxtStream;

/// The registered userspace providers, and their part in the session.
pub struct Registry {
    pub(super) config: Option<UserspaceConfig>,
    pub(super) providers: Vec<Provider>,
    pub(super) notes_tx: mpsc::UnboundedSender<Note>,
    pub(super) notes_rx: mpsc::UnboundedReceiver<Note>,
    pub(super) phase: Phase,
    /// The last start's disposition and categories, for providers that
    /// register while tracing runs.
    pub(super) start: (BufferDisposition, Vec<String>),
    pub(super) next_id: u32,
    pub(super) next_trace: u64,
    /// Alerts raised and not yet taken: (provider name, alert name).
    pub(super) alerts: Vec<(String, String)>,
    /// Bytes of provider buffers given out in this session.
    pub(super) granted: u64,
    /// The share of what they asked for that providers get this session
    /// (1 when everything fits).
    pub(super) share: f64,
    /// The numbers of providers that went away during the session, their
    /// records saved and their buffers given back (the newest
    /// [`MAX_DEPARTED`]).
    pub(super) departed: std::collections::VecDeque<ProviderStats>,
}

/// The most providers gone during a session whose numbers a stop result
/// lists.
pub(super) const MAX_DEPARTED: usize = 4096;

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// An empty registry; provider ids start at 2 (1 is the kernel's).
    pub fn new() -> Registry {
        let (notes_tx, notes_rx) = mpsc::unbounded_channel();
        Registry {
            config: None,
            providers: Vec::new(),
            notes_tx,
            notes_rx,
            phase: Phase::Idle,
            start: (BufferDisposition::ClearEntire, Vec::new()),
            next_id: 2,
            next_trace: 1,
            alerts: Vec::new(),
            granted: 0,
            share: 1.0,
            departed: std::collections::VecDeque::new(),
        }
    }

    /// The alerts providers raised since the last call, oldest first, as
    /// (provider name, alert name).
    pub fn take_alerts(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.alerts)
    }

    /// The registered providers.
    pub fn providers(&self) -> Vec<ProviderInfo> {
        self.providers.iter().map(|p| p.info.clone()).collect()
    }

    /// The categories providers declared, each once, sorted.
    pub fn categories(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .providers
            .iter()
            .flat_map(|p| p.info.categories.iter().cloned())
            .collect();
        all.sort();
        all.dedup();
        all
    }

    /// Registers the provider that sent `register` on `fd` and answers it.
    /// During a session it is initialized, and started if tracing runs.
    pub fn add(&mut self, fd: OwnedFd, pid: i32, register: ProviderMessage, slot: Option<Slot>) {
        let ProviderMessage::Register {
            name,
            clock,
            categories,
        } = register;
        let uid = nix::sys::socket::getsockopt(&fd, nix::sys::socket::sockopt::PeerCredentials)
            .map_or(u32::MAX, |c| c.uid());
        let mine = self.providers.iter().filter(|p| p.uid == uid).count();
        if let Err(why) = PROVIDER_QUOTA.check(uid, mine, self.providers.len()) {
            crate::service::throttle::PROVIDER_REFUSED.warn(format_args!(
                "provider {name} (pid {pid}, uid {uid}) refused: {why}"
            ));
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        let reply = ManagerMessage::Registered {
            provider_id: id,
            tracing_started: self.phase == Phase::Started,
        };
        if let Ok(bytes) = reply.encode() {
            let _ = send(
                fd.as_raw_fd(),
                &bytes,
                MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
            );
        }
        log::info!("provider {name} (pid {pid}) registered as {id}");
        let ctl_watcher = self.watch_ctl(id, &fd);
        let mut p = Provider {
            info: ProviderInfo {
                id,
                name: name.clone(),
                pid,
                state: "registered",
                categories,
            },
            uid,
            clock,
            ctl: fd,
            ctl_watcher,
            trace: None,
            aborted: false,
            gone: false,
            _slot: slot,
        };
        if matches!(
            self.phase,
            Phase::Initialized | Phase::Started | Phase::Stopped
        ) {
            match self.initialize(&mut p) {
                Err(e) => log::warn!("provider {name}: could not initialize it: {e}"),
                Ok(()) if self.phase == Phase::Started => {
                    let (disposition, extra) = self.start.clone();
                    start_one(&mut p, disposition, &extra);
                }
                Ok(()) => {}
            }
        }
        self.providers.push(p);
    }

    /// Does the streaming saves that waited for room in the output, while
    /// `room` lasts.
    pub fn resume_saves<W: Write>(
        &mut self,
        mut out: Option<&mut FxtStream<W>>,
        room: &mut u64,
    ) -> Result<(), UserspaceError> {
        for p in &mut self.providers {
            if *room == 0 {
                break;
            }
            let Some((wrapped, durable)) = p
                .trace
                .as_mut()
                .filter(|_| !p.aborted)
                .and_then(|t| t.deferred.take())
            else {
                continue;
            };
            save(p, out.as_deref_mut(), wrapped, durable, room)?;
        }
        Ok(())
    }

    /// Whether a streaming save waits for room in the output.
    pub fn saves_waiting(&self) -> bool {
        self.providers
            .iter()
            .any(|p| p.trace.as_ref().is_some_and(|t| t.deferred.is_some()))
    }

    /// Forwards hang-ups of the provider's control socket as notes.
    pub(super) fn watch_ctl(&self, id: u32, ctl: &OwnedFd) -> tokio::task::AbortHandle {
        let tx = self.notes_tx.clone();
        let ctl = ctl.try_clone().ok();
        tokio::spawn(async move {
            if let Some(ctl) = ctl.and_then(|c| async_fd(c).ok()) {
                // Providers send nothing after registering: what comes is
                // read (truncated) and ignored, so a small buffer will do
                // for a thousand idle providers.
                let mut scratch = [0u8; 64];
                loop {
                    let Ok(mut g) = ctl.readable().await else {
                        break;
                    };
                    match recv(
                        ctl.get_ref().as_raw_fd(),
                        &mut scratch,
                        MsgFlags::MSG_DONTWAIT,
                    ) {
                        Ok(0) => break,
                        Ok(_) => {} // providers send nothing after registering
                        Err(nix::Error::EAGAIN) => g.clear_ready(),
                        Err(_) => break,
                    }
                }
            }
            let _ = tx.send(Note {
                id,
                trace: 0,
                what: NoteKind::Closed,
            });
        })
        .abort_handle()
    }

    /// Forwards the provider's FIFO packets as notes.
    pub(super) fn watch_fifo(
        &self,
        id: u32,
        trace: u64,
        fifo: &OwnedFd,
    ) -> std::io::Result<tokio::task::AbortHandle> {
        let tx = self.notes_tx.clone();
        let fifo = async_fd(fifo.try_clone()?)?;
        Ok(tokio::spawn(async move {
            loop {
                let Ok(mut g) = fifo.readable().await else {
                    break;
                };
                let mut b = [0u8; PACKET_BYTES];
                let packet = match recv(fifo.get_ref().as_raw_fd(), &mut b, MsgFlags::MSG_DONTWAIT)
                {
                    Ok(PACKET_BYTES) => Packet::from_bytes(&b),
                    Ok(0) => break,
                    // A short packet: parsed as garbage, which aborts it.
                    Ok(_) => Packet::default(),
                    Err(nix::Error::EAGAIN) => {
                        g.clear_ready();
                        continue;
                    }
                    Err(_) => break,
                };
                if tx
                    .send(Note {
                        id,
                        trace,
                        what: NoteKind::Packet(packet),
                    })
                    .is_err()
                {
                    break;
                }
            }
        })
        .abort_handle())
    }

    /// The next thing a provider said. Never completes while there is
    /// nothing (the registry keeps a sender).
    pub async fn next_note(&mut self) -> Note {
        match self.notes_rx.recv().await {
            Some(n) => n,
            None => std::future::pending().await,
        }
    }

    /// Acts on a note: a provider that started, stopped, raised an alert,
    /// asked for a streaming save (collected into `out`), broke the
    /// protocol or went away. Never fails because of what a provider
    /// sends.
    ///
    /// `room` is what the output may take now before its reader is too far
    /// behind: with none left a streaming save waits
    /// ([`Registry::resume_saves`]), and the provider, its buffers full,
    /// drops its own records meanwhile (counted in its stats), rather than
    /// the session failing or the manager's memory growing.
    pub fn handle<W: Write>(
        &mut self,
        note: Note,
        mut out: Option<&mut FxtStream<W>>,
        room: &mut u64,
    ) -> Result<(), UserspaceError> {
        let mode = self.config.as_ref().map(|c| c.mode);
        let phase = self.phase;
        let Some(i) = self.providers.iter().position(|p| p.info.id == note.id) else {
            return Ok(());
        };
        let p = &mut self.providers[i];
        match note.what {
            NoteKind::Closed => {
                log::info!("provider {} (pid {}) went away", p.info.name, p.info.pid);
                p.gone = true;
                p.info.state = "disconnected";
                // Outside a session nothing of it is left to collect.
                if phase == Phase::Idle {
                    self.providers.remove(i);
                } else if let Some(mode) = mode {
                    return self.retire(i, mode, out);
                }
            }
            NoteKind::Packet(_) if p.aborted => {}
            NoteKind::Packet(_) if p.trace.as_ref().is_none_or(|t| t.serial != note.trace) => {}
            NoteKind::Packet(packet) => match FromProvider::parse(&packet) {
                Ok(FromProvider::Started { .. }) => {
                    if let Some(t) = p.trace.as_mut() {
                        t.started = true;
                        p.info.state = "started";
                    }
                }
                Ok(FromProvider::Stopped) => {
                    if let Some(t) = p.trace.as_mut() {
                        t.stopped = true;
                        p.info.state = "stopped";
                    }
                }
                Ok(FromProvider::NewThread { tid }) => {
                    // Looked up now, while the thread lives.
                    if let Some(t) = p.trace.as_mut() {
                        t.fwd.new_thread(tid);
                    }
                }
                Ok(FromProvider::Alert(name)) => {
                    log::info!("provider {} raised alert {}", p.info.name, name.as_str());
                    self.alerts
                        .push((p.info.name.clone(), name.as_str().to_owned()));
                }
                Ok(FromProvider::SaveBuffer {
                    wrapped_count,
                    durable_data_end,
                }) => {
                    let Some(t) = p.trace.as_mut() else {
                        return Ok(());
                    };
                    if mode != Some(BufferingMode::Streaming) {
                        log::warn!(
                            "provider {} asked for a save outside streaming mode",
                            p.info.name
                        );
                        return Ok(());
                    }
                    // One deferred and another asked for: the first is
                    // done now, whatever the room.
                    if let Some((wrapped, durable)) = t.deferred.take() {
                        let mut unlimited = u64::MAX;
                        save(p, out.as_deref_mut(), wrapped, durable, &mut unlimited)?;
                    }
                    let Some(t) = p.trace.as_mut() else {
                        return Ok(());
                    };
                    let expected = t.last_saved.map_or(0, |n| n.wrapping_add(1));
                    let dlimit = trace_common::provider::buffer::Layout::new(
                        BufferingMode::Streaming,
                        t.buffer.len as u64,
                    )
                    .ok();
                    let ok = wrapped_count == expected
                        && durable_data_end.is_multiple_of(8)
                        && durable_data_end >= 16
                        && dlimit.is_some_and(|l| durable_data_end <= l.durable)
                        && durable_data_end >= t.last_durable;
                    if !ok {
                        abort(p, "an out-of-order save request");
                        return Ok(());
                    }
                    save(p, out, wrapped_count, durable_data_end, room)?;
                }
                Err(e) => abort(p, &e.to_string()),
            },
        }
        Ok(())
    }

    /// Takes provider `i`, gone during a session, off the books: what its
    /// buffer holds that was not written yet is written into `out` now (as
    /// a stop would write it), then its buffer goes back to the session's
    /// memory budget and its place in the registry is freed; its numbers
    /// stay for the stop result. Without an output to write into, it is
    /// kept until the session ends, as before.
    fn retire<W: Write>(
        &mut self,
        i: usize,
        mode: BufferingMode,
        out: Option<&mut FxtStream<W>>,
    ) -> Result<(), UserspaceError> {
        let phase = self.phase;
        let p = &mut self.providers[i];
        if let Some(t) = p.trace.as_mut() {
            // Started: records since the last save; stopped: those no stop
            // wrote yet.
            let unwritten = phase == Phase::Started || t.unwritten;
            if unwritten {
                let Some(out) = out else {
                    return Ok(());
                };
                t.collect_unwritten(out, mode)?;
            }
        }
        // Dropping it stops its watchers, unmaps its buffer and frees its
        // connection's slot.
        let mut p = self.providers.remove(i);
        if let Some(t) = p.trace.take() {
            self.granted = self.granted.saturating_sub(t.buffer.len as u64);
            if self.departed.len() >= MAX_DEPARTED {
                self.departed.pop_front();
            }
            self.departed.push_back(ProviderStats {
                id: p.info.id,
                name: std::mem::take(&mut p.info.name),
                pid: p.info.pid,
                collect: t.fwd.stats.clone(),
                started: t.started,
                aborted: p.aborted || !t.stopped,
            });
            t.watcher.abort();
        }
        Ok(())
    }
}

/// Collects the half of `p`'s streaming buffer its save request `wrapped`
/// names into `out` and acknowledges it, while `room` is left (the save's
/// size is taken from it: one save may go past it, by a buffer at most);
/// else the save waits (`Trace::deferred`).
fn save<W: Write>(
    p: &mut Provider,
    out: Option<&mut FxtStream<W>>,
    wrapped: u32,
    durable_end: u64,
    room: &mut u64,
) -> Result<(), UserspaceError> {
    let Some(t) = p.trace.as_mut() else {
        return Ok(());
    };
    // At most a rolling half and the durable part.
    let size = t.buffer.len as u64 / 2 + durable_end;
    if out.is_some() && *room == 0 {
        if t.deferred.is_none() {
            log::debug!(
                "provider {}: its save {wrapped} waits for the output's reader",
                p.info.name
            );
        }
        t.deferred = Some((wrapped, durable_end));
        return Ok(());
    }
    *room = room.saturating_sub(size);
    if let Some(out) = out {
        let snap = t.buffer.snapshot(BufferingMode::Streaming);
        collect::collect(
            out,
            &mut t.fwd,
            &snap,
            BufferingMode::Streaming,
            Rolling::Save {
                wrapped,
                durable_end,
            },
        )?;
    }
    t.last_saved = Some(wrapped);
    t.last_durable = durable_end;
    let reply = FromManager::BufferSaved {
        wrapped_count: wrapped,
        durable_data_end: durable_end,
    }
    .to_packet()
    .to_bytes();
    if send(
        t.fifo.as_raw_fd(),
        &reply,
        MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
    )
    .is_err()
    {
        abort(p, "a full FIFO");
    }
    Ok(())
}
