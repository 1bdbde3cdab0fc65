//! Userspace trace providers: the registration socket, each provider's
//! shared buffer and FIFO, and collecting their records into the output.
//!
//! A provider connects to the registration socket (`SOCK_SEQPACKET`) and
//! registers; its pid comes from `SO_PEERCRED`. For a trace the manager
//! creates a memfd of the configured size, seals it (no shrinking, no
//! growing, no more seals) so the provider cannot make the manager's mapping
//! fault, maps it read-only, and passes it with the provider's end of a
//! `SOCK_SEQPACKET` socket pair that carries the 16-byte FIFO packets.
//!
//! Socket permissions: when a group named `tracing` exists, the socket is
//! `0660 root:tracing` (and a folder the manager creates `0750`), so members
//! of that group can have their programs traced and nobody else can connect;
//! without that group the socket is `0600`, for root's programs only.

pub mod collect;
mod socket;

use std::io::{IoSlice, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use nix::sys::socket::{
    AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType, recv, send, sendmsg, socketpair,
};
use thiserror::Error;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Registers an owned descriptor with the reactor.
pub(crate) fn async_fd(fd: OwnedFd) -> std::io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: an OwnedFd is an open descriptor that stays open, and its
    // as_raw_fd never changes, for as long as the AsyncFd owns it.
    unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.map_err(|e| e.into_parts().1)
}
use tokio::sync::mpsc;
use trace_common::provider::clock::ClockKind;
use trace_common::provider::control::{ManagerMessage, ProviderMessage};
use trace_common::provider::fifo::{FromManager, FromProvider, PACKET_BYTES, Packet};
use trace_common::provider::{BufferDisposition, BufferingMode};

use crate::limits::{MIN_PROVIDER_BUFFER, Slot, mib};
use crate::output::{FxtStream, OutputError};
pub use collect::CollectStats;
use collect::{Forwarder, Rolling};
pub use socket::Listener;
use trace_common::provider::buffer::CHUNK_BYTES;

/// Why the userspace side failed.
#[derive(Debug, Error)]
pub enum UserspaceError {
    /// The registration socket could not be set up.
    #[error("registration socket {path}: {source}")]
    Socket {
        /// The socket path.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// Another manager listens on the socket.
    #[error("another trace manager is listening on {0}")]
    Busy(PathBuf),
    /// The output could not be written.
    #[error(transparent)]
    Output(#[from] OutputError),
}

/// The manager's socket path: `TRACE_MANAGER_SOCKET`, else the default.
pub fn socket_path() -> PathBuf {
    std::env::var_os(trace_common::provider::SOCKET_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(trace_common::provider::DEFAULT_SOCKET_PATH))
}

/// What to trace in userspace providers during a session.
#[derive(Clone, Debug)]
pub struct UserspaceConfig {
    /// Buffering mode of every provider.
    pub mode: BufferingMode,
    /// Buffer size of every provider, in bytes.
    pub buffer_bytes: u64,
    /// Buffer sizes of providers by name.
    pub overrides: Vec<(String, u64)>,
    /// Categories of providers by name, instead of `categories`.
    pub category_overrides: Vec<(String, Vec<String>)>,
    /// Enabled categories (empty: all), as sent to providers.
    pub categories: Vec<String>,
    /// Bytes the providers' buffers may take together in this session (see
    /// [`crate::limits`]). When the providers registered at the start ask
    /// for more together, each gets the same share of what it asked for
    /// (never less than [`MIN_PROVIDER_BUFFER`]); a provider that registers
    /// later gets the same share if it fits, else what is left; when not
    /// even [`MIN_PROVIDER_BUFFER`] is left, a provider is left out of the
    /// session.
    pub budget: u64,
}

/// A registered provider, as listed by `trace-cli providers`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderInfo {
    /// Its id in traces.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// Its process id, from the socket.
    pub pid: i32,
    /// Where it is in the protocol.
    pub state: &'static str,
    /// The categories it declared when it registered.
    pub categories: Vec<String>,
}

/// A provider's numbers in a session.
#[derive(Clone, Debug)]
pub struct ProviderStats {
    /// Its id in traces.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// Its process id.
    pub pid: i32,
    /// What collection did.
    pub collect: CollectStats,
    /// It answered the last start.
    pub started: bool,
    /// It violated the protocol, or went away, and was disconnected.
    pub aborted: bool,
}

impl ProviderStats {
    /// The numbers as the controller protocol carries them.
    pub fn to_controller(&self) -> trace_common::controller::ProviderStats {
        trace_common::controller::ProviderStats {
            id: self.id,
            name: self.name.clone(),
            pid: self.pid,
            records_written: self.collect.records,
            bytes_written: self.collect.bytes,
            records_dropped: self.collect.dropped + self.collect.rejected,
            buffer_wrapped_count: self.collect.wraps,
            percentage_durable_buffer_used: self.collect.usage_percent,
            started: self.started,
            aborted: self.aborted,
        }
    }
}

/// Something a provider's sockets said.
pub struct Note {
    id: u32,
    /// For FIFO packets: the trace they belong to (packets of an ended
    /// trace still queued are ignored).
    trace: u64,
    what: NoteKind,
}

/// The most providers registered at once; more are refused.
pub const MAX_REGISTERED: usize = 1000;

enum NoteKind {
    Packet(Packet),
    Closed,
}

struct Buffer {
    map: *const u8,
    len: usize,
    _memfd: OwnedFd,
}

// SAFETY: the mapping is read-only and owned by this struct.
unsafe impl Send for Buffer {}

impl Buffer {
    /// A private copy of the buffer (the provider may be writing it): the
    /// header and, of each part of the buffer (`mode`'s layout), the bytes
    /// up to the end of its data as that header says. The rest stays zero
    /// pages the copy never touches, so a provider that wrote little costs
    /// little, whatever the size of its buffer. The header is the
    /// provider's to write: ends are clamped to the parts' sizes here, and
    /// validated where the copy is read.
    fn snapshot(&self, mode: BufferingMode) -> Vec<u8> {
        use trace_common::provider::buffer::{HEADER_BYTES, Header, Layout};
        // Zeroed memory from the allocator: untouched pages are never
        // backed.
        let mut v = vec![0u8; self.len];
        let copy = |v: &mut Vec<u8>, from: usize, len: usize| {
            let len = len.min(self.len.saturating_sub(from));
            // SAFETY: `map` is `self.len` readable bytes until drop (the
            // memfd is sealed against shrinking, so reading never faults),
            // `from + len <= self.len` and `v` is as long.
            unsafe {
                std::ptr::copy_nonoverlapping(self.map.add(from), v.as_mut_ptr().add(from), len)
            };
        };
        copy(&mut v, 0, HEADER_BYTES);
        let (Some(raw), Ok(layout)) = (
            v.first_chunk::<HEADER_BYTES>().copied(),
            Layout::new(mode, self.len as u64),
        ) else {
            copy(&mut v, 0, self.len);
            return v;
        };
        let header = Header::read(&raw);
        let durable = header.durable_data_end.min(layout.durable) as usize;
        copy(&mut v, layout.durable_offset() as usize, durable);
        for i in 0..layout.rolling_count() {
            let used = header.rolling_data_end[i].min(layout.rolling[i]) as usize;
            copy(&mut v, layout.rolling_offset(i) as usize, used);
        }
        v
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.len) };
    }
}

/// A provider's part in the current session.
struct Trace {
    /// Unique among every trace of the registry.
    serial: u64,
    fifo: OwnedFd,
    buffer: Buffer,
    fwd: Forwarder,
    /// Watches the FIFO; aborted when the trace ends.
    watcher: tokio::task::AbortHandle,
    started: bool,
    stopped: bool,
    last_saved: Option<u32>,
    last_durable: u64,
    /// The buffer holds records not yet written to the output.
    unwritten: bool,
}

struct Provider {
    info: ProviderInfo,
    clock: ClockKind,
    ctl: OwnedFd,
    ctl_watcher: tokio::task::AbortHandle,
    trace: Option<Trace>,
    aborted: bool,
    gone: bool,
    /// Its place among the manager's connections, freed with it.
    _slot: Option<Slot>,
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.ctl_watcher.abort();
        if let Some(t) = &self.trace {
            t.watcher.abort();
        }
    }
}

/// Where the registry is in the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    Initialized,
    Started,
    Stopped,
}

/// The registered userspace providers, and their part in the session.
pub struct Registry {
    config: Option<UserspaceConfig>,
    providers: Vec<Provider>,
    notes_tx: mpsc::UnboundedSender<Note>,
    notes_rx: mpsc::UnboundedReceiver<Note>,
    phase: Phase,
    /// The last start's disposition and categories, for providers that
    /// register while tracing runs.
    start: (BufferDisposition, Vec<String>),
    next_id: u32,
    next_trace: u64,
    /// Alerts raised and not yet taken: (provider name, alert name).
    alerts: Vec<(String, String)>,
    /// Bytes of provider buffers given out in this session.
    granted: u64,
    /// The share of what they asked for that providers get this session
    /// (1 when everything fits).
    share: f64,
}

fn io(e: nix::Error) -> std::io::Error {
    std::io::Error::from_raw_os_error(e as i32)
}

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
        if self.providers.len() >= MAX_REGISTERED {
            log::warn!("provider {name} (pid {pid}) refused: {MAX_REGISTERED} are registered");
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

    /// Begins a session: every registered provider gets a buffer and
    /// Initialize.
    pub fn initialize_all(&mut self, config: UserspaceConfig) {
        let budget = config.budget;
        self.config = Some(config);
        self.granted = 0;
        let asked: u64 = self
            .providers
            .iter()
            .filter(|p| !p.gone && !p.aborted)
            .map(|p| self.buffer_bytes(&p.info.name))
            .sum();
        self.share = if asked > budget {
            let share = budget as f64 / asked as f64;
            log::warn!(
                "providers ask for {} of buffers, the session's memory budget leaves {}: each \
                 gets {:.0}% of what it asked for",
                mib(asked),
                mib(budget),
                share * 100.0
            );
            share
        } else {
            1.0
        };
        self.phase = Phase::Initialized;
        let mut providers = std::mem::take(&mut self.providers);
        for p in &mut providers {
            if !p.gone
                && !p.aborted
                && let Err(e) = self.initialize(p)
            {
                log::warn!("provider {}: could not initialize it: {e}", p.info.name);
            }
        }
        self.providers = providers;
    }

    /// Sends Start to every provider in the session (and, from now on, to
    /// those that register). After a stop that wrote the buffers, buffers
    /// are cleared whatever `disposition` says, so nothing is written
    /// twice.
    pub fn start_all(&mut self, disposition: BufferDisposition, additional: &[String]) {
        self.phase = Phase::Started;
        self.start = (disposition, additional.to_vec());
        for p in &mut self.providers {
            start_one(p, disposition, additional);
        }
    }

    /// Whether every provider in the session has answered the last start
    /// (or cannot any more).
    pub fn all_started(&self) -> bool {
        self.providers
            .iter()
            .all(|p| p.trace.as_ref().is_none_or(|t| t.started) || p.aborted || p.gone)
    }

    fn buffer_bytes(&self, name: &str) -> u64 {
        let Some(config) = &self.config else {
            return 1 << 20;
        };
        config
            .overrides
            .iter()
            .find(|(n, _)| n == name)
            .map_or(config.buffer_bytes, |(_, b)| *b)
    }

    fn initialize(&mut self, p: &mut Provider) -> std::io::Result<()> {
        let Some(config) = &self.config else {
            return Ok(());
        };
        let asked = self.buffer_bytes(&p.info.name);
        let left = config.budget.saturating_sub(self.granted);
        // Its share, in whole chunks, at least the minimum.
        let share = ((asked as f64 * self.share) as u64 & !(CHUNK_BYTES as u64 - 1))
            .clamp(MIN_PROVIDER_BUFFER.min(asked), asked);
        let len = if share <= left {
            if share < asked {
                log::info!(
                    "provider {} gets a buffer of {} instead of {} (session memory budget)",
                    p.info.name,
                    mib(share),
                    mib(asked)
                );
            }
            share
        } else if left >= MIN_PROVIDER_BUFFER {
            // What is left, in whole chunks.
            let len = left & !(CHUNK_BYTES as u64 - 1);
            log::warn!(
                "provider {} gets a buffer of {} instead of {}: the session's memory budget \
                 has {} left",
                p.info.name,
                mib(len),
                mib(asked),
                mib(left)
            );
            len
        } else {
            p.info.state = "left out: memory budget";
            return Err(std::io::Error::other(format!(
                "the session's memory budget has {} left, less than the {} a provider needs \
                 at least (trace-manager --session-memory-budget)",
                mib(left),
                mib(MIN_PROVIDER_BUFFER)
            )));
        };
        let memfd = nix::sys::memfd::memfd_create(
            c"trace-buffer",
            nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC
                | nix::sys::memfd::MemFdCreateFlag::MFD_ALLOW_SEALING,
        )
        .map_err(io)?;
        nix::unistd::ftruncate(&memfd, len as i64).map_err(io)?;
        // SAFETY: fcntl on a descriptor we own.
        let r = unsafe {
            libc::fcntl(
                memfd.as_raw_fd(),
                libc::F_ADD_SEALS,
                libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: mapping `len` bytes of a memfd of exactly that size that
        // can no longer shrink; read-only, owned by `Buffer`.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                libc::PROT_READ,
                libc::MAP_SHARED,
                memfd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let buffer = Buffer {
            map: map as *const u8,
            len: len as usize,
            _memfd: memfd,
        };
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        )
        .map_err(io)?;
        let categories = config
            .category_overrides
            .iter()
            .find(|(n, _)| *n == p.info.name)
            .map_or(&config.categories, |(_, c)| c);
        let init = ManagerMessage::Initialize {
            mode: config.mode,
            categories: categories.clone(),
        }
        .encode()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
        let fds = [buffer._memfd.as_raw_fd(), theirs.as_raw_fd()];
        sendmsg::<()>(
            p.ctl.as_raw_fd(),
            &[IoSlice::new(&init)],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
            None,
        )
        .map_err(io)?;
        let serial = self.next_trace;
        self.next_trace += 1;
        let watcher = self.watch_fifo(p.info.id, serial, &ours)?;
        let tsc_start = (p.clock == ClockKind::Tsc).then(collect::anchor);
        p.trace = Some(Trace {
            serial,
            fifo: ours,
            buffer,
            fwd: Forwarder::new(
                p.info.id,
                &p.info.name,
                u32::try_from(p.info.pid).unwrap_or(0),
                tsc_start,
            ),
            watcher,
            started: false,
            stopped: false,
            last_saved: None,
            last_durable: 0,
            unwritten: false,
        });
        self.granted += len;
        p.info.state = "initialized";
        Ok(())
    }

    /// Forwards hang-ups of the provider's control socket as notes.
    fn watch_ctl(&self, id: u32, ctl: &OwnedFd) -> tokio::task::AbortHandle {
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
    fn watch_fifo(
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
    pub fn handle<W: Write>(
        &mut self,
        note: Note,
        out: Option<&mut FxtStream<W>>,
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
                    if let Some(out) = out {
                        let snap = t.buffer.snapshot(BufferingMode::Streaming);
                        collect::collect(
                            out,
                            &mut t.fwd,
                            &snap,
                            BufferingMode::Streaming,
                            Rolling::Save {
                                wrapped: wrapped_count,
                                durable_end: durable_data_end,
                            },
                        )?;
                    }
                    t.last_saved = Some(wrapped_count);
                    t.last_durable = durable_data_end;
                    let reply = FromManager::BufferSaved {
                        wrapped_count,
                        durable_data_end,
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
                }
                Err(e) => abort(p, &e.to_string()),
            },
        }
        Ok(())
    }

    /// Sends Stop to every provider that runs; [`Registry::all_stopped`]
    /// says when they have confirmed.
    pub fn begin_stop(&mut self) {
        if self.phase != Phase::Started {
            return;
        }
        self.phase = Phase::Stopped;
        for p in &mut self.providers {
            if let Some(t) = p.trace.as_mut()
                && !p.aborted
                && !p.gone
            {
                t.stopped = false;
                t.unwritten = true;
                p.info.state = "stopping";
                let _ = send_ctl(p.ctl.as_raw_fd(), &ManagerMessage::Stop);
            }
        }
    }

    /// Whether every provider in the session confirmed the stop (or cannot
    /// any more).
    pub fn all_stopped(&self) -> bool {
        self.providers
            .iter()
            .all(|p| p.trace.as_ref().is_none_or(|t| t.stopped) || p.aborted || p.gone)
    }

    /// After a stop: with `write_results`, collects every buffer into
    /// `out`; returns each provider's numbers.
    pub fn finish_stop<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        write_results: bool,
    ) -> Result<Vec<ProviderStats>, UserspaceError> {
        if write_results {
            self.write_all(out)?;
        }
        Ok(self.stats())
    }

    /// Collects every buffer that holds records not yet written.
    fn write_all<W: Write>(&mut self, out: &mut FxtStream<W>) -> Result<(), UserspaceError> {
        let Some(mode) = self.config.as_ref().map(|c| c.mode) else {
            return Ok(());
        };
        for p in &mut self.providers {
            let Some(t) = p.trace.as_mut() else { continue };
            if !t.unwritten {
                continue;
            }
            t.unwritten = false;
            // Crashed and silent providers are collected too: the mapping
            // is ours.
            let snap = t.buffer.snapshot(mode);
            collect::collect(
                out,
                &mut t.fwd,
                &snap,
                mode,
                Rolling::Final {
                    last_saved: t.last_saved,
                },
            )?;
        }
        Ok(())
    }

    /// How each provider's buffer is doing now (from its header, which
    /// the provider updates as it writes).
    pub fn progress(&self) -> Vec<trace_common::controller::ProviderProgress> {
        use trace_common::provider::buffer::{HEADER_BYTES, Header};
        self.providers
            .iter()
            .filter_map(|p| {
                let t = p.trace.as_ref()?;
                let mut raw = [0u8; HEADER_BYTES];
                if t.buffer.len >= HEADER_BYTES {
                    // SAFETY: the mapping is `len` readable bytes, at least a
                    // header's; the memfd cannot shrink.
                    unsafe {
                        std::ptr::copy_nonoverlapping(t.buffer.map, raw.as_mut_ptr(), HEADER_BYTES)
                    };
                }
                let h = Header::read(&raw);
                let len = t.buffer.len as u64;
                let used = h
                    .durable_data_end
                    .min(len)
                    .saturating_add(h.rolling_data_end[0].min(len))
                    .saturating_add(h.rolling_data_end[1].min(len))
                    .min(len);
                Some(trace_common::controller::ProviderProgress {
                    name: p.info.name.clone(),
                    fill_permille: (used * 1000 / len.max(1)) as u16,
                    dropped: h.num_records_dropped,
                    bytes_written: t.fwd.stats.bytes,
                })
            })
            .collect()
    }

    /// Each provider's numbers in the session so far.
    pub fn stats(&self) -> Vec<ProviderStats> {
        self.providers
            .iter()
            .filter_map(|p| {
                let t = p.trace.as_ref()?;
                Some(ProviderStats {
                    id: p.info.id,
                    name: p.info.name.clone(),
                    pid: p.info.pid,
                    collect: t.fwd.stats.clone(),
                    started: t.started,
                    aborted: p.aborted || (p.gone && !t.stopped),
                })
            })
            .collect()
    }

    /// Ends the session after its last stop: writes what was not
    /// written, and terminates every provider's trace. Providers stay
    /// registered; those that went away are forgotten.
    pub fn terminate<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
    ) -> Result<Vec<ProviderStats>, UserspaceError> {
        let written = self.write_all(out);
        let stats = self.stats();
        self.end();
        written.map(|()| stats)
    }

    /// Ends the session without writing anything (the client went away).
    pub fn end(&mut self) {
        for p in &mut self.providers {
            if let Some(t) = p.trace.take() {
                t.watcher.abort();
                let _ = send_ctl(p.ctl.as_raw_fd(), &ManagerMessage::Terminate);
            }
            if !p.aborted && !p.gone {
                p.info.state = "registered";
            }
        }
        self.providers.retain(|p| !p.aborted && !p.gone);
        self.phase = Phase::Idle;
        self.config = None;
        self.alerts.clear();
    }
}

/// Sends Start to one provider in the session; clears what the manager
/// knows of its buffer when the provider clears it.
fn start_one(p: &mut Provider, disposition: BufferDisposition, additional: &[String]) {
    let Some(t) = p.trace.as_mut() else { return };
    if p.aborted || p.gone {
        return;
    }
    // What was written at the last stop must not be written again.
    let disposition = if t.unwritten {
        disposition
    } else {
        BufferDisposition::ClearEntire
    };
    match disposition {
        BufferDisposition::ClearEntire => {
            t.fwd.durable_forwarded = 0;
            t.last_saved = None;
            t.last_durable = 0;
        }
        BufferDisposition::ClearNondurable => t.last_saved = None,
        BufferDisposition::Retain => {}
    }
    t.started = false;
    t.stopped = false;
    t.unwritten = true;
    t.fwd.started(crate::clock::boottime_ns());
    p.info.state = "starting";
    if let Err(e) = send_ctl(
        p.ctl.as_raw_fd(),
        &ManagerMessage::Start {
            disposition,
            additional_categories: additional.to_vec(),
        },
    ) {
        log::warn!("provider {}: could not start it: {e}", p.info.name);
    }
}

fn abort(p: &mut Provider, why: &str) {
    log::warn!(
        "provider {} (pid {}) sent {why}; disconnecting it",
        p.info.name,
        p.info.pid
    );
    p.aborted = true;
    p.info.state = "aborted";
    if let Some(t) = &p.trace {
        t.watcher.abort();
    }
    let _ = nix::sys::socket::shutdown(p.ctl.as_raw_fd(), nix::sys::socket::Shutdown::Both);
}

fn send_ctl(fd: RawFd, m: &ManagerMessage) -> std::io::Result<()> {
    let bytes = m
        .encode()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    send(fd, &bytes, MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT).map_err(io)?;
    Ok(())
}
