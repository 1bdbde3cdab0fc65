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
use std::time::Duration;

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
use trace_common::provider::control::{MAX_MESSAGE_BYTES, ManagerMessage, ProviderMessage};
use trace_common::provider::fifo::{FromManager, FromProvider, PACKET_BYTES, Packet};
use trace_common::provider::{BufferDisposition, BufferingMode};

use crate::output::{FxtStream, OutputError};
pub use collect::CollectStats;
use collect::{Forwarder, Rolling};
pub use socket::Listener;

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

/// The registration socket path: `TRACE_MANAGER_SOCKET`, else the default.
pub fn socket_path() -> PathBuf {
    std::env::var_os(trace_common::provider::SOCKET_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(trace_common::provider::DEFAULT_SOCKET_PATH))
}

/// What to trace in userspace providers.
#[derive(Clone, Debug)]
pub struct UserspaceConfig {
    /// The registration socket.
    pub socket_path: PathBuf,
    /// Buffering mode of every provider.
    pub mode: BufferingMode,
    /// Buffer size of every provider, in bytes.
    pub buffer_bytes: u64,
    /// Buffer sizes of providers by name.
    pub overrides: Vec<(String, u64)>,
    /// Enabled categories (empty: all), as sent to providers.
    pub categories: Vec<String>,
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
}

/// A provider's final numbers.
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
    /// It violated the protocol and was disconnected.
    pub aborted: bool,
}

enum Note {
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
    /// A private copy of the buffer (the provider may be writing it).
    fn snapshot(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len];
        // SAFETY: `map` is `len` readable bytes until drop; the memfd is
        // sealed against shrinking, so reading never faults.
        unsafe { std::ptr::copy_nonoverlapping(self.map, v.as_mut_ptr(), self.len) };
        v
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.len) };
    }
}

struct Provider {
    info: ProviderInfo,
    ctl: OwnedFd,
    fifo: Option<OwnedFd>,
    buffer: Option<Buffer>,
    fwd: Forwarder,
    stopped: bool,
    aborted: bool,
    last_saved: Option<u32>,
    last_durable: u64,
}

/// The registry of providers of one recording.
pub struct Registry {
    listener: Listener,
    config: UserspaceConfig,
    providers: Vec<Provider>,
    notes_tx: mpsc::UnboundedSender<(usize, Note)>,
    notes_rx: mpsc::UnboundedReceiver<(usize, Note)>,
    tracing: bool,
    next_id: u32,
    /// Alerts raised and not yet taken: (provider name, alert name).
    alerts: Vec<(String, String)>,
}

fn io(e: nix::Error) -> std::io::Error {
    std::io::Error::from_raw_os_error(e as i32)
}

impl Registry {
    /// Opens the registration socket.
    pub fn bind(config: UserspaceConfig) -> Result<Registry, UserspaceError> {
        let listener = Listener::bind(&config.socket_path)?;
        let (notes_tx, notes_rx) = mpsc::unbounded_channel();
        Ok(Registry {
            listener,
            config,
            providers: Vec::new(),
            notes_tx,
            notes_rx,
            tracing: false,
            next_id: 2,
            alerts: Vec::new(),
        })
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

    /// Marks the trace as running: providers registered from now on are
    /// initialized and started at once.
    pub fn start_tracing(&mut self) {
        self.tracing = true;
    }

    /// Serves one thing: a new connection, a FIFO packet or a closed
    /// provider. Never fails because of what a provider sends.
    pub async fn serve_once<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
    ) -> Result<(), UserspaceError> {
        tokio::select! {
            conn = self.listener.accept() => {
                match conn {
                    Ok((fd, pid)) => self.register(fd, pid).await,
                    Err(e) => log::warn!("accepting a provider failed: {e}"),
                }
            }
            Some((i, note)) = self.notes_rx.recv() => self.handle(i, note, out)?,
        }
        Ok(())
    }

    async fn register(&mut self, fd: OwnedFd, pid: i32) {
        let Ok(afd) = async_fd(fd) else {
            return;
        };
        let mut buf = vec![0u8; MAX_MESSAGE_BYTES];
        let read = tokio::time::timeout(Duration::from_secs(1), async {
            loop {
                let mut g = afd.readable().await?;
                match g.try_io(|a| {
                    recv(a.get_ref().as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT).map_err(io)
                }) {
                    Ok(r) => return r,
                    Err(_would_block) => continue,
                }
            }
        })
        .await;
        let fd = afd.into_inner();
        let n = match read {
            Ok(Ok(n)) => n,
            _ => {
                log::warn!("provider pid {pid} did not register in time; closing");
                return;
            }
        };
        let (name, clock) = match ProviderMessage::decode(&buf[..n]) {
            Ok(ProviderMessage::Register { name, clock, .. }) => (name, clock),
            Err(e) => {
                log::warn!("provider pid {pid}: {e}; closing its connection");
                return;
            }
        };
        let id = self.next_id;
        self.next_id += 1;
        let reply = ManagerMessage::Registered {
            provider_id: id,
            tracing_started: self.tracing,
        };
        if let Ok(bytes) = reply.encode() {
            let _ = send(
                fd.as_raw_fd(),
                &bytes,
                MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
            );
        }
        log::info!("provider {name} (pid {pid}) registered as {id}");
        let tsc_start = (clock == ClockKind::Tsc).then(collect::anchor);
        let mut p = Provider {
            info: ProviderInfo {
                id,
                name: name.clone(),
                pid,
                state: "registered",
            },
            ctl: fd,
            fifo: None,
            buffer: None,
            fwd: Forwarder::new(id, &name, tsc_start),
            stopped: false,
            aborted: false,
            last_saved: None,
            last_durable: 0,
        };
        if self.tracing
            && let Err(e) = self.initialize(&mut p)
        {
            log::warn!("provider {name}: could not start it: {e}");
        }
        let index = self.providers.len();
        self.watch(index, &p);
        self.providers.push(p);
    }

    fn buffer_bytes(&self, name: &str) -> u64 {
        self.config
            .overrides
            .iter()
            .find(|(n, _)| n == name)
            .map_or(self.config.buffer_bytes, |(_, b)| *b)
    }

    fn initialize(&self, p: &mut Provider) -> std::io::Result<()> {
        let len = self.buffer_bytes(&p.info.name);
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
        let init = ManagerMessage::Initialize {
            mode: self.config.mode,
            categories: self.config.categories.clone(),
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
        send_ctl(
            p.ctl.as_raw_fd(),
            &ManagerMessage::Start {
                disposition: BufferDisposition::ClearEntire,
                additional_categories: Vec::new(),
            },
        )?;
        p.fifo = Some(ours);
        p.buffer = Some(buffer);
        p.info.state = "starting";
        Ok(())
    }

    /// Forwards the provider's FIFO packets and hang-ups to the registry.
    fn watch(&self, index: usize, p: &Provider) {
        let tx = self.notes_tx.clone();
        let ctl = p.ctl.try_clone().ok();
        let fifo = p.fifo.as_ref().and_then(|f| f.try_clone().ok());
        tokio::spawn(async move {
            let Some(ctl) = ctl.and_then(|c| async_fd(c).ok()) else {
                return;
            };
            let fifo = fifo.and_then(|f| async_fd(f).ok());
            let mut scratch = vec![0u8; MAX_MESSAGE_BYTES];
            loop {
                tokio::select! {
                    g = ctl.readable() => {
                        let Ok(mut g) = g else { break };
                        match recv(ctl.get_ref().as_raw_fd(), &mut scratch, MsgFlags::MSG_DONTWAIT) {
                            Ok(0) => break,
                            Ok(_) => {} // providers send nothing after registering
                            Err(nix::Error::EAGAIN) => g.clear_ready(),
                            Err(_) => break,
                        }
                    }
                    g = async { match &fifo { Some(f) => f.readable().await, None => std::future::pending().await } } => {
                        let Ok(mut g) = g else { break };
                        let f = fifo.as_ref().map_or(-1, |f| f.get_ref().as_raw_fd());
                        let mut b = [0u8; PACKET_BYTES];
                        match recv(f, &mut b, MsgFlags::MSG_DONTWAIT) {
                            Ok(PACKET_BYTES) => { let _ = tx.send((index, Note::Packet(Packet::from_bytes(&b)))); }
                            Ok(0) => break,
                            Ok(_) => { let _ = tx.send((index, Note::Packet(Packet::default()))); }
                            Err(nix::Error::EAGAIN) => g.clear_ready(),
                            Err(_) => break,
                        }
                    }
                }
            }
            let _ = tx.send((index, Note::Closed));
        });
    }

    fn handle<W: Write>(
        &mut self,
        i: usize,
        note: Note,
        out: &mut FxtStream<W>,
    ) -> Result<(), UserspaceError> {
        let mode = self.config.mode;
        let Some(p) = self.providers.get_mut(i) else {
            return Ok(());
        };
        if p.aborted {
            return Ok(());
        }
        match note {
            Note::Closed => {
                p.info.state = "disconnected";
            }
            Note::Packet(packet) => match FromProvider::parse(&packet) {
                Ok(FromProvider::Started { .. }) => p.info.state = "started",
                Ok(FromProvider::Stopped) => {
                    p.stopped = true;
                    p.info.state = "stopped";
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
                    if mode != BufferingMode::Streaming {
                        log::warn!(
                            "provider {} asked for a save outside streaming mode",
                            p.info.name
                        );
                        return Ok(());
                    }
                    let expected = p.last_saved.map_or(0, |n| n.wrapping_add(1));
                    let dlimit = p.buffer.as_ref().and_then(|b| {
                        trace_common::provider::buffer::Layout::new(mode, b.len as u64).ok()
                    });
                    let ok = wrapped_count == expected
                        && durable_data_end.is_multiple_of(8)
                        && durable_data_end >= 16
                        && dlimit.is_some_and(|l| durable_data_end <= l.durable)
                        && durable_data_end >= p.last_durable;
                    if !ok {
                        abort(p, "an out-of-order save request");
                        return Ok(());
                    }
                    if let Some(b) = &p.buffer {
                        let snap = b.snapshot();
                        collect::collect(
                            out,
                            &mut p.fwd,
                            &snap,
                            mode,
                            Rolling::Save {
                                wrapped: wrapped_count,
                                durable_end: durable_data_end,
                            },
                        )?;
                    }
                    p.last_saved = Some(wrapped_count);
                    p.last_durable = durable_data_end;
                    let reply = FromManager::BufferSaved {
                        wrapped_count,
                        durable_data_end,
                    }
                    .to_packet()
                    .to_bytes();
                    let fifo = p.fifo.as_ref().map_or(-1, |f| f.as_raw_fd());
                    if send(
                        fifo,
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

    /// Stops every provider, waits up to `timeout` for them to confirm,
    /// collects every buffer into `out` and terminates the providers.
    pub async fn finish<W: Write>(
        mut self,
        out: &mut FxtStream<W>,
        timeout: Duration,
    ) -> Result<Vec<ProviderStats>, UserspaceError> {
        for p in &mut self.providers {
            if p.buffer.is_some() && !p.aborted {
                let _ = send_ctl(p.ctl.as_raw_fd(), &ManagerMessage::Stop);
            }
        }
        let deadline = tokio::time::Instant::now() + timeout;
        while self.providers.iter().any(|p| {
            p.buffer.is_some() && !p.stopped && !p.aborted && p.info.state != "disconnected"
        }) {
            match tokio::time::timeout_at(deadline, self.notes_rx.recv()).await {
                Ok(Some((i, note))) => self.handle(i, note, out)?,
                _ => break,
            }
        }
        let mode = self.config.mode;
        let mut stats = Vec::new();
        for p in &mut self.providers {
            if let Some(b) = &p.buffer {
                // Crashed and silent providers are collected too: the mapping
                // is ours.
                let snap = b.snapshot();
                collect::collect(
                    out,
                    &mut p.fwd,
                    &snap,
                    mode,
                    Rolling::Final {
                        last_saved: p.last_saved,
                    },
                )?;
                let _ = send_ctl(p.ctl.as_raw_fd(), &ManagerMessage::Terminate);
            }
            stats.push(ProviderStats {
                id: p.info.id,
                name: p.info.name.clone(),
                pid: p.info.pid,
                collect: p.fwd.stats.clone(),
                aborted: p.aborted,
            });
        }
        Ok(stats)
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
    p.fifo = None;
    let _ = nix::sys::socket::shutdown(p.ctl.as_raw_fd(), nix::sys::socket::Shutdown::Both);
}

fn send_ctl(fd: RawFd, m: &ManagerMessage) -> std::io::Result<()> {
    let bytes = m
        .encode()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    send(fd, &bytes, MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT).map_err(io)?;
    Ok(())
}
